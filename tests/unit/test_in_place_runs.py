"""How a box of a field is cut into contiguous runs (``sdfg/in_place.py``), and which stride
symbols of a step's array arguments are known to be products of sizes
(``program.dense_strides``), so that the cut can be made symbolically."""

from __future__ import annotations

import dace
import numpy as np

from gt4py_halo.sdfg.in_place import box_runs
from gt4py_halo.sdfg.program import _layout_symbols, _symbolic_descriptor, dense_strides

HALO = 3


def descriptor(array: np.ndarray):
    """The step's descriptor of ``array``, and which of its stride symbols are dense."""
    (layout,) = _layout_symbols([array])
    return _symbolic_descriptor(array, layout, "cpu"), dense_strides([layout])


def face(described, axis: int):
    """The send box of the low face across ``axis``, as the MPI expansion writes it: halo
    layers across it, the owned cells of the other decomposed axes (0, 1), axis 2 whole."""
    desc, dense = described
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
    return box_runs(desc, starts, extents, dense)


def values(expr, array: np.ndarray) -> int:
    shapes = {f"__shape0_{k}": n for k, n in enumerate(array.shape)}
    return int(dace.symbolic.evaluate(expr, shapes))


def test_c_ordered_face_is_one_run_per_layer() -> None:
    array = np.zeros((70, 134, 80))
    desc, dense = descriptor(array)
    assert desc.strides[2] == 1 and dense == {
        "__strides0_0": "__shape0_2*__shape0_1",  # inner dims first
        "__strides0_1": "__shape0_2",
    }
    runs = face((desc, dense), axis=0)
    assert values(runs.length, array) == 128 * 80  # owned rows of all levels, contiguous
    assert values(runs.count, array) == HALO
    # across the inner decomposed axis: one run of HALO rows per owned row of axis 0
    runs = face((desc, dense), axis=1)
    assert values(runs.length, array) == HALO * 80 and values(runs.count, array) == 64


def test_fortran_ordered_face_runs_along_axis_0() -> None:
    array = np.zeros((70, 134, 80), order="F")
    runs = face(descriptor(array), axis=1)
    assert values(runs.length, array) == 64  # the owned part of axis 0: axis 1 is not whole
    assert values(runs.count, array) == HALO * 80


def test_padded_rows_are_not_merged() -> None:
    """A view into wider rows: the stride across them is a symbol of its own, so a box that
    covers the rows whole is still one run per row."""
    array = np.zeros((70, 134, 88))[:, :, :80]
    desc, dense = descriptor(array)
    assert dense == {}  # rows of 88 elements, 80 in the view: no stride is a product of sizes
    runs = face((desc, dense), axis=0)
    assert values(runs.length, array) == 80 and values(runs.count, array) == HALO * 128


def test_dense_strides_are_products_of_sizes_in_any_order() -> None:
    array = np.zeros((5, 6, 7)).transpose(1, 2, 0)  # strides (7, 1, 42) elements
    desc, dense = descriptor(array)
    assert desc.strides[1] == 1
    assert dense == {"__strides0_0": "__shape0_1", "__strides0_2": "__shape0_1*__shape0_0"}
