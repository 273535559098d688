"""A fix for a bug of the DaCe version gt4py 1.2.3 pins (2.0.0a10), applied on import.

DaCe types a map's range by replacing the integer literals of its bounds with
``symbolic.TypedConstant``s, whose sympy identity (``_hashable_content``) holds their dtype, a
``typeclass``. When sympy sorts the terms of a sum in which two such constants are equal (an
arena's length, ``s2*(s0 - 3) + s2*(s1 - 3)``), it compares the dtypes with ``<`` and
``typeclass`` has no order: a ``TypeError`` while the SDFG is serialized or compiled. Whether
a sort reaches that comparison depends on the symbols' names, so it struck at random
(one test passed alone and failed after another). Here a constant's identity holds its dtype's
name instead: equal for equal dtypes, as before, and ordered.
"""

from __future__ import annotations

from dace import symbolic


def _hashable_content(self: symbolic.TypedConstant) -> tuple:
    return (self.value, self.dtype.to_string())


symbolic.TypedConstant._hashable_content = _hashable_content
