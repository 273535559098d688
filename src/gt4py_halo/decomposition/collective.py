"""MPI helpers for building plans collectively.

Plans are built by all ranks together. An error one rank detects must reach every rank, or the
others would go on to post messages and wait forever; ``raise_on_all_ranks`` makes every rank
raise the same exception.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
from mpi4py import MPI

from gt4py_halo.build_once import open_meeting_place
from gt4py_halo.errors import DecompositionError, HaloError, RanksDisagreeError
from gt4py_halo.gt4py_support import warn_if_oversubscribed


def private_communicator(owner: object, comm: MPI.Comm | None) -> MPI.Comm:
    """A duplicate of ``comm`` (default: MPI_COMM_WORLD) owned by ``owner`` (a decomposition,
    the handle array of compiled exchanges), freed when ``owner`` is garbage-collected (MPI
    allows a few thousand communicators per process; a program may build many decompositions
    over its run).

    Its messages can then never match those of the user's code or another decomposition.
    MPI is initialized here if nobody did yet: ICON4Py imports mpi4py with
    ``mpi4py.rc.initialize = False`` and initializes MPI itself later, if at all.
    """
    if not MPI.Is_initialized():
        MPI.Init_thread(MPI.THREAD_MULTIPLE)  # what mpi4py asks for when it initializes
    if comm is None:
        comm = MPI.COMM_WORLD
    if comm == MPI.COMM_NULL:
        raise DecompositionError(
            "comm is MPI.COMM_NULL: this rank is not in the communicator; build the "
            "decomposition on the ranks of the communicator only"
        )
    if not isinstance(comm, MPI.Intracomm):
        raise DecompositionError(f"comm must be an mpi4py intracommunicator, got {comm!r}")
    from gt4py_halo.profiling import agree_on_whole_run  # (imports this module)

    warn_if_oversubscribed()
    agree_on_whole_run(comm)
    open_meeting_place(comm)  # for the builds of steps on these ranks (build_once)
    duplicate = comm.Dup()
    weakref.finalize(owner, free_communicator, duplicate)
    return duplicate


def free_communicator(comm: MPI.Comm) -> None:
    """Free ``comm`` unless MPI is finalized already (at exit, the order is not ours)."""
    if not MPI.Is_finalized() and comm != MPI.COMM_NULL:
        comm.Free()


def raise_on_all_ranks(
    comm: MPI.Comm, problem: str | None, error: type[HaloError] = DecompositionError
) -> None:
    """Raise ``error`` on every rank if any rank reports a problem."""
    problems = comm.allgather(problem)
    found = [(rank, p) for rank, p in enumerate(problems) if p is not None]
    if found:
        shown = "; ".join(f"rank {rank}: {p}" for rank, p in found[:4])
        more = f" (and {len(found) - 4} more ranks)" if len(found) > 4 else ""
        raise error(shown + more)


def check_ranks_agree(comm: MPI.Comm, who: str, **values: object) -> None:
    """Collectively: raise ``RanksDisagreeError`` on every rank, naming each value that
    differs and what every rank has, unless all ranks passed equal ``values``."""
    everyone = comm.allgather(values)
    differing = [k for k in values if len({repr(v[k]) for v in everyone}) > 1]
    if differing:
        lines = [
            f"  {k}: "
            + "; ".join(f"rank {r}: {v[k]!r}" for r, v in enumerate(everyone[:8]))
            + (f" (and {len(everyone) - 8} more ranks)" if len(everyone) > 8 else "")
            for k in differing
        ]
        raise RanksDisagreeError(f"{who}: ranks disagree on\n" + "\n".join(lines))


def alltoallv(comm: MPI.Comm, parts: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Send ``parts[r]`` (int64) to rank ``r``; return what each rank sent here."""
    send_counts = np.array([len(p) for p in parts], dtype=np.int64)
    recv_counts = np.empty_like(send_counts)
    comm.Alltoall(send_counts, recv_counts)
    send = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])
    recv = np.empty(int(recv_counts.sum()), dtype=np.int64)
    send_displs = np.concatenate(([0], np.cumsum(send_counts)[:-1]))
    recv_displs = np.concatenate(([0], np.cumsum(recv_counts)[:-1]))
    comm.Alltoallv(
        [send, (send_counts, send_displs), MPI.INT64_T],
        [recv, (recv_counts, recv_displs), MPI.INT64_T],
    )
    return np.split(recv, np.cumsum(recv_counts)[:-1])
