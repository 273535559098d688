"""Message buffers laid out from a plan, and the copies between them and fields.

A ``MessageBuffer`` is allocated once per (plan, neighbour, field signature) and reused for
every exchange; ``Messages`` holds those of one plan and field signature, what every transport
that sends buffers (``mpi``, ``nccl``) moves. The copies an exchange makes are planned in two
steps: buffer-side views are fixed when the buffer is built; field-side views are bound to the
fields of a call (``Messages.bind``) and, where they hold no reference to the fields, kept by
the caller for the next call with the same fields (the ``mpi`` transport's prepared exchange,
one per field set: a model exchanges its own state every step), so a repeated exchange only
runs the copies. Boxes
(cartesian) are copied as strided blocks, index lists (unstructured) entry by entry: for host
fields all of a phase's blocks and index lists in one call into C (``_native.run``: per box
NumPy costs a Python call, more than a small halo's bytes), for device fields one ``copyto``
per box and one gather (``take``) or scatter per field and index list. Where a transport
sends them (``mpi``), boxes of long contiguous runs travel in place instead, a message per
run (``in_place_boxes``, ``Messages.bind_runs``).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from gt4py_halo import _native
from gt4py_halo.decomposition.plan import (
    MAX_RUNS,
    RUNTIME_IN_PLACE_MIN_BYTES,
    Box,
    BoxRegion,
    ExchangePlan,
    FieldSpec,
    Region,
    segment_offsets,
)
from gt4py_halo.runtime.identity_cache import unowned_view

Copy = Callable[[], Any]
#: (destination, source) views of one shape and dtype, the copy of a box; or for an index
#: list (destination, source, indices, scatter): destination[i] = source[indices[i]] for each
#: i, or (scatter) destination[indices[i]] = source[i]
Block = tuple
#: The copies of an exchange: packing, unpacking, and from a rank to itself
Bound = tuple[list[Copy], list[Copy], list[Copy]]


def _segment(buffer: Any, offset: int, count: int, spec: FieldSpec) -> Any:
    nbytes = count * spec.cell_bytes
    return buffer[offset : offset + nbytes].view(spec.dtype).reshape((count, *spec.level_shape))


def _region_views(
    region: Region, segment: Any, spec: FieldSpec, xp: ModuleType
) -> list[tuple[Any, Any]]:
    """(field index, buffer view) pairs covering ``region`` in message order."""
    if not isinstance(region, BoxRegion):  # (host: as _native.run reads them)
        return [(xp.ascontiguousarray(xp.asarray(region.indices), dtype=xp.int64), segment)]
    views, start = [], 0
    for box in region.coalesced():
        view = segment[start : start + box.size].reshape(box.shape + spec.level_shape)
        views.append((box.slices, view))
        start += box.size
    return views


def block_copies(blocks: Sequence[Block], xp: ModuleType, lockstep: bool = False) -> list[Copy]:
    """The copies of ``blocks``: host ones in one call (``lockstep``: as ``block_program``
    says), device ones (boxes only) one ``copyto`` each."""
    if xp is not np:
        return [partial(xp.copyto, dst, src) for dst, src in blocks]
    program = block_program(blocks, lockstep)
    return [partial(_native.run, program)] if program.size else []


#: The longest runs (bytes) two blocks copied in lockstep may have: a cache line (the
#: compiled ``shm`` copies' rule too, ``transports/shm/include/gt4py_halo_shm.hpp``).
LOCKSTEP_RUN_BYTES = 64


def block_program(blocks: Sequence[Block], lockstep: bool = False) -> np.ndarray:
    """The ``_native.run`` program of host ``blocks`` (empty where they copy nothing).

    ``lockstep``: no block reads or writes what another writes (copies from owned cells to
    halo cells), so a block and the next one, where both are boxes of one layout (counts and
    strides) with runs of a cache line at most, are copied together run by run: the two
    halos across an axis that wraps onto the rank, across the unit-stride axis one element
    per row, then fetch each row's cache lines once instead of twice."""
    records = [_record(*b) if len(b) == 2 else _entries(*b) for b in blocks]
    words: list[int] = []
    k = 0
    while k < len(records):
        first = records[k]
        second = records[k + 1] if lockstep and k + 1 < len(records) else []
        if (
            first
            and second
            and 1 <= first[3] < _native.PAIRED
            and first[2] <= LOCKSTEP_RUN_BYTES
            and first[2:] == second[2:]
        ):
            words += [*first[:3], _native.PAIRED + first[3], *second[:2], *first[4:]]
            k += 2
            continue
        words += first
        k += 1
    return np.array(words, np.int64)


def _record(dst: np.ndarray, src: np.ndarray) -> list[int]:
    """The ``_native.run`` record copying ``src`` to ``dst`` (NumPy views of one shape and
    dtype): their addresses, the bytes of the longest run contiguous in both, and the
    (count, source stride, destination stride) of each axis around it, axes of one element
    dropped and axes that step evenly over the next one merged."""
    if dst.size == 0:
        return []
    outer: list[tuple[int, int, int]] = []
    for n, s, d in zip(dst.shape, src.strides, dst.strides):
        if n == 1:
            continue
        if outer and outer[-1][1] == n * s and outer[-1][2] == n * d:
            n *= outer.pop()[0]
        outer.append((n, s, d))
    run = dst.itemsize
    if outer and outer[-1][1] == run == outer[-1][2]:
        run *= outer.pop()[0]
    address = [a.__array_interface__["data"][0] for a in (src, dst)]
    return [*address, run, len(outer), *[x for axis in outer for x in axis]]


def _entries(dst: np.ndarray, src: np.ndarray, indices: np.ndarray, scatter: bool) -> list[int]:
    """The ``_native.run`` record copying entries (a cell and its levels) by ``indices``:
    ``dst[i] = src[indices[i]]``, or (``scatter``) ``dst[indices[i]] = src[i]``: the
    arrays' addresses, the record of one entry's copy, the indices' address and the strides
    between entries."""
    if indices.size == 0 or dst[:1].size == 0:
        return []
    k = int(indices[0])
    one = _record(dst[k : k + 1], src[:1]) if scatter else _record(dst[:1], src[k : k + 1])
    indexed, other = (dst, src) if scatter else (src, dst)
    address = [a.__array_interface__["data"][0] for a in (src, dst, indices)]
    return [
        *address[:2],
        one[2],
        -1 - one[3],
        indices.size,
        address[2],
        indexed.strides[0],
        other.strides[0],
        int(scatter),
        *one[4:],
    ]


class MessageBuffer:
    """One contiguous byte buffer holding ``header`` (bytes a transport sends first, written
    once here), every field's cells of one message, then ``trailer`` (written once too).
    ``data``: the bytes to lay it over (another buffer's, of the same cell count: the same
    cells seen in another region's order), else allocated here."""

    def __init__(
        self,
        region: Region,
        specs: Sequence[FieldSpec],
        xp: ModuleType,
        trailer: bytes = b"",
        header: bytes = b"",
        data: Any = None,
    ) -> None:
        offsets, nbytes = segment_offsets(region.count, specs)
        start = len(header)
        self.data = (
            xp.empty(start + nbytes + len(trailer), dtype=xp.uint8) if data is None else data
        )
        for at, written in ((0, header), (start + nbytes, trailer)):
            if written:
                self.data[at : at + len(written)] = xp.asarray(np.frombuffer(written, np.uint8))
        self._xp = xp
        self._views = [
            _region_views(region, _segment(self.data, start + o, region.count, spec), spec, xp)
            for o, spec in zip(offsets, specs)
        ]

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    def pack(self, arrays: Sequence[Any], blocks: list[Block], copies: list[Copy]) -> None:
        """Add what packs ``arrays`` into this buffer to ``blocks``, or where ``blocks``
        cannot hold it (a device array's index list) to ``copies``."""
        xp = self._xp
        for array, views in zip(arrays, self._views):
            for index, view in views:
                if isinstance(index, tuple):
                    blocks.append((view, array[index]))
                elif xp is np:
                    blocks.append((view, array, index, False))
                else:
                    copies.append(partial(xp.take, array, index, axis=0, out=view))

    def unpack(self, arrays: Sequence[Any], blocks: list[Block], copies: list[Copy]) -> None:
        """Add what unpacks this buffer into ``arrays`` to ``blocks``, or where ``blocks``
        cannot hold it (a device array's index list) to ``copies``."""
        for array, views in zip(arrays, self._views):
            for index, view in views:
                if isinstance(index, tuple):
                    blocks.append((array[index], view))
                elif self._xp is np:
                    blocks.append((array, view, index, True))
                else:
                    copies.append(partial(array.__setitem__, index, view))


def _without(region: Region, boxes: tuple[Box, ...]) -> Region:
    """``region`` but ``boxes`` (some of its boxes, in its order)."""
    if not boxes:
        return region
    kept, left = [], list(boxes)
    for box in region.boxes:
        if left and box == left[0]:
            left.pop(0)
        else:
            kept.append(box)
    return BoxRegion(tuple(kept))


def self_blocks(send: BoxRegion, recv: BoxRegion, arrays: Sequence[Any]) -> list[Block]:
    """Copies from owned to halo cells of the same rank (its own periodic neighbour).

    Send and receive boxes pair up in plan order with equal shapes; they never overlap, so the
    copies need no buffer and may run while messages are in flight.
    """
    return [
        (array[dst.slices], array[src.slices])
        for array in arrays
        for src, dst in zip(send.boxes, recv.boxes)
    ]


#: Bytes before the fields of a message where runs may travel beside it (``Messages(runs=
#: True)``): how many messages of runs its sender sends the receiver in the same exchange (an
#: int64), first, so that a message longer than its receive still says it.
RUN_COUNT_BYTES = 8


def run_axes(box: Box, local_shape: Sequence[int], level_shape: Sequence[int]) -> int:
    """How many leading axes of ``box`` (its decomposed axes, then ``level_shape``'s) its
    runs have one of per point: a box of a C-ordered field of ``local_shape`` cells is one
    contiguous run per point of the axes before the last one it does not cover whole (the
    levels are always whole; a decomposed axis is where the box spans it from 0: an axis
    without halo)."""
    k = len(box.shape) + len(level_shape)
    while k > 0:
        k -= 1
        if k < len(box.shape) and (box.start[k] != 0 or box.shape[k] != local_shape[k]):
            return k
    return 0


def in_place_boxes(
    region: Region, local_shape: Sequence[int], specs: Sequence[FieldSpec]
) -> tuple[Box, ...]:
    """The boxes of ``region`` (none of an index list) whose runs (``run_axes``) are, for
    every field of ``specs``, at least ``RUNTIME_IN_PLACE_MIN_BYTES`` long and at most
    ``MAX_RUNS``.

    The rule reads a box's shape and which axes it covers whole: a box sent and the box it
    fills on the receiver have the same shape, and an axis without halo or wrapping onto the
    rank (``ExchangePlan.wrapped``) has the same extent on the two ranks (cartesian blocks
    form a grid: ranks on both sides of a face, edge or corner share the block extents of the
    axes the direction does not cross). So both sides cut a box into the same messages,
    whatever each one's strides. It is the rule of the compiled exchanges
    (``compiled/in_place.py``, which evaluates it on symbolic descriptors inside generated
    code), here on the plan's boxes, without DaCe or SymPy in the runtime, and with the
    runtime's own threshold (it posts each run from Python)."""
    if not isinstance(region, BoxRegion):
        return ()

    def runs_qualify(box: Box, spec: FieldSpec) -> bool:
        shape = (*box.shape, *spec.level_shape)
        k = run_axes(box, local_shape, spec.level_shape)
        length = math.prod(shape[k:]) * spec.dtype.itemsize
        return length >= RUNTIME_IN_PLACE_MIN_BYTES and math.prod(shape[:k]) <= MAX_RUNS

    return tuple(box for box in region.boxes if all(runs_qualify(box, s) for s in specs))


@dataclasses.dataclass
class BoundRuns:
    """The runs to and from one neighbour rank of an exchange of one field set, in message
    order (box by box in plan order, field by field, runs in C order): the memory of each,
    contiguous (the run in the field, or a buffer of its own where the field's layout does
    not make it contiguous), and the copies between such buffers and the fields."""

    rank: int
    sends: list[np.ndarray]
    recvs: list[np.ndarray]
    pack: list[Copy]
    unpack: list[Copy]


class Messages:
    """The buffers of exchanging one field signature with a plan: per neighbour rank one to
    send (``sends``: (rank, buffer)) and one to receive into (``recvs``), in plan order, and
    the copies of an exchange (``bind``).

    A rank that is its own neighbour (a periodic axis not split over ranks) has no buffer for
    it: its copies go from owned cells straight to the halo, and may run while the messages
    are in flight.

    With ``wrapped`` (a transport that makes the copies to the rank itself first, before it
    packs: ``mpi``) the messages are the plan's ``wrapped`` ones where it has them: faces
    widened across the halos of the axes that wrap onto the rank, which those copies fill
    (``self_first``).

    With ``runs`` (a transport that sends them: ``mpi``) the boxes of host fields whose runs
    are long (``in_place_boxes``) travel as messages of their own, one per run, not in the
    buffers (``runs``: per neighbour rank, the boxes sent and received so; ``bind_runs``), and
    each buffer starts with ``RUN_COUNT_BYTES``: how many run messages its sender sends the
    receiver beside it.
    """

    def __init__(
        self,
        plan: ExchangePlan,
        specs: Sequence[FieldSpec],
        xp: ModuleType,
        trailer: bytes = b"",
        runs: bool = False,
        wrapped: bool = False,
    ) -> None:
        self._xp = xp
        self._specs = tuple(specs)
        self._local_shape = plan.local_shape
        self.sends: list[tuple[int, MessageBuffer]] = []
        self.recvs: list[tuple[int, MessageBuffer]] = []
        #: per neighbour rank with runs either way: (rank, boxes sent as runs, boxes received)
        self.runs: list[tuple[int, tuple[Box, ...], tuple[Box, ...]]] = []
        #: whether the copies to the rank itself must run before the packing (they fill
        #: halos that the messages carry)
        self.self_first = wrapped and bool(plan.wrapped)
        self._self_regions = [(n.send, n.recv) for n in plan.neighbours if n.rank == plan.rank]
        remote = plan.wrapped if self.self_first else plan.remote_neighbours
        for neighbour in remote:
            send, recv, header = neighbour.send, neighbour.recv, b""
            if runs:
                sent = got = ()
                if xp is np:
                    sent = in_place_boxes(send, plan.local_shape, specs)
                    got = in_place_boxes(recv, plan.local_shape, specs)
                if sent or got:
                    self.runs.append((neighbour.rank, sent, got))
                    send, recv = _without(send, sent), _without(recv, got)
                count = sum(self._run_count(box) for box in sent)
                header = count.to_bytes(RUN_COUNT_BYTES, sys.byteorder, signed=True)
            if neighbour.send.count:
                buffer = MessageBuffer(send, specs, xp, trailer, header)
                self.sends.append((neighbour.rank, buffer))
            if neighbour.recv.count:
                buffer = MessageBuffer(recv, specs, xp, trailer, bytes(len(header)))
                self.recvs.append((neighbour.rank, buffer))

    def _run_count(self, box: Box) -> int:
        """How many runs of ``box`` travel, over all fields."""
        return sum(
            math.prod(
                (*box.shape, *s.level_shape)[: run_axes(box, self._local_shape, s.level_shape)]
            )
            for s in self._specs
        )

    def bind_runs(self, arrays: Sequence[np.ndarray]) -> list[BoundRuns]:
        """The runs of an exchange of ``arrays`` (host arrays), per neighbour rank of ``runs``,
        over views that hold no reference to them."""
        over = [a if v is None else v for a, v in ((a, unowned_view(a)) for a in arrays)]
        bound = []
        for rank, sent, got in self.runs:
            sends: list[np.ndarray] = []
            recvs: list[np.ndarray] = []
            pack: list[Block] = []
            unpack: list[Block] = []
            for boxes, memory, blocks, packing in (
                (sent, sends, pack, True),
                (got, recvs, unpack, False),
            ):
                for box in boxes:
                    for array, spec in zip(over, self._specs):
                        view = array[box.slices]
                        k = run_axes(box, self._local_shape, spec.level_shape)
                        for point in np.ndindex(view.shape[:k]):
                            run = view[point]
                            if run.flags.c_contiguous:
                                memory.append(run)
                                continue
                            buffer = np.empty(run.shape, run.dtype)
                            memory.append(buffer)
                            blocks.append((buffer, run) if packing else (run, buffer))
            bound.append(
                BoundRuns(rank, sends, recvs, block_copies(pack, np), block_copies(unpack, np))
            )
        return bound

    def bind(self, arrays: Sequence[Any]) -> tuple[Bound, bool]:
        """The copies of an exchange of ``arrays``: packing, unpacking and from this rank to
        itself; and whether they hold no reference to ``arrays`` (they are made over views
        that do not keep them alive where such views can be made: host arrays). The caller
        holds the arrays until the exchange is finished, and may keep such copies for when
        the same arrays come again."""
        views = [unowned_view(a) for a in arrays]
        over = [a if v is None else v for a, v in zip(arrays, views)]
        xp = self._xp
        pack: tuple[list[Block], list[Copy]] = ([], [])
        unpack: tuple[list[Block], list[Copy]] = ([], [])
        for _, buffer in self.sends:
            buffer.pack(over, *pack)
        for _, buffer in self.recvs:
            buffer.unpack(over, *unpack)
        local = [b for send, recv in self._self_regions for b in self_blocks(send, recv, over)]
        bound = (
            block_copies(pack[0], xp) + pack[1],
            block_copies(unpack[0], xp) + unpack[1],
            block_copies(local, xp, lockstep=True),
        )
        return bound, all(v is not None for v in views)


class MessageSets:
    """A transport's message sets (buffers, requests): one per (plan, field signature,
    ``variant``, slot), made on first use and kept. An exchange in flight holds its slot, the
    lowest free one of its plan, until it is finished: exchanges in flight never share
    buffers. Which slot an exchange takes depends on which earlier ones this rank has
    finished, so it may differ between ranks: nothing that crosses ranks (a message tag)
    may depend on it."""

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

    __slots__ = ("_sets", "busy")

    def __init__(self, busy: set[int]) -> None:
        #: The plan's busy slots.
        self.busy = busy
        self._sets: dict[int, Any] = {}

    def start(self, make: Callable[[int], Any], *args: Any) -> tuple[Any, int]:
        """``start(*args)`` an exchange on the set of the lowest free slot (``make(slot)``
        builds a missing one); return the set and its slot, busy from before the start (MPI's
        calls let other threads run) until ``release``. If ``make`` or ``start`` raises, the
        slot stays free."""
        messages, slot = self._free(make)
        busy = self.busy
        busy.add(slot)
        try:
            messages.start(*args)
        except BaseException:
            busy.discard(slot)
            raise
        return messages, slot

    def exchange(self, make: Callable[[int], Any], *args: Any) -> None:
        """``exchange(*args)`` (start and wait) on the set of the lowest free slot, busy
        meanwhile."""
        messages, slot = self._free(make)
        busy = self.busy
        busy.add(slot)
        try:
            messages.exchange(*args)
        finally:
            busy.discard(slot)

    def _free(self, make: Callable[[int], Any]) -> tuple[Any, int]:
        """The set of the lowest free slot, made if missing, and the slot."""
        busy = self.busy
        slot = 0
        while slot in busy:
            slot += 1
        return self.of(slot, make), slot

    def of(self, slot: int, make: Callable[[int], Any]) -> Any:
        """The set of ``slot``, made if missing."""
        messages = self._sets.get(slot)
        if messages is None:
            messages = self._sets[slot] = make(slot)
        return messages

    def release(self, slot: int) -> None:
        self.busy.discard(slot)

    def releaser(self, slot: int) -> Callable[[], None]:
        """``release(slot)``, as a call that references no message set (a set may hold it)."""
        return partial(self.busy.discard, slot)
