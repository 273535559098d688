"""How a box of a field is cut into contiguous runs (``compiled/in_place.py``): from the step's
symbolic descriptor alone, as if the field were dense, with the density the cut assumes left
to a run-time test, so that ranks with padded and unpadded blocks generate the same code."""

from __future__ import annotations

import dace
import numpy as np
from dace.sdfg.state import ConditionalBlock

from gt4py_halo.compiled.in_place import box_runs
from gt4py_halo.compiled.last_call import element_strides
from gt4py_halo.compiled.program import _arrays_described, _layouts_of, _symbolic_descriptor
from gt4py_halo.decomposition.cartesian import wrapped_box

HALO = 3


def descriptor(array: np.ndarray):
    (layout,) = _layouts_of([_arrays_described([array])])
    return _symbolic_descriptor(array, layout, "cpu")


def face(desc, axis: int):
    """The send box of the low face across ``axis``, as the MPI expansion writes it: halo
    layers across it, the owned cells of the other decomposed axes (0, 1), axis 2 whole."""
    starts, extents = [], []
    for d, n in enumerate(desc.shape):
        if d == axis:
            starts.append(HALO)
            extents.append(HALO)
        elif d < 2:
            starts.append(HALO)
            extents.append(n - 2 * HALO)
        else:
            starts.append(0)
            extents.append(n)
    return box_runs(desc, starts, extents)


def symbols(array: np.ndarray) -> dict[str, int]:
    values = {f"__shape0_{k}": n for k, n in enumerate(array.shape)}
    values.update({f"__strides0_{k}": n for k, n in enumerate(element_strides(array))})
    return values


def values(expr, array: np.ndarray) -> int:
    return int(dace.symbolic.evaluate(expr, symbols(array)))


def dense(runs, array: np.ndarray) -> bool:
    return bool(eval(runs.dense_condition(cpp=False), {}, symbols(array)))


def test_c_ordered_face_is_one_run_per_layer() -> None:
    array = np.zeros((70, 134, 80))
    desc = descriptor(array)
    assert desc.strides[2] == 1
    runs = face(desc, axis=0)
    assert values(runs.length, array) == 128 * 80  # owned rows of all levels, contiguous
    assert values(runs.count, array) == HALO
    assert dense(runs, array)
    # across the inner decomposed axis: one run of HALO rows per owned row of axis 0
    runs = face(desc, axis=1)
    assert values(runs.length, array) == HALO * 80 and values(runs.count, array) == 64


def test_padded_rows_cut_alike_and_found_not_dense() -> None:
    """A field with wider rows (GT4Py pads some blocks) is cut into the same runs as a dense
    one, the wire format both neighbours agree on, and its run-time test says the runs are
    not in the field: the rank moves them through its arena."""
    padded = np.zeros((70, 134, 88))[:, :, :80]
    plain = np.zeros((70, 134, 80))
    runs, plain_runs = face(descriptor(padded), axis=0), face(descriptor(plain), axis=0)
    assert str(runs.length) == str(plain_runs.length) and str(runs.count) == str(plain_runs.count)
    assert values(runs.length, padded) == 128 * 80 and values(runs.count, padded) == HALO
    assert not dense(runs, padded) and dense(plain_runs, plain)


def test_packed_runs_are_the_segment_back_to_back() -> None:
    array = np.zeros((70, 134, 80))
    runs = face(descriptor(array), axis=1).packed(first=7)
    length, count = values(runs.length, array), values(runs.count, array)
    ((extent, stride),) = runs.outer
    assert values(runs.first, array) == 7 and values(stride, array) == length == HALO * 80
    assert values(extent, array) == count == 64


def test_fortran_ordered_fields_are_not_cut() -> None:
    """Runs are C-ordered, as the arena segments are: other layouts are always packed."""
    assert face(descriptor(np.zeros((70, 134, 80), order="F")), axis=1) is None


def test_faces_across_an_axis_that_wraps_are_whole_planes() -> None:
    """A face across axis 0 widened across the halo of axis 1 where axis 1 wraps onto the
    rank (``cartesian.wrapped_box``, its wrap symbol 1 at run time): one run of HALO whole planes
    per field; where it does not (0), the owned rows as before. Where axis 1 is padded, the
    planes are not dense in the field (the rank packs them), the rows still are."""
    wrap = dace.symbol("w1", dace.int64)

    def wrapped_face(desc):
        owned = [n - 2 * HALO for n in desc.shape[:2]]
        halo = ((HALO, HALO), (HALO, HALO))
        bounds = wrapped_box(owned, halo, (-1, 0), True, [0, wrap])
        starts = [a for a, _ in bounds] + [0]
        extents = [b - a for a, b in bounds] + [desc.shape[2]]
        return box_runs(desc, starts, extents, {"w1"})

    plain, padded = np.zeros((70, 134, 80)), np.zeros((70, 140, 80))[:, :134]
    for array, planes_dense in ((plain, True), (padded, False)):
        runs = wrapped_face(descriptor(array))
        for w, length, count, first in ((1, HALO * 134 * 80, 1, 0), (0, 128 * 80, HALO, HALO)):
            at = {**symbols(array), "w1": w}
            assert int(dace.symbolic.evaluate(runs.length, at)) == length
            assert int(dace.symbolic.evaluate(runs.count, at)) == count
            row = element_strides(array)[0]
            assert int(dace.symbolic.evaluate(runs.first, at)) == HALO * row + first * 80
            assert bool(eval(runs.dense_condition(cpp=False), {}, at)) == (planes_dense or w == 0)


def test_copy_map_branches_read_flags_not_the_tests() -> None:
    """The tests of which directions go in place are made once per call, in C++, into the
    exchange's flags (``ArenaLowering._add_flags``): the branches around the copy maps read
    one flag each. As branch conditions the tests (thousands of characters for a few fields)
    cost DaCe a SymPy parse at every pass over the step."""
    import gt4py_halo as gh

    d = gh.CartesianDecomposition((40, 12, 10), halo=HALO, periodic=True)
    ex = gh.make_exchange(d, "mpi")

    @gh.program
    def step(a, b, c):
        ex.exchange(a, b, c)

    a = np.zeros(d.allocated_shape)
    sdfg = step.to_sdfg(a, a.copy(), a.copy())
    conditions = [
        condition.as_string
        for block in sdfg.all_control_flow_regions(recursive=True)
        if isinstance(block, ConditionalBlock)
        for condition, _ in block.branches
        if condition is not None
    ]
    assert any("_flags[" in c for c in conditions), conditions
    assert max(len(c) for c in conditions) < 120, max(conditions, key=len)
