"""The one compiled module, ``gt4py_halo._native`` (its C source says what it holds and why).
Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("gt4py_halo._native", ["src/gt4py_halo/_native.c"])])
