"""Ranks of one node that read each other's fields: the ``shm`` transport.

A 3-D diffusion with NumPy stencils and the runtime exchange, its fields allocated in the
node's shared memory (``gh.shared_allocator``): each rank copies its halos straight from its
neighbours' fields. The same run with the ``mpi`` transport, and on one rank alone: the
gathered results must be identical bit for bit. Prints the time per exchange of each
transport (a repeated blocking call of the same fields runs whole in C).

    mpirun -n 2 python -m mpi4py examples/shared_memory.py [--shape 48,40,12] [--steps 20]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from mpi4py import MPI

import gt4py_halo as gh

NU = 0.1  # diffusion number per axis (stable below 1/6)


def initial(d: gh.CartesianDecomposition) -> np.ndarray:
    """This rank's owned cells of a field that varies along every axis."""
    axes = np.meshgrid(
        *[np.arange(s.start, s.stop) / n for s, n in zip(d.global_slices, d.global_shape)],
        indexing="ij",
    )
    return np.sin(2 * np.pi * axes[0]) * np.cos(2 * np.pi * axes[1]) + axes[2]


def diffuse(d: gh.CartesianDecomposition, backend: str, steps: int) -> tuple[np.ndarray, float]:
    """``steps`` diffusion steps: this rank's owned cells at the end, and the seconds per
    exchange (the slowest rank's)."""
    nbytes = 2 * (8 * math.prod(d.allocated_shape) + 1024)
    allocator = gh.shared_allocator(d, nbytes)
    u, v = (allocator.empty(d.allocated_shape) for _ in range(2))
    u[...] = v[...] = 0.0
    u[d.owned] = initial(d)
    ex = gh.make_exchange(d, backend=backend)
    inner = tuple(slice(1, -1) for _ in d.global_shape)
    exchanging = 0.0
    for _ in range(steps):
        d.comm.Barrier()
        t = time.perf_counter()
        ex.exchange(u)
        exchanging += time.perf_counter() - t
        v[inner] = u[inner] * (1 - 2 * NU * len(d.global_shape))
        for axis in range(len(d.global_shape)):
            for shift in (-1, 1):
                v[inner] += NU * np.roll(u, shift, axis)[inner]
        u, v = v, u
    return u[d.owned].copy(), d.comm.allreduce(exchanging / steps, MPI.MAX)


def gathered(d: gh.CartesianDecomposition, owned: np.ndarray) -> np.ndarray | None:
    """The global field on rank 0 (``None`` elsewhere)."""
    parts = d.comm.gather((d.global_slices, owned), root=0)
    if parts is None:
        return None
    whole = np.empty(d.global_shape)
    for slices, part in parts:
        whole[slices] = part
    return whole


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="48,40,12", help="global grid, comma-separated")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    shape = tuple(int(n) for n in args.shape.split(","))
    comm = MPI.COMM_WORLD
    # on one rank alone, for reference: every axis periodic, so every halo is a neighbour's
    alone = gh.CartesianDecomposition(shape, halo=1, periodic=True, comm=comm.Split(comm.rank))
    reference = diffuse(alone, "shm", args.steps)[0] if comm.rank == 0 else None
    d = gh.CartesianDecomposition(shape, halo=1, periodic=True)
    rows, same = [], True
    for backend in ("shm", "mpi"):
        owned, seconds = diffuse(d, backend, args.steps)
        whole = gathered(d, owned)
        if comm.rank == 0:
            identical = bool(np.array_equal(whole, reference))
            same &= identical
            verdict = "identical bit for bit to one rank alone" if identical else "DIFFERENT"
            rows.append(f"| {backend} | {seconds * 1e6:.1f} us | {verdict} |")
    if comm.rank == 0:
        print(f"{args.steps} steps of {'x'.join(map(str, shape))} on {comm.size} rank(s)")
        print("| transport | time per exchange | result |\n|---|---|---|")
        print("\n".join(rows))
    return 0 if comm.bcast(same, root=0) else 1


if __name__ == "__main__":
    raise SystemExit(main())
