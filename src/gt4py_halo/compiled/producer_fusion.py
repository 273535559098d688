"""Pack maps fused into the stencils that produce the exchanged fields.

An exchange packs its fields' send boxes (strips of owned cells along the halo) into its send
arenas (``arenas.py``). When the stencil that wrote a field ran just before, the values are
at hand in its map: each point of the stencil's map that lies in a send box also writes its
value to the box's place in the arena. On a GPU that is one kernel instead of a stencil kernel
and per direction a pack kernel reading the field back; on a CPU, no second pass over the
strips.

Which points a GT4Py stencil computes is known at run time only: its domain bounds are
scalar arguments (``i0``, ``i1``, ...), the send boxes are symbolic in the fields' shapes. So
the fused write is guarded per point by the box test, and whether the stencil covered all the
boxes is decided at run time: a flag (an interstate symbol, ``<uid>_prepacked_<field>``)
computed from the stencil map's range right after its state; the exchange packs an arena
itself unless the flags of all its fields are set. The exchange's own packs stay in the
expansion for that case. (The issue's plan, splitting the producer's map at the halo strips, needs those
ranges at build time; with run-time bounds it would need a copy of the stencil per case.)

A field's producer is fused when it is the last writer of the field before the exchange: a
top-level map, in the exchange's own state (with a path to the exchange node) or in an
earlier state of the same region reached through states with a single, unconditional entry
that do not write the field, writing it point by point (its index along
each axis one map parameter plus a constant). All fields of an arena must have one, else the
arena is left to the exchange's packs. Cartesian exchanges of transports with arenas (MPI) only:
an unstructured exchange gathers its send lists through index arrays, and GHEX packs into
buffers of its own.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any

import dace
import networkx as nx
import sympy
from dace.sdfg import nodes
from dace.symbolic import symstr

from gt4py_halo.compiled.arenas import Arena, arenas
from gt4py_halo.compiled.message_buffers import message_buffers
from gt4py_halo.compiled.phases import packs

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _Producer:
    """The map that writes a field before its exchange, and where it writes it."""

    state: dace.SDFGState
    exit: nodes.MapExit
    inner: Any  # the edge into the map exit that writes the field, one point per iteration
    coordinates: list[Any]  # the field index written, per axis (symbolic in the map params)
    axes: list[tuple[tuple[Any, Any], Any]]  # per axis: its parameter's range, the offset
    beside: bool  # in the exchange's own state (ahead of it), not in an earlier one

    @property
    def label(self) -> str:
        return self.exit.map.label


def fuse_packs_into_producers(sdfg: dace.SDFG, exchange_type: type) -> dict[str, list[str]]:
    """Fuse the packing of every send arena whose fields all have a producer; return
    ``send arena -> labels of the producer maps`` for those fused.

    Runs on the top-level graph of ``sdfg`` (GT4Py programs inlined), after
    ``attach_message_buffers`` created the arenas and before the nodes are expanded.
    """
    fused: dict[str, list[str]] = {}
    for node, state in list(sdfg.all_nodes_recursive()):
        if (
            not (isinstance(node, exchange_type) and packs(node.spec.phase))
            or state.sdfg is not sdfg
        ):
            continue
        if not message_buffers(node, state):  # its transport packs into buffers of its own
            continue
        fields = {e.dst_conn: e.data.data for e in state.in_edges(node)}
        names = [fields[f"_f{i}"] for i in range(node.spec.field_count)]
        for arena in arenas(node, [sdfg.arrays[n] for n in names], sending=True):
            producers = [_producer(state, node, names[i]) for i in arena.fields]
            if any(p is None for p in producers):
                log.debug(
                    "%s: %s has a field without a fusable producer", node.spec.uid, arena.name
                )
                continue
            writes: dict[dace.SDFGState, nodes.AccessNode] = {}  # the arena, per state
            flags = [
                _fuse(sdfg, producer, arena, j, f"{node.spec.uid}_prepacked_{i}", writes)
                for j, (i, producer) in enumerate(zip(arena.fields, producers))
            ]
            prepacked = (*node.spec.prepacked, (arena.name, tuple(flags)))
            node.spec = dataclasses.replace(node.spec, prepacked=prepacked)
            node.add_in_connector(arena.name, force=True)  # an output already: it packs too
            whole = dace.Memlet.from_array(arena.name, sdfg.arrays[arena.name])
            packed = writes.get(state) or state.add_read(arena.name)  # ahead of it, if here
            state.add_edge(packed, None, node, arena.name, whole)
            fused[arena.name] = [p.label for p in producers]
    log.debug("%s: packs fused into producers: %s", sdfg.name, fused or "none")
    return fused


def _producer(state: dace.SDFGState, node: Any, data: str) -> _Producer | None:
    """The map that last wrote ``data`` before ``node``, if fusable (see module docs)."""
    writes = _written_in(state, data, besides=node)
    if writes:
        ahead = len(writes) == 1 and nx.has_path(state.nx, writes[0].dst, node)
        return _map_writing(state, writes, beside=True) if ahead else None
    region, seen = state.parent_graph, {state}
    while True:
        entries = region.in_edges(state)
        if len(entries) != 1 or not entries[0].data.is_unconditional():
            return None
        state = entries[0].src
        if not isinstance(state, dace.SDFGState) or state in seen:
            return None
        seen.add(state)
        writes = _written_in(state, data)
        if writes:
            return _map_writing(state, writes, beside=False) if len(writes) == 1 else None


def _written_in(state: dace.SDFGState, data: str, besides: Any = None) -> list:
    """The edges writing ``data`` in ``state`` (other than from ``besides``)."""
    return [
        e
        for n in state.data_nodes()
        if n.data == data
        for e in state.in_edges(n)
        if e.src is not besides
    ]


def _map_writing(state: dace.SDFGState, writes: list, beside: bool) -> _Producer | None:
    """The producer if the one edge of ``writes`` leaves a top-level map writing point-wise
    over a range the state's symbols give: not one whose bounds are data (scalar arguments:
    DaCe reads them into the map through connectors, which the coverage test, an assignment
    outside the map, cannot name)."""
    exit_ = writes[0].src
    if not isinstance(exit_, nodes.MapExit) or state.entry_node(state.entry_node(exit_)):
        return None
    if any(not c.startswith("IN_") for c in state.entry_node(exit_).in_connectors):
        return None  # a dynamic map range
    inner = list(state.in_edges_by_connector(exit_, "IN_" + writes[0].src_conn[len("OUT_") :]))
    if len(inner) != 1 or inner[0].data.wcr is not None or inner[0].data.dynamic:
        return None
    subset = inner[0].data.get_dst_subset(inner[0], state)
    if subset is None or subset.num_elements() != 1:
        return None
    coordinates = [begin for begin, _, _ in subset.ndrange()]
    axes = _axis_parameters(exit_.map, coordinates)
    if axes is None:
        return None
    return _Producer(state, exit_, inner[0], coordinates, axes, beside)


def _axis_parameters(map_: nodes.Map, coordinates: list[Any]) -> list[tuple[Any, Any]] | None:
    """Per field axis, (map range of its parameter, constant offset); ``None`` unless each
    axis is one parameter of unit step plus a constant, and no two axes share one."""
    found, used = [], set()
    for coordinate in coordinates:
        expr = dace.symbolic.pystr_to_symbolic(str(coordinate))
        by_name = {str(s): s for s in expr.free_symbols}
        mine = [p for p in map_.params if p in by_name]
        if len(mine) != 1 or mine[0] in used:
            return None
        offset = sympy.expand(expr - by_name[mine[0]])
        if {str(s) for s in offset.free_symbols} & set(map_.params):
            return None
        used.add(mine[0])
        begin, end, step = map_.range[map_.params.index(mine[0])]
        if step != 1:
            return None
        found.append(((begin, end), offset))
    return found


def _fuse(
    sdfg: dace.SDFG,
    producer: _Producer,
    arena: Arena,
    j: int,
    flag: str,
    writes: dict[dace.SDFGState, nodes.AccessNode],
) -> str:
    """Make the producer write field ``j`` of ``arena``'s group into the arena's segments
    (through ``writes[state]``, created if missing), and set ``flag`` when its map covers
    them all; return ``flag``."""
    state, exit_, inner = producer.state, producer.exit, producer.inner
    code = _pack_code(arena, [symstr(c) for c in producer.coordinates], j)
    tee = state.add_tasklet(f"{flag}_pack", {"_in": None}, {"_out": None, "_arena": None}, code)
    field = next(iter(state.out_edges_by_connector(exit_, "OUT_" + inner.dst_conn[3:]))).data.data
    target = copy.deepcopy(inner.data.get_dst_subset(inner, state))
    source = inner.data.get_src_subset(inner, state)
    value = inner.src
    if not isinstance(value, nodes.AccessNode):  # a tasklet's result: through a scalar
        name, _ = sdfg.add_scalar(
            f"{flag}_value", sdfg.arrays[field].dtype, transient=True, find_new_name=True
        )
        value, source = state.add_access(name), dace.subsets.Range([(0, 0, 1)])
        state.add_edge(inner.src, inner.src_conn, value, None, dace.Memlet(data=name, subset="0"))
    state.remove_edge(inner)
    state.add_edge(value, None, tee, "_in", dace.Memlet(data=value.data, subset=source))
    state.add_edge(tee, "_out", exit_, inner.dst_conn, dace.Memlet(data=field, subset=target))
    whole = dace.Memlet.from_array(arena.name, sdfg.arrays[arena.name])
    whole.dynamic = True
    connector = exit_.next_connector(arena.name)
    exit_.add_in_connector("IN_" + connector)
    exit_.add_out_connector("OUT_" + connector)
    state.add_edge(tee, "_arena", exit_, "IN_" + connector, copy.deepcopy(whole))
    if state not in writes:
        writes[state] = state.add_write(arena.name)
    state.add_edge(exit_, "OUT_" + connector, writes[state], None, whole)
    # the flag on an edge of its own: right before the state (where the map's range holds),
    # or, when the exchange runs in a later state, right after it
    region = state.parent_graph
    test = {flag: _coverage(producer.axes, arena)}
    if producer.beside:
        first = region.start_block is state
        region.add_state_before(state, f"{flag}_test", is_start_block=first, assignments=test)
    else:
        region.add_state_after(state, f"{flag}_test", assignments=test)
    return flag


def _pack_code(arena: Arena, coordinates: list[str], j: int) -> str:
    """The tasklet that passes the stencil's value on and writes it to the arena where the
    point lies in a send box. Most points lie in none: one test against the core of the
    owned cells (inside every strip) first, then the boxes."""
    core = []
    for d, c in enumerate(coordinates[: len(arena.segments[0].bounds)]):
        for side, (at, test) in ((-1, (1, ">=")), (1, (0, "<"))):
            edges = {symstr(s.bounds[d][at]) for s in arena.segments if s.toward[d] == side}
            if len(edges) == 1:  # the inner edge of the strip along this side
                core.append(f"({c} {test} {edges.pop()})")
    lines, indent = ["_out = _in"], ""
    if core:
        lines.append(f"if not ({' and '.join(core)}):")
        indent = "    "
    for segment in arena.segments:
        inside = " and ".join(
            f"({c} >= {symstr(a)}) and ({c} < {symstr(b)})"
            for c, (a, b) in zip(coordinates, segment.bounds)
        )
        lines += [
            f"{indent}if {inside}:",
            f"{indent}    _arena[{segment.flat_index(coordinates, j)}] = _in",
        ]
    return "\n".join(lines)


def _coverage(axes: list[tuple[tuple[Any, Any], Any]], arena: Arena) -> str:
    """The run-time test that the map (``axes``: per field axis its parameter's range and
    offset) wrote every element of the arena's boxes, which it cannot where a box spans the
    halo of an axis that wraps onto the rank (``cartesian.wrapped_box``): the exchange copies
    that halo after the map ran."""
    tests = [f"({w} == 0)" for w in arena.wraps]
    for segment in arena.segments:
        levels = [(0, n) for n in segment.box[len(segment.bounds) :]]
        for ((begin, end), offset), (a, b) in zip(axes, list(segment.bounds) + levels):
            tests.append(f"(({symstr(begin + offset)}) <= ({symstr(a)}))")
            tests.append(f"(({symstr(end + offset)}) >= ({symstr(b)}) - 1)")
    return " and ".join(dict.fromkeys(tests))
