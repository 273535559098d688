"""An exchange started and never finished is finished at exit, with a warning, before MPI is
finalized: its halos written, the job ending cleanly (with ``mpi`` its requests were freed
first by Python's finalizers and the wait failed, a false ``RanksDisagreeError``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import atexit
import sys

def report():  # registered first: runs after every other exit handler
    with open(f"{sys.argv[2]}/values_{rank}", "w") as out:
        out.write(repr(sorted(set(a.ravel().tolist()))))

atexit.register(report)

import numpy as np
from mpi4py import MPI
import gt4py_halo as gh

rank = MPI.COMM_WORLD.rank
d = gh.CartesianDecomposition((8, 6), halo=1, periodic=True)
a = np.full(d.allocated_shape, -1.0)
a[d.owned] = 50.0 + rank
h = gh.make_exchange(d, backend=sys.argv[1]).start(a)
"""


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_an_exchange_in_flight_at_exit_is_finished(tmp_path, backend):
    script = tmp_path / "never_finished.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        ["mpirun", "-n", "2", sys.executable, "-m", "mpi4py", str(script), backend, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("started and never finished: finished at exit") == 2
    # every halo cell written: each rank holds its own value and its neighbour's, no -1
    for rank in range(2):
        assert (tmp_path / f"values_{rank}").read_text() == "[50.0, 51.0]"
