"""The gt4py_halo demo: a model step compiled with its halo exchanges, against the same step
run from Python, on a 2-D periodic grid cut into blocks.

    mpirun -n 2 python -O -m mpi4py examples/diffusion_2d.py        (or: make demo)
    ... examples/diffusion_2d.py --shape 512,384 --steps 50 --rounds 21

The step (GT4Py programs, DaCe CPU backend): exchange the halo of ``u``; diffuse ``u`` into
``v``; start the exchange of ``v``; meanwhile compute a diagnostic of ``u`` (its square, into
``w``: no halo needed); finish the exchange; diffuse ``v`` back into ``u``. It runs four ways:

(a) compiled: one ``@gh.program`` holding the stencils and the exchanges, built into one SDFG:
    no Python and no host synchronization between them;
(b) Python: the same GT4Py programs called from Python with the runtime exchange between them
    (how ICON4Py exchanges today);
(c) no exchange: (b) without its exchanges (wrong halos; the lower bound of (b));
(d) barrier: (b) with a barrier where each exchange was (the synchronization alone).

(a) and (b) are checked bit for bit against rank 0 running the step alone on the whole grid;
the exit status is 1 if either differs. The variants then take turns, round after round,
each round a batch of steps; the table gives the median time per step (slowest rank) and the
exchange overhead of each variant over (c).

Rank 0 compiles the GT4Py programs and the step, the other ranks load them. GT4Py's programs
go to a persistent cache (``.cache/gt4py`` in the repository unless ``GT4PY_BUILD_CACHE_DIR``
says otherwise); the step to DaCe's build folder (``.dacecache`` in the working directory),
named by a digest of what it was built from, so a second run loads it. Run with ``python -O``
to drop GT4Py's argument checks on every call (about 100 us per call here).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# gt4py reads these when gt4py.next is first imported; the user's settings win
os.environ.setdefault("GT4PY_BUILD_CACHE_LIFETIME", "persistent")
os.environ.setdefault(
    "GT4PY_BUILD_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "gt4py")
)

import gt4py.next as gtx
import numpy as np
from gt4py.next.program_processors.runners.dace import run_dace_cpu
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo.gt4py_support import compile_on_one_rank

I = gtx.Dimension("I")
J = gtx.Dimension("J")
FieldIJ = gtx.Field[gtx.Dims[I, J], gtx.float64]


@gtx.field_operator
def diffuse(u: FieldIJ) -> FieldIJ:
    # diffusion number 0.2: explicit 5-point diffusion is stable up to 0.25
    return u + 0.2 * (u(I + 1) + u(I - 1) + u(J + 1) + u(J - 1) - 4.0 * u)


@gtx.program(backend=run_dace_cpu)
def diffusion_step(
    u: FieldIJ, v: FieldIJ, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
) -> None:
    diffuse(u, out=v, domain={I: (i0, i1), J: (j0, j1)})


@gtx.field_operator
def square(u: FieldIJ) -> FieldIJ:
    return u * u


@gtx.program(backend=run_dace_cpu)
def energy(
    u: FieldIJ, w: FieldIJ, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
) -> None:
    square(u, out=w, domain={I: (i0, i1), J: (j0, j1)})


def compile_stencil(comm: MPI.Comm) -> None:
    """Compile the GT4Py programs on rank 0 of ``comm``; the other ranks load them.

    A first call on 3x3 fields compiles: programs are specialized on field types, not sizes,
    so every rank's block reuses them. Calling again only repeats cheap calls.
    """
    u = gtx.as_field([I, J], np.zeros((3, 3)))
    v = gtx.as_field([I, J], np.zeros((3, 3)))
    one, two = gtx.int32(1), gtx.int32(2)

    def first_calls() -> None:
        diffusion_step(u, v, one, two, one, two)
        energy(u, v, one, two, one, two)

    compile_on_one_rank(comm, first_calls)


def initial_condition(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Exactly representable values of the global indices, so any cut gives the same bits."""
    return ((3 * i + 5 * j) % 11) / 10.0 + (i // 16 + j // 16) % 2


def python_step(ex: gh.Exchange) -> Callable[..., None]:
    """(b): the step from Python, the runtime exchange between the GT4Py programs."""

    def step(u, v, w, *bounds) -> None:
        ex.exchange(u)
        diffusion_step(u, v, *bounds)
        h = ex.start(v)
        energy(u, w, *bounds)
        h.finish()
        diffusion_step(v, u, *bounds)

    return step


def compiled_step(ex: gh.Exchange, comm: MPI.Comm) -> Callable[..., None]:
    """(a): the same step as one compiled SDFG."""

    @gh.program(comm=comm)
    def step(u, v, w, i0, i1, j0, j1):
        ex.exchange(u)
        diffusion_step(u, v, i0, i1, j0, j1)
        h = ex.start(v)
        energy(u, w, i0, i1, j0, j1)
        h.finish()
        diffusion_step(v, u, i0, i1, j0, j1)

    return step


def unexchanged_step(comm: MPI.Comm, barrier: bool) -> Callable[..., None]:
    """(c) or (d): the step from Python with nothing, or a barrier, for each exchange."""

    def step(u, v, w, *bounds) -> None:
        if barrier:
            comm.Barrier()
        diffusion_step(u, v, *bounds)
        if barrier:
            comm.Barrier()
        energy(u, w, *bounds)
        diffusion_step(v, u, *bounds)

    return step


@dataclasses.dataclass
class Result:
    """One run: the global field on rank 0 (``None`` elsewhere)."""

    field: np.ndarray | None


def fields(d: gh.CartesianDecomposition) -> tuple[gtx.Field, gtx.Field, gtx.Field]:
    """``u`` at the initial condition (halos zero), ``v`` and ``w`` zero: GT4Py's default
    fields (``gtx.as_field`` copies into its own, possibly padded, layout)."""
    i, j = np.meshgrid(*(np.arange(s.start, s.stop) for s in d.global_slices), indexing="ij")
    u0 = np.zeros(d.allocated_shape)
    u0[d.owned] = initial_condition(i, j)
    zeros = np.zeros(d.allocated_shape)
    return gtx.as_field([I, J], u0), gtx.as_field([I, J], zeros), gtx.as_field([I, J], zeros)


def bounds(d: gh.CartesianDecomposition) -> list[gtx.int32]:
    return [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]


def run(
    d: gh.CartesianDecomposition, steps: int, step: Callable[..., None] | None = None
) -> Result:
    """``steps`` steps of ``step`` (default: (b), the step from Python) on ``d`` from the
    initial condition, gathered on rank 0; collective over ``d``'s communicator."""
    step = step or python_step(gh.make_exchange(d, backend="mpi"))
    u, v, w = fields(d)
    for _ in range(steps):
        step(u, v, w, *bounds(d))
    blocks = d.comm.gather((d.global_slices, u.asnumpy()[d.owned]), root=0)
    if blocks is None:
        return Result(None)
    field = np.empty(d.global_shape)
    for slices, block in blocks:
        field[slices] = block
    return Result(field)


def time_per_step(
    comm: MPI.Comm, variants: dict[str, Callable[[], None]], steps: int, rounds: int
) -> dict[str, float]:
    """Median seconds per step of each variant, the slowest rank's: the variants take turns
    round after round (who goes first rotates), each a batch of ``steps`` steps."""
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                variants[name]()
            elapsed = comm.allreduce((time.perf_counter() - t0) / steps, op=MPI.MAX)
            samples[name].append(elapsed)
    return {name: statistics.median(s) for name, s in samples.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """The demo; returns the exit status, the same on every rank."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="256,192", help="global grid, e.g. 256,192")
    parser.add_argument("--steps", type=int, default=20, help="steps per check and per round")
    parser.add_argument("--rounds", type=int, default=15, help="timing rounds per variant")
    args = parser.parse_args(argv)
    shape = tuple(int(n) for n in args.shape.split(","))
    comm = MPI.COMM_WORLD
    say = print if comm.rank == 0 else (lambda *_: None)

    t0 = time.perf_counter()
    compile_stencil(comm)
    stencils_s = time.perf_counter() - t0
    d = gh.CartesianDecomposition(shape, halo=1, periodic=True, comm=comm)
    ex = gh.make_exchange(d, backend="mpi")
    compiled = compiled_step(ex, comm)
    say(
        f"2-D diffusion on {'x'.join(map(str, shape))} cells, {comm.size} rank(s), process grid "
        f"{'x'.join(map(str, d.proc_grid))}, halo 1, periodic; blocks of "
        f"{'x'.join(map(str, d.owned_shape))} cells on rank 0"
    )
    say("step: exchange u; diffuse u->v; start exchange v; w = u*u; finish; diffuse v->u")

    t0 = time.perf_counter()
    compiled_result = run(d, args.steps, compiled)  # the first call builds (or loads) it
    build_s = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    python_result = run(d, args.steps, python_step(ex))
    folder = compiled.to_sdfg(*fields(d), *bounds(d)).build_folder
    say(
        f"GT4Py programs ready in {stencils_s:.1f} s (cache: {os.environ['GT4PY_BUILD_CACHE_DIR']})"
    )
    say(
        f"(a) ready on every rank in {build_s:.1f} s: parsed, lowered, and built on rank 0 "
        f"into {folder} (a later run loads that build)"
    )

    equal = None
    if comm.rank == 0:
        single = gh.CartesianDecomposition(shape, halo=1, periodic=True, comm=MPI.COMM_SELF)
        reference = run(single, args.steps).field
        equal = {
            "(a) compiled": bool(np.array_equal(compiled_result.field, reference)),
            "(b) Python": bool(np.array_equal(python_result.field, reference)),
        }
        for name, same in equal.items():
            verdict = "identical bit for bit" if same else "DIFFERENT"
            say(f"{name}, {args.steps} steps, gathered: {verdict} to one rank alone")
    equal = comm.bcast(equal, root=0)

    u, v, w = fields(d)
    b = bounds(d)
    steps = {
        "(a) compiled step": compiled,
        "(b) Python, runtime exchange": python_step(ex),
        "(c) Python, no exchange": unexchanged_step(comm, barrier=False),
        "(d) Python, barrier instead": unexchanged_step(comm, barrier=True),
    }
    variants = {name: (lambda s=s: s(u, v, w, *b)) for name, s in steps.items()}
    medians = time_per_step(comm, variants, args.steps, args.rounds)
    lower = medians["(c) Python, no exchange"]
    say(f"\nmedian time per step over {args.rounds} rounds of {args.steps} steps, slowest rank:")
    say("| variant | per step | exchange overhead (vs (c)) |\n|---|---|---|")
    for name, seconds in medians.items():
        overhead = "" if name.startswith("(c)") else f"{1e6 * (seconds - lower):+.1f} us"
        say(f"| {name} | {1e6 * seconds:.1f} us | {overhead} |")
    return 0 if all(equal.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
