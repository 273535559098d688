"""Cartesian halos hold exactly the owners' values: periodic wrap, corners, open boundaries."""

from __future__ import annotations

import gc
import weakref

import gt4py.next as gtx
import numpy as np
import pytest
from conftest import at_most_ranks
from halo_reference import SENTINEL, expected_local, filled_local, finish_out_of_order, gpu_or_skip

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
def test_fields_without_cells_move_nothing(backend):
    """A field with a level axis of length 0 holds no cells: an exchange of it alone moves
    nothing, and beside another field leaves that one's halos exact."""
    d = gh.CartesianDecomposition((13, 11), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    ex.exchange(np.zeros((*d.allocated_shape, 0)))
    field = filled_local(d, (), np.float64)
    ex.exchange(np.zeros((*d.allocated_shape, 2, 0)), field)
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


class _Subclass(np.ndarray):
    """A user's ndarray subclass, defined outside NumPy."""


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_ndarray_subclass_beside_a_plain_array(backend):
    """Subclasses of NumPy's ndarray are host arrays like the others: one call exchanges
    them together (before, their module counted as another array library)."""
    d = gh.CartesianDecomposition((13, 11), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    plain = filled_local(d, (), np.float64)
    sub = filled_local(d, (2,), np.float32).view(_Subclass)
    ex.exchange(plain, sub)
    np.testing.assert_array_equal(plain, expected_local(d, (), np.float64))
    np.testing.assert_array_equal(sub, expected_local(d, (2,), np.float32))


def test_ghex_context_is_made_quietly(capfd):
    """oomph writes "MPI thread safety is higher than required" on rank 0 whenever MPI runs
    above MPI_THREAD_SINGLE (mpi4py's default): held back; the exchange still works."""
    from mpi4py import MPI

    assert MPI.Query_thread() > MPI.THREAD_SINGLE  # where oomph would say it
    d = gh.CartesianDecomposition((13, 11), halo=1, periodic=True)
    field = filled_local(d, (), np.float64, "C")
    gh.make_exchange(d, backend="ghex").exchange(field)
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))
    assert "oomph" not in capfd.readouterr().err


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_fields_of_mixed_types_in_one_call(backend):
    d = gh.CartesianDecomposition((14, 10, 6), halo=(1, 2, 0), periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    specs = [((), np.float64, "C"), ((3,), np.int32, "F"), ((2,), np.float32, "C")]
    fields = [filled_local(d, levels, dtype, order) for levels, dtype, order in specs]
    ex.exchange(*fields)
    for field, (levels, dtype, _) in zip(fields, specs):
        np.testing.assert_array_equal(field, expected_local(d, levels, dtype))


@pytest.mark.parametrize("backend", ["mpi", "nccl"])
def test_gpu_fields_hold_owner_values(comm, backend):
    """CuPy fields and GT4Py's default GPU (I, J, K) field, blocking and split phase, twice
    (buffers reused): exact halos. Runs where CuPy and a GPU are present; skipped elsewhere
    (CI has no GPU)."""
    cupy = gpu_or_skip(comm, backend)
    d = gh.CartesianDecomposition((17, 11), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d, backend=backend)
    dims = [gtx.Dimension("I"), gtx.Dimension("J"), gtx.Dimension("K", gtx.DimensionKind.VERTICAL)]
    specs = [((), np.float64, "C"), ((3,), np.int32, "F"), ((5,), np.float64, "C")]
    for _ in range(2):
        fields = [cupy.asarray(filled_local(d, lv, dt, order)) for lv, dt, order in specs]
        fields[2] = gtx.as_field(dims, fields[2])  # GT4Py's layout for the GPU
        ex.exchange(fields[0])
        h = ex.start(fields[1], fields[2])
        h.finish()
        for field, (levels, dtype, _) in zip(fields, specs):
            got = field.get() if isinstance(field, cupy.ndarray) else field.asnumpy()
            np.testing.assert_array_equal(got, expected_local(d, levels, dtype))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gt4py_fields_are_exchanged_in_place(backend):
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    I, J = gtx.Dimension("I"), gtx.Dimension("J")
    field = gtx.as_field([I, J], filled_local(d, (), np.float64))
    ex.exchange(field)
    np.testing.assert_array_equal(field.asnumpy(), expected_local(d, (), np.float64))


@pytest.mark.parametrize("kind", ["numpy", "gt4py"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_repeated_blocking_exchange_runs_from_c(backend, kind):
    """A blocking exchange of a kept call's fields runs from C (``_native.Repeating``): not
    one Python function of the package runs for the same fields at each call and for two
    sets swapped between calls (``mpi``: the message set's copies bound once, ``SlotRun``;
    ``ghex``: its agreement numbers the call from C), but the copies of fields GHEX cannot
    describe, and the halos are exact every time; new fields go through Python. NumPy arrays
    and GT4Py's default fields (padded)."""
    import os
    import sys

    d = gh.CartesianDecomposition((13, 11, 4), halo=(1, 2, 0), periodic=(True, False, True))
    ex = gh.make_exchange(d, backend=backend)
    package = os.path.dirname(gh.__file__)
    ran = []

    def calls(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            ran.append(frame.f_code.co_name)

    def new_field():
        a = filled_local(d, (), np.float64)
        return a if kind == "numpy" else gtx.as_field([gtx.Dimension(n) for n in "IJK"], a)

    def values(field):
        return field if kind == "numpy" else field.ndarray

    expected = expected_local(d, (), np.float64)
    a, b, c = new_field(), new_field(), new_field()
    ex.exchange(a)
    ex.exchange(b)
    for field in [a, a, b, a, b, b]:
        values(field)[...] = filled_local(d, (), np.float64)  # halos at SENTINEL again
        ran.clear()
        sys.setprofile(calls)
        try:
            ex.exchange(field)
        finally:
            sys.setprofile(None)
        np.testing.assert_array_equal(values(field), expected)
        # GHEX cannot describe GT4Py's default fields (I fastest): dense copies, in Python
        staged = backend == "ghex" and kind == "gt4py"
        assert ran == (["exchange"] if staged else []), ran
    sys.setprofile(calls)
    try:
        ex.exchange(c)
    finally:
        sys.setprofile(None)
    assert "_called" in ran
    np.testing.assert_array_equal(values(c), expected)


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


def test_messages_of_axes_that_wrap_are_whole_planes(comm):
    """Axis 1 wraps onto every rank (periodic, one rank across it): the messages of the
    ``mpi`` transport (the plan's ``wrapped`` ones) span its whole extent, halos included
    (the rank fills them first), cross it nowhere, and fill exactly the halo cells that the
    plain boxes fill, from the same ranks; the halos are exact on each side of the faces."""
    halo = ((1, 2), (2, 1), (1, 1))
    d = gh.CartesianDecomposition(
        (16, 11, 7), halo=halo, periodic=(True, True, False), proc_grid=(comm.size, 1, 1)
    )
    plan = d.plan()
    assert [n.rank for n in plan.wrapped] == [n.rank for n in plan.remote_neighbours]

    def cells(region):
        mask = np.zeros(plan.local_shape, bool)
        for box in region.boxes:
            assert not mask[box.slices].any(), "a cell received twice"
            mask[box.slices] = True
        return mask

    for wrapped, plain in zip(plan.wrapped, plan.remote_neighbours):
        for box in wrapped.send.boxes + wrapped.recv.boxes:
            assert (box.start[1], box.stop[1]) == (0, d.allocated_shape[1]), box
        np.testing.assert_array_equal(cells(wrapped.recv), cells(plain.recv))
    field = filled_local(d, (2,), np.float64, "C")
    gh.make_exchange(d, backend="mpi").exchange(field)
    np.testing.assert_array_equal(field, expected_local(d, (2,), np.float64))


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


def layout(d, levels, dtype, kind):
    """A filled local field: C or Fortran order, or levels outermost in memory."""
    if kind == "levels-outermost":
        a = filled_local(d, levels, dtype)
        moved = np.ascontiguousarray(np.moveaxis(a, -1, 0))
        return np.moveaxis(moved, 0, -1)
    return filled_local(d, levels, dtype, kind)


# level shape, dtype, memory layout: one after the other through one exchange object
FIELD_KINDS = [
    ((), np.float64, "C"),
    ((3,), np.float64, "C"),
    ((3,), np.float32, "F"),
    ((4,), np.float64, "levels-outermost"),
    ((1,), np.float64, "C"),  # one level: its stride equals the innermost axis' stride
    ((2, 2), np.int32, "C"),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fields_of_every_kind_in_turn(backend):
    """One exchange object takes 2-D and 3-D fields, dtypes and layouts in any order, alone
    and mixed in one call (pyghex's communication objects each serve one buffer type)."""
    d = gh.CartesianDecomposition((13, 11), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d, backend=backend)
    for _ in range(2):
        for levels, dtype, kind in FIELD_KINDS:
            field = layout(d, levels, dtype, kind)
            ex.exchange(field)
            np.testing.assert_array_equal(field, expected_local(d, levels, dtype))
        fields = [layout(d, *spec) for spec in FIELD_KINDS]
        h = ex.start(*fields)
        h.finish()
        for field, (levels, dtype, _) in zip(fields, FIELD_KINDS):
            np.testing.assert_array_equal(field, expected_local(d, levels, dtype))


def rank_layout(d, levels, dtype, kind):
    """A filled local field in memory layout ``kind``: one of FIELD_KINDS' layouts, every
    other element of a wider array, or a reversed view."""
    if kind == "every-other":
        field = filled_local(d, levels, dtype)
        wide = np.zeros((*field.shape[:-1], 2 * field.shape[-1]), dtype)[..., ::2]
        wide[...] = field
        return wide
    if kind == "reversed":
        field = np.ascontiguousarray(filled_local(d, levels, dtype)[::-1])
        return field[::-1]
    return layout(d, levels, dtype, kind)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("split", ["outer axes", "innermost axis"])
def test_layouts_that_differ_between_ranks(comm, backend, split):
    """Each rank lays its fields out its own way (C or Fortran order, levels outermost,
    every other element, reversed): exact halos, blocking and split phase, twice. GHEX's
    messages follow the grid, not the fields' layouts; fields whose innermost axis is not
    contiguous travel through a dense copy. The innermost decomposed axis split over the
    ranks too (GHEX sees it in bytes)."""
    kinds = ["C", "F", "every-other", "levels-outermost", "reversed"]
    if split == "outer axes":
        d = gh.CartesianDecomposition((13, 11, 5), halo=(2, 1, 0), periodic=(True, False, True))
    else:
        shape = (7, 4 * comm.size + 3)
        d = gh.CartesianDecomposition(shape, ((1, 0), (2, 1)), (False, True), (1, comm.size))
    ex = gh.make_exchange(d, backend=backend)
    for turn in range(2):
        mine = [kinds[(comm.rank + turn + k) % len(kinds)] for k in range(2)]
        fields = [rank_layout(d, (3,), np.float64, mine[0]), rank_layout(d, (), np.int32, mine[1])]
        ex.exchange(fields[0])
        ex.start(fields[1]).finish()
        np.testing.assert_array_equal(fields[0], expected_local(d, (3,), np.float64))
        np.testing.assert_array_equal(fields[1], expected_local(d, (), np.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_exchanges_in_flight(backend):
    """Every exchange in flight fills exact halos (GHEX reads its buffer descriptions until the
    wait; MPI's messages of one plan share a tag and match in the order they were started)."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=(True, False))
    ex = gh.make_exchange(d, backend=backend)
    fields = [filled_local(d, (), np.float64) for _ in range(300)]
    handles = [ex.start(f) for f in fields]
    for h in reversed(handles):  # finished in another order than started
        h.finish()
    expected = expected_local(d, (), np.float64)
    for field in fields:
        np.testing.assert_array_equal(field, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kept_blocking_call_while_an_exchange_is_in_flight(backend):
    """A blocking call of kept fields (run from C) while a split exchange of the same plan and
    kind of fields is in flight, holding the message set the kept call's copies are bound to
    (``mpi``): the kept call takes another, and both fill exact halos."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=(True, False))
    ex = gh.make_exchange(d, backend=backend)
    expected = expected_local(d, (), np.float64)
    u, v = filled_local(d, (), np.float64), filled_local(d, (), np.float64)
    ex.exchange(u)
    for _ in range(3):
        u[...] = v[...] = filled_local(d, (), np.float64)
        h = ex.start(v)
        ex.exchange(u)
        h.finish()
        np.testing.assert_array_equal(u, expected)
        np.testing.assert_array_equal(v, expected)


@pytest.mark.timeout(120)  # a hang fails
@pytest.mark.parametrize("backend", BACKENDS)
def test_ranks_finish_exchanges_in_different_orders(comm, backend):
    """Split-phase exchanges finished in another order on each rank (odd ranks backwards,
    rank 2 from the middle), with messages far above MPI's eager size (rendezvous): each
    exchange sent everything at its start, so no order of finishes waits on another."""
    d = gh.CartesianDecomposition((64, 64, 128), halo=(2, 2, 0), periodic=True)  # 140 kB faces
    ex = gh.make_exchange(d, backend=backend)
    fields = [filled_local(d, (), np.float64) for _ in range(4)]
    handles = [ex.start(f) for f in fields]
    finish_out_of_order(handles, comm.rank)
    for field in fields:
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


@pytest.mark.timeout(120)  # a hang fails
@pytest.mark.parametrize("backend", BACKENDS)
def test_exchanges_started_after_finishes_in_different_orders(comm, backend):
    """Ranks finish two exchanges in different orders, then start two more, whose buffers on
    each rank are the ones it freed first (other ones on each rank): every field still gets
    its own halos (one shape and dtype, other values: a swap would show), and ``is_ready``
    polled until true leaves ``finish`` its messages."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    offsets = [0.0, 1000.0, 2000.0, 3000.0]
    a, b, c, e = fields = [filled_local(d, (), np.float64) + off for off in offsets]
    ha, hb = ex.start(a), ex.start(b)
    first, second = (ha, hb) if comm.rank % 2 == 0 else (hb, ha)
    first.finish()
    hc = ex.start(c)
    second.finish()
    he = ex.start(e)
    while not he.is_ready():
        pass
    he.finish()
    hc.finish()
    expected = expected_local(d, (), np.float64)
    for field, off in zip(fields, offsets):
        np.testing.assert_array_equal(field, expected + off)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exchanged_fields_are_not_kept_alive(backend):
    """What a transport keeps for the fields it exchanged never keeps them alive, nor do the
    calls a blocking exchange keeps to run from C: fresh fields at every call leave no memory
    behind."""
    d = gh.CartesianDecomposition((24, 20, 6), halo=(1, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    gone = []
    for _ in range(3):
        field = filled_local(d, (), np.float64)
        h = ex.start(field)
        h.finish()
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64))
        blocking = filled_local(d, (), np.float64)
        ex.exchange(blocking)
        ex.exchange(blocking)  # (from C)
        np.testing.assert_array_equal(blocking, expected_local(d, (), np.float64))
        gone += [weakref.ref(field), weakref.ref(blocking)]
        del field, h, blocking
    gc.collect()
    assert [ref() for ref in gone] == [None] * 6, "a field kept alive after its exchange"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dropped_exchange_is_freed_at_once(backend):
    """Dropping an exchange frees its transport at once, on every rank alike (not whenever
    Python's cycle collector runs), while the fields it exchanged live on."""
    d = gh.CartesianDecomposition((16, 12), halo=1, periodic=True)
    field = filled_local(d, (), np.float64)
    ex = gh.make_exchange(d, backend=backend)
    ex.exchange(field)
    ex.start(field).finish()
    transport = weakref.ref(ex._exchanger._transport)
    gc.disable()
    try:
        del ex
        assert transport() is None, "a dropped exchange's transport is still alive"
    finally:
        gc.enable()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exchange_in_flight_outlives_its_exchange_object(backend):
    """The user may drop the exchange (and its decomposition) between start and finish: what
    the exchange in flight needs (GHEX's context, MPI's requests) stays until it finishes."""
    d = gh.CartesianDecomposition((16, 12, 4), halo=(2, 1, 0), periodic=(True, False, True))
    field, expected = filled_local(d, (3,), np.float64), expected_local(d, (3,), np.float64)
    h = gh.make_exchange(d, backend=backend).start(field)
    del d
    gc.collect()
    h.finish()
    np.testing.assert_array_equal(field, expected)
    again = gh.CartesianDecomposition((16, 12, 4), halo=(2, 1, 0), periodic=(True, False, True))
    field = filled_local(again, (3,), np.float64)
    gh.make_exchange(again, backend=backend).exchange(field)
    np.testing.assert_array_equal(field, expected_local(again, (3,), np.float64))


@at_most_ranks(2, "a resource of each process")
@pytest.mark.parametrize("backend", BACKENDS)
def test_decompositions_release_their_communicators(backend):
    """More decompositions over a run than MPI has communicators (2048 here), each used for
    an exchange and dropped: each frees what it duplicated, and its transport's requests, at
    once (the cycle collector is off: its timing differs between ranks, and a communicator
    freed on one rank only cannot be reused)."""
    gc.disable()
    try:
        for _ in range(2100):
            d = gh.CartesianDecomposition((8, 6), halo=1, periodic=(True, False))
            field = filled_local(d, (), np.float64)
            ex = gh.make_exchange(d, backend=backend)
            ex.exchange(field)
            ex.start(field).finish()
    finally:
        gc.enable()
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))
