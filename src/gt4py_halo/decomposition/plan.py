"""The exchange plan: which local cells go to which rank, as plain data.

A plan is computed once, collectively, by a decomposition, and is then the only source of truth
for every backend: the runtime MPI transport packs from it, the GHEX transport is checked against
it, and the DaCe nodes are generated from it. It holds no MPI objects, so it can be pickled,
printed, compared and turned into code.

Index spaces: a plan speaks of the *decomposed* axes of a local field (all axes of a cartesian
block, axis 0 of an unstructured field). Trailing axes (vertical levels) are not decomposed and
travel whole with every cell. Within one message the cells are ordered as the plan lists them,
levels innermost, whatever the memory order of the field, so ranks with differently laid out
fields still agree on every byte.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Box:
    """A half-open box ``[start, stop)`` of local indices over the decomposed axes."""

    start: tuple[int, ...]
    stop: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(b - a for a, b in zip(self.start, self.stop))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(a, b) for a, b in zip(self.start, self.stop))


@dataclasses.dataclass(frozen=True)
class BoxRegion:
    """Cells given as boxes (cartesian plans); cells are ordered box by box, C order inside."""

    boxes: tuple[Box, ...]

    @property
    def count(self) -> int:
        return sum(box.size for box in self.boxes)

    def coalesced(self) -> tuple[Box, ...]:
        """The same cells in the same order in as few boxes as box-by-box order allows: two
        boxes in a row merge where they meet along one axis, agree on the axes after it and
        have extent 1 on the axes before it (so that the merged box's C order is the two
        boxes' one after the other). A halo row of corner, face and corner is one copy."""
        merged = list(self.boxes[:1])
        for box in self.boxes[1:]:
            joined = _joined(merged[-1], box)
            if joined is None:
                merged.append(box)
            else:
                merged[-1] = joined
        return tuple(merged)


def _joined(first: Box, second: Box) -> Box | None:
    """One box holding ``first`` then ``second`` in C order, if there is one."""
    for axis in range(len(first.start)):
        if (
            first.stop[axis] == second.start[axis]
            and all(first.shape[k] == second.shape[k] == 1 for k in range(axis))
            and first.start[:axis] == second.start[:axis]
            and first.start[axis + 1 :] == second.start[axis + 1 :]
            and first.stop[axis + 1 :] == second.stop[axis + 1 :]
        ):
            return Box(
                first.start, (*first.stop[:axis], second.stop[axis], *first.stop[axis + 1 :])
            )
    return None


@dataclasses.dataclass(frozen=True, eq=False)
class IndexRegion:
    """Cells given as an explicit list of positions along axis 0 (unstructured plans)."""

    indices: np.ndarray

    @property
    def count(self) -> int:
        return len(self.indices)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexRegion) and np.array_equal(self.indices, other.indices)

    def __hash__(self) -> int:
        return hash(self.indices.tobytes())


Region = BoxRegion | IndexRegion


@dataclasses.dataclass(frozen=True)
class NeighbourExchange:
    """Everything exchanged with one peer rank in one message each way.

    ``send`` lists the local cells packed for ``rank``; ``recv`` the local halo cells filled
    from its message, in the order that rank packs them. ``rank`` may be this rank itself
    (a periodic dimension with one rank), in which case no message is sent.
    """

    rank: int
    send: Region
    recv: Region


#: Rank of a missing neighbour (beyond a non-periodic boundary); MPI_PROC_NULL in messages.
NO_RANK = -1


@dataclasses.dataclass(frozen=True)
class Direction:
    """A cartesian neighbour direction (faces, edges, corners) and the rank found there."""

    offset: tuple[int, ...]
    rank: int


@dataclasses.dataclass(frozen=True)
class ExchangePlan:
    """One exchange pattern of one decomposition (the cartesian grid, or one unstructured dim).

    Cartesian plans also list every exchange ``direction`` with the rank there (``NO_RANK``
    beyond a non-periodic boundary): the same directions on all ranks, so code generated once
    serves every rank, with only the ranks passed in at run time. ``neighbours`` groups the
    same boxes by peer rank, one message per peer.

    Where axes wrap onto the rank (periodic, not split over ranks), ``wrapped`` holds the
    messages of an exchange that fills their halos from the rank's own cells first (the
    rank's own ``neighbours`` entry) and only then packs: the other ranks' boxes widened
    across those halos, none across those axes (``cartesian.wrapped_box``); a face is then
    whole planes and carries its edges and corners. Empty where no axis wraps.
    """

    name: str
    rank: int
    comm_size: int
    local_shape: tuple[int, ...]
    neighbours: tuple[NeighbourExchange, ...]
    directions: tuple[Direction, ...] = ()
    wrapped: tuple[NeighbourExchange, ...] = ()

    @property
    def remote_neighbours(self) -> tuple[NeighbourExchange, ...]:
        return tuple(n for n in self.neighbours if n.rank != self.rank)


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """What a message needs to know of a field: its element type and its undecomposed axes."""

    dtype: np.dtype
    level_shape: tuple[int, ...]

    @property
    def cell_bytes(self) -> int:
        return self.dtype.itemsize * math.prod(self.level_shape)


def signature(specs: Sequence[FieldSpec], dim: str | None = None) -> bytes:
    """8 bytes that differ, but for a chance of 2**-64, between field signatures (dtypes and
    level shapes, in order; and ``dim``): what ranks compare to catch fields that differ
    between them."""
    described = ";".join([f"{spec.dtype.str}{spec.level_shape}" for spec in specs] + [f"{dim}"])
    return hashlib.blake2b(described.encode(), digest_size=8).digest()


#: Runs of a box at least this many bytes long travel in place where the MPI transports send
#: them: each its own message, straight out of the sender's field into the receiver's halo,
#: not packed. Each message costs MPI a rendezvous (about 5 us here); a run of 32 KiB takes
#: about as long to pack and unpack.
IN_PLACE_MIN_BYTES = 32 * 1024

#: The same for the runtime ``mpi`` transport, which posts each run through mpi4py, a request
#: per run and exchange: a face of 34 KiB took it longer in place than packed (the compiled
#: exchange, whose runs are posted from C with its other messages, gains from 32 KiB on).
RUNTIME_IN_PLACE_MIN_BYTES = 64 * 1024

#: At most this many runs per box and field travel in place.
MAX_RUNS = 16

#: Byte alignment of each field's segment inside a message.
SEGMENT_ALIGNMENT = 8


def segment_offsets(count: int, specs: Sequence[FieldSpec]) -> tuple[tuple[int, ...], int]:
    """Byte offset of each field's segment in a message of ``count`` cells, and its size.

    Several fields exchanged together travel in one message per neighbour: field after
    field, each segment aligned so that it can be viewed with its own dtype.
    """
    offsets = []
    end = 0
    for spec in specs:
        start = -(-end // SEGMENT_ALIGNMENT) * SEGMENT_ALIGNMENT
        offsets.append(start)
        end = start + count * spec.cell_bytes
    return tuple(offsets), end
