"""Message buffers laid out from a plan, and vectorized copies between them and fields.

A ``MessageBuffer`` is allocated once per (plan, neighbour, field signature) and reused for
every exchange. The copies an exchange makes are planned in two steps: buffer-side views are
fixed when the buffer is built; field-side views are bound to the fields of a call and kept
while the next call passes the same arrays (the usual case: a model exchanges its own state
every step), so a repeated exchange only runs the copies. Boxes (cartesian) are copied as
strided blocks; index lists (unstructured) with one gather (``take``) or scatter per field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from gt4py_halo.decomposition.plan import BoxRegion, FieldSpec, Region, segment_offsets

Copy = Callable[[], Any]


def _segment(buffer: Any, offset: int, count: int, spec: FieldSpec) -> Any:
    nbytes = count * spec.cell_bytes
    return buffer[offset : offset + nbytes].view(spec.dtype).reshape((count, *spec.level_shape))


def _region_views(
    region: Region, segment: Any, spec: FieldSpec, xp: ModuleType
) -> list[tuple[Any, Any]]:
    """(field index, buffer view) pairs covering ``region`` in message order."""
    if not isinstance(region, BoxRegion):
        return [(xp.asarray(region.indices), segment)]
    views, start = [], 0
    for box in region.boxes:
        view = segment[start : start + box.size].reshape(box.shape + spec.level_shape)
        views.append((box.slices, view))
        start += box.size
    return views


class MessageBuffer:
    """One contiguous byte buffer holding every field's cells of one message."""

    def __init__(self, region: Region, specs: Sequence[FieldSpec], xp: ModuleType) -> None:
        offsets, nbytes = segment_offsets(region.count, specs)
        self.data = xp.empty(nbytes, dtype=xp.uint8)
        self._xp = xp
        self._views = [
            _region_views(region, _segment(self.data, offset, region.count, spec), spec, xp)
            for offset, spec in zip(offsets, specs)
        ]

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    def pack_copies(self, arrays: Sequence[Any]) -> list[Copy]:
        """The copies that pack ``arrays`` into this buffer."""
        xp, copies = self._xp, []
        for array, views in zip(arrays, self._views):
            for index, view in views:
                if isinstance(index, tuple):
                    copies.append(partial(xp.copyto, view, array[index]))
                else:
                    copies.append(partial(xp.take, array, index, axis=0, out=view))
        return copies

    def unpack_copies(self, arrays: Sequence[Any]) -> list[Copy]:
        """The copies that unpack this buffer into ``arrays``."""
        xp, copies = self._xp, []
        for array, views in zip(arrays, self._views):
            for index, view in views:
                if isinstance(index, tuple):
                    copies.append(partial(xp.copyto, array[index], view))
                else:
                    copies.append(partial(array.__setitem__, index, view))
        return copies


def self_copies(
    send: BoxRegion, recv: BoxRegion, arrays: Sequence[Any], xp: ModuleType
) -> list[Copy]:
    """Copies from owned to halo cells of the same rank (its own periodic neighbour).

    Send and receive boxes pair up in plan order with equal shapes; they never overlap, so the
    copies need no buffer and may run while messages are in flight.
    """
    return [
        partial(xp.copyto, array[dst.slices], array[src.slices])
        for array in arrays
        for src, dst in zip(send.boxes, recv.boxes)
    ]
