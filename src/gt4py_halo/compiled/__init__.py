"""Halo exchanges as DaCe graph nodes, and programs that compile a whole model step."""

from gt4py_halo.compiled import dace_fixes  # noqa: F401  (before any SDFG is built)
