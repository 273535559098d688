"""The MPI expansion of ``HaloExchange``: pack maps, persistent requests, unpack maps.

The node becomes a nested SDFG of two states (a split pair: ``start`` the first, ``finish``
the second):

1. ``pack``: one map per field and direction, written in the field's own index space
   (``sbuf[i - a, j - b, k] = f[i, j, k]`` over the send box), so that it can fuse with other
   maps (``fusion.py``); then one C++ tasklet that creates persistent requests on its first
   run (``MPI_Recv_init`` / ``MPI_Send_init`` on the node's communicator, for neighbours on
   other ranks only), copies the messages a rank sends itself (a periodic axis not split over
   ranks) straight into their receive buffers, and starts the requests (``MPI_Startall``).
2. ``unpack``: one tasklet that waits for the requests (``MPI_Waitall``), then one map per
   field and direction writing the receive buffer into the halo. Beyond a non-periodic
   boundary there is no neighbour: the unpack map writes back what the halo already held.

Box bounds are symbolic in the fields' shapes (``direction_box``, the same geometry the
runtime plan is built from), the buffers are persistent transients (allocated once per
program, sized by the fields' shapes) and the requests live in the program's state struct:
an exchange allocates nothing and creates no request after its first call. One message per
field and direction, tagged by both; the receiver of direction ``d`` matches the sender's
``-d``.

GPU fields (``GPU_Global`` storage) get device buffers, so the pack and unpack maps become
kernels on the program's stream. The PyPI MPICH is not CUDA-aware: MPI works on pinned host
mirrors of the buffers (in the state struct, allocated on the first call), and the MPI
tasklets copy to and from them asynchronously on the program's stream. The start tasklet then
synchronizes the stream once — the one host wait standard MPI needs before sending; the wait
tasklet's copies back need none. The MPI tasklets are labelled ``*_mpi_start`` /
``*_mpi_wait`` so that the GPU transformation keeps them on the host
(``HOST_TASKLET_SUFFIXES``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import dace
from dace import dtypes
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.decomposition.cartesian import direction_box
from gt4py_halo.sdfg.graph import add_persistent, connect_whole
from gt4py_halo.sdfg.mpi_environment import MPI as MpiEnvironment
from gt4py_halo.sdfg.phases import TOKEN, packs, unpacks


@dace.library.expansion
class ExpandHaloExchangeMPI(ExpandTransformation):
    """Lower ``HaloExchange`` to pack maps, MPI persistent requests and unpack maps."""

    environments: ClassVar[list] = [MpiEnvironment]

    @staticmethod
    def expansion(node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> dace.SDFG:
        return _Lowering(node, parent_state, parent_sdfg).sdfg

    @staticmethod
    def receive_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any]]:
        """(name, shape, dtype) of the buffers a split pair shares; ``outer``: connector ->
        descriptor of the node's arguments."""
        fields = [outer[f"_f{i}"] for i in range(node.field_count)]
        return [(m.name, m.shape, m.dtype) for m in _messages(node, fields, sending=False)]


#: Label endings of the tasklets that call MPI: they must run on the host.
HOST_TASKLET_SUFFIXES = ("_mpi_start", "_mpi_wait")


@dataclasses.dataclass(frozen=True)
class _Message:
    """One message buffer: a field's box towards (from) one direction."""

    name: str
    field: int
    direction: int
    bounds: list[tuple[Any, Any]]
    shape: list[Any]
    dtype: Any

    @property
    def nbytes(self) -> Any:
        return math.prod(self.shape) * self.dtype.bytes


def _messages(node: Any, fields: list[Any], sending: bool) -> list[_Message]:
    """The messages ``node`` sends (receives), one per field and direction with cells in it.

    Box bounds are symbolic in the fields' shapes (``direction_box``, the same geometry the
    runtime plan is built from); along a direction, widths are halo widths (ints), across it
    owned sizes (> 0), so an empty box is known when the node is lowered.
    """
    halo = node.halo_widths
    ndim = len(halo)
    messages = []
    for i, desc in enumerate(fields):
        owned = [desc.shape[k] - lo - hi for k, (lo, hi) in enumerate(halo)]
        levels = list(desc.shape[ndim:])
        for k, direction in enumerate(node.direction_offsets):
            bounds = direction_box(owned, halo, direction, sending)
            if any(d != 0 and b - a == 0 for d, (a, b) in zip(direction, bounds)):
                continue
            kind = "s" if sending else "r"
            shape = [b - a for a, b in bounds] + levels
            name = f"{node.uid}_{kind}buf_{i}_{k}"
            messages.append(_Message(name, i, k, bounds, shape, desc.dtype))
    return messages


class _Lowering:
    def __init__(self, node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> None:
        self.node = node
        self.uid = node.uid
        self.sdfg = dace.SDFG(f"{self.uid}_{node.phase}")
        self.ndim = len(node.halo_widths)
        outer = {e.dst_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.in_edges(node)}
        outer.update(
            {e.src_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.out_edges(node)}
        )
        self.fields = [self._argument(f"_f{i}", outer) for i in range(node.field_count)]
        self._argument("_peers", outer)
        self._argument("_comm", outer)
        self.gpu = any(d.storage == dtypes.StorageType.GPU_Global for d in self.fields)
        self.sends = _messages(node, self.fields, sending=True)
        self.recvs = _messages(node, self.fields, sending=False)
        for message in self.recvs:  # a split pair's are the enclosing SDFG's (split_phase.py)
            if message.name in outer:
                self._argument(message.name, outer)
            else:
                add_persistent(self.sdfg, message.name, message.shape, message.dtype, self.gpu)
        if TOKEN in outer:
            self._argument(TOKEN, outer)
        self.kernel_peers = "_peers"
        first = self.sdfg.add_state("begin")
        if self.gpu and unpacks(node.phase):  # unpack kernels read the ranks on the device
            peers = self.sdfg.arrays["_peers"]
            self.kernel_peers = add_persistent(
                self.sdfg, f"{self.uid}_peers", peers.shape, peers.dtype, True
            )
            first.add_nedge(
                first.add_read("_peers"),
                first.add_write(self.kernel_peers),
                dace.Memlet.from_array("_peers", peers),
            )
        if packs(node.phase):
            pack = self.sdfg.add_state_after(first, "pack")
            for message in self.sends:
                add_persistent(self.sdfg, message.name, message.shape, message.dtype, self.gpu)
                self._add_copy(pack, message, sending=True)
            self._add_start(pack)
            first = pack
        if unpacks(node.phase):
            unpack = self.sdfg.add_state_after(first, "unpack")
            for message in self.recvs:
                self._add_copy(unpack, message, sending=False)
            self._add_wait(unpack)

    def _argument(self, name: str, outer: dict[str, Any]) -> Any:
        desc = outer[name].clone()
        desc.transient = False
        self.sdfg.add_datadesc(name, desc)
        return desc

    def _add_copy(self, state: dace.SDFGState, message: _Message, sending: bool) -> None:
        i, k, bounds, name = message.field, message.direction, message.bounds, message.name
        levels = message.shape[self.ndim :]
        params = [f"h{d}" for d in range(self.ndim)] + [f"l{d}" for d in range(len(levels))]
        ranges = {p: f"{symstr(a)}:{symstr(b)}" for p, (a, b) in zip(params, bounds)}
        ranges.update({p: f"0:{symstr(n)}" for p, n in zip(params[self.ndim :], levels)})
        field_index = ", ".join(params)
        buffer_index = ", ".join(
            [f"{p} - ({symstr(a)})" for p, (a, _) in zip(params, bounds)] + params[self.ndim :]
        )
        if sending:
            state.add_mapped_tasklet(
                f"{self.uid}_pack_{i}_{k}",
                ranges,
                {"_in": dace.Memlet(f"_f{i}[{field_index}]")},
                "_out = _in",
                {"_out": dace.Memlet(f"{name}[{buffer_index}]")},
                external_edges=True,
            )
        else:
            state.add_mapped_tasklet(
                f"{self.uid}_unpack_{i}_{k}",
                ranges,
                {
                    "_in": dace.Memlet(f"{name}[{buffer_index}]"),
                    "_old": dace.Memlet(f"_f{i}[{field_index}]"),
                    "_peer": dace.Memlet(f"{self.kernel_peers}[{k}]"),
                },
                "_out = _in if _peer >= 0 else _old",
                {"_out": dace.Memlet(f"_f{i}[{field_index}]")},
                external_edges=True,
            )

    def _add_start(self, state: dace.SDFGState) -> None:
        """Create the requests on the first call; then copy self-messages, start the rest.

        One message per neighbour *rank*, both ways, whatever the number of directions and
        fields it serves: on a 2x1 process grid, six directions lead to the other rank. A
        message is an MPI datatype over the buffers it carries (``MPI_Type_create_hindexed``
        on their addresses, sent from ``MPI_BOTTOM``): the receiver lists its buffers in the
        order the sender lists its own, by the sender's direction, then field. A message to
        oneself (a periodic axis not split over ranks) is one copy from the send buffer of
        the opposite direction, and none goes beyond a non-periodic boundary. Which is which
        is known at run time only (ranks are data), so every path is generated, guarded by
        the ranks.
        """
        node, uid = self.node, self.uid
        offsets = node.direction_offsets
        opposite = {k: offsets.index(tuple(-o for o in d)) for k, d in enumerate(offsets)}
        count = 2 * len(offsets)
        init = [
            "MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_handle[0]);",
            f"MPI_Comm_rank(comm, &__state->{uid}_me);",
            f"const int me = __state->{uid}_me;",
        ]
        for m in self.recvs + self.sends:
            init += [f"if ({self._remote(m)}) {line}" for line in self._allocate_mirror(m)]
        segments = max(len(self.recvs), len(self.sends), 1)
        init += [
            "int n = 0;",
            f"for (int k = 0; k < {len(offsets)}; ++k) {{",
            "    const int p = peers[k];",
            "    bool first = p >= 0 && p != me;  // the first direction leading to rank p",
            "    for (int j = 0; j < k; ++j) first = first && peers[j] != p;",
            "    if (!first) continue;",
            f"    int c, lengths[{segments}];",
            f"    MPI_Aint at[{segments}];",
            "    MPI_Datatype message;",
        ]
        by_sender = sorted(self.recvs, key=lambda m: (opposite[m.direction], m.field))
        by_direction = sorted(self.sends, key=lambda m: (m.direction, m.field))
        for kind, messages in (("Recv", by_sender), ("Send", by_direction)):
            init.append("    c = 0;")
            init += [
                f"    if (peers[{m.direction}] == p) {{ MPI_Get_address({self._wire(m.name)}, "
                f"&at[c]); lengths[c++] = {symstr(m.nbytes, cpp_mode=True)}; }}"
                for m in messages
            ]
            init += [
                "    MPI_Type_create_hindexed(c, lengths, at, MPI_BYTE, &message);",
                "    MPI_Type_commit(&message);",
                f"    MPI_{kind}_init(MPI_BOTTOM, 1, message, p, {node.tag_base}, comm, &"
                + f"__state->{uid}_requests[n++]);",
                "    MPI_Type_free(&message);",
            ]
        init.append("}")
        init.append(f"__state->{uid}_count = n;")
        run = []
        sent = {(m.field, m.direction): m for m in self.sends}
        for m in self.recvs:  # to oneself: the message is the opposite direction's
            source = sent.get((m.field, opposite[m.direction]))
            if source is not None:
                run.append(
                    f"if (peers[{m.direction}] == __state->{uid}_me) "
                    + self._copy(f"_{m.name}", f"_{source.name}", source.nbytes)
                )
        if self.gpu:  # the packed messages to the host; MPI may only read them after this
            run += [f"if ({self._remote(m)}) {self._stage(m, to_host=True)}" for m in self.sends]
            run.append(
                f"if (__state->{uid}_count > 0) "
                "DACE_GPU_CHECK(cudaStreamSynchronize(__dace_current_stream));"
            )
        run.append(f"MPI_Startall(__state->{uid}_count, __state->{uid}_requests);")
        init_code = "\n    ".join(init)
        code = f"""
if (!__state->{uid}_ready) {{
    {init_code}
    __state->{uid}_ready = 1;
}}
""" + "\n".join(run)
        free_mirrors = "".join(
            f" cudaFreeHost({self._wire(m.name)});" for m in self.recvs + self.sends
        )
        exit_code = f"""{{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && __state->{uid}_ready)
        for (int n = 0; n < __state->{uid}_count; ++n)
            MPI_Request_free(&__state->{uid}_requests[n]);
    if (__state->{uid}_ready) {{{free_mirrors if self.gpu else ""} }}
}}"""
        fields = [
            f"MPI_Request {uid}_requests[{max(count, 1)}];",
            f"int {uid}_count = 0;",
            f"int {uid}_me = -1;",
            f"int {uid}_ready = 0;",
        ]
        if self.gpu:
            fields += [f"char* {m.name}_host = nullptr;" for m in self.recvs + self.sends]
        tasklet = state.add_tasklet(
            f"{uid}_mpi_start",
            ["peers", "comm_handle"] + [f"_{m.name}" for m in self.sends],
            [f"_{m.name}" for m in self.recvs] + ([TOKEN] if self.node.phase == "start" else []),
            code,
            language=dtypes.Language.CPP,
            side_effects=True,
            state_fields=fields,
            code_exit=exit_code,
        )
        # tasklet connectors must not be named like arrays: "peers" reads "_peers"
        for connector, name in (("peers", "_peers"), ("comm_handle", "_comm")):
            connect_whole(state, self.sdfg, state.add_read(name), tasklet, connector)
        packed = {n.data: n for n in state.data_nodes() if state.in_degree(n) > 0}
        for m in self.sends:
            connect_whole(state, self.sdfg, packed[m.name], tasklet, f"_{m.name}")
        for m in self.recvs:  # orders the wait after the start
            connect_whole(state, self.sdfg, tasklet, state.add_write(m.name), f"_{m.name}")
        if self.node.phase == "start":
            connect_whole(state, self.sdfg, tasklet, state.add_write(TOKEN), TOKEN)

    def _add_wait(self, state: dace.SDFGState) -> None:
        uid = self.uid
        code = [f"MPI_Waitall(__state->{uid}_count, __state->{uid}_requests, MPI_STATUSES_IGNORE);"]
        if self.gpu:  # received messages to the device, on the stream: no host wait
            code += [f"if ({self._remote(m)}) {self._stage(m, to_host=False)}" for m in self.recvs]
        names = [m.name for m in self.recvs]
        token = [TOKEN] if self.node.phase == "finish" else []
        tasklet = state.add_tasklet(
            f"{uid}_mpi_wait",
            ["peers"] + [f"_{n}_in" for n in names] + token,
            [f"_{n}" for n in names],
            "\n".join(code),
            language=dtypes.Language.CPP,
            side_effects=True,
        )
        connect_whole(state, self.sdfg, state.add_read("_peers"), tasklet, "peers")
        unpacked = {n.data: n for n in state.data_nodes() if state.out_degree(n) > 0}
        for name in names:  # the unpack maps read the buffer after the wait
            connect_whole(state, self.sdfg, state.add_read(name), tasklet, f"_{name}_in")
            connect_whole(state, self.sdfg, tasklet, unpacked[name], f"_{name}")
        if token:
            connect_whole(state, self.sdfg, state.add_read(TOKEN), tasklet, TOKEN)

    def _remote(self, m: _Message) -> str:
        """C condition: the message goes to (comes from) another rank."""
        k = m.direction
        return f"peers[{k}] >= 0 && peers[{k}] != __state->{self.uid}_me"

    def _copy(self, dst: str, src: str, nbytes: Any) -> str:
        size = symstr(nbytes, cpp_mode=True)
        if self.gpu:  # on the program's stream, between the pack and unpack kernels
            return (
                f"DACE_GPU_CHECK(cudaMemcpyAsync({dst}, {src}, {size}, "
                "cudaMemcpyDeviceToDevice, __dace_current_stream));"
            )
        return f"memcpy({dst}, {src}, {size});"

    def _wire(self, name: str) -> str:
        """What MPI reads or writes: the buffer, or on a GPU its pinned host mirror."""
        return f"__state->{name}_host" if self.gpu else f"_{name}"

    def _allocate_mirror(self, m: _Message) -> list[str]:
        if not self.gpu:
            return []
        size = symstr(m.nbytes, cpp_mode=True)
        return [f"DACE_GPU_CHECK(cudaMallocHost((void**)&{self._wire(m.name)}, {size}));"]

    def _stage(self, m: _Message, to_host: bool) -> str:
        size = symstr(m.nbytes, cpp_mode=True)
        if to_host:
            dst, src, kind = self._wire(m.name), f"_{m.name}", "cudaMemcpyDeviceToHost"
        else:
            dst, src, kind = f"_{m.name}", self._wire(m.name), "cudaMemcpyHostToDevice"
        return (
            f"DACE_GPU_CHECK(cudaMemcpyAsync({dst}, {src}, {size}, {kind}, __dace_current_stream));"
        )
