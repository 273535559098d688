"""The CUDA code of a compiled step, checked without a GPU: generated, not run.

Pack and unpack maps must become kernels, MPI calls must stay on the host, nothing may
synchronize the whole device, and the host may wait for the stream once per exchange (the
wait standard MPI needs before sending), plus once when the step returns to Python.
"""

from __future__ import annotations

import re

import dace
import numpy as np
import pytest

import gt4py_halo as gh

EXCHANGES = 2


@pytest.fixture(scope="module")
def generated():
    d = gh.CartesianDecomposition((17, 11), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(device="gpu")
    def step(a, b):
        ex.exchange(a)
        for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
            b[i, j] = a[i + 1, j] + a[i - 1, j] + a[i, j + 1] + a[i, j - 1]
        ex.exchange(b)

    a = np.zeros(d.allocated_shape)
    codes = step.to_sdfg(a, a.copy()).generate_code()
    host = next(c.clean_code for c in codes if c.language == "cpp" and "__program_" in c.clean_code)
    cuda = next(c.clean_code for c in codes if c.language == "cu")
    return host[host.index("void __program_") :], cuda


def test_pack_and_unpack_are_kernels(generated):
    body, cuda = generated
    directions = 8
    for kind in ("pack", "unpack"):
        assert body.count(f"__dace_runkernel_{kind}_") == EXCHANGES * directions
        assert cuda.count("__global__") >= 2 * EXCHANGES * directions


def test_mpi_stays_on_the_host(generated):
    body, cuda = generated
    assert body.count("MPI_Startall(") == EXCHANGES
    assert body.count("MPI_Waitall(") == EXCHANGES
    assert not re.search(r"MPI_\w+\(", cuda), "an MPI call in device code"


def test_one_stream_wait_per_exchange_and_no_device_wide_sync(generated):
    body, _ = generated
    assert "cudaDeviceSynchronize" not in body
    assert body.count("cudaStreamSynchronize") <= EXCHANGES + 1  # + the return to Python
    before_send = body.split("MPI_Startall(")
    for part in before_send[:-1]:
        assert part.rstrip().endswith("cudaStreamSynchronize(__dace_current_stream));")
