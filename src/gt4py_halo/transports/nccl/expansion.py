"""The NCCL expansion of ``HaloExchange``: arenas sent by NCCL on the program's stream.

The arenas, pack, unpack and self-copy maps are the transport-neutral lowering
(``compiled/arena_lowering.py``); on a GPU the copy maps are kernels on the program's stream.
NCCL supplies the start tasklet, host code that enqueues on that same stream:

- on the node's first call, an NCCL communicator over the node's MPI communicator
  (``include/gt4py_halo_nccl.hpp``: a collective, like the MPI expansion's request setup);
- ``ncclGroupStart``; per arena, one ``ncclRecv`` per direction leading to another rank,
  into its segment, then one ``ncclSend`` per such direction, from its segment;
  ``ncclGroupEnd``.

NCCL matches the messages between two ranks in the order they are posted (it has no tags):
both sides post per arena group in group order, the sender per direction ``k`` in
ascending ``k``, the receiver per halo direction ``j`` in ascending order of the direction
its sender sent it towards (``opposite[j]``), so the n-th message from A to B is the n-th
receive B posts from A.

Nothing waits on the host: the unpack kernels follow the receives on the stream, and the
exchange's finish has no tasklet at all. Fields must be GPU fields (``device="gpu"``).
"""

from __future__ import annotations

from typing import ClassVar

import dace
from dace.symbolic import symstr

from gt4py_halo.compiled.arena_lowering import ArenaLowering, ExpandThroughArenas
from gt4py_halo.compiled.arenas import Arena
from gt4py_halo.compiled.graph import HostCode
from gt4py_halo.compiled.nodes import HaloExchange
from gt4py_halo.errors import FieldError
from gt4py_halo.transports.nccl.environment import NCCL


def communicator_code(uid: str, posts: str) -> HostCode:
    """The start tasklet of exchange ``uid``: its NCCL communicator made on the first call
    from the MPI communicator (connector ``comm_handle``), then ``posts``; the communicator
    kept in the program's state and freed with it."""
    setup = (
        f"if (!__state->{uid}_nccl) __state->{uid}_nccl = "
        "gt4py_halo::nccl_communicator(MPI_Comm_f2c((MPI_Fint)comm_handle[0]));"
    )
    return HostCode(
        f"{setup}\n{posts}",
        (f"ncclComm_t {uid}_nccl = nullptr;",),
        f"if (__state->{uid}_nccl) ncclCommDestroy(__state->{uid}_nccl);",
    )


def refuse_host_fields(gpu: bool) -> None:
    """NCCL moves device memory only: a step of host fields is a ``FieldError`` when it is
    lowered (on every rank, before anything runs)."""
    if not gpu:
        raise FieldError(
            "the 'nccl' transport exchanges GPU fields only: build the step with "
            "@gh.program(device='gpu') and pass GPU fields, or use the 'mpi' or 'ghex' transport"
        )


class _NcclLowering(ArenaLowering):
    def start_code(self) -> HostCode:
        refuse_host_fields(self.gpu)
        posts = ["GT4PY_HALO_NCCL(ncclGroupStart());"]
        for arena in self.recvs:
            by_direction = {s.direction: s for s in arena.segments}
            for k in range(len(self.node.spec.directions)):
                segment = by_direction.get(self.opposite[k])
                if segment is not None:
                    posts.append(self._post("ncclRecv", arena, segment))
        for arena in self.sends:
            for segment in sorted(arena.segments, key=lambda s: s.direction):
                posts.append(self._post("ncclSend", arena, segment))
        posts.append("GT4PY_HALO_NCCL(ncclGroupEnd());")
        return communicator_code(self.uid, "\n".join(posts))

    def wait_code(self) -> None:
        """None: the unpack kernels follow the receives on the stream."""

    def _post(self, call: str, arena: Arena, segment: object) -> str:
        """``call`` (ncclSend or ncclRecv) of one segment, if its direction leads to another
        rank (the other's rank: ``peers`` of the sender's direction, ours of the halo's)."""
        k = segment.direction
        size = arena.dtype.bytes
        at = f"(size_t)({symstr(segment.offset, cpp_mode=True)}) * {size}"
        count = f"(size_t)({symstr(len(arena.fields) * segment.size, cpp_mode=True)}) * {size}"
        # a box the axes that wrap emptied (cartesian.wrapped_box) is empty on both sides: no call
        return (
            f"if (peers[{k}] >= 0 && {count} > 0) GT4PY_HALO_NCCL({call}("
            f"(char*)_{arena.name} + {at}, {count}, ncclUint8, peers[{k}], "
            f"__state->{self.uid}_nccl, __dace_current_stream));"
        )


@dace.library.register_expansion(HaloExchange, "NCCL")
class ExpandHaloExchangeNccl(ExpandThroughArenas):
    """Lower ``HaloExchange`` to pack kernels, NCCL sends and receives, unpack kernels."""

    environments: ClassVar[list] = [NCCL]
    LOWERING = _NcclLowering
