"""What a GT4Py program needs to compile under ``mpirun``.

Two problems, checked with gt4py 1.2.3:

- gt4py compiles in a ``spawn`` process pool by default. A spawned child re-imports the main
  module, whose ``mpi4py`` import initializes MPI with the launcher's PMI settings it inherited;
  ``PMI_Init`` fails and the pool dies with ``BrokenProcessPool``, on any number of ranks.
  ``use_compile_threads`` switches to a thread pool.
- Every rank compiling the same program wastes the node's cores on identical work, and on a
  shared file system it rests on file locks to keep ranks out of each other's build folder.
  ``compile_on_one_rank`` lets one rank fill gt4py's persistent build cache before the others
  load from it.

Also, ``warn_if_oversubscribed``: GT4Py's DaCe and gtfn CPU backends parallelize stencils with
OpenMP, which starts as many threads per process as the node has cores unless
``OMP_NUM_THREADS`` says otherwise; with several ranks per node that oversubscribes the cores,
and each parallel region then waits for threads that are not running (a diffusion step here
took 250x longer with 2 ranks of 2 threads on 2 cores than with 1 thread each).

gt4py is imported lazily: importing it takes seconds, and ``gt4py_halo`` is also used without it.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable

from mpi4py import MPI

from gt4py_halo.build_once import build_on_root

_JOBS_MODE_VARIABLE = "GT4PY_BUILD_JOBS_MODE"


def use_compile_threads() -> None:
    """Make gt4py compile in threads instead of spawned processes, unless the user chose.

    gt4py reads ``GT4PY_BUILD_JOBS_MODE`` once, when ``gt4py.next.config`` is imported, and
    creates its compile pool from ``config.BUILD_JOBS_MODE`` at the first compilation. So before
    that import the environment variable is set, and after it the config value is; a process
    pool already created is shut down so that the next compilation uses threads. A mode the
    user set in the environment is kept. Call it before the first compilation; calling it again
    does nothing.
    """
    if os.environ.get(_JOBS_MODE_VARIABLE):
        return
    config = sys.modules.get("gt4py.next.config")
    if config is None:
        os.environ[_JOBS_MODE_VARIABLE] = "thread"
        return
    if config.BUILD_JOBS_MODE is config.BuildJobsMode.PROCESS:
        from gt4py.next.otf import runners

        config.BUILD_JOBS_MODE = config.BuildJobsMode.THREAD
        runners.reset_default_runner()


def compile_on_one_rank[T](comm: MPI.Comm, compile_fn: Callable[[], T], root: int = 0) -> T:
    """Run ``compile_fn`` on ``root`` first, then on the other ranks; collective over ``comm``.

    ``compile_fn`` compiles gt4py programs, by ``program.compile(...)`` or by a first call
    (which may run on small fields: a DaCe program is compiled for field types, not sizes).
    With a persistent build cache that all ranks see (``GT4PY_BUILD_CACHE_LIFETIME=persistent``
    and ``GT4PY_BUILD_CACHE_DIR``, read when gt4py is imported), ``root`` compiles into it and
    the other ranks only load the library, together. With gt4py's default session cache every
    rank builds a private copy; that stays correct, only the other ranks then compile after
    ``root`` instead of loading.

    Returns what ``compile_fn`` returned on this rank, after its compilations finished. If it
    fails on ``root`` it raises there and the other ranks raise ``RuntimeError`` instead of
    waiting forever (``build_once.build_on_root``).
    """
    use_compile_threads()
    return build_on_root(
        comm,
        build=lambda: _compile_and_wait(compile_fn),
        share=lambda _: None,
        load=lambda _: _compile_and_wait(compile_fn),
        root=root,
    )


def _compile_and_wait[T](compile_fn: Callable[[], T]) -> T:
    """``compile_fn()``, then wait: threaded compilations go on after ``compile()`` returns."""
    import gt4py.next as gtx

    result = compile_fn()
    gtx.wait_for_compilation()
    return result


#: What MPI launchers put in the environment: ranks on this node, and this rank among them
#: (MPICH's Hydra, Open MPI, Slurm).
_LOCAL_SIZE = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")
_LOCAL_RANK = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
_warned = False


def quiet_library_reloads() -> None:
    """DaCe loads a library this process has loaded already (a step made twice, GT4Py loading
    a program again) from a copy, so that each keeps state of its own, and warns that it does:
    expected, so that one message is ignored, process-wide (from ``import gt4py_halo`` on)."""
    warnings.filterwarnings(
        "ignore",
        message="Library .* already loaded, renaming file",
        category=UserWarning,
        module="dace.codegen.compiled_sdfg",
    )


def warn_if_oversubscribed() -> None:
    """Warn once per node (on its first rank) if its ranks would run more OpenMP threads
    than it has cores. Reads the environment only: no MPI call, so any rank may call it."""
    global _warned
    if _warned:
        return
    _warned = True
    ranks = _first_int(_LOCAL_SIZE, default=1)
    cores = os.cpu_count() or 1
    threads = openmp_threads()
    if ranks * threads > cores and _first_int(_LOCAL_RANK, default=0) == 0:
        fix = (
            f"set OMP_NUM_THREADS={max(cores // ranks, 1)}"
            if threads > 1
            else f"run at most {cores} rank(s) per node"
        )
        warnings.warn(
            f"{ranks} MPI rank(s) on this node with {threads} OpenMP thread(s) each, on "
            f"{cores} core(s): GT4Py's CPU stencils will crawl; {fix}",
            stacklevel=4,  # the user's line that built the first decomposition
        )


def openmp_threads() -> int:
    """The threads an OpenMP parallel region of this process starts: ``OMP_NUM_THREADS``
    (its first level), else OpenMP's default, one per core this process may run on (where
    the system says which: Linux; else one per core)."""
    threads = _first_int(("OMP_NUM_THREADS",), default=0)
    if threads:
        return threads
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _first_int(names: tuple[str, ...], default: int) -> int:
    """The first of the environment variables ``names`` that holds an integer (OpenMP's
    ``OMP_NUM_THREADS=4,2`` counts its first level)."""
    for name in names:
        value = os.environ.get(name, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return default
