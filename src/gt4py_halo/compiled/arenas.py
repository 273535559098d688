"""Where a cartesian exchange's messages lie: per field group, a send and a receive *arena*.

Fields of one exchange with the same shape and dtype form a *group*; each group has one send
and one receive arena, a flat buffer holding every direction's boxes (*segments*) back to
back. The MPI expansion packs into and unpacks from them (``transports/mpi/expansion.py``), and a
producer stencil may write its field's send segments itself (``producer_fusion.py``): both
index the arena with ``Segment.flat_index``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from dace.symbolic import symstr

from gt4py_halo.decomposition.cartesian import direction_box


@dataclasses.dataclass(frozen=True)
class Segment:
    """The boxes towards (from) one direction of a field group, inside the group's arena:
    field ``j`` of the group at ``offset + j * size``, each box in C order."""

    direction: int
    toward: tuple[int, ...]  # the direction's offset per decomposed axis
    bounds: list[tuple[Any, Any]]
    box: list[Any]  # extents of the box, then the levels
    offset: Any

    @property
    def size(self) -> Any:
        return math.prod(self.box)

    def flat_index(self, coordinates: list[str], j: int) -> str:
        """Arena index of field ``j``'s element at ``coordinates`` (expressions in the
        field's index space: the decomposed axes, then the levels), inside this box."""
        starts = [a for a, _ in self.bounds] + [0] * (len(self.box) - len(self.bounds))
        terms = [f"{symstr(self.offset)} + {j} * ({symstr(self.size)})"]
        for d, (coordinate, start) in enumerate(zip(coordinates, starts)):
            stride = math.prod(self.box[d + 1 :])
            terms.append(f"(({coordinate}) - ({symstr(start)})) * ({symstr(stride)})")
        return " + ".join(terms)


@dataclasses.dataclass(frozen=True)
class Arena:
    """The send (receive) buffer of a field group: all its directions' segments back to back."""

    name: str
    group: int
    fields: tuple[int, ...]
    dtype: Any
    segments: list[Segment]
    length: Any


def field_groups(fields: list[Any]) -> list[tuple[int, ...]]:
    """The fields of one exchange that share buffers and messages: those of the same shape
    and dtype (the arguments of one shape share their shape symbols, ``program.py``)."""
    groups: dict[tuple, list[int]] = {}
    for i, desc in enumerate(fields):
        groups.setdefault((tuple(map(str, desc.shape)), desc.dtype), []).append(i)
    return [tuple(g) for g in groups.values()]


def arenas(node: Any, fields: list[Any], sending: bool) -> tuple[Arena, ...]:
    """The arenas ``node`` sends from (receives into), one per field group.

    A send arena lists its segments in the exchange's ``arena_order`` (directions that lead
    to the same rank on every rank side by side, faces last: ``side_by_side``), a receive
    arena by the direction its sender sent them towards (the opposite one). So the segments
    exchanged with one neighbour rank come in the same order on both sides, side by side:
    one contiguous message per neighbour rank and group (of a few blocks only where a segment
    in the middle of them goes in place): MPI sends one contiguous message far faster than
    several messages or a datatype over blocks with gaps (docs/compiled_steps.md).

    Box bounds are symbolic in the fields' shapes (``direction_box``, the same geometry the
    runtime plan is built from); along a direction, widths are halo widths (ints), across it
    owned sizes (> 0), so an empty box is known when the node is lowered.
    """
    shapes = tuple((tuple(desc.shape), desc.dtype) for desc in fields)
    spec = node.spec
    return _layout(spec.uid, spec.halo, spec.directions, spec.arena_order, shapes, sending)


@functools.lru_cache(maxsize=256)
def _layout(
    uid: str,
    halo: tuple[tuple[int, int], ...],
    offsets: tuple[tuple[int, ...], ...],
    sent_order: tuple[int, ...],
    shapes: tuple[tuple[tuple[Any, ...], Any], ...],
    sending: bool,
) -> tuple[Arena, ...]:
    """``arenas``, computed once per exchange and field shapes: the passes and the expansion
    that ask for it get the same layout."""
    fields = [_Shaped(shape, dtype) for shape, dtype in shapes]
    opposite = opposites(offsets)
    order = sent_order if sending else [opposite[k] for k in sent_order]
    found = []
    for g, group in enumerate(field_groups(fields)):
        desc = fields[group[0]]
        owned = [desc.shape[k] - lo - hi for k, (lo, hi) in enumerate(halo)]
        levels = list(desc.shape[len(halo) :])
        segments, offset = [], 0
        for k in order:
            bounds = direction_box(owned, halo, offsets[k], sending)
            if any(d != 0 and b - a == 0 for d, (a, b) in zip(offsets[k], bounds)):
                continue
            segment = Segment(k, offsets[k], bounds, [b - a for a, b in bounds] + levels, offset)
            segments.append(segment)
            offset = offset + len(group) * segment.size
        if segments:
            name = f"{uid}_{'s' if sending else 'r'}arena_{g}"
            found.append(Arena(name, g, group, desc.dtype, segments, offset))
    return tuple(found)


@dataclasses.dataclass(frozen=True)
class _Shaped:
    """What the layout reads of a field's descriptor."""

    shape: tuple[Any, ...]
    dtype: Any


def opposites(offsets: list[tuple[int, ...]]) -> dict[int, int]:
    """Direction index -> the index of the opposite direction."""
    return {k: offsets.index(tuple(-o for o in d)) for k, d in enumerate(offsets)}
