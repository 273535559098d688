"""Split-phase exchanges inside a compiled step: ``h = ex.start(v)`` ... ``h.finish()``.

``ex.start(v)`` becomes a nested SDFG holding a ``phase="start"`` exchange node that returns a
token: a one-element array whose descriptor type, ``ExchangeToken``, is how DaCe's frontend
finds ``finish`` (method replacements are looked up by the descriptor's class name). The
replacement below finds the start that wrote the token and adds the ``phase="finish"`` node
for the same fields, plan arrays and ``uid``, reading the token: a data edge orders the
finish after the start, and the code between them (interior stencils) may run while the
messages travel. Both are in the same block of the step (the same loop body or branch, or
both outside any), so that each start runs as often as its finish.

Lowering then gives every pair the receive buffers they share (``connect_pairs``): persistent
transients of the SDFG holding both nodes, written by the start's MPI requests and read by
the finish's unpack maps. Requests (and GPU host mirrors) live in the program's state struct
under the pair's ``uid``.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import dace
from dace.frontend.common import op_repository as oprepo
from dace.frontend.python.common import DaceSyntaxError
from dace.sdfg.state import (
    AbstractControlFlowRegion,
    BreakBlock,
    ConditionalBlock,
    ContinueBlock,
    FunctionCallRegion,
    LoopRegion,
    ReturnBlock,
)

from gt4py_halo.compiled.graph import no_line_info
from gt4py_halo.compiled.message_buffers import message_buffers
from gt4py_halo.compiled.phases import TOKEN
from gt4py_halo.errors import ProgramError


@dace.serialize.serializable
class ExchangeToken(dace.data.Array):
    """The value of ``ex.start(...)`` in a step: what its ``finish()`` is called on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*(args or (dace.int8, [1])), **kwargs)


@oprepo.replaces_method("ExchangeToken", "finish")
def _finish(visitor: Any, sdfg: dace.SDFG, state: dace.SDFGState, token: str) -> None:
    found = _start_holding(sdfg, token)
    if found is None:
        raise DaceSyntaxError(
            visitor,
            None,
            f"{token}.finish(): the ex.start(...) it belongs to must be called in the same "
            "function of the step",
        )
    token, start_state, start_call, copy_edges = found
    if getattr(sdfg.arrays[token], "finished", False):
        raise DaceSyntaxError(visitor, None, "finish() called twice on one split-phase exchange")
    if _repeated_in(state) != _repeated_in(start_state):
        raise DaceSyntaxError(
            visitor,
            None,
            "finish() in another block than the ex.start(...) it finishes (one in a loop body "
            "or a branch the other is not in): one would run more often than the other (a "
            "start in a loop finished after it, or a start before a loop finished in it). "
            "Start and finish a split-phase exchange in the same block",
        )
    jump = _jump_between(start_state, state)
    if jump is not None:
        raise DaceSyntaxError(
            visitor,
            None,
            f"a {jump} between ex.start(...) and its finish(): the start would run without "
            "its finish (its messages never waited for). Finish the exchange before the "
            f"{jump}, or start it after",
        )
    sdfg.arrays[token].finished = True
    for copy_state, e in copy_edges:  # the finish reads the start's own token: the copy is dead
        copy_state.remove_edge(e)
        for node in (e.src, e.dst):
            if node in copy_state.nodes() and copy_state.degree(node) == 0:
                copy_state.remove_node(node)
    in_edges = start_state.in_edges(start_call)
    finish_sdfg = _finish_sdfg(start_call.sdfg)
    fields = [e for e in in_edges if e.dst_conn.startswith("field")]
    nested = state.add_nested_sdfg(
        finish_sdfg,
        [e.dst_conn for e in in_edges] + ["token"],
        [e.dst_conn for e in fields],
        dict(start_call.symbol_mapping),
    )
    for e in in_edges:
        state.add_edge(state.add_read(e.data.data), None, nested, e.dst_conn, copy.deepcopy(e.data))
    for e in fields:
        state.add_edge(
            nested, e.dst_conn, state.add_write(e.data.data), None, copy.deepcopy(e.data)
        )
    memlet = dace.Memlet.from_array(token, sdfg.arrays[token])
    state.add_edge(state.add_read(token), None, nested, "token", memlet)


def _start_holding(sdfg: dace.SDFG, token: str) -> tuple[str, dace.SDFGState, Any, list] | None:
    """The ``ex.start`` call whose token ``token`` holds where the step is parsed so far: the
    start's own token, its state and nested SDFG, and the state and edges of the copy that put
    it into ``token`` (none where the start wrote ``token`` itself); ``None`` if no start
    wrote it.

    The last write of ``token`` decides. A name given a second start's token (``h =
    ex.start(v)`` after ``h = ex.start(u)``) is written by DaCe's copy of that start's token
    into the name's first one: followed back to the second start.
    """
    last = None
    for state in sdfg.all_states():
        for node in state.data_nodes():
            if node.data == token:
                for e in state.in_edges(node):
                    last = (state, e)
    if last is None:
        return None
    state, edge = last
    if isinstance(edge.src, dace.nodes.NestedSDFG):  # a start's, or a helper's returning one
        return (token, state, edge.src, []) if _is_start(edge.src.sdfg) else None
    if isinstance(edge.src, dace.nodes.AccessNode):
        source, edges = edge.src, [edge]
    else:  # a tasklet: DaCe's assignment
        edges = [*state.in_edges(edge.src), edge]
        source = edges[0].src if len(edges) == 2 else None
    if not isinstance(source, dace.nodes.AccessNode) or source.data == token:
        return None
    found = _start_holding(sdfg, source.data)
    if found is None or found[3]:
        return None
    return (*found[:3], [(state, e) for e in edges])


def _is_start(sdfg: dace.SDFG) -> bool:
    """Whether ``sdfg`` is an ``ex.start``'s (``_finish_sdfg``)."""
    from gt4py_halo.compiled.nodes import EXCHANGE_NODES

    return any(isinstance(n, EXCHANGE_NODES) for s in sdfg.all_states() for n in s.nodes())


def _repeated_in(state: dace.SDFGState) -> list[int]:
    """The loop bodies and branches around ``state`` in its SDFG, innermost first (by
    identity): what decides how often it runs. DaCe's regions of function calls do not."""
    around = []
    graph = state.parent_graph
    while not isinstance(graph, dace.SDFG):
        if isinstance(graph, LoopRegion) or isinstance(graph.parent_graph, ConditionalBlock):
            around.append(id(graph))
        graph = graph.parent_graph
    return around


def _jump_between(start_state: dace.SDFGState, state: dace.SDFGState) -> str | None:
    """The first ``break``, ``continue`` or ``return`` parsed between ``start_state`` and
    ``state`` (the finish being parsed, the last state so far) that leaves a block holding
    the start, so that the start runs and the finish does not; ``None`` if there is none.
    A jump inside a loop or function called in between stays there."""
    blocks = list(_in_order(state.sdfg))
    between = blocks[blocks.index(start_state) + 1 : blocks.index(state)]
    for block in between:
        if isinstance(block, (BreakBlock, ContinueBlock)):
            scope: type | tuple[type, ...] = LoopRegion
        elif isinstance(block, ReturnBlock):
            scope = (FunctionCallRegion, dace.SDFG)
        else:
            continue
        graph = block.parent_graph
        while not isinstance(graph, scope):
            graph = graph.parent_graph
        if _inside(start_state, graph):
            return {BreakBlock: "break", ContinueBlock: "continue"}.get(type(block), "return")
    return None


def _in_order(graph: AbstractControlFlowRegion) -> Any:
    """The blocks of ``graph`` and of the regions in it, each before its contents, in the
    order the frontend added them (the order of the source)."""
    for block in graph.nodes():
        yield block
        if isinstance(block, AbstractControlFlowRegion):
            yield from _in_order(block)


def _inside(block: Any, graph: AbstractControlFlowRegion) -> bool:
    while block is not None and block is not graph:
        block = block.parent_graph
    return block is graph


def _finish_sdfg(start_sdfg: dace.SDFG) -> dace.SDFG:
    """The SDFG of the finish: the start's node as ``phase="finish"``, same arguments."""
    from gt4py_halo.compiled.nodes import EXCHANGE_NODES

    start_state, start = next(
        (s, n) for s in start_sdfg.all_states() for n in s.nodes() if isinstance(n, EXCHANGE_NODES)
    )
    finish = copy.deepcopy(start)
    finish.spec = dataclasses.replace(start.spec, phase="finish")
    finish.remove_out_connector(TOKEN)
    finish.add_in_connector(TOKEN)
    with no_line_info():
        sdfg = dace.SDFG(start_sdfg.name.replace("start_", "finish_", 1))
        for name, dtype in start_sdfg.symbols.items():
            sdfg.add_symbol(name, dtype)
        for name, desc in start_sdfg.arrays.items():
            if name != "__return":
                sdfg.add_datadesc(name, copy.deepcopy(desc))
        sdfg.add_array("token", [1], dace.int8)
        state = sdfg.add_state("finish")
        state.add_node(finish)
        for e in start_state.in_edges(start):
            state.add_edge(
                state.add_read(e.data.data), None, finish, e.dst_conn, copy.deepcopy(e.data)
            )
            if e.dst_conn.startswith("_f"):
                finish.add_out_connector(e.dst_conn, force=True)  # also an input: read-write
                memlet = copy.deepcopy(e.data)
                state.add_edge(finish, e.dst_conn, state.add_write(e.data.data), None, memlet)
        state.add_edge(state.add_read("token"), None, finish, TOKEN, dace.Memlet("token[0]"))
    sdfg.arg_names = list(start_sdfg.arg_names)
    return sdfg


def check_all_finished(sdfg: dace.SDFG) -> None:
    """Raise ``ProgramError`` if the step starts an exchange it never finishes.

    Its messages would never be waited for and the next call would restart requests still
    active; and as nothing reads its token, ``simplify`` would silently drop the start.
    """
    for graph in sdfg.all_sdfgs_recursive():
        for name, desc in graph.arrays.items():  # the callers' copies of a start's __return
            if (
                isinstance(desc, ExchangeToken)
                and desc.transient
                and not desc.__dict__.get("finished")
            ):
                raise ProgramError(
                    f"{sdfg.name}: a split-phase exchange is started ({name}) but never "
                    "finished; call finish() on what ex.start(...) returned"
                )


def connect_pairs(sdfg: dace.SDFG, exchange_nodes: tuple[type, ...]) -> int:
    """Give each finish its start's receive buffers; return how many pairs.

    Runs after ``message_buffers.attach_message_buffers`` created the start's buffers.
    """
    pairs = 0
    for node, state in list(sdfg.all_nodes_recursive()):
        if not (isinstance(node, exchange_nodes) and node.spec.phase == "start"):
            continue
        graph = state.sdfg
        token = next(e.data.data for e in state.out_edges(node) if e.src_conn == TOKEN)
        finishes = [
            (n, s)
            for s in graph.all_states()
            for n in s.nodes()
            if isinstance(n, exchange_nodes)
            and n.spec.phase == "finish"
            and any(e.data.data == token for e in s.in_edges(n) if e.dst_conn == TOKEN)
        ]
        if len(finishes) != 1:
            raise ProgramError(
                f"a split-phase exchange ({node.label}) started in the step is finished "
                f"{len(finishes)} times there; call finish() exactly once on what "
                "ex.start(...) returned"
            )
        finish, finish_state = finishes[0]
        for name, _, _, receiving in message_buffers(node, state):
            if receiving:  # created for the start by attach_message_buffers
                whole = dace.Memlet.from_array(name, graph.arrays[name])
                finish.add_in_connector(name)
                finish_state.add_edge(finish_state.add_read(name), None, finish, name, whole)
                finish.add_out_connector(name, force=True)  # its wait writes them (GPU staging)
                write = finish_state.add_write(name)
                finish_state.add_edge(finish, name, write, None, copy.deepcopy(whole))
        graph.arrays[token] = dace.data.Array(  # host memory: only the MPI tasklets touch it
            dace.int8, [1], transient=True, storage=dace.StorageType.CPU_Heap
        )
        pairs += 1
    return pairs
