"""The raw MPI transport: mpi4py persistent requests over preallocated message buffers.

For each (plan, field signature, exchange slot) a ``MessageSet`` is built once: one send and
one receive buffer per neighbour, sized and laid out by the plan, and one persistent
``MPI_Send_init`` / ``MPI_Recv_init`` request per message. An exchange then only starts the
receives, packs, starts the sends, waits and unpacks: no allocation, no request setup.

Where axes wrap onto the rank (periodic, not split), the exchange first fills their halos
from the rank's own cells, then sends faces widened across them (the plan's ``wrapped``
messages): whole planes, edges and corners in them, no edge messages.

Boxes of host fields whose runs are long (a face across the outermost cut axis of C-ordered
fields: ``packing.in_place_boxes``) are not packed: each run is a message of its own, from
the sender's field into the receiver's halo where each side's layout makes it contiguous
(``RunMessages``), started with the exchange on a tag of the exchange's own and waited for
once its buffers' messages were checked. Each buffer says how many runs its sender sends
beside it, so that ranks that disagree on the fields receive every run sent before they
raise, and none is left to match a later exchange.

CuPy fields are packed on the device. The PyPI MPICH is not CUDA-aware, so unless
``MPIX_Query_cuda_support`` says otherwise, messages are staged through host buffers that are
allocated once, like the device buffers.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from mpi4py import MPI

from gt4py_halo import _native, build_once, profiling
from gt4py_halo.decomposition.plan import ExchangePlan, FieldSpec, signature
from gt4py_halo.errors import BackendUnavailableError, RanksDisagreeError
from gt4py_halo.runtime.agreement import described, report_wait
from gt4py_halo.runtime.in_flight import UNFINISHED
from gt4py_halo.runtime.packing import (
    RUN_COUNT_BYTES,
    Bound,
    BoundRuns,
    MessageBuffer,
    Messages,
    MessageSets,
)


class _Wire:
    """The memory MPI reads or writes for one message: the buffer itself, or (``staged``) a
    host mirror, which ``to_wire`` and ``from_wire`` copy."""

    def __init__(self, buffer: MessageBuffer, staged: bool) -> None:
        self.buffer = buffer
        self.memory = np.empty(buffer.nbytes, np.uint8) if staged else buffer.data

    def to_wire(self) -> None:
        self.buffer.data.get(out=self.memory)  # synchronizes with the packing stream

    def from_wire(self) -> None:
        self.buffer.data.set(self.memory)


#: The tag of every message, on the decomposition's own communicator: messages between two
#: ranks match in the order their exchanges were started (of any dim), the same on every
#: rank whichever finishes first. Ranks that start exchanges of different dims, or skip one,
#: receive messages whose trailers (the fields' signature with the dim) differ from their
#: own: a ``RanksDisagreeError`` on every rank that receives one, where per-dim tags would
#: leave them waiting for messages that never come.
TAG = 0


class RunMessages:
    """The messages of the runs of one field set's exchange (``Messages.bind_runs``), one per
    run, straight between the fields where their layouts allow: started with the exchange (a
    run's send does not wait for its receiver's finish, which may come after other calls),
    finished after its buffers' messages were found as expected.

    They go on a tag of the exchange's own, from its number (``MessageSet.tag``), not on
    ``TAG``: where ranks disagree on the fields, each drains the others' runs (``abandon`` and
    ``MessageSet._drain``) while another exchange may already be in flight, whose messages
    must not match the receives left of this one."""

    def __init__(self, comm: MPI.Comm, runs: list[BoundRuns], messages: MessageSet) -> None:
        self._comm = comm
        self._runs = runs
        self._set = messages  # (it references its runs only while they are in flight)
        self._receives: list[tuple[int, np.ndarray, MPI.Request]] = []
        self._sends: list[MPI.Request] = []
        #: the receives' statuses, where ``test`` completed them
        self._arrived: list[MPI.Status] | None = None

    def start(self) -> None:
        tag = self._set.tag()
        comm = self._comm
        self._set.runs_in_flight = self
        self._receives = [
            (r.rank, memory, comm.Irecv(memory, r.rank, tag))
            for r in self._runs
            for memory in r.recvs
        ]
        for r in self._runs:
            for copy in r.pack:
                copy()
            self._sends.extend(comm.Isend(memory, r.rank, tag) for memory in r.sends)

    def test(self) -> bool:
        """Whether every run has arrived and been sent (the exchange's buffers arrived as
        expected); the receives' statuses kept for ``finish``."""
        if self._arrived is None:
            statuses = [MPI.Status() for _ in self._receives]
            if not MPI.Request.Testall([request for _, _, request in self._receives], statuses):
                return False
            self._arrived = statuses
        return MPI.Request.Testall(self._sends)

    def finish(self) -> None:
        """Wait for the runs (the exchange's buffers arrived as expected: the sender's runs
        are those this rank receives), unpack those received into buffers of their own."""
        receives, self._receives = self._receives, []
        statuses, self._arrived = self._arrived, None
        if statuses is None:
            statuses = [MPI.Status() for _ in receives]
            MPI.Request.Waitall([request for _, _, request in receives], statuses)
        self._set.runs_in_flight = None
        wrong = [
            f"rank {rank} sent {status.Get_count(MPI.BYTE)} bytes of a run, {memory.nbytes} "
            "expected"
            for (rank, memory, _), status in zip(receives, statuses)
            if status.Get_count(MPI.BYTE) != memory.nbytes
        ]
        if wrong:
            self.wait_sends()
            raise RanksDisagreeError("halos not written: " + "; ".join(wrong))
        for r in self._runs:
            for copy in r.unpack:
                copy()
        self.wait_sends()

    def abandon(self) -> dict[int, int]:
        """Cancel the receives not matched yet, after the exchange's buffers were found not as
        expected; per sender, how many of its runs were received."""
        receives, self._receives = self._receives, []
        got: dict[int, int] = {}
        for rank, _, request in receives:
            if self._arrived is None:  # (else ``test`` completed every receive)
                request.Cancel()
                status = MPI.Status()
                request.Wait(status)
                if status.Is_cancelled():
                    continue
            got[rank] = got.get(rank, 0) + 1
        self._arrived = None
        return got

    def wait_sends(self) -> None:
        sends, self._sends = self._sends, []
        MPI.Request.Waitall(sends)


class MessageSet:
    """Persistent requests over the buffers of exchanging one field signature with a plan
    (``Messages``): one per neighbour rank each way, on ``TAG``; of one slot (``Slots``: the
    buffers of one exchange in flight). A field set's runs in place (``RunMessages``) start
    with the local copies and finish first among the unpacking copies, bound with them. While
    an exchange is in flight it is that exchange's pending handle (``test``, ``wait``),
    holding its fields and slot until ``wait``.

    An exchange's phases run in C (``_native.Persistent``): starting the receives, packing,
    starting the sends and the copies to this rank's own halo in one call (those copies
    before the packing where axes wrap onto the rank: the messages carry the halos they fill,
    ``Messages(wrapped=True)``); waiting for the receives, checking what arrived and
    unpacking in another; on a small halo the Python calls around MPI cost more than the
    messages. mpi4py's requests share their handles: they test, free, and diagnose a message
    that was not as expected."""

    def __init__(
        self,
        comm: MPI.Comm,
        plan: ExchangePlan,
        specs: Sequence[FieldSpec],
        xp: ModuleType,
        release: Callable[[], Any],
        starts: np.ndarray,
    ) -> None:
        staged = xp is not np and not _cuda_aware()
        self._release = release  # frees its slot
        self._comm = comm
        self._signature = signature(specs, plan.name)  # (the trailer: the dim included)
        self._messages = Messages(plan, specs, xp, self._signature, runs=True, wrapped=True)
        #: the runs of the exchange in flight on this set, if it has any (``RunMessages``)
        self.runs_in_flight: RunMessages | None = None
        self._tags = comm.Get_attr(MPI.TAG_UB) - TAG  # the tags of runs: TAG + 1 on
        self._send_wires = [_Wire(buffer, staged) for _, buffer in self._messages.sends]
        self._recv_wires = [_Wire(buffer, staged) for _, buffer in self._messages.recvs]
        # the copies to and from host mirrors of device buffers, after packing, before unpacking
        self._staging = (
            ([w.to_wire for w in self._send_wires], [w.from_wire for w in self._recv_wires])
            if staged
            else None
        )
        self._send_requests = [
            comm.Send_init(wire.memory, peer, TAG)
            for (peer, _), wire in zip(self._messages.sends, self._send_wires)
        ]
        self._recv_requests = [
            comm.Recv_init(wire.memory, peer, TAG)
            for (peer, _), wire in zip(self._messages.recvs, self._recv_wires)
        ]
        self._peers = [peer for peer, _ in self._messages.recvs]  # whose message each receive is
        # where each received message's signature lands, if in host memory (checked there)
        self._signature_value = int.from_bytes(self._signature, sys.byteorder)
        self._trailers = [
            ctypes.c_uint64.from_buffer(wire.memory, wire.memory.nbytes - len(self._signature))
            if isinstance(wire.memory, np.ndarray)
            else None
            for wire in self._recv_wires
        ]
        self._requests = _native.Persistent(
            *_mpi(),
            MPI.Exception,
            _handles(self._recv_requests),
            _handles(self._send_requests),
            np.array([wire.memory.nbytes for wire in self._recv_wires], np.int64).tobytes(),
            np.array(
                [0 if t is None else ctypes.addressof(t) for t in self._trailers], np.uintp
            ).tobytes(),
            self._signature_value,
            starts,
        )
        # what a profile records of the messages (profiling.py): made once, with the buffers
        self._sent = _traffic("sends", self._messages.sends)
        self._received = _traffic("receives", self._messages.recvs)
        self._runs = {
            "runs": {
                f"rank {rank}": f"{len(sent)} + {len(got)} boxes"
                for rank, sent, got in self._messages.runs
            }
        }
        self._unpack: list = []  # the copies of the exchange in flight
        self._self_copies = 0  # how many copies to itself lead the packing (``bind``)
        #: the receives' statuses and whether one was truncated, if ``test`` completed them
        self._arrived: tuple[list[MPI.Status], bool] | None = None
        self._arrays: Sequence[Any] = ()  # its fields: the copies' views do not hold them
        # a persistent request holds its communicator: freed with the message set, or the
        # decomposition's communicator is never released. Not at exit: an exchange still in
        # flight is waited for then (``in_flight``), maybe after Python's finalizers ran
        requests = self._send_requests + self._recv_requests
        weakref.finalize(self, _free_requests, requests).atexit = False
        self._awaited = (comm.Get_rank(), described(plan.name, tuple(specs)))  # a long wait's
        LONG_WAITS.watch(self)

    def waits(self) -> int:
        """Twice the waits for its messages begun, plus one while one lasts (``LongWaits``)."""
        return self._requests.waits()

    def report_long_wait(self, seconds: float) -> None:
        rank, kind = self._awaited
        report_wait(rank, seconds, "an exchange", kind, self._peers)

    def exchange(self, arrays: Sequence[Any], kept: dict[MessageSet, Bound]) -> None:
        """``start`` and ``wait`` in one call into C, where nothing is profiled (the
        profiled phases are ``start`` and ``wait``'s); the caller holds the slot meanwhile."""
        pack, unpack, local = self.bind(arrays, kept)
        code = self._requests.exchange(pack, local, unpack)  # (and the sends waited for, if 0)
        if code:
            self._not_as_expected(code)

    def slot_run(
        self,
        busy: set[int],
        slot: int,
        pack: list,
        local: list,
        unpack: list,
        elsewhere: Callable[[Sequence[Any], None], None],
    ) -> _native.SlotRun:
        """``exchange`` over these bound copies as one C call, on ``slot`` (this set's)
        while it is free (``_native.SlotRun``)."""
        return _native.SlotRun(
            busy, slot, self._requests, pack, local, unpack, elsewhere, self._not_as_expected
        )

    def bind(self, arrays: Sequence[Any], kept: dict[MessageSet, Bound]) -> Bound:
        """The copies of exchanging ``arrays``: from ``kept`` (the caller's, by message set:
        a prepared exchange, one field set), or bound now and kept there where they hold no
        reference to the arrays."""
        bound = kept.get(self)
        if bound is None:
            bound, unowned = self._messages.bind(arrays)
            if self._messages.self_first:  # the messages carry halos these copies fill
                self._self_copies = len(bound[2])  # (as many for every binding)
                bound = (bound[2] + bound[0], bound[1], [])
            if self._messages.runs:
                runs = RunMessages(self._comm, self._messages.bind_runs(arrays), self)
                bound = (bound[0], [runs.finish, *bound[1]], [runs.start, *bound[2]])
            if self._staging is not None:
                to_wire, from_wire = self._staging
                bound = (bound[0] + to_wire, from_wire + bound[1], bound[2])
            if unowned:
                kept[self] = bound
        return bound

    def start(self, arrays: Sequence[Any], kept: dict[MessageSet, Bound]) -> None:
        """Post the exchange of ``arrays``; ``kept``: as ``bind`` takes it."""
        pack, unpack, local = self.bind(arrays, kept)
        rec = profiling.recorder
        if not rec:
            self._requests.start(pack, local)
            self._unpack, self._arrays = unpack, arrays  # (where started: its slot is taken)
            UNFINISHED[self] = ()  # MPI writes into its buffers until it is waited for
            return
        t = rec.now()
        self._requests.post_receives()
        t = rec.event("post", t, self._received)
        if self._messages.self_first:  # (``bind`` put them before the packing)
            first, pack = pack[: self._self_copies], pack[self._self_copies :]
            for copy in first:
                copy()
            t = rec.event("self-copies", t, {"copies": len(first)})
        for copy in pack:
            copy()
        t = rec.event("pack", t, self._sent)
        self._requests.post_sends()
        t = rec.event("post", t, self._sent)
        if self._messages.runs:  # (``bind`` put the runs' start first)
            local[0]()
            t = rec.event("post", t, self._runs)
            local = local[1:]
        if not self._messages.self_first:
            for copy in local:
                copy()
            rec.event("self-copies", t, {"copies": len(local)})
        self._unpack, self._arrays = unpack, arrays
        UNFINISHED[self] = ()

    def tag(self) -> int:
        """The tag of the runs of the exchange on this set (its number, the transport's count
        of starts when it started: alike on every rank)."""
        return TAG + 1 + self._requests.started() % self._tags

    def test(self) -> bool:
        """Whether every message is complete, runs in place included. The receives complete
        together, and their statuses are kept for ``wait``, which checks them (a completed
        persistent request has none left for a wait after it; MPICH's
        ``MPI_Request_get_status``, which completes nothing, loses them too)."""
        if self._arrived is None:
            statuses = [MPI.Status() for _ in self._recv_requests]
            try:
                if not MPI.Request.Testall(self._recv_requests, statuses):
                    return False
                self._arrived = (statuses, False)
            except MPI.Exception:  # a message longer than expected: complete the others
                for request, status in zip(self._recv_requests, statuses):
                    _complete(request, status)
                self._arrived = (statuses, True)
        if not MPI.Request.Testall(self._send_requests):
            return False
        # the runs, unless the buffers say the ranks disagree (the finish raises then)
        runs = self.runs_in_flight
        return runs is None or bool(self._wrong(*self._arrived)) or runs.test()

    def wait(self) -> None:
        """Wait, then unpack; unless a message's size or signature is not what this rank's
        fields need (the ranks exchange fields of different dtypes or levels): then nothing
        is unpacked (runs received in place are where they landed, every run sent drained)
        and a ``RanksDisagreeError`` names the senders. Either way the set is free for the
        next exchange after."""
        unpack, self._unpack = self._unpack, []  # copies over CuPy fields hold them
        arrived, self._arrived = self._arrived, None
        rec = profiling.recorder
        try:
            if arrived is not None:  # the receives completed by ``test``
                self._raise_if_wrong(*arrived)
                for copy in unpack:
                    copy()
                MPI.Request.Waitall(self._send_requests)
                return
            if not rec:
                code = self._requests.finish(unpack)  # (and the sends waited for, if 0)
                if code:
                    self._not_as_expected(code)
                return
            t = rec.now()
            code = self._requests.wait_receives()
            t = rec.event("wait", t, self._received)
            if code:
                self._not_as_expected(code)
            if self._messages.runs:  # (``bind`` put the runs' finish first)
                unpack[0]()
                t = rec.event("wait", t, self._runs)
                unpack = unpack[1:]
            for copy in unpack:
                copy()
            t = rec.event("unpack", t, self._received)
            self._requests.wait_sends()
            rec.event("wait", t, self._sent)
        finally:
            self._arrays = ()
            UNFINISHED.pop(self, None)
            self._release()

    def _not_as_expected(self, code: int) -> None:
        """Raise for the messages received not as expected (``code``: MPI's error code, a
        longer message truncated; -1: another size or signature), once every request is
        complete."""
        statuses = []
        for i, request in enumerate(self._recv_requests):
            status = MPI.Status()
            ctypes.memmove(MPI._addressof(status), self._requests.status(i), MPI._sizeof(status))
            if code > 0:
                _complete(request, status)
            statuses.append(status)
        MPI.Request.Waitall(self._send_requests)
        self._raise_if_wrong(statuses, code > 0)
        self._drain(statuses)
        raise MPI.Exception(code)

    def _drain(self, statuses: list[MPI.Status]) -> None:
        """After this exchange's buffers arrived not as expected (the ranks disagree on the
        fields, and so on their runs): its runs' receives cancelled where not matched, and
        every run each neighbour sent (as its buffer says) received, into scratch memory where
        not matched before, so that no run is left to match a later receive and every rank's
        sends of runs complete; then its own sends waited for (their receivers drain them
        alike)."""
        runs, self.runs_in_flight = self.runs_in_flight, None
        got = runs.abandon() if runs is not None else {}
        tag = self.tag()
        for peer, status, wire in zip(self._peers, statuses, self._recv_wires):
            for _ in range(_runs_announced(status, wire.memory) - got.get(peer, 0)):
                probed = MPI.Status()
                message = self._comm.Mprobe(peer, tag, probed)
                message.Recv(np.empty(probed.Get_count(MPI.BYTE), np.uint8))
        if runs is not None:
            runs.wait_sends()

    def _wrong(self, statuses: list[MPI.Status], truncated: bool) -> list[str]:
        """What is wrong with the messages received, if anything (``_problem``)."""
        return [
            problem
            for peer, status, wire, trailer in zip(
                self._peers, statuses, self._recv_wires, self._trailers
            )
            if (problem := self._problem(peer, status, wire.memory, trailer, truncated))
        ]

    def _raise_if_wrong(self, statuses: list[MPI.Status], truncated: bool) -> None:
        """``RanksDisagreeError`` naming the messages received not as expected, if any, once
        the exchange's runs are drained (``_drain``)."""
        wrong = self._wrong(statuses, truncated)
        if wrong:
            self._drain(statuses)
            raise RanksDisagreeError(
                "halos not written: "
                + "; ".join(wrong)
                + ": the ranks exchange different numbers of fields, or fields of different "
                "dtypes, levels or dims, in this call"
            )

    def _problem(
        self,
        peer: int,
        status: MPI.Status,
        memory: Any,
        trailer: ctypes.c_uint64 | None,
        truncated: bool,
    ) -> str | None:
        """What is wrong with the message received from ``peer`` into ``memory``, if
        anything: longer (``truncated``: MPI said so for some message), another size, or
        (where the message is in host memory: ``trailer``, its last 8 bytes) another
        signature of the fields it holds and their dim."""
        if truncated and status.Get_error() != MPI.SUCCESS:
            return f"rank {peer} sent more bytes than {memory.nbytes} expected"
        if status.Get_count(MPI.BYTE) != memory.nbytes:
            return f"rank {peer} sent {status.Get_count(MPI.BYTE)} bytes, {memory.nbytes} expected"
        if trailer is not None and trailer.value != self._signature_value:
            return (
                f"rank {peer} sent the bytes expected, but of fields of other dtypes or levels, "
                "or of another dim"
            )
        return None


def _runs_announced(status: MPI.Status, memory: Any) -> int:
    """How many runs the sender of the message received into ``memory`` (``status``) sent
    beside it: its first ``RUN_COUNT_BYTES``, there where that many arrived (MPICH fills a
    receive from a longer message too)."""
    if status.Get_count(MPI.BYTE) < RUN_COUNT_BYTES:
        return 0
    first = memory[:RUN_COUNT_BYTES]
    if not isinstance(first, np.ndarray):  # a CUDA-aware MPI's receive in device memory
        first = first.get()
    return int.from_bytes(first.tobytes(), sys.byteorder, signed=True)


def _complete(request: MPI.Request, status: MPI.Status) -> None:
    """After a wait or test of several requests failed (a truncated message): ``request``
    completed, if MPI left it pending, with its error in ``status``."""
    if status.Get_error() == MPI.ERR_PENDING:
        try:
            request.Wait(status)
            status.Set_error(MPI.SUCCESS)
        except MPI.Exception as error:
            status.Set_error(error.Get_error_code())


class MpiTransport:
    """Moves halos with MPI point-to-point messages, one per neighbour and exchange."""

    #: Each message carries its fields' signature, checked where it is received (``MessageSet``):
    #: its prepared exchanges also ``exchange(arrays)`` in one call, start to end.
    checks_each_message = True

    def __init__(self, comm: MPI.Comm) -> None:
        problems = comm.allgather(_unusable())
        if any(problems):
            raise BackendUnavailableError(
                "the 'mpi' backend cannot run here: "
                + "; ".join(f"rank {r}: {p}" for r, p in enumerate(problems) if p)
            )
        self._comm = comm
        self._sets = MessageSets()
        self._starts = np.zeros(1, np.int64)  # the count of its exchanges' starts

    @classmethod
    def for_decomposition(cls, decomposition: Any) -> MpiTransport:
        return cls(decomposition.comm)

    def prepare(
        self, plan: ExchangePlan, arrays: Sequence[Any], specs: tuple[FieldSpec, ...]
    ) -> PreparedMpiExchange:
        xp = _array_module(arrays[0])
        return PreparedMpiExchange(self._comm, self._sets, plan, specs, xp, self._starts)


class PreparedMpiExchange:
    """Exchanging fields of one signature and array library with one plan: each ``start``
    takes the message set of a free slot (made at its first use)."""

    #: It references no field: the exchange keeps it for the same field objects.
    reusable = True

    def __init__(
        self,
        comm: MPI.Comm,
        sets: MessageSets,
        plan: ExchangePlan,
        specs: tuple[FieldSpec, ...],
        xp: ModuleType,
        starts: np.ndarray,
    ) -> None:
        self._slots = sets.slots(plan, specs, xp.__name__)
        slots = self._slots  # (the sets it makes reference no prepared exchange: no cycle)
        self._make = lambda slot: MessageSet(comm, plan, specs, xp, slots.releaser(slot), starts)
        # per message set, the copies bound to this exchange's fields (kept with it: the
        # exchange keeps a prepared exchange per field set, dropped with the fields)
        self._bound: dict[MessageSet, Bound] = {}

    def start(self, arrays: Sequence[Any]) -> MessageSet:
        return self._slots.start(self._make, arrays, self._bound)[0]

    def exchange(self, arrays: Sequence[Any], waiting: None) -> None:
        """Exchange now, in one call into C. ``waiting`` is ``None``: the messages check
        themselves, no wait is watched for a disagreement."""
        self._slots.exchange(self._make, arrays, self._bound)

    def kept(self, arrays: Sequence[Any]) -> Callable[[Sequence[Any], None], None]:
        """What a kept call of ``arrays`` runs (``_native.ExchangeAgain``): ``exchange``, or,
        where the copies bound to them hold no reference to them (host arrays), the message
        set of the first slot with those copies, called from C (``_native.SlotRun``; on
        another slot while that one is busy)."""
        slot = 0
        messages = self._slots.of(slot, self._make)
        bound = messages.bind(arrays, self._bound)
        if messages not in self._bound:
            return self.exchange
        pack, unpack, local = bound
        return messages.slot_run(self._slots.busy, slot, pack, local, unpack, self.exchange)


def _traffic(kind: str, messages: Sequence[tuple[int, MessageBuffer]]) -> dict:
    """A phase's messages, as a profile records them."""
    return {kind: {f"rank {peer}": f"{buffer.nbytes} B" for peer, buffer in messages}}


@functools.cache
def _mpi() -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """What ``_native.Persistent`` calls: the addresses of ``MPI_Startall``, ``MPI_Waitall``
    and ``MPI_Get_count`` in the MPI library mpi4py loaded, the sizes of its request, status
    and datatype handles, and ``MPI_BYTE``'s handle."""
    library = ctypes.CDLL(MPI.__file__)  # loaded already: its symbols and its MPI's
    functions = ("MPI_Startall", "MPI_Waitall", "MPI_Get_count")
    addresses = [ctypes.cast(getattr(library, f), ctypes.c_void_p).value for f in functions]
    sizes = (MPI._sizeof(MPI.Request), MPI._sizeof(MPI.Status), MPI._sizeof(MPI.Datatype))
    return (addresses[0], addresses[1], addresses[2]), sizes, MPI._handleof(MPI.BYTE)


def _unusable() -> str | None:
    """Why ``_native.Persistent`` cannot call this process's MPI, or ``None``."""
    try:
        _mpi()
    except (OSError, AttributeError) as error:
        return f"MPI's functions not found through mpi4py ({MPI.__file__}): {error}"
    return None


def _handles(requests: Sequence[MPI.Request]) -> bytes:
    """The requests' handles, contiguous as ``MPI_Startall`` takes them."""
    size = MPI._sizeof(MPI.Request)
    mask = (1 << 8 * size) - 1
    return b"".join((MPI._handleof(r) & mask).to_bytes(size, sys.byteorder) for r in requests)


class LongWaits:
    """Says on stderr, every ``build_once.REPORT_AFTER_S``, which exchange's messages a wait
    has waited for that long, from which ranks: a rank that skipped a call of the same fields
    and then stopped (or, in a compiled step, took a branch or a loop trip the others did
    not) leaves the others waiting in one call into C (``_native.Persistent``, a compiled
    step), which no Python runs during. A thread of its own (started with the first watched
    object) looks at each one's wait counter (``waits()``: odd while a wait lasts) at most
    once a second; the waits themselves only count. Watched: message sets, and the loaded
    compiled steps with MPI exchanges (``StepWaits``)."""

    def __init__(self) -> None:
        self._sets: list[weakref.ref] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def watch(self, messages: MessageSet | StepWaits) -> None:
        self._sets.append(weakref.ref(messages, self._sets.remove))
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="gt4py_halo: long waits", daemon=True
            )
            self._thread.start()
            # ended at the interpreter's exit, before its finalization: a daemon thread
            # running Python there crashed the process (CPython 3.12.1, at address 0x60)
            atexit.register(self._end)

    def _run(self) -> None:
        seen: dict[weakref.ref, tuple[int, float, float]] = {}
        while True:
            period = min(1.0, build_once.REPORT_AFTER_S / 2)
            if self._stop.wait(period):
                return
            seen = self._look(seen, period)

    def _end(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _look(self, seen: dict[weakref.ref, tuple[int, float, float]], period: float) -> dict:
        """Report the waits that lasted; per object waiting now (by its weak reference: an
        object made after one died may have its ``id``): its wait counter, since when that
        wait lasts (a wait first seen began up to a ``period`` before), when it was last
        reported."""
        now, looked = time.monotonic(), {}
        for ref in list(self._sets):  # (a copy: the main thread appends and removes)
            messages = ref()
            if messages is None:
                continue
            waits = messages.waits()
            if waits % 2 == 0:
                continue
            last, since, reported = seen.get(ref, (waits, now - period, now))
            if last != waits:
                since, reported = now - period, now
            if now - reported >= build_once.REPORT_AFTER_S:
                reported = now
                messages.report_long_wait(now - since)
            looked[ref] = (waits, since, reported)
        return looked


LONG_WAITS = LongWaits()


class StepWaits:
    """The waits of a loaded compiled step's MPI exchanges (``include/gt4py_halo_mpi.hpp``:
    one counter per library), watched by ``LONG_WAITS`` while it lives."""

    def __init__(
        self, counter: Callable[[], int], library: Any, step: str, rank: int, kinds: list[str]
    ):
        """``counter``: the ``gt4py_halo_mpi_waits`` of ``library`` (the loaded step, held:
        the thread may call it while the step is dropped); ``kinds``: its exchanges' plans
        (their names). The thread calls it holding the GIL (ctypes would release it), so that
        no Python, which unloads libraries at the interpreter's exit, runs meanwhile: a
        daemon thread inside the call would be left in unmapped code."""
        address = ctypes.cast(counter, ctypes.c_void_p).value
        self._counter = ctypes.PYFUNCTYPE(ctypes.c_ulong)(address)
        self._library, self._step = library, step
        self._rank, self._kinds = rank, kinds
        LONG_WAITS.watch(self)

    def waits(self) -> int:
        return self._counter()

    def report_long_wait(self, seconds: float) -> None:
        which = f"an exchange of compiled step {self._step!r}"
        kind = ", ".join(self._kinds) + " (each rank must run its exchanges alike: the same "
        kind += "branches, the same loop trips)"
        report_wait(self._rank, seconds, which, kind, ())


def _free_requests(requests: list[MPI.Prequest]) -> None:
    if not MPI.Is_finalized():
        for request in requests:
            request.Free()


def _array_module(array: Any) -> ModuleType:
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy


def _cuda_aware() -> bool:
    query = getattr(MPI, "Query_cuda_support", None)
    return bool(query and query())
