"""``make bench``: every exchange benchmark against its peers and the physical limit, written
into ``docs/benchmarks.md`` (its summary section) with a plot, ``docs/benchmarks.png``.

It runs, on 2 ranks (each calls mpirun itself):

1. ``build/limits`` (``benchmarks/limits.c``): the one-way latency of a small MPI message, the
   copy bandwidth and the MPI transfer by size, measured here;
2. ``benchmarks/comb_peer.py``: per case of ``benchmarks/runtime_exchange.py``, LLNL Comb
   alternated with ours (compiled and runtime, all transports, with the Python peers,
   mpi4py + NumPy and pyghex, and the case's references in plain C, below, sample by sample
   in one process: ``build/liblimits.so``) and the case's limit (``build/limits --cases``),
   medians over rounds;
3. ``benchmarks/devito_peer.py``: the exchange overhead per step of a 2-D diffusion step,
   ours compiled (over ``mpi`` and ``shm``) against Devito in each of its MPI modes.

The limit of a case: every halo cell written once at the copy bandwidth of a copy that size
(the halo bytes of a rank: all fields, halo cells of its block), plus one message latency (a
rank's messages go to one neighbour rank here, and could all be in flight at once), both
measured in the case's turn. No exchange can beat it; a ratio to it says how much is left to
win.

The MPI transfer of a case: what this machine's MPI takes to exchange the case's remote halo
bytes (those a rank receives from the other rank: the halo layers across the cut, corners
included) as one contiguous message each way (``benchmarks/limits.c``, interpolated between
the sizes it measures). An exchange over MPI pays at least that on top of its copies; the
ratio of the transfer to the limit is the part of "x the limit" that MPI alone takes.

The halo copies of a case: the copies of its halo in plain C on each rank, every halo cell
written once from its periodic image, axis by axis, no messages (``benchmarks/limits.c``):
what the layout costs to copy, whole cache lines moved for halos across the unit-stride axis
included, which the limit's bytes leave out. The ordered exchange of a case: those copies of
the last two axes, then the first axis' halo planes, contiguous once those are filled, by
MPI straight from and into the fields (``benchmarks/limits.c``): an exchange in plain C as a
layout made for it allows (a blocking compiled exchange of ours orders its work alike where
an axis wraps onto the rank, ``docs/compiled_steps.md``). The shm exchange in C of a case:
the same, but the first axis' planes copied from the other rank's fields in a shared window
after a flag (the ``shm`` transport's way, as plain as C has it): what an exchange through
shared memory costs on this layout, the copies of cells another core wrote included, which
the limit (a copy in one core's caches) leaves out. All three are timed in the process that
times ours, sample by sample in turn with them (this machine's speed for copies between cores
moves within seconds), the limit in turn with them round by round: the ratios of a case
compare numbers of one run.

    make bench COMB_SRC=path/to/Comb        (or: python benchmarks/bench.py --comb ... )
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import comb_peer  # the cases, and how they are run

CASES = comb_peer.CASES
OURS = ("compiled-mpi", "compiled-ghex", "compiled-shm", "ours-mpi", "ours-ghex", "ours-shm")
PEERS = ("comb", "mpi4py", "pyghex")
BEGIN = "<!-- make bench: from here to its end mark, benchmarks/bench.py writes this section -->"
END = "<!-- make bench: end -->"
RANKS = 2


def remote_bytes(case) -> int:
    """Bytes of halo one rank receives from the other rank: the layers across the cut."""
    local = (case.global_shape[0] // RANKS, *case.global_shape[1:])
    allocated = [n + 2 * h for n, h in zip(local, case.halo)]
    return 2 * case.halo[0] * math.prod(allocated[1:]) * case.nfields * 8


def transfer_seconds(case, limits: dict) -> float:
    """The case's MPI transfer (module docstring), linear between the measured sizes."""
    size = remote_bytes(case)
    measured = sorted((int(n), t) for n, t in limits["mpi_exchange_s"].items())
    below = max((m for m in measured if m[0] <= size), default=measured[0])
    above = min((m for m in measured if m[0] >= size), default=measured[-1])
    if above[0] == below[0]:
        return below[1] * size / below[0]
    return below[1] + (above[1] - below[1]) * (size - below[0]) / (above[0] - below[0])


def run(command: list[str]) -> None:
    print("+", " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True)


def fmt(seconds: float) -> str:
    return comb_peer.runtime_exchange.fmt_time(seconds)


def report(limits: dict, exchange: dict, devito: dict, args, minutes: float) -> str:
    """The summary section of docs/benchmarks.md."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.strip()
    lines = [
        BEGIN,
        "## Summary (`make bench`)",
        "",
        (
            f"{datetime.date.today()}, commit {commit}, {platform.machine()} "
            f"({os.cpu_count()} cores), 2 ranks; {args.rounds} rounds, medians; "
            f"{minutes:.0f} min. Command: `make bench COMB_SRC=...` "
            "(`benchmarks/bench.py`, whose docstring says what each number is)."
        ),
        "",
        f"Measured at the start: one-way latency {fmt(limits['latency_s'])}; copy bandwidth "
        + ", ".join(
            f"{int(n) // 1024} KiB {bw / 1e9:.0f} GB/s"
            for n, bw in limits["copy_bytes_per_s"].items()
            if int(n) in (1 << 12, 1 << 16, 1 << 20, 1 << 24)
        )
        + " (each case's limit measured again in its turns; `halo copies`, `ordered` and "
        "`shm in C` timed in turn with ours).",
        "",
        "![ours against peers and the limit](benchmarks.png)",
        "",
        (
            "Time per exchange (x the limit); `MPI transfer`: this machine's MPI moving the "
            "case's remote halo bytes alone, one contiguous message each way; `halo copies`: "
            "the copies of the rank's halo in plain C, as if it were its own neighbour; "
            "`ordered`: an exchange in plain C, those copies of the last two axes, then the "
            "first axis' planes by MPI in place; `shm in C`: the same, the planes copied "
            "from the other rank's fields in shared memory; "
            "last columns: our compiled exchanges against the case's best peer, `ordered` and "
            "`shm in C`, and the best of ours against the limit."
        ),
        "",
        "| case | limit | MPI transfer | halo copies | ordered | shm in C | "
        + " | ".join((*OURS, *PEERS))
        + " | compiled-mpi / best peer | compiled-mpi / ordered | compiled-shm / shm in C"
        + " | best ours / limit |",
        "|---|---|---|---|---|---|" + "---|" * (len(OURS) + len(PEERS) + 4),
    ]
    for name, times in exchange.items():
        limit = times["limit"]
        transfer = transfer_seconds(CASES[name], limits)
        copies, ordered, shm = times["halo copies"], times["ordered"], times["shm in C"]
        floors = (transfer, copies, ordered, shm)
        cells = [
            f"{fmt(t)} ({t / limit:.1f}x)" for t in (*floors, *(times[i] for i in (*OURS, *PEERS)))
        ]
        best_peer = min(times[p] for p in PEERS)
        best_ours = min(times[i] for i in OURS)
        lines.append(
            f"| {CASES[name].label} | {fmt(limit)} | " + " | ".join(cells)
            + f" | {times['compiled-mpi'] / best_peer:.2f}x"
            + f" | {times['compiled-mpi'] / ordered:.2f}x"
            + f" | {times['compiled-shm'] / shm:.2f}x | {best_ours / limit:.2f}x |"
        )  # fmt: skip
    lines += [
        "",
        (
            "A 2-D diffusion step (halo 1, not periodic), exchange overhead per step (the step "
            "minus the same step without exchange), ours compiled against Devito 4.8.23, the "
            "best mode of each (`benchmarks/devito_peer.py`):"
        ),
        "",
        (
            "| grid | ours (best mode) | ours over MPI (best mode) | Devito (best mode) "
            "| ours / Devito | ours over MPI / Devito |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for n, found in devito.items():
        over = found["overhead"]
        lines.append(
            f"| {n}x{n} | {fmt(over['ours'])} ({found['mine']}) "
            f"| {fmt(over['ours over mpi'])} ({found['mine over mpi']}) "
            f"| {fmt(over['devito'])} ({found['best']}) | {over['ours'] / over['devito']:.2f}x "
            f"| {over['ours over mpi'] / over['devito']:.2f}x |"
        )
    return "\n".join([*lines, "", END])


def plot(limits: dict, exchange: dict, devito: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(
        1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [4, 1]}, layout="constrained"
    )
    impls = (*OURS, *PEERS)
    width = 0.8 / len(impls)
    colors = plt.get_cmap("tab10")
    for k, impl in enumerate(impls):
        xs = [i + (k - len(impls) / 2 + 0.5) * width for i in range(len(exchange))]
        ys = [1e6 * times[impl] for times in exchange.values()]
        hatch = None if impl in OURS else "//"
        left.bar(xs, ys, width, label=impl, color=colors(k), hatch=hatch, edgecolor="white")
    for i, name in enumerate(exchange):
        limit = 1e6 * exchange[name]["limit"]
        left.hlines(limit, i - 0.45, i + 0.45, colors="black", linewidth=2,
                    label="limit" if i == 0 else None)  # fmt: skip
        transfer = 1e6 * transfer_seconds(CASES[name], limits)
        left.hlines(transfer, i - 0.45, i + 0.45, colors="black", linestyles="dashed",
                    label="MPI transfer" if i == 0 else None)  # fmt: skip
        ordered = 1e6 * exchange[name]["ordered"]
        left.hlines(ordered, i - 0.45, i + 0.45, colors="black", linestyles="dotted",
                    label="ordered (C)" if i == 0 else None)  # fmt: skip
        shm = 1e6 * exchange[name]["shm in C"]
        left.hlines(shm, i - 0.45, i + 0.45, colors="black", linestyles="dashdot",
                    label="shm in C" if i == 0 else None)  # fmt: skip
    left.set_yscale("log")
    left.set_ylabel("time per exchange (us), 2 ranks")
    left.set_xticks(range(len(exchange)), [CASES[n].label.replace(", ", "\n", 1)
                                           for n in exchange], fontsize=8)  # fmt: skip
    left.legend(fontsize=8, ncols=2)
    left.set_title("Halo exchange: ours (solid) against peers (hatched) and the limit")
    sizes = list(devito)
    xs = range(len(sizes))
    for k, (key, label, color) in enumerate((
        ("ours", "ours compiled (best mode)", colors(0)),
        ("ours over mpi", "ours compiled over MPI (best mode)", colors(1)),
        ("devito", "Devito (best mode)", "grey"),
    )):  # fmt: skip
        ys = [1e6 * f["overhead"][key] for f in devito.values()]
        right.bar([x + (k - 1) * 0.27 for x in xs], ys, 0.27, label=label, color=color)
    right.set_xticks(list(xs), [f"{n}x{n}" for n in sizes])
    right.set_ylabel("exchange overhead per step (us)")
    right.set_title("2-D diffusion step")
    right.legend(fontsize=8)
    fig.savefig(path, dpi=110)


def write_section(path: Path, section: str) -> None:
    """Replace the summary section of ``path`` (or put it after the title)."""
    text = path.read_text()
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        title, rest = text.split("\n", 1)
        text = f"{title}\n\n{section}\n{rest}"
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comb", required=True, help="the comb executable (build-comb.sh)")
    parser.add_argument("--devito-python", required=True, help="a venv's Python with Devito")
    parser.add_argument("--limits", default=str(ROOT / "build" / "limits"))
    parser.add_argument("--references", default=str(ROOT / "build" / "liblimits.so"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--docs", default=str(ROOT / "docs" / "benchmarks.md"))
    args = parser.parse_args()
    t0 = datetime.datetime.now()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        mpirun = str(Path(sys.executable).parent / "mpirun")
        limits = subprocess.run(
            [mpirun, "-n", str(RANKS), args.limits], check=True, capture_output=True, text=True
        ).stdout
        run([sys.executable, str(HERE / "comb_peer.py"), "--comb", args.comb,
             "--limits", args.limits, "--references", args.references,
             "--rounds", str(args.rounds),
             "--json", str(out / "exchange.json")])  # fmt: skip
        run([sys.executable, str(HERE / "devito_peer.py"), "--devito-python",
             args.devito_python, "--rounds", str(args.rounds),
             "--json", str(out / "devito.json")])  # fmt: skip
        exchange = json.loads((out / "exchange.json").read_text())
        devito = json.loads((out / "devito.json").read_text())
    limits = json.loads(limits)
    minutes = (datetime.datetime.now() - t0).total_seconds() / 60
    docs = Path(args.docs)
    write_section(docs, report(limits, exchange, devito, args, minutes))
    plot(limits, exchange, devito, docs.with_suffix(".png"))
    print(f"wrote {docs} (its summary) and {docs.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
