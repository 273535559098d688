"""Message buffers as arrays of the SDFG that holds the exchange nodes.

Each exchange node packs into send buffers and unpacks from receive buffers. Lowering creates
them, before expanding the nodes, as persistent transients of the SDFG holding the node
(allocated once per program: MPI's persistent requests keep their addresses) and connects
them to the node. So:

- the expansion, a nested SDFG of its own, gets the buffers as pointer arguments. Kept as a
  separate function (not inlined, on a CPU), its copy loops then see plain restrict pointers;
  persistent arrays *inside* it would be read through the program's state struct in every
  iteration, which stopped the C compiler from vectorizing them (the compiled exchange of 10
  fields of 70x134x80 took twice as long as the runtime one);
- a split pair shares its receive buffers: the start writes them, the finish reads them
  (``split_phase.connect_pairs``).
"""

from __future__ import annotations

from typing import Any

import dace

from gt4py_halo.compiled.graph import add_persistent, on_device


def message_buffers(node: Any, state: dace.SDFGState) -> list[tuple[str, list, Any, bool]]:
    """(name, shape, dtype, receiving) of the buffers of ``node``, as its expansion names them."""
    graph = state.sdfg
    outer = {e.dst_conn: graph.arrays[e.data.data] for e in state.in_edges(node)}
    expansion = type(node).implementations[node.implementation or node.default_implementation]
    return expansion.message_buffers(node, outer)


def attach_message_buffers(sdfg: dace.SDFG, exchange_nodes: tuple[type, ...]) -> int:
    """Create and connect the buffers of every blocking and start node; return how many.

    A finish node gets its start's receive buffers from ``split_phase.connect_pairs``.
    """
    count = 0
    for node, state in list(sdfg.all_nodes_recursive()):
        if not isinstance(node, exchange_nodes) or node.spec.phase == "finish":
            continue
        graph = state.sdfg
        fields = [
            graph.arrays[e.data.data] for e in state.in_edges(node) if e.dst_conn.startswith("_f")
        ]
        device = on_device(fields)
        for name, shape, dtype, _ in message_buffers(node, state):
            add_persistent(graph, name, shape, dtype, device)
            node.add_out_connector(name)
            whole = dace.Memlet.from_array(name, graph.arrays[name])
            state.add_edge(node, name, state.add_write(name), None, whole)
            count += 1
    return count
