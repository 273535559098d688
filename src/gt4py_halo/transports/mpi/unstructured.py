"""The MPI expansion of ``UnstructuredHaloExchange``: gather, persistent requests, scatter.

Like the cartesian expansion, in two states: ``pack`` gathers each field's cells to send into
one persistent buffer (``sbuf[n, k] = f[send_idx[n], k]``, all neighbours back to back in the
order of the CSR offsets ``send_ptr``) and starts persistent requests, one per neighbour and
field; ``unpack`` waits for them and scatters the receive buffer into the halo
(``f[recv_idx[n], k] = rbuf[n, k]``). How many neighbours and cells a rank has is only known
at run time (array lengths are symbols), so the requests are created in a loop over the
neighbour ranks on the first call, and kept in the program's state struct.

GPU fields get device buffers, so gathers and scatters become kernels on the program's
stream. Their index lists are plan data, kept on the host: each phase uploads the list it
uses to a persistent device array on its first call (an ``*_upload`` tasklet, on the stream).
MPI works on pinned host mirrors of the buffers, staged as in the cartesian expansion
(``host_staging.py``): one host wait per exchange, before sending.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import dace
from dace import dtypes
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.compiled import host_staging as staging
from gt4py_halo.compiled.fusion import copy_map_label
from gt4py_halo.compiled.graph import add_persistent, connect_whole, nested_for, on_device
from gt4py_halo.compiled.nodes import UnstructuredHaloExchange
from gt4py_halo.compiled.phases import TOKEN, TOKEN_CONNECTOR, packs, unpacks
from gt4py_halo.transports.mpi.environment import MPI as MpiEnvironment


@dace.library.register_expansion(UnstructuredHaloExchange, "MPI")
class ExpandUnstructuredHaloExchangeMPI(ExpandTransformation):
    """Lower ``UnstructuredHaloExchange`` to gathers, MPI persistent requests and scatters."""

    environments: ClassVar[list] = [MpiEnvironment]
    #: The plan arrays the node gets (``convertible.exchange_sdfg``).
    PLAN_ARRAYS = ("neighbours", "send_ptr", "send_idx", "recv_ptr", "recv_idx")

    @staticmethod
    def expansion(node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> dace.SDFG:
        uid = node.spec.uid
        sdfg = nested_for(node, parent_state, parent_sdfg)
        fields = [sdfg.arrays[f"_f{i}"] for i in range(node.spec.field_count)]
        gpu = on_device(fields)
        sends = _messages(node, fields, sdfg.arrays, "send")
        recvs = _messages(node, fields, sdfg.arrays, "recv")
        for name, shape, dtype, *_ in sends + recvs:  # the enclosing SDFG's (message_buffers)
            if name not in sdfg.arrays and packs(node.spec.phase):  # lowered without attaching
                add_persistent(sdfg, name, shape, dtype, gpu)
        state = sdfg.add_state("begin")
        for kind, messages, phase in (("send", sends, packs), ("recv", recvs, unpacks)):
            if not phase(node.spec.phase):
                continue
            index = f"_{kind}_idx"
            if gpu:
                state = sdfg.add_state_after(state, f"upload_{kind}")
                index = _upload(state, sdfg, uid, index)
            state = sdfg.add_state_after(state, "pack" if kind == "send" else "unpack")
            for name, shape, _, i, _ in messages:
                _add_indirect_copy(state, uid, i, name, kind, shape[0], fields[i], index)
            if kind == "send":
                _add_start(state, sdfg, node, sends, recvs, gpu)
            else:
                _add_wait(state, sdfg, node, recvs, gpu)
        return sdfg

    @staticmethod
    def message_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any, bool]]:
        """(name, shape, dtype, receiving) of the node's buffers (``message_buffers.py``);
        ``outer``: connector -> descriptor of the node's inputs."""
        fields = [outer[f"_f{i}"] for i in range(node.spec.field_count)]
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
        messages.append(
            (f"{node.spec.uid}_{kind}buf_{i}", [count] + levels, field.dtype, i, per_cell)
        )
    return messages


def _upload(state: dace.SDFGState, sdfg: dace.SDFG, uid: str, index: str) -> str:
    """A device copy of the host index list ``index``, filled on the first call on the
    program's stream (a tasklet the GPU transformation leaves on the host); its name."""
    host = sdfg.arrays[index]
    name = add_persistent(sdfg, f"{uid}{index}_device", host.shape, host.dtype, device=True)
    done = f"{uid}{index}_uploaded"
    count = symstr(host.shape[0], cpp_mode=True)
    code = f"""
if (!__state->{done}) {{
    size_t bytes = ({count}) * sizeof(*host_list);
    DACE_GPU_CHECK(cudaMemcpyAsync(device_list, host_list, bytes, cudaMemcpyHostToDevice, __dace_current_stream));
    __state->{done} = 1;
}}"""
    tasklet = state.add_tasklet(
        f"{uid}{index}_upload",
        ["host_list"],
        ["device_list"],
        code,
        language=dtypes.Language.CPP,
        side_effects=True,
        state_fields=[f"int {done} = 0;"],
    )
    connect_whole(state, sdfg, state.add_read(index), tasklet, "host_list")
    connect_whole(state, sdfg, tasklet, state.add_write(name), "device_list")
    return name


def _add_indirect_copy(
    state: dace.SDFGState,
    uid: str,
    i: int,
    buffer: str,
    kind: str,
    count: Any,
    field: Any,
    index: str,
) -> None:
    """Gather (``send``) or scatter (``recv``) one field through the index list ``index``.

    Labelled like the cartesian copy maps (all neighbours are "direction 0"), so that
    ``fusion.fuse_exchange_maps`` merges those of fields of the same shape.
    """
    levels = field.shape[1:]
    params = ["n"] + [f"l{d}" for d in range(len(levels))]
    ranges = {"n": f"0:{symstr(count)}"}
    ranges.update({p: f"0:{symstr(e)}" for p, e in zip(params[1:], levels)})
    level_index = "".join(f", {p}" for p in params[1:])
    column = f"_f{i}[0:{symstr(field.shape[0])}{level_index}]"
    index = {"_idx": dace.Memlet(f"{index}[n]")}
    if kind == "send":
        state.add_mapped_tasklet(
            copy_map_label(uid, "pack", i, 0),
            ranges,
            {**index, "_column": dace.Memlet(column)},
            "_out = _column[_idx]",
            {"_out": dace.Memlet(f"{buffer}[{', '.join(params)}]")},
            external_edges=True,
        )
    else:
        state.add_mapped_tasklet(
            copy_map_label(uid, "unpack", i, 0),
            ranges,
            {**index, "_in": dace.Memlet(f"{buffer}[{', '.join(params)}]")},
            "_column[_idx] = _in",
            {"_column": dace.Memlet(column, dynamic=True)},
            external_edges=True,
        )


def _add_start(
    state: dace.SDFGState, sdfg: dace.SDFG, node: Any, sends: list, recvs: list, gpu: bool
) -> None:
    uid = node.spec.uid
    count = symstr(sdfg.arrays["_neighbours"].shape[0], cpp_mode=True)
    fields = node.spec.field_count
    names = [name for name, *_ in recvs + sends]
    lines = [
        "MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_handle[0]);",
        f"__state->{uid}_count = 2 * {fields} * ({count});",
        f"__state->{uid}_requests = new MPI_Request[__state->{uid}_count + 1];",
        "int n = 0;",
    ]
    if gpu:
        lines += [staging.allocate_mirror(name, _bytes(sdfg, name)) for name in names]
    lines.append(f"for (int p = 0; p < {count}; ++p) {{")
    messages = [(r, "Recv", "recv_ptr") for r in recvs] + [(s, "Send", "send_ptr") for s in sends]
    for (name, _, dtype, i, cell), kind, ptr in messages:
        cells = symstr(cell, cpp_mode=True)
        wire = f"(({dtype.ctype}*){staging.mirror(name)})" if gpu else f"_{name}"
        lines.append(
            f"    MPI_{kind}_init({wire} + {ptr}[p] * ({cells}), "
            f"({ptr}[p + 1] - {ptr}[p]) * ({cells}) * {dtype.bytes}, MPI_BYTE, neighbours[p], "
            f"{node.spec.tag_base + i}, comm, &__state->{uid}_requests[n++]);"
        )
    lines.append("}")
    init = "\n    ".join(lines)
    copy_to_host = ""
    if gpu:  # the gathered messages to the host; MPI may only read them after this
        copies = [_stage(sdfg, name, to_host=True) for name, *_ in sends]
        copy_to_host = "\n".join([*copies, staging.WAIT_FOR_STREAM])
    code = f"""
if (!__state->{uid}_ready) {{
    {init}
    __state->{uid}_ready = 1;
}}
{copy_to_host}
MPI_Startall(__state->{uid}_count, __state->{uid}_requests);
"""
    exit_code = f"""{{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (__state->{uid}_ready) {{
        if (!finalized)
            for (int n = 0; n < __state->{uid}_count; ++n) MPI_Request_free(&__state->{uid}_requests[n]);
        delete[] __state->{uid}_requests;{staging.free_mirrors(names) if gpu else ""}
    }}
}}"""
    # tasklet connectors must not be named like arrays: "comm_handle" reads "_comm"
    plan_inputs = {"neighbours": "_neighbours", "send_ptr": "_send_ptr", "recv_ptr": "_recv_ptr"}
    plan_inputs["comm_handle"] = "_comm"
    tasklet = state.add_tasklet(
        f"{uid}_mpi_start",
        list(plan_inputs) + [f"_{name}" for name, *_ in sends],
        [f"_{name}" for name, *_ in recvs]
        + ([TOKEN_CONNECTOR] if node.spec.phase == "start" else []),
        code,
        language=dtypes.Language.CPP,
        side_effects=True,
        state_fields=[
            f"MPI_Request* {uid}_requests = nullptr;",
            f"int {uid}_count = 0;",
            f"int {uid}_ready = 0;",
            *(staging.mirror_fields(names) if gpu else []),
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
    if node.spec.phase == "start":
        connect_whole(state, sdfg, tasklet, state.add_write(TOKEN), TOKEN_CONNECTOR)


def _add_wait(state: dace.SDFGState, sdfg: dace.SDFG, node: Any, recvs: list, gpu: bool) -> None:
    uid = node.spec.uid
    names = [name for name, *_ in recvs]
    code = [f"MPI_Waitall(__state->{uid}_count, __state->{uid}_requests, MPI_STATUSES_IGNORE);"]
    if gpu:  # received messages to the device, on the stream: no host wait
        code += [_stage(sdfg, name, to_host=False) for name in names]
    token = [TOKEN_CONNECTOR] if node.spec.phase == "finish" else []
    tasklet = state.add_tasklet(
        f"{uid}_mpi_wait",
        [f"_{n}_in" for n in names] + token,
        [f"_{n}" for n in names],
        "\n".join(code),
        language=dtypes.Language.CPP,
        side_effects=True,
    )
    scattered = {n.data: n for n in state.data_nodes() if state.out_degree(n) > 0}
    for name in names:  # the scatter maps read the buffer after the wait
        connect_whole(state, sdfg, state.add_read(name), tasklet, f"_{name}_in")
        connect_whole(state, sdfg, tasklet, scattered[name], f"_{name}")
    if token:
        connect_whole(state, sdfg, state.add_read(TOKEN), tasklet, TOKEN_CONNECTOR)


def _bytes(sdfg: dace.SDFG, name: str) -> str:
    desc = sdfg.arrays[name]
    return symstr(desc.total_size * desc.dtype.bytes, cpp_mode=True)


def _stage(sdfg: dace.SDFG, name: str, to_host: bool) -> str:
    """A whole buffer to (from) its host mirror, on the stream: every cell goes to a
    neighbour rank."""
    return staging.copy_on_stream(
        name, sdfg.arrays[name].dtype.ctype, "0", _bytes(sdfg, name), to_host
    )
