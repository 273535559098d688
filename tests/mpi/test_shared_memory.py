"""The ``shm`` transport: halos copied from the neighbours' fields in a node's shared memory
(``gh.shared_allocator``), bit for bit what the ``mpi`` transport writes."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from conftest import calls_out_of_step
from halo_reference import expected_local, filled_local, finish_out_of_order
from test_cartesian_exchange import CASES
from test_compiled_step import (
    CALLS,
    GLOBAL_SHAPE,
    bounds,
    initial_fields,
    local_fields,
    make_step,
    run_from_python,
)
from test_unstructured_exchange import SIZES, local_field, random_mesh, values

import gt4py_halo as gh
from gt4py_halo.transports.shm import runtime
from gt4py_halo.transports.shm.runtime import SLOTS

I, J, K = (
    gtx.Dimension("I"),
    gtx.Dimension("J"),
    gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL),
)
MiB = 1 << 20


def shared(allocator, array):
    """``array``'s copy in the pool of ``allocator``, in the same memory order."""
    order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
    copy = allocator.empty(array.shape, array.dtype, order)
    copy[...] = array
    return copy


@pytest.mark.parametrize("case", CASES)
def test_halo_holds_owner_values(case):
    global_shape, halo, periodic, levels, dtype, order = CASES[case]
    d = gh.CartesianDecomposition(global_shape, halo=halo, periodic=periodic)
    ex = gh.make_exchange(d, backend="shm")
    assert ex.backend == "shm"
    field = shared(gh.shared_allocator(d, MiB), filled_local(d, levels, dtype, order))
    for _ in range(2):  # the second over halos filled, with the copies kept
        ex.exchange(field)
        np.testing.assert_array_equal(field, expected_local(d, levels, dtype))


def test_gt4py_default_fields_of_uneven_blocks_as_mpi_writes_them(comm):
    """GT4Py's padded fields (the allocator's layout is GT4Py's), several in one call, of
    blocks that differ between ranks: the halos are those the ``mpi`` transport writes."""
    d = gh.CartesianDecomposition((13, 10, 6), halo=(2, 1, 0), periodic=(True, False, False))
    allocator = gh.shared_allocator(d, 4 * MiB)
    domain = dict(zip((I, J, K), d.allocated_shape))
    ours = [gtx.zeros(domain, dtype=dt, allocator=allocator) for dt in (np.float64, np.int32)]
    theirs = [gtx.zeros(domain, dtype=f.dtype.scalar_type) for f in ours]
    assert ours[0].ndarray.strides == theirs[0].ndarray.strides
    for k, (a, b) in enumerate(zip(ours, theirs)):
        values = np.random.default_rng(10 * comm.rank + k).integers(0, 1000, d.allocated_shape)
        a.ndarray[...] = values
        b.ndarray[...] = values
    gh.make_exchange(d, "shm").exchange(*ours)
    gh.make_exchange(d, "mpi").exchange(*theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


@pytest.mark.timeout(120)  # a hang fails
def test_a_repeated_call_runs_from_c_and_follows_the_neighbours_fields(comm, monkeypatch):
    """A blocking call of fields exchanged before runs whole in C (no exchange object made
    in Python) and copies the neighbours' current values; where the ranks call with other
    field sets of the same kind (the records name other fields), Python binds the copies
    to them, and C runs those the next time."""
    d = gh.CartesianDecomposition((13, 10, 4), halo=(2, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, MiB)
    sets = [[shared(allocator, filled_local(d, (), np.float64)) for _ in range(2)] for _ in "ab"]
    for fields in sets:
        ex.exchange(*fields)
    made = []
    original = runtime.PendingShmExchange.__init__
    monkeypatch.setattr(
        runtime.PendingShmExchange,
        "__init__",
        lambda self, *args: made.append(1) or original(self, *args),
    )
    expected = expected_local(d, (), np.float64)
    for k, which in enumerate([0, 0, comm.rank % 2, comm.rank % 2, 1]):
        fields = sets[which]
        for field in fields:
            field[...] = filled_local(d, (), np.float64) + k  # new owned values, halos reset
        ex.exchange(*fields)
        for field in fields:
            np.testing.assert_array_equal(field, expected + k)
    # C ran all but one or two calls after the ranks switched sets (on 1 rank: all)
    assert 1 <= len(made) <= 2 if comm.size > 1 else not made


def test_split_calls_run_in_c_once_bound_and_follow_the_neighbours_fields(comm, monkeypatch):
    """A split call's start and finish run in C once its copies from the neighbours are
    bound; Python binds them where the neighbours' fields are others (a new field set, or
    neighbours that switched sets). Exact halos either way."""
    d = gh.CartesianDecomposition((13, 10, 4), halo=(2, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, MiB)
    sets = [[shared(allocator, filled_local(d, (), np.float64)) for _ in range(2)] for _ in "ab"]
    bound = []
    original = runtime.PreparedShmExchange.copies
    monkeypatch.setattr(
        runtime.PreparedShmExchange,
        "copies",
        lambda self, records: bound.append(1) or original(self, records),
    )
    expected = expected_local(d, (), np.float64)
    for k, which in enumerate([0, 0, 1, 1, comm.rank % 2, comm.rank % 2, 0, 0]):
        fields = sets[which]
        for field in fields:
            field[...] = filled_local(d, (), np.float64) + k  # new owned values, halos reset
        ex.start(*fields).finish()
        for field in fields:
            np.testing.assert_array_equal(field, expected + k)
    # bound at the first call of each set, where the neighbours switched sets, and back;
    # on one rank there is nothing to read
    assert 2 <= len(bound) <= 4 if comm.size > 1 else not bound


def test_profiled_calls_run_their_phases_in_python_with_exact_halos(comm, tmp_path_factory):
    """Under ``gh.profile`` a call of fields whose copies are bound (C would run it whole)
    runs its phases in Python, each timed: blocking and split calls write the same exact
    halos, and every call's self copies, copies from the neighbours and wait for its readers
    are on each rank's timeline."""
    d = gh.CartesianDecomposition((13, 10, 4), halo=(2, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, MiB)
    fields = [shared(allocator, filled_local(d, (), np.float64)) for _ in range(2)]
    ex.exchange(*fields)
    ex.start(*fields).finish()  # bound: C runs the next calls whole, unless profiled
    folder = comm.bcast(str(tmp_path_factory.mktemp("profile")) if comm.rank == 0 else None)
    expected = expected_local(d, (), np.float64)
    calls = [lambda: ex.exchange(*fields), lambda: ex.start(*fields).finish()] * 2
    with gh.profile(folder):
        for k, call in enumerate(calls):
            for field in fields:
                field[...] = filled_local(d, (), np.float64) + k  # new owned values
            call()
            for field in fields:
                np.testing.assert_array_equal(field, expected + k)
    if comm.rank == 0:
        events = json.loads((Path(folder) / "trace.json").read_text())["traceEvents"]
        for rank in range(comm.size):
            phases = [e["name"] for e in events if e["pid"] == rank and e.get("cat") == "exchange"]
            for phase in ("self-copies", "copy", "wait"):
                assert phases.count(phase) == len(calls), (rank, phase, phases)


@pytest.mark.parametrize("levels,dtype,order", [((), np.float64, "C"), ((4,), np.float32, "F")])
def test_unstructured_halos_hold_owner_values(comm, levels, dtype, order):
    d = gh.UnstructuredDecomposition(random_mesh(comm))
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, MiB)
    for dim in SIZES:
        field = shared(allocator, local_field(d, dim, levels, dtype, order))
        ex.exchange(field, dim=dim)
        gids = np.concatenate([d.owned_gids[dim], d.halo_gids[dim]])
        np.testing.assert_array_equal(field, values(gids, levels, dtype))


@pytest.mark.timeout(120)  # a hang fails
def test_ranks_finish_exchanges_in_different_orders(comm):
    """Split exchanges finished in another order on each rank: a rank waiting for its
    readers reads for its other exchanges meanwhile, so no order waits on another."""
    d = gh.CartesianDecomposition((24, 20, 6), halo=(2, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, 4 * MiB)
    fields = [shared(allocator, filled_local(d, (), np.float64)) for _ in range(SLOTS)]
    handles = [ex.start(f) for f in fields]
    with pytest.raises(gh.BackendError, match=f"at most {SLOTS} exchanges in flight"):
        ex.start(shared(allocator, filled_local(d, (), np.float64)))
    finish_out_of_order(handles, comm.rank)
    for field in fields:
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


@pytest.mark.timeout(120)  # a hang fails
def test_a_rank_waiting_for_the_next_exchange_reads_for_the_last(comm):
    """Even ranks start two exchanges and finish the second first; odd ranks finish the
    first before they start the second. An even rank waiting for its neighbour's second
    exchange reads for its first meanwhile, which the neighbour waits for."""
    d = gh.CartesianDecomposition((24, 20), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, MiB)
    a, b = (shared(allocator, filled_local(d, (), np.float64)) for _ in range(2))
    if comm.rank % 2 == 0:
        first, second = ex.start(a), ex.start(b)
        second.finish()
        first.finish()
    else:
        ex.start(a).finish()
        ex.start(b).finish()
    for field in (a, b):
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


@pytest.mark.timeout(120)  # a hang fails
def test_a_blocking_exchange_reads_for_another_exchange_objects_split_one(comm):
    """Even ranks start an exchange of one exchange object, exchange (blocking, repeated:
    from C too) with another, then finish the first; odd ranks finish the first before the
    blocking ones. An even rank waiting in the blocking exchange reads for the other
    object's exchange, whose finish its neighbour waits in."""
    d = gh.CartesianDecomposition((24, 20), halo=1, periodic=True)
    split, blocking = (gh.make_exchange(d, backend="shm") for _ in range(2))
    allocator = gh.shared_allocator(d, MiB)
    a, b = (shared(allocator, filled_local(d, (), np.float64)) for _ in range(2))
    for _ in range(3):
        handle = split.start(a)
        if comm.rank % 2:
            handle.finish()
            blocking.exchange(b)
        else:
            blocking.exchange(b)
            handle.finish()
    for field in (a, b):
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


@pytest.mark.timeout(120)  # a hang fails
def test_a_rank_returns_only_once_its_readers_are_done(comm):
    """Even ranks exchange from C and overwrite their owned cells at once; odd ranks start
    their exchange and read only after a delay, the second time longer than the C path
    waits (Python takes the exchange over from it, its reads done): the odd ranks' halos
    still hold the values before the overwrite."""
    if comm.size == 1:
        pytest.skip("needs a neighbour")
    d = gh.CartesianDecomposition((24, 20), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="shm")
    field = shared(gh.shared_allocator(d, MiB), filled_local(d, (), np.float64))
    ex.exchange(field)  # (kept: the next calls of even ranks run from C)
    for delay in (0.1, 1.0):
        field[...] = filled_local(d, (), np.float64)
        comm.Barrier()
        if comm.rank % 2:
            handle = ex.start(field)
            time.sleep(delay)
            handle.finish()
            np.testing.assert_array_equal(field, expected_local(d, (), np.float64))
        else:
            ex.exchange(field)
            field[d.owned] = -1.0
        comm.Barrier()


@pytest.mark.timeout(120)
def test_ranks_that_exchange_different_fields_raise_on_every_rank(comm):
    """Rank 0 exchanges one field where the others exchange two: every rank (each has rank 0
    for a neighbour here) raises, no halo a neighbour fills is written, and the next exchange
    of matching fields works."""
    if comm.size == 1:
        pytest.skip("needs a neighbour")
    d = gh.CartesianDecomposition((16, 12), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, MiB)
    fields = [shared(allocator, filled_local(d, (), np.float64)) for _ in range(2)]
    before = fields[0].copy()
    with pytest.raises(gh.RanksDisagreeError, match="halos not written"):
        ex.exchange(*fields[: 1 if comm.rank == 0 else 2])
    assert d.proc_grid[0] > 1  # (the first axis's halo comes from another rank)
    np.testing.assert_array_equal(fields[0][0], before[0])
    ex.exchange(*fields)
    for field in fields:
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


def test_fields_outside_the_shared_memory_are_refused(comm):
    d = gh.CartesianDecomposition((16, 12), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="shm")
    with pytest.raises(gh.FieldError, match="not in memory the ranks share"):
        ex.exchange(filled_local(d, (), np.float64))
    other = gh.CartesianDecomposition((16, 12), halo=1, periodic=True, comm=comm.Split(comm.rank))
    field = shared(gh.shared_allocator(other, MiB), filled_local(d, (), np.float64))
    if comm.size > 1:  # (a pool of this rank alone; on one rank, the same ranks)
        with pytest.raises(gh.FieldError, match="not in memory the ranks share"):
            ex.exchange(field)
    ex.exchange(shared(gh.shared_allocator(d, MiB), filled_local(d, (), np.float64)))


def test_the_pool_is_reused_and_says_when_it_is_full():
    d = gh.CartesianDecomposition((16, 12), halo=1, periodic=True)
    allocator = gh.shared_allocator(d, 64 * 1024)
    domain = {I: 40, J: 40}  # 12.8 kB and an alignment each: 5 fit
    fields = [gtx.zeros(domain, dtype=np.float64, allocator=allocator) for _ in range(5)]
    with pytest.raises(gh.FieldError, match="does not fit in the shared memory"):
        fields.append(gtx.zeros(domain, dtype=np.float64, allocator=allocator))
    del fields
    gc.collect()
    again = [gtx.zeros(domain, dtype=np.float64, allocator=allocator) for _ in range(5)]
    assert all(not f.asnumpy().any() for f in again)
    with pytest.raises(gh.FieldError, match="nbytes must be a number of bytes"):
        gh.shared_allocator(d, -1)


def test_a_compiled_diffusion_step_equals_the_runtime_path(diffusion, comm):
    """The demo's two diffusion steps (GT4Py stencils, a blocking and a split exchange) with
    the compiled ``shm`` exchange, GT4Py's fields in the pool, uneven blocks: bit for bit
    what the runtime ``mpi`` exchange and the stencils called from Python leave."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    step = make_step(diffusion, gh.make_exchange(d, backend="shm"), comm, False)
    allocator = gh.shared_allocator(d, 4 * MiB)
    ours = []
    for field in initial_fields(diffusion, d):
        ours.append(gtx.empty(field.domain, dtype=field.dtype, allocator=allocator))
        ours[-1].ndarray[...] = field.ndarray
    theirs = initial_fields(diffusion, d)
    ex = gh.make_exchange(d, backend="mpi")
    for _ in range(CALLS):
        step(*ours, *bounds(d))
        run_from_python(diffusion, ex, *theirs, *bounds(d))
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


@pytest.mark.timeout(120)  # a hang fails
def test_a_compiled_exchange_of_a_field_outside_the_pool_raises_on_every_rank(comm):
    """Rank 0's field is not in shared memory: it and its neighbours (every rank here) raise
    after the call, nothing waits for ever; the next call of shared fields fills exact
    halos."""
    d = gh.CartesianDecomposition((16, 12), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="shm")

    @gh.program(comm=comm)
    def step(a):
        ex.exchange(a)

    field = shared(gh.shared_allocator(d, MiB), filled_local(d, (), np.float64))
    outside = filled_local(d, (), np.float64) if comm.rank == 0 else field
    with pytest.raises(gh.RanksDisagreeError, match="rank 0's field 0 is not in memory"):
        step(outside)
    step(field)
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


def test_compiled_opposite_halos_copied_in_lockstep_fill_exact_halos(comm):
    """Symmetric halos of periodic axes: the two halos across an axis are boxes of the same
    shape (from the rank itself, or from one neighbour on 2 ranks), copied in lockstep
    where their rows are short (one element across the unit-stride axis, two or a few
    levels), one after the other where long. Uneven blocks; C, F, padded and GT4Py's default
    (I, J, K) fields of three dtypes, blocking and split, new fields at a second call: exact
    halos."""
    d = gh.CartesianDecomposition((11, 9), halo=((2, 2), (1, 1)), periodic=(True, True))
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, 4 * MiB)

    @gh.program(comm=comm)
    def exchange_all(a, b, c, e, g):
        h = ex.start(a, b)
        ex.exchange(c, e, g)
        h.finish()

    specs = [((), np.float64, "C"), ((3,), np.int32, "F"), ((2,), np.float32, "C")]
    specs += [((), np.float64, "P"), ((5,), np.float64, "gt4py")]
    for _ in range(2):
        fields = local_fields(d, specs, allocator)
        exchange_all(*fields)
        for field, (levels, dtype, _) in zip(fields, specs):
            got = field if isinstance(field, np.ndarray) else field.asnumpy()
            np.testing.assert_array_equal(got, expected_local(d, levels, dtype))


def test_compiled_unstructured_runs_of_cells_fill_exact_halos(comm):
    """An unstructured plan whose halo cells come in runs consecutive on both sides (ICON's
    halo lines do: a rank's halo cells follow one another, its neighbours' owned cells in
    part) and single cells in between: the compiled ``shm`` exchange copies a run per row.
    Uneven ranks; 1-D, C, F and GT4Py's default (Cell, K) fields (padded) in one exchange,
    new fields at each call: exact halos."""
    from gt4py_halo.transports.shm.expansion import _rows

    sizes = [40 + 7 * r for r in range(comm.size)]
    first = np.cumsum([0, *sizes])
    owned = np.arange(first[comm.rank], first[comm.rank + 1])
    halo = np.zeros(0, np.int64)
    if comm.size > 1:
        after, before = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        halo = np.concatenate(
            [
                first[after] + np.arange(12),  # a run
                first[before] + np.arange(20, 30, 2),  # consecutive here, not there
                first[after + 1] - 6 + np.arange(6),  # a run
            ]
        )
    d = gh.UnstructuredDecomposition({"cell": (owned, halo)}, comm=comm)
    reads, _ = runtime.ShmTransport(d).links(d.plan("cell"))
    assert sum(len(_rows(here, there, 1)) for _, here, there in reads) == 7 * (comm.size > 1)
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, MiB)
    cell = gtx.Dimension("Cell")

    @gh.program(comm=comm)
    def exchange_cells(a, b, c, g):
        ex.exchange(a, b, c, g, dim="cell")

    specs = [((), np.float64, "C"), ((3,), np.int32, "C"), ((4,), np.float32, "F")]
    gids = np.concatenate([d.owned_gids["cell"], d.halo_gids["cell"]])
    for call in range(2):
        fields = [shared(allocator, local_field(d, "cell", *spec)) for spec in specs]
        made = local_field(d, "cell", (5,), np.float64) + call
        fields.append(gtx.as_field([cell, K], made, allocator=allocator))
        exchange_cells(*fields)
        for field, (levels, dtype, _) in zip(fields, [*specs, ((5,), np.float64, "")]):
            got = field if isinstance(field, np.ndarray) else field.asnumpy() - call
            np.testing.assert_array_equal(got, values(gids, levels, dtype))


@pytest.mark.timeout(120)  # a hang fails
def test_more_compiled_exchanges_in_flight_than_slots_raise_on_every_rank(comm):
    """A step that starts 17 exchanges before finishing any (a statement between reads all
    fields, so each finish, which writes its field, comes after it; independent pairs would
    be emitted one after the other): the 17th start finds its slot taken and is refused on
    every rank alike, the other 16 run; the call raises on every rank, naming the limit. The
    next call of a step with fewer in flight fills exact halos."""
    assert SLOTS == 16
    d = gh.CartesianDecomposition((12, 7), halo=1, periodic=(True, False), comm=comm)
    ex = gh.make_exchange(d, backend="shm")
    allocator = gh.shared_allocator(d, MiB)

    @gh.program(comm=comm)
    def seventeen(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, s):
        h0 = ex.start(a0)
        h1 = ex.start(a1)
        h2 = ex.start(a2)
        h3 = ex.start(a3)
        h4 = ex.start(a4)
        h5 = ex.start(a5)
        h6 = ex.start(a6)
        h7 = ex.start(a7)
        h8 = ex.start(a8)
        h9 = ex.start(a9)
        h10 = ex.start(a10)
        h11 = ex.start(a11)
        h12 = ex.start(a12)
        h13 = ex.start(a13)
        h14 = ex.start(a14)
        h15 = ex.start(a15)
        h16 = ex.start(a16)
        s[0] = a0[1, 1] + a1[1, 1] + a2[1, 1] + a3[1, 1] + a4[1, 1] + a5[1, 1] + a6[1, 1]
        s[1] = a7[1, 1] + a8[1, 1] + a9[1, 1] + a10[1, 1] + a11[1, 1] + a12[1, 1]
        s[2] = a13[1, 1] + a14[1, 1] + a15[1, 1] + a16[1, 1]
        h0.finish()
        h1.finish()
        h2.finish()
        h3.finish()
        h4.finish()
        h5.finish()
        h6.finish()
        h7.finish()
        h8.finish()
        h9.finish()
        h10.finish()
        h11.finish()
        h12.finish()
        h13.finish()
        h14.finish()
        h15.finish()
        h16.finish()

    @gh.program(comm=comm)
    def two(a, b):
        h = ex.start(a)
        ex.exchange(b)
        h.finish()

    fields = [shared(allocator, filled_local(d, (), np.float64) + k) for k in range(17)]
    with pytest.raises(gh.RanksDisagreeError, match="more than 16 'shm' exchanges in flight"):
        seventeen(*fields, np.zeros(3))
    for k, field in enumerate(fields[:16]):  # the exchanges that ran
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64) + k)
    fields = [shared(allocator, filled_local(d, (), np.float64) + k) for k in range(2)]
    two(*fields)
    for k, field in enumerate(fields):
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64) + k)


@pytest.mark.timeout(120)  # a hang fails
def test_compiled_exchanges_of_ranks_out_of_step_raise(comm):
    """A loop around an exchange whose trips differ between ranks, in kept calls: rank 0 makes
    two trips in a call and one in the next, the others one and then two. Rank 0's second
    exchange would read its neighbours' exchange of their next call: each rank that reads a
    record of another call raises; back in step, exact halos. Then fields of other levels
    on rank 0 alone: its neighbours raise."""
    if comm.size == 1:
        pytest.skip("ranks out of step need two")
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d, backend="shm")

    @gh.program(comm=comm)
    def step(a, trips):
        for _ in range(trips[0]):
            ex.exchange(a)

    allocator = gh.shared_allocator(d, 4 * MiB)
    field = shared(allocator, filled_local(d, (3,), np.float64))
    calls_out_of_step(step, field, any(x.rank == 0 for x in d.plan().directions))
    field[...] = filled_local(d, (3,), np.float64)
    one = np.ones(1, dtype=np.int32)
    step(field, one)
    np.testing.assert_array_equal(field, expected_local(d, (3,), np.float64))
    other = shared(allocator, filled_local(d, (2,), np.float64))
    step(other, one)
    if comm.rank == 0:
        with pytest.raises(gh.RanksDisagreeError, match="another kind than this rank"):
            step(other, one)
    else:
        with pytest.raises(gh.RanksDisagreeError, match="another kind than this rank"):
            step(field, one)


def test_a_compiled_exchange_in_a_plain_dace_program(comm):
    """``ex.exchange`` of ``shm`` inside ``@dace.program``: its plan array is no view (DaCe
    refuses views as arguments; fields cut from the pool are views, so the caller allows
    them)."""
    d = gh.CartesianDecomposition((17, 11), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d, backend="shm")

    @dace.program
    def exchange_plain(a):
        ex.exchange(a)

    field = shared(gh.shared_allocator(d, MiB), filled_local(d, (3,), np.int32))
    with dace.config.set_temporary("compiler", "allow_view_arguments", value=True):
        exchange_plain(field)
    np.testing.assert_array_equal(field, expected_local(d, (3,), np.int32))
