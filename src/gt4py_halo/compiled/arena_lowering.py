"""The transport-neutral lowering of a cartesian ``HaloExchange``: arenas and their copies.

Fields of the same shape and dtype form a *group*; each group has one send and one receive
*arena*, a flat buffer holding every direction's boxes (*segments*) back to back
(``arenas.py``). The node becomes a nested SDFG (a split pair: the ``start`` node the part up
to posting, the ``finish`` node the rest):

1. per direction leading to another rank, the **pack** of the fields into the send arenas;
2. the transport's **start** tasklet (``start_code``): posts the messages;
3. the transport's **wait** tasklet (``wait_code``), if it needs one;
4. per direction, on what lies there (``_peers[k]``, a run-time value: a conditional block):
   another rank: the **unpack** from the receive arenas; the rank itself (``SELF``, a
   periodic axis not split over ranks): **self copies**, owned cells straight to the halo;
   nothing beyond an open boundary (the halo keeps what it held).

On a GPU each copy is a map (a kernel on the program's stream): one per group for a pack or
an unpack, written in the fields' own index space, one for the fields of a box for a self
copy. On a CPU each is a C++ tasklet per direction that calls one function, ``gh_copy``
(``COPIES``), field after field from C tables (``copy_loop``): the same loops for every copy
of the step, compiled once, where a loop nest per direction, group and field made most of a
large step's compile time (docs/benchmarks.md, "One function for every copy").

A blocking exchange makes its self copies first, before step 1: its messages then carry the
halos of the axes that wrap onto the rank (``cartesian.wrapped_box``: faces of whole planes, no
edge messages). A split pair's start only reads its fields: its finish copies them.

Everything but the C++ of the start and wait tasklets is the same for every transport that
sends arenas (``ExpandThroughArenas``); a transport subclasses ``ArenaLowering`` with those.
A transport that can move long contiguous runs of the fields as messages of their own
(``MOVES_RUNS_IN_PLACE``, on a CPU) gets ``in_place``: the directions whose packs and unpacks
are skipped at run time where this rank's fields are dense (``in_place.py``).

Box bounds are symbolic in the fields' shapes (``direction_box``, the same geometry the
runtime plan is built from). Arenas are persistent arrays of the SDFG holding the node
(``message_buffers.py``). GPU fields (``GPU_Global`` storage) get device arenas.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar

import dace
import sympy
from dace import dtypes
from dace.properties import CodeBlock
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.compiled.arena_copies import add_arena_copy, direction_symbols
from gt4py_halo.compiled.arenas import (
    Arena,
    Segment,
    arenas,
    offset_symbol,
    opposites,
    place_segments,
    wraps_axes,
)
from gt4py_halo.compiled.graph import (
    HostCode,
    add_cpp_tasklet,
    add_host_tasklet,
    add_persistent,
    connect_whole,
    on_device,
)
from gt4py_halo.compiled.in_place import Runs, box_runs
from gt4py_halo.compiled.iteration_order import loop_order
from gt4py_halo.compiled.lowered import CopyMap, Lowered
from gt4py_halo.compiled.nodes import SELF, HaloExchange
from gt4py_halo.compiled.phases import TOKEN, TOKEN_CONNECTOR, packs, unpacks


class ExpandThroughArenas(ExpandTransformation):
    """The expansion of ``HaloExchange`` of a transport that sends arenas: its ``LOWERING``
    (an ``ArenaLowering``) writes the nested SDFG."""

    LOWERING: ClassVar[type[ArenaLowering]]
    #: The plan arrays the node gets (``convertible.exchange_sdfg``).
    PLAN_ARRAYS = ("peers", "order")

    @classmethod
    def expansion(
        cls,
        node: Any,
        parent_state: dace.SDFGState,
        parent_sdfg: dace.SDFG,
        lowered: Lowered | None = None,
    ) -> dace.SDFG:
        """``lowered``: where the expansion records its copy maps and host tasklets (a
        throwaway one when DaCe expands the node on its own)."""
        return cls.LOWERING(node, parent_state, parent_sdfg, lowered or Lowered()).sdfg

    @staticmethod
    def message_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any, bool]]:
        """(name, shape, dtype, receiving) of the node's buffers (``message_buffers.py``);
        ``outer``: connector -> descriptor of the node's inputs."""
        fields = [outer[f"_f{i}"] for i in range(node.spec.field_count)]
        return [
            (a.name, [a.length], a.dtype, not sending)
            for sending in (True, False)
            for a in arenas(node, fields, sending)
        ]


def place_attached_segments(sdfg: dace.SDFG, lowered: Lowered) -> None:
    """Where the segments of the arenas that ``attach_message_buffers`` gave the exchanges of
    transports with arenas lie: set on entry to the SDFG holding them (``place_segments``),
    for the stencils that pack into them (``producer_fusion.py``) and the expansions, which
    take the symbols from there."""
    for node, state in list(sdfg.all_nodes_recursive()):
        if not isinstance(node, HaloExchange) or node.spec.phase == "finish":
            continue
        if not issubclass(type(node).implementations[node.implementation], ExpandThroughArenas):
            continue
        graph = state.sdfg
        inputs = {e.dst_conn: e.data.data for e in state.in_edges(node)}
        fields = [graph.arrays[inputs[f"_f{i}"]] for i in range(node.spec.field_count)]
        sends, recvs = (list(arenas(node, fields, sending)) for sending in (True, False))
        spec = node.spec
        label = place_segments(
            graph,
            graph.start_block,
            spec.uid,
            sends,
            recvs,
            inputs["_order"],
            inputs["_peers"],
            spec.directions,
        )
        lowered.host_tasklet(label)


def _alike(ours: list[tuple[int, Runs]], theirs: list[tuple[int, Runs]]) -> bool:
    """Whether two segments' fields are cut into the same runs (lengths and counts)."""
    return all(
        i == j and str(a.length) == str(b.length) and str(a.count) == str(b.count)
        for (i, a), (j, b) in zip(ours, theirs, strict=True)
    )


def _unless(flags: tuple[str, ...]) -> str:
    """The condition's tail that skips packing where producer stencils packed already."""
    return f" and not ({' and '.join(flags)})" if flags else ""


#: The copies of a CPU step's exchanges (``copy_loop``): ``P`` boxes of ``extent`` from
#: ``src + from[p]`` to ``dst + to[p]`` (``dst_stride``, ``src_stride``: per axis), the ``R``
#: axes outermost first, the innermost of extent ``N`` where the build knows it (0:
#: ``extent``'s; a width of 1-3, as halos have, still gets a loop of its own where the width
#: depends on the process grid), the boxes of one row after each other (the two faces across
#: a unit-stride axis share the row's cache lines), rows that lie end to end in both as one
#: run. Boxes and their sources never overlap (halos and owned cells, arenas). GCC would make
#: each row a call of ``memcpy`` (loop distribution), slower for the rows of halos than the
#: loop it vectorizes in place (``GH_INLINE_ROWS``; docs/benchmarks.md, "One function for
#: every copy").
COPIES = """
#if defined(__GNUC__) && !defined(__clang__)
#define GH_INLINE_ROWS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define GH_INLINE_ROWS
#endif
namespace {
template <typename T>
inline __attribute__((always_inline)) void gh_row(
        T* __restrict__ dst, const T* __restrict__ src, long n, long dst_step, long src_step) {
    if (dst_step == 1 && src_step == 1) {
        for (long e = 0; e < n; ++e) dst[e] = src[e];
    } else {
        for (long e = 0; e < n; ++e) dst[e * dst_step] = src[e * src_step];
    }
}
template <long N, int R, int P, typename T>
__attribute__((noinline)) GH_INLINE_ROWS void gh_copy(T* dst, const T* src, const long* extent,
        const long* dst_stride, const long* src_stride, const long* to, const long* from) {
    if constexpr (N == 0) {  // rows of a halo's width known only now: as if known before
        switch (extent[R - 1]) {
        case 1: return gh_copy<1, R, P>(dst, src, extent, dst_stride, src_stride, to, from);
        case 2: return gh_copy<2, R, P>(dst, src, extent, dst_stride, src_stride, to, from);
        case 3: return gh_copy<3, R, P>(dst, src, extent, dst_stride, src_stride, to, from);
        }
    }
    for (int a = 0; a < R; ++a) {
        if (extent[a] <= 0) return;
    }
    long n = N > 0 ? N : extent[R - 1];
    const int row = R > 1 ? R - 2 : 0;  // the axis of the rows
    long rows = R > 1 ? extent[row] : 1;
    const long dst_row = R > 1 ? dst_stride[row] : 0, src_row = R > 1 ? src_stride[row] : 0;
    if (N == 0 && R > 1 && dst_row == n * dst_stride[R - 1] && src_row == n * src_stride[R - 1]) {
        n *= rows;  // rows end to end in both: one run
        rows = 1;
    }
    long index[R > 2 ? R - 2 : 1] = {};
    long dst_at = 0, src_at = 0;
    for (;;) {
        for (long r = 0; r < rows; ++r) {
            for (int p = 0; p < P; ++p) {
                gh_row(dst + to[p] + dst_at + r * dst_row, src + from[p] + src_at + r * src_row,
                       n, dst_stride[R - 1], src_stride[R - 1]);
            }
        }
        int a = R - 3;
        for (; a >= 0; --a) {
            dst_at += dst_stride[a];
            src_at += src_stride[a];
            if (++index[a] < extent[a]) break;
            dst_at -= dst_stride[a] * extent[a];
            src_at -= src_stride[a] * extent[a];
            index[a] = 0;
        }
        if (a < 0) return;
    }
}
}  // namespace
"""


@dataclasses.dataclass(frozen=True)
class Copy:
    """One field's boxes of a ``copy_loop``: the pointers (tasklet connectors) copied to and
    from, their strides per axis, and per box the element offsets (to, from)."""

    dst: str
    src: str
    dst_stride: list[Any]
    src_stride: list[Any]
    offsets: list[tuple[Any, Any]]


def copy_loop(ctype: str, extent: list[Any], order: list[int], copies: list[Copy]) -> str:
    """C++ calling ``gh_copy`` (``COPIES``) for each of ``copies`` (boxes of ``extent`` of
    elements of ``ctype``), one field after the other, from C arrays: one loop, however many
    fields; the loops over the axes in ``order`` (``iteration_order.loop_order``)."""
    cpp = lambda values: (
        "{" + ", ".join(f"(long)({symstr(v, cpp_mode=True)})" for v in values) + "}"
    )
    table = lambda rows: "{" + ", ".join(map(cpp, rows)) + "}"
    ordered = lambda strides: table([s[a] for a in order] for s in strides)
    inner = sympy.sympify(extent[order[-1]])
    known = int(inner) if isinstance(inner, sympy.Integer) else 0
    rank, boxes = len(order), len(copies[0].offsets)
    call = f"gh_copy<{known}, {rank}, {boxes}>"
    return "\n".join(
        [
            "{",
            f"const long extent[] = {cpp(extent[a] for a in order)};",
            f"const long dst_stride[][{rank}] = {ordered(c.dst_stride for c in copies)};",
            f"const long src_stride[][{rank}] = {ordered(c.src_stride for c in copies)};",
            f"const long to[][{boxes}] = {table([t for t, _ in c.offsets] for c in copies)};",
            f"const long from[][{boxes}] = {table([f for _, f in c.offsets] for c in copies)};",
            f"{ctype}* const dst[] = {{{', '.join(c.dst for c in copies)}}};",
            f"const {ctype}* const src[] = {{{', '.join(c.src for c in copies)}}};",
            f"for (int f = 0; f < {len(copies)}; ++f)",
            f"{call}(dst[f], src[f], extent, dst_stride[f], src_stride[f], to[f], from[f]);",
            "}",
        ]
    )


class ArenaLowering:
    """A cartesian exchange node as a nested SDFG moving its messages through arenas; the
    transport's subclass writes the C++ posting (``start_code``) and waiting (``wait_code``)."""

    #: Whether the transport moves runs of the fields in place (``in_place.py``).
    MOVES_RUNS_IN_PLACE: ClassVar[bool] = False

    def __init__(
        self, node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG, lowered: Lowered
    ) -> None:
        self.node = node
        self.parent_sdfg = parent_sdfg
        self.lowered = lowered
        self.uid = node.spec.uid
        self.sdfg = dace.SDFG(f"{self.uid}_{node.spec.phase}")
        self.ndim = len(node.spec.halo)
        outer = {e.dst_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.in_edges(node)}
        outer.update(
            {e.src_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.out_edges(node)}
        )
        self.fields = [self._argument(f"_f{i}", outer) for i in range(node.spec.field_count)]
        for plan_array in ("_peers", "_order", "_comm"):
            self._argument(plan_array, outer)
        self.gpu = on_device(self.fields)
        self.sends = arenas(node, self.fields, sending=True)
        self.recvs = arenas(node, self.fields, sending=False)
        # the boxes of the self copies, which copy the plain boxes whatever the messages are
        self.plain_sends = arenas(node, self.fields, sending=True, wire=False)
        self.plain_recvs = arenas(node, self.fields, sending=False, wire=False)
        own: dict[bool, list[Arena]] = {True: [], False: []}  # sending -> arenas made here
        for arena in self.sends + self.recvs:  # the enclosing SDFG's (message_buffers.py)
            if arena.name in outer:  # placed there too (place_segments): symbols from there
                self._argument(arena.name, outer)
                for s in arena.segments:
                    self.sdfg.add_symbol(offset_symbol(arena.name, s.direction), dtypes.int64)
                for symbol in set(arena.wraps) - set(self.sdfg.symbols):
                    self.sdfg.add_symbol(symbol, dtypes.int64)
            elif packs(node.spec.phase):  # a node lowered without attach_message_buffers
                add_persistent(self.sdfg, arena.name, [arena.length], arena.dtype, self.gpu)
                own[arena in self.sends].append(arena)
        if TOKEN in outer:
            self._argument(TOKEN, outer)
        offsets = node.spec.directions
        self.opposite = opposites(offsets)
        self.in_place = self._in_place_runs()
        last = self.sdfg.add_state("begin", is_start_block=True)
        self._flags = self._add_flags(last)
        if own[True] or own[False]:
            placing = place_segments(
                self.sdfg, last, self.uid, own[True], own[False], "_order", "_peers", offsets
            )
            self.lowered.host_tasklet(placing)
        # a blocking exchange copies what wraps onto this rank first: its messages carry it
        self_first = wraps_axes(node.spec.phase)
        paired = self._self_pairs()
        if self_first:  # (a blocking exchange packs)
            for k in range(len(offsets)):
                if (branch := self._self_branch(k, paired)) is not None:
                    last = self._branch(last, f"self_{k}", [branch])
        if packs(node.spec.phase):
            for flags, _ in self._pack_groups():
                for flag in flags:
                    self.sdfg.add_symbol(flag, dtypes.int32)
            if node.spec.copy_maps == "arena":
                last = self._arena_copies(last, "pack")
            else:
                for k in range(len(offsets)):
                    packed = self._unless_direct(True, k)
                    for n, (flags, group) in enumerate(self._pack_groups()):
                        fill = functools.partial(self._add_copies, group, k, "pack")
                        condition = f"_peers[{k}] >= 0" + _unless(flags) + packed
                        last = self._branch(last, f"pack_{k}_{n}", [(condition, fill)])
            last = self._then(last, "start", self._add_start)
        if unpacks(node.spec.phase):
            last = self._then(last, "wait", self._add_wait)
            if node.spec.copy_maps == "arena":
                last = self._arena_copies(last, "unpack")
            for k in range(len(offsets)):
                branches = []
                if not self_first and (branch := self._self_branch(k, paired)) is not None:
                    branches.append(branch)
                if node.spec.copy_maps != "arena":
                    unpack = functools.partial(self._add_copies, self.recvs, k, "unpack")
                    packed = self._unless_direct(False, k)
                    branches.insert(0, (f"_peers[{k}] >= 0" + packed, unpack))
                if branches:
                    last = self._branch(last, f"unpack_{k}", branches)

    def _in_place_runs(self) -> dict[tuple[str, int], list[tuple[int, Runs]]]:
        """(arena, direction) -> (field, runs) of the segments whose fields MPI moves in
        place when their runs are long enough (``in_place.py``; on a CPU, with copies per
        direction). A direction qualifies if, in every arena, every field is cut into runs
        alike, and alike to the segment the neighbour exchanges with it (the same box, so the
        same runs: checked, not assumed). All arenas of a direction go in place or none: their
        copies then stay in one state."""
        min_bytes = self.node.spec.in_place_min_bytes
        if not self.MOVES_RUNS_IN_PLACE or self.gpu or self.node.spec.copy_maps == "arena":
            return {}
        if min_bytes <= 0:
            return {}
        found = {}
        for arena in self.sends + self.recvs:
            for segment in arena.segments:
                starts = [a for a, _ in segment.bounds] + [0] * (len(segment.box) - self.ndim)
                runs = [
                    (i, box_runs(self.fields[i], starts, segment.box, arena.wraps))
                    for i in arena.fields
                ]
                if all(r is not None for _, r in runs):
                    conditions = {r.condition(arena.dtype.bytes, min_bytes, True) for _, r in runs}
                    if len(conditions) == 1:
                        found[(arena.name, segment.direction)] = runs
        recvs = {arena.group: arena for arena in self.recvs}
        chosen = {}
        for k in range(len(self.node.spec.directions)):
            pairs = [
                ((send.name, k), (recvs[send.group].name, self.opposite[k])) for send in self.sends
            ]
            if pairs and all(
                ours in found and theirs in found and _alike(found[ours], found[theirs])
                for ours, theirs in pairs
            ):
                chosen.update((key, found[key]) for pair in pairs for key in pair)
        return chosen

    def _in_place_condition(self, arenas: list[Arena], k: int) -> str | None:
        """When ``arenas``' segments of direction ``k`` go in place (C++ of the run-time
        values of the shape symbols); ``None``: never."""
        conditions = []
        for arena in arenas:
            runs = self.in_place.get((arena.name, k))
            if runs is None:
                return None
            min_bytes = self.node.spec.in_place_min_bytes
            conditions.append(runs[0][1].condition(arena.dtype.bytes, min_bytes, True))
        return " && ".join(conditions) if conditions else None

    def _dense_condition(self, arenas: list[Arena], k: int) -> str:
        """When this rank's fields are dense where the runs of ``arenas``' segments of
        direction ``k`` were merged (C++): then MPI moves those segments straight from or
        into the fields, else the runs go through the arena segments, packed."""
        dense = {
            runs.dense_condition(True) for a in arenas for _, runs in self.in_place[(a.name, k)]
        }
        return " && ".join(sorted(dense))

    def _add_flags(self, state: dace.SDFGState) -> dict[tuple[bool, int, bool], int]:
        """(sending, direction, direct) -> the element of the exchange's flags array that
        tells, at this call, whether the send (``sending``) or receive arenas' segments of
        that direction go in place (``_in_place_condition``; ``direct``: and straight from
        or into the fields, ``_dense_condition``), for the directions that can, on the sides
        this phase moves; a C++ tasklet in ``state`` sets them, where the segment offsets and
        wrap symbols are set. The branches around the copy maps and the transport's C++ read
        them (``flag``).

        The tests themselves, per direction one for every field's shapes and strides, are
        thousands of characters: as branch conditions DaCe's analyses parsed them with SymPy
        at every pass over the step, and the C++ compiler took seconds for their copies."""
        phase = self.node.spec.phase
        sides = [True, False] if packs(phase) else [False] if unpacks(phase) else []
        flags: dict[tuple[bool, int, bool], int] = {}
        code = []
        for sending in sides:
            arenas = self.sends if sending else self.recvs
            for k in range(len(self.node.spec.directions)):
                if (condition := self._in_place_condition(arenas, k)) is None:
                    continue
                flags[(sending, k, False)] = in_place = len(flags)
                flags[(sending, k, True)] = in_place + 1
                dense = self._dense_condition(arenas, k)
                code.append(f"flags[{in_place}] = ({condition});")
                code.append(f"flags[{in_place + 1}] = flags[{in_place}] && ({dense});")
        if flags:
            name = f"{self.uid}_flags"
            self.sdfg.add_array(
                name,
                [len(flags)],
                dtypes.int32,
                transient=True,
                storage=dtypes.StorageType.Register,
            )
            tasklet = add_cpp_tasklet(state, name, {}, {"flags"}, "\n".join(code))
            connect_whole(state, self.sdfg, tasklet, state.add_write(name), "flags")
        return flags

    def flag(self, sending: bool, k: int, direct: bool, array: str = "flags") -> str | None:
        """The element of ``array`` (the flags array, or a connector to it) that tells whether
        direction ``k`` of the send or receive arenas goes in place (``direct``: straight
        from or into the fields) at this call (``_add_flags``); ``None``: never."""
        index = self._flags.get((sending, k, direct))
        return None if index is None else f"{array}[{index}]"

    def _unless_direct(self, sending: bool, k: int) -> str:
        """The condition's tail that leaves direction ``k`` of the send (``sending``) or
        receive arenas to MPI, from field to field: no copy runs for it."""
        flag = self.flag(sending, k, True, f"{self.uid}_flags")
        return "" if flag is None else f" and {flag} == 0"

    def _arena_copies(self, last: Any, kind: str) -> Any:
        """After ``last``, one copy map per arena over all directions (``arena_copies.py``);
        packing skipped where producer stencils did it (``_pack_groups``)."""
        state = self.sdfg.add_state(f"{kind}_directions")
        remote = direction_symbols(self.uid, len(self.node.spec.directions))
        self.sdfg.add_edge(last, state, dace.InterstateEdge(assignments=remote))
        groups = self._pack_groups() if kind == "pack" else [((), self.recvs)]
        for n, (flags, group) in enumerate(groups):

            def fill(state: dace.SDFGState, group: list[Arena] = group) -> None:
                for arena in group:
                    add_arena_copy(state, self.uid, arena, kind, self.gpu)

            label = f"{kind}_all_{n}"
            if flags:
                state = self._branch(state, label, [(_unless(flags).removeprefix(" and "), fill)])
            else:
                state = self._then(state, label, fill)
        return state

    def _pack_groups(self) -> list[tuple[tuple[str, ...], list[Arena]]]:
        """The send arenas, by the flags (symbols) telling that producer stencils wrote them
        already (``producer_fusion.py``; none: packed here): an arena is packed unless all
        its flags are set."""
        groups: dict[tuple[str, ...], list[Arena]] = {}
        for arena in self.sends:
            flags = self.node.spec.packed_by_producers(arena.name)
            groups.setdefault(flags, []).append(arena)
        return list(groups.items())

    def _then(self, last: Any, label: str, fill: Callable[[dace.SDFGState], None]) -> Any:
        state = self.sdfg.add_state(label)
        self.sdfg.add_edge(last, state, dace.InterstateEdge())
        fill(state)
        return state

    def _branch(self, last: Any, label: str, branches: list[tuple[str, Callable]]) -> Any:
        """A conditional block after ``last``: per (condition on the ranks, filler) a state.

        Whether a direction leads to another rank, to this rank or nowhere is known at run
        time only; branching on it per direction keeps the copies free of per-element tests.
        """
        block = ConditionalBlock(f"{self.uid}_{label}")
        self.sdfg.add_node(block)
        self.sdfg.add_edge(last, block, dace.InterstateEdge())
        for n, (condition, fill) in enumerate(branches):
            body = ControlFlowRegion(f"{block.label}_{n}", sdfg=self.sdfg)
            fill(body.add_state(f"{block.label}_{n}_copy", is_start_block=True))
            block.add_branch(CodeBlock(condition), body)
        return block

    def _argument(self, name: str, outer: dict[str, Any]) -> Any:
        desc = outer[name].clone()
        desc.transient = False
        self.sdfg.add_datadesc(name, desc)
        return desc

    def _add_copies(self, arenas: list[Arena], k: int, kind: str, state: dace.SDFGState) -> None:
        """Pack the fields into (``kind="pack"``) or unpack them from direction ``k``'s
        segments of their arenas: one map per box range, copying every field of the groups
        whose segments have that range (groups of one shape and different dtypes).

        Built as one map, not fused afterwards: DaCe's ``MapFusionHorizontal`` spent minutes
        propagating the arena's flat indices when it fused one map per field, and leaves a
        dangling connector when the map it merges in writes or reads an array twice (a group
        of several fields). On a CPU, where no other pass takes these maps (producer stencils
        write the arenas themselves, ``producer_fusion.py``), one tasklet instead
        (``_add_copy_calls``)."""
        if not self.gpu:
            self._add_copy_calls(arenas, k, kind, state)
            return
        maps: dict[str, tuple[Segment, int, list, dict]] = {}
        for arena in arenas:
            for segment in (s for s in arena.segments if s.direction == k):
                box = self._box(segment.bounds, segment.box)
                _, _, copies, whole = maps.setdefault(box, (segment, arena.group, [], {}))
                end = segment.offset + len(arena.fields) * segment.size
                whole[arena.name] = f"{symstr(segment.offset)}:{symstr(end)}"
                for j, i in enumerate(arena.fields):
                    field = f"_f{i}[{self._params(segment)}]"
                    flat = f"{arena.name}[{self._flat(segment, j)}]"
                    copies.append((field, flat) if kind == "pack" else (flat, field))
                    whole[f"_f{i}"] = box
        for segment, group, copies, whole in maps.values():
            self._add_map(state, (kind, group, k), segment, copies, whole)

    def _add_copy_calls(
        self, arenas: list[Arena], k: int, kind: str, state: dace.SDFGState
    ) -> None:
        """``_add_copies`` on a CPU: a C++ tasklet with a ``copy_loop`` per arena and loop
        order, each field alone (ten fields at once measured no faster, docs/benchmarks.md
        "Self copies per field"). One function, ``gh_copy``, makes every copy of the step:
        loop nests of their own per direction and field group were most of a large step's
        compile time (docs/benchmarks.md, "One function for every copy")."""
        code, reads, writes = [], {}, {}
        for n, arena in enumerate(arenas):
            for segment in (s for s in arena.segments if s.direction == k):
                dense = [math.prod(segment.box[d + 1 :]) for d in range(len(segment.box))]
                loops: dict[tuple[int, ...], list[Copy]] = {}
                for j, i in enumerate(arena.fields):
                    field = self.fields[i]
                    at, start = segment.offset + j * segment.size, self._start(field, segment)
                    strides = list(field.strides)
                    if kind == "pack":
                        copy = Copy(f"a{n}", f"f{i}", dense, strides, [(at, start)])
                    else:
                        copy = Copy(f"f{i}", f"a{n}", strides, dense, [(start, at)])
                    loops.setdefault(tuple(loop_order(field)), []).append(copy)
                    (reads if kind == "pack" else writes)[f"f{i}"] = f"_f{i}"
                (writes if kind == "pack" else reads)[f"a{n}"] = arena.name
                for order, copies in loops.items():
                    code.append(copy_loop(arena.dtype.ctype, segment.box, list(order), copies))
        if code:
            self._add_copy_tasklet(state, f"{self.uid}_{kind}_{k}", code, reads, writes)

    def _self_pairs(self) -> dict[int, int]:
        """Direction -> its opposite, for the self copies one map does together: the two
        faces across an axis that every field of the exchange holds with unit stride (known
        at the build: ``Program`` builds per layout), if their boxes have the same extents.

        At either end of a row along that axis, the halo cells and the owned cells the
        opposite face copies share cache lines: one map over both faces touches each line
        once, two maps twice. Across other axes the two faces share no lines and one map
        would only run more streams at once (measured: docs/benchmarks.md). A direction
        leads to this rank itself exactly when its opposite does (both cross the same
        periodic axis of one block), so the two copies run together or not at all.

        Every field group's faces must be alike, as the pair is decided for the direction."""
        pairs: dict[int, int] = {}
        extents = [
            {s.direction: list(map(str, s.box)) for s in a.segments} for a in self.plain_recvs
        ]
        for k, o in self.opposite.items():
            axes = [d for d, t in enumerate(self.node.spec.directions[k]) if t != 0]
            if (
                k < o
                and len(axes) == 1
                and all(k in e and e[k] == e.get(o) for e in extents)
                and all(str(f.strides[axes[0]]) == "1" for f in self.fields)
            ):
                pairs[k] = o
        return pairs

    def _self_branch(self, k: int, paired: dict[int, int]) -> tuple[str, Callable] | None:
        """Direction ``k``'s self copy (``_add_self_copies``) as a branch on ``_peers``; none
        where the map of its opposite copies it (``_self_pairs``)."""
        if k in paired.values():
            return None
        return f"_peers[{k}] == {SELF}", functools.partial(self._add_self_copies, k, paired.get(k))

    def _add_self_copies(self, k: int, opposite: int | None, state: dace.SDFGState) -> None:
        """Direction ``k``'s halo from this rank's own cells: what it would have sent itself
        towards the opposite direction (a periodic axis not split over ranks); with
        ``opposite`` (``_self_pairs``), the opposite direction's halo in the same pass.

        On a CPU ``_add_self_copy_calls``. On a GPU one map (a kernel) for all fields whose
        faces have the same ranges (``_add_copies``)."""
        if not self.gpu:
            self._add_self_copy_calls(k, opposite, state)
            return
        maps: dict[str, tuple[Segment, int, list, dict, dict]] = {}  # by box
        for arena, segment, halves in self._self_halves(k, opposite):
            boxes = [box for pair in halves for box in pair]
            reads, writes = (self._spanned(segment, boxes[n::2]) for n in (1, 0))
            for i in arena.fields:
                _, _, copies, read, written = maps.setdefault(
                    self._box(segment.bounds, segment.box), (segment, arena.group, [], {}, {})
                )
                for target, source in halves:
                    at, src = (self._shifted(segment, box) for box in (target, source))
                    copies.append((f"_f{i}[{src}]", f"_f{i}[{at}]"))
                read[f"_f{i}"], written[f"_f{i}"] = reads, writes
        for segment, group, copies, read, written in maps.values():
            spans = opposite is not None
            self._add_map(state, ("self", group, k), segment, copies, read, written, spans)

    def _self_halves(
        self, k: int, opposite: int | None
    ) -> list[tuple[Arena, Segment, list[tuple[Segment, Segment]]]]:
        """Per receive arena: its segment of direction ``k`` and the (target, source) boxes
        its self copy copies, of equal extents: direction ``k``'s halo from what this rank
        sends towards the opposite direction, and with ``opposite`` the same the other way."""
        sent = {(a.group, s.direction): s for a in self.plain_sends for s in a.segments}
        found = []
        for arena in self.plain_recvs:
            for segment in (s for s in arena.segments if s.direction == k):
                halves = [(segment, sent[(arena.group, self.opposite[k])])]
                if opposite is not None:
                    other = next(s for s in arena.segments if s.direction == opposite)
                    halves.append((other, sent[(arena.group, k)]))
                found.append((arena, segment, halves))
        return found

    def _add_self_copy_calls(self, k: int, opposite: int | None, state: dace.SDFGState) -> None:
        """``_add_self_copies`` on a CPU: a C++ tasklet with a ``copy_loop`` per arena and loop
        order, each field alone: a loop nest over several fields runs as many streams of
        reads and of writes at once, which fall on the same cache sets where the fields start
        alike modulo 4 KiB (NumPy's and GT4Py's large arrays do): docs/benchmarks.md, "Self
        copies per field"."""
        code, reads, writes = [], {}, {}
        for arena, segment, halves in self._self_halves(k, opposite):
            loops: dict[tuple[int, ...], list[Copy]] = {}
            for i in arena.fields:
                field = self.fields[i]
                offsets = [(self._start(field, t), self._start(field, f)) for t, f in halves]
                strides = list(field.strides)
                copy = Copy(f"f{i}", f"f{i}", strides, strides, offsets)
                loops.setdefault(tuple(loop_order(field)), []).append(copy)
                reads[f"in{i}"] = writes[f"f{i}"] = f"_f{i}"
            for order, copies in loops.items():
                code.append(copy_loop(arena.dtype.ctype, segment.box, list(order), copies))
        if code:
            self._add_copy_tasklet(state, f"{self.uid}_self_{k}", code, reads, writes)

    def _add_copy_tasklet(
        self,
        state: dace.SDFGState,
        label: str,
        code: list[str],
        reads: dict[str, str],
        writes: dict[str, str],
    ) -> None:
        """A C++ tasklet in ``state`` running ``code`` (``copy_loop``s); ``reads``, ``writes``:
        connector -> array, a whole-array pointer each."""
        tasklet = add_cpp_tasklet(state, label, set(reads), set(writes), "\n".join(code))
        for connector, name in reads.items():
            connect_whole(state, self.sdfg, state.add_read(name), tasklet, connector)
        for connector, name in writes.items():
            connect_whole(state, self.sdfg, tasklet, state.add_write(name), connector)
        root = self.parent_sdfg
        while root.parent_sdfg is not None:
            root = root.parent_sdfg
        if COPIES not in root.global_code["frame"].as_string:
            root.append_global_code(COPIES)  # once in the step's C++

    def _start(self, field: Any, segment: Segment) -> Any:
        """The element offset in ``field`` of ``segment``'s box (its levels from 0)."""
        starts = [a for a, _ in segment.bounds] + [0] * (len(segment.box) - self.ndim)
        return sum(a * s for a, s in zip(starts, field.strides))

    def _shifted(self, segment: Segment, box: Segment) -> str:
        """Indices in ``box`` of the element at the map's parameters (over ``segment``)."""
        return ", ".join(
            [
                f"h{d} - ({symstr(a)}) + ({symstr(b)})" if str(a) != str(b) else f"h{d}"
                for d, ((a, _), (b, _)) in enumerate(zip(segment.bounds, box.bounds))
            ]
            + [f"l{d}" for d in range(len(segment.box) - self.ndim)]
        )

    def _spanned(self, segment: Segment, boxes: list[Segment]) -> str:
        """The range of ``boxes`` (one, or two on opposite sides) in a field: on an axis
        they cross, from the start of the one below to the end of the one above."""
        below = [min(boxes, key=lambda b: b.toward[d]).bounds[d] for d in range(self.ndim)]
        above = [max(boxes, key=lambda b: b.toward[d]).bounds[d] for d in range(self.ndim)]
        return self._box([(lo, hi) for (lo, _), (_, hi) in zip(below, above)], segment.box)

    def _params(self, segment: Segment) -> str:
        levels = len(segment.box) - self.ndim
        return ", ".join([f"h{d}" for d in range(self.ndim)] + [f"l{d}" for d in range(levels)])

    def _flat(self, segment: Segment, j: int) -> str:
        """Arena index of the element at the map's parameters: field ``j`` of the group."""
        return segment.flat_index(self._params(segment).split(", "), j)

    def _box(self, bounds: list[tuple[Any, Any]], box: list[Any]) -> str:
        """The range of a box in a field: ``bounds``, then all levels."""
        ranges = [f"{symstr(a)}:{symstr(b)}" for a, b in bounds]
        return ", ".join(ranges + [f"0:{symstr(n)}" for n in box[self.ndim :]])

    def _add_map(
        self,
        state: dace.SDFGState,
        what: tuple[str, int, int],
        segment: Segment,
        copies: list[tuple[str, str]],
        reads: dict[str, str],
        writes: dict[str, str] | None = None,
        spans: bool = False,
    ) -> None:
        """A copy map over ``segment``'s box (in the fields' index space): ``dst = src`` for
        each (src, dst) of ``copies``; ``what``: kind, group and direction, for its label and
        for the fusion pass (``Lowered.copy_maps``).

        The memlets outside the map are given (``reads``, ``writes``: array -> range; by
        default the same), not propagated: DaCe's propagation of the arenas' flat indices
        took most of a large step's build (40 s for one 10-field exchange). ``spans``: a
        range spans cells the map does not touch (``_spanned``): its memlets are dynamic."""
        levels = segment.box[self.ndim :]
        ranges = {f"h{d}": f"{symstr(a)}:{symstr(b)}" for d, (a, b) in enumerate(segment.bounds)}
        ranges.update({f"l{d}": f"0:{symstr(n)}" for d, n in enumerate(levels)})
        kind, group, k = what
        _, entry, exit_ = state.add_mapped_tasklet(
            f"{self.uid}_{kind}_{group}_{k}",
            ranges,
            {f"_in{n}": dace.Memlet(src) for n, (src, _) in enumerate(copies)},
            "\n".join(f"_out{n} = _in{n}" for n in range(len(copies))),
            {f"_out{n}": dace.Memlet(dst) for n, (_, dst) in enumerate(copies)},
            # on a CPU one thread, as the runtime exchange: halo strips are small, and an
            # OpenMP region per copy map cost more than it saved
            schedule=dtypes.ScheduleType.Default if self.gpu else dtypes.ScheduleType.Sequential,
            external_edges=True,
            propagate=False,
        )
        self.lowered.copy_map(entry, CopyMap(self.uid, kind, k))
        writes = reads if writes is None else writes
        for e in state.in_edges(entry):
            e.data = dace.Memlet(f"{e.data.data}[{reads[e.data.data]}]", dynamic=spans)
        for e in state.out_edges(exit_):
            e.data = dace.Memlet(f"{e.data.data}[{writes[e.data.data]}]", dynamic=spans)

    def fields_in_place(self) -> list[int]:
        """The fields some of whose runs MPI moves (tasklet connectors ``field<i>``)."""
        return sorted({i for runs in self.in_place.values() for i, _ in runs})

    def _add_start(self, state: dace.SDFGState) -> None:
        """The transport's tasklet posting the messages (``start_code``): reads the packed
        send arenas and the fields of runs sent in place, writes the receive arenas (which
        orders the wait after it) and, in a split pair's start, the token."""
        reads = {"peers": "_peers", "comm_handle": "_comm"}
        reads.update({f"_{a.name}": a.name for a in self.sends})
        reads.update({f"field{i}": f"_f{i}" for i in self.fields_in_place()})
        if self._flags:
            reads["flags"] = f"{self.uid}_flags"
        writes = {f"_{a.name}": a.name for a in self.recvs}
        if self.node.spec.phase == "start":
            writes[TOKEN_CONNECTOR] = TOKEN
        label = self.lowered.host_tasklet(f"{self.uid}_post")
        add_host_tasklet(state, self.sdfg, label, reads, writes, self.start_code())

    def _add_wait(self, state: dace.SDFGState) -> None:
        """The transport's tasklet after which the receive arenas, and the halos received in
        place, hold the messages (``wait_code``); none if the transport needs none."""
        host = self.wait_code()
        if host is None:
            return
        reads = {"peers": "_peers"} | {f"_{a.name}_in": a.name for a in self.recvs}
        if self.node.spec.phase == "finish":
            reads[TOKEN_CONNECTOR] = TOKEN
        writes = {f"_{a.name}": a.name for a in self.recvs}
        writes.update({f"field{i}": f"_f{i}" for i in self.fields_in_place()})
        label = self.lowered.host_tasklet(f"{self.uid}_wait")
        add_host_tasklet(state, self.sdfg, label, reads, writes, host)

    def start_code(self) -> HostCode:
        """The transport's C++ posting the messages. Connectors: ``peers`` (the rank in each
        direction), ``comm_handle`` (the MPI communicator's Fortran handle), ``_<arena>`` per
        arena (send arenas packed; receive arenas to receive into), ``field<i>`` per field
        some of whose runs go in place (``fields_in_place``) and then ``flags`` (``flag``)."""
        raise NotImplementedError

    def wait_code(self) -> HostCode | None:
        """The transport's C++ waiting for the messages, or ``None`` if work after it on the
        program's stream is ordered after them already. Connectors: ``peers``,
        ``_<arena>_in`` and ``_<arena>`` per receive arena, ``field<i>`` as for the start."""
        raise NotImplementedError
