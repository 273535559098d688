"""What the `ghex` runtime's field checks cost: exchanges that repeat their kind of fields
against exchanges that alternate two kinds (float64, float32) on one dim.

Ranks check their fields collectively whenever an exchange's kind differs from the last
exchange of its dim (``runtime/agreement.py``): alternating pays that check at every call,
repeating never. Samples interleave the two patterns; each is ``--pairs`` pairs of exchanges
after a barrier; the table gives the median time per exchange over ``--samples`` samples,
slowest rank.

Run (2 ranks):  mpirun -n 2 python -m mpi4py benchmarks/field_checks.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import gt4py_halo as gh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=500)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    d = gh.CartesianDecomposition((32, 32, 8), halo=(1, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend="ghex")
    a = np.zeros(d.allocated_shape)
    b = np.zeros(d.allocated_shape, np.float32)
    patterns = {"repeating": (a, a), "alternating": (a, b)}
    times: dict[str, list[float]] = {name: [] for name in patterns}
    for first, second in patterns.values():  # builds GHEX's patterns and checks both kinds
        ex.exchange(first)
        ex.exchange(second)
    for _ in range(args.samples):
        for name, (first, second) in patterns.items():
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(args.pairs):
                ex.exchange(first)
                ex.exchange(second)
            elapsed = (time.perf_counter() - start) / (2 * args.pairs)
            times[name].append(comm.allreduce(elapsed, op=MPI.MAX))
    if comm.rank == 0:
        print(f"{comm.size} ranks, {args.samples} samples of {args.pairs} pairs")
        print("| pattern | per exchange |\n|---|---|")
        for name, values in times.items():
            print(f"| {name} | {statistics.median(values) * 1e6:.1f} us |")


if __name__ == "__main__":
    main()
