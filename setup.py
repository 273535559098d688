"""The one compiled module: block copies of the runtime exchange of host fields (its C source
says why). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("gt4py_halo.runtime._copies", ["src/gt4py_halo/runtime/_copies.c"])])
