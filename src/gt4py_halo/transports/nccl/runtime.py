"""The NCCL transport's runtime mover: CuPy fields, NCCL on CuPy's current stream.

For each (plan, field signature, exchange in flight) the message buffers are built once on
the device (``Messages``). An exchange packs them with CuPy kernels, posts one ``ncclRecv``
and one ``ncclSend`` per neighbour rank in one NCCL group, copies this rank's own periodic
halos, and returns; ``finish`` enqueues the unpacking. Everything goes on the stream that is
CuPy's current one at ``start``, in order: nothing waits on the host, and work enqueued on
that stream afterwards sees the halos. An exchange whose buffers were last used on another
stream waits for that stream's work on the device first.

The NCCL communicator is made once per decomposition from its MPI communicator (rank 0's
unique id broadcast over MPI), after every rank has checked that it has a GPU and NCCL:
collective, and an error on every rank if one lacks them. NCCL matches messages between two
ranks in posting order, so ranks must start their exchanges of a plan in the same order (as
they must finish them for MPI's tags). One process per GPU: NCCL refuses two ranks on one
device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gt4py_halo.decomposition.plan import ExchangePlan, FieldSpec
from gt4py_halo.errors import BackendUnavailableError, FieldError
from gt4py_halo.runtime.packing import Messages, MessageSets, Slots

try:
    import cupy
    from cupy.cuda import nccl
except ImportError as error:
    raise BackendUnavailableError(
        "the 'nccl' backend needs CuPy with NCCL on a GPU machine: "
        f"`pip install cupy-cuda13x 'gt4py_halo[nccl]'` ({error})"
    ) from error


def _usable() -> str | None:
    """Why this process cannot use NCCL, or ``None``."""
    if not getattr(nccl, "available", True):
        return "CuPy was built without NCCL"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no GPU is visible"
    except cupy.cuda.runtime.CUDARuntimeError as error:
        return f"no GPU is usable ({error})"
    return None


class NcclTransport:
    """Moves halos of CuPy fields with NCCL point-to-point messages on the current stream."""

    #: Device messages carry no signature: ranks check their fields together instead
    #: (``Exchange._agree``).
    checks_each_message = False

    def __init__(self, comm: Any) -> None:
        problems = comm.allgather(_usable())
        if any(problems):
            raise BackendUnavailableError(
                "the 'nccl' backend cannot run here: "
                + "; ".join(f"rank {r}: {p}" for r, p in enumerate(problems) if p)
            )
        unique_id = comm.bcast(nccl.get_unique_id() if comm.rank == 0 else None, root=0)
        self._nccl = nccl.NcclCommunicator(comm.size, unique_id, comm.rank)
        self._sets = MessageSets()

    @classmethod
    def for_decomposition(cls, decomposition: Any) -> NcclTransport:
        return cls(decomposition.comm)

    def prepare(
        self, plan: ExchangePlan, arrays: Sequence[Any], specs: tuple[FieldSpec, ...]
    ) -> PreparedNcclExchange:
        on_host = [n for n, a in enumerate(arrays) if not isinstance(a, cupy.ndarray)]
        if on_host:
            raise FieldError(
                f"the 'nccl' backend exchanges GPU (CuPy) fields only; field(s) {on_host} are "
                f"{type(arrays[on_host[0]]).__name__}: use the 'mpi' or 'ghex' backend for them"
            )
        return PreparedNcclExchange(self._nccl, self._sets, plan, specs)


class PreparedNcclExchange:
    """Exchanging fields of one signature with one plan, on the stream current at ``start``."""

    #: It references no field: the exchange keeps it for the same field objects.
    reusable = True

    def __init__(
        self, communicator: Any, sets: MessageSets, plan: ExchangePlan, specs: tuple
    ) -> None:
        self._nccl = communicator
        self._slots = sets.slots(plan, specs, None)
        self._make = lambda slot: _NcclMessages(plan, specs)

    def start(self, arrays: Sequence[Any]) -> PendingNcclExchange:
        stream = cupy.cuda.get_current_stream()
        messages, slot = self._slots.start(self._make, self._nccl, arrays, stream)
        return PendingNcclExchange(messages, self._slots, slot, arrays)

    def exchange(self, arrays: Sequence[Any], waiting: Callable[[], None] | None) -> None:
        self.start(arrays).wait(waiting)

    def kept(self, arrays: Sequence[Any]) -> Callable[[Sequence[Any], Any], None]:
        """What a kept call of ``arrays`` runs (``_native.ExchangeAgain``): ``exchange``."""
        return self.exchange


class _NcclMessages:
    """The device buffers of one plan, field signature and slot, and the stream that last
    used them (``done``: recorded after that use)."""

    def __init__(self, plan: ExchangePlan, specs: Sequence[FieldSpec]) -> None:
        self.messages = Messages(plan, specs, cupy)
        self.stream: Any = None
        self.unpack: Any = ()  # the copies of the exchange in flight
        self.received: Any = None  # cupy.cuda.Event: after the receives of the last start
        self.done: Any = None  # cupy.cuda.Event: after the last unpacking

    def start(self, communicator: Any, arrays: Sequence[Any], stream: Any) -> None:
        if self.done is not None and self.stream.ptr != stream.ptr:
            stream.wait_event(self.done)  # the buffers' last use, on the device
        self.stream = stream
        (pack, self.unpack, local), _ = self.messages.bind(arrays)  # CuPy: views hold them
        with stream:
            for copy in pack:
                copy()
            nccl.groupStart()
            for peer, buffer in self.messages.recvs:
                communicator.recv(
                    buffer.data.data.ptr, buffer.nbytes, nccl.NCCL_UINT8, peer, stream.ptr
                )
            for peer, buffer in self.messages.sends:
                communicator.send(
                    buffer.data.data.ptr, buffer.nbytes, nccl.NCCL_UINT8, peer, stream.ptr
                )
            nccl.groupEnd()
            self.received = stream.record()
            for copy in local:
                copy()

    def finish(self) -> None:
        unpack, self.unpack = self.unpack, ()  # the copies hold the fields
        with self.stream:
            for copy in unpack:
                copy()
            self.done = self.stream.record()


class PendingNcclExchange:
    """An NCCL exchange on its way; ``wait`` enqueues the unpacking on the exchange's stream
    (it does not wait on the host) and releases its buffers and fields."""

    def __init__(
        self,
        messages: _NcclMessages,
        slots: Slots,
        slot: int,
        arrays: Sequence[Any],
    ) -> None:
        self._messages = messages
        self._slots, self._slot = slots, slot
        self._arrays = arrays  # the copies' views do not hold them: alive until unpacked

    def test(self) -> bool:
        """Whether the messages have arrived (the device got past the receives)."""
        return self._messages.received.done

    def wait(self, waiting: Callable[[], None] | None = None) -> None:
        """Enqueue the unpacking; nothing waits on the host, so ``waiting`` (what a slow
        host wait does) is never called."""
        try:
            self._messages.finish()
        finally:
            self._slots.release(self._slot)
            self._arrays = ()
