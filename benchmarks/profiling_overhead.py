"""What profiling costs an exchange: off (the hooks test a module global and do nothing) and on.

On the 32x32x8 exchange (halo (1,1,0), one field, ``mpi`` transport, 2 ranks), interleaved
samples (``runtime_exchange.interleaved_samples``: slowest rank, medians):

- ``exchange``: ``ex.exchange(a)`` with profiling off: what every run pays;
- ``off-hooks``: the hooks alone, as an exchange runs them with profiling off (the tests of
  ``profiling.recorder`` in ``Exchange`` and the ``mpi`` transport), without the exchange:
  the part of ``exchange`` that profiling adds;
- ``profiled``: ``ex.exchange(a)`` inside ``gh.profile`` (events recorded; measured in a
  profile of its own after the others, as a profile spans its samples).

Run (2 ranks):  mpirun -n 2 python -m mpi4py benchmarks/profiling_overhead.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo import profiling

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_exchange import fmt_time, interleaved_samples, time_batch

#: Tests of ``profiling.recorder`` one blocking exchange makes with the ``mpi`` transport:
#: ``Exchange._start`` 2, ``ExchangeHandle.finish`` 2, ``MessageSet.start`` 5, ``.finish`` 4.
HOOKS_PER_EXCHANGE = 13


def off_hooks() -> None:
    for _ in range(HOOKS_PER_EXCHANGE):
        rec = profiling.recorder
        if rec:
            rec.now()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    d = gh.CartesianDecomposition((32, 32, 8), halo=(1, 1, 0), periodic=True)
    ex = gh.make_exchange(d, backend="mpi")
    a = np.zeros(d.allocated_shape)
    runs = {"exchange": lambda: ex.exchange(a), "off-hooks": off_hooks}
    for run in runs.values():
        for _ in range(20):
            run()
    samples = interleaved_samples(comm, runs, dict.fromkeys(runs, args.batch), args.repeats)
    folder = comm.bcast(tempfile.mkdtemp() if comm.rank == 0 else None)
    with gh.profile(folder):
        profiled = np.array([time_batch(runs["exchange"], args.batch) for _ in range(args.repeats)])
    comm.Allreduce(MPI.IN_PLACE, profiled, op=MPI.MAX)
    samples["profiled"] = profiled
    if comm.rank == 0:
        median = {name: float(np.median(s)) for name, s in samples.items()}
        print(f"32x32x8, halo (1,1,0), 1 field, mpi, {comm.size} ranks, {args.repeats} samples")
        print("| exchange (off) | off hooks alone | share of the exchange | profiled (on) |")
        print("|---|---|---|---|")
        share = median["off-hooks"] / median["exchange"]
        print(
            f"| {fmt_time(median['exchange'])} | {fmt_time(median['off-hooks'])} | "
            f"{100 * share:.2f}% | {fmt_time(median['profiled'])} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
