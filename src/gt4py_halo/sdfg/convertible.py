"""``ex.exchange(...)`` inside a DaCe program: the SDFG it becomes, and the data it needs.

DaCe calls ``__sdfg__`` with the descriptors of the arguments and gets a one-state SDFG holding
one exchange node; the closure hands the compiled program this rank's plan data as small
integer arrays, passed at every call like its other arguments:

- cartesian plans: the rank in each exchange direction, and the communicator;
- unstructured plans: the neighbour ranks, and per neighbour (CSR offsets) the local indices
  to send and to receive — arrays of symbolic length, so every rank runs the same code.

The compiled program exchanges on a communicator of its own, duplicated from the
decomposition's, so its messages never meet those of the runtime exchange.
"""

from __future__ import annotations

import weakref
from typing import Any

import dace
import numpy as np
from dace.frontend.python.common import SDFGClosure
from mpi4py import MPI

from gt4py_halo.backends import compiled_implementation
from gt4py_halo.decomposition.plan import ExchangePlan
from gt4py_halo.errors import DecompositionError, FieldError, ProgramError
from gt4py_halo.sdfg.nodes import SELF, HaloExchange, UnstructuredHaloExchange
from gt4py_halo.sdfg.phases import TOKEN
from gt4py_halo.sdfg.split_phase import ExchangeToken

#: Names of the program arguments that carry a rank's plan data start so.
CLOSURE_PREFIX = "__halo_"
#: The most fields one compiled exchange takes (the length of its DaCe signature).
MAX_FIELDS = 32

_last_serial = -1

#: The plan of each exchange node made here, by the node's ``uid``: what ``gh.program`` checks
#: the step's arguments against (the decomposition keeps the plan alive).
PLANS: weakref.WeakValueDictionary[str, ExchangePlan] = weakref.WeakValueDictionary()


class PlanArray(np.ndarray):
    """Plan data whose DaCe descriptor has a symbolic length (``<name>_len``).

    DaCe describes closure arrays from their values; lengths that differ between ranks would
    make every rank's SDFG different. ``Program`` passes the length symbols at each call.
    """

    def __descriptor__(self) -> dace.data.Array:
        return dace.data.Array(dace.int32, [length_symbol(self.name)])


def length_symbol(name: str) -> dace.symbol:
    return dace.symbol(f"{name}_len")


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
    """This rank's data for the compiled exchanges of one decomposition, per plan.

    Built collectively on first use (it duplicates the communicator); also allocates message
    tags, so that every exchange node of a program has its own.
    """

    def __init__(self, decomposition: Any, transport: str = "mpi", auto: bool = False) -> None:
        self.decomposition = decomposition
        #: whose DaCe expansions the nodes get (``backends.compiled_implementation``)
        self.transport = transport
        self.auto = auto
        self.comm = decomposition.comm.Dup()
        serial = _agreed_serial(self.comm)
        self.prefix = f"{CLOSURE_PREFIX}{serial}_"
        self.arrays: dict[str, np.ndarray] = {
            f"{self.prefix}comm": np.array([self.comm.py2f()], dtype=np.int32)
        }
        dims = getattr(decomposition, "dims", (None,))
        for dim in dims:
            plan = decomposition.plan(dim)
            if plan.directions:
                own = self.comm.rank  # to oneself: a copy, not a message
                self.arrays[self._name(plan, "peers")] = np.array(
                    [SELF if d.rank == own else d.rank for d in plan.directions], dtype=np.int32
                )
            else:
                self._add_index_lists(plan)
        self._next_tag = 0

    def _name(self, plan: ExchangePlan, what: str) -> str:
        return f"{self.prefix}{plan.name}_{what}"

    def _add_index_lists(self, plan: ExchangePlan) -> None:
        neighbours = plan.remote_neighbours
        lists = {
            "neighbours": np.array([n.rank for n in neighbours], dtype=np.int32),
            "send_ptr": _offsets([n.send.count for n in neighbours]),
            "send_idx": _concatenated([n.send.indices for n in neighbours]),
            "recv_ptr": _offsets([n.recv.count for n in neighbours]),
            "recv_idx": _concatenated([n.recv.indices for n in neighbours]),
        }
        if self.transport == "ghex":
            lists.update(self._gids(plan.name))
        for what, array in lists.items():
            name = self._name(plan, what)
            self.arrays[name] = array.view(PlanArray)
            self.arrays[name].name = name

    def _gids(self, dim: str) -> dict[str, np.ndarray]:
        """The dim's gids in local order (owned, then halo) and the local indices of its halo:
        what GHEX builds its pattern from (the MPI expansion reads the index lists instead).
        Collective: GHEX takes 32-bit gids, and a mesh with larger ones is refused on every
        rank."""
        owned = self.decomposition.owned_gids[dim]
        halo = self.decomposition.halo_gids[dim]
        gids = np.concatenate([owned, halo])
        if self.comm.allreduce(int(gids.max(initial=0)), op=MPI.MAX) >= 2**31:
            raise DecompositionError(
                f"dim {dim!r}: GHEX takes 32-bit gids; this mesh has gids of 2**31 and above: "
                "use the 'mpi' backend"
            )
        return {
            "gids": gids.astype(np.int32),
            "halo_lids": np.arange(len(owned), len(gids), dtype=np.int32),
        }

    def descriptor(self, name: str) -> dace.data.Array:
        """Lengths that differ between ranks are symbols: the code stays the same."""
        return dace.data.create_datadescriptor(self.arrays[name])

    def allocate_tags(self, count: int) -> int:
        """The first of ``count`` tags no other exchange node of this decomposition uses."""
        first = self._next_tag
        bound = self.comm.Get_attr(MPI.TAG_UB)  # MPI.TAG_UB names the attribute, not the value
        if first + count - 1 > bound:
            raise ProgramError(
                f"too many compiled exchange nodes: MPI message tags exhausted (tags {first} "
                f"to {first + count - 1} asked for, this MPI allows up to {bound})"
            )
        self._next_tag += count
        return first

    def closure(self) -> SDFGClosure:
        closure = SDFGClosure()
        for name, array in self.arrays.items():
            evaluate = lambda array=array: array
            closure.closure_arrays[name] = (name, self.descriptor(name), evaluate, False)
        return closure


def exchange_sdfg(
    data: CompiledExchangeData, dim: str | None, descriptors: tuple, phase: str = "exchange"
) -> dace.SDFG:
    """A one-state SDFG exchanging the halos of fields with the given descriptors.

    ``phase="start"``: the SDFG starts the exchange and returns a token (``__return``, an
    ``ExchangeToken``), on which the step calls ``finish()`` (``split_phase.py``).
    """
    plan = data.decomposition.plan(dim)
    if not 1 <= len(descriptors) <= MAX_FIELDS:
        raise FieldError(
            f"a compiled exchange takes 1 to {MAX_FIELDS} fields, got {len(descriptors)}"
        )
    ndim = len(plan.local_shape)
    for i, desc in enumerate(descriptors):
        if not isinstance(desc, dace.data.Array) or len(desc.shape) < ndim:
            raise FieldError(
                f"field {i} of a compiled exchange must be an array with at least {ndim} axes, "
                f"got {desc}"
            )
    node_type = HaloExchange if plan.directions else UnstructuredHaloExchange
    implementation = compiled_implementation(data.transport, node_type, data.auto)
    if plan.directions:
        directions = [d.offset for d in plan.directions]
        node = HaloExchange(
            f"halo_exchange_{plan.name}",
            halo=list(data.decomposition.halo),
            directions=directions,
            field_count=len(descriptors),
            # one per field group, then one per field and direction (in_place.py)
            tag_base=data.allocate_tags(len(descriptors) * (1 + len(plan.directions))),
            phase=phase,
        )
        plan_arrays = {"_peers": "peers"}
    else:
        reads = UnstructuredHaloExchange.implementations[implementation].PLAN_ARRAYS
        node = UnstructuredHaloExchange(
            f"halo_exchange_{plan.name}",
            field_count=len(descriptors),
            tag_base=data.allocate_tags(len(descriptors)),
            phase=phase,
            plan=reads,
        )
        plan_arrays = {f"_{w}": w for w in reads}
    node.uid = f"{data.prefix.removeprefix('__')}{node.tag_base}"
    PLANS[node.uid] = plan
    node.implementation = implementation
    sdfg = dace.SDFG(f"{phase}_{plan.name}_{node.uid}")
    state = sdfg.add_state(phase)
    state.add_node(node)
    names = field_names(len(descriptors))
    for i, (name, desc) in enumerate(zip(names, descriptors)):
        desc = desc.clone()
        desc.transient = False
        sdfg.add_datadesc(name, desc)
        state.add_edge(state.add_read(name), None, node, f"_f{i}", _whole(name, desc))
        if phase != "start":
            state.add_edge(node, f"_f{i}", state.add_write(name), None, _whole(name, desc))
    if phase == "start":
        token = sdfg.add_datadesc("__return", ExchangeToken())
        state.add_edge(node, TOKEN, state.add_write(token), None, _whole(token, sdfg.arrays[token]))
    connectors = {c: data._name(plan, what) for c, what in plan_arrays.items()}
    connectors["_comm"] = f"{data.prefix}comm"
    for connector, name in connectors.items():
        sdfg.add_datadesc(name, data.descriptor(name))
        state.add_edge(state.add_read(name), None, node, connector, _whole(name, sdfg.arrays[name]))
    sdfg.arg_names = names
    return sdfg


def field_names(count: int = MAX_FIELDS) -> list[str]:
    return [f"field{i}" for i in range(count)]


def _whole(name: str, desc: Any) -> dace.Memlet:
    return dace.Memlet.from_array(name, desc)


def _offsets(counts: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int32)


def _concatenated(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype=np.int32)
    return np.concatenate(parts).astype(np.int32)
