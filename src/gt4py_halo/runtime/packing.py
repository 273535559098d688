"""Message buffers laid out from a plan, and vectorized copies between them and fields.

A ``MessageBuffer`` is allocated once per (plan, neighbour, field signature) and reused for
every exchange; packing and unpacking only copy between views fixed at build time and the
field, so an exchange allocates no array memory. Boxes (cartesian) are copied as strided
blocks; index lists (unstructured) with one gather (``take``) or scatter per field.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from gt4py_halo.decomposition.plan import BoxRegion, FieldSpec, Region, segment_offsets


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
    """One contiguous byte buffer holding every field's cells of one message, with copiers.

    ``data`` lets a receive buffer share the memory of a send buffer: a rank that is its own
    neighbour unpacks straight from what it packed.
    """

    def __init__(
        self, region: Region, specs: Sequence[FieldSpec], xp: ModuleType, data: Any = None
    ) -> None:
        offsets, nbytes = segment_offsets(region.count, specs)
        self.data = xp.empty(nbytes, dtype=xp.uint8) if data is None else data
        self._xp = xp
        self._views = [
            _region_views(region, _segment(self.data, offset, region.count, spec), spec, xp)
            for offset, spec in zip(offsets, specs)
        ]

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    def pack(self, arrays: Sequence[Any]) -> None:
        xp = self._xp
        for array, views in zip(arrays, self._views):
            for index, view in views:
                if isinstance(index, tuple):
                    xp.copyto(view, array[index])
                else:
                    xp.take(array, index, axis=0, out=view)

    def unpack(self, arrays: Sequence[Any]) -> None:
        for array, views in zip(arrays, self._views):
            for index, view in views:
                array[index] = view
