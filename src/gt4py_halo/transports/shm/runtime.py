"""The ``shm`` transport: halos copied straight from the neighbours' fields, no messages.

Ranks of one node can read each other's memory where it lies in an MPI shared window. Fields
allocated with ``gh.shared_allocator`` do (``allocation.SharedPool``), so a rank writes its
halo from its neighbours' owned cells in one copy per box: no packing, no message, no
unpacking. MPI's own path on a node copies every byte at least once more (a kernel copy
across processes, or two through a shared buffer); ``docs/benchmarks.md`` ("Beyond MPI on
one node") has the measurement that led here.

Ranks meet through control records in a window of the transport's own: per rank ``SLOTS``
records, exchange ``k`` (the rank's count of starts: ranks must start their exchanges in
the same order, as for MPI) in record ``k % SLOTS``. ``start`` fills the rank's own periodic
halos, then publishes what its fields are (the signature of their kind, and per field its
pool, offset, shape and strides) and, last, the exchange's number. ``finish`` waits for each
neighbour's record of that number, checks it against its own (the same kind of fields,
shapes that hold the boxes it reads), copies the neighbours' owned cells into its halos,
says in its own record that its reads of that exchange are done (a flag per neighbour it
reads from), and waits until each of its readers has said so: only then may its owned cells
change. While it waits (for its
readers, or for a neighbour's record) it also reads for its other exchanges in flight whose
neighbours are there: ranks may finish their exchanges in different orders, and a neighbour
may wait for this rank's reads of an earlier exchange before it starts the next. A rank
whose neighbour's fields are not what it expects copies nothing from anyone, sets all its
done flags (no rank that waits for it is left waiting) and raises ``RanksDisagreeError``.

A blocking call of fields exchanged before runs whole in C (``_native.ShmRun``, from
``PreparedShmExchange.kept``) while no other ``shm`` exchange is in flight: the same steps, the
neighbours' records compared with those its copies were bound to; where one differs, or a
wait lasts, it hands the exchange to Python (``finish_from``), which checks and reports.
A split call runs its halves there too (``ShmRun.publish``, ``ShmRun.complete``): the start
whole; the finish waits in C only while no other ``shm`` exchange is in flight (a wait there
reads for none of them), else looks once, and goes on in Python where it cannot finish.

The plans' send regions are exchanged once, when the transport is made (collectively): a
rank reads its neighbour's cells in the neighbour's own indices. One node only: ranks on
other nodes cannot map each other's memory (``BackendUnavailableError`` on every rank).
Host (NumPy) fields only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from gt4py_halo import _native, build_once, profiling
from gt4py_halo.allocation import SharedPool
from gt4py_halo.decomposition.collective import raise_on_all_ranks
from gt4py_halo.decomposition.plan import (
    BoxRegion,
    ExchangePlan,
    FieldSpec,
    Region,
    signature,
)
from gt4py_halo.errors import BackendError, BackendUnavailableError, FieldError, RanksDisagreeError
from gt4py_halo.runtime.agreement import described, report_wait
from gt4py_halo.runtime.identity_cache import unowned_view
from gt4py_halo.runtime.in_flight import UNFINISHED
from gt4py_halo.runtime.packing import Block, MessageBuffer, block_program, self_blocks

#: Exchanges a rank may have in flight at once (its control records).
SLOTS = 16
#: Fields one exchange may hold, axes one field may have (the size of a control record).
MAX_FIELDS = 64
MAX_AXES = 6
#: Neighbours one rank may read from in one plan.
MAX_SOURCES = 128
# a record: the exchange's number + 1 (0: none yet), the fields' signature, how many fields,
# the stamp of the compiled step's call that runs it (``compiled/stamps.py``; 0 at run time);
# then per field its pool's number, its offset in this rank's part of the pool, ndim, shape
# and strides (MAX_AXES each); then per neighbour this rank reads from (in the order of its
# plan), the number + 1 of the exchange whose reads from it are done (all of them where the
# neighbours disagreed: whoever waits for them goes on)
_NUMBER, _SIGNATURE, _COUNT, _STAMP, _HEAD = 0, 1, 2, 3, 4
_FIELD = 3 + 2 * MAX_AXES
_DONE = _HEAD + MAX_FIELDS * _FIELD
_RECORD = _DONE + MAX_SOURCES
#: Seconds of one wait in C between looks from Python (another exchange's reads, a report).
_LOOK_S = 0.001

#: Every ``shm`` exchange of this process in flight, of any transport (exchange object): a
#: rank waiting in one reads for the others (``PendingShmExchange._until``).
IN_FLIGHT: dict[PendingShmExchange, None] = {}


class ShmTransport:
    """Moves halos by copying from the neighbours' fields in a node's shared memory."""

    #: Each record carries its fields' signature, checked by its readers.
    checks_each_message = True

    def __init__(self, decomposition: Any, comm: MPI.Comm | None = None) -> None:
        """``comm``: the decomposition's communicator, or one of the same group (the compiled
        exchanges' own)."""
        comm = decomposition.comm if comm is None else comm
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        sizes = comm.allgather(node.Get_size())
        if any(size != comm.Get_size() for size in sizes):
            raise BackendUnavailableError(
                f"the 'shm' backend exchanges between ranks of one node only; the "
                f"{comm.Get_size()} ranks are on several (ranks per node: {sorted(set(sizes))}): "
                "use 'mpi' or 'ghex'"
            )
        self._comm, self.rank = comm, comm.Get_rank()
        self._window = MPI.Win.Allocate_shared(SLOTS * _RECORD * 8, 8, comm=node)
        self._records = [
            np.frombuffer(self._window.Shared_query(r)[0], np.int64).reshape(SLOTS, _RECORD)
            for r in range(node.Get_size())
        ]
        self._records[self.rank][:] = 0
        node.Free()
        #: per plan name and neighbour rank, the cells it sends this rank, in its indices;
        #: and where this rank is among the neighbours that rank reads from
        self.sources, self.positions = _neighbourhood(comm, decomposition)
        #: the count of exchanges started (numbered alike on every rank; ``_native.ShmRun``
        #: counts too)
        self.state = np.zeros(1, np.int64)
        #: exchanges started and not finished, by slot
        self.in_flight: dict[int, PendingShmExchange] = {}
        comm.Barrier()  # every record zeroed before any is read

    @classmethod
    def for_decomposition(cls, decomposition: Any) -> ShmTransport:
        return cls(decomposition)

    def prepare(
        self, plan: ExchangePlan, arrays: Sequence[Any], specs: tuple[FieldSpec, ...]
    ) -> PreparedShmExchange:
        return PreparedShmExchange(self, plan, arrays, specs)

    def links(
        self, plan: ExchangePlan
    ) -> tuple[list[tuple[int, Region, Region]], list[tuple[int, int]]]:
        """Per neighbour this rank reads from: (rank, its cells here, its cells there), in
        the plan's order; and the neighbours that read this rank's cells, with where this
        rank is among theirs (its done flags there). A ``RanksDisagreeError`` where the
        ranks' plans do not match."""
        sources = self.sources.get(plan.name, {})
        reads = [
            (n.rank, n.recv, sources.get(n.rank)) for n in plan.remote_neighbours if n.recv.count
        ]
        for rank, here, there in reads:
            if there is None or here.count != there.count:
                sent = 0 if there is None else there.count
                raise RanksDisagreeError(
                    f"rank {rank} sends {sent} cells of {plan.name!r} where this rank "
                    f"receives {here.count}: the ranks' plans disagree"
                )
        positions = self.positions.get(plan.name, {})
        readers = [
            (n.rank, positions.get(n.rank, -1)) for n in plan.remote_neighbours if n.send.count
        ]
        for rank, position in readers:
            if position < 0:
                raise RanksDisagreeError(
                    f"rank {rank} does not read the cells of {plan.name!r} this rank sends it: "
                    "the ranks' plans disagree"
                )
        return reads, readers

    def record(self, rank: int, slot: int) -> np.ndarray:
        return self._records[rank][slot]

    def records_at(self, rank: int) -> int:
        """The address of ``rank``'s records."""
        return self._records[rank].ctypes.data

    def next_number(self) -> int:
        """The number of the exchange starting now."""
        number = int(self.state[0])
        if number % SLOTS in self.in_flight:
            raise BackendError(
                f"the 'shm' backend keeps at most {SLOTS} exchanges in flight per rank; finish "
                "one before starting another"
            )
        self.state[0] += 1
        return number


def _neighbourhood(
    comm: MPI.Comm, decomposition: Any
) -> tuple[dict[str, dict[int, Region]], dict[str, dict[int, int]]]:
    """Per plan of ``decomposition`` and neighbour rank: the region that rank sends this one
    (in its own indices), and where this rank is among the neighbours that rank reads from
    (its done flags, ``_DONE``). Collective."""
    dims = getattr(decomposition, "dims", None) or (None,)
    outgoing: list[dict[str, list]] = [{} for _ in range(comm.Get_size())]
    many = None
    for dim in dims:
        plan = decomposition.plan(dim)
        for neighbour in plan.remote_neighbours:
            outgoing[neighbour.rank][plan.name] = [neighbour.send, None]
        sources = [n.rank for n in plan.remote_neighbours if n.recv.count]
        for position, rank in enumerate(sources):
            outgoing[rank][plan.name][1] = position
        if len(sources) > MAX_SOURCES:
            many = f"{plan.name!r} has {len(sources)} neighbours sending to this rank"
    raise_on_all_ranks(
        comm, many and f"{many}; the 'shm' backend takes {MAX_SOURCES}", BackendError
    )
    regions: dict[str, dict[int, Region]] = {}
    positions: dict[str, dict[int, int]] = {}
    for rank, entries in enumerate(comm.alltoall(outgoing)):
        for name, (region, position) in entries.items():
            regions.setdefault(name, {})[rank] = region
            if position is not None:
                positions.setdefault(name, {})[rank] = position
    return regions, positions


def _words(plan: ExchangePlan, arrays: Sequence[Any], comm: MPI.Comm) -> np.ndarray:
    """What a record says of ``arrays`` (``_FIELD`` words each); a ``FieldError`` where one
    cannot be read by the other ranks."""
    if len(arrays) > MAX_FIELDS:
        raise FieldError(
            f"the 'shm' backend exchanges at most {MAX_FIELDS} fields per call, {len(arrays)} given"
        )
    words = np.zeros((len(arrays), _FIELD), np.int64)
    for i, array in enumerate(arrays):
        if not isinstance(array, np.ndarray):
            raise FieldError(
                f"field {i}: the 'shm' backend exchanges host (NumPy) fields only, got "
                f"{type(array).__name__}"
            )
        if array.ndim > MAX_AXES:
            raise FieldError(f"field {i} has {array.ndim} axes; the 'shm' backend takes {MAX_AXES}")
        if array.size == 0:  # no cell to read: no memory to name
            words[i, :3] = (-1, 0, array.ndim)
            words[i, 3 : 3 + array.ndim] = array.shape
            continue
        found = SharedPool.of(array)
        group = comm.Get_group()
        same = found is not None and MPI.Group.Compare(found[0].group, group) == MPI.IDENT
        group.Free()
        if not same:
            raise FieldError(
                f"field {i} is not in memory the ranks share: allocate the fields the 'shm' "
                "backend exchanges with gh.shared_allocator(decomposition, nbytes) of this "
                "decomposition (gtx.zeros(domain, allocator=...))"
            )
        pool, offset = found
        n = array.ndim
        words[i, :3] = (pool.number, offset, n)
        words[i, 3 : 3 + n] = array.shape
        words[i, 3 + MAX_AXES : 3 + MAX_AXES + n] = array.strides
    return words.reshape(-1)


class PreparedShmExchange:
    """Exchanging one set of fields with one plan: the record of the fields, the copies to
    this rank's own halos, and per neighbour what to copy from it, bound when its record is
    first seen and kept while its fields stay the same (``_copies``)."""

    #: It references no field: the exchange keeps it for the same field objects.
    reusable = True

    def __init__(
        self,
        transport: ShmTransport,
        plan: ExchangePlan,
        arrays: Sequence[Any],
        specs: tuple[FieldSpec, ...],
    ) -> None:
        self.transport = transport
        self.words = _words(plan, arrays, transport._comm)
        self.signature = int.from_bytes(signature(specs, plan.name), "little", signed=True)
        self.kind = described(plan.name, specs)
        self.specs = specs
        over = [unowned_view(a) for a in arrays]
        #: the copies to this rank's own halos
        self.local = block_program(
            [
                b
                for n in plan.neighbours
                if n.rank == plan.rank
                for b in self_blocks(n.send, n.recv, over)
            ],
            lockstep=True,
        )
        self.reads, self.readers = transport.links(plan)
        self._over = over  # (views: they hold no array)
        #: per key (the neighbours' records' field words), the copies from the neighbours
        #: and the buffers they go through (``copies``)
        self._copies: dict[bytes, tuple[np.ndarray, list[np.ndarray]]] = {}
        #: the last copies bound, as ``_native.ShmRun`` takes them: [key, program, buffers]
        self._fast: list[Any] = [b"", block_program([]), []]
        self._slots: dict[int, _Slot] = {}
        #: the exchange's steps in C: a kept blocking call whole, a split call's halves
        self.run = self._shm_run()

    def slot(self, slot: int) -> _Slot:
        """What its exchanges in ``slot`` read and write, found on first use."""
        found = self._slots.get(slot)
        if found is None:
            found = self._slots[slot] = _Slot(self, slot)
        return found

    def start(self, arrays: Sequence[Any]) -> PendingShmExchange:
        return PendingShmExchange(self, arrays)

    def exchange(self, arrays: Sequence[Any], waiting: Any = None) -> None:
        self.start(arrays).wait()

    def finish_from(self, arrays: Sequence[Any], waiting: Any, number: int, read: bool) -> None:
        """Finish exchange ``number``, which ``_native.ShmRun`` started (and read, if
        ``read``), in Python."""
        PendingShmExchange(self, arrays, number, read).wait()

    def kept(self, arrays: Sequence[Any]) -> Callable[[Sequence[Any], Any], None]:
        """What a kept call of ``arrays`` runs (``_native.ExchangeAgain``): the whole
        exchange in C (``_native.ShmRun``) where nothing else is in flight and the
        neighbours' fields are those its last copies were bound to, else in Python."""
        return self.run

    def _shm_run(self) -> Any:
        transport = self.transport
        bases = [transport.records_at(transport.rank)]
        bases += [transport.records_at(rank) for rank, _, _ in self.reads]
        readers = [transport.records_at(rank) + 8 * (_DONE + j) for rank, j in self.readers]
        return _native.ShmRun(
            transport.state,
            IN_FLIGHT,
            self.local,
            self.words,
            np.array(bases, np.int64),
            np.array(readers, np.int64),
            self._fast,
            self.exchange,
            self.finish_from,
            _RECORD,
            SLOTS,
            self.signature,
            len(self.words) // _FIELD,
            _DONE,
        )

    def copies(self, records: list[np.ndarray]) -> np.ndarray | str:
        """The copies (a ``_native.run`` program) from the neighbours whose ``records`` (in
        ``reads`` order) describe their fields, or what is wrong with a record."""
        key = b"".join(r[_HEAD : _HEAD + len(self.words)].tobytes() for r in records)
        found = self._copies.get(key)
        if found is not None:
            self._fast[:] = [key, *found]
            return found[0]
        blocks: list[Block] = []
        buffers: list[np.ndarray] = []
        for (rank, here, there), record in zip(self.reads, records):
            theirs = self._their_arrays(rank, record)
            if isinstance(theirs, str):
                return theirs
            blocks += _blocks(here, there, self._over, theirs, self.specs, buffers)
        found = self._copies[key] = (block_program(blocks), buffers)
        if len(self._copies) > 4:  # neighbours' fields that came and went
            del self._copies[next(iter(self._copies))]
        self._fast[:] = [key, *found]
        return found[0]

    def _their_arrays(self, rank: int, record: np.ndarray) -> list[np.ndarray] | str:
        """Views of ``rank``'s fields as its ``record`` gives them, or why they cannot be
        read: checked to lie in its part of the pool, with this rank's levels."""
        arrays = []
        fields = record[_HEAD : _HEAD + len(self.words)].reshape(-1, _FIELD)
        for i, (words, spec) in enumerate(zip(fields, self.specs)):
            n = int(words[2])
            shape = tuple(int(x) for x in words[3 : 3 + n])
            strides = tuple(int(x) for x in words[3 + MAX_AXES : 3 + MAX_AXES + n])
            if words[0] == -1 and 0 in shape:  # a field without cells
                arrays.append(np.empty(shape, spec.dtype))
                continue
            pool = _pool(int(words[0]))
            if pool is None or shape[len(shape) - len(spec.level_shape) :] != spec.level_shape:
                return f"rank {rank}'s field {i} is not the kind this rank exchanges"
            segment = pool.segment(rank)
            low = int(words[1]) + sum((m - 1) * s for m, s in zip(shape, strides) if s < 0)
            high = int(words[1]) + sum((m - 1) * s for m, s in zip(shape, strides) if s > 0)
            if low < 0 or high + spec.dtype.itemsize > segment.nbytes:
                return f"rank {rank}'s field {i} lies outside its shared memory"
            arrays.append(
                np.ndarray(shape, spec.dtype, segment, offset=int(words[1]), strides=strides)
            )
        return arrays


def _pool(number: int) -> SharedPool | None:
    from gt4py_halo.allocation import _POOLS

    return _POOLS.get(number)


def _blocks(
    here: Region,
    there: Region,
    mine: Sequence[np.ndarray],
    theirs: Sequence[np.ndarray],
    specs: Sequence[FieldSpec],
    buffers: list[np.ndarray],
) -> list[Block]:
    """The copies of a neighbour's cells ``there`` (of ``theirs``) to ``here`` (of
    ``mine``): box to box where both are boxes of the same shapes in the same order
    (cartesian plans), else through a buffer of this rank's (gathered from the neighbour's
    fields, scattered into its own), added to ``buffers``, which the copies need."""
    if (
        isinstance(here, BoxRegion)
        and isinstance(there, BoxRegion)
        and [b.shape for b in here.boxes] == [b.shape for b in there.boxes]
    ):
        return [
            (array[a.slices], other[b.slices])
            for array, other in zip(mine, theirs)
            for a, b in zip(here.boxes, there.boxes)
        ]
    gathered = MessageBuffer(there, specs, np)  # (laid out as a message of these cells)
    buffers.append(gathered.data)
    blocks: list[Block] = []
    gathered.pack(theirs, blocks, [])
    MessageBuffer(here, specs, np, data=gathered.data).unpack(mine, blocks, [])
    return blocks


class _Slot:
    """What an exchange of one prepared field set in one slot reads and writes, found once:
    the neighbours' records it reads, the flags it waits for (``ready``:
    each neighbour's number, ``readers``: the done flags its readers set for it; with the
    targets they must reach, set per exchange) and the address of those it sets (``done``;
    an address costs a microsecond to find)."""

    def __init__(self, prepared: PreparedShmExchange, slot: int) -> None:
        transport = prepared.transport
        self.records = [transport.record(rank, slot) for rank, _, _ in prepared.reads]
        self.ready = np.zeros((len(self.records), 2), np.int64)
        self.ready[:, 0] = [r[_NUMBER:].ctypes.data for r in self.records]
        self.done = transport.record(transport.rank, slot)[_DONE:].ctypes.data
        self.readers = np.zeros((len(prepared.readers), 2), np.int64)
        self.readers[:, 0] = [
            transport.record(rank, slot)[_DONE + j :].ctypes.data for rank, j in prepared.readers
        ]


class PendingShmExchange:
    """An exchange started: its record published; ``wait`` reads the neighbours' and waits
    for its readers. Also exchange ``number``, published by ``_native.ShmRun`` (and read
    there, if ``read``), taken over where C handed it to Python."""

    def __init__(
        self,
        prepared: PreparedShmExchange,
        arrays: Sequence[Any],
        number: int | None = None,
        read: bool = False,
    ) -> None:
        transport = prepared.transport
        self._prepared = prepared
        published = number is not None
        self._number = number = transport.next_number() if number is None else number
        slot = number % SLOTS
        self._slot = prepared.slot(slot)
        if not published:  # the self copies, then the record
            rec = profiling.recorder
            t = rec.now() if rec else 0.0
            prepared.run.publish(number)
            if rec:
                rec.event("self-copies", t, {"copies": prepared.local.size})
        self._arrays = arrays  # the copies' views do not hold them: alive until finished
        self._problem: str | None = None
        self._read = read
        transport.in_flight[slot] = self
        IN_FLIGHT[self] = None
        UNFINISHED[self] = ()

    def read(self, block: bool) -> bool:
        """Copy from the neighbours (waiting for their records if ``block``, else only if
        they are all there) and flag those reads done in this rank's own record; whether it
        did."""
        if self._read:
            return True
        if self._prepared.run.complete(self._number, block, False) == 0:  # copies bound before
            self._read = True
            return True
        return self._read_checked(block)

    def _read_checked(self, block: bool) -> bool:
        """``read`` in Python: the neighbours' records checked, the copies bound to them."""
        slot, prepared = self._slot, self._prepared
        slot.ready[:, 1] = self._number + 1
        if not _native.flags_reached(slot.ready, 0.0):
            if not block:
                return False
            self._until(slot.ready, "the fields of")
        wrong = [
            f"rank {rank} exchanges {_kind(record, self._number)}"
            for (rank, _, _), record in zip(prepared.reads, slot.records)
            if record[_NUMBER] != self._number + 1 or record[_SIGNATURE] != prepared.signature
        ]
        if not wrong:
            copies = prepared.copies(slot.records)
            if isinstance(copies, str):
                wrong = [copies]
            else:
                _native.run(copies)
        for j in range(MAX_SOURCES if wrong else len(prepared.reads)):
            _native.flag(slot.done + 8 * j, 0, self._number + 1)
        if wrong:
            self._problem = (
                "halos not written: "
                + "; ".join(wrong)
                + f", where this rank exchanges {prepared.kind} (exchange {self._number}): the "
                "ranks exchange different fields, or in another order"
            )
        self._read = True
        return True

    def test(self) -> bool:
        """Whether ``wait`` would return at once: its neighbours' records are there (read
        now) and its readers are done."""
        return self.read(block=False) and self._readers_done()

    def _readers_done(self) -> bool:
        readers = self._slot.readers
        readers[:, 1] = self._number + 1
        return bool(_native.flags_reached(readers, 0.0))

    def wait(self, waiting: Any = None) -> None:
        """Read from the neighbours, then wait until every neighbour has read this rank's
        cells (reading meanwhile for this rank's other exchanges in flight); a
        ``RanksDisagreeError`` if a neighbour's fields were not as expected."""
        transport = self._prepared.transport
        rec = profiling.recorder
        t = rec.now() if rec else 0.0
        try:
            if not self._read:  # all of it in C where it can (a profile records the phases)
                status = 1 if rec else self._prepared.run.complete(self._number, True, True)
                if status == 0:
                    return
                self._read = status == 2 or self._read_checked(block=True)
            if rec:
                t = rec.event("copy", t, {"from ranks": [r for r, _, _ in self._prepared.reads]})
            if not self._readers_done():
                self._until(self._slot.readers, "the reads of its own by")
            if rec:
                rec.event("wait", t, {"readers": [r for r, _ in self._prepared.readers]})
        finally:
            self._arrays = ()
            transport.in_flight.pop(self._number % SLOTS, None)
            IN_FLIGHT.pop(self, None)
            UNFINISHED.pop(self, None)
        if self._problem is not None:
            raise RanksDisagreeError(self._problem)

    def _until(self, pairs: np.ndarray, what: str) -> None:
        """Wait until the flags of ``pairs`` reach their targets; meanwhile read for this
        rank's other exchanges in flight whose neighbours are there, of every exchange
        object (a neighbour may be waiting for those reads before it starts the exchange
        this one waits for, or lets this one's readers go), and say on stderr every
        ``build_once.REPORT_AFTER_S`` that it waits."""
        begin = report = time.monotonic()
        while not _native.flags_reached(pairs, _LOOK_S):
            for pending in list(IN_FLIGHT):
                if pending is not self:
                    pending.read(block=False)
            if time.monotonic() - report >= build_once.REPORT_AFTER_S:
                report = time.monotonic()
                peers = [r for r, _, _ in self._prepared.reads]
                report_wait(
                    self._prepared.transport.rank,
                    report - begin,
                    f"exchange {self._number} ({what} its neighbours)",
                    self._prepared.kind,
                    peers,
                )


def _kind(record: np.ndarray, number: int) -> str:
    """What a neighbour's record says it exchanges, where it differs."""
    if record[_NUMBER] != number + 1:
        return f"as its exchange {int(record[_NUMBER]) - 1}"
    return f"{int(record[_COUNT])} field(s) of another kind (dtypes, levels or dim)"
