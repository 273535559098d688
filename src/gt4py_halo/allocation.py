"""Fields whose memory does not alias: GT4Py's CPU layout, start addresses spread over 4 KiB.

GT4Py's CPU allocator aligns the first element of every field to 64 bytes inside a
page-aligned allocation, so every field starts at the same address modulo 4 KiB. A loop that
walks many fields at once (GT4Py fuses the stencils of a program into one loop; a step's
exchanges pack many fields) then finds all its streams on the same few L1 cache sets, which
hold 8 lines each: they evict each other. ``staggered_allocator`` allocates the same layout,
strides and alignment, each field 832 bytes (13 cache lines) further along the 4 KiB than the
last, cycling through all 64 line positions. Values, strides and compiled code are those of
GT4Py's own fields; only addresses differ. ``docs/benchmarks.md`` ("Loop order on GT4Py's
default fields") has the measurement.
"""

from __future__ import annotations

import itertools
from typing import Any

#: Bytes between the start addresses of successive fields, modulo 4 KiB: 13 lines of 64 bytes
#: (13 is prime to 64, so 64 fields in a row all start on different lines).
STAGGER = 13 * 64
_PAGE = 4096


def staggered_allocator() -> Any:
    """A GT4Py field allocator (``gtx.zeros(domain, allocator=...)``, ``gtx.as_field``, ...)
    for CPU fields: GT4Py's standard CPU layout and alignment, start addresses spread over
    4 KiB (module docstring). Allocations from one allocator cycle through the offsets."""
    from gt4py.next import custom_layout_allocators as layouts
    from gt4py.storage import allocators

    class _StaggeredBuffers(allocators.NDArrayBufferAllocator):
        def malloc(self, length: int, device_id: int) -> Any:
            buffer = super().malloc(length + _PAGE, device_id)
            shift = (next(starts) - self.array_utils.byte_bounds(buffer)[0]) % _PAGE
            return buffer[shift : shift + length]

    starts = itertools.cycle(k * STAGGER % _PAGE for k in range(_PAGE // 64))
    standard = layouts.StandardCPUFieldBufferAllocator()
    allocator = layouts.BaseFieldBufferAllocator(
        device_type=standard.device_type,
        array_utils=standard.array_utils,
        layout_mapper=standard.layout_mapper,
        byte_alignment=standard.byte_alignment,
    )
    # the buffers GT4Py's allocator cuts fields from, here with a shifting start
    object.__setattr__(
        allocator,
        "buffer_allocator",
        _StaggeredBuffers(standard.device_type, standard.array_utils),
    )
    return allocator
