"""Draw a gt4py_halo profile (``trace.json`` of ``gh.profile``) as a PNG timeline, headless.

    pip install matplotlib
    python tools/render-profile.py profiles/demo/trace.json docs/profiling.png --last-ms 3

Per rank four lanes, from the bottom: the exchange phases (runtime and compiled) coloured by
phase, the states of compiled steps (their stencils, holding their exchange tasklets), the
compiled steps, and the Python calls viztracer traced. ``--last-ms``: only the end of the
profile (the steady state), in milliseconds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

COLOURS = {
    "check": "#bbbbbb",
    "pack": "#1f77b4",
    "post": "#ff7f0e",
    "self-copies": "#17becf",
    "wait": "#d62728",
    "unpack": "#2ca02c",
    "exchange": "#9467bd",
    "start / finish": "#f2e6c9",
    "state": "#8c564b",
    "step": "#555555",
    "python": "#dddddd",
}
CONTAINERS = {"start", "finish"}  # runtime exchange calls: the phases above lie inside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--last-ms", type=float, default=None)
    args = parser.parse_args()
    events = [e for e in json.loads(args.trace.read_text())["traceEvents"] if e["ph"] == "X"]
    end = max(e["ts"] + e["dur"] for e in events)
    start = min(e["ts"] for e in events)
    if args.last_ms is not None:
        start = max(start, end - 1000 * args.last_ms)
    ranks = sorted({e["pid"] for e in events})
    fig, ax = plt.subplots(figsize=(12, 1.2 + 1.6 * len(ranks)))
    for row, rank in enumerate(ranks):
        base = (len(ranks) - 1 - row) * 5
        # containers first, their phases drawn over them
        for event in sorted(events, key=lambda e: e["name"] not in CONTAINERS):
            if event["pid"] != rank or event["ts"] + event["dur"] < start:
                continue
            category = event.get("cat")
            if category == "exchange" and event["name"] in CONTAINERS:
                lane, colour = base, COLOURS["start / finish"]
            elif category == "exchange":
                lane, colour = base, COLOURS.get(event["name"], "black")
            elif category == "state":
                lane, colour = base + 1.1, COLOURS["state"]
            elif category == "step":
                lane, colour = base + 2.2, COLOURS["step"]
            elif category == "FEE":
                lane, colour = base + 3.3, COLOURS["python"]
            else:
                continue
            begin = max(event["ts"], start)
            width = (event["ts"] + event["dur"] - begin) / 1000
            ax.broken_barh(
                [((begin - start) / 1000, width)], (lane, 1), color=colour, ec="white", lw=0.3
            )
    ax.set_yticks([(len(ranks) - 1 - r) * 5 + 2.1 for r in range(len(ranks))])
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    ax.set_xlabel("ms")
    ax.set_xlim(0, (end - start) / 1000)
    ax.legend(
        handles=[Patch(color=c, label=name) for name, c in COLOURS.items()],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.25),
        ncol=len(COLOURS),
        fontsize=8,
    )
    ax.set_title(f"{args.trace}: per rank exchange phases, step states, steps, Python calls")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
