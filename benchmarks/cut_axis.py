"""Which axis to cut: the exchanges of GT4Py's default fields cut across ``I`` or ``J``.

GT4Py's default CPU fields hold ``I`` with unit stride (a 2-D ``[I, J]`` field has strides
``(8, 8 * padded rows)``). A decomposition cut across ``I`` (``proc_grid=(P, 1)``, what
``proc_grid=None`` chooses for two ranks) has halos of one cell per cache line; cut across
``J`` (``proc_grid=(1, P)``) a halo is one contiguous run. This script times two exchanges
(two fields, halo 1, not periodic, an NxN grid on 2 ranks, fields from
``gh.shared_allocator``) in a ``@gh.program`` (``compiled-``) and from Python (``ours-``),
with the ``mpi`` and the ``shm`` transport, cut either way:
``mpi`` packs a strided halo on the sending rank (its own cache lines) and sends one message;
``shm`` reads the neighbour's cells where they lie, a line from the other core per cell.
Interleaved (``runtime_exchange.interleaved_samples``: turns sample by sample, shuffled each
round), the slowest rank's time per exchange, medians.

Run (2 ranks):  mpirun -n 2 python -O -m mpi4py benchmarks/cut_axis.py [--sizes 32,256,1024]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import gt4py.next as gtx
import numpy as np
from mpi4py import MPI
from runtime_exchange import fmt_time, interleaved_samples

import gt4py_halo as gh

I, J = gtx.Dimension("I"), gtx.Dimension("J")
CUTS = {"across I": lambda p: (p, 1), "across J": lambda p: (1, p)}
TRANSPORTS = ("mpi", "shm")


def variants(n: int, cut: str, transport: str, comm: MPI.Comm) -> dict[str, Callable[[], None]]:
    """The exchanges of two fields (each variant its own), compiled and at run time."""
    d = gh.CartesianDecomposition((n, n), halo=1, proc_grid=CUTS[cut](comm.size), comm=comm)
    pool = gh.shared_allocator(d, 6 * 8 * math.prod(d.allocated_shape) + 2**20)
    ex = gh.make_exchange(d, backend=transport)

    def fields() -> list:
        return [gtx.as_field([I, J], np.zeros(d.allocated_shape), allocator=pool) for _ in "uv"]

    @gh.program
    def exchange_two(u, v):
        ex.exchange(u)
        ex.exchange(v)

    def runtime_two(u, v) -> None:
        ex.exchange(u)
        ex.exchange(v)

    runs = {}
    for name, run in ((f"compiled-{transport}", exchange_two), (f"ours-{transport}", runtime_two)):
        u, v = fields()
        run(u, v)  # built before timing
        runs[f"{name}, {cut}"] = lambda run=run, u=u, v=v: run(u, v)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="32,256,1024")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--batch", type=int, default=200, help="exchange pairs per sample")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rows = []
    for n in map(int, args.sizes.split(",")):
        runs = {
            name: run
            for cut in CUTS
            for transport in TRANSPORTS
            for name, run in variants(n, cut, transport, comm).items()
        }
        samples = interleaved_samples(comm, runs, dict.fromkeys(runs, args.batch), args.repeats)
        rows.append((n, {name: float(np.median(s)) / 2 for name, s in samples.items()}))
    if comm.rank == 0:
        names = list(rows[0][1])
        print(f"{comm.size} ranks, {args.repeats} samples of {args.batch} pairs, per exchange\n")
        print("| grid | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for n, t in rows:
            print(f"| {n}x{n} | " + " | ".join(fmt_time(t[name]) for name in names) + " |")


if __name__ == "__main__":
    main()
