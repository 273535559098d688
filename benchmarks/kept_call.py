"""What a compiled step's check of the names it read costs at each call (``compiled/bindings.py``).

A step called again with the arguments of its last call runs from C (``_native.Again``):
the arguments compared, then the names the step read at its build checked to hold the same
objects, then the step. Three steps that compute the same (constants folded at the build),
no exchange, on one rank: reading no name, 4 global numbers, and 16; samples interleave the
three, each ``--calls`` calls; the table gives the minimum and the median time per call.

Run:  python -O benchmarks/kept_call.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import gt4py_halo as gh

C0 = C1 = C2 = C3 = C4 = C5 = C6 = C7 = 0.0
C8 = C9 = C10 = C11 = C12 = C13 = C14 = C15 = 0.0


def none(a):
    a[1] = 1.0


def four(a):
    a[1] = 1.0 + C0 + C1 + C2 + C3


def sixteen(a):
    a[1] = 1.0 + C0 + C1 + C2 + C3 + C4 + C5 + C6 + C7
    a[2] = C8 + C9 + C10 + C11 + C12 + C13 + C14 + C15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    steps = {f.__name__: gh.program(f, comm=MPI.COMM_SELF) for f in (none, four, sixteen)}
    a = np.zeros(4)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for step in steps.values():
        step(a)  # built (or loaded), then kept
    for _ in range(args.samples):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(args.calls):
                step(a)
            times[name].append((time.perf_counter() - start) / args.calls)
    print("| step | names read | min per call | median per call |")
    print("|---|---|---|---|")
    for (name, found), names in zip(times.items(), (0, 4, 16)):
        low, mid = min(found), statistics.median(found)
        print(f"| `{name}` | {names} | {low * 1e6:.3f} us | {mid * 1e6:.3f} us |")


if __name__ == "__main__":
    main()
