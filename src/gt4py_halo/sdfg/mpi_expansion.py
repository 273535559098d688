"""The MPI expansion of ``HaloExchange``: pack maps, persistent requests, unpack maps.

The node becomes a nested SDFG of two states:

1. ``pack``: one map per field and direction, written in the field's own index space
   (``sbuf[i - a, j - b, k] = f[i, j, k]`` over the send box), so that it can later fuse
   with the map of the stencil that produces the field; then one C++ tasklet that creates the
   persistent requests on its first run (``MPI_Recv_init`` / ``MPI_Send_init`` on the node's
   communicator) and starts them all (``MPI_Startall``).
2. ``unpack``: one tasklet that waits for all requests (``MPI_Waitall``), then one map per
   field and direction writing the receive buffer into the halo. Beyond a non-periodic
   boundary there is no neighbour: its messages go to ``MPI_PROC_NULL`` and the unpack map
   writes back what the halo already held.

Box bounds are symbolic in the fields' shapes (``direction_box``, the same geometry the
runtime plan is built from), the buffers are persistent transients (allocated once per
program, sized by the fields' shapes) and the requests live in the program's state struct:
an exchange allocates nothing and creates no request after its first call. One message per
field and direction, tagged by both; the receiver of direction ``d`` matches the sender's
``-d``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import dace
from dace import dtypes
from dace.libraries.mpi.environments.mpi import MPI as MpiEnvironment
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.decomposition.cartesian import direction_box


@dace.library.expansion
class ExpandHaloExchangeMPI(ExpandTransformation):
    """Lower ``HaloExchange`` to pack maps, MPI persistent requests and unpack maps."""

    environments: ClassVar[list] = [MpiEnvironment]

    @staticmethod
    def expansion(node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> dace.SDFG:
        return _Lowering(node, parent_state, parent_sdfg).sdfg


class _Lowering:
    def __init__(self, node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> None:
        self.node = node
        self.uid = f"halo{node.tag_base}"
        self.sdfg = dace.SDFG(f"{self.uid}_exchange")
        self.halo = node.halo_widths
        self.ndim = len(self.halo)
        outer = {e.dst_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.in_edges(node)}
        self.fields = []
        for i in range(node.field_count):
            desc = outer[f"_f{i}"].clone()
            desc.transient = False
            self.sdfg.add_datadesc(f"_f{i}", desc)
            self.fields.append(desc)
        for name in ("_peers", "_comm"):
            desc = outer[name].clone()
            desc.transient = False
            self.sdfg.add_datadesc(name, desc)
        self.sends: list[tuple[str, int, int, int]] = []  # (buffer, field, direction, bytes)
        self.recvs: list[tuple[str, int, int, int]] = []
        pack = self.sdfg.add_state("pack")
        unpack = self.sdfg.add_state_after(pack, "unpack")
        for i, desc in enumerate(self.fields):
            for k, direction in enumerate(node.direction_offsets):
                self._add_copy(pack, i, k, direction, sending=True)
                self._add_copy(unpack, i, k, direction, sending=False)
        self._add_start(pack)
        self._add_wait(unpack)

    def _box(self, field: int, direction: tuple[int, ...], sending: bool) -> list[tuple[Any, Any]]:
        shape = self.fields[field].shape
        owned = [shape[k] - lo - hi for k, (lo, hi) in enumerate(self.halo)]
        return direction_box(owned, self.halo, direction, sending)

    def _add_copy(
        self, state: dace.SDFGState, i: int, k: int, direction: tuple[int, ...], sending: bool
    ) -> None:
        bounds = self._box(i, direction, sending)
        # across a direction widths are halo widths (ints); along it, owned sizes (> 0)
        if any(d != 0 and b - a == 0 for d, (a, b) in zip(direction, bounds)):
            return
        desc = self.fields[i]
        levels = list(desc.shape[self.ndim :])
        name = f"{'s' if sending else 'r'}buf_{i}_{k}"
        self.sdfg.add_array(
            name,
            [b - a for a, b in bounds] + levels,
            desc.dtype,
            transient=True,
            lifetime=dtypes.AllocationLifetime.Persistent,
            storage=dtypes.StorageType.CPU_Heap,
        )
        nbytes = math.prod([b - a for a, b in bounds] + levels) * desc.dtype.bytes
        (self.sends if sending else self.recvs).append((name, i, k, nbytes))
        params = [f"h{d}" for d in range(self.ndim)] + [f"l{d}" for d in range(len(levels))]
        ranges = {p: f"{symstr(a)}:{symstr(b)}" for p, (a, b) in zip(params, bounds)}
        ranges.update({p: f"0:{symstr(n)}" for p, n in zip(params[self.ndim :], levels)})
        field_index = ", ".join(params)
        buffer_index = ", ".join(
            [f"{p} - ({symstr(a)})" for p, (a, _) in zip(params, bounds)] + params[self.ndim :]
        )
        if sending:
            state.add_mapped_tasklet(
                f"pack_{i}_{k}",
                ranges,
                {"_in": dace.Memlet(f"_f{i}[{field_index}]")},
                "_out = _in",
                {"_out": dace.Memlet(f"{name}[{buffer_index}]")},
                external_edges=True,
            )
        else:
            state.add_mapped_tasklet(
                f"unpack_{i}_{k}",
                ranges,
                {
                    "_in": dace.Memlet(f"{name}[{buffer_index}]"),
                    "_old": dace.Memlet(f"_f{i}[{field_index}]"),
                    "_peer": dace.Memlet(f"_peers[{k}]"),
                },
                "_out = _in if _peer >= 0 else _old",
                {"_out": dace.Memlet(f"_f{i}[{field_index}]")},
                external_edges=True,
            )

    def _add_start(self, state: dace.SDFGState) -> None:
        node, uid = self.node, self.uid
        offsets = node.direction_offsets
        opposite = {d: k for k, d in enumerate(offsets)}
        count = len(self.recvs) + len(self.sends)
        lines = ["MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)_comm[0]);", "int n = 0;"]
        for name, i, k, nbytes in self.recvs:
            sender_direction = opposite[tuple(-o for o in offsets[k])]
            lines.append(
                f"MPI_Recv_init(_{name}, {symstr(nbytes, cpp_mode=True)}, MPI_BYTE, "
                f"_peers[{k}] < 0 ? MPI_PROC_NULL : _peers[{k}], {node.tag(sender_direction, i)}, "
                f"comm, &__state->{uid}_requests[n++]);"
            )
        for name, i, k, nbytes in self.sends:
            lines.append(
                f"MPI_Send_init(_{name}, {symstr(nbytes, cpp_mode=True)}, MPI_BYTE, "
                f"_peers[{k}] < 0 ? MPI_PROC_NULL : _peers[{k}], {node.tag(k, i)}, "
                f"comm, &__state->{uid}_requests[n++]);"
            )
        init = "\n    ".join(lines)
        code = f"""
if (!__state->{uid}_ready) {{
    {init}
    __state->{uid}_ready = 1;
}}
MPI_Startall({count}, __state->{uid}_requests);
"""
        exit_code = f"""{{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && __state->{uid}_ready)
        for (int n = 0; n < {count}; ++n) MPI_Request_free(&__state->{uid}_requests[n]);
}}"""
        tasklet = state.add_tasklet(
            "start",
            ["_peers", "_comm"] + [f"_{name}" for name, *_ in self.sends],
            [f"_{name}" for name, *_ in self.recvs],
            code,
            language=dtypes.Language.CPP,
            side_effects=True,
            state_fields=[f"MPI_Request {uid}_requests[{max(count, 1)}];", f"int {uid}_ready = 0;"],
            code_exit=exit_code,
        )
        for name in ("_peers", "_comm"):
            tasklet.in_connectors[name] = dace.pointer(self.sdfg.arrays[name].dtype)
            state.add_edge(
                state.add_read(name),
                None,
                tasklet,
                name,
                dace.Memlet.from_array(name, self.sdfg.arrays[name]),
            )
        written = {n.data: n for n in state.data_nodes() if state.in_degree(n) > 0}
        for name, *_ in self.sends:
            tasklet.in_connectors[f"_{name}"] = dace.pointer(self.sdfg.arrays[name].dtype)
            state.add_edge(
                written[name],
                None,
                tasklet,
                f"_{name}",
                dace.Memlet.from_array(name, self.sdfg.arrays[name]),
            )
        for name, *_ in self.recvs:
            tasklet.out_connectors[f"_{name}"] = dace.pointer(self.sdfg.arrays[name].dtype)
            state.add_edge(
                tasklet,
                f"_{name}",
                state.add_write(name),
                None,
                dace.Memlet.from_array(name, self.sdfg.arrays[name]),
            )

    def _add_wait(self, state: dace.SDFGState) -> None:
        uid = self.uid
        count = len(self.recvs) + len(self.sends)
        names = [name for name, *_ in self.recvs]
        tasklet = state.add_tasklet(
            "wait",
            [f"_{n}_in" for n in names],
            [f"_{n}" for n in names],
            f"MPI_Waitall({count}, __state->{uid}_requests, MPI_STATUSES_IGNORE);",
            language=dtypes.Language.CPP,
            side_effects=True,
        )
        read = {n.data: n for n in state.data_nodes() if state.out_degree(n) > 0}
        for name in names:
            desc = self.sdfg.arrays[name]
            tasklet.in_connectors[f"_{name}_in"] = dace.pointer(desc.dtype)
            tasklet.out_connectors[f"_{name}"] = dace.pointer(desc.dtype)
            state.add_edge(
                state.add_read(name),
                None,
                tasklet,
                f"_{name}_in",
                dace.Memlet.from_array(name, desc),
            )
            # the unpack maps read the buffer after the wait
            state.add_edge(
                tasklet, f"_{name}", read[name], None, dace.Memlet.from_array(name, desc)
            )
