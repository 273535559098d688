"""Without GHEX installed, asking for the 'ghex' backend says what to install; 'mpi' works."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["ghex"] = None  # makes `import ghex` fail exactly as when it is not installed
import numpy as np
import gt4py_halo as gh
d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
gh.make_exchange(d, backend="mpi").exchange(np.zeros(d.allocated_shape))
try:
    gh.make_exchange(d, backend="ghex")
except gh.BackendUnavailableError as error:
    print("raised:", error)
print("auto:", gh.make_exchange(d, backend="auto").backend)
"""


def test_missing_ghex_is_a_clear_error():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "raised: the 'ghex' backend needs GHEX, which is not installed" in result.stdout
    assert "pip install 'gt4py_halo[ghex]'" in result.stdout
    assert "auto: mpi" in result.stdout
