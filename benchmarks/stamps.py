"""What a compiled MPI exchange costs per call, to compare two versions of gt4py_halo (the
stamps of ``compiled/stamps.py`` against the code before them): run it with each version's
``src`` first on ``PYTHONPATH``, alternated, and compare the medians.

Three steps of one exchange each, called again and again with the same field (kept calls,
straight to the binary), on 2 ranks:

- ``small``: 32x32x8, halo (1, 1, 0), one field, periodic: one packed contiguous message per
  neighbour (its stamp in the arena right before its segments);
- ``cube``: 64^3, halo 1, one field, periodic: faces across the split axis are long
  contiguous runs sent in place, the edges and corners packed (the stamp heads them);
- ``cells``: an unstructured dim of 4096 cells per rank with 512 halo cells from the other
  rank, 8 levels (the stamp a message of its own per neighbour).

Samples interleave the steps, each ``--calls`` calls; a sample's time is the slowest rank's;
the table gives the median per call over ``--samples`` samples.

Run:  mpirun -n 2 python -O -m mpi4py benchmarks/stamps.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import gt4py_halo as gh


def cartesian(comm: MPI.Comm, shape: tuple, halo: tuple) -> tuple:
    d = gh.CartesianDecomposition(shape, halo=halo, periodic=True, comm=comm)
    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=comm)
    def step(a):
        ex.exchange(a)

    return step, np.ones(tuple(d.plan().local_shape) + shape[len(d.plan().local_shape) :])


def cells(comm: MPI.Comm, owned: int = 4096, halo: int = 512, levels: int = 8) -> tuple:
    rank, size = comm.rank, comm.size
    mine = list(range(rank * owned, (rank + 1) * owned))
    other = (rank + 1) % size
    theirs = list(range(other * owned, other * owned + halo)) if size > 1 else []
    d = gh.UnstructuredDecomposition({"cell": (mine, theirs)}, comm=comm)
    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=comm)
    def step(a):
        ex.exchange(a)

    return step, np.ones((owned + len(theirs), levels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    steps = {
        "small": cartesian(comm, (32, 32, 8), (1, 1, 0)),
        "cube": cartesian(comm, (64, 64, 64), (1, 1, 1)),
        "cells": cells(comm),
    }
    for step, field in steps.values():  # built, and kept
        step(field)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.samples):
        for name, (step, field) in steps.items():
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(args.calls):
                step(field)
            took = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
            times[name].append(took / args.calls)
    if comm.rank == 0:
        print(f"gt4py_halo from {gh.__file__}, {comm.size} ranks, {args.calls} calls per sample")
        print("| step | median per call |\n|---|---|")
        for name, samples in times.items():
            print(f"| {name} | {statistics.median(samples) * 1e6:.2f} us |")


if __name__ == "__main__":
    main()
