"""What a message costs as MPI sends it: contiguous bytes against a datatype over blocks.

The compiled MPI exchange sends one message per neighbour rank and field group, made of the
segments of the directions that lead to that rank (``compiled/arenas.py``). Where those
segments lie side by side in the arena the message is contiguous bytes; where other segments
lie between them it is an ``MPI_Type_create_hindexed`` datatype, which MPICH packs block by
block. This script times the small case's message (32x32x8, halo (1,1,0), 2x1 grid: four
corners of 64 B and two faces of 2048 B towards the other rank, two faces of 1024 B to the
rank itself) both ways, with persistent requests as the expansion makes them:

- ``contiguous``: the six segments side by side, 4352 B (the layout since 2026-11-25);
- ``two blocks``: the layout before, segments by direction: corner, face, corner, then the
  rank's own two faces (2048 B not sent), then corner, face, corner;
- ``six blocks``: each segment a block of its own, a gap after each;
- ``no gaps``: a datatype over the six segments side by side (MPICH finds it contiguous).

Each sample is a batch of exchanges (both ranks start a receive and a send, then wait for
both); medians over interleaved samples, the slowest rank's time.

Run:  mpirun -n 2 python -m mpi4py benchmarks/datatype_gaps.py [--repeats N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

CORNER, FACE, OWN_FACE = 64, 2048, 1024  # bytes, as the small case's segments are
SEGMENTS = [CORNER, FACE, CORNER, CORNER, FACE, CORNER]
BATCH = 500


def layouts() -> dict[str, list[int] | None]:
    """Per variant, the displacement of each segment in the buffer; ``None``: one block."""
    side_by_side = np.cumsum([0, *SEGMENTS[:-1]]).tolist()
    gap = 2 * OWN_FACE
    before = side_by_side[:3] + [d + gap for d in side_by_side[3:]]
    six = [2 * d for d in side_by_side]
    return {"contiguous": None, "two blocks": before, "six blocks": six, "no gaps": side_by_side}


def requests(comm: MPI.Comm, peer: int, at: list[int] | None) -> tuple[list[MPI.Prequest], list]:
    """A persistent receive and send of the message laid out at ``at``, and what they use."""
    size = sum(SEGMENTS) if at is None else at[-1] + SEGMENTS[-1]
    send, recv = np.ones(size, np.uint8), np.zeros(size, np.uint8)
    if at is None:
        return [comm.Recv_init(recv, peer, 0), comm.Send_init(send, peer, 0)], [send, recv]
    blocks = MPI.BYTE.Create_hindexed(SEGMENTS, at).Commit()
    made = [comm.Recv_init([recv, 1, blocks], peer, 0), comm.Send_init([send, 1, blocks], peer, 0)]
    return made, [send, recv, blocks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("run on 2 ranks")
    peer = 1 - comm.rank
    made = {name: requests(comm, peer, at) for name, at in layouts().items()}
    samples = {name: np.empty(args.repeats) for name in made}
    for r in range(args.repeats):
        names = list(made)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            pair = made[name][0]
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(BATCH):
                MPI.Prequest.Startall(pair)
                MPI.Request.Waitall(pair)
            samples[name][r] = (time.perf_counter() - start) / BATCH
    for name, (pair, kept) in made.items():
        comm.Allreduce(MPI.IN_PLACE, samples[name], op=MPI.MAX)
        for request in pair:
            request.Free()
        for item in kept:
            if isinstance(item, MPI.Datatype):
                item.Free()
    if comm.rank == 0:
        print(f"{sum(SEGMENTS)} B per message, 2 ranks, {args.repeats} samples of {BATCH}")
        print("| layout | per exchange (median) |\n|---|---|")
        for name, values in samples.items():
            print(f"| {name} | {np.median(values) * 1e6:.2f} us |")


if __name__ == "__main__":
    main()
