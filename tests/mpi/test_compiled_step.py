"""A step of GT4Py stencils and halo exchanges compiled into one SDFG (``@gh.program``).

The compiled step must give the same bits as the same step run from Python with the runtime
exchange, and, gathered, as one rank alone; its exchanges must fill exactly the halos the plan
describes. The SDFG must hold one ``HaloExchange`` node per exchange call before lowering, and
neither library nodes nor Python callbacks after.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import inspect
import itertools
import re
import shutil
import tempfile
import types
import weakref
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from conftest import at_most_ranks, calls_out_of_step
from dace.sdfg.nodes import MapEntry, NestedSDFG
from halo_reference import SENTINEL, expected_local, filled_local, gpu_or_skip
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo.compiled import step_cache
from gt4py_halo.compiled.nodes import HaloExchange
from gt4py_halo.compiled.shared_functions import shared_name

EDGE, K = gtx.Dimension("Edge"), gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
I, J = gtx.Dimension("I"), gtx.Dimension("J")

ARENA_COPY = re.compile(r"_(pack|unpack)_\d+_all")
# Uneven blocks along axis 0 on 2, 3 and 4 ranks, sized so that GT4Py's default fields (axis 0
# contiguous, padded to a multiple of 8 elements) are padded on some ranks and not on others:
# 2 and 4 ranks: 23 + 2 halo rows (padded to 32) and 22 + 2 (24); 3 ranks: 17, 17 (24), 16.
GLOBAL_SHAPE = (44 if MPI.COMM_WORLD.size == 3 else 45, 38)
CALLS = 4  # two diffusion steps per call
GPU_TRANSPORTS = ["mpi", "nccl"]  # the transports of GPU steps


def make_step(
    diffusion: ModuleType,
    ex: gh.Exchange,
    comm: MPI.Comm,
    stencil_packs: bool,
    device: str = "cpu",
):
    """Two diffusion steps, each exchanging the halo its stencil reads: the first blocking,
    the second split, with a stencil on other fields while its messages travel.
    ``stencil_packs``: the stencil before ``ex.start(v)`` packs ``v``'s messages. On the GPU
    the stencil runs on GT4Py's DaCe GPU backend."""
    stencil = diffusion.diffusion_step
    if device == "gpu":
        from gt4py.next.program_processors.runners.dace import run_dace_gpu

        stencil = stencil.with_backend(run_dace_gpu)

    @gh.program(comm=comm, pack_in_producers=stencil_packs, device=device)
    def two_steps(u, v, w, i0, i1, j0, j1):  # types come from the arguments of a call
        ex.exchange(u)
        stencil(u, v, i0, i1, j0, j1)
        h = ex.start(v)
        stencil(u, w, i0, i1, j0, j1)  # neither writes v nor reads its halo
        h.finish()
        stencil(v, u, i0, i1, j0, j1)

    return two_steps


def run_from_python(diffusion: ModuleType, ex: gh.Exchange, u, v, w, *bounds) -> None:
    """``two_steps`` the icon4py way: compiled stencils and runtime exchanges, from Python."""
    stencil = diffusion.diffusion_step
    ex.exchange(u)
    stencil(u, v, *bounds)
    h = ex.start(v)
    stencil(u, w, *bounds)
    h.finish()
    stencil(v, u, *bounds)


def initial_fields(diffusion: ModuleType, d: gh.CartesianDecomposition):
    i, j = np.meshgrid(*(np.arange(s.start, s.stop) for s in d.global_slices), indexing="ij")
    u = np.zeros(d.allocated_shape)
    u[d.owned] = diffusion.initial_condition(i, j)
    I, J = diffusion.I, diffusion.J
    fields = [u, np.zeros(d.allocated_shape), np.zeros(d.allocated_shape)]
    return [gtx.as_field([I, J], f) for f in fields]


def bounds(d: gh.CartesianDecomposition) -> list:
    return [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]


_STEPS: dict[tuple, tuple] = {}


def shared_step(diffusion: ModuleType, comm: MPI.Comm, stencil_packs: bool, backend: str = "mpi"):
    """The decomposition of ``GLOBAL_SHAPE`` over ``comm`` and ``two_steps`` on it, made once
    per module: the tests share its build (a build per test took minutes on 4 ranks)."""
    key = (comm.py2f(), stencil_packs, backend)
    if key not in _STEPS:
        d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
        ex = gh.make_exchange(d, backend=backend)
        _STEPS[key] = d, make_step(diffusion, ex, comm, stencil_packs)
    return _STEPS[key]


def run_compiled(
    diffusion: ModuleType,
    comm: MPI.Comm,
    stencil_packs: bool,
    domain: list | None = None,
    backend: str = "mpi",
):
    d, step = shared_step(diffusion, comm, stencil_packs, backend)
    u, v, w = initial_fields(diffusion, d)
    for _ in range(CALLS):
        step(u, v, w, *(domain or bounds(d)))
    return u.asnumpy(), w.asnumpy()


@pytest.mark.parametrize(
    ("backend", "stencil_packs"),
    [("mpi", False), ("mpi", True), ("ghex", True)],
    ids=["mpi-pack-maps", "mpi-stencil-packs", "ghex"],  # GHEX packs into buffers of its own
)
def test_compiled_step_equals_runtime_path_and_single_rank(
    diffusion: ModuleType, comm, backend: str, stencil_packs: bool, capfd
) -> None:
    """With either transport: so the compiled transports agree bit for bit, with each other
    and with the runtime path (the 'mpi' transport). The GHEX build makes its context quietly
    (no oomph thread-safety line: transports/ghex/runtime.py)."""
    d, _ = shared_step(diffusion, comm, stencil_packs, backend)
    compiled, compiled_w = run_compiled(diffusion, comm, stencil_packs, backend=backend)
    assert "oomph" not in capfd.readouterr().err

    ex = gh.make_exchange(d, backend="mpi")
    u, v, w = initial_fields(diffusion, d)
    for _ in range(CALLS):
        run_from_python(diffusion, ex, u, v, w, *bounds(d))
    np.testing.assert_array_equal(compiled, u.asnumpy())  # halos included
    np.testing.assert_array_equal(compiled_w, w.asnumpy())

    blocks = comm.gather((d.global_slices, compiled[d.owned]), root=0)
    equal = None
    if comm.rank == 0:
        gathered = np.empty(GLOBAL_SHAPE)
        for slices, block in blocks:
            gathered[slices] = block
        # one rank alone, from Python (a suite run on 1 rank checks compiled == Python there)
        single = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=MPI.COMM_SELF)
        u, v, w = initial_fields(diffusion, single)
        for _ in range(CALLS):
            run_from_python(diffusion, gh.make_exchange(single), u, v, w, *bounds(single))
        equal = bool(np.array_equal(gathered, u.asnumpy()[single.owned]))
    assert comm.bcast(equal, root=0), "gathered compiled result differs from one rank alone"


@at_most_ranks(2, "one rank of other threads shows what the ranks decide together")
@pytest.mark.parametrize("threads", ["one-everywhere", "two-on-rank-0"])
def test_a_step_on_one_thread_per_rank_has_no_parallel_region(
    diffusion: ModuleType, comm, monkeypatch, threads: str
) -> None:
    """Every rank running one OpenMP thread (``OMP_NUM_THREADS=1``, as make test runs): the
    step's maps run sequentially, its code has no OpenMP region. One rank running two: every
    rank builds with OpenMP (the ranks decide together at the first build: it shapes the
    code). Both give the bits of the runtime path, halos included; uneven blocks, GT4Py's
    default fields. New arrays of those shapes take the same instance on every rank (a rank
    whose threads said otherwise than the ranks decided made an instance of its own, alone:
    with GHEX, its setup waited for the others)."""
    more = threads == "two-on-rank-0" and comm.rank == 0
    monkeypatch.setenv("OMP_NUM_THREADS", "2" if more else "1")  # read at the first build
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)
    step = make_step(diffusion, ex, comm, stencil_packs=False)
    u, v, w = initial_fields(diffusion, d)
    for _ in range(CALLS):
        step(u, v, w, *bounds(d))
    (binary,) = step._binaries.values()
    code = "".join(p.read_text() for p in Path(binary.folder).glob("src/cpu/*.cpp"))
    assert ("#pragma omp parallel for" in code) == (threads != "one-everywhere")
    x, y, z = initial_fields(diffusion, d)
    for _ in range(CALLS):
        run_from_python(diffusion, ex, x, y, z, *bounds(d))
    np.testing.assert_array_equal(u.asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(w.asnumpy(), z.asnumpy())
    x, y, z = initial_fields(diffusion, d)
    for _ in range(CALLS):
        step(x, y, z, *bounds(d))
    np.testing.assert_array_equal(u.asnumpy(), x.asnumpy())
    assert len(step._builds) == 1


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_loops_counting_with_names_the_exchanges_use(diffusion: ModuleType, comm) -> None:
    """A ``while`` loop counting with ``k`` and a ``for`` loop over ``p`` around exchanges:
    the C++ of the exchanges has locals of those names, which DaCe took for reads of the
    step's symbols (``k`` became an argument no call passed: a ``KeyError`` at the first
    call). The bits of the same exchanges and stencils from Python; uneven blocks, GT4Py's
    default fields."""
    d, _ = shared_step(diffusion, comm, stencil_packs=False)
    ex = gh.make_exchange(d)
    stencil = diffusion.diffusion_step

    @gh.program(comm=comm)
    def counted(u, v, n, i0, i1, j0, j1):
        k = 0
        while k < n:
            ex.exchange(u)
            stencil(u, v, i0, i1, j0, j1)
            k = k + 1
            for p in range(k):
                ex.exchange(v)
                stencil(v, u, i0, i1, j0, j1)

    u, v, _ = initial_fields(diffusion, d)
    x, y, _ = initial_fields(diffusion, d)
    counted(u, v, gtx.int32(3), *bounds(d))
    for k in range(1, 4):
        ex.exchange(x)
        stencil(x, y, *bounds(d))
        for _ in range(k):
            ex.exchange(y)
            stencil(y, x, *bounds(d))
    np.testing.assert_array_equal(u.asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(v.asnumpy(), y.asnumpy())


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_jumps_that_stay_on_one_side_of_a_split_exchange(diffusion: ModuleType, comm) -> None:
    """A loop broken between ``ex.start(u)`` and ``h.finish()`` (it stays there) and a
    ``continue`` after the finish run as written: the bits of the same exchanges and
    stencils from Python; uneven blocks, GT4Py's default fields."""
    d, _ = shared_step(diffusion, comm, stencil_packs=False)
    ex = gh.make_exchange(d)
    stencil = diffusion.diffusion_step

    @gh.program(comm=comm)
    def jumping(u, v, x, y, n, i0, i1, j0, j1):
        for i in range(n):
            h = ex.start(u)
            for p in range(n):
                if p > i:
                    break
                ex.exchange(x)
                stencil(x, y, i0, i1, j0, j1)
            h.finish()
            stencil(u, v, i0, i1, j0, j1)
            if i > 0:
                continue
            ex.exchange(v)
            stencil(v, u, i0, i1, j0, j1)

    (u, v, _), (x, y, _) = initial_fields(diffusion, d), initial_fields(diffusion, d)
    compiled = [*initial_fields(diffusion, d)[:2], *initial_fields(diffusion, d)[:2]]
    jumping(*compiled, gtx.int32(3), *bounds(d))
    for i in range(3):
        for _ in range(i + 1):
            ex.exchange(x)
            stencil(x, y, *bounds(d))
        ex.exchange(u)
        stencil(u, v, *bounds(d))
        if i == 0:
            ex.exchange(v)
            stencil(v, u, *bounds(d))
    for got, expected in zip(compiled, (u, v, x, y)):
        np.testing.assert_array_equal(got.asnumpy(), expected.asnumpy())


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_python_ints_where_a_gt4py_program_takes_int32(diffusion: ModuleType, comm) -> None:
    """Bounds passed as Python ints, by position or keyword, or from a local constant of the
    step: DaCe types them int64, the GT4Py program takes int32 (narrowed in C, a value beyond
    int32 wrapped: a segfault; GT4Py's own check, an ``assert``, says nothing and is gone
    under ``python -O``): a ``ProgramError`` naming the argument and the types, on every
    rank. ``np.int32`` constants and ``gtx.int32`` arguments: the bits of the call from
    Python; uneven blocks, GT4Py's default fields. Fields of another dtype than the
    program's: a ``ProgramError`` naming the types."""
    d, _ = shared_step(diffusion, comm, stencil_packs=False)
    ex = gh.make_exchange(d)
    stencil = diffusion.diffusion_step
    assert d.owned[1].start == 1  # the constants below

    @gh.program(comm=comm)
    def plain(u, v, i0, i1, j0, j1):
        ex.exchange(u)
        stencil(u, v, i0, i1, j0, j1=j1)  # (a keyword too)

    @gh.program(comm=comm)
    def constant(u, v, i0, i1, j0, j1):
        first = 1
        ex.exchange(u)
        stencil(u, v, i0, i1, first, j1)

    @gh.program(comm=comm)
    def typed(u, v, i0, i1, j0, j1):
        first = np.int32(1)
        ex.exchange(u)
        stencil(u, v, i0, i1, first, j1)

    u, v, _ = initial_fields(diffusion, d)
    with pytest.raises(gh.ProgramError, match="takes i0 as int32; the step passes int64"):
        plain(u, v, *[int(b) for b in bounds(d)])
    with pytest.raises(gh.ProgramError, match="takes j1 as int32; the step passes int64"):
        plain(u, v, *bounds(d)[:3], int(bounds(d)[3]))
    with pytest.raises(gh.ProgramError, match="takes j0 as int32; the step passes int64"):
        constant(u, v, *bounds(d))
    x, y, _ = initial_fields(diffusion, d)
    typed(u, v, *bounds(d))
    ex.exchange(x)
    stencil(x, y, *bounds(d))
    np.testing.assert_array_equal(u.asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(v.asnumpy(), y.asnumpy())
    single = [
        gtx.as_field([diffusion.I, diffusion.J], f.asnumpy().astype(np.float32)) for f in (u, v)
    ]
    with pytest.raises(gh.ProgramError, match="does not take the types .*float32 array"):
        plain(*single, *bounds(d))


@at_most_ranks(3, "which rank lacks the record does not change beyond")
def test_a_step_made_again_loads_its_build_without_parsing(
    diffusion: ModuleType, comm, monkeypatch
) -> None:
    """A step made anew (a later run: ``compiled/step_cache.py``) finds the record of its
    build and loads the binary without parsing, with the same bits, halos included; if one
    rank has no record, every rank parses and builds as before."""
    records = Path(comm.bcast(tempfile.mkdtemp() if comm.rank == 0 else None))
    monkeypatch.setattr(step_cache, "_folder", lambda: records)
    d, _ = shared_step(diffusion, comm, stencil_packs=True)
    ex = gh.make_exchange(d)
    results = []
    for missing_on in (None, None, comm.size - 1):
        if comm.rank == missing_on:
            monkeypatch.setattr(step_cache, "_folder", lambda: records / "none")
        step = make_step(diffusion, ex, comm, stencil_packs=True)
        u, v, w = initial_fields(diffusion, d)
        for _ in range(CALLS):
            step(u, v, w, *bounds(d))
        results.append((u.asnumpy(), w.asnumpy()))
        parsed = comm.allgather(bool(step._lowered))
        assert parsed == [len(results) != 2] * comm.size, f"call {len(results)}: {parsed}"
    for u, w in results[1:]:
        np.testing.assert_array_equal(u, results[0][0])
        np.testing.assert_array_equal(w, results[0][1])
    comm.barrier()
    if comm.rank == 0:
        shutil.rmtree(records)


def test_instances_of_new_shapes_load_copies_of_their_own(comm) -> None:
    """Each set of shapes is an instance of the step of its own, loaded from a copy of its
    library: every rank loads at once, and DaCe's copies (``lib….so_N`` beside the library,
    the first name not taken) were shared by the ranks, one loading a copy another was still
    writing (a rank failed to load it, now and then). Eight level counts, GT4Py's default
    fields, uneven blocks: exact halos, and no copy left in the build folder."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def levels(a):
        ex.exchange(a)

    for count in range(1, 9):
        field = gtx.as_field([I, J, K], filled_local(d, (count,), np.float64))
        levels(field)
        assert_exact_halos(d, [field], [((count,), np.float64, "gt4py")])
    (binary,) = levels._binaries.values()
    comm.barrier()
    assert [p.name for p in Path(binary.folder).glob("build/lib*.so?*")] == []


def test_one_build_serves_every_process_grid(comm, monkeypatch) -> None:
    """Where each message's segments lie in the arenas (``side_by_side``, from the process
    grid) is a run-time value (``place_segments``): the same step lowers to the same build,
    and has the same build key, on any process grid, so a build made on one rank serves the
    step on several (make test's runs on 2 to 4 ranks load the builds of its run on one, and
    check their halos exact)."""
    if comm.size == 1:
        pytest.skip("one process grid only")
    # lowered on each grid, not loaded from what an earlier showing kept
    monkeypatch.setattr(step_cache, "load_lowered", lambda key: None)

    def lowered(on: MPI.Comm) -> tuple[str, str | None]:
        d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=on)
        ex = gh.make_exchange(d, "mpi")

        @gh.program(comm=on)
        def exchange_two(a, b):
            ex.exchange(a, b)

        gt4py_default = gtx.as_field([I, J, K], filled_local(d, (3,), np.float64))
        fields = [filled_local(d, (), np.float64), gt4py_default]
        return exchange_two.to_sdfg(*fields).name, step_cache.value_key(ex.exchange)

    assert lowered(comm) == lowered(MPI.COMM_SELF)


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_a_step_may_be_a_method(diffusion: ModuleType, comm) -> None:
    """ICON4Py's way: a granule keeps its exchange and stencils as attributes and steps in a
    method. ``gh.program`` of a bound method, and ``@gh.program`` in a class body (a step per
    object, made at first use): each resolves the object's attributes like globals and
    computes the same bits as the same step written as a function (uneven blocks, GT4Py's
    default fields)."""
    compiled, compiled_w = run_compiled(diffusion, comm, stencil_packs=False)
    d, _ = shared_step(diffusion, comm, stencil_packs=False)

    class Granule:
        def __init__(self) -> None:
            self.exchange = gh.make_exchange(d)
            self.stencil = diffusion.diffusion_step
            self.bound = gh.program(self.two_steps_of, comm=comm)

        def two_steps_of(self, u, v, w, i0, i1, j0, j1):
            self.exchange.exchange(u)
            self.stencil(u, v, i0, i1, j0, j1)
            h = self.exchange.start(v)
            self.stencil(u, w, i0, i1, j0, j1)
            h.finish()
            self.stencil(v, u, i0, i1, j0, j1)

        two_steps = gh.program(two_steps_of, comm=comm)

    granule = Granule()
    assert granule.two_steps is granule.two_steps  # made once per object
    for step in (granule.bound, granule.two_steps):
        u, v, w = initial_fields(diffusion, d)
        for _ in range(CALLS):
            step(u, v, w, *bounds(d))
        np.testing.assert_array_equal(u.asnumpy(), compiled)
        np.testing.assert_array_equal(w.asnumpy(), compiled_w)

    class Slotted:  # no __dict__ to keep a step per object in: a new one at every access
        __slots__ = ()
        run = gh.program(Granule.two_steps_of, comm=comm)

    with pytest.raises(gh.ProgramError, match="have no __dict__ \\(__slots__\\)"):
        Slotted().run  # noqa: B018 - the access is what is refused
    # the object and what it holds are freed with it (its steps hold it: a cycle the
    # collector sees through)
    granule.big = np.zeros(1000)
    alive, big = weakref.ref(granule), weakref.ref(granule.big)
    del granule, step
    gc.collect()
    assert alive() is None and big() is None


def test_stencil_short_of_the_send_boxes(diffusion: ModuleType, comm) -> None:
    """A stencil whose domain leaves out a strip of the owned cells does not fill its send
    boxes: the exchange packs them itself (decided at run time), with the same bits as the
    runtime path. (With the owned domain, above, the stencil fills them.)"""
    d, _ = shared_step(diffusion, comm, stencil_packs=True)
    i0, i1, j0, j1 = bounds(d)
    domain = [i0, i1, j0 + 1, j1]  # the first owned column is neither updated nor fused
    compiled, compiled_w = run_compiled(diffusion, comm, True, domain)

    ex = gh.make_exchange(d)
    u, v, w = initial_fields(diffusion, d)
    for _ in range(CALLS):
        run_from_python(diffusion, ex, u, v, w, *domain)
    np.testing.assert_array_equal(compiled, u.asnumpy())
    np.testing.assert_array_equal(compiled_w, w.asnumpy())


def lowered_labels(copy_maps: dict) -> dict:
    """A fusion report's copy maps (label -> ``CopyMap``) by their labels in the lowered step,
    where exchanges alike share one function (``shared_functions.py``)."""
    return {shared_name(label, copy.uid): copy for label, copy in copy_maps.items()}


COPY_KIND = re.compile(r"_(pack|unpack|self)_\d")


def copy_calls(sdfg: dace.SDFG) -> list[tuple[str, int]]:
    """A lowered CPU step's copy tasklets, a pack, an unpack and a self copy per direction
    (``arena_lowering.copy_loop``): (kind, loops over fields in it)."""
    return [
        (COPY_KIND.search(n.label)[1], n.code.as_string.count("gh_copy<"))
        for n, _ in sdfg.all_nodes_recursive()
        if isinstance(n, dace.nodes.Tasklet) and "gh_copy<" in n.code.as_string
    ]


def self_copies(sdfg: dace.SDFG) -> list[tuple[str, int]]:
    """``copy_calls`` of the self copies."""
    return [(kind, n) for kind, n in copy_calls(sdfg) if kind == "self"]


def test_compiled_exchange_fills_exact_halos(comm) -> None:
    """Several fields of one call: asymmetric halo, open boundary, levels in Fortran order,
    groups of one shape (a float64 field, a float32 group of two); per direction one tasklet
    packs every field, one unpacks them and one makes the self copies (one rank across the
    periodic axis)."""
    d = gh.CartesianDecomposition((17, 11), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def exchange_only(a, b, c, e, g):
        ex.exchange(a, b, c, e, g)

    specs = [((), np.float64, "C"), ((3,), np.int32, "F"), ((2,), np.float32, "C")]
    specs += [((), np.float32, "C")] * 2  # shaped like the first
    fields = [filled_local(d, levels, dtype, order) for levels, dtype, order in specs]

    assert not exchange_only.fusion_report(*fields).fused, "no copy maps on a CPU"
    calls = collections.Counter(copy_calls(exchange_only.to_sdfg(*fields)))
    directions = len(d.plan().directions)
    # per direction a pack, an unpack and a self copy (no axis has unit stride in every
    # field: none paired), each a loop per field group (4)
    assert calls == {("pack", 4): directions, ("unpack", 4): directions, ("self", 4): directions}
    for _ in range(2):  # the second call reuses the persistent requests
        exchange_only(*fields)
        for field, (levels, dtype, _) in zip(fields, specs):
            np.testing.assert_array_equal(field, expected_local(d, levels, dtype))
        fields = [filled_local(d, levels, dtype, order) for levels, dtype, order in specs]


def padded(a: np.ndarray, allocator=None) -> np.ndarray:
    """``a`` as a view into a buffer with wider rows (in the pool of ``allocator``, if one is
    given): its layout is not dense."""
    buffer = np.full((*a.shape[:-1], a.shape[-1] + 3), SENTINEL, dtype=a.dtype)
    if allocator is not None:
        buffer = in_pool(allocator, buffer)
    view = buffer[..., : a.shape[-1]]
    view[...] = a
    return view


def local_fields(d: gh.CartesianDecomposition, specs: list, allocator=None) -> list:
    """Fields filled by ``filled_local``, per (levels, dtype, order) of ``specs``: order
    ``"C"``/``"F"`` NumPy's, ``"P"`` padded (``padded``), ``"gt4py"`` GT4Py's default (I, J, K)
    field; in the pool of ``allocator`` (``gh.shared_allocator``) if one is given."""
    made = []
    for levels, dtype, order in specs:
        values = filled_local(d, levels, dtype, "F" if order == "F" else "C")
        if order == "gt4py":
            made.append(gtx.as_field([I, J, K], values, allocator=allocator))
            continue
        if order == "P":
            values = padded(values, allocator)
        elif allocator is not None:
            values = in_pool(allocator, values, order)
        made.append(values)
    return made


def in_pool(allocator, values: np.ndarray, order: str = "C") -> np.ndarray:
    """A copy of ``values`` in the pool of ``allocator``, in memory order ``order``."""
    copy = allocator.empty(values.shape, values.dtype, order)
    copy[...] = values
    return copy


def assert_exact_halos(d: gh.CartesianDecomposition, fields: list, specs: list) -> None:
    """Each of ``fields`` (made by ``local_fields`` from ``specs``) holds what an exchange
    leaves in it (``expected_local``)."""
    for field, (levels, dtype, order) in zip(fields, specs):
        got = field.asnumpy() if order == "gt4py" else field
        np.testing.assert_array_equal(got, expected_local(d, levels, dtype))


@at_most_ranks(3, "a process grid of one row: 3 ranks have a middle one, 4 add nothing")
@pytest.mark.parametrize("layout", ["C", "F", "gt4py"])
@pytest.mark.parametrize("split", [0, 1], ids=["split-axis-0", "split-axis-1"])
def test_self_copies_across_the_unit_stride_axis(comm, layout, split) -> None:
    """A periodic axis held by one rank: the two faces across the fields' unit-stride axis are
    copied together (``ArenaLowering._self_pairs``; axis 1 of C-ordered fields, axis 0 of
    Fortran-ordered and GT4Py's default ones): exact halos, blocking and split phase, with
    levels, uneven blocks; 7 self copies for the 8 directions of each exchange."""
    grid = (comm.size, 1) if split == 0 else (1, comm.size)
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, proc_grid=grid, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def step(a, b, c, e, f):
        ex.exchange(a, b)
        h = ex.start(f)
        ex.exchange(c, e)
        h.finish()

    levels = (3,) if layout == "gt4py" else ()
    dtypes = [np.float64, np.float64, np.float64, np.int32, np.float32]
    specs = [(levels, dtype, layout) for dtype in dtypes]
    fields = local_fields(d, specs)
    assert len(self_copies(step.to_sdfg(*fields))) == 3 * 7  # 3 exchanges
    for _ in range(2):
        fields = local_fields(d, specs)
        step(*fields)
        assert_exact_halos(d, fields, specs)


@at_most_ranks(2, "one even and one odd rank show it")
def test_strides_that_coincide_on_some_ranks_only(comm) -> None:
    """A second call whose two fields' strides coincide on even ranks only (one padded on odd
    ranks) runs on every rank: strides are no part of a build's key, which would send the odd
    ranks alone into a collective build (a hang)."""
    d = gh.CartesianDecomposition((23, 19), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def exchange_both(a, b):
        ex.exchange(a, b)

    for pad_odd_ranks in (False, True):
        fields = [filled_local(d, (), np.float64), filled_local(d, (), np.float64)]
        if pad_odd_ranks and comm.rank % 2:
            fields[1] = padded(fields[1])
        exchange_both(*fields)
        for field in fields:
            np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


@at_most_ranks(3, "a process grid of one row: 3 ranks have a middle one, 4 add nothing")
@pytest.mark.parametrize("split", [0, 1], ids=["split-axis-0", "split-axis-1"])
def test_blocks_one_cell_wide_on_some_ranks(comm, split) -> None:
    """The last rank's block is one cell wide across the split axis (no halo there): its
    arrays' neighbouring axis has element stride 1 as well (C-ordered split along axis 1,
    Fortran-ordered along axis 0), the other ranks' not. Each build takes the strides that
    are 1 on every rank, and every rank runs the same build: its C arrays also fit the
    Fortran build (and the reverse), the others' do not (the ranks named different builds
    and waited for each other before). Calls in C, Fortran, GT4Py's and C order again, new
    arrays each time: exact halos; an order seen before builds nothing."""
    shape = [7, 7]
    shape[split] = 2 * comm.size - 1  # blocks of 2 cells, the last of 1
    halo = (0, 1) if split == 0 else (1, 0)
    grid = (comm.size, 1) if split == 0 else (1, comm.size)
    d = gh.CartesianDecomposition(shape, halo=halo, periodic=True, proc_grid=grid, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def step(a, b):
        ex.exchange(a)
        h = ex.start(b)
        h.finish()

    for layout in ["F", "C", "gt4py", "F", "C"]:
        levels = (3,) if layout == "gt4py" else ()  # (GT4Py's fields here are I, J, K)
        specs = [(levels, np.float64, layout), (levels, np.int32, layout)]
        fields = local_fields(d, specs)
        step(*fields)
        assert_exact_halos(d, fields, specs)
    assert len(step._binaries) <= 3


@at_most_ranks(2, "the first rank and another show it")
@pytest.mark.parametrize("layout", ["C", "gt4py"])
def test_two_decompositions_whose_shapes_coincide_on_some_ranks(comm, layout) -> None:
    """Cells (12, 11) and faces (13, 11) split along axis 0: the first rank's cell and face
    blocks differ in shape, the others' are equal. A build serves every rank (arrays share
    size symbols where their shapes are equal on every rank) with exact halos of both; a
    third argument shaped like the cells, then like the faces, then like the cells again:
    the ranks whose blocks are equal could run the first build every time, the first rank
    cannot, and every rank runs the same one."""
    cells = gh.CartesianDecomposition((12, 11), halo=1, proc_grid=(comm.size, 1), comm=comm)
    faces = gh.CartesianDecomposition((13, 11), halo=1, proc_grid=(comm.size, 1), comm=comm)
    on_cells, on_faces = gh.make_exchange(cells), gh.make_exchange(faces)

    @gh.program(comm=comm)
    def step(p, u, w):
        on_cells.exchange(p)
        on_faces.exchange(u)
        w[0, 0] = 7.0

    specs = [((2,) if layout == "gt4py" else (), np.float64, layout)]
    for like in (cells, faces, cells):
        p, u = local_fields(cells, specs)[0], local_fields(faces, specs)[0]
        w = np.zeros(like.allocated_shape)
        step(p, u, w)
        assert_exact_halos(cells, [p], specs)
        assert_exact_halos(faces, [u], specs)
        assert w[0, 0] == 7.0
    assert len(step._binaries) <= 2


@at_most_ranks(2, "the calls kept, not the decomposition, are under test")
@pytest.mark.parametrize("order", ["C", "gt4py"])
def test_buffers_swapped_between_calls_fill_exact_halos(comm, order) -> None:
    """A model swapping two buffers between calls (``x, y = y, x``), a third now and then: the
    calls run from the arguments kept by one of the last calls where they can, on every
    rank alike, and each fills its own arrays' halos exactly (stale again before each call),
    on uneven blocks, with GT4Py's default fields."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def step(a, b):
        ex.exchange(a, b)

    spec = ((3,), np.float64, order)
    arrays = local_fields(d, [spec] * 3)
    for a, b in [(0, 1), (1, 0), (0, 1), (1, 0), (2, 0), (1, 0), (0, 1), (0, 2), (2, 0)]:
        pair = [arrays[a], arrays[b]]
        for field in pair:
            (field.ndarray if order == "gt4py" else field)[...] = filled_local(d, *spec[:2])
        step(*pair)
        assert_exact_halos(d, pair, [spec] * 2)


@pytest.mark.parametrize("in_place", [None, 8], ids=["packed", "in-place"])
@pytest.mark.parametrize("order", ["C", "gt4py"])
def test_ranks_out_of_step_inside_a_step_raise(comm, order, in_place) -> None:
    """A loop around an exchange whose trips differ between ranks, in kept calls (straight to
    the binary: nothing collective before them): after a first call in step, rank 0 makes two
    trips in a call and one in the next, the others one and then two. Rank 0's second
    exchange pairs with its neighbours' exchange of their next call: messages of the same
    size (wrong halos, silently, before the stamps). Rank 0 raises after its first call out
    of step, its neighbours after their second; back in step, exact halos. Runs sent in
    place (their stamp a message of its own) and packed; uneven blocks, GT4Py's default
    fields."""
    if comm.size == 1:
        pytest.skip("ranks out of step need two")
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm, in_place_min_bytes=in_place)
    def step(a, trips):
        for _ in range(trips[0]):
            ex.exchange(a)

    spec = ((3,), np.float64, order)
    [field] = local_fields(d, [spec])
    calls_out_of_step(step, field, any(x.rank == 0 for x in d.plan().directions))
    (field.ndarray if order == "gt4py" else field)[...] = filled_local(d, *spec[:2])
    step(field, np.ones(1, dtype=np.int32))
    assert_exact_halos(d, [field], [spec])


@pytest.mark.parametrize("order", ["C", "gt4py"])
def test_ranks_out_of_step_between_kept_calls_raise(comm, order) -> None:
    """Two kept calls with fields of other levels, and the first rank one call out of step
    with the others: every rank goes straight to the binary, no agreement between them, and
    the messages are of other sizes (they filled halos with wrong values, silently). Each rank
    that receives such a message raises (here every rank: all are neighbours of the first);
    back in step, exact halos again. Uneven blocks, GT4Py's default fields."""
    if comm.size == 1:
        pytest.skip("ranks out of step need two")
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def step(a):
        ex.exchange(a)

    specs = [((4,), np.float64, order), ((2,), np.float64, order)]
    fields = local_fields(d, specs)
    for field, spec in zip(fields, specs):  # both kept
        step(field)
        assert_exact_halos(d, [field], [spec])
    mine = 0 if comm.rank == 0 else 1
    with pytest.raises(gh.RanksDisagreeError, match="received .* unlike expected"):
        step(fields[mine])
    for k in (1, 0):
        (fields[k].ndarray if order == "gt4py" else fields[k])[...] = filled_local(d, *specs[k][:2])
        step(fields[k])
        assert_exact_halos(d, [fields[k]], [specs[k]])


@at_most_ranks(2, "two ranks of other values show it")
def test_scalars_equal_to_the_last_call_s_take_the_last_call(comm) -> None:
    """A scalar argument recomputed before each call, of a value that differs between ranks:
    CPython keeps one object for small ints (here on rank 0 only), so by identity it was the
    last call's on some ranks and new on others, and those ranks went on to compare builds
    with ranks that did not come (a hang). Scalars are compared by type and value: every
    rank takes the last call again; exact halos."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def step(a, b, n):
        ex.exchange(a)
        b[0] = n

    a, b = filled_local(d, (), np.float64), np.zeros(1)
    for _ in range(4):
        n = int("250") + 10 * comm.rank  # 250 is a cached int, 260 and above are made anew
        step(a, b, n)
        np.testing.assert_array_equal(a, expected_local(d, (), np.float64))
        assert b[0] == n


@pytest.mark.parametrize("min_bytes", [1, None], ids=["in-place", "packed"])
def test_ranks_passing_arrays_of_other_orders(comm, min_bytes) -> None:
    """All ranks C-ordered, all Fortran-ordered, then the first rank C-ordered and the others
    Fortran-ordered (and GT4Py's default fields against C-ordered ones): each rank's arrays
    fit a build of its own order, but ranks running
    different builds cut runs sent in place differently (they waited for good, silently).
    The ranks name different builds, meet, and run one that fits all: exact halos."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm, in_place_min_bytes=min_bytes)
    def step(a, b):
        ex.exchange(a)
        h = ex.start(b)
        h.finish()

    first = comm.rank == 0
    mixed = (["C" if first else "F"] * 2, ["gt4py" if first else "C"] * 2)
    for orders in (["C", "C"], ["F", "F"], *mixed, ["C", "C"]):
        specs = [((4,), np.float64, orders[0]), ((4,), np.float32, orders[1])]
        fields = local_fields(d, specs)
        step(*fields)
        assert_exact_halos(d, fields, specs)


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
@pytest.mark.parametrize("annotations", ["strings", "evaluated"])
@pytest.mark.parametrize("layout", ["C", "gt4py"])
def test_annotations_do_not_type_a_step(comm, annotations, layout) -> None:
    """A step's parameters take their types from the call's arguments, annotated or not:
    an array annotated C-ordered (DaCe would take its strides over a padded GT4Py field's:
    wrong halos) and scalars annotated ``dace.int64`` as strings (this module's ``from
    __future__ import annotations``: DaCe read them as arrays of characters, the step did
    not compile). Exact halos on uneven blocks, the map over scalar bounds written."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    def step(a: dace.float64[GLOBAL_SHAPE], c: dace.int64[8], i0: dace.int64, i1: dace.int64):
        ex.exchange(a)
        for i in dace.map[i0:i1]:
            c[i] = i

    if annotations == "evaluated":  # as in a module without ``from __future__ import ...``
        step.__annotations__ = inspect.get_annotations(step, eval_str=True)
    compiled = gh.program(step, comm=comm)
    specs = [((2,) if layout == "gt4py" else (), np.float64, layout)]
    for _ in range(2):
        a, c = local_fields(d, specs)[0], np.full(8, -1, np.int64)
        compiled(a, c, 2, 5)
        assert_exact_halos(d, [a], specs)
        np.testing.assert_array_equal(c, [-1, -1, 2, 3, 4, -1, -1, -1])


@pytest.mark.parametrize("min_bytes", [1, None], ids=["in-place", "packed"])
def test_runs_sent_in_place_fill_exact_halos(comm, min_bytes) -> None:
    """Boxes that are contiguous runs go field to field as MPI messages of their own
    (``in_place_min_bytes=1``: every box cut into at most ``MAX_RUNS`` runs), the rest through
    the arenas: C, Fortran and padded layouts, two fields sharing an arena, blocking and
    split phase, open and periodic axes, and new arrays at the second call. A field padded on
    odd ranks only (GT4Py pads some blocks and not others) shares an arena with a dense one:
    the same code on every rank, the padded ranks move the runs through their arenas. A GT4Py
    field of its default allocation (``I`` of unit stride on a CPU: not C-ordered, so packed)
    shares e's arena."""
    d = gh.CartesianDecomposition(
        (23, 19, 6), halo=((2, 1), (1, 2), (0, 0)), periodic=(True, False, True)
    )
    ex = gh.make_exchange(d)

    @gh.program(comm=comm, in_place_min_bytes=min_bytes)
    def exchange_runs(a, b, c, e, g, u):
        h = ex.start(a, c, g)
        ex.exchange(b, e, u)
        h.finish()

    specs = [((), np.float64, "C"), ((2,), np.int32, "F"), ((), np.float32, "P")]
    specs.append(((), np.float64, "C"))  # shares a's arena
    specs.append(((), np.float64, "P" if comm.rank % 2 else "C"))  # shares a's arena
    specs.append(((), np.float64, "gt4py"))  # shares e's arena

    def fresh():
        return local_fields(d, specs)

    fields = fresh()
    lowered = exchange_runs.to_sdfg(*fields)
    starts = [
        n.code.as_string
        for n, _ in lowered.all_nodes_recursive()
        if isinstance(n, dace.nodes.Tasklet) and "MPI_Startall" in n.code.as_string
    ]
    assert len(starts) == 2
    # runs are C-ordered: the exchange with the Fortran-ordered b packs everything
    in_place = ["MPI_Isend(base[f]" in code and "(char*)field" in code for code in starts]
    assert sorted(in_place) == [False, min_bytes == 1]
    for _ in range(2):
        exchange_runs(*fields)
        for field, (levels, dtype, _) in zip(fields, specs):
            got = field if isinstance(field, np.ndarray) else field.asnumpy()
            np.testing.assert_array_equal(got, expected_local(d, levels, dtype))
        fields = fresh()


@at_most_ranks(3, "a process grid of one row: 3 ranks have a middle one, 4 add nothing")
@pytest.mark.parametrize("min_bytes", [1, None], ids=["in-place", "packed"])
@pytest.mark.parametrize("periodic", [True, False], ids=["periodic", "open"])
def test_faces_carry_the_halo_of_an_axis_that_wraps(comm, min_bytes, periodic) -> None:
    """Axis 1 periodic and held whole by every rank (``proc_grid=(size, 1)``): a blocking
    exchange copies its halo first and sends each face across axis 0 as whole planes, the
    corners in them (``cartesian.wrapped_box``); a split pair in the same step sends the plain
    boxes and copies after. Axis 0 periodic or open (on one rank: every direction is the
    rank itself, or beyond an open boundary), asymmetric halos, uneven blocks, levels,
    C-ordered fields in place (a run per halo layer) and packed, a field padded on odd ranks
    in the same arena, GT4Py's default fields; and a producer map writing a whole field, its
    halo too, right before the blocking exchange: its values of axis 1's halo are stale, so
    it packs nothing itself. Exact halos at two calls, on new arrays at the second."""
    d = gh.CartesianDecomposition(
        (19, 13),
        halo=((2, 1), (1, 2)),
        periodic=(periodic, True),
        proc_grid=(comm.size, 1),
        comm=comm,
    )
    ex = gh.make_exchange(d)

    def step(a, b, c, e, f, g):
        for i, j, k in dace.map[0 : a.shape[0], 0 : a.shape[1], 0 : a.shape[2]]:
            b[i, j, k] = a[i, j, k] * 2.0
        ex.exchange(b, e, f, g)
        h = ex.start(c)
        h.finish()

    compiled = gh.program(step, comm=comm, in_place_min_bytes=min_bytes, pack_in_producers=True)
    specs = [((4,), np.float64, "C"), ((4,), np.float64, "C"), ((4,), np.int32, "C")]
    specs.append(((4,), np.float32, "C"))
    specs.append(((4,), np.float32, "P" if comm.rank % 2 else "C"))  # shares e's arena
    specs.append(((3,), np.float64, "gt4py"))
    fields = local_fields(d, specs)
    assert compiled.fusion_report(*fields).producers, "the map writes b's send arena"
    for _ in range(2):
        compiled(*fields)
        for n, (field, (levels, dtype, _)) in enumerate(zip(fields, specs)):
            got = field if isinstance(field, np.ndarray) else field.asnumpy()
            expected = expected_local(d, levels, dtype)
            if n == 0:  # a: read only
                expected = filled_local(d, levels, dtype)
            if n == 1:  # b: twice a, halos beyond an open boundary too
                expected = expected * 2
            np.testing.assert_array_equal(got, expected)
        fields = local_fields(d, specs)


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_exchanges_alike_share_one_function(comm, backend) -> None:
    """Exchanges alike (fields of one count, dtype, layout and halo; one transport and phase)
    compile to one C++ function (``shared_functions.py``), each keeping its own requests,
    tags and segment offsets: two blocking exchanges, and two split pairs in flight at once,
    of fields holding different values, NumPy's and GT4Py's default (padded) ones, on uneven
    blocks. Exact halos at the first call and at a second one (on new arrays)."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=((2, 1), (1, 2)), periodic=(True, False))
    ex = gh.make_exchange(d, backend)

    @gh.program(comm=comm)
    def alike(a, b, c, e, f, g):
        ex.exchange(a, b)
        ex.exchange(c, e)  # alike the first
        h = ex.start(f)
        k = ex.start(g)  # alike h, in flight with it
        k.finish()
        h.finish()

    layouts = ["numpy", "gt4py", "numpy", "gt4py", "gt4py", "gt4py"]
    lowered = alike.to_sdfg(*distinct_fields(d, layouts))
    nested = [n.sdfg for n, _ in lowered.all_nodes_recursive() if isinstance(n, NestedSDFG)]
    assert len(nested) == 6  # two blocking exchanges, two starts, two finishes
    assert len({sdfg.hash_sdfg() for sdfg in nested}) == 3, "one function per phase"
    for _ in range(2):
        made = distinct_fields(d, layouts)
        alike(*made)
        assert_distinct_halos(d, made)
    # the code this rank runs: three exchange functions; MPI's copies all by the one gh_copy
    # (GHEX packs itself)
    (binary,) = alike._binaries.values()
    code = "".join(p.read_text() for p in Path(binary.folder).glob("src/cpu/*.cpp"))
    assert len(re.findall(r"^inline void \w+\(", code, re.MULTILINE)) == 3
    assert code.count(" void gh_copy(") == (backend == "mpi")


def distinct_fields(d: gh.CartesianDecomposition, layouts: list[str]) -> list:
    """2-D float64 fields filled by ``filled_local``, field ``n``'s owned cells raised by
    ``1000 n`` (no message can go astray unseen); ``"gt4py"``: GT4Py's default field, else
    NumPy's."""
    made = []
    for n, layout in enumerate(layouts):
        local = filled_local(d, (), np.float64)
        local[d.owned] += 1000 * n
        made.append(gtx.as_field([I, J], local) if layout == "gt4py" else local)
    return made


def assert_distinct_halos(d: gh.CartesianDecomposition, fields: list) -> None:
    """Each of ``distinct_fields``' fields holds its exact halo after an exchange."""
    for n, field in enumerate(fields):
        expected = expected_local(d, (), np.float64)
        expected[expected != SENTINEL] += 1000 * n
        local = field.asnumpy() if isinstance(field, gtx.Field) else field
        np.testing.assert_array_equal(local, expected)


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_new_shapes_reuse_the_build_with_buffers_of_their_own(comm, backend) -> None:
    """Fields with more levels than at the first call (the same exchange, the same build):
    the message buffers and persistent requests (GHEX: patterns) must be those of the new
    shapes, and the first shapes must still work after."""
    d = gh.CartesianDecomposition((17, 11), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d, backend=backend)

    @gh.program(comm=comm)
    def exchange_levels(a):
        ex.exchange(a)

    for levels in [(2,), (7,), (2,)]:
        field = filled_local(d, levels, np.float64)
        exchange_levels(field)
        np.testing.assert_array_equal(field, expected_local(d, levels, np.float64))
    assert len(exchange_levels._binaries) == 1 and len(exchange_levels._builds) == 2


@at_most_ranks(2, "the frontend path, not the decomposition, is under test")
def test_exchange_in_a_plain_dace_program(comm) -> None:
    """``ex.exchange`` inside ``@dace.program`` (not ``@gh.program``): DaCe expands the node
    with its default implementation, buffers inside the expansion; each rank builds its own
    program (DaCe's per-rank build folders under MPI)."""
    d = gh.CartesianDecomposition((17, 11), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d)

    @dace.program
    def exchange_plain(a, b):
        ex.exchange(a, b)

    specs = [((), np.float64, "C"), ((3,), np.int32, "F")]
    for _ in range(2):
        fields = [filled_local(d, levels, dtype, order) for levels, dtype, order in specs]
        exchange_plain(*fields)
        for field, (levels, dtype, _) in zip(fields, specs):
            np.testing.assert_array_equal(field, expected_local(d, levels, dtype))


def test_one_copy_map_per_arena_fills_exact_halos(comm) -> None:
    """``copy_maps="arena"`` (the GPU's default, one kernel per arena there) run on the CPU:
    the same halos as the maps per direction, blocking and split phase."""
    d = gh.CartesianDecomposition((17, 11), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d)

    @gh.program(comm=comm, copy_maps="arena")
    def exchange_only(a, b, c, e):
        h = ex.start(a, b)
        ex.exchange(c, e)
        h.finish()

    specs = [((), np.float64, "C"), ((3,), np.int32, "F"), ((2,), np.float32, "C")]
    specs.append(((), np.float32, "C"))
    fields = [filled_local(d, levels, dtype, order) for levels, dtype, order in specs]
    lowered = exchange_only.to_sdfg(*fields)
    labels = [n.map.label for n, _ in lowered.all_nodes_recursive() if isinstance(n, MapEntry)]
    kinds = collections.Counter(m[1] for m in map(ARENA_COPY.search, labels) if m)
    assert kinds == {"pack": 4, "unpack": 4}  # one per arena: 2 exchanges x 2 groups
    copy_maps = lowered_labels(exchange_only.fusion_report(*fields).copy_maps)
    assert {copy_maps[label].kind for label in labels if label in copy_maps} <= {"self"}
    for _ in range(2):
        exchange_only(*fields)
        for field, (levels, dtype, _) in zip(fields, specs):
            np.testing.assert_array_equal(field, expected_local(d, levels, dtype))
        fields = [filled_local(d, levels, dtype, order) for levels, dtype, order in specs]


@at_most_ranks(2, "the SDFG is the same on any number of ranks")
def test_step_sdfg_structure(diffusion: ModuleType, comm) -> None:
    d, step = shared_step(diffusion, comm, stencil_packs=True)
    args = (*initial_fields(diffusion, d), *bounds(d))

    parsed = step.to_sdfg(*args, lowered=False)
    exchanges = [n for n, _ in parsed.all_nodes_recursive() if isinstance(n, HaloExchange)]
    assert sorted(n.spec.phase for n in exchanges) == ["exchange", "finish", "start"]
    (start,) = (n for n in exchanges if n.spec.phase == "start")
    (finish,) = (n for n in exchanges if n.spec.phase == "finish")
    # a split pair shares its requests and buffers: one description but for the phase
    assert dataclasses.replace(start.spec, phase="finish") == finish.spec

    lowered = step.to_sdfg(*args)
    nodes = [n for n, _ in lowered.all_nodes_recursive()]
    assert not any(isinstance(n, dace.nodes.LibraryNode) for n in nodes)
    assert not lowered.callback_mapping, "a Python callback in the compiled step"
    kinds = collections.Counter(kind for kind, _ in copy_calls(lowered))
    # per direction, packed unless the producer stencil did (a run-time test), and unpacked
    assert kinds["pack"] == kinds["unpack"] == 2 * 8  # 8 directions in 2-D

    # ex.start(v) right after the stencil writing v: that stencil's map packs v's messages;
    # ex.exchange(u) at the top of the step has no producer in the step
    producers = step.fusion_report(*args).producers
    assert [labels for labels in producers.values()] == [["map_0_fieldop"]]
    fused = [
        (n, state)
        for n, state in lowered.all_nodes_recursive()
        if isinstance(n, dace.nodes.Tasklet) and n.label.endswith("_pack")
    ]
    assert len(fused) == 1, "one stencil map writes a send arena"
    tasklet, state = fused[0]
    assert state.entry_node(tasklet).map.label == "map_0_fieldop"  # inside the stencil map
    (arena,) = {e.data.data for e in state.out_edges(tasklet)} - {"v"}
    start_reads = {
        e.data.data
        for n, parent in lowered.all_nodes_recursive()
        if isinstance(n, dace.nodes.NestedSDFG) and n.sdfg.name.endswith("_start")
        for e in parent.in_edges(n)
    }
    assert {"v", arena} <= start_reads, "the split start sends what the stencil packed"
    _, unpacked = shared_step(diffusion, comm, stencil_packs=False)
    assert not unpacked.fusion_report(*args).producers  # the CPU default

    code = lowered.generate_code()[0].clean_code
    assert code.count("MPI_Startall(") == 2
    # where the segments lie in the arenas is computed at an instance's first call only
    assert code.count("_placed_ready) {") == code.count("_placed_ready = 1;") == 2
    # per exchange, one wait for the persistent requests (sizes received checked): GT4Py's CPU
    # fields are contiguous along axis 0, and runs sent in place are C-ordered
    # (test_runs_sent_in_place_...)
    assert code.count("gt4py_halo_mpi::wait_checked(") == 2 and "MPI_Isend(" not in code
    assert "MPI_Send_init" in code and "MPI_COMM_WORLD" not in code


@pytest.mark.parametrize("transport", GPU_TRANSPORTS)
def test_compiled_exchange_on_the_gpu(comm, transport) -> None:
    """Uneven blocks, asymmetric halos; CuPy arrays in C and Fortran order and GT4Py's default
    GPU (I, J, K) field in one exchange: exact halos. Runs where CuPy and a GPU are present;
    skipped elsewhere (CI has no GPU)."""
    cupy = gpu_or_skip(comm, transport)
    d = gh.CartesianDecomposition((17, 11), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d, backend=transport)

    @gh.program(comm=comm, device="gpu")
    def exchange_only(a, b, c):
        ex.exchange(a, b, c)

    specs = [((), np.float64, "C"), ((3,), np.int32, "F"), ((5,), np.float64, "C")]

    def fresh() -> list:
        made = [cupy.asarray(filled_local(d, *spec)) for spec in specs]
        made[2] = gtx.as_field([I, J, K], made[2])  # GT4Py's layout for the GPU
        return made

    for _ in range(2):  # the second call reuses the requests (nccl: the communicator)
        device = fresh()
        exchange_only(*device)
        for field, (levels, dtype, _) in zip(device, specs):
            got = field.get() if isinstance(field, cupy.ndarray) else field.asnumpy()
            np.testing.assert_array_equal(got, expected_local(d, levels, dtype))


def map_step(ex: gh.Exchange):
    """A DaCe map writing ``b`` and a split exchange of ``b`` right after it, in one state
    after simplification (the stencil packs there ahead of the start node)."""

    def step(a, b):
        ex.exchange(a)
        for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
            b[i, j] = a[i + 1, j] + a[i - 1, j] + a[i, j + 1] + a[i, j - 1]
        h = ex.start(b)
        h.finish()

    return step


def called_step(ex: gh.Exchange):
    """Stencils called as functions around the exchanges: after simplification the
    expansions share states with them (a GPU step gives each a state of its own first)."""

    def step(a, b):
        ex.exchange(a)
        laplace(a, b)
        h = ex.start(b)
        h.finish()
        laplace(b, a)

    return step


def laplace(a, b):
    for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
        b[i, j] = a[i + 1, j] + a[i - 1, j] + a[i, j + 1] + a[i, j - 1]


def run_map_step(step: Callable[..., None], fields: list) -> None:
    for _ in range(CALLS):
        step(*fields)
        step(*fields[::-1])


def test_the_gpu_defaults_on_the_cpu(comm) -> None:
    """The stencil packing in the exchange's own state and one copy map per arena (what a
    GPU step does by default), on the CPU: the same bits as the CPU defaults."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True)
    step = map_step(gh.make_exchange(d))
    plain = gh.program(step, comm=comm)
    gpu_like = gh.program(step, comm=comm, pack_in_producers=True, copy_maps="arena")
    expected = [filled_local(d, (), np.float64), np.zeros(d.allocated_shape)]
    fields = [f.copy() for f in expected]
    assert gpu_like.fusion_report(*fields).producers, "the map packs b"
    run_map_step(plain, expected)
    run_map_step(gpu_like, fields)
    for field, reference in zip(fields, expected):
        np.testing.assert_array_equal(field, reference)


@pytest.mark.parametrize("layout", ["numpy", "gt4py"])
def test_stencil_packing_beside_a_map_over_scalar_bounds(comm, layout) -> None:
    """A producer map whose bounds are scalar arguments of the step (DaCe reads them into the
    map through connectors): the exchange packs in maps of its own, as without stencil
    packing (it failed to compile: the coverage test named the map's range variables outside
    it). Exact halos on uneven blocks, NumPy's and GT4Py's default fields."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True)
    ex = gh.make_exchange(d)

    def step(a, b, i0, i1, j0, j1):  # (no annotations: this module's are strings)
        for i, j in dace.map[i0:i1, j0:j1]:
            b[i, j] = a[i, j] + 1.0
        ex.exchange(b)

    packed = gh.program(step, comm=comm, pack_in_producers=True)
    bounds = [x for s in d.owned for x in (s.start, s.stop)]
    a = filled_local(d, (), np.float64)
    b = np.full(d.allocated_shape, SENTINEL)
    if layout == "gt4py":
        a, b = gtx.as_field([I, J], a), gtx.as_field([I, J], b)
    for _ in range(2):
        packed(a, b, *bounds)
    expected = expected_local(d, (), np.float64)
    expected[expected != SENTINEL] += 1.0
    np.testing.assert_array_equal(b.asnumpy() if layout == "gt4py" else b, expected)


@pytest.mark.parametrize("transport", GPU_TRANSPORTS)
@pytest.mark.parametrize("make_step", [map_step, called_step])
def test_compiled_step_on_the_gpu_equals_the_cpu(comm, make_step, transport) -> None:
    """The same step on the GPU, with its defaults: the same bits as on the CPU (with the
    mpi transport). Runs where CuPy and a GPU are present; skipped elsewhere (CI has no GPU)."""
    cupy = gpu_or_skip(comm, transport)
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True)
    step = make_step(gh.make_exchange(d, backend=transport))
    on_cpu = gh.program(make_step(gh.make_exchange(d, backend="mpi")), comm=comm)
    on_gpu = gh.program(step, comm=comm, device="gpu")
    host = [filled_local(d, (), np.float64), np.zeros(d.allocated_shape)]
    device = [cupy.asarray(f) for f in host]
    if make_step is map_step:
        assert on_gpu.fusion_report(*device).producers, "the stencil kernel packs b"
    run_map_step(on_cpu, host)
    run_map_step(on_gpu, device)
    for cpu, gpu in zip(host, device):
        np.testing.assert_array_equal(gpu.get(), cpu)


def test_gt4py_programs_in_a_gpu_step_equal_the_cpu(diffusion: ModuleType, comm) -> None:
    """The demo's step of GT4Py programs on GT4Py's DaCe GPU backend, in a GPU step, over
    GT4Py's default GPU fields and uneven blocks: the same bits as the CPU step. Runs where
    CuPy and a GPU are present; skipped elsewhere (CI has no GPU)."""
    cupy = gpu_or_skip(comm)
    d, on_cpu = shared_step(diffusion, comm, stencil_packs=False)
    on_gpu = make_step(diffusion, gh.make_exchange(d), comm, stencil_packs=True, device="gpu")
    host = initial_fields(diffusion, d)
    IJ = [diffusion.I, diffusion.J]
    device = [gtx.as_field(IJ, cupy.asarray(f.asnumpy())) for f in host]
    for _ in range(CALLS):
        on_cpu(*host, *bounds(d))
        on_gpu(*device, *bounds(d))
    for cpu, gpu in zip(host, device):
        np.testing.assert_array_equal(gpu.asnumpy(), cpu.asnumpy())


@pytest.mark.parametrize("backend", ["mpi", "ghex", "shm"])
def test_compiled_unstructured_exchange_fills_exact_halos(comm, backend) -> None:
    """A mesh scattered by random partitions, halos in shuffled order, two dims in one step,
    one of them split around the other; with each transport, whose calls the generated
    code holds (``shm``: the fields in the ranks' shared memory). One field is GT4Py's
    default (Edge, K) field (axis 0 contiguous, padded to a multiple of 8 entries: its outer
    stride is no rank's edge count here), in one exchange with dense C-ordered fields; with
    mpi the per-field copy maps of e2 and e4 (one shape, not the exchange's first) fused."""
    from test_unstructured_exchange import local_field, random_mesh, values

    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=13))
    ex = gh.make_exchange(d, backend=backend)
    allocator = gh.shared_allocator(d, 4 << 20) if backend == "shm" else None

    @gh.program(comm=comm)
    def exchange_cells_and_edges(c, e, e2, e3, e4):
        h = ex.start(e, e2, e3, e4, dim="edge")
        ex.exchange(c, dim="cell")
        h.finish()

    specs = {"c": ("cell", (4,), np.float32, "F"), "e": ("edge", (), np.float64, "C")}
    specs["e2"] = ("edge", (2,), np.int64, "C")
    specs["e3"] = ("edge", (3,), np.float64, "gt4py")
    specs["e4"] = ("edge", (2,), np.float32, "C")

    def field(dim, levels, dtype, order):
        if order == "gt4py":
            return gtx.as_field([EDGE, K], local_field(d, dim, levels, dtype), allocator=allocator)
        made = local_field(d, dim, levels, dtype, order)
        return made if allocator is None else in_pool(allocator, made, order)

    lowered = exchange_cells_and_edges.to_sdfg(*(field(*spec) for spec in specs.values()))
    assert not any(isinstance(n, dace.nodes.LibraryNode) for n, _ in lowered.all_nodes_recursive())
    report = exchange_cells_and_edges.fusion_report(*(field(*spec) for spec in specs.values()))
    assert sorted(map(len, report.fused.values())) == ([2, 2] if backend == "mpi" else [])
    code = lowered.generate_code()[0].clean_code
    assert ("MPI_Startall(" in code) == (backend == "mpi")
    assert (code.count("gt4py_halo::GhexUnstructured(") == 2) == (backend == "ghex")
    assert ("gt4py_halo_shm::finish(" in code) == (backend == "shm")
    for _ in range(2):  # the second call reuses the persistent requests (GHEX: patterns)
        fields = {k: field(*spec) for k, spec in specs.items()}
        exchange_cells_and_edges(*fields.values())
        for key, (dim, levels, dtype, _) in specs.items():
            expected = values(np.concatenate([d.owned_gids[dim], d.halo_gids[dim]]), levels, dtype)
            got = fields[key].asnumpy() if key == "e3" else fields[key]
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_unstructured_exchanges_alike_share_one_function(comm, backend) -> None:
    """Unstructured exchanges alike share one function too (``shared_functions.py``): two
    exchanges of GT4Py's default (Edge, K) fields (padded) one after the other, and one of a
    C-ordered cell field (another layout: a function of its own), each field with values of
    its own; exact halos at the first and a second call."""
    from test_unstructured_exchange import local_field, random_mesh, values

    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=5))
    ex = gh.make_exchange(d, backend=backend)

    @gh.program(comm=comm)
    def three(e, e2, c):
        ex.exchange(e, dim="edge")
        ex.exchange(e2, dim="edge")  # alike the first
        ex.exchange(c, dim="cell")

    specs = [("edge", 3.0), ("edge", 5.0), ("cell", 7.0)]  # each field scaled: its own values

    def fields():
        made = [local_field(d, dim, (2,), np.float64) * scale for dim, scale in specs]
        return [gtx.as_field([EDGE, K], f) for f in made[:2]] + made[2:]

    lowered = three.to_sdfg(*fields())
    nested = [n.sdfg for n, _ in lowered.all_nodes_recursive() if isinstance(n, NestedSDFG)]
    assert len(nested) == 3
    assert len({sdfg.hash_sdfg() for sdfg in nested}) == 2, "the edge exchanges share one"
    for _ in range(2):
        made = fields()
        three(*made)
        for field, (dim, scale) in zip(made, specs):
            gids = np.concatenate([d.owned_gids[dim], d.halo_gids[dim]])
            local = field.asnumpy() if isinstance(field, gtx.Field) else field
            np.testing.assert_array_equal(local, values(gids, (2,), np.float64) * scale)


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_compiled_exchange_of_interleaved_local_layouts(comm, backend) -> None:
    """Owned and halo entries interleaved in local arrays (``from_local_gids``, as ICON4Py's
    may be): the compiled step writes every halo entry at its position, as the runtime does,
    in a dense field and in GT4Py's default (Edge, K) field (padded) in one exchange."""
    from test_unstructured_exchange import random_mesh, values

    layouts = {}
    for number, (dim, (owned, halo)) in enumerate(random_mesh(comm, seed=17).items()):
        gids = np.concatenate([owned, halo])
        order = np.random.default_rng(10 * comm.rank + number).permutation(len(gids))
        layouts[dim] = (gids[order], order < len(owned))
    d = gh.UnstructuredDecomposition.from_local_gids(layouts)
    ex = gh.make_exchange(d, backend=backend)

    @gh.program(comm=comm)
    def exchange_edges(e, e3):
        ex.exchange(e, e3, dim="edge")

    gids, owned = layouts["edge"]
    e = np.where(owned[:, None], values(gids, (2,), np.float64), -1.0)
    e3 = gtx.as_field([EDGE, K], np.where(owned[:, None], values(gids, (3,), np.float64), -1.0))
    exchange_edges(e, e3)
    np.testing.assert_array_equal(e, values(gids, (2,), np.float64))
    np.testing.assert_array_equal(e3.asnumpy(), values(gids, (3,), np.float64))


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_compiled_exchange_on_a_rank_without_entries_of_a_dim(comm, backend) -> None:
    """The last rank has no edges at all, the one before it owns none but mirrors some (as
    in the runtime test): the compiled step builds on every rank (GHEX's pattern is
    collective; the empty rank's empty fields take C-ordered strides, NumPy gives them 0) and
    the halos are exact. NumPy fields: GT4Py allocates no field of extent 0."""
    from test_unstructured_exchange import sparse_owners, values

    owned, halo = sparse_owners(comm)
    d = gh.UnstructuredDecomposition({"edge": (owned, halo)})
    ex = gh.make_exchange(d, backend=backend)

    @gh.program(comm=comm)
    def exchange_edges(e, e3):
        ex.exchange(e, e3, dim="edge")

    local = np.concatenate([owned, halo])
    is_owned = np.arange(len(local)) < len(owned)
    e = np.where(is_owned, values(local, (), np.float64), -1.0)
    e3 = np.where(is_owned[:, None], values(local, (3,), np.int32), -1).astype(np.int32)
    for _ in range(2):
        exchange_edges(e, e3)
        np.testing.assert_array_equal(e, values(local, (), np.float64))
        np.testing.assert_array_equal(e3, values(local, (3,), np.int32))


@pytest.mark.parametrize("backend", ["mpi", "ghex", "shm"])
def test_compiled_exchange_with_either_transport_fills_exact_halos(comm, backend) -> None:
    """Uneven blocks, asymmetric halos, an open axis and a periodic one, blocking and split
    phase; fields of 0, 1 and 2 level axes in C and Fortran order, a padded view and GT4Py's
    default (I, J, K) field (axis 0 contiguous, padded on some ranks only) in the same
    exchanges, mixed dtypes; with each transport, whose calls the generated code holds
    (``shm``: the fields in the ranks' shared memory, and new ones in later calls)."""
    d = gh.CartesianDecomposition((19, 13), halo=((1, 2), (2, 1)), periodic=(True, False))
    ex = gh.make_exchange(d, backend=backend)

    @gh.program(comm=comm)
    def exchange_mixed(a, b, c, e, g):
        h = ex.start(a, b, g)
        ex.exchange(c, e)
        h.finish()

    specs = [((), np.float64, "C"), ((3,), np.int32, "F"), ((2, 2), np.float32, "C")]
    specs += [((), np.float64, "P"), ((5,), np.float64, "gt4py")]

    allocator = gh.shared_allocator(d, 4 << 20) if backend == "shm" else None

    def fresh():
        return local_fields(d, specs, allocator)

    fields = fresh()
    for _ in range(2):  # the second call reuses the persistent requests (GHEX: patterns)
        exchange_mixed(*fields)
        for field, (levels, dtype, _) in zip(fields, specs):
            got = field if isinstance(field, np.ndarray) else field.asnumpy()
            np.testing.assert_array_equal(got, expected_local(d, levels, dtype))
        fields = fresh()
    # the code this rank runs (built here, or loaded: lowering it again would cost seconds)
    (binary,) = exchange_mixed._binaries.values()
    code = "".join(p.read_text() for p in Path(binary.folder).glob("src/cpu/*.cpp"))
    assert ("MPI_Startall(" in code) == (backend == "mpi")
    made = sorted(re.findall(r"new gt4py_halo::GhexRegular<(\d)>\(comm", code))
    assert made == (["3", "4"] if backend == "ghex" else [])  # axes: decomposed and levels
    assert ("gt4py_halo_shm::finish(" in code) == (backend == "shm")


@pytest.mark.parametrize("transport", GPU_TRANSPORTS)
def test_compiled_unstructured_exchange_on_the_gpu(comm, transport) -> None:
    """Runs where CuPy and a GPU are present; skipped elsewhere (CI has no GPU)."""
    cupy = gpu_or_skip(comm, transport)
    from test_unstructured_exchange import local_field, random_mesh, values

    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=13))
    ex = gh.make_exchange(d, backend=transport)

    @gh.program(comm=comm, device="gpu")
    def exchange_cells_and_edges(c, e):
        h = ex.start(e, dim="edge")
        ex.exchange(c, dim="cell")
        h.finish()

    specs = {"c": ("cell", (4,), np.float32, "F"), "e": ("edge", (), np.float64, "C")}
    for _ in range(2):  # the second call reuses requests, mirrors and device index lists
        fields = {
            k: local_field(d, dim, lv, dt, order) for k, (dim, lv, dt, order) in specs.items()
        }
        device = {k: cupy.asarray(f) for k, f in fields.items()}
        exchange_cells_and_edges(*device.values())
        for key, (dim, levels, dtype, _) in specs.items():
            expected = values(np.concatenate([d.owned_gids[dim], d.halo_gids[dim]]), levels, dtype)
            np.testing.assert_array_equal(device[key].get(), expected)


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_message_tags_beyond_the_mpi_bound_are_refused(comm) -> None:
    """Each compiled exchange node takes its own tags; past the communicator's ``MPI_TAG_UB``
    building a step must fail with a clear error, not post messages MPI refuses."""
    from gt4py_halo.compiled.convertible import CompiledExchangeData

    data = CompiledExchangeData(gh.CartesianDecomposition((17, 11), halo=1, comm=comm))
    bound = data.comm.Get_attr(MPI.TAG_UB)
    assert data.allocate_tags(bound) == 0  # tags 0 .. bound - 1
    with pytest.raises(gh.ProgramError, match="tags exhausted"):
        data.allocate_tags(2)
    assert data.allocate_tags(1) == bound  # the last one is still free


@at_most_ranks(2, "a resource of each process")
def test_compiled_exchange_data_releases_its_communicator(comm) -> None:
    """The communicator duplicated for a decomposition's compiled exchanges is freed with
    their data: more of them over a run than MPI has communicators (2048 here)."""
    from gt4py_halo.compiled.convertible import CompiledExchangeData

    d = gh.CartesianDecomposition((17, 11), halo=1, comm=comm)
    for _ in range(2100):
        data = CompiledExchangeData(d)
    assert data.comm.Get_size() == comm.Get_size()


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_split_phase_misuse_is_a_clear_error(comm) -> None:
    """A start never finished, or finished twice, or finished in another block (a loop body or
    branch the start is not in, or the other way round: finished more or less often than
    started; with `mpi` a false disagreement of the ranks, with `ghex` the job aborted), or
    a ``break``, ``continue`` or ``return`` between them (the start run, its finish skipped),
    or a start in a helper function finished by its caller, is refused when the step is
    parsed."""
    d = gh.CartesianDecomposition((17, 11), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def never_finished(a):
        ex.start(a)

    @gh.program(comm=comm)
    def finished_twice(a):
        h = ex.start(a)
        h.finish()
        h.finish()

    @gh.program(comm=comm)
    def first_of_a_name_never_finished(a, b):
        h = ex.start(a)
        h = ex.start(b)
        h.finish()

    @gh.program(comm=comm)
    def second_of_a_name_finished_twice(a, b):
        h = ex.start(a)
        h.finish()
        h = ex.start(b)
        h.finish()
        h.finish()

    @gh.program(comm=comm)
    def pipelined(a, n):
        h = ex.start(a)
        for _ in range(n):
            h.finish()
            h = ex.start(a)
        h.finish()

    @gh.program(comm=comm)
    def started_in_a_loop(a, n):
        for _ in range(n):
            h = ex.start(a)
        h.finish()

    @gh.program(comm=comm)
    def finished_in_a_branch(a, n):
        h = ex.start(a)
        if n > 0:
            h.finish()

    @gh.program(comm=comm)
    def continued_before_finishing(a, n):
        for i in range(n):
            h = ex.start(a)
            if i > 1:
                continue
            h.finish()

    @gh.program(comm=comm)
    def broken_before_finishing(a, n):
        for i in range(n):
            h = ex.start(a)
            if i > 1:
                break
            h.finish()

    @gh.program(comm=comm)
    def returned_before_finishing(a, n):
        h = ex.start(a)
        if n > 1:
            return
        h.finish()

    def starter(a):
        return ex.start(a)

    @gh.program(comm=comm)
    def started_in_a_helper(a):
        h = starter(a)
        h.finish()

    a, b = np.zeros(d.allocated_shape), np.zeros(d.allocated_shape)
    with pytest.raises(gh.ProgramError, match="must be called in the same function"):
        started_in_a_helper(a)
    for misplaced, jump in [
        (continued_before_finishing, "continue"),
        (broken_before_finishing, "break"),
        (returned_before_finishing, "return"),
    ]:
        with pytest.raises(gh.ProgramError, match=f"a {jump} between ex.start"):
            misplaced(a, 3)
    for misplaced in (pipelined, started_in_a_loop, finished_in_a_branch):
        with pytest.raises(gh.ProgramError, match="finish\\(\\) in another block"):
            misplaced(a, 3)
    with pytest.raises(gh.ProgramError, match="started .* but never finished"):
        never_finished(a)
    with pytest.raises(gh.ProgramError, match="finish\\(\\) called twice"):
        finished_twice(a)
    with pytest.raises(gh.ProgramError, match="started .* but never finished"):
        first_of_a_name_never_finished(a, b)
    with pytest.raises(gh.ProgramError, match="finish\\(\\) called twice"):
        second_of_a_name_finished_twice(a, b)


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_a_step_takes_keyword_arguments_and_defaults(comm) -> None:
    """A step is called like the function it is: keywords in any order, defaults filled in
    (exact halos, the scale applied; NumPy's fields and GT4Py's default ones, uneven blocks);
    arguments that do not fit its signature are a ``ProgramError`` before anything runs."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def scaled(a, b, scale=2.0):
        ex.exchange(a)
        b[1:3, 1:3] = a[1:3, 1:3] * scale

    for (call, scale), layout in itertools.product(
        [
            (lambda a, b: scaled(a, b=b), 2.0),
            (lambda a, b: scaled(b=b, scale=3.0, a=a), 3.0),
            (lambda a, b: scaled(a, b, 4.0), 4.0),
        ],
        ["numpy", "gt4py"],
    ):
        a, b = distinct_fields(d, [layout]).pop(), np.zeros(d.allocated_shape)
        call(a, b)
        expected = expected_local(d, (), np.float64)
        got = a.asnumpy() if isinstance(a, gtx.Field) else a
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(b[1:3, 1:3], expected[1:3, 1:3] * scale)
    with pytest.raises(gh.ProgramError, match="missing a required argument: 'b'"):
        scaled(a)
    with pytest.raises(gh.ProgramError, match="too many positional arguments"):
        scaled(a, b, 1.0, 2.0)


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_names_given_other_objects_after_the_build_are_refused(comm) -> None:
    """A step compiles in what its names held at its first build. A closure variable, an
    attribute of an object or of the step's ``self``, or a number given another object
    afterwards is a ``ProgramError`` naming it, on every rank, whether the call passes the
    arguments of a last call (checked in C) or new ones, before anything runs (it ran with
    the old exchange: the halos of another decomposition). An equal number, or the same
    object given back, runs as before; a step made anew takes the new objects. A name
    rebound on one rank only, then a call with new arguments: the error on every rank. The
    names a method of the object reads that the step calls are the step's too. Exact
    halos; NumPy's fields and GT4Py's default ones, uneven blocks."""
    periodic = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    walled = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=False, comm=comm)
    ex = original = gh.make_exchange(periodic)
    holder = types.SimpleNamespace(ex=ex, scale=3.0)
    scale = 2.0

    def exchange_and_scale(a, b, c):
        ex.exchange(a)
        holder.ex.exchange(b)
        c[1, 1] = scale * holder.scale

    class Model:
        def __init__(self, ex):
            self.ex, self.k = ex, 2.0

        def put(self, c):  # a method the step calls: its names are the step's too
            c[0, 0] = self.k

        @gh.program(comm=comm)
        def step(self, a, b, c):
            self.ex.exchange(a, b)
            self.put(c)

    specs = [((), np.float64, "C"), ((3,), np.float64, "gt4py")]

    def check(step, d, *more):
        fields = local_fields(d, specs)
        step(*fields, *more)
        assert_exact_halos(d, fields, specs)
        return fields

    step = gh.program(exchange_and_scale, comm=comm)
    c = np.zeros((2, 2))
    kept = [*check(step, periodic, c), c]
    model = Model(ex)
    check(model.step, periodic, c)
    for name, rebind, back in [
        ("ex.exchange", lambda: gh.make_exchange(walled), lambda: original),
        ("holder.ex.exchange", lambda: setattr(holder, "ex", gh.make_exchange(walled)), None),
        ("holder.scale", lambda: setattr(holder, "scale", 4.0), None),
        ("scale", lambda: 2.5, lambda: 2.0),
    ]:
        if name == "ex.exchange":
            ex = rebind()
        elif name == "scale":
            scale = rebind()
        else:
            rebind()
        for args in (kept, [*local_fields(periodic, specs), c]):  # kept, new
            with pytest.raises(gh.ProgramError, match=f"'{name}' holds another object"):
                step(*args)
        if name == "ex.exchange":
            ex = back()
        elif name == "scale":
            scale = back()
        elif name == "holder.ex.exchange":
            holder.ex = original
        else:
            holder.scale = 3.0
        check(step, periodic, c)
    for equal in (2.0 + float(comm.rank) * 0.0, np.float64(2.0)):  # other objects
        scale = equal
        step(*kept)
        assert c[1, 1] == 6.0
    if comm.rank == comm.size - 1:  # on one rank: with new arguments, an error on every rank
        scale = 2.5
    with pytest.raises(gh.ProgramError, match="'scale' holds another object"):
        step(*local_fields(periodic, specs), c)
    scale = 2.0
    model.k = 3.0
    with pytest.raises(gh.ProgramError, match="'self.k' holds another object"):
        model.step(*local_fields(periodic, specs), c)
    model.k = 2.0
    model.ex = gh.make_exchange(walled)
    with pytest.raises(gh.ProgramError, match="'self.ex.exchange' holds another object"):
        model.step(*local_fields(periodic, specs), c)
    ex = holder.ex = gh.make_exchange(walled)
    check(gh.program(exchange_and_scale, comm=comm), walled, c)


@at_most_ranks(2, "the last rank and another show it")
def test_a_read_only_argument_the_step_writes_is_refused(comm, tmp_path) -> None:
    """An argument the step writes that is read-only on the last rank (a read-only memory
    map: the step crashed writing it; an array over ``bytes``; one made read-only: written
    silently) is a ``FieldError`` naming it on every rank, at the first call (the build) and
    at a later one, before anything runs. A read-only argument the step only reads is
    fine: exact halos, the result of the write."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def add(u, v, w):
        ex.exchange(u)
        v[1:3, 1:3] = u[1:3, 1:3] + w[1:3, 1:3]

    def read_only(kind: str) -> np.ndarray:
        if kind == "memmap":
            np.zeros(d.allocated_shape).tofile(tmp_path / "v")
            return np.memmap(tmp_path / "v", np.float64, "r", shape=d.allocated_shape)
        if kind == "bytes":
            return np.frombuffer(bytes(8 * int(np.prod(d.allocated_shape))), np.float64).reshape(
                d.allocated_shape
            )
        made = np.zeros(d.allocated_shape)
        made.flags.writeable = False
        return made

    last = comm.rank == comm.size - 1
    for call, kind in enumerate(["memmap", "bytes", "flag"]):
        u, w = filled_local(d, (), np.float64), np.ones(d.allocated_shape)
        v = read_only(kind) if last else np.zeros(d.allocated_shape)
        with pytest.raises(gh.FieldError, match="argument v is read-only"):
            add(u, v, w)
        if call == 0:  # then built: the later calls are checked against the build
            w.flags.writeable = False  # only read
            v = np.zeros(d.allocated_shape)
            add(u, v, w)
            np.testing.assert_array_equal(u, expected_local(d, (), np.float64))
            np.testing.assert_array_equal(v[1:3, 1:3], u[1:3, 1:3] + 1.0)


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
def test_arrays_of_the_closure_are_refused(comm) -> None:
    """A step that reads an array it is not given (a variable of its closure, an object's
    attribute) is refused on every rank before anything runs: a build would keep the array
    it found and later calls would read it even after the name is given another one."""
    d = gh.CartesianDecomposition((17, 11), halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)
    weights = np.ones(d.allocated_shape)
    holder = types.SimpleNamespace(weights=np.ones(d.allocated_shape))

    @gh.program(comm=comm)
    def from_the_closure(a, b):
        ex.exchange(a)
        b[1:3, 1:3] = a[1:3, 1:3] * weights[1:3, 1:3]

    @gh.program(comm=comm)
    def from_an_attribute(a, b):
        ex.exchange(a)
        b[1:3, 1:3] = a[1:3, 1:3] * holder.weights[1:3, 1:3]

    a, b = np.zeros(d.allocated_shape), np.zeros(d.allocated_shape)
    with pytest.raises(gh.ProgramError, match="reads 'weights', not an argument"):
        from_the_closure(a, b)
    with pytest.raises(gh.ProgramError, match="reads 'holder.weights', not an argument"):
        from_an_attribute(a, b)


@at_most_ranks(2, "the step's code, not the decomposition, is under test")
@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_a_name_given_the_next_start_finishes_it(comm, backend) -> None:
    """``h = ex.start(a) ... h.finish()``, then ``h = ex.start(b)`` with a blocking exchange
    in flight beside it, ``h.finish()``: each finish completes its own start. Fields of
    different values, NumPy's and GT4Py's default (padded) ones, uneven blocks; exact halos
    at two calls."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=((2, 1), (1, 2)), periodic=(True, False))
    ex = gh.make_exchange(d, backend)

    @gh.program(comm=comm)
    def reused(a, b, c):
        h = ex.start(a)
        h.finish()
        h = ex.start(b)
        ex.exchange(c)
        h.finish()

    for _ in range(2):
        made = distinct_fields(d, ["gt4py", "numpy", "gt4py"])
        reused(*made)
        assert_distinct_halos(d, made)


def test_ranks_that_disagree_are_named_on_every_rank(comm) -> None:
    """A step called with arguments of another dtype on one rank, or a step that is another
    program on one rank, cannot be one build for all: every rank raises, naming the argument
    or the first exchange or stencil that differs, before anything is posted."""
    if comm.size < 2:
        pytest.skip("needs 2 ranks")
    d = gh.CartesianDecomposition((17, 11), halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def exchange_a(a):
        ex.exchange(a)

    dtype = np.float32 if comm.rank == 1 else np.float64
    with pytest.raises(gh.RanksDisagreeError, match="a: rank 0: float64.*rank 1: float32"):
        exchange_a(np.zeros(d.allocated_shape, dtype))

    if comm.rank == 0:

        def step(a, b):
            ex.exchange(a, b)
    else:

        def step(a, b):
            ex.exchange(a)
            ex.exchange(b)

    with pytest.raises(gh.RanksDisagreeError, match="First difference:\n  rank 0: .*\n  rank 1"):
        gh.program(step, comm=comm)(np.zeros(d.allocated_shape), np.zeros(d.allocated_shape))
