"""What the halo of an axis not split over ranks costs a compiled exchange.

``make bench``'s largest case (128x128x80, 10 fields, 2 ranks, axis 0 split) has a halo of 3
on axis 1 too, which is periodic and not split: every rank fills it from its own cells (self
copies), and the faces across axis 0 are then three runs per field (one per halo plane,
interrupted by axis 1's halo) plus four packed edges. Without that halo (``(3, 0, 0)``) each
face is one run per field. This script times the compiled ``mpi`` exchange of both, each with
its faces in place (the default) and packed (``in_place_min_bytes=None``), interleaved: per
round each variant runs a batch of 10 exchanges after a barrier; the slowest rank's time per
exchange, median over the rounds. ``benchmarks/limits.c`` gives the same two cases' C
references (``build/limits 128,128,80,3,3,0,10 128,128,80,3,0,0,10``).

Run (2 ranks):  mpirun -n 2 python -m mpi4py benchmarks/self_axis_cost.py [--rounds 60]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from mpi4py import MPI
from runtime_exchange import compiled_exchange, fresh_fields

import gt4py_halo as gh

SHAPE, FIELDS = (128, 128, 80), 10
VARIANTS = {  # name -> (halo, gh.program's options)
    "halo (3,3,0), in place": ((3, 3, 0), {}),
    "halo (3,3,0), packed": ((3, 3, 0), {"in_place_min_bytes": None}),
    "halo (3,0,0), in place": ((3, 0, 0), {}),
    "halo (3,0,0), packed": ((3, 0, 0), {"in_place_min_bytes": None}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    rounds = parser.parse_args().rounds
    comm = MPI.COMM_WORLD
    calls = {}
    for name, (halo, options) in VARIANTS.items():
        d = gh.CartesianDecomposition(SHAPE, halo=halo, periodic=True, proc_grid=(2, 1, 1))
        step = compiled_exchange(gh.make_exchange(d), FIELDS)
        step = gh.program(step.__wrapped__, **options)
        fields = fresh_fields(d, FIELDS)
        calls[name] = lambda step=step, fields=fields: step(*fields)
        for _ in range(5):  # the build, and warm caches
            calls[name]()
    gc.disable()
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(10):
                call()
            seconds[name].append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX) / 10)
    if comm.rank == 0:
        print(f"{SHAPE}, {FIELDS} fields, 2 ranks (2, 1, 1); median of {rounds} rounds")
        for name, samples in seconds.items():
            print(f"  {name:24s} {1e6 * statistics.median(samples):8.0f} us")


if __name__ == "__main__":
    main()
