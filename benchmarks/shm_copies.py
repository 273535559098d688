"""The compiled ``shm`` exchange's copies alone, on one process, to compare versions of its
header (``transports/shm/include/gt4py_halo_shm.hpp``): runs of the exchange itself move by
2x between minutes on a shared machine, its copies on one core much less.

Per case of ``runtime_exchange.py`` (the block of one of 2 ranks, float64 fields in C order),
the rank's whole halo as if it were its own neighbour in every axis (every axis periodic,
one rank: the plan's own boxes, as ``plan_array`` lists them), copied by the header's
``copy_rows_of`` (``benchmarks/shm_copies.cpp``, built with ``mpicxx -O3 -march=native``
against each header folder). Versions take turns, round by round; the table gives the
median over rounds of each version's median time.

Run:  python benchmarks/shm_copies.py [--include DIR ...]   (header folders; default this
      tree's: pass another tree's ``src/gt4py_halo/transports/shm/include`` to compare)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from mpi4py import MPI
from runtime_exchange import CASES, fmt_time

import gt4py_halo as gh
from gt4py_halo.runtime.packing import LOCKSTEP_RUN_BYTES
from gt4py_halo.transports.shm.expansion import _rows

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "shm_copies.cpp"
TREE_HEADERS = HERE.parent / "src" / "gt4py_halo" / "transports"


def rows_file(case, folder: Path) -> Path:
    """The own boxes of the case's block, every axis periodic on one rank."""
    block = (case.global_shape[0] // 2, *case.global_shape[1:])
    d = gh.CartesianDecomposition(block, halo=case.halo, periodic=True, comm=MPI.COMM_SELF)
    plan = d.plan()
    rows = np.concatenate([_rows(n.recv, n.send, 3) for n in plan.neighbours])
    path = folder / f"{case.name}.rows"
    lines = [" ".join(map(str, (*plan.local_shape, len(rows))))]
    path.write_text("\n".join(lines + [" ".join(map(str, r)) for r in rows]) + "\n")
    return path


def build(include: Path, binary: Path) -> Path:
    mpi_headers = TREE_HEADERS / "mpi" / "include"
    subprocess.run(
        ["mpicxx", "-O3", "-march=native", '-DDACE_EXPORTED=__attribute__((visibility("default")))']
        + [f"-I{include}", f"-I{mpi_headers}", str(SOURCE), "-o", str(binary)],
        check=True,
    )
    return binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--include", action="append", type=Path, help="header folders")
    parser.add_argument("--cases", default="cube,wide,big,large")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=201, help="copies per run")
    args = parser.parse_args()
    includes = args.include or [TREE_HEADERS / "shm" / "include"]
    cases = [CASES[name] for name in args.cases.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        binaries = [build(inc, folder / f"copies{i}") for i, inc in enumerate(includes)]
        rows = {case.name: rows_file(case, folder) for case in cases}
        seconds: dict[tuple[int, str], list[float]] = {}
        for _ in range(args.rounds):
            for i, binary in enumerate(binaries):
                for case in cases:
                    command = [str(binary), str(rows[case.name]), str(case.nfields)]
                    command += [str(args.repeats), str(LOCKSTEP_RUN_BYTES)]
                    ran = subprocess.run(command, check=True, capture_output=True)
                    seconds.setdefault((i, case.name), []).append(float(ran.stdout))
    print("| case | " + " | ".join(str(inc) for inc in includes) + " |")
    print("|---|" + "---|" * len(includes))
    for case in cases:
        times = [statistics.median(seconds[i, case.name]) for i in range(len(includes))]
        print(f"| {case.label} | " + " | ".join(fmt_time(t) for t in times) + " |")


if __name__ == "__main__":
    main()
