"""A GT4Py stencil run over many steps gives the same bits on any number of ranks.

The demo's diffusion (``examples/diffusion_2d.py``) runs on ``MPI_COMM_WORLD``, is gathered
and compared with rank 0 running alone on ``MPI_COMM_SELF``. Any wrong halo cell spreads
through the steps into the compared cells, and every cell's update does the same arithmetic
however the grid is cut, so equality must be exact. The shape divides evenly over none of 2,
3 and 4 ranks.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from mpi4py import MPI

import gt4py_halo as gh

GLOBAL_SHAPE = (37, 29)
STEPS = 30


@pytest.mark.mpi
@pytest.mark.parametrize("cut", ["balanced", "columns"])
def test_gathered_result_equals_single_rank_bit_for_bit(diffusion: ModuleType, cut: str) -> None:
    comm = MPI.COMM_WORLD
    proc_grid = None if cut == "balanced" else (1, comm.size)
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, proc_grid=proc_grid)
    gathered = diffusion.run(d, STEPS).field
    equal = None
    if comm.rank == 0:
        single = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True, comm=MPI.COMM_SELF)
        reference = diffusion.run(single, STEPS).field
        assert not np.array_equal(reference, diffusion.run(single, 0).field), "nothing diffused"
        equal = bool(np.array_equal(gathered, reference))
    assert comm.bcast(equal, root=0), f"gathered result differs from the 1-rank result on {d}"
