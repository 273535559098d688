"""The DaCe bug ``gt4py_halo.compiled.dace_fixes`` works around, reproduced."""

from __future__ import annotations

import dace
import sympy
from dace import symbolic

import gt4py_halo.compiled  # noqa: F401  (applies the fix)


def test_sums_with_equal_typed_constants_can_be_built() -> None:
    # what DaCe's range typing builds for an arena length such as s2*(s0 - 3) + s2*(s1 - 3)
    s0, s1, s2 = (dace.symbol(n) for n in ("s0", "s1", "s2"))
    three = [symbolic.TypedConstant(-3, dace.int32) for _ in range(2)]
    total = s2 * (s0 + three[0]) + s2 * (s1 + three[1])
    assert isinstance(total, sympy.Add) and len(total.args) == 2
    assert three[0] == three[1]
    assert symbolic.TypedConstant(-3, dace.int64) != three[0]
