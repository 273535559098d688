"""The NCCL expansion of ``UnstructuredHaloExchange``: gathered buffers sent by NCCL.

Gathers and scatters are the transport-neutral lowering (``compiled/gather_lowering.py``),
kernels on the program's stream. NCCL supplies the start tasklet, host code enqueueing on
that stream: the node's NCCL communicator on its first call (as the cartesian expansion's),
then ``ncclGroupStart``, per neighbour rank and field one ``ncclRecv`` into and one
``ncclSend`` from the field's buffer (the neighbour's cells, ``recv_ptr``/``send_ptr``),
``ncclGroupEnd``. Between two ranks, messages match in posting order: each side posts the
other's messages in field order. Nothing waits on the host; the scatters follow the receives
on the stream.
"""

from __future__ import annotations

from typing import Any, ClassVar

import dace
from dace.symbolic import symstr

from gt4py_halo.compiled.gather_lowering import ExpandThroughGathers, Messages
from gt4py_halo.compiled.graph import HostCode
from gt4py_halo.compiled.nodes import UnstructuredHaloExchange
from gt4py_halo.transports.nccl.environment import NCCL
from gt4py_halo.transports.nccl.expansion import communicator_code, refuse_host_fields


def _start_code(
    sdfg: dace.SDFG, node: Any, sends: Messages, recvs: Messages, gpu: bool
) -> HostCode:
    refuse_host_fields(gpu)
    count = symstr(sdfg.arrays["_neighbours"].shape[0], cpp_mode=True)
    lines = ["GT4PY_HALO_NCCL(ncclGroupStart());", f"for (int p = 0; p < {count}; ++p) {{"]
    messages = [(r, "ncclRecv", "recv_ptr") for r in recvs]
    messages += [(s, "ncclSend", "send_ptr") for s in sends]
    for (name, _, dtype, _, cell), call, ptr in messages:
        cells = symstr(cell, cpp_mode=True)
        lines.append(
            f"    GT4PY_HALO_NCCL({call}(_{name} + {ptr}[p] * ({cells}), "
            f"(size_t)({ptr}[p + 1] - {ptr}[p]) * ({cells}) * {dtype.bytes}, ncclUint8, "
            f"neighbours[p], __state->{node.spec.uid}_nccl, __dace_current_stream));"
        )
    lines += ["}", "GT4PY_HALO_NCCL(ncclGroupEnd());"]
    return communicator_code(node.spec.uid, "\n".join(lines))


def _wait_code(sdfg: dace.SDFG, node: Any, recvs: Messages, gpu: bool) -> None:
    """None: the scatters follow the receives on the stream."""


@dace.library.register_expansion(UnstructuredHaloExchange, "NCCL")
class ExpandUnstructuredHaloExchangeNccl(ExpandThroughGathers):
    """Lower ``UnstructuredHaloExchange`` to gather kernels, NCCL messages, scatter kernels."""

    environments: ClassVar[list] = [NCCL]
    start_code = staticmethod(_start_code)
    wait_code = staticmethod(_wait_code)
