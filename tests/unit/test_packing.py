"""Message buffers of many small boxes are packed with one gather and unpacked with one scatter
per field (``runtime/packing.py``): the same bytes and halos as one copy per box, in every
memory layout a field may have."""

from __future__ import annotations

import numpy as np
import pytest

from gt4py_halo.decomposition.plan import Box, BoxRegion, FieldSpec
from gt4py_halo.runtime import packing

# a rank's send region to a neighbour along axis 0 (faces and corners, not mergeable) and its
# receive region (two halo rows)
SEND = BoxRegion(
    (
        Box((1, 1), (2, 9)),
        Box((4, 1), (5, 9)),
        Box((1, 0), (2, 1)),
        Box((1, 9), (2, 10)),
        Box((4, 0), (5, 1)),
        Box((4, 9), (5, 10)),
    )
)
RECV = BoxRegion((Box((0, 0), (1, 10)), Box((5, 0), (6, 10))))


def layouts(levels: tuple[int, ...]) -> dict[str, np.ndarray]:
    shape = (6, 10, *levels)
    values = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    padded = np.zeros((7, 13, *levels))[: shape[0], 1 : 1 + shape[1]]  # GT4Py pads so
    padded[...] = values
    return {
        "C": values.copy(),
        "Fortran": np.asfortranarray(values),
        "padded": padded,
        "levels outermost": np.moveaxis(np.ascontiguousarray(np.moveaxis(values, -1, 0)), 0, -1),
        "negative strides": np.ascontiguousarray(values[::-1])[::-1],
    }


@pytest.mark.parametrize("levels", [(), (3,)], ids=["no levels", "3 levels"])
@pytest.mark.parametrize(
    "layout", ["C", "Fortran", "padded", "levels outermost", "negative strides"]
)
def test_gathered_boxes_equal_box_copies(monkeypatch, levels, layout):
    spec = FieldSpec(np.dtype(np.float64), levels)
    results = []
    for per_call in (0, 10**6):  # one copy per box; one gather or scatter
        monkeypatch.setattr(packing, "GATHER_ELEMENTS_PER_CALL", per_call)
        monkeypatch.setattr(packing, "SCATTER_ELEMENTS_PER_CALL", per_call)
        field = layouts(levels)[layout]
        send = packing.MessageBuffer(SEND, [spec], np)
        pack = send.pack_copies([field])
        for copy in pack:
            copy()
        recv = packing.MessageBuffer(RECV, [spec], np)
        recv.data[:] = np.arange(recv.nbytes) % 251
        unpack = recv.unpack_copies([field])
        for copy in unpack:
            copy()
        results.append((send.data.copy(), field.copy(), len(pack), len(unpack)))
    (sent, unpacked, *_), (gathered, scattered, pack_calls, unpack_calls) = results
    np.testing.assert_array_equal(gathered, sent)
    np.testing.assert_array_equal(scattered, unpacked)
    if layout == "negative strides":  # no offsets in its memory: a copy per box
        assert (pack_calls, unpack_calls) == (6, 2)
    else:
        assert (pack_calls, unpack_calls) == (1, 1)


def test_large_messages_are_copied_box_by_box():
    """Where a gather would cost more than the copy calls it saves."""
    spec = FieldSpec(np.dtype(np.float64), (1000,))
    field = np.zeros((6, 10, 1000))
    assert len(packing.MessageBuffer(SEND, [spec], np).pack_copies([field])) == 6
    small = FieldSpec(np.dtype(np.float64), (8,))
    assert len(packing.MessageBuffer(SEND, [small], np).pack_copies([field[..., :8]])) == 1
