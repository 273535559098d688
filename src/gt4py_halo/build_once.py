"""Build on one rank, load on all: the pattern of every compilation under MPI.

N ranks compiling the same program waste the node's cores and fight over one build folder;
instead the root builds, tells the others where the result is, and they load it. If the root
fails, every rank raises instead of waiting forever for a build that will not come. Waiting
ranks sleep between polls: MPI's own waits spin, and ranks spinning on the cores the root
compiles on (common when a node is shared or oversubscribed) slow the build down.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mpi4py import MPI


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


def arrive(comm: MPI.Comm) -> None:
    """Wait, sleeping, until every rank of ``comm`` got here: before a collective that ranks
    reach after uneven work (lowering a step), so that the early ones do not spin in MPI on
    the cores the late ones still work on."""
    _sleep_until_done(comm.Ibarrier())


def _release(comm: MPI.Comm, root: int, message: tuple[bool, Any]) -> None:
    comm.Ibarrier().Wait()
    comm.bcast(message, root=root)


def _sleep_until_done(request: MPI.Request, poll_s: float = 0.01) -> None:
    while not request.Test():
        time.sleep(poll_s)
