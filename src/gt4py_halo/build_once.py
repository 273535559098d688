"""Build on one rank, load on all: the pattern of every compilation under MPI.

N ranks compiling the same program waste the node's cores and fight over one build folder;
instead the root builds, tells the others where the result is, and they load it. If the root
fails, every rank raises instead of waiting forever for a build that will not come. Waiting
ranks sleep between polls: MPI's own waits spin, and ranks spinning on the cores the root
compiles on (common when a node is shared or oversubscribed) slow the build down.

Ranks meet before a build (``arrive``): a rank that never comes (a step called on some ranks
only) would leave the others waiting in a collective forever, silently. Instead every waiting
rank says so on stderr after ``REPORT_AFTER_S``, naming itself and the step, and again every
``REPORT_AFTER_S``: the ranks missing from those lines are the ones that did not come.
Waiting goes on: a late rank may still come. (Naming the missing ranks from the waiting ones
would need messages on the user's communicator, which a receive of any tag there could take.)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

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


def arrive(comm: MPI.Comm, what: str) -> None:
    """Wait, sleeping, until every rank of ``comm`` got here: before the collectives of a
    build of ``what`` (a step), so that a missing rank does not leave the others waiting
    silently (module docstring), and so that ranks reaching a collective after uneven work
    (lowering a step) do not spin in MPI on the cores the late ones still work on."""
    request = comm.Ibarrier()
    start = report = time.monotonic()
    while not request.Test():
        time.sleep(_POLL_S)
        if time.monotonic() - report >= REPORT_AFTER_S:
            report = time.monotonic()
            print(
                f"gt4py_halo: rank {comm.Get_rank()} of {comm.Get_size()} has waited "
                f"{report - start:.0f} s for the other ranks to build {what}: a compiled step "
                "is collective, every rank of its communicator must call it (the ranks that "
                "do not say they wait are the ones that have not called it)",
                file=sys.stderr,
                flush=True,
            )


def _release(comm: MPI.Comm, root: int, message: tuple[bool, Any]) -> None:
    comm.Ibarrier().Wait()
    comm.bcast(message, root=root)


def _sleep_until_done(request: MPI.Request) -> None:
    while not request.Test():
        time.sleep(_POLL_S)
