"""Small SDFG-building helpers shared by the expansions."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import dace
from dace import dtypes
from dace.sdfg.state import LoopRegion


def no_line_info() -> contextlib.AbstractContextManager:
    """While nodes of ours are added: none gets a source line. DaCe gives each node added
    without one the line of its caller, found by inspecting the whole Python stack (most of
    the time of adding a node; ``inspect`` scans every module for a frame of a script run by
    ``runpy``, ``python -m mpi4py script.py``), and that line would be ours or GT4Py's, not
    the user's."""
    return dace.config.set_temporary("compiler", "lineinfo", value="none")


def no_history() -> contextlib.AbstractContextManager:
    """While GT4Py's and our transformations change an SDFG: DaCe keeps no history of them.
    Its history holds a copy of the whole SDFG from before the first transformation, which
    every later serialization writes out in full and then drops (each hash of the step,
    its saved file) and every copy copies; nothing of ours reads the history."""
    return dace.config.set_temporary("store_history", value=False)


def connect_whole(
    state: dace.SDFGState, sdfg: dace.SDFG, src: Any, dst: Any, connector: str
) -> None:
    """A whole-array edge between an access node and a tasklet's pointer connector.

    The tasklets of the expansions hand buffers to MPI, which needs their addresses, not
    their elements: the connector becomes a pointer of the array's element type.
    """
    access = src if isinstance(src, dace.nodes.AccessNode) else dst
    desc = sdfg.arrays[access.data]
    memlet = dace.Memlet.from_array(access.data, desc)
    if access is src:
        dst.in_connectors[connector] = dace.pointer(desc.dtype)
        state.add_edge(src, None, dst, connector, memlet)
    else:
        src.out_connectors[connector] = dace.pointer(desc.dtype)
        state.add_edge(src, connector, dst, None, memlet)


def add_cpp_tasklet(
    state: dace.SDFGState, label: str, inputs: Any, outputs: Any, code: str, **options: Any
) -> dace.nodes.Tasklet:
    """A C++ tasklet of ours (``options``: DaCe's ``add_tasklet``'s), marked so (copies of it
    too), its code one block: a symbol DaCe replaces by a constant is declared before the
    code, which would clash with a declaration of ours of that name at its top
    (``ignore_assigned_names``)."""
    tasklet = state.add_tasklet(
        label, inputs, outputs, f"{{\n{code}\n}}", language=dtypes.Language.CPP, **options
    )
    setattr(tasklet, _OURS, True)
    return tasklet


_OURS = "gt4py_halo_code"  # the attribute that marks our C++ tasklets


def ignore_assigned_names(sdfg: dace.SDFG) -> None:
    """Make our C++ tasklets in ``sdfg`` (``add_cpp_tasklet``; not those of SDFGs nested in
    it) read none of the symbols its control flow assigns through their code.

    DaCe takes every name in C++ code that is a symbol of the SDFG for a read of it. A name
    of ours (a local ``k``) equal to a symbol the step's own code assigns (a loop counter
    ``k``) made that symbol read before its assignment: a free symbol of the step, an
    argument no call passes. No C++ of ours reads a symbol the step assigns (it is given
    shapes, strides and segment offsets, which the step does not assign); a step's own
    assignments are declared and made by DaCe whether or not code reads them.
    """
    assigned = {name for edge in sdfg.all_interstate_edges() for name in edge.data.assignments}
    assigned |= {
        region.loop_variable
        for region in sdfg.all_control_flow_regions()
        if isinstance(region, LoopRegion) and region.loop_variable
    }
    for node, state in sdfg.all_nodes_recursive():
        if state.sdfg is sdfg and getattr(node, _OURS, False):
            named = dace.symbolic.symbols_in_code(node.code.as_string, potential_symbols=assigned)
            node.ignored_symbols = node.ignored_symbols | named


@dataclasses.dataclass(frozen=True)
class HostCode:
    """The C++ of a transport's tasklet: what runs at each call, the members of the program's
    state struct it keeps between calls (requests, communicators), and what runs when the
    program is freed."""

    code: str
    state_fields: tuple[str, ...] = ()
    code_exit: str = ""


def add_host_tasklet(
    state: dace.SDFGState,
    sdfg: dace.SDFG,
    label: str,
    reads: dict[str, Any],
    writes: dict[str, Any],
    host: HostCode,
) -> None:
    """A C++ tasklet with side effects running ``host``, every connector a whole-array pointer
    (``connect_whole``); ``reads``/``writes``: connector -> access node, or the name of the
    array to read or write. Connectors must not be named like arrays."""
    tasklet = add_cpp_tasklet(
        state,
        label,
        list(reads),
        list(writes),
        host.code,
        side_effects=True,
        state_fields=list(host.state_fields),
        code_exit=host.code_exit,
    )
    for connector, src in reads.items():
        src = state.add_read(src) if isinstance(src, str) else src
        connect_whole(state, sdfg, src, tasklet, connector)
    for connector, dst in writes.items():
        dst = state.add_write(dst) if isinstance(dst, str) else dst
        connect_whole(state, sdfg, tasklet, dst, connector)


def add_persistent(sdfg: dace.SDFG, name: str, shape: Any, dtype: Any, device: bool = False) -> str:
    """A transient allocated once per program: its address stays fixed for MPI requests."""
    sdfg.add_array(
        name,
        shape,
        dtype,
        transient=True,
        lifetime=dtypes.AllocationLifetime.Persistent,
        storage=dtypes.StorageType.GPU_Global if device else dtypes.StorageType.CPU_Heap,
    )
    return name


def on_device(fields: Any) -> bool:
    """Whether an exchange's fields (descriptors) live on the GPU, and so its buffers."""
    return any(desc.storage == dtypes.StorageType.GPU_Global for desc in fields)


def host_tasklet(
    sdfg: dace.SDFG, node: Any, label: str, code: str, reads: dict[str, str], **options: Any
) -> None:
    """Fill ``sdfg`` (``nested_for(node)``) with one state of one C++ tasklet ``label``
    running ``code`` (``add_cpp_tasklet``, with side effects; ``options``: its state fields,
    exit code): the whole exchange of a transport that moves the fields in calls of its own.
    It reads ``reads`` (connector: array) and each field ``_f<i>`` (``in<i>``), writes each
    field where its phase unpacks (``field<i>``); a start writes its token, a finish reads it."""
    from gt4py_halo.compiled.phases import TOKEN, TOKEN_CONNECTOR, unpacks

    phase, count = node.spec.phase, node.spec.field_count
    state = sdfg.add_state(phase)
    inputs = [*reads, *(f"in{i}" for i in range(count))]
    outputs = [f"field{i}" for i in range(count)] if unpacks(phase) else []
    if phase == "start":
        outputs.append(TOKEN_CONNECTOR)
    if phase == "finish":
        inputs.append(TOKEN_CONNECTOR)
    tasklet = add_cpp_tasklet(state, label, inputs, outputs, code, side_effects=True, **options)
    for connector, name in reads.items():
        connect_whole(state, sdfg, state.add_read(name), tasklet, connector)
    for i in range(count):
        connect_whole(state, sdfg, state.add_read(f"_f{i}"), tasklet, f"in{i}")
        if unpacks(phase):
            connect_whole(state, sdfg, tasklet, state.add_write(f"_f{i}"), f"field{i}")
    if phase == "start":
        connect_whole(state, sdfg, tasklet, state.add_write(TOKEN), TOKEN_CONNECTOR)
    elif phase == "finish":
        connect_whole(state, sdfg, state.add_read(TOKEN), tasklet, TOKEN_CONNECTOR)


def nested_for(node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> dace.SDFG:
    """An empty SDFG for ``node``'s expansion with one argument per connector of the node,
    described as the arrays connected to it outside."""
    sdfg = dace.SDFG(f"{node.spec.uid}_{node.spec.phase}")
    outer = {e.dst_conn: e for e in parent_state.in_edges(node)}
    outer.update({e.src_conn: e for e in parent_state.out_edges(node)})
    for connector, edge in outer.items():
        desc = parent_sdfg.arrays[edge.data.data].clone()
        desc.transient = False
        sdfg.add_datadesc(connector, desc)
    return sdfg


def sort_assignments(sdfg: dace.SDFG) -> None:
    """Each interstate edge's assignments in name order, where none reads another of the same
    edge (elsewhere their order is their meaning).

    DaCe's GPU transformation reorders some assignments in set order, which differs between
    processes (string hashing is salted per process): without this, ranks that lowered the
    same step would hash different SDFGs.
    """
    for edge in sdfg.all_interstate_edges(recursive=True):
        assignments = edge.data.assignments
        reads = set().union(*(dace.symbolic.symbols_in_code(v) for v in assignments.values()))
        if not reads & assignments.keys():
            edge.data.assignments = dict(sorted(assignments.items()))


def isolate_nested_sdfgs(sdfg: dace.SDFG) -> None:
    """Give each nested SDFG of ``sdfg`` a state of its own (with its access nodes): what it
    depends on goes to a state before it, everything else to the state after it.

    A multi-state nested SDFG is inlined only when alone in its state, and DaCe's GPU
    transformation handles a nested SDFG left in the step without the step's host data.
    """
    while True:
        crowded = [
            (state, node)
            for state in sdfg.states()
            for node in state.nodes()
            if isinstance(node, dace.nodes.NestedSDFG) and not _alone(state, node)
        ]
        if not crowded:
            return
        # the last of its state first: one that no other nested SDFG there depends on
        state, node = next(
            (state, node)
            for state, node in crowded
            if not any(node in _ancestors(state, {other}) for s, other in crowded if s is state)
        )
        around = {node, *state.successors(node)}
        alone = _split_off(state, around | _ancestors(state, around))
        others = set(alone.nodes()) - {node, *alone.predecessors(node), *alone.successors(node)}
        others |= _ancestors(alone, others)
        if others:
            _split_off(alone, others)
        if not _alone(alone, node):
            raise ValueError(f"cannot give {node} a state of its own")


def _alone(state: dace.SDFGState, node: Any) -> bool:
    return state.number_of_nodes() == 1 + len({*state.predecessors(node), *state.successors(node)})


def _ancestors(state: dace.SDFGState, nodes: set[Any]) -> set[Any]:
    found: set[Any] = set()
    todo = [p for n in nodes for p in state.predecessors(n)]
    while todo:
        n = todo.pop()
        if n not in found:
            found.add(n)
            todo.extend(state.predecessors(n))
    return found


def _split_off(state: dace.SDFGState, moved: set[Any]) -> dace.SDFGState:
    """Move ``moved`` (closed under predecessors) to a new state before ``state``, which it
    returns. An edge between the two ends at an access node of one of them: data read after
    the split is read again from its container; data written before it, written there."""
    edges = list(state.edges())
    crossing = [e for e in edges if e.src in moved and e.dst not in moved]
    if any(
        not isinstance(e.src, dace.nodes.AccessNode)
        for e in crossing
        if not isinstance(e.dst, dace.nodes.AccessNode)
    ):
        raise ValueError(
            f"{state.label}: no state boundary between {crossing[0].src} and {crossing[0].dst}"
        )
    before = state.parent_graph.add_state_before(state, f"{state.label}_before")
    for n in [n for n in state.nodes() if n in moved]:  # in order: the step's hash sees it
        state.remove_node(n)
        before.add_node(n)
    copies: dict[Any, Any] = {}
    for e in edges:
        if e.src in moved and e.dst in moved:
            before.add_edge(e.src, e.src_conn, e.dst, e.dst_conn, e.data)
        elif e.src in moved and isinstance(e.src, dace.nodes.AccessNode):  # read after
            if e.src not in copies:
                copies[e.src] = state.add_access(e.src.data)
            state.add_edge(copies[e.src], e.src_conn, e.dst, e.dst_conn, e.data)
        elif e.src in moved:  # written before
            if e.dst not in copies:
                copies[e.dst] = before.add_access(e.dst.data)
            before.add_edge(e.src, e.src_conn, copies[e.dst], e.dst_conn, e.data)
            if state.degree(e.dst) == 0:  # written before, not read after
                state.remove_node(e.dst)
    return before
