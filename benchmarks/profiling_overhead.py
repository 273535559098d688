"""What profiling costs the 32x32x8 exchange: off (against the code without the hooks) and on.

Runs ``benchmarks/runtime_exchange.py --cases small --impls ours-mpi`` (32x32x8, halo (1,1,0),
one field, the ``mpi`` runtime exchange, 2 ranks: its interleaved samples, slowest rank,
median) as three variants, taking turns round after round in a rotating order:

- ``baseline``: gt4py_halo at ``--baseline`` (a git revision without the profiling hooks),
  from a copy of its ``src/`` put first on ``PYTHONPATH``;
- ``off``: this tree, profiling off (what every run pays for the hooks);
- ``on``: this tree with ``GT4PY_HALO_PROFILE`` set (every phase recorded, and viztracer
  tracing the calls).

Each round runs each variant as its own job, so the three share the machine's state alike.

Run (not under mpirun: it starts the jobs):
    python benchmarks/profiling_overhead.py --baseline 17cb85c --rounds 7
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| 32x32x8, halo \(1,1,0\), 1 field \| [^|]+ \| [^|]+ \| \d+ \| ([\d.]+) us")


def per_exchange(src: Path, repeats: int, profile: str | None) -> float:
    """One job: the median microseconds per exchange that runtime_exchange.py reports."""
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    env.pop("GT4PY_HALO_PROFILE", None)
    if profile is not None:
        env["GT4PY_HALO_PROFILE"] = profile
    command = [
        *("mpirun", "-n", "2", sys.executable, "-m", "mpi4py"),
        str(ROOT / "benchmarks" / "runtime_exchange.py"),
        *("--cases", "small", "--impls", "ours-mpi", "--repeats", str(repeats)),
    ]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    (found,) = [float(m.group(1)) for line in out.splitlines() if (m := ROW.match(line))]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="git revision without the hooks")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=101, help="samples per job")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        baseline = Path(scratch) / "baseline"
        baseline.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline, "src"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
        variants = {
            "baseline": (baseline / "src", None),
            "off": (ROOT / "src", None),
            "on": (ROOT / "src", str(Path(scratch) / "profile")),
        }
        names = list(variants)
        times: dict[str, list[float]] = {name: [] for name in names}
        for r in range(args.rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                src, profile = variants[name]
                times[name].append(per_exchange(src, args.repeats, profile))
            print(f"# round {r + 1}: " + ", ".join(f"{n} {times[n][-1]} us" for n in names))
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"\n32x32x8, halo (1,1,0), 1 field, mpi, 2 ranks; {args.rounds} rounds of one job each")
    print("| baseline (no hooks) | off | off / baseline | on | on / baseline |")
    print("|---|---|---|---|---|")
    print(
        f"| {median['baseline']:.1f} us | {median['off']:.1f} us | "
        f"{median['off'] / median['baseline']:.3f} | {median['on']:.1f} us | "
        f"{median['on'] / median['baseline']:.2f} |"
    )
    spread = {n: f"{min(t):.1f}-{max(t):.1f} us" for n, t in times.items()}
    print("per-job medians, range over rounds: " + ", ".join(f"{n} {s}" for n, s in spread.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
