"""The transport-neutral lowering of ``UnstructuredHaloExchange``: gathers and scatters.

In two states: ``pack`` gathers each field's cells to send into one persistent buffer
(``sbuf[n, k] = f[send_idx[n], k]``, all neighbours back to back in the order of the CSR
offsets ``send_ptr``), then the transport's start tasklet posts the messages; ``unpack`` has
the transport's wait tasklet, then scatters the receive buffer into the halo
(``f[recv_idx[n], k] = rbuf[n, k]``). How many neighbours and cells a rank has is only known
at run time (array lengths are symbols): the transport loops over the neighbour ranks.

GPU fields get device buffers, so gathers and scatters become kernels on the program's
stream. Their index lists are plan data, kept on the host: each phase uploads the list it
uses to a persistent device array on its first call (an ``*_upload`` tasklet, on the stream,
that stays host code).

A transport subclasses ``ExpandThroughGathers`` with the C++ of its start and wait tasklets
(``start_code``, ``wait_code``).
"""

from __future__ import annotations

import math
from typing import Any

import dace
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.compiled.graph import (
    HostCode,
    add_cpp_tasklet,
    add_host_tasklet,
    add_persistent,
    connect_whole,
    nested_for,
    on_device,
)
from gt4py_halo.compiled.lowered import CopyMap, Lowered
from gt4py_halo.compiled.phases import TOKEN, TOKEN_CONNECTOR, packs, unpacks

#: (buffer name, shape, dtype, field, elements per cell) of one field's messages, one way.
Messages = list[tuple[str, list, Any, int, Any]]


class ExpandThroughGathers(ExpandTransformation):
    """The expansion of ``UnstructuredHaloExchange`` of a transport that sends gathered
    buffers: the subclass writes the C++ of the start and wait tasklets."""

    #: The plan arrays the node gets (``convertible.exchange_sdfg``).
    PLAN_ARRAYS = ("neighbours", "send_ptr", "send_idx", "recv_ptr", "recv_idx")

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
        lowered = lowered or Lowered()
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
                index = _upload(state, sdfg, uid, index, lowered)
            state = sdfg.add_state_after(state, "pack" if kind == "send" else "unpack")
            for name, shape, _, i, _ in messages:
                _add_indirect_copy(state, uid, i, name, kind, shape[0], fields[i], index, lowered)
            if kind == "send":
                host = cls.start_code(sdfg, node, sends, recvs, gpu)
                _add_start(state, sdfg, node, sends, recvs, lowered, host)
            else:
                _add_wait(state, sdfg, node, recvs, lowered, cls.wait_code(sdfg, node, recvs, gpu))
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

    @staticmethod
    def start_code(
        sdfg: dace.SDFG, node: Any, sends: Messages, recvs: Messages, gpu: bool
    ) -> HostCode:
        """The transport's C++ posting the messages. Connectors: ``neighbours``,
        ``send_ptr``, ``recv_ptr`` (plan arrays), ``comm_handle`` (the MPI communicator's
        Fortran handle), ``_<buffer>`` per buffer (send buffers gathered; receive buffers to
        receive into)."""
        raise NotImplementedError

    @staticmethod
    def wait_code(sdfg: dace.SDFG, node: Any, recvs: Messages, gpu: bool) -> HostCode | None:
        """The transport's C++ waiting for the messages, or ``None`` if work after it on the
        program's stream is ordered after them already. Connectors: ``_<buffer>_in`` and
        ``_<buffer>`` per receive buffer."""
        raise NotImplementedError


def _add_start(
    state: dace.SDFGState,
    sdfg: dace.SDFG,
    node: Any,
    sends: Messages,
    recvs: Messages,
    lowered: Lowered,
    host: HostCode,
) -> None:
    """The start tasklet, in the state of the gathers: reads the plan arrays and the
    gathered send buffers, writes the receive buffers and, in a split pair's start, the
    token."""
    gathered = {n.data: n for n in state.data_nodes() if state.in_degree(n) > 0}
    # tasklet connectors must not be named like arrays: "comm_handle" reads "_comm"
    reads: dict[str, Any] = {
        "neighbours": "_neighbours",
        "send_ptr": "_send_ptr",
        "recv_ptr": "_recv_ptr",
        "comm_handle": "_comm",
    }
    reads.update({f"_{name}": gathered[name] for name, *_ in sends})
    writes: dict[str, Any] = {f"_{name}": name for name, *_ in recvs}
    if node.spec.phase == "start":
        writes[TOKEN_CONNECTOR] = TOKEN
    label = lowered.host_tasklet(f"{node.spec.uid}_post")
    add_host_tasklet(state, sdfg, label, reads, writes, host)


def _add_wait(
    state: dace.SDFGState,
    sdfg: dace.SDFG,
    node: Any,
    recvs: Messages,
    lowered: Lowered,
    host: HostCode | None,
) -> None:
    """The wait tasklet, if any, in the state of the scatters: they read the buffers it
    writes; it reads the token in a split pair's finish."""
    if host is None:
        return
    scattered = {n.data: n for n in state.data_nodes() if state.out_degree(n) > 0}
    reads: dict[str, Any] = {f"_{name}_in": name for name, *_ in recvs}
    if node.spec.phase == "finish":
        reads[TOKEN_CONNECTOR] = TOKEN
    writes = {f"_{name}": scattered[name] for name, *_ in recvs}
    label = lowered.host_tasklet(f"{node.spec.uid}_wait")
    add_host_tasklet(state, sdfg, label, reads, writes, host)


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


def _upload(state: dace.SDFGState, sdfg: dace.SDFG, uid: str, index: str, lowered: Lowered) -> str:
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
    tasklet = add_cpp_tasklet(
        state,
        lowered.host_tasklet(f"{uid}{index}_upload"),
        ["host_list"],
        ["device_list"],
        code,
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
    lowered: Lowered,
) -> None:
    """Gather (``send``) or scatter (``recv``) one field through the index list ``index``.

    Recorded as copy maps of "direction 0" (all neighbours), so that
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
        _, entry, _ = state.add_mapped_tasklet(
            f"{uid}_pack_{i}_0",
            ranges,
            {**index, "_column": dace.Memlet(column)},
            "_out = _column[_idx]",
            {"_out": dace.Memlet(f"{buffer}[{', '.join(params)}]")},
            external_edges=True,
        )
    else:
        _, entry, _ = state.add_mapped_tasklet(
            f"{uid}_unpack_{i}_0",
            ranges,
            {**index, "_in": dace.Memlet(f"{buffer}[{', '.join(params)}]")},
            "_column[_idx] = _in",
            {"_column": dace.Memlet(column, dynamic=True)},
            external_edges=True,
        )
    lowered.copy_map(entry, CopyMap(uid, "pack" if kind == "send" else "unpack", 0))
