"""LLNL Comb, the C++ halo-exchange benchmark, against our exchanges, run by run.

Comb runs as a process of its own (built by ``benchmarks/build-comb.sh``), so the comparison
alternates processes: each round runs, per case, Comb, ``benchmarks/runtime_exchange.py``
(ours, compiled and runtime, with its Python peers and, given ``--references``, the case's C
references: halo copies, ordered and shm exchanges in plain C, ``benchmarks/limits.c``'s
library, sample by sample in turn with ours) and, given ``--limits``, the case's limit
(``benchmarks/limits.c --cases``), in turns whose order rotates from round to round; the table
gives the median over rounds of each one's time per exchange. This machine's speed moves
between runs (``docs/benchmarks.md``): only numbers of one such run are compared.

- Comb's time per exchange is the sum of the four phases it times per cycle: posting the
  receives, packing and posting the sends, waiting for and unpacking the receives, waiting
  for the sends; each averaged over its cycles and ranks (Comb reports averages). Comb is
  built for sequential CPU execution with host memory and run with its ``mpi`` communication
  only. It sends a rank's own periodic halo through MPI as well (ours copies it).
- ours: ``runtime_exchange.py``'s median over its samples, the slowest rank's, per exchange.

Geometry: our fields are C-ordered with axis 0 split over the 2 ranks; Comb's meshes have x
fastest, so our axes (0, 1, 2) are Comb's (z, y, x): the same blocks and halos, the same
message sizes, the same contiguous and strided faces.

Run (it calls mpirun itself, 2 ranks):
    python benchmarks/comb_peer.py --comb build/comb/bin/comb [--limits build/limits]
        [--references build/liblimits.so] [--rounds 5] [--cases small,cube]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import mpi4py

mpi4py.rc.initialize = False  # this process only starts mpirun: no MPI of its own

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("runtime_exchange", HERE / "runtime_exchange.py")
runtime_exchange = importlib.util.module_from_spec(_spec)
sys.modules["runtime_exchange"] = runtime_exchange
_spec.loader.exec_module(runtime_exchange)  # the cases, and how ours are run
CASES = runtime_exchange.CASES
OURS = (
    "compiled-mpi",
    "compiled-ghex",
    "compiled-shm",
    "ours-mpi",
    "ours-ghex",
    "ours-shm",
    "mpi4py",
    "pyghex",
)
#: The C references, in turn with ours (``runtime_exchange.py --references``).
REFERENCES = tuple(runtime_exchange.REFERENCES)
COMB_PHASES = ("post-recv", "post-send", "wait-recv", "wait-send")
#: Comb cycles per run, by case: each run lasts a second or so here
CYCLES = {"small": 20000, "cube": 5000, "wide": 1000, "big": 1000, "large": 300}


def comb_seconds(comb: str, case, cycles: int) -> float:
    """One Comb run of ``case`` on 2 ranks: seconds per exchange."""
    n0, n1, n2 = case.global_shape
    h0, h1, h2 = case.halo
    command = [
        "mpirun", "-n", "2", comb, f"{n2}_{n1}_{n0}",
        "-divide", "1_1_2", "-periodic", "1_1_1", "-ghost", f"{h2}_{h1}_{h0}",
        "-vars", str(case.nfields), "-cycles", str(cycles),
        "-comm", "disable", "all", "-comm", "enable", "mpi",
        "-exec", "disable", "all", "-exec", "enable", "seq",
        "-memory", "disable", "all", "-memory", "enable", "host",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:  # Comb writes its reports there
        subprocess.run(command, cwd=folder, check=True, capture_output=True)
        summary = (Path(folder) / "Comb_00_summary").read_text()
    comm = summary[summary.index("Starting test Comm mpi") :]
    total = 0.0
    for phase in COMB_PHASES:
        found = re.search(rf"^{phase}:\s+num \d+ avg ([0-9.e+-]+) s", comm, re.MULTILINE)
        if found is None:
            raise RuntimeError(f"Comb's summary has no {phase} line:\n{summary}")
        total += float(found.group(1))
    return total


def ours_seconds(
    case, impls: tuple[str, ...], repeats: int, references: str | None
) -> dict[str, float]:
    """One ``runtime_exchange.py`` run of ``case`` on 2 ranks: seconds per exchange, per
    implementation (and C reference, given ``references``)."""
    command = [
        "mpirun", "-n", "2", sys.executable, "-O", "-m", "mpi4py", str(HERE / "runtime_exchange.py"),
        "--cases", case.name, "--impls", ",".join(impls), "--repeats", str(repeats),
    ]  # fmt: skip
    if references:
        command += ["--references", references]
        impls = (*impls, *REFERENCES)
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    header = next(line for line in out.splitlines() if line.startswith("| case |"))
    row = next(line for line in out.splitlines() if line.startswith(f"| {case.label} |"))
    names = [c.strip() for c in header.strip("|").split("|")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    times = {}
    for name, cell in zip(names, cells):
        if name in impls:
            value, unit = cell.split()[:2]
            times[name] = float(value) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]
    return times


def limit_seconds(limits: str, case) -> float:
    """One ``limits --cases`` run of ``case`` on 2 ranks: its limit."""
    command = ["mpirun", "-n", "2", limits, "--cases", case.spec]
    out = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    return out["limit_s"][case.spec]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comb", required=True, help="the comb executable")
    parser.add_argument("--limits", help="build/limits: the cases' limits in turn too")
    parser.add_argument(
        "--references", help="build/liblimits.so: its C references in turn with ours"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--impls", default=",".join(OURS), help="passed to runtime_exchange.py")
    parser.add_argument("--repeats", type=int, default=60, help="runtime_exchange.py's samples")
    parser.add_argument("--json", help="write the medians there too (seconds, by case)")
    args = parser.parse_args(argv)
    comb = str(Path(args.comb).resolve())  # Comb runs in a folder of its own
    cases = [CASES[c.strip()] for c in args.cases.split(",") if c.strip()]
    impls = tuple(i.strip() for i in args.impls.split(",") if i.strip())
    samples: dict[str, dict[str, list[float]]] = {c.name: {} for c in cases}
    references = str(Path(args.references).resolve()) if args.references else None
    turns = ["comb", "ours"] + (["limit"] if args.limits else [])
    for round_ in range(args.rounds):
        for case in cases:
            shift = round_ % len(turns)
            for which in turns[shift:] + turns[:shift]:
                if which == "comb":
                    cycles = CYCLES.get(case.name, 1000)
                    times = {"comb": comb_seconds(comb, case, cycles)}
                elif which == "ours":
                    times = ours_seconds(case, impls, args.repeats, references)
                else:
                    times = {"limit": limit_seconds(args.limits, case)}
                for name, seconds in times.items():
                    samples[case.name].setdefault(name, []).append(seconds)
            print(f"# round {round_ + 1}: {case.name} done", file=sys.stderr, flush=True)
    columns = ["comb", *impls, *(REFERENCES if references else ())]
    columns += ["limit"] if args.limits else []
    print(
        f"{datetime.date.today()}, 2 ranks, {args.rounds} rounds (median over rounds of each "
        "run's time per exchange; ratio to Comb)\n"
    )
    print("| case | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    found = {}
    for case in cases:
        medians = {n: statistics.median(s) for n, s in samples[case.name].items()}
        found[case.name] = medians
        cells = [runtime_exchange.fmt_time(medians["comb"])]
        cells += [
            f"{runtime_exchange.fmt_time(medians[n])} ({medians[n] / medians['comb']:.2f}x)"
            for n in columns[1:]
        ]
        print(f"| {case.label} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
