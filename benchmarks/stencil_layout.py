"""A compiled step's stencil on GT4Py's default fields against C-ordered ones, one process.

GT4Py's default fields (``gtx.as_field`` without allocator) hold ``I`` with unit stride and
``K`` outermost; GT4Py's DaCe CPU maps loop ``I`` outermost. What a step's build does about
it (``compiled/iteration_order.py``) shows here: the time of ``benchmarks/compiled_step.py``'s
``diffuse`` over ``--fields`` fields of the ``large`` case's block (64x128x80 owned, halo
(3,3,0)), compiled in a ``@gh.program`` (stencils only), and called as GT4Py programs from
Python (GT4Py's own build), on both layouts; medians over rounds, milliseconds per step.

    OMP_NUM_THREADS=1 python -O benchmarks/stencil_layout.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import sys
import time
from pathlib import Path

import gt4py.next as gtx
import numpy as np
from mpi4py import MPI

import gt4py_halo as gh

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("compiled_step", HERE / "compiled_step.py")
compiled_step = importlib.util.module_from_spec(_spec)
sys.modules["compiled_step"] = compiled_step
_spec.loader.exec_module(compiled_step)  # the stencils

SHAPE = (70, 134, 80)  # the large case's block on 2 ranks, halo included
I, J, K = compiled_step.I, compiled_step.J, compiled_step.K


def fields(layout: str, n: int, first: int = 0) -> list:
    """``n`` fields of one layout: GT4Py's default (from GT4Py's allocator, or from
    ``gh.staggered_allocator``), C-ordered (``compiled_step.as_field``), or
    NumPy arrays in GT4Py's default strides placed at the same address modulo 4 KiB
    (``aligned``, as GT4Py's allocator places them) or at addresses ``staggered`` by 832
    bytes (``first`` numbers the fields, so inputs and outputs differ too)."""
    made = []
    for k in range(first, first + n):
        a = np.random.default_rng(k).random(SHAPE)
        if layout == "default":
            made.append(gtx.as_field([I, J, K], a))
        elif layout == ALLOCATOR:
            made.append(gtx.as_field([I, J, K], a, allocator=STAGGERED_FIELDS))
        elif layout == "C-ordered":
            made.append(compiled_step.as_field(a))
        else:
            padded = (72, SHAPE[1], SHAPE[2])  # I padded to 72, as GT4Py's default fields
            memory = np.empty(math.prod(padded) * 8 + 8192, dtype=np.uint8)
            offset = (-memory.ctypes.data) % 4096 + (832 * k % 4096 if layout == STAGGERED else 0)
            view = np.ndarray(SHAPE, np.float64, memory, offset, (8, 8 * 72, 8 * 72 * SHAPE[1]))
            view[...] = a
            made.append(view)
    return made


STAGGERED = "Fortran-ordered, staggered"
ALLOCATOR = "gh.staggered_allocator()"
STAGGERED_FIELDS = gh.staggered_allocator()
LAYOUTS = ("C-ordered", "default", ALLOCATOR, "Fortran-ordered, aligned", STAGGERED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    i32 = gtx.int32
    bounds = [i32(3), i32(SHAPE[0] - 3), i32(3), i32(SHAPE[1] - 3), i32(SHAPE[2])]
    diffuse_10 = compiled_step.diffuse_10

    @gh.program(comm=MPI.COMM_SELF)
    def stencils(
        u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
        v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
        i0, i1, j0, j1, k1,
    ):  # fmt: skip
        diffuse_10(
            u0, u1, u2, u3, u4, u5, u6, u7, u8, u9,
            v0, v1, v2, v3, v4, v5, v6, v7, v8, v9,
            i0, i1, j0, j1, k1,
        )  # fmt: skip

    runs = {}
    results = {}
    for layout in LAYOUTS:
        u, v = fields(layout, 10), fields(layout, 10, first=10)
        array = getattr(u[0], "ndarray", u[0])
        strides = tuple(s // 8 for s in array.strides)
        hows = {"compiled step": stencils}
        if layout in ("C-ordered", "default", ALLOCATOR):  # GT4Py programs take GT4Py fields
            hows["GT4Py from Python"] = diffuse_10
        for how, call in hows.items():
            call(*u, *v, *bounds)  # built (or loaded) before timing
            runs[(layout, how)] = (lambda call=call, u=u, v=v: call(*u, *v, *bounds), strides)
            results[(layout, how)] = np.concatenate([np.asarray(f).ravel() for f in v])
    first = next(iter(results.values()))
    assert all(np.array_equal(r, first) for r in results.values())  # the same bits everywhere
    samples = {key: [] for key in runs}
    for r in range(args.rounds):
        for key in list(runs)[r % len(runs) :] + list(runs)[: r % len(runs)]:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                runs[key][0]()
            samples[key].append((time.perf_counter() - t0) / args.steps)
    print(f"10 fields of {'x'.join(map(str, SHAPE))}, one process, {args.rounds} rounds\n")
    print("| fields (strides in elements) | compiled step | GT4Py from Python |")
    print("|---|---|---|")
    for layout in LAYOUTS:
        strides = runs[(layout, "compiled step")][1]
        cells = [
            f"{1e3 * statistics.median(samples[(layout, how)]):.1f} ms"
            if (layout, how) in samples
            else "-"
            for how in ("compiled step", "GT4Py from Python")
        ]
        print(f"| {layout} {strides} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
