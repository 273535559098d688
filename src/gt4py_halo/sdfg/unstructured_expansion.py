"""The MPI expansion of ``UnstructuredHaloExchange``: gather, persistent requests, scatter.

Like the cartesian expansion, in two states: ``pack`` gathers each field's cells to send into
one persistent buffer (``sbuf[n, k] = f[send_idx[n], k]``, all neighbours back to back in the
order of the CSR offsets ``send_ptr``) and starts persistent requests, one per neighbour and
field; ``unpack`` waits for them and scatters the receive buffer into the halo
(``f[recv_idx[n], k] = rbuf[n, k]``). How many neighbours and cells a rank has is only known
at run time (array lengths are symbols), so the requests are created in a loop over the
neighbour ranks on the first call, and kept in the program's state struct.

CPU fields only, so far: GPU staging as in the cartesian expansion is not written yet.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import dace
from dace import dtypes
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.errors import FieldError
from gt4py_halo.sdfg.graph import add_persistent, connect_whole
from gt4py_halo.sdfg.mpi_environment import MPI as MpiEnvironment
from gt4py_halo.sdfg.phases import TOKEN, TOKEN_CONNECTOR, packs, unpacks


@dace.library.expansion
class ExpandUnstructuredHaloExchangeMPI(ExpandTransformation):
    """Lower ``UnstructuredHaloExchange`` to gathers, MPI persistent requests and scatters."""

    environments: ClassVar[list] = [MpiEnvironment]

    @staticmethod
    def expansion(node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> dace.SDFG:
        uid = node.uid
        sdfg = dace.SDFG(f"{uid}_{node.phase}")
        outer = {e.dst_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.in_edges(node)}
        outer.update(
            {e.src_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.out_edges(node)}
        )
        for connector, desc in outer.items():
            desc = desc.clone()
            desc.transient = False
            if desc.storage == dtypes.StorageType.GPU_Global:
                raise FieldError(
                    "compiled unstructured exchanges of GPU fields are not supported yet"
                )
            sdfg.add_datadesc(connector, desc)
        fields = [sdfg.arrays[f"_f{i}"] for i in range(node.field_count)]
        sends = _messages(node, fields, sdfg.arrays, "send")
        recvs = _messages(node, fields, sdfg.arrays, "recv")
        for name, shape, dtype, *_ in sends + recvs:  # the enclosing SDFG's (message_buffers)
            if name not in sdfg.arrays and packs(node.phase):  # lowered without attaching
                add_persistent(sdfg, name, shape, dtype)
        state = sdfg.add_state("begin")
        if packs(node.phase):
            state = sdfg.add_state_after(state, "pack")
            for name, shape, _, i, _ in sends:
                _add_indirect_copy(state, node.uid, i, name, "send", shape[0], fields[i])
            _add_start(state, sdfg, node, sends, recvs)
        if unpacks(node.phase):
            state = sdfg.add_state_after(state, "unpack")
            for name, shape, _, i, _ in recvs:
                _add_indirect_copy(state, node.uid, i, name, "recv", shape[0], fields[i])
            _add_wait(state, sdfg, node, recvs)
        return sdfg

    @staticmethod
    def message_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any, bool]]:
        """(name, shape, dtype, receiving) of the node's buffers (``message_buffers.py``);
        ``outer``: connector -> descriptor of the node's inputs."""
        fields = [outer[f"_f{i}"] for i in range(node.field_count)]
        return [
            (*m[:3], kind == "recv")
            for kind in ("send", "recv")
            for m in _messages(node, fields, outer, kind)
        ]


def _messages(node: Any, fields: list, arrays: dict[str, Any], kind: str) -> list[tuple]:
    """Per field, (buffer name, shape, dtype, field, elements per cell) of one direction
    (``kind``: "send" or "recv"): all neighbours' cells back to back."""
    count = arrays[f"_{kind}_idx"].shape[0]
    messages = []
    for i, field in enumerate(fields):
        levels = list(field.shape[1:])
        per_cell = math.prod(levels) if levels else 1
        messages.append((f"{node.uid}_{kind}buf_{i}", [count] + levels, field.dtype, i, per_cell))
    return messages


def _add_indirect_copy(
    state: dace.SDFGState, uid: str, i: int, buffer: str, kind: str, count: Any, field: Any
) -> None:
    """Gather (``send``) or scatter (``recv``) one field through an index list.

    Labelled like the cartesian copy maps (all neighbours are "direction 0"), so that
    ``fusion.fuse_exchange_maps`` merges those of fields of the same shape.
    """
    levels = field.shape[1:]
    params = ["n"] + [f"l{d}" for d in range(len(levels))]
    ranges = {"n": f"0:{symstr(count)}"}
    ranges.update({p: f"0:{symstr(e)}" for p, e in zip(params[1:], levels)})
    level_index = "".join(f", {p}" for p in params[1:])
    column = f"_f{i}[0:{symstr(field.shape[0])}{level_index}]"
    index = {"_idx": dace.Memlet(f"_{kind}_idx[n]")}
    if kind == "send":
        state.add_mapped_tasklet(
            f"{uid}_pack_{i}_0",
            ranges,
            {**index, "_column": dace.Memlet(column)},
            "_out = _column[_idx]",
            {"_out": dace.Memlet(f"{buffer}[{', '.join(params)}]")},
            external_edges=True,
        )
    else:
        state.add_mapped_tasklet(
            f"{uid}_unpack_{i}_0",
            ranges,
            {**index, "_in": dace.Memlet(f"{buffer}[{', '.join(params)}]")},
            "_column[_idx] = _in",
            {"_column": dace.Memlet(column, dynamic=True)},
            external_edges=True,
        )


def _add_start(state: dace.SDFGState, sdfg: dace.SDFG, node: Any, sends: list, recvs: list) -> None:
    uid = node.uid
    count = symstr(sdfg.arrays["_neighbours"].shape[0], cpp_mode=True)
    fields = node.field_count
    lines = [
        "MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_handle[0]);",
        f"__state->{uid}_count = 2 * {fields} * ({count});",
        f"__state->{uid}_requests = new MPI_Request[__state->{uid}_count + 1];",
        "int n = 0;",
        f"for (int p = 0; p < {count}; ++p) {{",
    ]
    messages = [(r, "Recv", "recv_ptr") for r in recvs] + [(s, "Send", "send_ptr") for s in sends]
    for (name, _, dtype, i, cell), kind, ptr in messages:
        cells = symstr(cell, cpp_mode=True)
        lines.append(
            f"    MPI_{kind}_init(_{name} + {ptr}[p] * ({cells}), "
            f"({ptr}[p + 1] - {ptr}[p]) * ({cells}) * {dtype.bytes}, MPI_BYTE, neighbours[p], "
            f"{node.tag_base + i}, comm, &__state->{uid}_requests[n++]);"
        )
    lines.append("}")
    init = "\n    ".join(lines)
    code = f"""
if (!__state->{uid}_ready) {{
    {init}
    __state->{uid}_ready = 1;
}}
MPI_Startall(__state->{uid}_count, __state->{uid}_requests);
"""
    exit_code = f"""{{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (__state->{uid}_ready) {{
        if (!finalized)
            for (int n = 0; n < __state->{uid}_count; ++n) MPI_Request_free(&__state->{uid}_requests[n]);
        delete[] __state->{uid}_requests;
    }}
}}"""
    # tasklet connectors must not be named like arrays: "comm_handle" reads "_comm"
    plan_inputs = {"neighbours": "_neighbours", "send_ptr": "_send_ptr", "recv_ptr": "_recv_ptr"}
    plan_inputs["comm_handle"] = "_comm"
    tasklet = state.add_tasklet(
        f"{uid}_mpi_start",
        list(plan_inputs) + [f"_{name}" for name, *_ in sends],
        [f"_{name}" for name, *_ in recvs] + ([TOKEN_CONNECTOR] if node.phase == "start" else []),
        code,
        language=dtypes.Language.CPP,
        side_effects=True,
        state_fields=[
            f"MPI_Request* {uid}_requests = nullptr;",
            f"int {uid}_count = 0;",
            f"int {uid}_ready = 0;",
        ],
        code_exit=exit_code,
    )
    for connector, name in plan_inputs.items():
        connect_whole(state, sdfg, state.add_read(name), tasklet, connector)
    packed = {n.data: n for n in state.data_nodes() if state.in_degree(n) > 0}
    for name, *_ in sends:
        connect_whole(state, sdfg, packed[name], tasklet, f"_{name}")
    for name, *_ in recvs:
        connect_whole(state, sdfg, tasklet, state.add_write(name), f"_{name}")
    if node.phase == "start":
        connect_whole(state, sdfg, tasklet, state.add_write(TOKEN), TOKEN_CONNECTOR)


def _add_wait(state: dace.SDFGState, sdfg: dace.SDFG, node: Any, recvs: list) -> None:
    uid = node.uid
    names = [name for name, *_ in recvs]
    token = [TOKEN_CONNECTOR] if node.phase == "finish" else []
    tasklet = state.add_tasklet(
        f"{uid}_mpi_wait",
        [f"_{n}_in" for n in names] + token,
        [f"_{n}" for n in names],
        f"MPI_Waitall(__state->{uid}_count, __state->{uid}_requests, MPI_STATUSES_IGNORE);",
        language=dtypes.Language.CPP,
        side_effects=True,
    )
    scattered = {n.data: n for n in state.data_nodes() if state.out_degree(n) > 0}
    for name in names:  # the scatter maps read the buffer after the wait
        connect_whole(state, sdfg, state.add_read(name), tasklet, f"_{name}_in")
        connect_whole(state, sdfg, tasklet, scattered[name], f"_{name}")
    if token:
        connect_whole(state, sdfg, state.add_read(TOKEN), tasklet, TOKEN_CONNECTOR)
