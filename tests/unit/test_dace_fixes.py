"""The DaCe bug ``gt4py_halo.compiled.dace_fixes`` works around, reproduced."""

from __future__ import annotations

import dace
import sympy
from dace import subsets, symbolic

import gt4py_halo.compiled  # noqa: F401  (applies the fix)


def test_sums_with_equal_typed_constants_can_be_built() -> None:
    # what DaCe's range typing builds for an arena length such as s2*(s0 - 3) + s2*(s1 - 3)
    s0, s1, s2 = (dace.symbol(n) for n in ("s0", "s1", "s2"))
    three = [symbolic.TypedConstant(-3, dace.int32) for _ in range(2)]
    total = s2 * (s0 + three[0]) + s2 * (s1 + three[1])
    assert isinstance(total, sympy.Add) and len(total.args) == 2
    assert three[0] == three[1]
    assert symbolic.TypedConstant(-3, dace.int64) != three[0]


def test_a_range_renamed_as_subs_of_every_pair_renames_it() -> None:
    """``Range.replace`` given only the pairs that can change each bound: the bounds ``subs``
    of the whole renaming gives, DaCe's symbols matched by name (another dtype), a key that
    is an expression kept."""
    n, m = dace.symbol("N", dace.int32), dace.symbol("M")
    ranges = [(0, n - 1, 1), (m, 2 * m + n, 2), (3, 7, 1)]
    renaming = {dace.symbol(f"x{i}"): dace.symbol(f"y{i}") for i in range(40)}
    renaming[dace.symbol("N")] = dace.symbol("gh_s0")  # int64: matches the int32 N by name
    renaming[2 * m] = dace.symbol("two_m")
    expected = [
        tuple(b.subs(renaming) if symbolic.issymbolic(b) else b for b in bounds)
        for bounds in ranges
    ]
    renamed = subsets.Range(ranges)
    renamed.replace(renaming)
    assert renamed.ranges == expected
    assert str(renamed.ranges[0][1]) == "gh_s0 - 1"
    assert "two_m" in str(renamed.ranges[1][1])
