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
import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar

import dace
from dace import dtypes
from dace.properties import CodeBlock
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion
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
    def message_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any, bool]]:
        """(name, shape, dtype, receiving) of the node's buffers (``message_buffers.py``);
        ``outer``: connector -> descriptor of the node's inputs."""
        fields = [outer[f"_f{i}"] for i in range(node.field_count)]
        return [
            (m.name, m.shape, m.dtype, not sending)
            for sending in (True, False)
            for m in _messages(node, fields, sending)
        ]


#: ``_peers[k]`` when direction ``k`` leads to the rank itself (a periodic axis not split over
#: ranks); other values: the neighbour's rank, or -1 (``NO_RANK``) beyond an open boundary.
SELF = -2

#: Label endings of the tasklets that call MPI: they must run on the host.
HOST_TASKLET_SUFFIXES = ("_mpi_start", "_mpi_wait")


@dataclasses.dataclass(frozen=True)
class _Message:
    """One message: the boxes of a group of fields towards (from) one direction, in one
    contiguous buffer (the fields along its first axis)."""

    name: str
    group: int
    fields: tuple[int, ...]
    direction: int
    bounds: list[tuple[Any, Any]]
    shape: list[Any]
    dtype: Any

    @property
    def nbytes(self) -> Any:
        return math.prod(self.shape) * self.dtype.bytes


def field_groups(fields: list[Any]) -> list[tuple[int, ...]]:
    """The fields of one exchange that travel in one message per direction: those of the same
    shape and dtype (the arguments of one shape share their shape symbols, ``program.py``)."""
    groups: dict[tuple, list[int]] = {}
    for i, desc in enumerate(fields):
        groups.setdefault((tuple(map(str, desc.shape)), desc.dtype), []).append(i)
    return [tuple(g) for g in groups.values()]


def _messages(node: Any, fields: list[Any], sending: bool) -> list[_Message]:
    """The messages ``node`` sends (receives): per field group and direction with cells in it.

    Box bounds are symbolic in the fields' shapes (``direction_box``, the same geometry the
    runtime plan is built from); along a direction, widths are halo widths (ints), across it
    owned sizes (> 0), so an empty box is known when the node is lowered. One contiguous
    message per group and direction: MPI moved 5 MB between two ranks here in 0.39 ms as
    one contiguous message, 0.66 ms as 60, and 1.31 ms as one derived datatype over 60 buffers.
    """
    halo = node.halo_widths
    ndim = len(halo)
    messages = []
    for g, group in enumerate(field_groups(fields)):
        desc = fields[group[0]]
        owned = [desc.shape[k] - lo - hi for k, (lo, hi) in enumerate(halo)]
        levels = list(desc.shape[ndim:])
        for k, direction in enumerate(node.direction_offsets):
            bounds = direction_box(owned, halo, direction, sending)
            if any(d != 0 and b - a == 0 for d, (a, b) in zip(direction, bounds)):
                continue
            kind = "s" if sending else "r"
            shape = [len(group)] + [b - a for a, b in bounds] + levels
            name = f"{node.uid}_{kind}buf_{g}_{k}"
            messages.append(_Message(name, g, group, k, bounds, shape, desc.dtype))
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
        for message in self.sends + self.recvs:  # the enclosing SDFG's (message_buffers.py)
            if message.name in outer:
                self._argument(message.name, outer)
            elif packs(node.phase):  # a node lowered without attach_message_buffers
                add_persistent(self.sdfg, message.name, message.shape, message.dtype, self.gpu)
        if TOKEN in outer:
            self._argument(TOKEN, outer)
        offsets = node.direction_offsets
        self.opposite = {k: offsets.index(tuple(-o for o in d)) for k, d in enumerate(offsets)}
        last = self.sdfg.add_state("begin", is_start_block=True)
        if packs(node.phase):
            for k in range(len(offsets)):
                sends = [m for m in self.sends if m.direction == k]
                fill = functools.partial(self._add_copies, sends, "pack")
                last = self._branch(last, f"pack_{k}", [(f"_peers[{k}] >= 0", fill)])
            last = self._then(last, "start", self._add_start)
        if unpacks(node.phase):
            last = self._then(last, "wait", self._add_wait)
            for k in range(len(offsets)):
                recvs = [m for m in self.recvs if m.direction == k]
                from_buffer = functools.partial(self._add_copies, recvs, "unpack")
                from_self = functools.partial(self._add_self_copies, recvs)
                branches = [
                    (f"_peers[{k}] >= 0", from_buffer),
                    (f"_peers[{k}] == {SELF}", from_self),
                ]
                last = self._branch(last, f"unpack_{k}", branches)

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

    def _add_copies(self, messages: list[_Message], kind: str, state: dace.SDFGState) -> None:
        """Pack the fields into (``kind="pack"``) or unpack them from their buffers."""
        for m in messages:
            for j, i in enumerate(m.fields):
                field, buffer = self._indices(m.bounds, m.shape[1 + self.ndim :])
                place = {"pack": (f"_f{i}[{field}]", f"{m.name}[{j}, {buffer}]")}
                place["unpack"] = (f"{m.name}[{j}, {buffer}]", f"_f{i}[{field}]")
                self._add_map(state, f"{self.uid}_{kind}_{i}_{m.direction}", m, *place[kind])

    def _add_self_copies(self, recvs: list[_Message], state: dace.SDFGState) -> None:
        """The halo from this rank's own cells: what it would have sent itself (a periodic
        axis not split over ranks), copied field to field."""
        sent = {(m.group, m.direction): m for m in self.sends}
        for m in recvs:
            source = sent[(m.group, self.opposite[m.direction])]
            levels = m.shape[1 + self.ndim :]
            field, _ = self._indices(m.bounds, levels)
            shifted = ", ".join(
                [
                    f"h{d} - ({symstr(a)}) + ({symstr(sa)})"
                    for d, ((a, _), (sa, _)) in enumerate(zip(m.bounds, source.bounds))
                ]
                + [f"l{d}" for d in range(len(levels))]
            )
            for i in m.fields:
                name = f"{self.uid}_self_{i}_{m.direction}"
                self._add_map(state, name, m, f"_f{i}[{shifted}]", f"_f{i}[{field}]")

    def _indices(self, bounds: list[tuple[Any, Any]], levels: list[Any]) -> tuple[str, str]:
        """Index expressions of one box element in the field and in a buffer of its group."""
        params = [f"h{d}" for d in range(self.ndim)] + [f"l{d}" for d in range(len(levels))]
        field = ", ".join(params)
        buffer = ", ".join(
            [f"{p} - ({symstr(a)})" for p, (a, _) in zip(params, bounds)] + params[self.ndim :]
        )
        return field, buffer

    def _add_map(self, state: dace.SDFGState, label: str, m: _Message, src: str, dst: str) -> None:
        """A copy map over ``m``'s box (in the field's index space): ``dst = src``."""
        levels = m.shape[1 + self.ndim :]
        ranges = {f"h{d}": f"{symstr(a)}:{symstr(b)}" for d, (a, b) in enumerate(m.bounds)}
        ranges.update({f"l{d}": f"0:{symstr(n)}" for d, n in enumerate(levels)})
        state.add_mapped_tasklet(
            label,
            ranges,
            {"_in": dace.Memlet(src)},
            "_out = _in",
            {"_out": dace.Memlet(dst)},
            external_edges=True,
        )

    def _add_start(self, state: dace.SDFGState) -> None:
        """Create the requests on the first call, then start them.

        Requests only for directions leading to another rank: a message to oneself
        (``SELF``: a periodic axis not split over ranks) is a copy in the unpack phase, and
        none goes beyond a non-periodic boundary. The message from direction ``k`` is the one
        its sender sends towards the opposite direction: tags say direction and field group.
        """
        node, uid = self.node, self.uid
        opposite = self.opposite
        count = len(self.recvs) + len(self.sends)
        init = ["MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_handle[0]);"]
        for m in self.recvs + self.sends:
            init += [f"if ({self._remote(m)}) {line}" for line in self._allocate_mirror(m)]
        init.append("int n = 0;")
        for m in self.recvs:  # from the neighbour's message towards the opposite direction
            tag = node.tag(opposite[m.direction], m.group)
            init.append(
                f"if ({self._remote(m)}) MPI_Recv_init({self._wire(m.name)}, "
                f"{symstr(m.nbytes, cpp_mode=True)}, MPI_BYTE, peers[{m.direction}], {tag}, "
                f"comm, &__state->{uid}_requests[n++]);"
            )
        for m in self.sends:
            tag = node.tag(m.direction, m.group)
            init.append(
                f"if ({self._remote(m)}) MPI_Send_init({self._wire(m.name)}, "
                f"{symstr(m.nbytes, cpp_mode=True)}, MPI_BYTE, peers[{m.direction}], {tag}, "
                f"comm, &__state->{uid}_requests[n++]);"
            )
        init.append(f"__state->{uid}_count = n;")
        run = []
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
            f"int {uid}_ready = 0;",
        ]
        if self.gpu:
            fields += [f"char* {m.name}_host = nullptr;" for m in self.recvs + self.sends]
        tasklet = state.add_tasklet(
            f"{uid}_mpi_start",
            ["peers", "comm_handle"] + [f"_{m.name}" for m in self.sends],
            [f"_{m.name}" for m in self.recvs] + (["token"] if self.node.phase == "start" else []),
            code,
            language=dtypes.Language.CPP,
            side_effects=True,
            state_fields=fields,
            code_exit=exit_code,
        )
        # tasklet connectors must not be named like arrays: "peers" reads "_peers"
        for connector, name in (("peers", "_peers"), ("comm_handle", "_comm")):
            connect_whole(state, self.sdfg, state.add_read(name), tasklet, connector)
        for m in self.sends:  # packed in the states before
            connect_whole(state, self.sdfg, state.add_read(m.name), tasklet, f"_{m.name}")
        for m in self.recvs:  # orders the wait after the start
            connect_whole(state, self.sdfg, tasklet, state.add_write(m.name), f"_{m.name}")
        if self.node.phase == "start":
            connect_whole(state, self.sdfg, tasklet, state.add_write(TOKEN), "token")

    def _add_wait(self, state: dace.SDFGState) -> None:
        uid = self.uid
        code = [f"MPI_Waitall(__state->{uid}_count, __state->{uid}_requests, MPI_STATUSES_IGNORE);"]
        if self.gpu:  # received messages to the device, on the stream: no host wait
            code += [f"if ({self._remote(m)}) {self._stage(m, to_host=False)}" for m in self.recvs]
        names = [m.name for m in self.recvs]
        token = ["token"] if self.node.phase == "finish" else []
        tasklet = state.add_tasklet(
            f"{uid}_mpi_wait",
            ["peers"] + [f"_{n}_in" for n in names] + token,
            [f"_{n}" for n in names],
            "\n".join(code),
            language=dtypes.Language.CPP,
            side_effects=True,
        )
        connect_whole(state, self.sdfg, state.add_read("_peers"), tasklet, "peers")
        for name in names:  # unpacked in the states after
            connect_whole(state, self.sdfg, state.add_read(name), tasklet, f"_{name}_in")
            connect_whole(state, self.sdfg, tasklet, state.add_write(name), f"_{name}")
        if token:
            connect_whole(state, self.sdfg, state.add_read(TOKEN), tasklet, "token")

    def _remote(self, m: _Message) -> str:
        """C condition: the message goes to (comes from) another rank."""
        return f"peers[{m.direction}] >= 0"

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
