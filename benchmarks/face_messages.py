"""What the largest case's faces cost to move, by the ways MPI can move them.

The runtime ``mpi`` transport packs every box of a neighbour into one message (with its
trailer) and unpacks it on arrival: three copies of each face cell (pack, MPICH's one CMA
copy between the ranks, unpack). The compiled exchange sends the long contiguous runs of a
face straight out of the field into the neighbour's halo (``compiled/in_place.py``). This
script times the faces of the largest case of ``runtime_exchange.py`` (128x128x80 cut in two
along axis 0, halo (3,3,0), 10 fields of 70x134x80 float64 per rank: on each side a face of
3x128x80 owned cells per field, both towards the other rank) moved four ways:

- ``packed``: all fields' face into one buffer per side (NumPy copies), one message each way,
  unpacked (what the runtime transport does);
- ``datatypes``: one MPI datatype per side over the fields (a subarray per field in a struct
  of absolute addresses), sent and received in place: MPICH packs it;
- ``runs``: each field's face as its 3 contiguous runs of 128x80 cells (80 KiB), one message
  each, from the field into the field (what the compiled exchange sends);
- ``planes``: each field's 3 whole planes of 134x80 cells, one message of 251 KiB per field
  (what an exchange that fills the halo of axis 1 first can send; timed here without that
  fill, so its halo columns carry what they held).

Every variant is first checked to write the same halo cells (those of ``packed``). Samples
are batches of exchanges, the variants in turns (rotating order), the slowest rank's time;
medians per exchange.

Run (2 ranks):  mpirun -n 2 python -m mpi4py benchmarks/face_messages.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

FIELDS, SHAPE, H = 10, (70, 134, 80), 3
OWNED = SHAPE[0] - 2 * H  # planes a rank owns along the cut axis
BATCH = 10


def face(first: int) -> tuple[slice, slice, slice]:
    """The face of ``H`` planes from plane ``first``, owned columns of axis 1."""
    return (slice(first, first + H), slice(H, SHAPE[1] - H), slice(None))


# this rank's faces: the lower owned planes go to the other rank's upper halo, and so on
SEND = {"low": face(H), "high": face(OWNED)}
RECV = {"low": face(0), "high": face(OWNED + H)}
TAGS = {"low": 0, "high": 1}  # a message into the receiver's low halo: tag 0


def variants(comm: MPI.Comm, fields: list[np.ndarray]) -> dict[str, Callable[[], None]]:
    peer = 1 - comm.rank
    cells = int(np.prod(fields[0][SEND["low"]].shape))
    send = {side: np.empty(FIELDS * cells) for side in SEND}
    recv = {side: np.empty(FIELDS * cells) for side in RECV}

    def packed() -> None:
        requests = [comm.Irecv(recv[s], peer, TAGS[s]) for s in RECV]
        for s, box in SEND.items():
            for f, field in enumerate(fields):
                send[s][f * cells : (f + 1) * cells].reshape(field[box].shape)[...] = field[box]
        # my low face fills the other rank's high halo
        requests += [comm.Isend(send[s], peer, TAGS[other]) for s, other in _opposite()]
        MPI.Request.Waitall(requests)
        for s, box in RECV.items():
            for f, field in enumerate(fields):
                field[box] = recv[s][f * cells : (f + 1) * cells].reshape(field[box].shape)

    def datatype(box: tuple[slice, ...]) -> MPI.Datatype:
        starts = [s.start or 0 for s in box]
        one = MPI.DOUBLE.Create_subarray(SHAPE, fields[0][box].shape, starts)
        addresses = [MPI.Get_address(field) for field in fields]
        return MPI.Datatype.Create_struct([1] * FIELDS, addresses, [one] * FIELDS).Commit()

    types = {("send", s): datatype(b) for s, b in SEND.items()}
    types |= {("recv", s): datatype(b) for s, b in RECV.items()}

    def datatypes() -> None:
        requests = [comm.Irecv([MPI.BOTTOM, 1, types["recv", s]], peer, TAGS[s]) for s in RECV]
        requests += [
            comm.Isend([MPI.BOTTOM, 1, types["send", s]], peer, TAGS[other])
            for s, other in _opposite()
        ]
        MPI.Request.Waitall(requests)

    def in_place(boxes: Callable[[tuple[slice, ...]], list[tuple[slice, ...]]]) -> Callable:
        def exchange() -> None:
            requests = [
                comm.Irecv(field[b], peer, TAGS[s])
                for s, box in RECV.items()
                for field in fields
                for b in boxes(box)
            ]
            requests += [
                comm.Isend(field[b], peer, TAGS[other])
                for s, other in _opposite()
                for field in fields
                for b in boxes(SEND[s])
            ]
            MPI.Request.Waitall(requests)

        return exchange

    def runs(box: tuple[slice, ...]) -> list[tuple[slice, ...]]:
        return [(plane, *box[1:]) for plane in range(box[0].start, box[0].stop)]

    def planes(box: tuple[slice, ...]) -> list[tuple[slice, ...]]:
        return [(box[0],)]

    return {
        "packed": packed,
        "datatypes": datatypes,
        "runs": in_place(runs),
        "planes": in_place(planes),
    }


def _opposite() -> list[tuple[str, str]]:
    """(face sent, the receiver's halo it fills)."""
    return [("low", "high"), ("high", "low")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("run on 2 ranks")
    rng = np.random.default_rng(comm.rank)
    fields = [rng.random(SHAPE) for _ in range(FIELDS)]
    made = variants(comm, fields)
    halos = [field[box] for field in fields for box in RECV.values()]
    expected = None
    for name, exchange in made.items():
        for field in fields:
            for box in RECV.values():
                field[box] = -1.0
        exchange()
        got = np.concatenate([h.ravel() for h in halos])
        if expected is None:
            expected = got.copy()
        elif not np.array_equal(got, expected):
            raise SystemExit(f"rank {comm.rank}: {name} wrote other halo values than packed")
    samples: dict[str, list[float]] = {name: [] for name in made}
    names = list(made)
    for r in range(args.repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(BATCH):
                made[name]()
            spent = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
            samples[name].append(spent / BATCH)
    if comm.rank == 0:
        packed = statistics.median(samples["packed"])
        print(f"faces of 10 fields of {SHAPE}, halo {H}, 2 ranks; {args.repeats} samples")
        for name, times in samples.items():
            median = statistics.median(times)
            print(f"{name:10s} {median * 1e6:8.0f} us  ({median / packed:.2f}x packed)")


if __name__ == "__main__":
    main()
