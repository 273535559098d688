"""GCC's options for the exchange functions (``GH_COPY_LOOPS``), measured side by side: the
copy speed each gives the compiled exchange, and how long its build takes.

The compiled exchange alone (``compiled-mpi`` of ``benchmarks/runtime_exchange.py``: a
``@gh.program`` of one ``ex.exchange`` of the case's fields) is built once per variant in one
process, each variant's ``optimize`` options in place of those ``COPY_LOOPS`` gives (the C++
of the step differs only there), checked to fill every halo cell with its owner's value, then
timed as ``runtime_exchange.py`` times implementations: samples interleaved, rotating order,
the slowest rank's time, medians. The first variant is the ratios' base (its build also pays
what a process's first build pays once; the seconds of CMake and the compiler are the
builds' comparable part). GT4Py's cache is not kept
(``GT4PY_BUILD_CACHE_LIFETIME=session``), and DaCe builds into a folder of the run's own
(removed at its end), so that no variant loads another's build, nor a run an earlier run's.

Run (2 ranks; 1 rank: every periodic halo is a self copy):
    mpirun -n 2 python -O -m mpi4py benchmarks/copy_loop_attributes.py \\
        --variants no-unswitch-loops no-unswitch-loops,no-thread-jumps O2,no-unswitch-loops
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import sys
import tempfile
import time

os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "session"  # before gt4py is imported

import dace
import numpy as np
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo.compiled import program
from gt4py_halo.compiled.shared_functions import COPY_LOOPS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runtime_exchange as rx
from first_build import time_phases

_OPTIONS = re.compile(r"optimize\(([^)]*)\)")


def with_options(options: str) -> str:
    """``COPY_LOOPS`` with GCC's ``optimize`` options ``options`` (comma-separated)."""
    quoted = ", ".join(f'"{o.strip()}"' for o in options.split(","))
    return _OPTIONS.sub(f"optimize({quoted})", COPY_LOOPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", required=True, help="options, comma-separated")
    parser.add_argument("--cases", default=",".join(rx.CASES))
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--sample-ms", type=float, default=2.0)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    folder = comm.bcast(
        tempfile.mkdtemp(prefix=".copy_loops_", dir=".") if comm.rank == 0 else None
    )
    dace.Config.set("default_build_folder", value=folder)  # builds of this run alone
    try:
        measure(args, comm)
    finally:
        comm.Barrier()
        if comm.rank == 0:  # DaCe adds each rank's number under a launcher
            for path in glob.glob(glob.escape(folder) + "*"):
                shutil.rmtree(path, ignore_errors=True)


def measure(args: argparse.Namespace, comm: MPI.Comm) -> None:
    spent = time_phases()
    compiling = "CMake and the compiler"
    for name in args.cases.split(","):
        case = rx.CASES[name]
        d = gh.CartesianDecomposition(case.global_shape, halo=case.halo, periodic=True)
        fields = rx.fresh_fields(d, case.nfields)
        expected = [rx.global_values(d, f) for f in range(case.nfields)]
        runs, builds, compiles = {}, {}, {}
        try:
            for variant in args.variants:
                program.COPY_LOOPS = with_options(variant)
                step = rx.compiled_exchange(gh.make_exchange(d, "mpi"), case.nfields)
                checked = rx.fresh_fields(d, case.nfields)
                start, compiled = time.perf_counter(), spent.get(compiling, 0.0)
                step(*checked)
                builds[variant] = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
                compiles[variant] = comm.allreduce(spent.get(compiling, 0.0) - compiled, op=MPI.MAX)
                if not all(np.array_equal(a, b) for a, b in zip(checked, expected)):
                    raise AssertionError(f"{name}, {variant}: wrong halo cells")
                runs[variant] = lambda step=step, fields=fields: step(*fields)
        finally:
            program.COPY_LOOPS = COPY_LOOPS
        for run in runs.values():  # warm up
            for _ in range(5):
                run()
        first = runs[args.variants[0]]
        probe = comm.allreduce(
            float(np.median([rx.time_batch(first, 1) for _ in range(7)])), op=MPI.MAX
        )
        batch = max(1, min(1000, round(args.sample_ms / 1e3 / probe)))
        samples = rx.interleaved_samples(comm, runs, dict.fromkeys(runs, batch), args.repeats)
        if comm.rank == 0:
            base = np.median(samples[args.variants[0]])
            print(f"{case.label}, {comm.size} rank(s), batch {batch}:")
            for variant, times in samples.items():
                median = np.median(times)
                print(
                    f"  {variant}: {rx.fmt_time(median)} ({median / base:.2f}x), "
                    f"build {builds[variant]:.1f} s (CMake and the compiler "
                    f"{compiles[variant]:.1f} s)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
