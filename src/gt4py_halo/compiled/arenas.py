"""Where a cartesian exchange's messages lie: per field group, a send and a receive *arena*.

Fields of one exchange with the same shape and dtype form a *group*; each group has one send
and one receive arena, a flat buffer holding every direction's boxes (*segments*) back to
back. The MPI expansion packs into and unpacks from them (``transports/mpi/expansion.py``), and a
producer stencil may write its field's send segments itself (``producer_fusion.py``): both
index the arena with ``Segment.flat_index``.

Where each segment lies in its arena is decided at run time (``place_segments``), from the
plan's ``order`` (``side_by_side``: directions that lead to one rank side by side, for this
rank's process grid): so the code generated for a step is the same on every process grid,
one build serves them all, and each neighbour's message is still one contiguous block. So is
which axes wrap onto the rank (periodic, one rank across): a blocking exchange's boxes span
their halos (``wrapped_box``), through a symbol per axis set from the plan with the offsets.
Before the segments exchanged with one neighbour rank lies room for a *stamp*
(``stamps.STAMP_BYTES``), which the MPI transport sends with them: which call of which step
sent the message, so that ranks out of step are told apart from ranks in step
(``compiled/stamps.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import dace
import sympy
from dace import dtypes
from dace.symbolic import symstr

from gt4py_halo.compiled.graph import HostCode, add_host_tasklet
from gt4py_halo.compiled.nodes import SELF
from gt4py_halo.decomposition.cartesian import direction_box, wrapped_box


@dataclasses.dataclass(frozen=True)
class Segment:
    """The boxes towards (from) one direction of a field group, inside the group's arena:
    field ``j`` of the group at ``offset + j * size``, each box in C order. ``offset`` is a
    symbol set at run time (``place_segments``); a blocking exchange's bounds are expressions
    in the wrap symbols too (``wrapped_box``)."""

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
    """The send (receive) buffer of a field group: all its directions' segments back to back,
    listed by direction (their order in the buffer is ``place_segments``')."""

    name: str
    group: int
    fields: tuple[int, ...]
    dtype: Any
    segments: list[Segment]
    length: Any  # in elements: the segments', and room for a stamp per direction
    wraps: tuple[str, ...] = ()  # the wrap symbols its boxes depend on (``wrapped_box``)


#: The room for one stamp (``STAMP_BYTES``, its last bytes) in an arena: a cache line, so that
#: the segments after it keep the alignment they have without it (8 bytes cost a 64^3 exchange
#: with faces in place 15%: docs/benchmarks.md, "Stamps").
STAMP_ROOM_BYTES = 64


def stamp_elements(dtype: Any) -> int:
    """The elements of ``dtype`` of the room for one stamp in an arena (``STAMP_ROOM_BYTES``)."""
    return -(-STAMP_ROOM_BYTES // dtype.bytes)


def field_groups(fields: list[Any]) -> list[tuple[int, ...]]:
    """The fields of one exchange that share buffers and messages: those of the same shape
    and dtype (the arguments of one shape share their shape symbols, ``program.py``)."""
    groups: dict[tuple, list[int]] = {}
    for i, desc in enumerate(fields):
        groups.setdefault((tuple(map(str, desc.shape)), desc.dtype), []).append(i)
    return [tuple(g) for g in groups.values()]


def arenas(node: Any, fields: list[Any], sending: bool, wire: bool = True) -> tuple[Arena, ...]:
    """The arenas ``node`` sends from (receives into), one per field group.

    Box bounds are symbolic in the fields' shapes (``direction_box``, the same geometry the
    runtime plan is built from); along a direction, widths are halo widths (ints), across it
    owned sizes (> 0), so an empty box is known when the node is lowered. A blocking
    exchange's boxes are its messages' (``wrapped_box``: symbolic in the wrap symbols too);
    ``wire=False`` gives the plain boxes of every exchange, which the self copies copy.
    """
    shapes = tuple((tuple(desc.shape), desc.dtype) for desc in fields)
    spec = node.spec
    wraps = wire and wraps_axes(spec.phase)
    return _layout(spec.uid, spec.halo, spec.directions, shapes, sending, wraps)


def wraps_axes(phase: str) -> bool:
    """Whether an exchange of ``phase`` sends whole planes across the axes that wrap onto a
    rank itself (``wrapped_box``): a blocking exchange, which copies those axes' halos first.
    A split pair's start only reads its fields, so its messages are the plain boxes."""
    return phase == "exchange"


def wrap_symbol(uid: str, d: int) -> str:
    """The symbol telling whether decomposed axis ``d`` of exchange ``uid`` wraps onto this
    rank (1: periodic and not split over ranks, both neighbours ``SELF``; else 0)."""
    return f"{uid}_wrap{d}"


def offset_symbol(arena: str, k: int) -> str:
    """The symbol holding where direction ``k``'s segment starts in ``arena``."""
    return f"{arena}_at{k}"


def place_segments(
    graph: Any,
    before: Any,
    uid: str,
    sends: list[Arena],
    recvs: list[Arena],
    order: str,
    peers: str,
    directions: tuple[tuple[int, ...], ...],
) -> str:
    """Set the offset symbols (``offset_symbol``) of the segments of arenas ``sends`` and
    ``recvs`` in ``graph``, on entry to its block ``before``, from a persistent table that a
    host tasklet fills at an instance's first call (an instance's shapes, hence its segment
    sizes, are fixed); return that tasklet's label. It reads plan arrays ``order`` and
    ``peers`` (data of ``graph``).

    A send arena holds its segments in the order of plan array ``order`` (``side_by_side``,
    from the process grid), a receive arena by the direction its sender sent them towards
    (the opposite one). So the segments exchanged with one neighbour rank come in the same
    order on both sides, side by side: one contiguous message per neighbour rank and group
    (of a few blocks only where a segment in the middle of them goes in place): MPI sends one
    contiguous message far faster than several messages or a datatype over blocks with gaps
    (docs/benchmarks.md). Each run of segments exchanged with one other rank follows the
    room of a stamp (``stamp_elements``): the ``STAMP_BYTES`` right before a neighbour's
    first segment are its stamp's place, so that the stamp heads that contiguous message
    (and still does where its faces, last, go in place). Being run-time values, the offsets
    leave the generated code the same on every process grid. The wrap symbols the boxes
    depend on (``wrap_symbol``) are set alike, from ``peers``.
    """
    count = len(directions)
    opposite = opposites(directions)
    placed = [(a, True) for a in sends] + [(a, False) for a in recvs]
    table = f"{uid}_placed"
    graph.add_array(
        table,
        [len(placed) * count + len(directions[0])],
        dtypes.int64,
        transient=True,
        lifetime=dtypes.AllocationLifetime.Persistent,
        storage=dtypes.StorageType.CPU_Heap,
    )
    code, assignments = [], {}
    wraps = _wraps_in(uid, placed, directions)
    for d, k in wraps.items():  # the sizes below read them
        code.append(f"const long {wrap_symbol(uid, d)} = peers[{k}] == {SELF};")
        code.append(f"placed[{len(placed) * count + d}] = {wrap_symbol(uid, d)};")
        assignments[wrap_symbol(uid, d)] = f"{table}[{len(placed) * count + d}]"
    if recvs:
        code.append(
            f"const int opposite[] = {{{', '.join(str(opposite[k]) for k in range(count))}}};"
        )
    for a, (arena, sending) in enumerate(placed):
        sizes = ["-1"] * count  # -1: the arena has no segment of that direction
        for s in arena.segments:
            sizes[s.direction] = f"(long)({symstr(len(arena.fields) * s.size, cpp_mode=True)})"
            assignments[offset_symbol(arena.name, s.direction)] = (
                f"{table}[{a * count + s.direction}]"
            )
        pick = "order[p]" if sending else "opposite[order[p]]"
        code += [
            "{",
            f"    const long size[] = {{{', '.join(sizes)}}};",
            "    long at = 0;",
            "    int run = -1;  // the rank of the run of segments placed last",
            f"    for (int p = 0; p < {count}; ++p) {{",
            f"        const int k = {pick};",
            "        if (size[k] < 0) continue;",
            f"        if (peers[k] >= 0 && peers[k] != run) at += {stamp_elements(arena.dtype)};",
            "        run = peers[k];",
            f"        placed[{a * count} + k] = at;",
            "        at += size[k];",
            "    }",
            "}",
        ]
    start = before is graph.start_block
    state = graph.add_state_before(
        before, f"{uid}_place", is_start_block=start, assignments=assignments
    )
    label = f"{uid}_place_segments"
    # an instance's shapes are fixed: its first call places the segments for all the others
    body = "\n    ".join(code)
    host = HostCode(
        f"if (!__state->{uid}_placed_ready) {{\n    {body}\n    __state->{uid}_placed_ready = 1;\n}}",
        (f"int {uid}_placed_ready = 0;",),
    )
    add_host_tasklet(state, graph, label, {"order": order, "peers": peers}, {"placed": table}, host)
    return label


@functools.lru_cache(maxsize=256)
def _layout(
    uid: str,
    halo: tuple[tuple[int, int], ...],
    offsets: tuple[tuple[int, ...], ...],
    shapes: tuple[tuple[tuple[Any, ...], Any], ...],
    sending: bool,
    wrapping: bool,
) -> tuple[Arena, ...]:
    """``arenas``, computed once per exchange and field shapes: the passes and the expansion
    that ask for it get the same layout.

    An arena's length holds every segment at its largest (widened, not emptied): the
    persistent arena is allocated before the wrap symbols are set."""
    fields = [_Shaped(shape, dtype) for shape, dtype in shapes]
    wraps = [
        dace.symbol(wrap_symbol(uid, d), dtypes.int64) if wrapping and lo + hi > 0 else 0
        for d, (lo, hi) in enumerate(halo)
    ]
    found = []
    for g, group in enumerate(field_groups(fields)):
        desc = fields[group[0]]
        owned = [desc.shape[k] - lo - hi for k, (lo, hi) in enumerate(halo)]
        levels = list(desc.shape[len(halo) :])
        name = f"{uid}_{'s' if sending else 'r'}arena_{g}"
        segments, length = [], 0
        for k, toward in enumerate(offsets):
            bounds = wrapped_box(owned, halo, toward, sending, wraps)
            plain = direction_box(owned, halo, toward, sending)
            if any(d != 0 and b - a == 0 for d, (a, b) in zip(toward, plain)):
                continue
            at = dace.symbol(offset_symbol(name, k), dtypes.int64)
            segment = Segment(k, toward, bounds, [b - a for a, b in bounds] + levels, at)
            segments.append(segment)
            largest = {w: int(t == 0) for w, t in zip(wraps, toward) if w != 0}
            length = length + len(group) * sympy.sympify(segment.size).subs(largest)
        if segments:  # room for a stamp before each run of a neighbour's segments: at most one each
            length = length + len(offsets) * stamp_elements(desc.dtype)
            used = {str(x) for s in segments for x in sympy.sympify(s.size).free_symbols}
            wrapped = tuple(str(w) for w in wraps if str(w) in used)
            found.append(Arena(name, g, group, desc.dtype, segments, length, wrapped))
    return tuple(found)


def _wraps_in(
    uid: str, placed: list[tuple[Arena, bool]], directions: tuple[tuple[int, ...], ...]
) -> dict[int, int]:
    """Decomposed axis -> the direction across it towards +1, for the axes whose wrap symbol
    the boxes of ``placed`` depend on (a rank wraps on an axis when that direction leads to
    the rank itself)."""
    used = {w for arena, _ in placed for w in arena.wraps}
    ndim = len(directions[0])
    return {
        d: directions.index(tuple(int(e == d) for e in range(ndim)))
        for d in range(ndim)
        if wrap_symbol(uid, d) in used
    }


@dataclasses.dataclass(frozen=True)
class _Shaped:
    """What the layout reads of a field's descriptor."""

    shape: tuple[Any, ...]
    dtype: Any


def opposites(offsets: list[tuple[int, ...]]) -> dict[int, int]:
    """Direction index -> the index of the opposite direction."""
    return {k: offsets.index(tuple(-o for o in d)) for k, d in enumerate(offsets)}
