"""ICON4Py imports mpi4py with ``mpi4py.rc.initialize = False`` and initializes MPI later, if at
all: gt4py_halo imported after it still builds decompositions (it initializes MPI itself)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import icon4py.model.common.decomposition.mpi_decomposition  # sets rc.initialize = False
from mpi4py import MPI
assert not MPI.Is_initialized()
import numpy as np
import gt4py_halo as gh
d = gh.UnstructuredDecomposition({"cell": (np.arange(4), np.arange(0))})
field = np.arange(4.0)
gh.make_exchange(d, backend="mpi").exchange(field, dim="cell")
print("exchanged", d)
"""


def test_gt4py_halo_works_after_icon4pys_mpi_module():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "exchanged UnstructuredDecomposition({cell: 4+0" in result.stdout


def test_without_icon4py_the_adapter_says_what_to_install():
    script = (
        "import sys; sys.modules['icon4py'] = None\n"
        "try:\n    import gt4py_halo.icon4py\nexcept ImportError as error:\n    print(error)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert "pip install 'gt4py_halo[icon4py]'" in result.stdout, result.stderr
