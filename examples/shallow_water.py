"""A shallow-water-like step written with halo annotations only: gt4py_halo places every
exchange, in a compiled step, and the result is checked against one rank alone.

    mpirun -n 2 python -m mpi4py examples/shallow_water.py [--shape 48,40 --steps 5]

Linear shallow water on a periodic C-grid (height ``h`` at cell centres, velocities ``u``, ``v``
on the east and north faces), forward-backward in time: the momentum equations read ``h``
one cell east (``u``) or north (``v``), the continuity equation reads ``u`` one cell west and
``v`` one cell south. Each GT4Py program says so once, where it is defined (``@gh.halo``);
the step calls them with no exchange written, and ``@gh.program(exchange=ex)`` places them:

    step(h, u, v, h2, u2, v2):  momentum(h, u -> u2), (h, v -> v2), continuity(h, u2, v2 -> h2),
                                then the same from (h2, u2, v2) back into (h, u, v)

needs ``h`` exchanged before the first momentum (the step's last write left it stale),
``u2`` and ``v2`` together before the first continuity (one exchange: one message per
neighbour), ``h2`` before the second momentum, ``u`` and ``v`` before the second continuity:
four exchanges per step, printed from ``step.exchange_report()``. Rank 0 then runs the same
compiled step alone on the whole grid; the exit status is 1 unless every rank's owned cells
hold the same bits.
"""

import argparse
import os
import sys
from collections.abc import Sequence
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
# g dt / dx = 0.125 and H dt / dx = 0.25 (dx = dy), literals: GT4Py takes no Python constants
# here; a stable forward-backward step


@gtx.field_operator
def east_momentum(h: FieldIJ, u: FieldIJ) -> FieldIJ:
    return u - 0.125 * (h(I + 1) - h)


@gtx.field_operator
def north_momentum(h: FieldIJ, v: FieldIJ) -> FieldIJ:
    return v - 0.125 * (h(J + 1) - h)


@gtx.field_operator
def height(h: FieldIJ, u: FieldIJ, v: FieldIJ) -> FieldIJ:
    return h - 0.25 * ((u - u(I - 1)) + (v - v(J - 1)))


@gh.halo(h=1)
@gtx.program(backend=run_dace_cpu)
def momentum_u(
    h: FieldIJ,
    u: FieldIJ,
    u_new: FieldIJ,
    i0: gtx.int32,
    i1: gtx.int32,
    j0: gtx.int32,
    j1: gtx.int32,
) -> None:
    east_momentum(h, u, out=u_new, domain={I: (i0, i1), J: (j0, j1)})


@gh.halo(h=1)
@gtx.program(backend=run_dace_cpu)
def momentum_v(
    h: FieldIJ,
    v: FieldIJ,
    v_new: FieldIJ,
    i0: gtx.int32,
    i1: gtx.int32,
    j0: gtx.int32,
    j1: gtx.int32,
) -> None:
    north_momentum(h, v, out=v_new, domain={I: (i0, i1), J: (j0, j1)})


@gh.halo(u=1, v=1)
@gtx.program(backend=run_dace_cpu)
def continuity(
    h: FieldIJ,
    u: FieldIJ,
    v: FieldIJ,
    h_new: FieldIJ,
    i0: gtx.int32,
    i1: gtx.int32,
    j0: gtx.int32,
    j1: gtx.int32,
) -> None:
    height(h, u, v, out=h_new, domain={I: (i0, i1), J: (j0, j1)})


def make_step(ex: gh.Exchange, comm: MPI.Comm):
    """Two forward-backward steps, (h, u, v) -> (h2, u2, v2) -> (h, u, v), exchanges placed."""

    @gh.program(comm=comm, exchange=ex)
    def step(h, u, v, h2, u2, v2, i0, i1, j0, j1):
        momentum_u(h, u, u2, i0, i1, j0, j1)
        momentum_v(h, v, v2, i0, i1, j0, j1)
        continuity(h, u2, v2, h2, i0, i1, j0, j1)
        momentum_u(h2, u2, u, i0, i1, j0, j1)
        momentum_v(h2, v2, v, i0, i1, j0, j1)
        continuity(h2, u, v, h, i0, i1, j0, j1)

    return step


def compile_programs(comm: MPI.Comm) -> None:
    """The GT4Py programs compiled on rank 0 of ``comm``, loaded by the others."""
    a, b, c, d = (gtx.as_field([I, J], np.zeros((3, 3))) for _ in range(4))
    one, two = gtx.int32(1), gtx.int32(2)

    def first_calls() -> None:
        momentum_u(a, b, c, one, two, one, two)
        momentum_v(a, b, c, one, two, one, two)
        continuity(a, b, c, d, one, two, one, two)

    compile_on_one_rank(comm, first_calls)


def run(d: gh.CartesianDecomposition, steps: int) -> tuple[np.ndarray | None, list]:
    """``steps`` steps from a height bump at rest on ``d``: the height gathered on rank 0,
    and what was placed."""
    step = make_step(gh.make_exchange(d), d.comm)
    i, j = np.meshgrid(*(np.arange(s.start, s.stop) for s in d.global_slices), indexing="ij")
    h = np.zeros(d.allocated_shape)
    h[d.owned] = 1.0 + ((3 * i + 5 * j) % 7) / 64.0  # exactly representable
    fields = [gtx.as_field([I, J], h)] + [
        gtx.as_field([I, J], np.zeros(d.allocated_shape)) for _ in range(5)
    ]
    bounds = [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]
    for _ in range(steps):
        step(*fields, *bounds)
    blocks = d.comm.gather((d.global_slices, fields[0].asnumpy()[d.owned]), root=0)
    if blocks is None:
        return None, step.exchange_report()
    whole = np.empty(d.global_shape)
    for slices, block in blocks:
        whole[slices] = block
    return whole, step.exchange_report()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="48,40")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    shape = tuple(int(n) for n in args.shape.split(","))
    comm = MPI.COMM_WORLD
    compile_programs(comm)
    d = gh.CartesianDecomposition(shape, halo=1, periodic=True)
    together, placed = run(d, args.steps)
    same = None
    if comm.rank == 0:
        print(
            f"shallow water on {shape[0]}x{shape[1]} cells, {comm.size} rank(s), exchanges placed:"
        )
        for exchange in placed:
            print(f"  {exchange}")
        alone, _ = run(
            gh.CartesianDecomposition(shape, halo=1, periodic=True, comm=MPI.COMM_SELF), args.steps
        )
        same = bool(np.array_equal(together, alone))
        print(
            f"{args.steps} steps, gathered: "
            + (
                "identical bit for bit to one rank alone"
                if same
                else "DIFFERENT from one rank alone"
            )
        )
    return 0 if comm.bcast(same, root=0) else 1


if __name__ == "__main__":
    sys.exit(main())
