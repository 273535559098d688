"""Build on one rank, load on all: the pattern of every compilation under MPI.

N ranks compiling the same program waste the node's cores and fight over one build folder;
instead the root builds, tells the others where the result is, and they load it. If the root
fails, every rank raises instead of waiting forever for a build that will not come. Waiting
ranks sleep between polls: MPI's own waits spin, and ranks spinning on the cores the root
compiles on (common when a node is shared or oversubscribed) slow the build down.

Ranks meet before a build (``arrive``): a rank that never comes (a step called on some ranks
only) would leave the others waiting in a collective forever, silently. Instead the waiting
ranks say so on stderr after ``REPORT_AFTER_S``, and again every ``REPORT_AFTER_S``: rank 0
names the ranks that have not come, the others whether rank 0 has come. Waiting goes on: a late
rank may still come. Ranks that meet to build different steps raise ``RanksDisagreeError``,
naming each rank's step.

Naming the missing ranks takes messages, which go on a communicator of our own: on the user's,
a receive of any source and tag in the user's code (mpi4py's ``comm.recv()``) could take them.
Making one is collective, so it is made where every rank is sure to be: the first
decomposition (or compiled exchange) built on a group of ranks opens its meeting place
(``open_meeting_place``), one per group, kept for the life of the process. A step whose ranks
have none (no decomposition on them yet) meets on its own communicator, where each waiting rank
can only name itself.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from gt4py_halo.errors import RanksDisagreeError

#: Seconds ranks wait for the others before a build until they say so, and then between
#: reports.
REPORT_AFTER_S = 60.0
_POLL_S = 0.01  # seconds between tests of a request


def build_on_root[T](
    comm: MPI.Comm,
    build: Callable[[], T],
    share: Callable[[T], Any],
    load: Callable[[Any], T],
    root: int = 0,
) -> T:
    """``build()`` on ``root``; the other ranks ``load(share(built))``. Collective over ``comm``."""
    if comm.Get_rank() == root:
        try:
            result = build()
        except BaseException as exc:
            _release(comm, root, (False, f"{type(exc).__name__}: {exc}"))
            raise
        _release(comm, root, (True, share(result)))
        return result
    _sleep_until_done(comm.Ibarrier())
    ok, shared = comm.bcast(None, root=root)
    if not ok:
        raise RuntimeError(f"building on rank {root} failed: {shared}")
    return load(shared)


def open_meeting_place(comm: MPI.Intracomm) -> None:
    """Collectively over ``comm``: make the meeting place of its group of ranks, unless there
    is one (module docstring). Every rank of ``comm`` must call it, at the same point of its
    program: where a decomposition is built."""
    key = _group(comm)
    if key is not None and key not in _MEETINGS:
        _MEETINGS[key] = comm.Dup()


def arrive(comm: MPI.Comm, what: str) -> None:
    """Wait, sleeping, until every rank of ``comm`` got here: before the collectives of a
    build of ``what`` (a step), so that a missing rank does not leave the others waiting
    silently (module docstring), and so that ranks reaching a collective after uneven work
    (lowering a step) do not spin in MPI on the cores the late ones still work on. Raises
    ``RanksDisagreeError`` on every rank where the ranks came for different steps."""
    place = _MEETINGS.get(_group(comm))
    meeting = _Meeting(comm) if place is None else _Meeting(place, notes=True)
    start = report = time.monotonic()
    while not meeting.complete():
        time.sleep(_POLL_S)
        if time.monotonic() - report >= REPORT_AFTER_S:
            report = time.monotonic()
            print(
                f"gt4py_halo: rank {comm.Get_rank()} of {comm.Get_size()} has waited "
                f"{report - start:.0f} s for {meeting.missing()} to build {what}: a compiled "
                "step is collective, every rank of its communicator must call it (a rank "
                "whose arguments fit a build it has runs that build without coming here: "
                "docs/checks.md says when ranks with alike arguments part so)",
                file=sys.stderr,
                flush=True,
            )
    steps = meeting.comm.allgather(what)
    if len(set(steps)) > 1:
        shown = ", ".join(f"rank {rank}: {step}" for rank, step in enumerate(steps[:8]))
        raise RanksDisagreeError(
            f"the ranks build different steps ({shown}): a compiled step is collective, "
            "every rank must call the same steps in the same order"
        )


def largest(comm: MPI.Comm, values: list[int], what: str) -> list[int]:
    """Collectively over ``comm``: the largest of the ranks' ``values``, element by element (a
    call of step ``what`` comparing the builds its ranks name and their fields' digests, as
    ``[-x, x]``: the smallest and the largest). Waits as MPI's own allreduce
    does, spinning, but says so on stderr every ``REPORT_AFTER_S`` (a rank that stopped
    calling the step)."""
    mine = np.array(values, dtype=np.int64)
    result = np.empty_like(mine)
    request = comm.Iallreduce(mine, result, op=MPI.MAX)
    start = report = time.monotonic()
    while not request.Test():
        if time.monotonic() - report >= REPORT_AFTER_S:
            report = time.monotonic()
            print(
                f"gt4py_halo: rank {comm.Get_rank()} of {comm.Get_size()} has waited "
                f"{report - start:.0f} s for the other ranks to call {what}: a compiled step "
                "is collective, every rank of its communicator must call it",
                file=sys.stderr,
                flush=True,
            )
    return result.tolist()


_MEETINGS: dict[tuple[int, ...], MPI.Intracomm] = {}  # by the world ranks of their groups
_NOTE_TAG = 1  # the tag of the notes of a rank's arrival; nothing else is sent there


class _Meeting:
    """Ranks meeting on ``comm``: a barrier; on a meeting place of ours, also a note from each
    rank to rank 0 and from rank 0 to each, which say who came."""

    def __init__(self, comm: MPI.Intracomm, notes: bool = False) -> None:
        self.comm = comm
        self._notes: list[MPI.Request] = []
        self._heard: dict[int, MPI.Request] = {}  # the ranks' notes, at rank 0; rank 0's, else
        if notes:
            empty = bytearray()
            others = range(1, comm.Get_size()) if comm.Get_rank() == 0 else (0,)
            for rank in others:
                self._heard[rank] = comm.Irecv(empty, source=rank, tag=_NOTE_TAG)
                self._notes.append(comm.Isend(empty, dest=rank, tag=_NOTE_TAG))
        self._barrier = comm.Ibarrier()

    def complete(self) -> bool:
        """Whether every rank came (then every note is sent and received)."""
        if not self._barrier.Test():
            return False
        MPI.Request.Waitall([*self._notes, *self._heard.values()])
        return True

    def missing(self) -> str:
        """Who this rank still waits for, as far as it knows."""
        if not self._heard:
            return "the other ranks (those that do not say they wait have not come)"
        absent = [rank for rank, request in self._heard.items() if not request.Test()]
        if self.comm.Get_rank() == 0 and absent:
            return f"rank{'s' if len(absent) > 1 else ''} {', '.join(map(str, absent))}"
        if self.comm.Get_rank() == 0:
            return "the other ranks (all have come: the meeting is ending)"
        if absent:
            return "rank 0, which has not come, and perhaps others"
        return "other ranks (rank 0 has come, and names them)"


def _group(comm: MPI.Comm) -> tuple[int, ...] | None:
    """The ranks of ``comm`` in MPI_COMM_WORLD, in its order; ``None`` if some are not."""
    group, world = comm.Get_group(), MPI.COMM_WORLD.Get_group()
    try:
        ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
    finally:
        group.Free()
        world.Free()
    return None if MPI.UNDEFINED in ranks else tuple(ranks)


def _release(comm: MPI.Comm, root: int, message: tuple[bool, Any]) -> None:
    comm.Ibarrier().Wait()
    comm.bcast(message, root=root)


def _sleep_until_done(request: MPI.Request) -> None:
    while not request.Test():
        time.sleep(_POLL_S)
