"""What packing a message of boxes costs: one copy per box against one gather (pack) or one
scatter (unpack) over the elements' offsets, by message size.

The runtime exchange (``runtime/packing.py``) gathers where a message has fewer elements than
``GATHER_ELEMENTS_PER_CALL`` per copy call saved (``SCATTER_ELEMENTS_PER_CALL`` to unpack);
this script measures both ways on one process, with the regions a rank sends to and receives
from its neighbour along axis 0 of a 2-D block (faces and corners: 6 boxes; two halo rows: 2
boxes), halo 1, float64, levels innermost (C order). Median of ``--repeats`` timings of
``--number`` calls each.

Run:  python benchmarks/packing.py
"""

from __future__ import annotations

import argparse
import statistics
import timeit

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


def per_call(region: BoxRegion, spec: FieldSpec, field: np.ndarray, side: str, args) -> float:
    buffer = packing.MessageBuffer(region, [spec], np)
    copies = buffer.pack_copies([field]) if side == "pack" else buffer.unpack_copies([field])

    def run() -> None:
        for copy in copies:
            copy()

    times = timeit.repeat(run, number=args.number, repeat=args.repeats)
    return statistics.median(times) / args.number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print("| block, levels | side | elements | a copy per box | one gather/scatter | chosen |")
    print("|---|---|---|---|---|---|")
    chosen = (packing.GATHER_ELEMENTS_PER_CALL, packing.SCATTER_ELEMENTS_PER_CALL)
    for shape, levels in SIZES:
        field = np.random.default_rng(0).random((*shape, levels))
        spec = FieldSpec(np.dtype(np.float64), (levels,))
        for side, region in regions(*shape).items():
            times = {}
            for name, thresholds in (
                ("boxes", (0, 0)),
                ("one", (10**9, 10**9)),
                ("chosen", chosen),
            ):
                packing.GATHER_ELEMENTS_PER_CALL, packing.SCATTER_ELEMENTS_PER_CALL = thresholds
                times[name] = per_call(region, spec, field, side, args)
            packing.GATHER_ELEMENTS_PER_CALL, packing.SCATTER_ELEMENTS_PER_CALL = chosen
            label = "x".join(map(str, shape))
            print(
                f"| {label}, {levels} | {side} ({len(region.coalesced())} boxes) | "
                f"{region.count * levels} | {times['boxes'] * 1e6:.2f} us | "
                f"{times['one'] * 1e6:.2f} us | {times['chosen'] * 1e6:.2f} us |"
            )


if __name__ == "__main__":
    main()
