"""Map loops ordered by the memory they walk (``compiled/iteration_order.py``): on a CPU, a
step's maps run innermost along the unit-stride axis of their arrays, as the step's build
knows them; maps that accumulate keep their order (their sums are bit for bit the same)."""

from __future__ import annotations

import dace
import numpy as np
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo.compiled.iteration_order import order_maps_by_strides


def map_params(sdfg: dace.SDFG) -> list[list[str]]:
    return [
        list(node.map.params)
        for node, _ in sdfg.all_nodes_recursive()
        if isinstance(node, dace.nodes.MapEntry)
    ]


@gh.program(comm=MPI.COMM_SELF)
def shift(a, b):
    b[1:-1, 1:-1] = a[2:, 1:-1] - a[1:-1, :-2]


def test_a_step_on_column_major_fields_loops_innermost_along_their_first_axis():
    a = np.asfortranarray(np.arange(7 * 9, dtype=np.float64).reshape(7, 9) % 5)
    b = np.asfortranarray(np.zeros((7, 9)))
    (params,) = map_params(shift.to_sdfg(a, b))
    assert params[-1] == "__i0", params  # axis 0 has unit stride
    shift(a, b)
    expected = np.zeros((7, 9))
    expected[1:-1, 1:-1] = a[2:, 1:-1] - a[1:-1, :-2]
    np.testing.assert_array_equal(b, expected)


def test_a_step_on_row_major_fields_keeps_its_order():
    a, b = np.ones((7, 9)), np.zeros((7, 9))
    (params,) = map_params(shift.to_sdfg(a, b))
    assert params[-1] == "__i1", params


def test_a_map_that_accumulates_keeps_its_order():
    @dace.program
    def total(a, s):
        for i, j in dace.map[0:7, 0:9]:
            s[0] += a[i, j]

    # column-major: the innermost loop would go along axis 0, but for the sums' order
    sdfg = total.to_sdfg(np.asfortranarray(np.ones((7, 9))), np.zeros(1))
    before = map_params(sdfg)
    assert order_maps_by_strides(sdfg) == 0
    assert map_params(sdfg) == before
