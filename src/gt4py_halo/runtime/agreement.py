"""Ranks agreeing on the fields they exchange, where the transport's messages cannot say.

With ``mpi`` every message carries a digest of its fields, checked where it is received. GHEX
(and NCCL) own their messages, so the ranks of an exchange check instead, collectively and
before posting, whenever the kind of fields of an exchange (dtypes and level shapes, in
order, and the dim) differs from the kind of the last exchange of that dim: a
``RanksDisagreeError`` on every rank names each rank's fields. Ranks that repeat their last
kind need no check: that kind was the same on every rank (checked, or repeated since), so by
induction no disagreement goes unseen. The decision depends on the kinds only, not on the
field objects: ranks that agree check at the same calls whether they reuse their fields or
reallocate them. A model repeating its exchanges pays nothing; one alternating kinds pays a
barrier and one allreduce per change.

A rank that repeats its kind does not come to the check of a rank whose kind changed (a
wrong program: their kinds differ). It posts its exchange and waits for messages the
checking rank never sends, while that one waits for it in the check. To end this, a rank
whose check has waited ``ALARM_AFTER_S`` sends every other rank an alarm (the exchange's call
number and its fields), and a rank whose wait for an exchange's messages has lasted
``ALARM_AFTER_S`` reads the alarms: one for a call it made without taking part in that call's
check proves a disagreement; it answers every rank with its own fields, and the ranks raise
``RanksDisagreeError``. They leave a collective or an exchange unfinished, so the exchange is
broken: every later call raises, and its communicators (the check's, the transport's) are
never freed: messages may be left on them. The alarms of a check that was slow, not wrong (every rank
came), are received by the check itself: no message is left on the communicator when it is
freed. Calls are numbered per exchange object; ranks call the same exchanges in the same
order, as every transport needs, so a check also compares the ranks' call numbers: a rank
that comes to it from a later call went on past calls the others checked.

A rank that repeats its kind and never waits for the checking rank's messages (it only sends
to it: one-sided halos) reads the alarms at its next call, at most once per
``ALARM_AFTER_S`` (one clock read per call). One that makes no further call leaves the
checking rank waiting, saying so on stderr (docs/checks.md).

Ranks that each repeat their kinds can still disagree: one exchanges another dim than the
others in a call, or skipped a call. No check runs, and their messages never meet (GHEX tags
them by dim). So a rank whose wait for an exchange's messages lasts ``ALARM_AFTER_S`` sends
the ranks it waits for (the plan's neighbours) a stuck note (the call number, its dim and
kind of fields), once per call, and reads the others' while it waits and at its next calls
(at most once per ``ALARM_AFTER_S``): a note for a call this rank made with another dim or
kind proves a disagreement; it sends the noting ranks its own (so that they raise too, if
they wait) and raises. A note for the same dim and kind says nothing: that rank waits for another. Each
rank remembers the dim and kind of its last ``CALLS_REMEMBERED`` calls (``made``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable

import numpy as np
from mpi4py import MPI

from gt4py_halo import _native, build_once
from gt4py_halo.decomposition.collective import check_ranks_agree, free_communicator
from gt4py_halo.decomposition.plan import FieldSpec
from gt4py_halo.errors import RanksDisagreeError

#: Seconds a check or a wait for messages lasts before ranks look for a disagreement.
ALARM_AFTER_S = 1.0
_ALARM_TAG = 1  # a checking rank's (call, fields) to the others
_ANSWER_TAG = 2  # a waiting rank's (call, fields) to a checking one
_STUCK_TAG = 3  # a rank waiting long for messages: (call, (dim, kind), fields) to its peers
#: Calls whose dim and kind of fields a rank remembers, for the stuck notes of other ranks.
CALLS_REMEMBERED = 64
#: Polls of a waiting check or exchange between reads of the clock.
POLLS_PER_CLOCK = 1000
_POLL_S = 0.001  # seconds between polls of a check once it is that slow


#: The communicators and transports of broken exchanges, never freed: messages a rank posted
#: may be left unreceived on them, which a communicator that MPI made later in the place of a
#: freed one could take for its own (GHEX's pattern setup crashed on one).
_BROKEN: list[tuple[MPI.Intracomm, object]] = []


class Agreement(_native.Numbering):
    """The fields checks of one exchange object, on a communicator of their own; ``transport``
    is kept alive for good if the exchange breaks.

    What a call repeating its dim's last kind of fields does (``next_call``, ``made``: the
    call's number, the ring of the last calls) lives in the C base (``call``, ``last``,
    ``_calls``, ``_read_due``, ``_broken``), which a kept call of the exchange also does from
    C (``_native.ExchangeAgain``) when nothing more is due."""

    def __init__(self, comm: MPI.Intracomm, transport: object) -> None:
        self._comm = comm.Dup()
        self._transport = transport
        #: Per dim, the kind of fields (``plan.signature``) of its last exchange: the same on
        #: every rank, checked.
        self.last: dict[str | None, int] = {}
        self._least = np.empty(5, np.int64)  # the check's allreduce
        self._alarms: dict[int, list[tuple[int, str]]] = {}  # per call: (rank, fields)
        self._broken: str | None = None
        #: The number of the current call (``next_call``).
        self.call = 0
        self._named: dict[str | None, str] = {}  # per dim, its last kind as errors name it
        self._read_due = time.monotonic() + ALARM_AFTER_S  # when ``next_call`` reads alarms
        # the last calls, each at its number modulo their count: (call, dim, kind, specs)
        self._calls: list[tuple] = [(0, None, 0, ())] * CALLS_REMEMBERED
        self._noted = 0  # the last call this rank sent a stuck note of
        # since when the noted call's messages are waited for, and when that was last said
        self._waited_since = self._reported = 0.0
        self._notes: dict[int, list[tuple]] = {}  # per call: (rank, (dim, kind), as named)

    def __del__(self) -> None:
        if "_comm" in vars(self) and self._broken is None:  # (else its Dup failed, or _BROKEN)
            if not MPI.Is_finalized():  # no note left for a communicator made in its place
                while self._comm.Iprobe(MPI.ANY_SOURCE, _STUCK_TAG):
                    self._comm.recv(source=MPI.ANY_SOURCE, tag=_STUCK_TAG)
            free_communicator(self._comm)

    def next_call(self) -> int:
        """Number a new call of the exchange; raise if an earlier one broke it."""
        if self._broken is not None:
            raise RanksDisagreeError(
                f"{self._broken}; this exchange was left unfinished then and cannot be used "
                "again: make a new one"
            )
        now = time.monotonic()
        if now >= self._read_due:  # for ranks that never wait for messages
            self._read_due = now + ALARM_AFTER_S
            self._answer_alarms("; ".join(self._named.values()))
            self._read_notes()
        self.call += 1
        return self.call

    def made(self, dim: str | None, specs: tuple[FieldSpec, ...], kind: int) -> None:
        """Remember the dim and kind of fields of this call (for others' stuck notes)."""
        self._calls[self.call % CALLS_REMEMBERED] = (self.call, dim, kind, specs)

    def check(self, dim: str | None, specs: tuple[FieldSpec, ...], kind: int) -> None:
        """Collectively, unless ``kind`` (``signature(specs, dim)`` as an int64) is the kind
        of the last exchange of ``dim``: raise ``RanksDisagreeError`` on every rank unless
        every rank exchanges fields of this kind now (module docstring)."""
        if self.last.get(dim) == kind:
            return
        barrier = self._comm.Ibarrier()
        alarmed = False if barrier.Test() else self._wait(barrier, dim, specs)
        # one allreduce: the least kind, the greatest (as the least complement), and whether
        # any rank sent alarms
        least = self._least
        least[:] = (kind, ~kind, self.call, ~self.call, -alarmed)
        self._comm.Allreduce(MPI.IN_PLACE, least, op=MPI.MIN)
        if least[4]:
            self._drain_alarms(self.call, self._comm.allgather(alarmed))
        if least[2] != ~least[3]:  # a rank's calls without a check were this one's messages
            try:
                check_ranks_agree(
                    self._comm, "exchange", call=self.call, fields=described(dim, specs)
                )
            except RanksDisagreeError as error:
                raise self._break(str(error)) from None
        if least[0] != ~least[1]:
            check_ranks_agree(self._comm, "exchange", fields=described(dim, specs))
        self.last[dim] = kind
        self._named[dim] = described(dim, specs)

    def _wait(self, barrier: MPI.Request, dim: str | None, specs: tuple[FieldSpec, ...]) -> bool:
        """Wait for the other ranks to come to the check; after ``ALARM_AFTER_S`` alarm them
        and raise on an answer, and say so on stderr every ``REPORT_AFTER_S``. Whether this
        rank sent alarms."""
        start = report = time.monotonic()
        polls = 0
        alarmed = False
        while not barrier.Test():
            polls += 1
            if polls % POLLS_PER_CLOCK:
                continue
            now = time.monotonic()
            if now - start < ALARM_AFTER_S:
                continue
            time.sleep(_POLL_S)  # (ranks late by a second may well need the cores)
            mine = described(dim, specs)
            if not alarmed:
                alarmed = True
                for rank in range(self._comm.Get_size()):
                    if rank != self._comm.Get_rank():
                        self._comm.isend((self.call, mine), rank, _ALARM_TAG).Free()
            self._read_answers(self.call, mine)
            if now - report >= build_once.REPORT_AFTER_S:
                report = now
                print(
                    f"gt4py_halo: rank {self._comm.Get_rank()} has waited {now - start:.0f} s "
                    f"for the other ranks to check the fields of a new kind of exchange ({mine}): "
                    "every rank must exchange the same fields, in the same order",
                    file=sys.stderr,
                    flush=True,
                )
        return alarmed

    def _drain_alarms(self, call: int, alarmed: list[bool]) -> None:
        """Receive the alarms of a check that was slow, not wrong (every rank came), from
        every rank that sent one: none is left unreceived, where a communicator made after
        this one is freed could take it for one of its own messages."""
        read = {rank for rank, _ in self._alarms.pop(call, [])}
        for rank, sent in enumerate(alarmed):
            if sent and rank != self._comm.Get_rank() and rank not in read:
                self._comm.recv(source=rank, tag=_ALARM_TAG)

    def waiting(
        self,
        dim: str | None,
        specs: tuple[FieldSpec, ...],
        peers: tuple[int, ...],
        call: int | None = None,
    ) -> None:
        """What a wait for the messages of an exchange of these fields does once it has
        lasted ``ALARM_AFTER_S``, at every poll: raise ``RanksDisagreeError`` if a rank
        checks new fields in a call of this exchange whose check this rank did not take
        part in (its fields were of its dim's last kind, the other's not: the ranks disagree),
        or made the waited call (``call``; the current one if ``None``: a blocking exchange)
        with another dim or kind of fields (stuck notes to ``peers``, the ranks whose
        messages it waits for: module docstring). A split exchange's finish may wait for an
        earlier call than the current one: its start's. Says so on stderr every
        ``REPORT_AFTER_S`` (a rank that made fewer calls leaves this one waiting for good)."""
        call = self.call if call is None else call
        now = time.monotonic()
        if self._noted != call:
            self._noted = call
            self._note(call, peers)
            self._reported, self._waited_since = now, now - ALARM_AFTER_S
        mine = described(dim, specs)
        self._answer_alarms(mine)
        self._read_notes()
        if now - self._reported >= build_once.REPORT_AFTER_S:  # (a rank that made fewer calls)
            self._reported = now
            report_wait(
                self._comm.Get_rank(),
                now - self._waited_since,
                f"exchange call {call}",
                mine,
                peers,
            )

    def _note(self, call: int, ranks: Iterable[int]) -> None:
        """Send ``ranks`` (but this one) the stuck note of ``call``: its dim and kind."""
        _, dim, kind, specs = self._calls[call % CALLS_REMEMBERED]
        note = (call, (dim, kind), described(dim, specs))
        for rank in ranks:
            if rank != self._comm.Get_rank():
                self._comm.isend(note, rank, _STUCK_TAG).Free()

    def _read_notes(self) -> None:
        """Read the stuck notes; one for a call this rank made with another dim or kind of
        fields proves a disagreement: send the noting ranks this rank's note, and raise."""
        status = MPI.Status()
        while self._comm.Iprobe(MPI.ANY_SOURCE, _STUCK_TAG, status):
            rank = status.Get_source()
            call, theirs, named = self._comm.recv(source=rank, tag=_STUCK_TAG)
            self._notes.setdefault(call, []).append((rank, theirs, named))
        for call in [c for c in self._notes if c <= self.call]:
            notes = self._notes.pop(call)
            made, dim, kind, specs = self._calls[call % CALLS_REMEMBERED]
            if made != call:
                continue  # made too long ago to compare (this rank went on: not its fault)
            differ = [(rank, named) for rank, theirs, named in notes if theirs != (dim, kind)]
            if differ:
                if self._noted != call:  # (else they have this rank's note of it)
                    self._note(call, [rank for rank, _ in differ])
                differ = list(dict(differ).items())  # (a rank may have noted twice)
                mine = (self._comm.Get_rank(), described(dim, specs))
                raise self._break(_disagreement(call, [*differ, mine], _STUCK))

    def _answer_alarms(self, mine: str) -> None:
        """Read the alarms; one for a call this rank made without its check proves a
        disagreement: answer every rank with ``mine`` (this rank's fields) and raise."""
        self._read_alarms()
        due = [c for c in self._alarms if c <= self.call]  # (a check drains its own)
        if not due:
            return
        call = min(due)
        for rank in range(self._comm.Get_size()):  # every checking rank, not only those heard
            if rank != self._comm.Get_rank():
                self._comm.isend((call, mine), rank, _ANSWER_TAG).Free()
        raise self._break(_disagreement(call, [*self._alarms.pop(call), (self._comm.rank, mine)]))

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
            raise self._break(_disagreement(call, [*answers, (self._comm.rank, mine)]))

    def _break(self, problem: str) -> RanksDisagreeError:
        """The error of ``problem``, after which the exchange is broken: a collective or an
        exchange is left unfinished, so its communicators go to ``_BROKEN``."""
        self._broken = problem
        _BROKEN.append((self._comm, self._transport))
        return RanksDisagreeError(problem)


def report_wait(rank: int, seconds: float, which: str, kind: str, peers: Iterable[int]) -> None:
    """Say on stderr that ``rank`` has waited ``seconds`` for the messages of an exchange
    (``which``: "exchange call 3", "an exchange"; its ``kind`` of fields: ``described``) from
    ``peers``: every transport's
    report of a long wait."""
    ranks = ", ".join(map(str, sorted(set(peers))))
    print(
        f"gt4py_halo: rank {rank} has waited {seconds:.0f} s for the messages of {which} "
        f"({kind}) from {f'ranks {ranks}' if ranks else 'its neighbours'}: every rank "
        "must make the same exchange calls, in the same order",
        file=sys.stderr,
        flush=True,
    )


def described(dim: str | None, specs: tuple[FieldSpec, ...]) -> str:
    """A kind of fields as errors name it."""
    fields = ", ".join(f"{s.dtype} levels {s.level_shape}" for s in specs)
    return fields if dim is None else f"dim {dim!r}: {fields}"


#: Why the ranks of a disagreement went apart, by how it was found.
_UNCHECKED = (
    "a rank repeating the kind of fields of its last exchange of that dim did not check them, "
    "and went on while the others checked theirs"
)
_STUCK = (
    "a rank exchanged another dim or other fields in that call, or skipped a call, and the "
    "others waited for messages it never sent"
)


def _disagreement(call: int, fields: list[tuple[int, str]], why: str = _UNCHECKED) -> str:
    shown = "; ".join(f"rank {rank}: {theirs!r}" for rank, theirs in sorted(fields))
    return f"exchange: ranks disagree on the fields of exchange call {call} ({shown}): {why}"
