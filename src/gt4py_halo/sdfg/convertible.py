"""``ex.exchange(...)`` inside a DaCe program: the SDFG it becomes, and the data it needs.

DaCe calls ``__sdfg__`` with the descriptors of the arguments and gets a one-state SDFG holding
a ``HaloExchange`` node; ``__sdfg_closure__`` hands it this rank's plan data (neighbour ranks,
communicator) as two small arrays, passed to the compiled program at every call like its other
arguments. The compiled program exchanges on a communicator of its own, duplicated from the
decomposition's, so its messages never meet those of the runtime exchange.
"""

from __future__ import annotations

from typing import Any

import dace
import numpy as np
from dace.frontend.python.common import SDFGClosure
from mpi4py import MPI

from gt4py_halo.decomposition.plan import ExchangePlan
from gt4py_halo.errors import FieldError
from gt4py_halo.sdfg.nodes import HaloExchange

#: Names of the program arguments that carry a rank's plan data start so.
CLOSURE_PREFIX = "__halo_"
#: The most fields one compiled exchange takes (the length of its DaCe signature).
MAX_FIELDS = 32

_last_serial = -1


def _agreed_serial(comm: MPI.Comm) -> int:
    """A number no other compiled exchange of this process has, the same on all of ``comm``.

    It names the program arguments that carry plan data, and programs are built once for all
    ranks: a per-process counter alone would differ where some ranks built more (a
    ``COMM_SELF`` program on rank 0, say).
    """
    global _last_serial
    _last_serial = comm.allreduce(_last_serial + 1, op=MPI.MAX)
    return _last_serial


class CompiledExchangeData:
    """This rank's data for the compiled exchanges of one plan, and their tag allocation."""

    def __init__(self, plan: ExchangePlan, comm: MPI.Comm) -> None:
        if not plan.directions:
            raise FieldError(
                f"plan {plan.name!r}: compiled exchanges support cartesian decompositions only "
                "so far; exchange unstructured fields with the runtime exchange"
            )
        self.plan = plan
        self.comm = comm.Dup()
        serial = _agreed_serial(self.comm)
        self.peers_name = f"{CLOSURE_PREFIX}peers_{serial}"
        self.comm_name = f"{CLOSURE_PREFIX}comm_{serial}"
        self.peers = np.array([d.rank for d in plan.directions], dtype=np.int32)
        self.comm_handle = np.array([self.comm.py2f()], dtype=np.int32)
        self._next_tag = 0

    def allocate_tags(self, count: int) -> int:
        """The first of ``count`` tags no other exchange node of this plan uses."""
        first = self._next_tag
        self._next_tag += count
        if self._next_tag > MPI.TAG_UB:
            raise RuntimeError("too many compiled exchange nodes on one plan: MPI tags exhausted")
        return first

    def closure(self) -> dict[str, np.ndarray]:
        return {self.peers_name: self.peers, self.comm_name: self.comm_handle}


def exchange_sdfg(data: CompiledExchangeData, halo: Any, descriptors: tuple[Any, ...]) -> dace.SDFG:
    """A one-state SDFG exchanging the halos of fields with the given descriptors."""
    if not 1 <= len(descriptors) <= MAX_FIELDS:
        raise FieldError(
            f"a compiled exchange takes 1 to {MAX_FIELDS} fields, got {len(descriptors)}"
        )
    ndim = len(data.plan.local_shape)
    for i, desc in enumerate(descriptors):
        if not isinstance(desc, dace.data.Array) or len(desc.shape) < ndim:
            raise FieldError(
                f"field {i} of a compiled exchange must be an array with at least {ndim} axes, "
                f"got {desc}"
            )
    directions = [d.offset for d in data.plan.directions]
    node = HaloExchange(
        f"halo_exchange_{data.plan.name}",
        halo=list(halo),
        directions=directions,
        field_count=len(descriptors),
        tag_base=data.allocate_tags(len(directions) * len(descriptors)),
    )
    sdfg = dace.SDFG(f"exchange_{data.plan.name}_{node.tag_base}")
    state = sdfg.add_state("exchange")
    state.add_node(node)
    names = field_names(len(descriptors))
    for i, (name, desc) in enumerate(zip(names, descriptors)):
        desc = desc.clone()
        desc.transient = False
        sdfg.add_datadesc(name, desc)
        memlet = dace.Memlet.from_array(name, desc)
        state.add_edge(state.add_read(name), None, node, f"_f{i}", memlet)
        state.add_edge(
            node, f"_f{i}", state.add_write(name), None, dace.Memlet.from_array(name, desc)
        )
    for connector, name, array in (
        ("_peers", data.peers_name, data.peers),
        ("_comm", data.comm_name, data.comm_handle),
    ):
        sdfg.add_array(name, array.shape, dace.int32)
        state.add_edge(
            state.add_read(name),
            None,
            node,
            connector,
            dace.Memlet.from_array(name, sdfg.arrays[name]),
        )
    sdfg.arg_names = names
    return sdfg


def closure_of(data: CompiledExchangeData) -> SDFGClosure:
    """The closure DaCe passes to the compiled program at every call: this rank's plan data."""
    closure = SDFGClosure()
    for name, array in data.closure().items():
        descriptor = dace.data.create_datadescriptor(array)
        closure.closure_arrays[name] = (name, descriptor, lambda array=array: array, False)
    return closure


def field_names(count: int = MAX_FIELDS) -> list[str]:
    return [f"field{i}" for i in range(count)]
