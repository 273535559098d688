"""``gh.staggered_allocator``: GT4Py's CPU fields, laid out as GT4Py lays them out, whose start
addresses differ modulo 4 KiB (GT4Py's own all start alike), and which GT4Py programs and
compiled steps take as they take GT4Py's own."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
from mpi4py import MPI

import gt4py_halo as gh

I, J, K = (
    gtx.Dimension("I"),
    gtx.Dimension("J"),
    gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL),
)


def test_fields_keep_gt4pys_layout_and_start_on_different_cache_lines():
    allocator = gh.staggered_allocator()
    values = np.arange(7 * 9 * 4, dtype=np.float64).reshape(7, 9, 4)
    ours = [gtx.as_field([I, J, K], values, allocator=allocator) for _ in range(64)]
    theirs = gtx.as_field([I, J, K], values)
    starts = {f.ndarray.ctypes.data % 4096 for f in ours}
    assert len(starts) == 64 and all(s % 64 == 0 for s in starts)
    for field in ours:
        assert field.ndarray.strides == theirs.ndarray.strides
        np.testing.assert_array_equal(field.asnumpy(), values)
    zeros = gtx.zeros({I: 5, J: 3}, dtype=np.float32, allocator=allocator)
    assert zeros.ndarray.strides == gtx.zeros({I: 5, J: 3}, dtype=np.float32).ndarray.strides
    assert not zeros.asnumpy().any()


@gh.program(comm=MPI.COMM_SELF)
def scale(a, b):
    b[:] = 2.0 * a + 1.0


def test_a_compiled_step_takes_them_as_gt4pys_own():
    allocator = gh.staggered_allocator()
    values = np.linspace(0.0, 1.0, 6 * 5).reshape(6, 5)
    a, b = (gtx.as_field([I, J], values, allocator=allocator) for _ in range(2))
    scale(a, b)
    c, d = gtx.as_field([I, J], values), gtx.as_field([I, J], 0 * values)
    scale(c, d)
    np.testing.assert_array_equal(b.asnumpy(), d.asnumpy())
    np.testing.assert_array_equal(b.asnumpy(), 2.0 * values + 1.0)
