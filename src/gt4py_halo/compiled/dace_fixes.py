"""Fixes for the DaCe version gt4py 1.2.3 pins (2.0.0a10), applied on import.

A bug: DaCe types a map's range by replacing the integer literals of its bounds with
``symbolic.TypedConstant``s, whose sympy identity (``_hashable_content``) holds their dtype, a
``typeclass``. When sympy sorts the terms of a sum in which two such constants are equal (an
arena's length, ``s2*(s0 - 3) + s2*(s1 - 3)``), it compares the dtypes with ``<`` and
``typeclass`` has no order: a ``TypeError`` while the SDFG is serialized or compiled. Whether
a sort reaches that comparison depends on the symbols' names, so it struck at random
(one test passed alone and failed after another). Here a constant's identity holds its dtype's
name instead: equal for equal dtypes, as before, and ordered.

A cost: renaming symbols (``SDFG.replace_dict``) gives each map's range every name of the
renaming (``Range.replace``), and SymPy's ``subs`` sorts all the pairs it is given at every
call, present in the bound or not: renaming an exchange's nested SDFG to its shared names
(``shared_functions.py``, dozens of names) spent most of its time there. Here each bound gets
only the pairs that can change it: keys that are no symbol, and symbols of a name the bound
holds (DaCe's symbols match by name in ``subs``). The result is the same.
"""

from __future__ import annotations

from typing import Any

import sympy
from dace import subsets, symbolic


def _hashable_content(self: symbolic.TypedConstant) -> tuple:
    return (self.value, self.dtype.to_string())


def _replaced(bound: Any, renaming: dict) -> Any:
    """``bound`` after ``subs(renaming)``, given only the pairs that can change it."""
    if not symbolic.issymbolic(bound):
        return bound
    if not isinstance(bound, sympy.Basic):  # (a SymExpr: as DaCe does)
        return bound.subs(renaming)
    names = {s.name for s in bound.free_symbols}
    pairs = {
        k: v for k, v in renaming.items() if not isinstance(k, sympy.Symbol) or k.name in names
    }
    return bound.subs(pairs) if pairs else bound


def _replace(self: subsets.Range, repl_dict: dict) -> None:
    for i, ((rb, re, rs), ts) in enumerate(zip(self.ranges, self.tile_sizes)):
        self.ranges[i] = tuple(_replaced(b, repl_dict) for b in (rb, re, rs))
        self.tile_sizes[i] = _replaced(ts, repl_dict)


symbolic.TypedConstant._hashable_content = _hashable_content
subsets.Range.replace = _replace
