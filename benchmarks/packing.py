"""What packing a message of boxes costs: NumPy's copy per box against the runtime exchange's
one call into C for all of them (``runtime/packing.py``, ``_native.c``), by message size.

Measured on one process, with the regions a rank sends to and receives from its neighbour
along axis 0 of a 2-D block (faces and corners: 6 boxes; two halo rows: 2 boxes), halo 1,
float64, levels innermost (C order). Median of ``--repeats`` timings of ``--number`` calls
each.

Run:  python benchmarks/packing.py
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from functools import partial

import numpy as np

from gt4py_halo.decomposition.plan import Box, BoxRegion, FieldSpec
from gt4py_halo.runtime import packing

#: (block with halo, levels): the runtime benchmark's small case (32x32x8 over 2 ranks), a 1-D
#: level variant, the 64^3 cube's block, and a block of 20 levels
SIZES = [((18, 34), 8), ((18, 34), 1), ((34, 66), 66), ((70, 134), 20)]


def regions(nx: int, ny: int) -> dict[str, BoxRegion]:
    return {
        "pack": BoxRegion(
            (
                Box((1, 1), (2, ny - 1)),
                Box((nx - 2, 1), (nx - 1, ny - 1)),
                Box((1, 0), (2, 1)),
                Box((1, ny - 1), (2, ny)),
                Box((nx - 2, 0), (nx - 1, 1)),
                Box((nx - 2, ny - 1), (nx - 1, ny)),
            )
        ),
        "unpack": BoxRegion((Box((0, 0), (1, ny)), Box((nx - 1, 0), (nx, ny)))),
    }


def per_call(region: BoxRegion, spec: FieldSpec, field: np.ndarray, side: str, args) -> dict:
    buffer = packing.MessageBuffer(region, [spec], np)
    blocks: list = []
    (buffer.pack if side == "pack" else buffer.unpack)([field], blocks, [])
    ways = {
        "numpy": [partial(np.copyto, dst, src) for dst, src in blocks],
        "c": packing.block_copies(blocks, np),
    }
    times = {}
    for name, copies in ways.items():

        def run(copies=copies) -> None:
            for copy in copies:
                copy()

        times[name] = statistics.median(timeit.repeat(run, number=args.number, repeat=args.repeats))
    return {name: t / args.number for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print("| block, levels | side | elements | NumPy, a copy per box | one call into C |")
    print("|---|---|---|---|---|")
    for shape, levels in SIZES:
        field = np.random.default_rng(0).random((*shape, levels))
        spec = FieldSpec(np.dtype(np.float64), (levels,))
        for side, region in regions(*shape).items():
            times = per_call(region, spec, field, side, args)
            label = "x".join(map(str, shape))
            print(
                f"| {label}, {levels} | {side} ({len(region.coalesced())} boxes) | "
                f"{region.count * levels} | {times['numpy'] * 1e6:.2f} us | "
                f"{times['c'] * 1e6:.2f} us |"
            )


if __name__ == "__main__":
    main()
