"""Cartesian halos hold exactly the owners' values: periodic wrap, corners, open boundaries."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from halo_reference import SENTINEL, expected_local, filled_local

import gt4py_halo as gh

BACKENDS = ["mpi", "ghex"]

# (global_shape, halo, periodic, level_shape, dtype, memory order); shapes do not divide
# evenly over 2, 3 or 4 ranks, and every block stays at least as wide as its halo.
CASES = {
    "2d-periodic": ((13, 11), 1, True, (), np.float64, "C"),
    "2d-mixed-asymmetric": ((17, 9), ((1, 2), (0, 1)), (True, False), (), np.int32, "C"),
    "2d-open-wide": ((19, 14), 2, False, (), np.float32, "C"),
    "3d-levels-fortran": ((11, 9, 5), (2, 1, 0), True, (4,), np.int64, "F"),
    "3d-all-dims": ((10, 9, 8), 1, (False, True, True), (), np.float64, "C"),
    "1d-levels": ((23,), 2, True, (3,), np.float32, "C"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_halo_holds_owner_values(backend, case):
    global_shape, halo, periodic, levels, dtype, order = CASES[case]
    d = gh.CartesianDecomposition(global_shape, halo=halo, periodic=periodic)
    ex = gh.make_exchange(d, backend=backend)
    assert ex.backend == backend
    field = filled_local(d, levels, dtype, order)
    ex.exchange(field)
    np.testing.assert_array_equal(field, expected_local(d, levels, dtype))


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_fields_of_mixed_types_in_one_call(backend):
    d = gh.CartesianDecomposition((14, 10, 6), halo=(1, 2, 0), periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    specs = [((), np.float64, "C"), ((3,), np.int32, "F"), ((2,), np.float32, "C")]
    fields = [filled_local(d, levels, dtype, order) for levels, dtype, order in specs]
    ex.exchange(*fields)
    for field, (levels, dtype, _) in zip(fields, specs):
        np.testing.assert_array_equal(field, expected_local(d, levels, dtype))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gt4py_fields_are_exchanged_in_place(backend):
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    I, J = gtx.Dimension("I"), gtx.Dimension("J")
    field = gtx.as_field([I, J], filled_local(d, (), np.float64))
    ex.exchange(field)
    np.testing.assert_array_equal(field.asnumpy(), expected_local(d, (), np.float64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_phase_equals_blocking(backend):
    d = gh.CartesianDecomposition((15, 13), halo=2, periodic=(True, False))
    ex = gh.make_exchange(d, backend=backend)
    rng = np.random.default_rng(d.rank)
    blocking = [rng.random(d.allocated_shape) for _ in range(3)]
    split = [f.copy() for f in blocking]
    for f in blocking:
        ex.exchange(f)
    handles = [ex.start(f) for f in split]  # three exchanges in flight at once
    for h in reversed(handles):
        h.finish()
        assert h.is_ready()
    for b, s in zip(blocking, split):
        np.testing.assert_array_equal(b, s)


def test_backends_fill_identical_halos():
    d = gh.CartesianDecomposition((16, 11, 7), halo=((1, 2), (2, 1), (1, 1)), periodic=True)
    rng = np.random.default_rng(100 + d.rank)
    original = rng.random(d.allocated_shape + (2,))
    by_backend = {}
    for backend in BACKENDS:
        field = original.copy()
        gh.make_exchange(d, backend=backend).exchange(field)
        by_backend[backend] = field
    np.testing.assert_array_equal(by_backend["mpi"], by_backend["ghex"])
    assert not np.array_equal(by_backend["mpi"], original)  # halos were written


def test_concurrent_exchanges_of_two_decompositions_do_not_mix():
    """Same shapes, different data, interleaved: tags and communicators keep them apart."""
    a = gh.CartesianDecomposition((12, 12), halo=1, periodic=True)
    b = gh.CartesianDecomposition((12, 12), halo=1, periodic=True)
    ua = filled_local(a, (), np.float64)
    ub = filled_local(b, (), np.float64) + 0.5
    ub[ub == SENTINEL + 0.5] = SENTINEL
    ha = gh.make_exchange(a).start(ua)
    hb = gh.make_exchange(b).start(ub)
    hb.finish()
    ha.finish()
    expected = expected_local(a, (), np.float64)
    np.testing.assert_array_equal(ua, expected)
    np.testing.assert_array_equal(ub, np.where(expected == SENTINEL, SENTINEL, expected + 0.5))


def test_memory_stays_flat_over_many_exchanges():
    import tracemalloc

    d = gh.CartesianDecomposition((32, 32, 8), halo=(1, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend="mpi")
    field = filled_local(d, (), np.float64)
    tracemalloc.start()
    for _ in range(3000):  # warm-up: interpreter and NumPy caches fill within ~2000 calls
        ex.exchange(field)
    before, _ = tracemalloc.get_traced_memory()
    for _ in range(10_000):
        ex.exchange(field)
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert after - before < 16 * 1024, f"memory grew by {after - before} bytes"
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_alternating_field_sets_of_one_signature(backend):
    """Copies bound to one call's fields must be rebound, not reused, for other fields."""
    d = gh.CartesianDecomposition((13, 12, 3), halo=(2, 1, 0), periodic=(True, False, False))
    ex = gh.make_exchange(d, backend=backend)
    expected = expected_local(d, (2,), np.int64)
    for _ in range(3):
        first, second = (filled_local(d, (2,), np.int64) for _ in range(2))
        ex.exchange(first)
        ex.exchange(second)
        ex.exchange(first)
        np.testing.assert_array_equal(first, expected)
        np.testing.assert_array_equal(second, expected)
