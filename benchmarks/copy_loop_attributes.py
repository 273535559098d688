"""GCC's options for the exchange functions (``GH_COPY_LOOPS``), measured side by side: the
copy speed each gives the compiled exchange, and how long its build takes.

The compiled exchange alone (``compiled-mpi`` of ``benchmarks/runtime_exchange.py``: a
``@gh.program`` of one ``ex.exchange`` of the case's fields) is built once per variant in one
process, each variant's ``optimize`` options in place of those ``COPY_LOOPS`` gives (the C++
of the step differs only there), checked to fill every halo cell with its owner's value, then
timed as ``runtime_exchange.py`` times implementations: samples interleaved, rotating order,
the slowest rank's time, medians. In one process the step built first ran the 80-level
unstructured case up to 10 % slower than those built after it, whichever options they had: a
step of the first variant is built first and not timed, then each variant runs as two steps,
one built in the order given and one in the reverse order, their samples pooled. The first
variant is the ratios' base (its build also pays what a process's first build pays once;
the seconds of CMake and the compiler are the builds' comparable part). GT4Py's cache is not kept
(``GT4PY_BUILD_CACHE_LIFETIME=session``), and DaCe builds into a folder of the run's own
(removed at its end), so that no variant loads another's build, nor a run an earlier run's.

Cases: those of ``runtime_exchange.py`` (cartesian, periodic) and two unstructured ones
(``MESH``: the gather and scatter copies of an ICON-like exchange).

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
from collections.abc import Callable

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
    parser.add_argument("--cases", default=",".join([*rx.CASES, *MESH]))
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


#: The unstructured cases: edges of these many global ids, random owners, each rank
#: mirroring a random tenth of the others'; two float64 fields of 1 or 80 levels.
MESH = {"mesh": 1, "mesh80": 80}
MESH_EDGES = 200_000


def cartesian(name: str, comm: MPI.Comm) -> tuple:
    """A case of ``runtime_exchange.CASES``: its label, fresh fields (owned cells set, halos
    not), the fields' expected values and a new compiled exchange of them."""
    case = rx.CASES[name]
    d = gh.CartesianDecomposition(case.global_shape, halo=case.halo, periodic=True)
    expected = [rx.global_values(d, f) for f in range(case.nfields)]

    def fresh() -> list[np.ndarray]:
        return rx.fresh_fields(d, case.nfields)

    def make() -> Callable[..., None]:
        return rx.compiled_exchange(gh.make_exchange(d, "mpi"), case.nfields)

    return case.label, fresh, expected, make


def mesh(name: str, comm: MPI.Comm) -> tuple:
    """An unstructured case (``MESH``), as ``cartesian`` gives one."""
    levels = MESH[name]
    owner = np.random.default_rng(3).integers(0, comm.size, MESH_EDGES)
    owned, others = np.flatnonzero(owner == comm.rank), np.flatnonzero(owner != comm.rank)
    mirrored = np.random.default_rng(10 + comm.rank).choice(others, len(others) // 10, False)
    d = gh.UnstructuredDecomposition({"edge": (owned, mirrored)})
    gids = np.concatenate([owned, mirrored])
    expected = [gids[:, None] * 100.0 + np.arange(levels) + f for f in range(2)]

    def fresh() -> list[np.ndarray]:
        fields = [np.full((len(gids), levels), -1.0) for _ in expected]
        for field, values in zip(fields, expected):
            field[: len(owned)] = values[: len(owned)]
        return fields

    def make() -> Callable[..., None]:
        ex = gh.make_exchange(d, "mpi")

        def exchange_edges(a, b):
            ex.exchange(a, b, dim="edge")

        return gh.program(exchange_edges)

    label = f"{MESH_EDGES} edges, a tenth mirrored, 2 fields of {levels} level(s)"
    return label, fresh, expected, make


def measure(args: argparse.Namespace, comm: MPI.Comm) -> None:
    spent = time_phases()
    compiling = "CMake and the compiler"
    for name in args.cases.split(","):
        label, fresh, expected, make = (mesh if name in MESH else cartesian)(name, comm)
        fields = fresh()
        runs, builds, compiles = {}, {}, {}
        order = [args.variants[0], *args.variants, *reversed(args.variants)]
        try:  # a step not timed, then each variant twice (see above)
            for n, variant in enumerate(order):
                program.COPY_LOOPS = with_options(variant)
                step = make()
                checked = fresh()
                start, compiled = time.perf_counter(), spent.get(compiling, 0.0)
                step(*checked)
                if variant not in builds:  # the second is found by its digest
                    builds[variant] = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
                    compiled = spent.get(compiling, 0.0) - compiled
                    compiles[variant] = comm.allreduce(compiled, op=MPI.MAX)
                if not all(np.array_equal(a, b) for a, b in zip(checked, expected)):
                    raise AssertionError(f"{name}, {variant}: wrong halo cells")
                if n > 0:
                    runs[(variant, n)] = lambda step=step, fields=fields: step(*fields)
        finally:
            program.COPY_LOOPS = COPY_LOOPS
        for run in runs.values():  # warm up
            for _ in range(5):
                run()
        first = next(iter(runs.values()))
        probe = comm.allreduce(
            float(np.median([rx.time_batch(first, 1) for _ in range(7)])), op=MPI.MAX
        )
        batch = max(1, min(1000, round(args.sample_ms / 1e3 / probe)))
        timed = rx.interleaved_samples(comm, runs, dict.fromkeys(runs, batch), args.repeats)
        samples = {v: np.concatenate([t for (w, _), t in timed.items() if w == v]) for v in builds}
        if comm.rank == 0:
            base = np.median(samples[args.variants[0]])
            print(f"{label}, {comm.size} rank(s), batch {batch}:")
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
