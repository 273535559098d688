"""The raw MPI transport: mpi4py persistent requests over preallocated message buffers.

For each (plan, field signature, exchange slot) a ``MessageSet`` is built once: one send and
one receive buffer per neighbour, sized and laid out by the plan, and one persistent
``MPI_Send_init`` / ``MPI_Recv_init`` request per message. An exchange then only starts the
receives, packs, starts the sends, waits and unpacks: no allocation, no request setup.

CuPy fields are packed on the device. The PyPI MPICH is not CUDA-aware, so unless
``MPIX_Query_cuda_support`` says otherwise, messages are staged through host buffers that are
allocated once, like the device buffers.
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from mpi4py import MPI

from gt4py_halo import profiling
from gt4py_halo.decomposition.plan import ExchangePlan, FieldSpec, signature
from gt4py_halo.errors import RanksDisagreeError
from gt4py_halo.runtime.packing import Bound, MessageBuffer, Messages, MessageSets, Slots


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


class MessageSet:
    """Persistent requests over the buffers of exchanging one field signature with a plan
    (``Messages``): one per neighbour rank each way."""

    def __init__(
        self,
        comm: MPI.Comm,
        plan: ExchangePlan,
        specs: Sequence[FieldSpec],
        tag: int,
        xp: ModuleType,
    ) -> None:
        staged = xp is not np and not _cuda_aware()
        self._signature = signature(specs)
        self._messages = Messages(plan, specs, xp, self._signature)
        self._staged = staged
        self._send_wires = [_Wire(buffer, staged) for _, buffer in self._messages.sends]
        self._recv_wires = [_Wire(buffer, staged) for _, buffer in self._messages.recvs]
        self._send_requests = [
            comm.Send_init(wire.memory, peer, tag)
            for (peer, _), wire in zip(self._messages.sends, self._send_wires)
        ]
        self._recv_requests = [
            comm.Recv_init(wire.memory, peer, tag)
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
        # what a profile records of the messages (profiling.py): made once, with the buffers
        self._sent = _traffic("sends", self._messages.sends)
        self._received = _traffic("receives", self._messages.recvs)
        self._statuses = [MPI.Status() for _ in self._recv_requests]
        self._unpack: list = []  # the copies of the exchange in flight
        # a persistent request holds its communicator: freed with the message set, or the
        # decomposition's communicator is never released
        weakref.finalize(self, _free_requests, self._send_requests + self._recv_requests)

    def start(self, arrays: Sequence[Any], kept: dict[MessageSet, Bound]) -> None:
        """Post the exchange of ``arrays``; ``kept``: the copies bound to these arrays, by
        message set, of the caller's (a prepared exchange: one field set)."""
        rec = profiling.recorder
        t = rec.now() if rec else 0.0
        bound = kept.get(self)
        if bound is None:
            bound, unowned = self._messages.bind(arrays)
            if unowned:  # no reference to the fields: kept while the caller is
                kept[self] = bound
        pack, self._unpack, local = bound
        MPI.Prequest.Startall(self._recv_requests)
        if rec:
            t = rec.event("post", t, self._received)
        for copy in pack:
            copy()
        if self._staged:
            for wire in self._send_wires:
                wire.to_wire()
        if rec:
            t = rec.event("pack", t, self._sent)
        MPI.Prequest.Startall(self._send_requests)
        if rec:
            t = rec.event("post", t, self._sent)
        for copy in local:
            copy()
        if rec:
            rec.event("self-copies", t, {"copies": len(local)})

    def test(self) -> bool:
        return MPI.Request.Testall(self._recv_requests + self._send_requests)

    def finish(self) -> None:
        """Wait, then unpack; unless a message's size or signature is not what this rank's
        fields need (the ranks exchange fields of different dtypes or levels): then nothing
        is unpacked and a ``RanksDisagreeError`` names the senders."""
        rec = profiling.recorder
        t = rec.now() if rec else 0.0
        truncated = False
        try:
            MPI.Request.Waitall(self._recv_requests, self._statuses)
        except MPI.Exception:  # a longer message: MPI truncated it and says so in its status
            truncated = True
            for request, status in zip(self._recv_requests, self._statuses):
                if status.Get_error() == MPI.ERR_PENDING:
                    try:
                        request.Wait(status)
                        status.Set_error(MPI.SUCCESS)
                    except MPI.Exception as error:
                        status.Set_error(error.Get_error_code())
        wrong = []
        if truncated or not self._as_expected():
            wrong = [
                problem
                for peer, status, wire, trailer in zip(
                    self._peers, self._statuses, self._recv_wires, self._trailers
                )
                if (problem := self._problem(peer, status, wire.memory, trailer, truncated))
            ]
        unpack, self._unpack = self._unpack, ()  # copies over CuPy fields hold them
        if rec:
            t = rec.event("wait", t, self._received)
        if not wrong:
            if self._staged:
                for wire in self._recv_wires:
                    wire.from_wire()
            for copy in unpack:
                copy()
        if rec:
            t = rec.event("unpack", t, self._received)
        MPI.Request.Waitall(self._send_requests)
        if rec:
            rec.event("wait", t, self._sent)
        if wrong:
            raise RanksDisagreeError(
                "halos not written: "
                + "; ".join(wrong)
                + ": the ranks exchange fields of different dtypes or levels in this call"
            )

    def _as_expected(self) -> bool:
        """Whether every message received has the size and signature expected: the usual
        case, tested at the least cost per message."""
        byte, signature = MPI.BYTE, self._signature_value
        for status, wire, trailer in zip(self._statuses, self._recv_wires, self._trailers):
            if status.Get_count(byte) != wire.memory.nbytes:
                return False
            if trailer is not None and trailer.value != signature:
                return False
        return True

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
        signature of the fields it holds."""
        if truncated and status.Get_error() != MPI.SUCCESS:
            return f"rank {peer} sent more bytes than {memory.nbytes} expected"
        if status.Get_count(MPI.BYTE) != memory.nbytes:
            return f"rank {peer} sent {status.Get_count(MPI.BYTE)} bytes, {memory.nbytes} expected"
        if trailer is not None and trailer.value != self._signature_value:
            return f"rank {peer} sent the bytes expected, but of fields of other dtypes or levels"
        return None


class MpiTransport:
    """Moves halos with MPI point-to-point messages, one per neighbour and exchange."""

    #: Each message carries its fields' signature, checked where it is received (``MessageSet``).
    checks_each_message = True

    def __init__(self, comm: MPI.Comm) -> None:
        self._comm = comm
        self._sets = MessageSets()

    @classmethod
    def for_decomposition(cls, decomposition: Any) -> MpiTransport:
        return cls(decomposition.comm)

    def prepare(
        self, plan: ExchangePlan, arrays: Sequence[Any], specs: tuple[FieldSpec, ...]
    ) -> PreparedMpiExchange:
        return PreparedMpiExchange(self._comm, self._sets, plan, specs, _array_module(arrays[0]))


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
    ) -> None:
        self._slots = sets.slots(plan, specs, xp.__name__)
        self._make = lambda slot: MessageSet(comm, plan, specs, plan.message_tag(slot), xp)
        # per message set, the copies bound to this exchange's fields (kept with it: the
        # exchange keeps a prepared exchange per field set, dropped with the fields)
        self._bound: dict[MessageSet, Bound] = {}

    def start(self, arrays: Sequence[Any]) -> PendingMpiExchange:
        messages, slot = self._slots.start(self._make, arrays, self._bound)
        return PendingMpiExchange(messages, self._slots, slot, arrays)


class PendingMpiExchange:
    """An MPI exchange in flight; ``finish`` unpacks, and releases its tag slot and fields."""

    __slots__ = ("_arrays", "_messages", "_slot", "_slots")

    def __init__(
        self, messages: MessageSet, slots: Slots, slot: int, arrays: Sequence[Any]
    ) -> None:
        self._messages = messages
        self._slots, self._slot = slots, slot
        self._arrays = arrays  # the copies' views do not hold them: alive until unpacked

    def test(self) -> bool:
        return self._messages.test()

    def wait(self) -> None:
        try:
            self._messages.finish()
        finally:
            self._slots.release(self._slot)
            self._arrays = ()


def _traffic(kind: str, messages: Sequence[tuple[int, MessageBuffer]]) -> dict:
    """A phase's messages, as a profile records them."""
    return {kind: {f"rank {peer}": f"{buffer.nbytes} B" for peer, buffer in messages}}


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
