"""Expected local arrays, computed from global coordinates alone (no plan, no MPI).

Each global cell holds ``value(gid, level)``; a halo cell must hold the value of the global
cell it mirrors (wrapped in periodic dimensions) and stay at ``SENTINEL`` beyond a
non-periodic boundary.
"""

from __future__ import annotations

import numpy as np

SENTINEL = -7


def global_values(global_shape, level_shape, dtype):
    """value = linear global index * levels + level index, exact in every supported dtype."""
    nlev = int(np.prod(level_shape, dtype=np.int64))
    gid = np.arange(int(np.prod(global_shape))).reshape(global_shape)
    values = gid[(...,) + (None,) * len(level_shape)] * nlev
    values = values + np.arange(nlev).reshape(level_shape)
    return values.astype(dtype)


def expected_local(d, level_shape, dtype):
    """What the whole local array of cartesian decomposition ``d`` holds after an exchange."""
    glob = global_values(d.global_shape, level_shape, dtype)
    coords, valid = [], []
    for n, (lo, hi), owned, periodic in zip(d.global_shape, d.halo, d.global_slices, d.periodic):
        g = np.arange(owned.start - lo, owned.stop + hi)
        valid.append(periodic | ((g >= 0) & (g < n)))
        coords.append(g % n)
    result = glob[np.ix_(*coords)]
    mask = np.logical_and.reduce(np.meshgrid(*valid, indexing="ij"))
    result[~mask] = SENTINEL
    return result


def filled_local(d, level_shape, dtype, order="C"):
    """A local array with owned cells set and every halo cell at ``SENTINEL``."""
    a = np.full(d.allocated_shape + tuple(level_shape), SENTINEL, dtype=dtype, order=order)
    a[d.owned] = global_values(d.global_shape, level_shape, dtype)[d.global_slices]
    return a


def finish_out_of_order(handles, rank):
    """Finish split exchanges in another order on each rank: odd ranks backwards, rank 2
    from the middle, the others in order."""
    order = list(range(len(handles)))
    if rank % 2:
        order.reverse()
    elif rank == 2:
        order = order[2:] + order[:2]
    for i in order:
        handles[i].finish()


def gpu_or_skip(comm, backend: str = "mpi"):
    """CuPy, with this rank's GPU current, where every rank has a GPU and ``backend`` can run
    there; else the test is skipped on every rank alike (a skip on some ranks only would leave
    the others in the test's collectives). CI has no GPU. ``nccl`` needs a GPU per rank (NCCL
    refuses two ranks on one device) and CuPy with NCCL."""
    import pytest

    from gt4py_halo import transports

    def why_not() -> str | None:
        try:
            import cupy
        except ImportError:
            return "no CuPy"
        count = cupy.cuda.runtime.getDeviceCount()
        if count == 0:
            return "no GPU"
        if backend == "nccl" and not transports.installed("nccl"):
            return "no CuPy with NCCL"
        if backend == "nccl" and comm.size > count:
            return f"nccl needs a GPU per rank: {comm.size} ranks, {count} GPU(s)"
        return None

    reasons = [r for r in comm.allgather(why_not()) if r]
    if reasons:
        pytest.skip(reasons[0])
    import cupy

    cupy.cuda.Device(comm.rank % cupy.cuda.runtime.getDeviceCount()).use()
    return cupy
