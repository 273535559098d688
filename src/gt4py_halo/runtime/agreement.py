"""Ranks agreeing on the fields they exchange, where the transport's messages cannot say.

With ``mpi`` every message carries a digest of its fields, checked where it is received. GHEX
(and NCCL) own their messages, so the ranks of an exchange check instead, collectively and
before posting, the first time the exchange meets a kind of fields (dtypes and level shapes,
in order, and the dim): a ``RanksDisagreeError`` on every rank names each rank's fields. The
check is keyed by the kind, not by the field objects: ranks that agree come to it at the same
calls whether they reuse their fields or reallocate them, and the steady state costs nothing.

A rank exchanging a kind agreed before does not come to the check of a rank whose kind is new
(a wrong program: they exchange different fields). It posts its exchange and waits for
messages the checking rank never sends, while that one waits for it in the check. To end
this, a rank whose check has waited ``ALARM_AFTER_S`` sends every other rank an alarm (the
exchange's call number and its fields), and a rank whose wait for an exchange's messages has
lasted ``ALARM_AFTER_S`` reads the alarms: one for a call it made without taking part in that
call's check (its fields were of a kind agreed before, the other's of a new one: they
differ) is answered with its own fields, and both ranks raise ``RanksDisagreeError``. Both leave a collective or an exchange unfinished, so the exchange is
broken: every later call raises. The alarms of a check that was slow, not wrong (every rank
came), are received by the check itself: no message is left on the communicator when it is
freed. Calls are numbered per exchange object; ranks call the same exchanges in the same
order, as every transport needs.

Not seen: ranks exchanging two different kinds that were both agreed before (neither
checks), and a rank that does not wait for the checking rank's messages (it only sends to
it): see docs/checks.md.
"""

from __future__ import annotations

import sys
import time

from mpi4py import MPI

from gt4py_halo import build_once
from gt4py_halo.decomposition.collective import check_ranks_agree, free_communicator
from gt4py_halo.decomposition.plan import FieldSpec, signature
from gt4py_halo.errors import RanksDisagreeError

#: Seconds a check or a wait for messages lasts before ranks look for a disagreement.
ALARM_AFTER_S = 1.0
_ALARM_TAG = 1  # a checking rank's (call, fields) to the others
_ANSWER_TAG = 2  # a waiting rank's (call, fields) to a checking one
_SPIN_S = 0.01  # seconds a check polls without sleeping (most checks end within)
_POLL_S = 0.001  # seconds between polls of a check after that


class Agreement:
    """The fields checks of one exchange object, on a communicator of their own."""

    def __init__(self, comm: MPI.Intracomm) -> None:
        self._comm = comm.Dup()
        self._agreed: set[tuple[str | None, bytes]] = set()
        self._checked_at: set[int] = set()  # the calls whose checks this rank took part in
        self._alarms: dict[int, list[tuple[int, str]]] = {}  # per call: (rank, fields)
        self._broken: str | None = None
        #: The number of the current call (``next_call``).
        self.call = 0

    def __del__(self) -> None:
        if self._broken is None:  # else a collective is unfinished on it: left to MPI's end
            free_communicator(self._comm)

    def next_call(self) -> int:
        """Number a new call of the exchange; raise if an earlier one broke it."""
        if self._broken is not None:
            raise RanksDisagreeError(
                f"{self._broken}; this exchange was left unfinished then and cannot be used "
                "again: make a new one"
            )
        self.call += 1
        return self.call

    def check(self, dim: str | None, specs: tuple[FieldSpec, ...]) -> None:
        """Collectively, unless agreed before: raise ``RanksDisagreeError`` on every rank
        unless every rank exchanges fields of this kind now (module docstring)."""
        key = (dim, signature(specs))
        if key in self._agreed:
            return
        mine = described(dim, specs)
        call = self.call
        self._checked_at.add(call)
        barrier = self._comm.Ibarrier()
        start = report = time.monotonic()
        alarmed = False
        while not barrier.Test():
            waited = time.monotonic() - start
            if waited < _SPIN_S:
                continue
            time.sleep(_POLL_S)
            if waited >= ALARM_AFTER_S:
                if not alarmed:
                    alarmed = True
                    for rank in range(self._comm.Get_size()):
                        if rank != self._comm.Get_rank():
                            self._comm.isend((call, mine), rank, _ALARM_TAG).Free()
                self._read_answers(call, mine)
            if time.monotonic() - report >= build_once.REPORT_AFTER_S:
                report = time.monotonic()
                print(
                    f"gt4py_halo: rank {self._comm.Get_rank()} has waited {report - start:.0f} s "
                    f"for the other ranks to check the fields of a new kind of exchange ({mine}): "
                    "every rank must exchange the same fields, in the same order",
                    file=sys.stderr,
                    flush=True,
                )
        self._drain_alarms(call, self._comm.allgather(alarmed))
        check_ranks_agree(self._comm, "exchange", fields=mine)
        self._agreed.add(key)

    def _drain_alarms(self, call: int, alarmed: list[bool]) -> None:
        """Receive the alarms of a check that was slow, not wrong (every rank came), from
        every rank that sent one: none is left unreceived, where a communicator made after
        this one is freed could take it for one of its own messages."""
        read = {rank for rank, _ in self._alarms.pop(call, [])}
        for rank, sent in enumerate(alarmed):
            if sent and rank != self._comm.Get_rank() and rank not in read:
                self._comm.recv(source=rank, tag=_ALARM_TAG)

    def waiting(self, dim: str | None, specs: tuple[FieldSpec, ...]) -> None:
        """What a wait for the messages of an exchange of these fields does once it has
        lasted ``ALARM_AFTER_S``, at every poll: raise ``RanksDisagreeError`` if a rank
        checks new fields in a call of this exchange whose check this rank did not take
        part in (its fields were of a kind agreed before: the ranks disagree)."""
        self._read_alarms()
        due = [c for c in self._alarms if c <= self.call and c not in self._checked_at]
        if not due:
            return
        call = min(due)
        mine = described(dim, specs)
        for rank, _ in self._alarms[call]:
            self._comm.isend((call, mine), rank, _ANSWER_TAG).Free()
        self._broken = _disagreement(call, [*self._alarms.pop(call), (self._comm.rank, mine)])
        raise RanksDisagreeError(self._broken)

    def _read_alarms(self) -> None:
        status = MPI.Status()
        while self._comm.Iprobe(MPI.ANY_SOURCE, _ALARM_TAG, status):
            rank = status.Get_source()
            call, theirs = self._comm.recv(source=rank, tag=_ALARM_TAG)
            self._alarms.setdefault(call, []).append((rank, theirs))

    def _read_answers(self, call: int, mine: str) -> None:
        status = MPI.Status()
        answers = []
        while self._comm.Iprobe(MPI.ANY_SOURCE, _ANSWER_TAG, status):
            rank = status.Get_source()
            their_call, theirs = self._comm.recv(source=rank, tag=_ANSWER_TAG)
            if their_call == call:
                answers.append((rank, theirs))
        if answers:
            self._broken = _disagreement(call, [*answers, (self._comm.rank, mine)])
            raise RanksDisagreeError(self._broken)


def described(dim: str | None, specs: tuple[FieldSpec, ...]) -> str:
    """A kind of fields as errors name it."""
    fields = ", ".join(f"{s.dtype} levels {s.level_shape}" for s in specs)
    return fields if dim is None else f"dim {dim!r}: {fields}"


def _disagreement(call: int, fields: list[tuple[int, str]]) -> str:
    shown = "; ".join(f"rank {rank}: {theirs!r}" for rank, theirs in sorted(fields))
    return (
        f"exchange: ranks disagree on the fields of exchange call {call} ({shown}): a rank "
        "exchanging fields of a kind it exchanged before does not check them again, and "
        "waited for the others' messages while they checked theirs"
    )
