"""2D periodic diffusion with GT4Py on distributed memory: the gt4py_halo demo.

    mpirun -n 2 python -m mpi4py examples/diffusion_2d.py

Every rank holds one block of the global grid plus a halo of width 1. A step exchanges the halo
of ``u`` with gt4py_halo, then runs a GT4Py program (DaCe CPU backend) on the owned cells only,
writing ``v``; then ``u`` and ``v`` swap. At the end rank 0 gathers the blocks, runs the same
steps alone on the whole grid and checks that both results are identical bit for bit: the
exchange must deliver exactly the values a single rank sees, and each cell's update does the
same arithmetic however the grid is cut. The exit status is 1 if they differ.

Rank 0 compiles the program into a persistent build cache, the other ranks load it from there
(``gt4py_halo.gt4py_support``). Unless set already, the cache goes to ``.cache/gt4py`` in the
repository. Run with ``python -O`` to drop gt4py's argument checks on every call (about
100 us per call here).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time
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

GLOBAL_SHAPE = (128, 96)
STEPS = 50


@gtx.field_operator
def diffuse(u: FieldIJ) -> FieldIJ:
    # diffusion number 0.2: explicit 5-point diffusion is stable up to 0.25
    return u + 0.2 * (u(I + 1) + u(I - 1) + u(J + 1) + u(J - 1) - 4.0 * u)


@gtx.program(backend=run_dace_cpu)
def diffusion_step(
    u: FieldIJ, v: FieldIJ, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
) -> None:
    diffuse(u, out=v, domain={I: (i0, i1), J: (j0, j1)})


def compile_stencil(comm: MPI.Comm) -> None:
    """Compile ``diffusion_step`` on rank 0 of ``comm``; the other ranks load it from the cache.

    A first call on 3x3 fields compiles it: the program is specialized on field types, not
    sizes, so every rank's block reuses it. Calling again only repeats a cheap call.
    """
    u = gtx.as_field([I, J], np.zeros((3, 3)))
    v = gtx.as_field([I, J], np.zeros((3, 3)))
    one, two = gtx.int32(1), gtx.int32(2)
    compile_on_one_rank(comm, lambda: diffusion_step(u, v, one, two, one, two))


def initial_condition(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Exactly representable values of the global indices, so any cut gives the same bits."""
    return ((3 * i + 5 * j) % 11) / 10.0 + (i // 16 + j // 16) % 2


@dataclasses.dataclass
class Result:
    """One run: the global field on rank 0 (``None`` elsewhere) and this rank's step times."""

    field: np.ndarray | None
    stencil_s: list[float]
    exchange_s: list[float]


def run(decomposition: gh.CartesianDecomposition, steps: int) -> Result:
    """Diffuse for ``steps`` steps on ``decomposition``; collective over its communicator."""
    exchange = gh.make_exchange(decomposition, backend="mpi")
    owned = decomposition.owned
    i, j = np.meshgrid(
        *(np.arange(s.start, s.stop) for s in decomposition.global_slices), indexing="ij"
    )
    u0 = np.zeros(decomposition.allocated_shape)
    u0[owned] = initial_condition(i, j)
    # gtx.as_field copies: exchange and stencil both work on the fields' own buffers
    u = gtx.as_field([I, J], u0)
    v = gtx.as_field([I, J], np.zeros(decomposition.allocated_shape))
    bounds = [gtx.int32(x) for s in owned for x in (s.start, s.stop)]
    stencil_s, exchange_s = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        exchange.exchange(u)
        t1 = time.perf_counter()
        diffusion_step(u, v, *bounds)
        t2 = time.perf_counter()
        exchange_s.append(t1 - t0)
        stencil_s.append(t2 - t1)
        u, v = v, u
    return Result(_gather(decomposition, u.asnumpy()[owned]), stencil_s, exchange_s)


def _gather(decomposition: gh.CartesianDecomposition, block: np.ndarray) -> np.ndarray | None:
    blocks = decomposition.comm.gather((decomposition.global_slices, block), root=0)
    if blocks is None:
        return None
    field = np.empty(decomposition.global_shape)
    for slices, b in blocks:
        field[slices] = b
    return field


def main() -> int:
    """The demo; returns the exit status, the same on every rank."""
    comm = MPI.COMM_WORLD
    t0 = time.perf_counter()
    compile_stencil(comm)
    ready_s = comm.gather(time.perf_counter() - t0, root=0)
    decomposition = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True)
    result = run(decomposition, STEPS)
    medians_us = comm.gather(
        (1e6 * statistics.median(result.stencil_s), 1e6 * statistics.median(result.exchange_s)),
        root=0,
    )
    equal = None
    if comm.rank == 0:
        single = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=MPI.COMM_SELF)
        reference = run(single, STEPS).field
        equal = bool(np.array_equal(result.field, reference))
        print(
            f"diffusion {GLOBAL_SHAPE[0]}x{GLOBAL_SHAPE[1]}, {STEPS} steps, {comm.size} ranks, "
            f"process grid {decomposition.proc_grid}"
        )
        print(
            f"stencil compiled (or loaded from the cache) on rank 0 in {ready_s[0]:.2f} s, "
            f"loaded on all ranks after {max(ready_s):.2f} s"
        )
        for rank, (stencil, exch) in enumerate(medians_us):
            print(f"rank {rank}: median per step: stencil {stencil:.1f} us, exchange {exch:.1f} us")
        print(
            "gathered result equals the single-rank result bit for bit"
            if equal
            else "MISMATCH: gathered result differs from the single-rank result"
        )
    return 0 if comm.bcast(equal, root=0) else 1


if __name__ == "__main__":
    sys.exit(main())
