"""The 'ghex' transport's C++ (transports/ghex/native.py): built once per environment into the
cache folder, by one process while others that need it at the same time wait for it, then
loaded by every later process without building."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("ghex")

SCRIPT = """
import numpy as np
import gt4py_halo as gh
d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True)
field = np.zeros(d.allocated_shape)
field[d.owned] = 1.0
gh.make_exchange(d, backend="ghex").exchange(field)
assert (field == 1.0).all(), field
"""


def run_all(count: int, cache: str) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": cache, "OMP_NUM_THREADS": "1"}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for run in runs:
        _, err = run.communicate(timeout=240)
        assert run.returncode == 0, err


def built(cache: str) -> list[os.stat_result]:
    folder = os.path.join(cache, "gt4py_halo")
    return [os.stat(os.path.join(folder, n)) for n in os.listdir(folder) if n.endswith(".so")]


def test_built_once_then_loaded(tmp_path):
    cache = str(tmp_path)
    run_all(2, cache)  # both need it at once: one builds, the other waits and loads
    first = built(cache)
    assert len(first) == 1
    run_all(1, cache)  # a later process loads it
    assert [s.st_mtime_ns for s in built(cache)] == [first[0].st_mtime_ns]
