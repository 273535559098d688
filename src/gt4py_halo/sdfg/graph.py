"""Small SDFG-building helpers shared by the expansions."""

from __future__ import annotations

from typing import Any

import dace
from dace import dtypes


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


def nested_for(node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> dace.SDFG:
    """An empty SDFG for ``node``'s expansion with one argument per connector of the node,
    described as the arrays connected to it outside."""
    sdfg = dace.SDFG(f"{node.uid}_{node.phase}")
    outer = {e.dst_conn: e for e in parent_state.in_edges(node)}
    outer.update({e.src_conn: e for e in parent_state.out_edges(node)})
    for connector, edge in outer.items():
        desc = parent_sdfg.arrays[edge.data.data].clone()
        desc.transient = False
        sdfg.add_datadesc(connector, desc)
    return sdfg
