"""Message buffers laid out from a plan, and vectorized copies between them and fields.

A ``MessageBuffer`` is allocated once per (plan, neighbour, field signature) and reused for
every exchange; ``Messages`` holds those of one plan and field signature, what every transport
that sends buffers (``mpi``, ``nccl``) moves. The copies an exchange makes are planned in two steps: buffer-side views are
fixed when the buffer is built; field-side views are bound to the fields of a call and kept
while the next call passes the same arrays (the usual case: a model exchanges its own state
every step), so a repeated exchange only runs the copies. Boxes (cartesian) are copied as
strided blocks, or where a message has many small boxes, with one gather or scatter over the
elements' offsets per field; index lists (unstructured) with one gather (``take``) or scatter
per field.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from gt4py_halo.decomposition.plan import (
    BoxRegion,
    ExchangePlan,
    FieldSpec,
    Region,
    segment_offsets,
)
from gt4py_halo.runtime.identity_cache import IdentityCache, unowned_view

Copy = Callable[[], Any]

#: Field sets per ``Messages`` whose bound copies are kept.
BOUND_FIELD_SETS = 8
#: A NumPy message of boxes is packed with one gather per field, not one copy per box, where
#: it has fewer elements than this per copy call saved: a copy call costs about as much as
#: gathering that many elements more than block copies move (docs/benchmarks.md).
GATHER_ELEMENTS_PER_CALL = 800
#: The same for unpacking with one scatter (slower per element than a gather).
SCATTER_ELEMENTS_PER_CALL = 400


def _segment(buffer: Any, offset: int, count: int, spec: FieldSpec) -> Any:
    nbytes = count * spec.cell_bytes
    return buffer[offset : offset + nbytes].view(spec.dtype).reshape((count, *spec.level_shape))


def _region_views(
    region: Region, segment: Any, spec: FieldSpec, xp: ModuleType
) -> list[tuple[Any, Any]]:
    """(field index, buffer view) pairs covering ``region`` in message order."""
    if not isinstance(region, BoxRegion):
        return [(xp.asarray(region.indices), segment)]
    views, start = [], 0
    boxes = region.coalesced()
    for box in boxes:
        view = segment[start : start + box.size].reshape(box.shape + spec.level_shape)
        views.append((box.slices, view))
        start += box.size
    if xp is np and segment.size < GATHER_ELEMENTS_PER_CALL * (len(boxes) - 1):
        return [(_Gathered(views), segment.reshape(-1))]
    return views


class _Gathered:
    """Boxes of a message that may be copied as one: per field, their elements' offsets in
    its memory, in message order (box by box, C order inside)."""

    def __init__(self, views: list[tuple[tuple[slice, ...], Any]]) -> None:
        self.views = views  # (box, buffer view) pairs: the copies otherwise
        self._elements = sum(view.size for _, view in views)

    def flat(self, array: np.ndarray, per_call: int) -> tuple[np.ndarray, np.ndarray] | None:
        """A 1-D view of ``array``'s memory and the offsets of the boxes' elements in it;
        ``None`` where one copy per box is cheaper (fewer than ``per_call`` elements per call
        saved) or the strides are negative or not whole elements."""
        itemsize = array.itemsize
        if self._elements >= per_call * (len(self.views) - 1):
            return None
        if any(s < 0 or s % itemsize for s in array.strides):
            return None
        strides = [s // itemsize for s in array.strides]
        parts = []
        for box, view in self.views:
            starts = [axis.start for axis in box] + [0] * (view.ndim - len(box))
            grid = np.ogrid[tuple(slice(a, a + n) for a, n in zip(starts, view.shape))]
            parts.append(sum(g * stride for g, stride in zip(grid, strides)).ravel())
        span = 1 + sum((n - 1) * stride for n, stride in zip(array.shape, strides))
        flat = np.lib.stride_tricks.as_strided(array, (span,), (itemsize,))
        return flat, np.concatenate(parts)


class MessageBuffer:
    """One contiguous byte buffer holding every field's cells of one message, then
    ``trailer`` (bytes a transport sends with every message, written once here)."""

    def __init__(
        self, region: Region, specs: Sequence[FieldSpec], xp: ModuleType, trailer: bytes = b""
    ) -> None:
        offsets, nbytes = segment_offsets(region.count, specs)
        self.data = xp.empty(nbytes + len(trailer), dtype=xp.uint8)
        if trailer:
            self.data[nbytes:] = xp.asarray(np.frombuffer(trailer, np.uint8))
        self._xp = xp
        self._views = [
            _region_views(region, _segment(self.data, offset, region.count, spec), spec, xp)
            for offset, spec in zip(offsets, specs)
        ]

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    def pack_copies(self, arrays: Sequence[Any]) -> list[Copy]:
        """The copies that pack ``arrays`` into this buffer."""
        xp, copies = self._xp, []
        for array, views in zip(arrays, self._views):
            for index, view in views:
                if isinstance(index, _Gathered) and (
                    flat := index.flat(array, GATHER_ELEMENTS_PER_CALL)
                ):
                    copies.append(partial(flat[0].take, flat[1], 0, view, "clip"))
                elif isinstance(index, _Gathered):
                    copies.extend(partial(xp.copyto, v, array[i]) for i, v in index.views)
                elif isinstance(index, tuple):
                    copies.append(partial(xp.copyto, view, array[index]))
                elif xp is np:  # indices of the plan, in range: "clip" writes unbuffered
                    copies.append(partial(array.take, index, 0, view, "clip"))
                else:
                    copies.append(partial(xp.take, array, index, axis=0, out=view))
        return copies

    def unpack_copies(self, arrays: Sequence[Any]) -> list[Copy]:
        """The copies that unpack this buffer into ``arrays``."""
        xp, copies = self._xp, []
        for array, views in zip(arrays, self._views):
            for index, view in views:
                if isinstance(index, _Gathered) and (
                    flat := index.flat(array, SCATTER_ELEMENTS_PER_CALL)
                ):
                    copies.append(partial(flat[0].__setitem__, flat[1], view))
                elif isinstance(index, _Gathered):
                    copies.extend(partial(xp.copyto, array[i], v) for i, v in index.views)
                elif isinstance(index, tuple):
                    copies.append(partial(xp.copyto, array[index], view))
                else:
                    copies.append(partial(array.__setitem__, index, view))
        return copies


def self_copies(
    send: BoxRegion, recv: BoxRegion, arrays: Sequence[Any], xp: ModuleType
) -> list[Copy]:
    """Copies from owned to halo cells of the same rank (its own periodic neighbour).

    Send and receive boxes pair up in plan order with equal shapes; they never overlap, so the
    copies need no buffer and may run while messages are in flight.
    """
    return [
        partial(xp.copyto, array[dst.slices], array[src.slices])
        for array in arrays
        for src, dst in zip(send.boxes, recv.boxes)
    ]


class Messages:
    """The buffers of exchanging one field signature with a plan: per neighbour rank one to
    send (``sends``: (rank, buffer)) and one to receive into (``recvs``), in plan order, and
    the copies of an exchange (``bind``).

    A rank that is its own neighbour (a periodic axis not split over ranks) has no buffer for
    it: its copies go from owned cells straight to the halo, and may run while the messages
    are in flight.
    """

    def __init__(
        self, plan: ExchangePlan, specs: Sequence[FieldSpec], xp: ModuleType, trailer: bytes = b""
    ) -> None:
        self._xp = xp
        self.sends: list[tuple[int, MessageBuffer]] = []
        self.recvs: list[tuple[int, MessageBuffer]] = []
        self._self_regions: list[tuple[Region, Region]] = []
        for neighbour in plan.neighbours:
            if neighbour.rank == plan.rank:
                self._self_regions.append((neighbour.send, neighbour.recv))
                continue
            if neighbour.send.count:
                buffer = MessageBuffer(neighbour.send, specs, xp, trailer)
                self.sends.append((neighbour.rank, buffer))
            if neighbour.recv.count:
                buffer = MessageBuffer(neighbour.recv, specs, xp, trailer)
                self.recvs.append((neighbour.rank, buffer))
        self._bound = IdentityCache(BOUND_FIELD_SETS)

    def bind(self, arrays: Sequence[Any]) -> tuple[list[Copy], list[Copy], list[Copy]]:
        """The copies of an exchange of ``arrays``: packing, unpacking and from this rank to
        itself. They are made over views that do not keep ``arrays`` alive where such views
        can be made (the caller holds the arrays until the exchange is finished) and kept for
        when the same arrays come again."""
        bound = self._bound.get(None, arrays)
        if bound is None:
            views = [unowned_view(a) for a in arrays]
            over = [a if v is None else v for a, v in zip(arrays, views)]
            bound = (
                [copy for _, b in self.sends for copy in b.pack_copies(over)],
                [copy for _, b in self.recvs for copy in b.unpack_copies(over)],
                [
                    copy
                    for send, recv in self._self_regions
                    for copy in self_copies(send, recv, over, self._xp)
                ],
            )
            if all(v is not None for v in views):
                self._bound.put(None, arrays, bound)
        return bound


class MessageSets:
    """A transport's message sets (buffers, requests): one per (plan, field signature,
    ``variant``, slot), made on first use and kept. An exchange in flight holds its slot, the
    lowest free one of its plan, until it is finished: exchanges in flight never share
    buffers, and a slot numbers the exchange (MPI: its message tags)."""

    def __init__(self) -> None:
        self._slots: dict[tuple, Slots] = {}
        self._busy: dict[str, set[int]] = {}

    def slots(self, plan: ExchangePlan, specs: tuple[FieldSpec, ...], variant: Hashable) -> Slots:
        """The sets of one plan, field signature and variant, by slot: looked up once per
        prepared exchange, not per call (hashing field specs costs microseconds)."""
        key = (plan.name, specs, variant)
        found = self._slots.get(key)
        if found is None:
            found = self._slots[key] = Slots(self._busy.setdefault(plan.name, set()))
        return found


class Slots:
    """The message sets of one plan, field signature and variant, by slot; the busy slots
    are the plan's, shared by all its field signatures."""

    __slots__ = ("_busy", "_sets")

    def __init__(self, busy: set[int]) -> None:
        self._busy = busy
        self._sets: dict[int, Any] = {}

    def start(self, make: Callable[[int], Any], *args: Any) -> tuple[Any, int]:
        """``start(*args)`` an exchange on the set of the lowest free slot (``make(slot)``
        builds a missing one); return the set and its slot, busy until ``release``. If
        ``make`` or ``start`` raises, the slot stays free."""
        busy = self._busy
        slot = 0
        while slot in busy:
            slot += 1
        messages = self._sets.get(slot)
        if messages is None:
            messages = self._sets[slot] = make(slot)
        messages.start(*args)
        busy.add(slot)
        return messages, slot

    def release(self, slot: int) -> None:
        self._busy.discard(slot)
