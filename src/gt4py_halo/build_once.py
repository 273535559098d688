"""Build on one rank, load on all: the pattern of every compilation under MPI.

N ranks compiling the same program waste the node's cores and fight over one build folder;
instead the root builds, tells the others where the result is, and they load it. If the root
fails, every rank raises instead of waiting forever for a build that will not come.
"""

from __future__ import annotations

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
            comm.bcast((False, f"{type(exc).__name__}: {exc}"), root=root)
            raise
        comm.bcast((True, share(result)), root=root)
        return result
    ok, shared = comm.bcast(None, root=root)
    if not ok:
        raise RuntimeError(f"building on rank {root} failed: {shared}")
    return load(shared)
