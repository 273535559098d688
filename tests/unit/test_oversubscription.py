"""More OpenMP threads per node than cores is warned about once, from the environment the
MPI launcher sets (no MPI call: any rank may build its first decomposition alone)."""

from __future__ import annotations

import os
import warnings

import pytest
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo import gt4py_support

LAUNCHER = ("MPI_LOCALNRANKS", "MPI_LOCALRANKID", "OMP_NUM_THREADS")


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(gt4py_support, "_warned", False)
    for name in LAUNCHER + gt4py_support._LOCAL_SIZE + gt4py_support._LOCAL_RANK:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def build() -> None:
    gh.CartesianDecomposition((8, 6), halo=1, comm=MPI.COMM_SELF)


def test_more_threads_than_cores_is_warned_once(fresh):
    fresh.setenv("MPI_LOCALNRANKS", str(2 * (os.cpu_count() or 1)))  # OMP_NUM_THREADS unset
    with pytest.warns(UserWarning, match="OpenMP thread.*set OMP_NUM_THREADS=1"):
        build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build()  # once per process


def test_more_ranks_than_cores_with_one_thread_each_says_so(fresh):
    fresh.setenv("MPI_LOCALNRANKS", str(2 * (os.cpu_count() or 1)))
    fresh.setenv("OMP_NUM_THREADS", "1")
    with pytest.warns(UserWarning, match=r"1 OpenMP thread\(s\) each.*run at most \d+ rank"):
        build()


@pytest.mark.parametrize("rank", ["1", None])
def test_no_warning_when_the_cores_suffice_or_elsewhere_on_the_node(fresh, rank):
    if rank is None:  # one rank, one thread: enough cores
        fresh.setenv("OMP_NUM_THREADS", "1")
    else:  # oversubscribed, but not this node's first rank: that one warns
        fresh.setenv("MPI_LOCALNRANKS", str(2 * (os.cpu_count() or 1)))
        fresh.setenv("MPI_LOCALRANKID", rank)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build()


def test_threads_per_rank_follow_openmp(fresh):
    """What a parallel region starts: OMP_NUM_THREADS's first level, else one thread per core
    this process may run on (OpenMP's default)."""
    assert gt4py_support.openmp_threads() == len(os.sched_getaffinity(0))
    fresh.setenv("OMP_NUM_THREADS", "4,2")
    assert gt4py_support.openmp_threads() == 4
