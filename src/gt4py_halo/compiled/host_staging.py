"""Pinned host mirrors of device message buffers: what MPI reads and writes for GPU fields.

The PyPI MPICH is not CUDA-aware. A GPU exchange packs on the device, copies the messages to
pinned host mirrors on the program's stream, waits for the stream once (the one host wait
standard MPI needs before sending) and sends from the mirrors; received messages go back to
the device on the stream, with no host wait. Both MPI expansions (``transports/mpi/expansion.py``,
``transports/mpi/unstructured.py``) write that C++ with these helpers. Mirrors live in the
program's state struct, allocated on an exchange's first call and freed at exit. The tasklets
that use them stay host code (``Lowered.host_tasklets``).
"""

from __future__ import annotations

from collections.abc import Iterable

#: The host wait before MPI may read what the device packed.
WAIT_FOR_STREAM = "DACE_GPU_CHECK(cudaStreamSynchronize(__dace_current_stream));"


def mirror(name: str) -> str:
    """The pinned host mirror of buffer ``name`` (a ``char*`` in the state struct)."""
    return f"__state->{name}_host"


def mirror_fields(names: Iterable[str]) -> list[str]:
    """State struct members holding the mirrors of ``names``."""
    return [f"char* {name}_host = nullptr;" for name in names]


def allocate_mirror(name: str, nbytes: str) -> str:
    return f"DACE_GPU_CHECK(cudaMallocHost((void**)&{mirror(name)}, {nbytes}));"


def free_mirrors(names: Iterable[str]) -> str:
    return "".join(f" cudaFreeHost({mirror(name)});" for name in names)


def copy_on_stream(name: str, ctype: str, at: str, nbytes: str, to_host: bool) -> str:
    """Copy ``nbytes`` from element ``at`` of buffer ``name`` (the tasklet's connector
    ``_<name>``) to its mirror (``to_host``) or back, on the program's stream."""
    device, host = f"_{name} + {at}", f"(({ctype}*){mirror(name)}) + {at}"
    dst, src, kind = (host, device, "DeviceToHost") if to_host else (device, host, "HostToDevice")
    return (
        f"DACE_GPU_CHECK(cudaMemcpyAsync({dst}, {src}, {nbytes}, cudaMemcpy{kind}, "
        "__dace_current_stream));"
    )
