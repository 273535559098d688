"""Time per model step: a step compiled with its halo exchanges (``@gh.program``) against the
same step run from Python (issue 3).

The method of the ICON4Py halo-exchange investigation (full step, no exchange, sync instead of
exchange), on the same fields of the same decomposition. A *step* exchanges the halos of its
fields, then runs a GT4Py stencil (DaCe CPU backend) on the owned cells, writing the other set
of fields; one *iteration* is two steps (``u -> v``, then ``v -> u``) so that the result feeds
back. Timed per iteration, reported per step (half an iteration):

- ``a-compiled``: one ``@gh.program`` holding both steps, exchanges included (one SDFG),
  called as a user calls it;
- ``q-compiled-packed``: ``a-compiled`` built with ``in_place_min_bytes=None``: every box
  packed, none sent from field to field (``a`` sends the long runs of the large case's faces
  in place);
- ``p-compiled-stencil-packs``: ``a-compiled`` built with ``pack_in_producers=True``: the
  stencil before the second exchange writes that exchange's send buffers itself (the GPU
  default; off by default on a CPU);
- ``g-compiled-ghex``: ``a-compiled`` with the ``ghex`` transport (GHEX's exchange called
  from the step's C++; GHEX packs itself);
- ``b-python``: the same step from Python, ``ex.exchange(*u)`` between GT4Py program calls
  (the icon4py way; ``ex`` is the runtime ``mpi`` exchange);
- ``c-compiled-noex``: a second ``@gh.program`` without the ``ex.exchange`` calls (the lower
  bound ``L``);
- ``s-compiled-sync``: ``c`` with an exchange of a tiny field (4x4 global, halo 1) where
  ``a`` exchanges: the ranks synchronize as in ``a``, no data moves (``S``: a lower bound
  for a step that synchronizes once per exchange);
- ``d-python-barrier``: Python, each exchange replaced by ``comm.Barrier()`` on the
  decomposition's communicator (sync only);
- ``e-python-noex``: Python, exchanges left out (no exchange);

and, for the pure communication time of the same fields in the same run (per exchange):

- ``x-compiled``: a ``@gh.program`` of the exchanges alone (the compiled exchange by itself);
- ``y-compiled-ghex``: ``x-compiled`` with the ``ghex`` transport;
- ``x-ours-mpi``: the runtime exchange ``ex.exchange(*u)`` (the same field set every time, so
  its checks and views are cached, as in ``benchmarks/runtime_exchange.py``);
- ``x-mpi4py``: the hand-written mpi4py + NumPy exchange of ``benchmarks/runtime_exchange.py``.

Cases (float64, periodic, 2 ranks -> process grid 2x1x1):

- ``small``: 32x32x8, halo (1,1,0), 1 field: a 5-point horizontal diffusion of an IJK field
  (K whole);
- ``large``: 128x128x80, halo (3,3,0), 10 fields: one GT4Py program applying the same
  diffusion to 10 fields, one exchange of all 10 fields per step (the halo is wider than the
  stencil needs, as in a model where other stencils need it).

Fields are C-ordered (K contiguous), see ``as_field``. First ``a``, ``q``, ``p``, ``g`` and ``b-python`` run a few iterations from the same initial fields and must give bit-identical
fields, halos included, on every rank. Then every implementation is warmed up (the first call
compiles; compile times are printed) and timed: each sample is one iteration untimed, a
barrier and a batch of iterations of one implementation (sized per implementation to last
about ``--sample-ms``), implementations take turns (``runtime_exchange.interleaved_samples``:
in an order shuffled each round);
a sample's time is the slowest rank's; the tables give medians over samples.

Run (2 ranks):  mpirun -n 2 python -O -m mpi4py benchmarks/compiled_step.py
(``-O`` drops gt4py's argument checks on every Python call of a GT4Py program, about 100 us
each here; without it the Python variants pay them. The script prints which.)
Building the ``@gh.program`` steps of ``large`` takes minutes; ``--reuse-builds`` (DaCe's
``compiler.use_cache``) loads the binaries of an earlier run whose SDFGs hash the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# gt4py reads these when gt4py.next is first imported; the user's settings win
os.environ.setdefault("GT4PY_BUILD_CACHE_LIFETIME", "persistent")
os.environ.setdefault(
    "GT4PY_BUILD_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "gt4py")
)
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dace
import gt4py
import gt4py.next as gtx
import numpy as np
from gt4py.next.program_processors.runners.dace import run_dace_cpu
from mpi4py import MPI
from runtime_exchange import CASES as EXCHANGE_CASES
from runtime_exchange import (
    Case,
    HandWrittenExchange,
    fmt_time,
    interleaved_samples,
    time_batch,
)

import gt4py_halo as gh
from gt4py_halo.gt4py_support import compile_on_one_rank

I = gtx.Dimension("I")
J = gtx.Dimension("J")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
FieldIJK = gtx.Field[gtx.Dims[I, J, K], gtx.float64]
i32 = gtx.int32


# --------------------------------------------------------------------------------------------
# GT4Py stencils
# --------------------------------------------------------------------------------------------


@gtx.field_operator
def diffuse(u: FieldIJK) -> FieldIJK:
    # diffusion number 0.2: explicit 5-point diffusion is stable up to 0.25
    return u + 0.2 * (u(I + 1) + u(I - 1) + u(J + 1) + u(J - 1) - 4.0 * u)


@gtx.program(backend=run_dace_cpu)
def diffuse_1(u: FieldIJK, v: FieldIJK, i0: i32, i1: i32, j0: i32, j1: i32, k1: i32) -> None:
    diffuse(u, out=v, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})


@gtx.program(backend=run_dace_cpu)
def diffuse_10(
    u0: FieldIJK, u1: FieldIJK, u2: FieldIJK, u3: FieldIJK, u4: FieldIJK,
    u5: FieldIJK, u6: FieldIJK, u7: FieldIJK, u8: FieldIJK, u9: FieldIJK,
    v0: FieldIJK, v1: FieldIJK, v2: FieldIJK, v3: FieldIJK, v4: FieldIJK,
    v5: FieldIJK, v6: FieldIJK, v7: FieldIJK, v8: FieldIJK, v9: FieldIJK,
    i0: i32, i1: i32, j0: i32, j1: i32, k1: i32,
) -> None:  # fmt: skip
    diffuse(u0, out=v0, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u1, out=v1, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u2, out=v2, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u3, out=v3, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u4, out=v4, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u5, out=v5, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u6, out=v6, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u7, out=v7, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u8, out=v8, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})
    diffuse(u9, out=v9, domain={I: (i0, i1), J: (j0, j1), K: (0, k1)})


def compile_stencils(comm: MPI.Comm) -> None:
    """First calls on tiny fields compile both programs on rank 0; the others load them."""

    def first_calls() -> None:
        u = [as_field(np.zeros((3, 3, 2))) for _ in range(20)]  # the layout timed below
        one, two = i32(1), i32(2)
        diffuse_1(u[0], u[1], one, two, one, two, two)
        diffuse_10(*u, one, two, one, two, two)

    compile_on_one_rank(comm, first_calls)


# --------------------------------------------------------------------------------------------
# The steps
# --------------------------------------------------------------------------------------------


def make_a10(ex: gh.Exchange) -> Callable:
    """The large case's step: exchange the 10 ``u``, stencil into ``v``, and back."""

    def step_a10(
        u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
        v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
        i0, i1, j0, j1, k1,
    ):  # fmt: skip
        ex.exchange(u0, u1, u2, u3, u4, u5, u6, u7, u8, u9)
        diffuse_10(
            u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
            v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
            i0, i1, j0, j1, k1,
        )  # fmt: skip
        ex.exchange(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9)
        diffuse_10(
            v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
            u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
            i0, i1, j0, j1, k1,
        )  # fmt: skip

    return step_a10


def compiled_steps(
    ex: gh.Exchange, ghex: gh.Exchange, sync: gh.Exchange, comm: MPI.Comm, nfields: int
) -> dict[str, Callable]:
    """``@gh.program`` steps: two steps with exchanges (``a``) and without (``c``), and two
    exchanges alone (``x``); ``q``: ``a`` with every box packed (no runs in place); ``p``:
    ``a`` with the stencil before each exchange packing its
    messages (``pack_in_producers=True``, the GPU default); ``g``, ``y``: ``a`` and ``x`` with
    the ``ghex`` exchange ``ghex``; ``s``: ``c`` synchronized where ``a`` exchanges, by an
    exchange of a tiny field ``t`` (``sync``)."""

    def builds(make_a: Callable, make_x: Callable) -> dict[str, Callable]:
        step = make_a(ex)
        return {
            "a": gh.program(step, comm=comm),
            "q": gh.program(step, comm=comm, in_place_min_bytes=None),
            "p": gh.program(step, comm=comm, pack_in_producers=True),
            "g": gh.program(make_a(ghex), comm=comm),
            "x": gh.program(make_x(ex), comm=comm),
            "y": gh.program(make_x(ghex), comm=comm),
        }

    if nfields == 1:

        def make_a(ex):
            def step_a(u, v, i0, i1, j0, j1, k1):
                ex.exchange(u)
                diffuse_1(u, v, i0, i1, j0, j1, k1)
                ex.exchange(v)
                diffuse_1(v, u, i0, i1, j0, j1, k1)

            return step_a

        @gh.program(comm=comm)
        def step_c(u, v, i0, i1, j0, j1, k1):
            diffuse_1(u, v, i0, i1, j0, j1, k1)
            diffuse_1(v, u, i0, i1, j0, j1, k1)

        @gh.program(comm=comm)
        def step_s(t, u, v, i0, i1, j0, j1, k1):
            sync.exchange(t)
            diffuse_1(u, v, i0, i1, j0, j1, k1)
            sync.exchange(t)
            diffuse_1(v, u, i0, i1, j0, j1, k1)

        def make_x(ex):
            def exchanges_x(u):
                ex.exchange(u)
                ex.exchange(u)

            return exchanges_x

        return {**builds(make_a, make_x), "c": step_c, "s": step_s}

    assert nfields == 10

    @gh.program(comm=comm)
    def step_c10(
        u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
        v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
        i0, i1, j0, j1, k1,
    ):  # fmt: skip
        diffuse_10(
            u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
            v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
            i0, i1, j0, j1, k1,
        )  # fmt: skip
        diffuse_10(
            v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
            u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
            i0, i1, j0, j1, k1,
        )  # fmt: skip

    @gh.program(comm=comm)
    def step_s10(
        t,
        u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
        v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
        i0, i1, j0, j1, k1,
    ):  # fmt: skip
        sync.exchange(t)
        diffuse_10(
            u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
            v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
            i0, i1, j0, j1, k1,
        )  # fmt: skip
        sync.exchange(t)
        diffuse_10(
            v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
            u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
            i0, i1, j0, j1, k1,
        )  # fmt: skip

    def make_x10(ex):
        def exchanges_x10(u0, u1, u2, u3, u4, u5, u6, u7, u8, u9):
            ex.exchange(u0, u1, u2, u3, u4, u5, u6, u7, u8, u9)
            ex.exchange(u0, u1, u2, u3, u4, u5, u6, u7, u8, u9)

        return exchanges_x10

    return {**builds(make_a10, make_x10), "c": step_c10, "s": step_s10}


@dataclasses.dataclass
class Fields:
    u: list  # gtx fields
    v: list
    bounds: list  # i0, i1, j0, j1, k1 as gtx.int32


def as_field(a: np.ndarray) -> gtx.Field:
    """A GT4Py field on a C-ordered copy of ``a`` (K contiguous).

    Not gt4py's default layout: ``gtx.as_field`` allocates I-contiguous, K-outermost buffers
    (strides (1, 72, 9648) elements for 70x134x80), all starting at the same address modulo
    4 KiB; on those the 10-field stencil is 3-4x slower (``benchmarks/stencil_layout.py``,
    docs/benchmarks.md "Loop order on GT4Py's default fields"), which would bury the exchange.
    """
    field = gtx.as_field([I, J, K], np.ascontiguousarray(a), allocator=np)
    assert field.ndarray.flags.c_contiguous
    return field


def initial_fields(d: gh.CartesianDecomposition, nfields: int) -> Fields:
    """Owned cells: exactly representable values of the global indices; halos: zero."""
    i, j, k = np.meshgrid(*(np.arange(s.start, s.stop) for s in d.global_slices), indexing="ij")
    u, v = [], []
    for f in range(nfields):
        a = np.zeros(d.allocated_shape)
        a[d.owned] = ((3 * i + 5 * j + 7 * k + f) % 11) / 10.0 + (i // 8 + j // 8) % 2
        u.append(as_field(a))
        v.append(as_field(np.zeros(d.allocated_shape)))
    (i0, i1), (j0, j1) = ((s.start, s.stop) for s in d.owned[:2])
    bounds = [i32(x) for x in (i0, i1, j0, j1, d.allocated_shape[2])]
    return Fields(u, v, bounds)


def implementations(
    d: gh.CartesianDecomposition, fields: Fields, compiled: dict[str, Callable], tiny: np.ndarray
) -> dict[str, Callable[[], None]]:
    """One iteration (two steps, or two exchanges) of every implementation, on ``fields``
    (``tiny``: the field ``s-compiled-sync`` exchanges)."""
    u, v, b = fields.u, fields.v, fields.bounds
    stencil = diffuse_1 if len(u) == 1 else diffuse_10
    ex = gh.make_exchange(d, backend="mpi")
    comm = d.comm
    step_a, step_q, step_p, step_g = compiled["a"], compiled["q"], compiled["p"], compiled["g"]
    step_c, step_s = compiled["c"], compiled["s"]
    exchanges_x, exchanges_y = compiled["x"], compiled["y"]
    hand = HandWrittenExchange(d, [f.ndarray for f in u])

    def a() -> None:
        step_a(*u, *v, *b)

    def q() -> None:
        step_q(*u, *v, *b)

    def p() -> None:
        step_p(*u, *v, *b)

    def g() -> None:
        step_g(*u, *v, *b)

    def b_python() -> None:
        ex.exchange(*u)
        stencil(*u, *v, *b)
        ex.exchange(*v)
        stencil(*v, *u, *b)

    def c() -> None:
        step_c(*u, *v, *b)

    def s() -> None:
        step_s(tiny, *u, *v, *b)

    def d_barrier() -> None:
        comm.Barrier()
        stencil(*u, *v, *b)
        comm.Barrier()
        stencil(*v, *u, *b)

    def e_noex() -> None:
        stencil(*u, *v, *b)
        stencil(*v, *u, *b)

    def x_compiled() -> None:
        exchanges_x(*u)

    def y_compiled_ghex() -> None:
        exchanges_y(*u)

    def x_ours() -> None:
        ex.exchange(*u)
        ex.exchange(*u)

    def x_mpi4py() -> None:
        hand.exchange()
        hand.exchange()

    return {
        "a-compiled": a,
        "q-compiled-packed": q,
        "p-compiled-stencil-packs": p,
        "g-compiled-ghex": g,
        "b-python": b_python,
        "c-compiled-noex": c,
        "s-compiled-sync": s,
        "d-python-barrier": d_barrier,
        "e-python-noex": e_noex,
        "x-compiled": x_compiled,
        "y-compiled-ghex": y_compiled_ghex,
        "x-ours-mpi": x_ours,
        "x-mpi4py": x_mpi4py,
    }


# --------------------------------------------------------------------------------------------
# Harness
# --------------------------------------------------------------------------------------------


CASES = {name: EXCHANGE_CASES[name] for name in ("small", "large")}
VERIFY_ITERATIONS = 3


def log(message: str) -> None:
    if MPI.COMM_WORLD.rank == 0:
        print(message, file=sys.stderr, flush=True)


def verify(
    case: Case, d: gh.CartesianDecomposition, compiled: dict[str, Callable], tiny: np.ndarray
) -> None:
    """(a) and (b) from the same initial fields give the same bits, halos included."""
    comm = MPI.COMM_WORLD
    results = {}
    for name in (
        "a-compiled",
        "q-compiled-packed",
        "p-compiled-stencil-packs",
        "g-compiled-ghex",
        "b-python",
    ):
        fields = initial_fields(d, case.nfields)
        before = [f.asnumpy().copy() for f in fields.u]
        step = implementations(d, fields, compiled, tiny).get(name)
        if step is None:
            continue
        for _ in range(VERIFY_ITERATIONS):
            step()
        results[name] = [f.asnumpy() for f in fields.u + fields.v]
        assert not any(np.array_equal(x, y) for x, y in zip(before, results[name])), (
            f"{name}: fields unchanged"
        )
    reference = results.pop("b-python")
    problems = [
        f"{name}: rank {comm.rank} field {f}: {np.count_nonzero(x != y)} cells differ"
        for name, fields in results.items()
        for f, (x, y) in enumerate(zip(fields, reference))
        if not np.array_equal(x, y)
    ]
    problems = [p for ps in comm.allgather(problems) for p in ps]
    if problems:
        raise AssertionError(f"{case.name}: compiled != python: " + "; ".join(problems))
    log(
        f"# {case.name}: {' and '.join(results)} == b-python bit for bit after "
        f"{VERIFY_ITERATIONS} iterations "
        f"({2 * VERIFY_ITERATIONS} steps), all {2 * case.nfields} fields, halos included, "
        "on every rank"
    )


def run_case(case: Case, repeats: int, sample_s: float) -> dict:
    comm = MPI.COMM_WORLD
    d = gh.CartesianDecomposition(case.global_shape, halo=case.halo, periodic=True)
    ex = gh.make_exchange(d, backend="mpi")  # the exchange the compiled programs hold
    ghex = gh.make_exchange(d, backend="ghex")  # ... g and y
    tiny_d = gh.CartesianDecomposition((4, 4), halo=1, periodic=True)  # for s: a sync
    tiny = np.zeros(tiny_d.allocated_shape)
    compiled = compiled_steps(ex, ghex, gh.make_exchange(tiny_d), comm, case.nfields)

    # compile (rank 0) and load (all) every compiled program once, on throwaway fields
    compile_s = {}
    scratch = initial_fields(d, case.nfields)
    for key in ("a", "q", "p", "g", "c", "s", "x", "y"):
        comm.Barrier()
        t0 = time.perf_counter()
        args = scratch.u if key in "xy" else (*scratch.u, *scratch.v, *scratch.bounds)
        args = (tiny, *args) if key == "s" else args
        compiled[key](*args)
        compile_s[key] = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        log(f"# {case.name}: compiled program {key} built and loaded in {compile_s[key]:.1f} s")
    del scratch

    verify(case, d, compiled, tiny)

    fields = initial_fields(d, case.nfields)  # the same fields for every implementation
    impls = implementations(d, fields, compiled, tiny)
    for run in impls.values():  # warm up: caches, first touch, MPI connections
        for _ in range(3):
            run()
    # batch: iterations per sample, per implementation, so that a sample lasts about sample_s
    batch = {}
    for name, run in impls.items():
        probe = comm.allreduce(float(np.median([time_batch(run, 1) for _ in range(3)])), op=MPI.MAX)
        batch[name] = max(1, min(500, round(sample_s / probe)))

    per_iteration = interleaved_samples(comm, impls, batch, repeats)
    samples = {name: t / 2 for name, t in per_iteration.items()}  # per step
    return {
        "case": case,
        "proc_grid": d.proc_grid,
        "local_shape": d.allocated_shape,
        "batch": batch,
        "samples": samples,
        "compile_s": compile_s,
    }


def report(results: Sequence[dict], repeats: int) -> str:
    names = list(results[0]["samples"])
    lines = [
        (
            "Median time per step (a-e) or per exchange (x-*), slowest rank, "
            f"{repeats} interleaved samples"
        ),
        "",
        "| case | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for res in results:
        med = {n: float(np.median(res["samples"][n])) for n in names}
        lines.append(
            f"| {res['case'].label} | " + " | ".join(fmt_time(med[n]) for n in names) + " |"
        )
    lines += ["", "Iterations (2 steps or 2 exchanges) per sample", ""]
    for res in results:
        batches = ", ".join(f"{n} {b}" for n, b in res["batch"].items())
        lines.append(f"- {res['case'].label}: {batches}")
    lines += ["", "25th-75th percentile", "", "| case | " + " | ".join(names) + " |"]
    lines.append("|---|" + "---|" * len(names))
    for res in results:
        cells = []
        for n in names:
            q1, q3 = np.percentile(res["samples"][n], [25, 75])
            cells.append(f"{fmt_time(q1)} - {fmt_time(q3)}")
        lines.append(f"| {res['case'].label} | " + " | ".join(cells) + " |")

    lines += [
        "",
        (
            "Exchange overhead per step, against the lower bound L = c-compiled-noex (the "
            "compiled step without exchanges); target 1: (a-L)/(b-L) <= 0.5 on small; "
            "target 2: (a-L) <= 1.5 x pure communication on large. S = s-compiled-sync: the "
            "compiled step synchronized where a exchanges (a tiny exchange). Q = "
            "q-compiled-packed: a with every box packed"
        ),
        "",
        (
            "| case | L | a-L | b-L | d-L | b-e | (a-L)/(b-L) | (a-L)/x-mpi4py | (a-L)/x-ours-mpi "
            "| x-compiled/x-mpi4py | S-L | (a-S)/x-mpi4py | Q-a | (Q-L)/x-mpi4py "
            "| (g-L)/(a-L) | y-compiled-ghex/x-compiled |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        med = {n: float(np.median(res["samples"][n])) for n in names}
        low = med["c-compiled-noex"]
        a, b = med["a-compiled"], med["b-python"]
        comm1, comm2 = med["x-mpi4py"], med["x-ours-mpi"]
        cells = [
            fmt_time(low),
            fmt_time(a - low),
            fmt_time(b - low),
            fmt_time(med["d-python-barrier"] - low),
            fmt_time(b - med["e-python-noex"]),
            f"{(a - low) / (b - low):.2f}",
            f"{(a - low) / comm1:.2f}",
            f"{(a - low) / comm2:.2f}",
            f"{med['x-compiled'] / comm1:.2f}",
            fmt_time(med["s-compiled-sync"] - low),
            f"{(a - med['s-compiled-sync']) / comm1:.2f}",
            fmt_time(med["q-compiled-packed"] - a),
            f"{(med['q-compiled-packed'] - low) / comm1:.2f}",
            f"{(med['g-compiled-ghex'] - low) / (a - low):.2f}",
            f"{med['y-compiled-ghex'] / med['x-compiled']:.2f}",
        ]
        lines.append(f"| {res['case'].label} | " + " | ".join(cells) + " |")
    lines += ["", "Compile + load time of the @gh.program steps (first call, slowest rank)", ""]
    for res in results:
        cs = res["compile_s"]
        lines.append(
            f"- {res['case'].label}: "
            + ", ".join(f"{key} {seconds:.1f} s" for key, seconds in cs.items())
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=100, help="samples per implementation")
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated, from: {', '.join(CASES)}"
    )
    parser.add_argument(
        "--sample-ms", type=float, default=4.0, help="target duration of one sample (batch)"
    )
    parser.add_argument(
        "--reuse-builds",
        action="store_true",
        help="load @gh.program binaries left by an earlier run (DaCe compiler.use_cache)",
    )
    args = parser.parse_args(argv)
    if args.reuse_builds:
        dace.config.Config.set("compiler", "use_cache", value=True)
    cases = [CASES[c.strip()] for c in args.cases.split(",") if c.strip()]
    comm = MPI.COMM_WORLD

    started = time.perf_counter()
    compile_stencils(comm)
    log(f"# GT4Py programs ready ({time.perf_counter() - started:.0f} s)")
    results = []
    for case in cases:
        results.append(run_case(case, args.repeats, args.sample_ms * 1e-3))
        log(f"# {case.name} done ({time.perf_counter() - started:.0f} s)")
    if comm.rank == 0:
        print(
            f"{datetime.date.today()}, {comm.Get_size()} ranks on {platform.node()} "
            f"({MPI.Get_library_version().splitlines()[0].strip()}), gt4py {gt4py.__version__}, "
            f"dace {dace.__version__}, numpy {np.__version__}, "
            f"python -O: {'yes' if sys.flags.optimize else 'no'}, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
            f"repeats {args.repeats}, sample ~{args.sample_ms} ms, "
            f"total {time.perf_counter() - started:.0f} s\n"
        )
        print(report(results, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
