"""Bad input raises a clear error on every rank, before anything is posted to MPI.

After each rejected call a correct exchange must still give exact halos: had a rejected call
posted a message, it would be matched by the next exchange and corrupt it.
"""

from __future__ import annotations

import gc
import re
import shutil
import tempfile
import time
import weakref
from contextlib import nullcontext
from pathlib import Path

import gt4py.next as gtx
import numpy as np
import pytest
from halo_reference import expected_local, filled_local
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo.compiled import step_cache

BACKENDS = ["mpi", "ghex"]
I, J = gtx.Dimension("I"), gtx.Dimension("J")


@pytest.fixture(params=BACKENDS)
def cartesian(request):
    d = gh.CartesianDecomposition((12, 10, 4), halo=(1, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend=request.param)
    yield d, ex
    field = filled_local(d, (), np.float64)
    ex.exchange(field)
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


def test_wrong_shape(cartesian):
    d, ex = cartesian
    shape = (d.allocated_shape[0] + 1,) + d.allocated_shape[1:]
    with pytest.raises(gh.FieldError, match=r"field 1 has shape .* needs its first 3 axes"):
        ex.exchange(np.zeros(d.allocated_shape), np.zeros(shape))


def test_missing_level_axes_are_not_guessed(cartesian):
    d, ex = cartesian
    with pytest.raises(gh.FieldError, match="field 0 has shape"):
        ex.exchange(np.zeros(d.allocated_shape[:2]))


@pytest.mark.parametrize("dtype", [np.float16, np.complex128, np.bool_, np.uint8])
def test_unsupported_dtype(cartesian, dtype):
    d, ex = cartesian
    with pytest.raises(gh.FieldError, match="field 0 has dtype"):
        ex.exchange(np.zeros(d.allocated_shape, dtype=dtype))


def test_read_only(cartesian):
    d, ex = cartesian
    field = np.zeros(d.allocated_shape)
    field.flags.writeable = False
    with pytest.raises(gh.FieldError, match="read-only"):
        ex.start(field)


def test_a_field_that_overlaps_itself(cartesian):
    """A field whose elements share memory (a stride of 0, or strides that step into each
    other): its halo writes would land on its owned cells. Views of every other element,
    reversed axes, transposes and level slices are fine."""
    d, ex = cartesian
    base = np.zeros((*d.allocated_shape[:2], 2 * d.allocated_shape[2]))
    level = np.zeros(d.allocated_shape[:2])
    repeated = np.lib.stride_tricks.as_strided(level, d.allocated_shape, (*level.strides, 0))
    with pytest.raises(gh.FieldError, match="field 1 overlaps itself"):
        ex.exchange(np.zeros(d.allocated_shape), repeated)
    strides = (base.strides[0], 8, 8)  # axis 1 steps into axis 2
    squeezed = np.lib.stride_tricks.as_strided(base, d.allocated_shape, strides)
    with pytest.raises(gh.FieldError, match="field 0 overlaps itself"):
        ex.start(squeezed)
    fine = [base[..., ::2], base[::-1, :, 1::2]]
    ex.exchange(*fine)
    ex.exchange(np.zeros(d.allocated_shape[::-1]).T)


def test_fields_that_share_memory(cartesian):
    """The same array twice, or two overlapping views of one buffer: one field's halo would be
    another's owned cells. Views that share no element (a tracer axis) are exchanged."""
    d, ex = cartesian
    field = np.zeros(d.allocated_shape)
    with pytest.raises(gh.FieldError, match="fields 0 and 2 share memory"):
        ex.exchange(field, np.zeros(d.allocated_shape), field)
    big = np.zeros((d.allocated_shape[0] + 1, *d.allocated_shape[1:]))
    with pytest.raises(gh.FieldError, match="fields 0 and 1 share memory"):
        ex.start(big[:-1], big[1:])
    tracers = np.zeros((*d.allocated_shape, 2))
    for k in range(2):
        tracers[..., k] = filled_local(d, (), np.float64)
    ex.exchange(tracers[..., 0], tracers[..., 1])
    for k in range(2):
        np.testing.assert_array_equal(tracers[..., k], expected_local(d, (), np.float64))


def test_not_an_array(cartesian):
    d, ex = cartesian
    with pytest.raises(gh.FieldError, match="field 0 is a list"):
        ex.exchange([[1.0, 2.0]])
    with pytest.raises(gh.FieldError, match="field 1 is a tuple"):
        ex.exchange(np.zeros(d.allocated_shape), (1.0,))
    with pytest.raises(gh.FieldError, match="no fields"):
        ex.exchange()


def test_dim_on_a_cartesian_decomposition(cartesian):
    d, ex = cartesian
    with pytest.raises(gh.DecompositionError, match="no named dims"):
        ex.exchange(np.zeros(d.allocated_shape), dim="cell")


def test_ghex_build_failing_on_one_rank_raises_on_every_rank(comm, monkeypatch):
    """A rank that cannot build the 'ghex' transport's C++ (no mpicxx there) raises, and so do
    the others, naming it, instead of waiting in GHEX's collective setup for it."""
    from gt4py_halo.transports.ghex import native

    d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
    last = comm.size - 1
    if comm.rank == last:
        monkeypatch.setattr(native, "_module", None)  # (loaded by an earlier test)
        monkeypatch.setattr(native, "_compiler", lambda: None)
    with pytest.raises(gh.BackendUnavailableError, match=f"rank {last}: .*mpicxx"):
        gh.make_exchange(d, backend="ghex")


def test_unknown_backend():
    d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
    with pytest.raises(gh.BackendError, match="unknown halo-exchange backend 'carrier-pigeon'"):
        gh.make_exchange(d, backend="carrier-pigeon")


def test_halo_wider_than_block(comm):
    cells = 2 * comm.size + comm.size // 2  # smallest block: 2 cells
    with pytest.raises(gh.DecompositionError, match="wider than the smallest local block"):
        gh.CartesianDecomposition((cells, 4), halo=3, periodic=True, proc_grid=(comm.size, 1))


def test_more_ranks_than_cells(comm):
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    with pytest.raises(gh.DecompositionError, match="empty"):
        gh.CartesianDecomposition((comm.size - 1, 4), halo=1, proc_grid=(comm.size, 1))


def test_proc_grid_that_does_not_match_the_communicator(comm):
    with pytest.raises(gh.DecompositionError, match="ranks"):
        gh.CartesianDecomposition((8, 8), halo=1, proc_grid=(comm.size + 1, 1))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"global_shape": (8, 0), "halo": 1},
        {"global_shape": (8, 8), "halo": -1},
        {"global_shape": (8, 8), "halo": (1, 1, 1)},
        {"global_shape": (8, 8), "halo": ((1, 2, 3), 1)},
        {"global_shape": (8, 8), "halo": 1, "periodic": (True,)},
        {"global_shape": (8, 8), "halo": None},
        {"global_shape": (8, 8), "halo": 1.5},
        {"global_shape": (8, 8), "halo": np.array(1)},
        {"global_shape": (8, 8), "halo": {0: 1, 1: 2}},
        {"global_shape": (8, 8), "halo": (1, [1])},
        {"global_shape": (8, 8), "halo": 1, "periodic": None},
        {"global_shape": {8: 0, 9: 0}, "halo": 1},
    ],
)
def test_malformed_cartesian_arguments(comm, kwargs):
    """A ``DecompositionError`` on every rank, also where one rank alone passes the bad
    argument (a ``TypeError`` there, the others waited in a collective; a dict's keys were
    taken for its entries)."""
    with pytest.raises(gh.DecompositionError):
        gh.CartesianDecomposition(**kwargs)
    good = {"global_shape": (8, 8), "halo": 1}
    with pytest.raises(gh.DecompositionError, match=f"rank {comm.size - 1}: "):
        gh.CartesianDecomposition(**(kwargs if comm.rank == comm.size - 1 else good))


def test_numpy_bools_are_bools(comm):
    d = gh.CartesianDecomposition((8, 6), halo=1, periodic=np.array([True, False]))
    assert d.periodic == (True, False)
    assert gh.CartesianDecomposition((8, 6), halo=1, periodic=np.True_).periodic == (True, True)


def test_gid_owned_by_two_ranks(comm):
    owned = np.arange(comm.rank * 4, comm.rank * 4 + 4)
    owned[0] = 0  # every rank claims gid 0
    if comm.size == 1:
        owned = np.array([0, 1, 0])
        match = "listed twice as owned"
    else:
        match = r"gid 0 is owned by ranks 0 and 1"
    with pytest.raises(gh.DecompositionError, match=match):
        gh.UnstructuredDecomposition({"cell": (owned, [])})


def test_halo_gid_owned_by_nobody(comm):
    owned = np.arange(comm.rank * 4, comm.rank * 4 + 4)
    with pytest.raises(gh.DecompositionError, match="halo gid 999 is owned by no rank"):
        gh.UnstructuredDecomposition({"cell": (owned, [999])})
    # the directory rank of the gid holds no gid at all (an IndexError there, others hung)
    with pytest.raises(gh.DecompositionError, match="halo gid 5 is owned by no rank"):
        gh.UnstructuredDecomposition({"cell": ([], [5] if comm.rank == 0 else [])})


def test_unsigned_gids_beyond_int64(comm):
    """A uint64 gid of 2**63 or more: named as too large, on every rank (it was called
    negative: it wrapped around when made int64)."""
    with pytest.raises(gh.DecompositionError, match="gids must fit in int64; got 92233"):
        gh.UnstructuredDecomposition({"cell": (np.array([2**63 + comm.rank], np.uint64), [])})


def test_ghex_gids_beyond_32_bits_on_one_rank(comm):
    """GHEX's unstructured API takes 32-bit gids: a DecompositionError on every rank, not one
    rank raising and the others left in GHEX's collective pattern setup."""
    last = comm.size - 1
    gid = 2**31 + comm.rank if comm.rank == last else comm.rank
    ex = gh.make_exchange(gh.UnstructuredDecomposition({"cell": ([gid], [])}), backend="ghex")
    with pytest.raises(gh.DecompositionError, match=f"rank {last}: dim 'cell': GHEX's .* 32-bit"):
        ex.exchange(np.zeros(1))


def test_dim_names_of_mixed_types_on_one_rank(comm):
    """Names that cannot be sorted (a TypeError there, the others hung in a collective)."""
    dims = {"cell": ([comm.rank], [])}
    if comm.rank == comm.size - 1:
        dims[1] = ([comm.rank], [])
    with pytest.raises(gh.DecompositionError, match="dim names must be a non-empty set of str"):
        gh.UnstructuredDecomposition(dims)


def test_gid_both_owned_and_halo(comm):
    owned = np.arange(comm.rank * 4, comm.rank * 4 + 4)
    with pytest.raises(gh.DecompositionError, match="both as owned and as halo"):
        gh.UnstructuredDecomposition({"cell": (owned, owned[:1])})


@pytest.mark.parametrize(
    "name,mine,theirs",
    [
        ("global_shape", (12, 10), (12, 11)),
        ("halo", 1, 2),
        ("periodic", True, (True, False)),
        ("proc_grid", None, "split"),
    ],
)
def test_cartesian_decompositions_that_differ_between_ranks(comm, name, mine, theirs):
    """One rank builds a different decomposition: an error on every rank naming what
    differs, never a plan that silently mismatches its neighbours'."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    if theirs == "split":
        theirs = (comm.size, 1)
    kwargs = {"global_shape": (12, 10), "halo": 1, "periodic": True}
    kwargs[name] = theirs if comm.rank == comm.size - 1 else mine
    with pytest.raises(gh.RanksDisagreeError, match=rf"{name}: rank 0: .*rank {comm.size - 1}"):
        gh.CartesianDecomposition(**kwargs)


def test_null_communicator_is_named():
    with pytest.raises(gh.DecompositionError, match="COMM_NULL"):
        gh.CartesianDecomposition((12, 10), halo=1, comm=MPI.COMM_NULL)
    with pytest.raises(gh.DecompositionError, match="COMM_NULL"):
        gh.UnstructuredDecomposition({"cell": (np.arange(3), [])}, comm=MPI.COMM_NULL)


def test_numpy_integers_are_accepted(comm):
    d = gh.CartesianDecomposition(
        np.array([12, 10]),
        halo=np.int64(1),
        periodic=True,
        proc_grid=(np.int32(comm.size), np.int64(1)),
    )
    assert d.global_shape == (12, 10) and d.proc_grid == (comm.size, 1)
    with pytest.raises(gh.DecompositionError, match="global_shape must be a sequence of ints"):
        gh.CartesianDecomposition((12.0, 10), halo=1)


def test_backends_that_differ_between_ranks(comm):
    """One rank asks for another transport: an error on every rank, not a hang in the
    transports' collective setup."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    backend = "ghex" if comm.rank == comm.size - 1 else "mpi"
    with pytest.raises(gh.RanksDisagreeError, match=r"(?s)make_exchange: .*backend: rank 0: 'mpi'"):
        gh.make_exchange(d, backend=backend)
    ex = gh.make_exchange(d, backend="mpi")  # nothing was left half set up
    field = filled_local(d, (), np.float64)
    ex.exchange(field)
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))
    # one transport, named in another case on one rank: the same transport, no disagreement
    ex = gh.make_exchange(d, backend="MPI" if comm.rank == 0 else "mpi")
    field = filled_local(d, (), np.float64)
    ex.exchange(field)
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


def test_dims_that_differ_between_ranks(comm):
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    name = "cell" if comm.rank == 0 else "edge"
    with pytest.raises(gh.DecompositionError, match="dims differ between ranks"):
        gh.UnstructuredDecomposition({name: (np.array([comm.rank]), [])})


def test_unstructured_dim_errors(comm):
    d = gh.UnstructuredDecomposition(
        {"cell": (np.array([comm.rank]), []), "edge": (np.array([comm.rank]), [])}
    )
    ex = gh.make_exchange(d)
    with pytest.raises(gh.DecompositionError, match="pass dim="):
        ex.exchange(np.zeros(1))
    with pytest.raises(gh.DecompositionError, match="unknown dim 'vertex'"):
        ex.exchange(np.zeros(1), dim="vertex")
    with pytest.raises(gh.DecompositionError, match=r"unknown dim \['cell'\]"):
        ex.exchange(np.zeros(1), dim=["cell"])


def test_read_only_after_an_exchange_is_still_caught(cartesian):
    """Checks of a repeated call are skipped only while nothing they checked can have changed."""
    d, ex = cartesian
    field = np.zeros(d.allocated_shape)
    ex.exchange(field)
    field.flags.writeable = False
    with pytest.raises(gh.FieldError, match="read-only"):
        ex.exchange(field)


def test_retyped_after_an_exchange_is_still_caught(cartesian):
    d, ex = cartesian
    field = np.zeros(d.allocated_shape)
    ex.exchange(field)
    field.dtype = np.complex64  # the same object, memory and item size
    with pytest.raises(gh.FieldError, match="dtype complex64"):
        ex.exchange(field)


def test_reshaped_after_an_exchange_is_still_caught(cartesian):
    d, ex = cartesian
    field = np.zeros(d.allocated_shape)
    ex.exchange(field)
    field.shape = field.shape[::-1]  # the same object and memory
    with pytest.raises(gh.FieldError, match="needs its first 3 axes"):
        ex.exchange(field)


def wrong_blocks(d):
    """Blocks the runtime exchange refuses: owned cells only, transposed, one row too many."""
    owned_only = d.owned_shape
    transposed = d.allocated_shape[::-1]
    oversized = (d.allocated_shape[0] + 1, *d.allocated_shape[1:])
    return {"owned-only": owned_only, "transposed": transposed, "oversized": oversized}


@pytest.mark.parametrize("which", ["owned-only", "transposed", "oversized"])
def test_compiled_step_refuses_blocks_the_runtime_refuses(comm, which):
    """On every rank, at the first call and at a later one, before anything is posted (an
    owned-only block would have had the outer ring of its owned cells overwritten)."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def step(a, b):
        ex.exchange(a)
        b[:] = a

    shape = wrong_blocks(d)[which]
    a, b = np.ones(shape), np.zeros(shape)
    with pytest.raises(gh.FieldError, match=r"step: rank 0: field a has shape"):
        step(a, b)
    assert (a == 1).all()
    good = filled_local(d, (), np.float64)
    step(good, np.zeros(d.allocated_shape))  # builds
    np.testing.assert_array_equal(good, expected_local(d, (), np.float64))
    with pytest.raises(gh.FieldError, match=r"field a has shape"):
        step(a, b)  # a new instance of the same build
    assert (a == 1).all()


def test_compiled_step_with_a_wrong_field_on_one_rank(comm):
    """A first call with a wrongly shaped field on the last rank only: an error on every
    rank naming that rank, not wrong halos on its neighbours."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def exchange_one(a):
        ex.exchange(a)

    shape = d.owned_shape if comm.rank == comm.size - 1 else d.allocated_shape
    with pytest.raises(gh.FieldError, match=rf"rank {comm.size - 1}: field a has shape"):
        exchange_one(np.zeros(shape))


@pytest.mark.parametrize("when", ["first-call", "later-call"])
@pytest.mark.parametrize(
    "grid, backend",
    [
        ("cartesian", "mpi"),
        ("cartesian", "ghex"),
        ("unstructured", "mpi"),
        ("unstructured", "ghex"),
    ],
)
def test_compiled_levels_that_differ_between_ranks(comm, grid, backend, when):
    """The last rank passes fields of 4 levels, the others of 3 (at the build, or after a
    build all agreed on): every rank raises ``RanksDisagreeError`` naming the argument and
    each rank's levels, before anything is posted (the halos stay as they were). Without
    the check the `mpi` messages were truncated or filled part of a buffer, and GHEX moved
    them (wrong halos) or waited for a pattern the last rank made alone. The next call with
    agreeing fields gives exact halos."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    last = comm.size - 1
    if grid == "cartesian":
        d = gh.CartesianDecomposition(  # uneven blocks on 2-4 ranks
            (13, 10), halo=1, periodic=True, proc_grid=(comm.size, 1), comm=comm
        )
        dim = None
        made = lambda levels: filled_local(d, (levels,), np.float64)
        expected = lambda levels: expected_local(d, (levels,), np.float64)
    else:  # each rank owns one cell and has every other in its halo
        others = [r for r in range(comm.size) if r != comm.rank]
        d = gh.UnstructuredDecomposition({"cell": ([comm.rank], others)})
        dim = "cell"
        owners = np.array([comm.rank, *others], dtype=np.float64)
        made = lambda levels: (
            np.where(np.arange(comm.size)[:, None] == 0, owners[:, None], -1.0) * np.ones(levels)
        )
        expected = lambda levels: owners[:, None] * np.ones(levels)
    ex = gh.make_exchange(d, backend=backend)

    @gh.program(comm=comm)
    def step(a):
        ex.exchange(a, dim=dim)

    if when == "later-call":
        a = made(3)
        step(a)
        np.testing.assert_array_equal(a, expected(3))
    levels = 4 if comm.rank == last else 3
    a = made(levels)
    with pytest.raises(
        gh.RanksDisagreeError,
        match=rf"(?s)different dtypes or levels, nothing was posted:\n  a: rank 0: float64 "
        rf"levels \(3,\).*rank {last}: float64 levels \(4,\)",
    ):
        step(a)
    np.testing.assert_array_equal(a, made(levels))
    a = made(3)
    step(a)
    np.testing.assert_array_equal(a, expected(3))


def test_compiled_step_refuses_fields_that_share_memory(comm):
    """An exchanged argument given twice (to one exchange or to two), or two exchanged
    arguments that share memory: a ``FieldError`` naming them and why (a step's code assumes
    its arguments do not alias), before anything is written."""
    d = gh.CartesianDecomposition((13, 11), halo=1, periodic=True)  # uneven on 2-4 ranks
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def exchange_two(a, b):
        ex.exchange(a, b)

    # GT4Py's default (padded) fields
    a, b = (gtx.as_field([I, J], filled_local(d, (), np.float64)) for _ in range(2))
    exchange_two(a, b)
    np.testing.assert_array_equal(b.asnumpy(), expected_local(d, (), np.float64))
    a = gtx.as_field([I, J], filled_local(d, (), np.float64))
    with pytest.raises(gh.FieldError, match="fields a and b share memory"):
        exchange_two(a, a)
    np.testing.assert_array_equal(a.asnumpy(), filled_local(d, (), np.float64))

    @gh.program(comm=comm)
    def exchange_each(a, b):  # one field per exchange: the step's arguments alias
        ex.exchange(a)
        ex.exchange(b)

    with pytest.raises(gh.FieldError, match="fields a and b share memory.*distinct arrays"):
        exchange_each(a, a)
    np.testing.assert_array_equal(a.asnumpy(), filled_local(d, (), np.float64))


def test_compiled_ghex_step_of_a_view_without_unit_stride(comm):
    """GHEX copies runs along an axis of unit stride: a view with none (``a[:, ::2]``) is a
    ``FieldError`` on every rank that says so (it named DaCe's placeholders for the strides)."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="ghex")

    @gh.program(comm=comm)
    def step(a):
        ex.exchange(a)

    rows, columns = d.allocated_shape
    with pytest.raises(
        gh.FieldError, match="an axis of unit stride on every rank; got one of none"
    ) as raised:
        step(np.zeros((rows, 2 * columns))[:, ::2])
    assert "__strides" not in str(raised.value)


def test_compiled_step_of_an_exchange_of_a_view(comm):
    """An alias (``x = u``) or a slice (``q[..., 0]``) exchanged in a step: a ``ProgramError``
    that says what to exchange instead, on every rank (a raw DaCe validation error at the
    build, and an invalid SDFG written into the working directory)."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def alias(u):
        x = u
        ex.exchange(x)

    @gh.program(comm=comm)
    def sliced(q):
        ex.exchange(q[:, :, 0])

    with pytest.raises(gh.ProgramError, match="an exchange of 'x', a view of an argument"):
        alias(filled_local(d, (), np.float64))
    with pytest.raises(gh.ProgramError, match="a view of an argument"):
        sliced(filled_local(d, (2,), np.float64))


def test_compiled_step_refuses_rebinding_an_array_argument(comm):
    """``a = b`` in a step: DaCe compiles a copy into ``a``'s array where Python binds the
    name to ``b``'s; ``x, y = y, x``: DaCe assigns one element after the other, numbers too.
    The arrays ended with other values than the same function gives in Python. A
    ``ProgramError`` naming the line, on every rank, before anything runs; a temporary for
    numbers is fine."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    def rebound(a, b, n):
        for _ in range(n):
            ex.exchange(a)
            b[1:-1, 1:-1] = a[:-2, 1:-1] + 1.0
            t = a
            a = b
            b = t

    def swapped(a, x, y):
        x, y = y, x
        a[0, 0] = x - y

    a, b = filled_local(d, (), np.float64), filled_local(d, (), np.float64)
    before = a.copy(), b.copy()
    for function, args, what in (
        (rebound, (a, b, 3), "`a = b` assigns to a, an array argument"),
        (swapped, (a, 1.0, 3.0), r"`x, y = \(y, x\)`: DaCe assigns the tuple's elements one"),
    ):
        line = function.__code__.co_firstlineno + (5 if function is rebound else 1)
        with pytest.raises(gh.ProgramError, match=rf"{function.__name__}, line {line}: {what}"):
            gh.program(function, comm=comm)(*args)
        np.testing.assert_array_equal(a, before[0])
        np.testing.assert_array_equal(b, before[1])

    @gh.program(comm=comm)
    def through_a_temporary(a, x, y):
        t = x
        x = y
        y = t
        a[0, 0] = x - y

    through_a_temporary(a, 1.0, 3.0)
    assert a[0, 0] == 2.0


def test_compiled_step_refuses_reshaping_an_array_not_c_contiguous(comm):
    """DaCe takes a reshape for a view of a C-contiguous array: of an F-ordered array (or a
    GT4Py field, or a view with steps) the step read other elements than NumPy's reshape,
    silently. A ``ProgramError`` naming the line, on every rank, before anything runs; a
    C-contiguous array is reshaped as in NumPy."""

    def flat(a, b):
        x = a.reshape(a.shape)
        b[:] = x + 1.0

    step = gh.program(flat, comm=comm)
    b = np.zeros((3, 4))
    line = flat.__code__.co_firstlineno + 1
    for a in (
        np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        np.arange(24.0).reshape(3, 8)[:, ::2],
    ):
        with pytest.raises(gh.ProgramError, match=rf"flat, line {line}: .*a is not C-contiguous"):
            step(a, b)
        assert not b.any()
    step(np.arange(12.0).reshape(3, 4), b)
    np.testing.assert_array_equal(b, np.arange(12.0).reshape(3, 4) + 1.0)


def test_compiled_step_refuses_what_is_no_array_or_number(comm):
    """A list (which DaCe would convert into a temporary array that a repeated call reads and
    writes after it was freed), a tuple, a string or None: a ``FieldError`` naming the
    argument, before a build and after one; so is an array with a stride beyond the step's
    C ``int`` sizes (nothing of it read), and one whose strides are no whole numbers of
    elements (a field of a structured array; nothing written), and a Python int beyond
    int64 (it would wrap); a new read-only array of a shape built before:
    a ``FieldError``, nothing written; a bad argument or a call that does not fit the step's
    signature on one rank only, at the first call and after a build: an error on every rank,
    none waits. The module's globals are not kept by the step."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d)
    last = comm.rank == comm.size - 1

    @gh.program(comm=comm)
    def step(a, c):
        ex.exchange(a)
        a[1, 1] = c

    def one_rank_fails() -> None:
        if comm.size == 1:
            return
        with pytest.raises(gh.FieldError, match=rf"rank {comm.size - 1}: argument c is a None"):
            step(filled_local(d, (), np.float64), None if last else 5.0)
        with pytest.raises(gh.ProgramError, match="missing a required argument: 'c'"):
            step(*[filled_local(d, (), np.float64), 5.0][: 1 if last else 2])

    one_rank_fails()  # at the first call: the ranks raise where they meet for the build
    globals()["_GLOBAL_ARRAY"] = np.ones(3)
    held = weakref.ref(_GLOBAL_ARRAY)  # noqa: F821 - made just above
    for built in (False, True):
        for bad in ([5.0], (5.0,), "5", None):
            with pytest.raises(gh.FieldError, match=f"argument c is a {type(bad).__name__}"):
                step(filled_local(d, (), np.float64), bad)
        for bad in (2**64 + 3, -(2**63) - 1):  # (C int64 would wrap them: 3, 2**63 - 1)
            with pytest.raises(gh.FieldError, match=f"argument c is {bad}, beyond 64-bit"):
                step(filled_local(d, (), np.float64), bad)
        huge = np.lib.stride_tricks.as_strided(np.zeros(1), d.allocated_shape, (2**34, 0))
        with pytest.raises(gh.FieldError, match="argument a: .* at most 2147483647 elements"):
            step(huge, 5.0)
        # a field of a structured array: strides of 12 bytes for 8-byte elements (the step
        # would have read and written between them), nothing written
        records = np.zeros(d.allocated_shape, dtype=[("x", "f8"), ("y", "f4")])
        records["x"] = filled_local(d, (), np.float64)
        before = records.copy()
        with pytest.raises(gh.FieldError, match=r"argument a: strides .* not multiples of its"):
            step(records["x"], 5.0)
        np.testing.assert_array_equal(records, before)
        if not built:
            a = filled_local(d, (), np.float64)
            step(a, 5.0)
            assert a[1, 1] == 5.0
    read_only = filled_local(d, (), np.float64)
    read_only.setflags(write=False)
    with pytest.raises(gh.FieldError, match="read-only"):
        step(read_only, 5.0)
    np.testing.assert_array_equal(read_only, filled_local(d, (), np.float64))
    field, value = gtx.as_field([I, J], filled_local(d, (), np.float64)), 5.0
    step(field, value)
    step(field, value)  # the last call again
    field.ndarray.setflags(write=False)
    before = field.asnumpy().copy()
    with pytest.raises(gh.FieldError, match="read-only"):
        step(field, value)
    np.testing.assert_array_equal(field.asnumpy(), before)
    one_rank_fails()  # after a build: in the call's build agreement
    a = filled_local(d, (), np.float64)
    step(a, 5.0)  # the calls are in step again
    expected = expected_local(d, (), np.float64)
    expected[1, 1] = 5.0
    np.testing.assert_array_equal(a, expected)
    del globals()["_GLOBAL_ARRAY"]
    gc.collect()
    assert held() is None, "the step keeps a global array of its module alive"


@pytest.mark.timeout(120)  # a hang fails
@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_a_call_refused_on_one_rank_is_no_call(comm, backend):
    """A call refused by a rank's own check (a field of another shape on the last rank, the
    error caught there) is no call of the exchange: the ranks go on counting calls alike
    (with GHEX's agreement the next new kind of fields raised on every rank, and the
    exchange was broken for good), and ``dim=None`` is the one dim of a decomposition by
    its name too (they counted as different exchanges). Exact halos throughout."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    u, z = filled_local(d, (), np.float64), filled_local(d, (2,), np.float32)
    ex.exchange(u)
    if comm.rank == comm.size - 1:
        with pytest.raises(gh.FieldError):
            ex.exchange(np.zeros((1, 1)))
    ex.exchange(u)
    ex.exchange(z)
    np.testing.assert_array_equal(u, expected_local(d, (), np.float64))
    np.testing.assert_array_equal(z, expected_local(d, (2,), np.float32))

    r, n = comm.rank, comm.size
    if n == 1:
        return  # (the halo cell below would be the rank's own)
    cells = gh.UnstructuredDecomposition(
        {"cell": (np.arange(4 * r, 4 * r + 4), [(4 * r + 4) % (4 * n)])}
    )
    ex = gh.make_exchange(cells, backend=backend)
    for turn in range(3):
        a = np.arange(4 * r, 4 * r + 5, dtype=np.float64)
        a[4] = -1
        ex.exchange(a, dim=None if (r + turn) % 2 else "cell")
        assert a[4] == (4 * r + 4) % (4 * n)


@pytest.mark.timeout(300)  # a hang fails
def test_compiled_step_on_fewer_ranks_than_it_exchanges_over(comm):
    """A step made for one rank (``comm=MPI.COMM_SELF``) exchanging over every rank: its
    checks and agreements would not reach the other ranks (arguments of other levels on
    another rank filled halos with what was in memory, silently). A ``ProgramError`` on
    every rank, at the first call, also where an earlier build of the same step over every
    rank was recorded."""
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    def make(on):
        @gh.program(comm=on)
        def step(a):
            ex.exchange(a)

        return step

    a = filled_local(d, (2,), np.float64)
    make(comm)(a)  # over every rank: fine (and recorded, with a persistent cache)
    np.testing.assert_array_equal(a, expected_local(d, (2,), np.float64))
    if comm.size > 1:
        for _ in range(2):
            with pytest.raises(gh.ProgramError, match="some outside the communicator it runs on"):
                make(MPI.COMM_SELF)(filled_local(d, (2,), np.float64))


@pytest.mark.timeout(120)  # a hang fails
def test_compiled_step_that_fails_to_build_on_one_rank(comm):
    """A step DaCe cannot parse on the last rank only (a value of its closure differs): that
    rank raises its own error, every other rank a ProgramError naming it; none waits for the
    others."""
    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True)
    ex = gh.make_exchange(d)
    last = comm.rank == comm.size - 1
    scale = object() if last else 2.0

    @gh.program(comm=comm)
    def scaled(a):
        ex.exchange(a)
        a[1:-1, 1:-1] = a[1:-1, 1:-1] * scale

    expected = "Operator Mult is not defined" if last else f"rank {comm.size - 1} failed"
    with pytest.raises(gh.ProgramError, match=expected):
        scaled(np.ones(d.allocated_shape))


@pytest.mark.parametrize("extra", [-1, 1])
def test_compiled_unstructured_field_of_the_wrong_length(comm, extra):
    """Shorter (the exchange would write past its end) or longer than the dim's local size."""
    from test_unstructured_exchange import local_field, random_mesh

    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=5))
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def exchange_cells(c):
        ex.exchange(c, dim="cell")

    good = local_field(d, "cell", (2,), np.float64)
    wrong = np.zeros((good.shape[0] + extra, 2))
    with pytest.raises(gh.FieldError, match=r"field c has shape"):
        exchange_cells(wrong)


@pytest.mark.parametrize(
    "theirs",
    [((), np.float32), ((2,), np.float64), ((2,), np.float32)],
    ids=["dtype", "levels", "same-size"],
)
def test_runtime_fields_that_differ_between_ranks(comm, theirs):
    """The last rank exchanges a field of another dtype or level count: its messages differ
    in size, or (two levels of float32 against one of float64) only in what they hold. A
    rank that receives a message of the wrong size (shorter, or longer: truncated by MPI) or
    of fields of another signature (the 8 bytes after each message) raises instead of
    unpacking it, naming the senders. No rank writes a wrong halo, none hangs."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True, proc_grid=(comm.size, 1))
    ex = gh.make_exchange(d, backend="mpi")
    levels, dtype = theirs if comm.rank == comm.size - 1 else ((), np.float64)
    field = filled_local(d, levels, dtype)
    before = field.copy()
    try:
        ex.exchange(field)
    except gh.RanksDisagreeError as error:
        assert re.search(r"rank \d+ sent .*bytes.* expected", str(error)), error
        # nothing unpacked: the halo rows from the neighbours along axis 0 are as they were
        np.testing.assert_array_equal(field[[0, -1]], before[[0, -1]])
    else:  # no neighbour of the last rank: its halos are right
        np.testing.assert_array_equal(field, expected_local(d, levels, dtype))
    ex.exchange(filled_local(d, (), np.float64))  # the exchange still works for all


@pytest.mark.timeout(60)  # a hang fails
def test_polling_an_exchange_of_fields_the_ranks_disagree_on(comm):
    """``mpi``: the last rank starts an exchange of two fields, the others of one, and every
    rank polls ``is_ready`` until it is: a message longer than its receive made MPI's test
    raise its own error (``mpi4py.MPI.Exception``), and the finish after it named a size of 0.
    Now ``is_ready`` says ready and ``finish`` raises ``RanksDisagreeError`` naming the sizes,
    on every rank; the exchange works after it."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="mpi")
    u, v = filled_local(d, (), np.float64), filled_local(d, (), np.float64)
    started = ex.start(*((u, v) if comm.rank == comm.size - 1 else (u,)))
    while not started.is_ready():
        pass
    with pytest.raises(gh.RanksDisagreeError, match=r"halos not written: rank \d+ sent "):
        started.finish()
    u = filled_local(d, (), np.float64)
    ex.exchange(u)
    np.testing.assert_array_equal(u, expected_local(d, (), np.float64))


@pytest.mark.timeout(60)  # a hang fails
@pytest.mark.parametrize("backend", BACKENDS)
def test_polling_an_exchange_the_ranks_disagree_on_after_agreeing(comm, backend):
    """After an agreed exchange, the first rank starts one of the same kind of fields (no
    check of its own) and the others of a new kind, and every rank polls ``is_ready``: with
    ``ghex`` the first rank's loop waited for good (what reads the others' alarms ran in
    ``finish`` only); now ``is_ready`` raises ``RanksDisagreeError`` there once it has been
    polled as long as a wait raises, as the others' checks do."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend=backend)
    u = filled_local(d, (), np.float64)
    ex.exchange(u)
    with pytest.raises(gh.RanksDisagreeError):
        started = ex.start(u if comm.rank == 0 else filled_local(d, (), np.float32))
        while not started.is_ready():
            pass
        started.finish()


@pytest.mark.timeout(60)  # a hang fails
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["another-dim", "skipped-call", "earlier-in-flight"])
def test_runtime_dims_that_differ_between_ranks(comm, backend, how):
    """The last rank exchanges another dim than the others (of messages of the same size),
    skips the first of two exchanges, or starts another dim than the others and then the same
    one (the first finished after the second started), once every dim's kind of fields is
    known (no check of new kinds runs): a ``RanksDisagreeError`` on every rank (each rank
    mirrors every other rank's gid), nothing unpacked. ``mpi``: each message says its fields'
    dim (one tag for all dims: with a tag per dim the ranks waited for good). ``ghex``: GHEX
    tags messages by dim (the patterns took each other's messages: wrong halos, no word), and
    ranks whose wait lasts a second compare the waited call's dims (stuck notes:
    ``runtime/agreement.py``; the finish of the earlier call noted the later one: a hang)."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    others = [r for r in range(comm.size) if r != comm.rank]
    dims = ("cell", "edge", "vertex")
    d = gh.UnstructuredDecomposition({dim: ([comm.rank], others) for dim in dims})
    ex = gh.make_exchange(d, backend=backend)
    for dim in dims:  # the kinds of each dim known (no check of new kinds later)
        ex.exchange(np.arange(comm.size, dtype=np.float64), dim=dim)
    last = comm.rank == comm.size - 1
    owners = np.array([comm.rank, *others], dtype=np.float64)  # each gid's value: itself
    field = np.full(comm.size, -1.0)
    field[0] = comm.rank  # owned first, then the halo
    with pytest.raises(gh.RanksDisagreeError):
        if how == "another-dim":
            ex.exchange(field, dim="edge" if last else "cell")
        elif how == "earlier-in-flight":
            first = ex.start(field, dim="edge" if last else "cell")
            ex.start(np.arange(comm.size, dtype=np.float64), dim="vertex")
            first.finish()
        else:
            if not last:
                ex.exchange(field, dim="cell")
            ex.exchange(field, dim="edge")
    halo = field[1:]
    if backend == "mpi":  # nothing unpacked
        assert (halo == -1).all()
    else:  # GHEX unpacks each message as it comes: only the agreeing ranks' values
        assert ((halo == -1) | (halo == owners[1:])).all()


@pytest.mark.parametrize("mine", [np.float64, np.int64], ids=["first-kind", "another-kind"])
@pytest.mark.parametrize(
    "theirs",
    [((), np.float32), ((2,), np.float64), ((2,), np.float32), ((1,), np.float64)],
    ids=["dtype", "levels", "same-size", "one-level"],
)
def test_ghex_fields_that_differ_between_ranks(comm, theirs, mine):
    """GHEX owns its messages, so ranks compare their fields' dtypes and levels the first
    time they exchange fields of that kind: an error on every rank naming each rank's
    fields, before anything is posted (no field changes). Checked at the first exchange or
    at a later one with a kind of fields new on every rank (a rank whose kind is not new
    does not check: see docs/checks.md)."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="ghex")
    if mine is np.int64:  # an agreed kind first
        ex.exchange(filled_local(d, (), np.float64))
    field = filled_local(d, *(theirs if comm.rank == comm.size - 1 else ((), mine)))
    before = field.copy()
    with pytest.raises(
        gh.RanksDisagreeError,
        match=rf"exchange: ranks disagree on\n  fields: rank 0: '{np.dtype(mine)} levels \(\)'.*"
        rf"rank {comm.size - 1}: '{np.dtype(theirs[1])} levels {re.escape(str(theirs[0]))}'",
    ):
        ex.exchange(field)
    np.testing.assert_array_equal(field, before)
    for _ in range(2):  # the exchange still works for all, with fresh fields or the same
        again = filled_local(d, (), np.float64)
        ex.exchange(again)
        np.testing.assert_array_equal(again, expected_local(d, (), np.float64))


@pytest.mark.timeout(60)  # a hang fails
def test_ghex_known_fields_against_new_ones_raise_everywhere(comm):
    """After an agreed exchange, the last rank exchanges fields of a new kind while the
    others exchange the agreed kind again (which they do not check): instead of waiting for
    each other for ever, every rank raises naming both kinds, within seconds. The exchange is
    then broken (every later call says so); a new exchange works."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="ghex")
    ex.exchange(filled_local(d, (), np.float64))
    dtype = np.float32 if comm.rank == comm.size - 1 else np.float64
    started = time.monotonic()
    with pytest.raises(
        gh.RanksDisagreeError,
        match=rf"exchange call 2 \(rank \d+: 'float64 levels \(\)'.*"
        rf"rank {comm.size - 1}: 'float32 levels \(\)'\)",
    ):
        ex.exchange(filled_local(d, (), dtype))
    assert time.monotonic() - started < 10
    with pytest.raises(gh.RanksDisagreeError, match="cannot be used again"):
        ex.exchange(filled_local(d, (), np.float64))
    fresh = gh.make_exchange(d, backend="ghex")
    for _ in range(3):
        field = filled_local(d, (), np.float64)
        fresh.exchange(field)
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


@pytest.mark.parametrize("dims", [("cell",), ("cell", "edge")])
def test_ghex_waits_for_a_late_rank_that_agrees(comm, dims):
    """A rank 1.5 s late to exchanges whose kinds are known: the others' waits last past
    ALARM_AFTER_S and send it stuck notes; it made the same calls (same dims, same fields):
    no error anywhere, exact halos, and the notes are read by its next calls (none left)."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    others = [r for r in range(comm.size) if r != comm.rank]
    d = gh.UnstructuredDecomposition({dim: ([comm.rank], others) for dim in ("cell", "edge")})
    ex = gh.make_exchange(d, backend="ghex")
    owners = np.array([comm.rank, *others], dtype=np.float64)
    for late in (False, True, False, False):
        if late and comm.rank == 0:
            time.sleep(1.5)
        for dim in dims:
            field = np.full(comm.size, -1.0)
            field[0] = comm.rank
            ex.exchange(field, dim=dim)
            np.testing.assert_array_equal(field, owners)
    time.sleep(1.1)  # the next call reads the notes (a clock read per call, every second)
    ex.exchange(np.array(owners), dim="cell")
    comm.Barrier()
    assert not ex._exchanger._agreement._comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_wait_for_a_rank_is_reported(comm, monkeypatch, capfd, backend):
    """A rank that never makes a call the others wait for (it skipped one of the same
    fields, then stopped) leaves them waiting: they say what they wait for, and from whom
    (here the rank is only late, and the exchange then completes). With ``mpi`` the wait
    is one call into C: a thread of its own reports it (up to a second late here)."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    others = [r for r in range(comm.size) if r != comm.rank]
    d = gh.UnstructuredDecomposition({"cell": ([comm.rank], others)})
    ex = gh.make_exchange(d, backend=backend)
    owners = np.array([comm.rank, *others], dtype=np.float64)
    ex.exchange(np.array(owners), dim="cell")  # the kind known: no check below
    monkeypatch.setattr("gt4py_halo.build_once.REPORT_AFTER_S", 0.3)
    if comm.rank == 0:
        time.sleep(1.6 if backend == "ghex" else 2.5)
    field = np.full(comm.size, -1.0)
    field[0] = comm.rank
    ex.exchange(field, dim="cell")
    np.testing.assert_array_equal(field, owners)
    time.sleep(1.1)  # the notes to rank 0 are read at its next call
    ex.exchange(np.array(owners), dim="cell")
    err = capfd.readouterr().err
    if comm.rank == 0:
        assert "has waited" not in err
    else:
        call = "exchange call 2" if backend == "ghex" else "an exchange"
        assert re.search(
            rf"rank \d+ has waited \d+ s for the messages of {call} \(dim 'cell': "
            r"float64 levels \(\)\) from ranks [\d, ]*0",
            err,
        ), err


def test_a_compiled_step_waiting_for_a_rank_is_reported(comm, monkeypatch, capfd):
    """A compiled step whose exchange is skipped on one rank (a branch on data that differs
    between ranks) leaves the others waiting inside its C++: a thread says so on stderr,
    naming the step. Here rank 0 makes the exchange later, with its next call: the messages
    of two calls meet, and each rank that received one raises (the stamps,
    ``compiled/stamps.py``); back in step, exact halos (NumPy's fields and GT4Py's default
    ones, uneven blocks)."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.CartesianDecomposition((45, 38), halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=comm)
    def branching(u, g, flag):
        if flag[0] > 0:
            ex.exchange(u, g)

    u = filled_local(d, (), np.float64)
    g = gtx.as_field([gtx.Dimension("I"), gtx.Dimension("J")], filled_local(d, (), np.int32))
    flag = np.ones(1, np.int32)
    branching(u, g, flag)  # (built and run on every rank: a slow one is no skipped exchange)
    comm.Barrier()
    monkeypatch.setattr("gt4py_halo.build_once.REPORT_AFTER_S", 0.3)
    if comm.rank == 0:
        flag[0] = 0
        branching(u, g, flag)  # skips the exchange the others make
        time.sleep(2.0)
        flag[0] = 1
    neighbour = comm.rank == 0 or any(x.rank == 0 for x in d.plan().directions)
    with pytest.raises(gh.RanksDisagreeError, match="out of step") if neighbour else nullcontext():
        branching(u, g, flag)
    time.sleep(1.1)  # (the thread looks once per period)
    err = capfd.readouterr().err
    if comm.rank == 0:
        assert "has waited" not in err
    elif neighbour:
        assert re.search(
            r"rank \d+ has waited \d+ s for the messages of an exchange of compiled step "
            r"'branching' \(cartesian \(each rank must run its exchanges alike",
            err,
        ), err
    if comm.rank != 0:
        flag[0] = 0
        branching(u, g, flag)  # the call rank 0 made without the exchange: in step again
        flag[0] = 1
    u[...] = filled_local(d, (), np.float64)
    g.ndarray[...] = filled_local(d, (), np.int32)
    branching(u, g, flag)
    np.testing.assert_array_equal(u, expected_local(d, (), np.float64))
    np.testing.assert_array_equal(g.asnumpy(), expected_local(d, (), np.int32))


def test_ghex_check_of_new_fields_waiting_for_a_rank_is_reported(comm, monkeypatch, capfd):
    """A rank that does not come to the check of a new kind of fields leaves no silent hang:
    the waiting ranks say what they wait for (a late rank still comes here)."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    monkeypatch.setattr("gt4py_halo.build_once.REPORT_AFTER_S", 0.3)
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="ghex")
    if comm.rank == 0:
        time.sleep(1.5)
    field = filled_local(d, (3,), np.int32)
    ex.exchange(field)
    np.testing.assert_array_equal(field, expected_local(d, (3,), np.int32))
    # the alarms the slow check sent were all received: none is left on its communicator
    # when that is freed, to be taken for a message of a communicator made later
    comm.Barrier()
    time.sleep(0.2)
    assert not ex._exchanger._agreement._comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
    err = capfd.readouterr().err
    if comm.rank == 0:
        assert "has waited" not in err
    else:
        assert re.search(
            r"rank \d+ has waited \d+ s for the other ranks to check the fields of a new kind "
            r"of exchange \(int32 levels \(3,\)\)",
            err,
        ), err


def test_ghex_fields_of_a_repeated_kind_cost_no_collective(comm, monkeypatch):
    """Fresh field objects of the kind of the last exchange of their dim cost no collective,
    even where one rank reuses its fields and another reallocates them; other dims' exchanges
    in between do not count."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.UnstructuredDecomposition(
        {
            "cell": (np.array([comm.rank]), [(comm.rank + 1) % comm.size]),
            "edge": (np.array([comm.rank]), []),
        }
    )
    ex = gh.make_exchange(d, backend="ghex")
    kept = np.full((2, 3), comm.rank, np.float32)
    ex.exchange(kept, dim="cell")
    checks = []

    class Counting:  # the agreement's communicator, counting the checks' barriers
        def __init__(self, comm):
            self._comm = comm

        def __getattr__(self, name):
            if name == "Ibarrier":
                checks.append(name)
            return getattr(self._comm, name)

    monkeypatch.setattr(ex._exchanger._agreement, "_comm", Counting(ex._exchanger._agreement._comm))
    for _ in range(3):
        field = kept if comm.rank == 0 else np.full((2, 3), comm.rank, np.float32)
        ex.exchange(field, dim="cell")
        assert (field[1] == (comm.rank + 1) % comm.size).all()
        ex.exchange(np.zeros(1, np.int64), dim="edge")  # once the kind of its dim: checked
    assert len(checks) == 1


@pytest.mark.timeout(60)  # a hang fails
@pytest.mark.parametrize("theirs", ["agreed-before", "new"])
def test_ghex_kinds_agreed_before_that_differ_between_ranks(comm, theirs):
    """Ranks exchange float64 then float32 fields (both agreed); then the last rank
    exchanges float32 again while the others go back to float64 (or the last exchanges
    int32, a new kind). A rank whose kind changes from its last exchange checks it: every
    rank raises, naming both kinds (by the check itself where every rank changed, by the
    alarms where the last rank did not), never a silent wrong halo."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="ghex")
    for dtype in (np.float64, np.float32):
        ex.exchange(filled_local(d, (), dtype))
    last = np.float32 if theirs == "agreed-before" else np.int32
    dtype = last if comm.rank == comm.size - 1 else np.float64
    field = filled_local(d, (), dtype)
    before = field.copy()
    with pytest.raises(gh.RanksDisagreeError, match=rf"{np.dtype(last)} levels \(\)"):
        ex.exchange(field)
    if theirs == "new":  # found by the collective check, before posting: nothing changed
        np.testing.assert_array_equal(field, before)
        again = filled_local(d, (), np.float64)
        ex.exchange(again)
        np.testing.assert_array_equal(again, expected_local(d, (), np.float64))


@pytest.mark.timeout(60)  # a hang fails
@pytest.mark.parametrize("then", ["repeats", "changes"])
def test_ghex_rank_that_only_sends_to_a_checking_rank(comm, then):
    """One-sided halos: rank 0 needs a cell of rank 1, no rank needs one of rank 0. After an
    agreed exchange rank 0 exchanges float32 (a new kind: it checks) while the others repeat
    float64: they only send, so they never wait for rank 0. Going on repeating (a model's
    steps), they read rank 0's alarms at a later call; changing to float32 at their next call,
    they come to a check from a later call than rank 0's (the kinds agree, the calls do not).
    Either way every rank raises within seconds, never a silent wrong halo; the exchange is
    broken, a new one works."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    d = gh.UnstructuredDecomposition(
        {"cell": (np.array([comm.rank]), [1] if comm.rank == 0 else [])}
    )

    def field(dtype):
        return np.full(2 if comm.rank == 0 else 1, comm.rank, dtype)

    ex = gh.make_exchange(d, backend="ghex")
    ex.exchange(field(np.float64), dim="cell")
    if comm.rank == 0 or then == "repeats":
        dtypes = [np.float32 if comm.rank == 0 else np.float64] * 200
    else:
        dtypes = [np.float64, np.float32]
    if then == "repeats":
        match = r"exchange call 2 \(rank 0: \"dim 'cell': float32 levels \(\)\"; rank \d+: \"dim 'cell': float64"
    else:
        match = r"call: rank 0: 2; rank 1: 3"
    started = time.monotonic()
    with pytest.raises(gh.RanksDisagreeError, match=match):
        for dtype in dtypes:  # a model's steps
            ex.exchange(field(dtype), dim="cell")
            time.sleep(0.05)
    assert time.monotonic() - started < 10
    with pytest.raises(gh.RanksDisagreeError, match="cannot be used again"):
        ex.exchange(field(np.float64), dim="cell")
    del ex  # its communicators, with messages left on them, are not for MPI to reuse
    fresh = gh.make_exchange(d, backend="ghex")
    for dtype in (np.float32, np.float64):
        halo = field(dtype)
        fresh.exchange(halo, dim="cell")
        np.testing.assert_array_equal(halo, [0, 1] if comm.rank == 0 else [comm.rank])


@pytest.mark.parametrize("late", ["last", "first"])
def test_a_step_called_late_on_some_ranks_is_reported(comm, monkeypatch, capfd, late):
    """A compiled step is collective. Ranks that call it while others do not (yet) wait for
    them, and say so on stderr (every ``REPORT_AFTER_S``) naming the step and whom they wait
    for, instead of waiting silently: rank 0 names the ranks that have not come, the others
    whether rank 0 has. When the others come, the step runs.

    The step is built first, with every rank on time, and then made anew: it finds the
    record of its build (``step_cache``), so its ranks meet once, at the late call. (A build
    meets again after lowering, which takes each rank its own time: there the late rank may
    well wait for the others.)"""
    from gt4py_halo import build_once

    if comm.size == 1:
        pytest.skip("needs a rank to wait for")
    records = Path(comm.bcast(tempfile.mkdtemp() if comm.rank == 0 else None))
    monkeypatch.setattr(step_cache, "_folder", lambda: records)
    d = gh.CartesianDecomposition((8, 6), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    def late_step(a):
        ex.exchange(a)

    gh.program(late_step, comm=comm)(filled_local(d, (), np.float64))
    monkeypatch.setattr(build_once, "REPORT_AFTER_S", 0.3)
    capfd.readouterr()
    field = filled_local(d, (), np.float64)
    late_rank = comm.size - 1 if late == "last" else 0
    if comm.rank == late_rank:
        time.sleep(1.5)
    gh.program(late_step, comm=comm)(field)
    comm.barrier()
    if comm.rank == 0:
        shutil.rmtree(records)
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))
    reports = capfd.readouterr().err
    if comm.rank == late_rank:  # (it may report waiting for messages, where a rank that came
        # before it took longer to load the build than REPORT_AFTER_S: not to build)
        assert not re.search(r"has waited \d+ s for .* to build", reports), reports
        return
    assert f"rank {comm.rank} of {comm.size} has waited" in reports
    assert "to build 'late_step'" in reports
    if comm.rank == 0:
        assert f"for rank {late_rank} to build" in reports
    elif late_rank == 0:
        assert "for rank 0, which has not come" in reports
    else:
        assert "rank 0 has come, and names them" in reports


def test_ranks_that_build_different_steps_all_raise(comm):
    """Ranks that call different steps at once (a bug: steps are collective) meet to build
    them, see that they differ and raise ``RanksDisagreeError`` naming each rank's step,
    instead of going on with a build whose collectives do not match."""
    if comm.size == 1:
        pytest.skip("needs ranks that differ")
    d = gh.CartesianDecomposition((8, 6), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def step_a(a):
        ex.exchange(a)

    @gh.program(comm=comm)
    def step_b(a):
        ex.exchange(a)

    field = filled_local(d, (), np.float64)
    with pytest.raises(gh.RanksDisagreeError, match=r"rank 0: 'step_a', rank 1: 'step_b'"):
        (step_a if comm.rank == 0 else step_b)(field)
    step_a(field)  # the ranks go on together
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


def test_mpi_functions_not_found_is_an_error_on_every_rank(comm, monkeypatch):
    """The mpi transport calls the MPI mpi4py loaded from C; where its functions cannot be
    found on some rank, every rank raises naming that rank, and none waits for it."""
    from gt4py_halo.transports.mpi import runtime

    last = comm.size - 1
    if comm.rank == last:
        monkeypatch.setattr(runtime, "_unusable", lambda: "MPI_Startall not found")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    with pytest.raises(gh.BackendUnavailableError, match=rf"rank {last}: MPI_Startall not found"):
        gh.make_exchange(d, backend="mpi")
