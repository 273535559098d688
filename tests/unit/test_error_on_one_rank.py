"""An exception on one rank only ends the whole job under ``python -m mpi4py``; no hang.

Rank 1 passes a wrongly shaped field and raises before posting anything; rank 0 has already
posted its messages and waits for rank 1's. mpi4py's runner aborts the job on the uncaught
exception, so mpirun returns non-zero within seconds.
"""

from __future__ import annotations

import subprocess
import sys
import time

SCRIPT = """
import numpy as np
from mpi4py import MPI
import gt4py_halo as gh
d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
shape = d.allocated_shape if MPI.COMM_WORLD.rank == 0 else (1, 1)
gh.make_exchange(d).exchange(np.zeros(shape))
"""


def test_uncaught_error_on_one_rank_aborts_the_job(tmp_path):
    script = tmp_path / "one_rank_fails.py"
    script.write_text(SCRIPT)
    started = time.monotonic()
    result = subprocess.run(
        ["mpirun", "-n", "2", sys.executable, "-m", "mpi4py", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "FieldError: field 0 has shape (1, 1)" in result.stderr
    assert time.monotonic() - started < 60
