"""``ex.exchange(...)`` inside a DaCe program: the SDFG it becomes, and the data it needs.

DaCe calls ``__sdfg__`` with the descriptors of the arguments and gets a one-state SDFG holding
one exchange node; the closure hands the compiled program this rank's plan data as small
integer arrays, passed at every call like its other arguments: the communicator, and what the
expansion of the exchanges' transport reads (its ``PLAN_ARRAYS``, made as ``PLAN_DATA`` says).
Unstructured plan arrays have symbolic lengths, so every rank runs the same code.

The compiled program exchanges on a communicator of its own, duplicated from the
decomposition's, so its messages never meet those of the runtime exchange.
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections.abc import Callable
from typing import Any

import dace
import numpy as np
from dace.frontend.python.common import SDFGClosure
from mpi4py import MPI

from gt4py_halo.compiled.graph import no_line_info
from gt4py_halo.compiled.nodes import SELF, CompiledExchange, HaloExchange, UnstructuredHaloExchange
from gt4py_halo.compiled.phases import TOKEN
from gt4py_halo.compiled.split_phase import ExchangeToken
from gt4py_halo.compiled.stamps import STAMP
from gt4py_halo.decomposition.cartesian import CartesianDecomposition, side_by_side
from gt4py_halo.decomposition.collective import private_communicator
from gt4py_halo.decomposition.plan import ExchangePlan
from gt4py_halo.errors import DecompositionError, FieldError, ProgramError
from gt4py_halo.transports import compiled_implementation

#: Names of the program arguments that carry a rank's plan data start so.
CLOSURE_PREFIX = "__halo_"
#: The most fields one compiled exchange takes (the length of its DaCe signature).
MAX_FIELDS = 32

_last_serial = -1

#: The plan of each exchange node made here, by the node's ``uid``: what ``gh.program`` checks
#: the step's arguments against (the decomposition keeps the plan alive).
PLANS: weakref.WeakValueDictionary[str, ExchangePlan] = weakref.WeakValueDictionary()
#: Each ``CompiledExchangeData`` of this process by its closure prefix (``process_prefix``).
BY_PREFIX: weakref.WeakValueDictionary[str, CompiledExchangeData] = weakref.WeakValueDictionary()


class PlanArray(np.ndarray):
    """Plan data whose DaCe descriptor has a symbolic length (``<name>_len``).

    DaCe describes closure arrays from their values; lengths that differ between ranks would
    make every rank's SDFG different. ``Program`` passes the length symbols at each call.
    """

    def __descriptor__(self) -> dace.data.Array:
        return dace.data.Array(dace.dtypes.typeclass(self.dtype.type), [length_symbol(self.name)])


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

    Built collectively on first use (it duplicates the communicator, freed when neither this
    data nor a step built with it is left); also allocates message tags, so that every
    exchange node of a program has its own.
    """

    def __init__(self, decomposition: Any, transport: str = "mpi", auto: bool = False) -> None:
        self.decomposition = decomposition
        cartesian = isinstance(decomposition, CartesianDecomposition)
        #: the node type of this decomposition's exchanges, and the name of the expansion
        #: they get (``transports.compiled_implementation``): what the plan data is made for
        self.node_type = HaloExchange if cartesian else UnstructuredHaloExchange
        self.implementation = compiled_implementation(transport, self.node_type, auto)
        reads = self.node_type.implementations[self.implementation].PLAN_ARRAYS
        # the communicator lives as long as its handle, which steps built with it keep; after
        # the handle, the stamp of the running call (``stamps.py``)
        handle = np.zeros(STAMP + 1, dtype=np.int64)
        self.comm = private_communicator(handle, decomposition.comm)
        handle[0] = self.comm.py2f()
        serial = _agreed_serial(self.comm)
        # a step renames it (canonical_names): no clash with the names it renames to
        self.prefix = f"{CLOSURE_PREFIX}p{serial}_"
        self.arrays: dict[str, np.ndarray] = {handle_name(self.prefix): handle}
        #: the plans exchanged, by name
        self.plans: dict[str, ExchangePlan] = {}
        for dim in getattr(decomposition, "dims", (None,)):
            plan = decomposition.plan(dim)
            self.plans[plan.name] = plan
            for what in reads:
                name = self.name(plan, what)
                array = PLAN_DATA[what](self, plan)
                if not cartesian and not isinstance(array, PlanArray):  # lengths differ
                    array = array.view(PlanArray)
                if isinstance(array, PlanArray):
                    array.name = name
                self.arrays[name] = array
        self._next_tag = 0
        BY_PREFIX[self.prefix] = self

    def key(self) -> str:
        """What the exchange nodes made from this data lower to depends on (besides the
        fields' descriptors and the closure's): the same for every rank of a decomposition
        and in every process, unlike ``prefix``."""
        plans = [
            (p.name, len(p.local_shape), [d.offset for d in p.directions])
            for p in self.plans.values()
        ]
        halo = self.decomposition.halo if self.node_type is HaloExchange else ()
        return repr((self.node_type.__name__, self.implementation, plans, tuple(map(tuple, halo))))

    def name(self, plan: ExchangePlan, what: str) -> str:
        """The program argument that carries plan array ``what`` of ``plan``."""
        return f"{self.prefix}{plan.name}_{what}"

    def gids(self, dim: str) -> np.ndarray:
        """The dim's gids in local order: what GHEX builds its pattern from. Collective:
        GHEX takes 32-bit gids, and a mesh with larger ones is refused on every rank."""
        gids = self.decomposition.local_gids(dim)
        if self.comm.allreduce(int(gids.max(initial=0)), op=MPI.MAX) >= 2**31:
            raise DecompositionError(
                f"dim {dim!r}: GHEX takes 32-bit gids; this mesh has gids of 2**31 and above: "
                "use the 'mpi' backend"
            )
        return gids.astype(np.int32)

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


def _peers(data: CompiledExchangeData, plan: ExchangePlan) -> np.ndarray:
    own = data.comm.rank  # to oneself: a copy, not a message
    return np.array([SELF if d.rank == own else d.rank for d in plan.directions], dtype=np.int32)


def _order(data: CompiledExchangeData, plan: ExchangePlan) -> np.ndarray:
    """The order of the directions in the send arenas (``arenas.place_segments``): those
    leading to one rank side by side, from the process grid and periodicity."""
    d = data.decomposition
    order = side_by_side(tuple(x.offset for x in plan.directions), d.proc_grid, d.periodic)
    return np.array(order, dtype=np.int32)


def _shm_plan_array(data: CompiledExchangeData, plan: ExchangePlan) -> np.ndarray:
    """The ``shm`` expansion's (imported here: it imports this module)."""
    from gt4py_halo.transports.shm.expansion import plan_array

    return plan_array(data, plan)


def _block(data: CompiledExchangeData, plan: ExchangePlan) -> np.ndarray:
    """This rank's block as GHEX describes it, per decomposed axis: the global extents, the
    first and last owned global index, whether the axis is periodic."""
    d = data.decomposition
    first = [s.start for s in d.global_slices]
    last = [s.stop - 1 for s in d.global_slices]
    return np.array([*d.global_shape, *first, *last, *d.periodic], dtype=np.int32)


#: How each plan array an expansion may read (its ``PLAN_ARRAYS``) is made from this rank's
#: plan: cartesian, the rank in each direction and the order of the directions in the message
#: buffers (MPI, NCCL), this rank's block (GHEX) or its records and boxes (shm); unstructured,
#: the neighbour ranks and per neighbour (CSR offsets) the local indices to send and to
#: receive (MPI), or the gids in local order and where the halo lies (GHEX).
PLAN_DATA: dict[str, Callable[[CompiledExchangeData, ExchangePlan], np.ndarray]] = {
    "peers": _peers,
    "order": _order,
    "domain": _block,
    "shm": _shm_plan_array,
    "neighbours": lambda data, plan: np.array(
        [n.rank for n in plan.remote_neighbours], dtype=np.int32
    ),
    "send_ptr": lambda data, plan: _offsets([n.send.count for n in plan.remote_neighbours]),
    "send_idx": lambda data, plan: _concatenated([n.send.indices for n in plan.remote_neighbours]),
    "recv_ptr": lambda data, plan: _offsets([n.recv.count for n in plan.remote_neighbours]),
    "recv_idx": lambda data, plan: _concatenated([n.recv.indices for n in plan.remote_neighbours]),
    "gids": lambda data, plan: data.gids(plan.name),
    "halo_lids": lambda data, plan: data.decomposition.halo_lids[plan.name].astype(np.int32),
}


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
    node_type, implementation = data.node_type, data.implementation
    cartesian = node_type is HaloExchange
    directions = tuple(d.offset for d in plan.directions) if cartesian else ()
    tag_base = data.allocate_tags(tag_count(len(descriptors), directions))
    spec = CompiledExchange(
        uid=f"{data.prefix.removeprefix('__')}{tag_base}",
        plan=plan.name,
        phase=phase,
        field_count=len(descriptors),
        tag_base=tag_base,
        transport=implementation,
        plan_arrays=node_type.implementations[implementation].PLAN_ARRAYS,
        halo=tuple(map(tuple, data.decomposition.halo)) if cartesian else (),
        directions=directions,
    )
    node = node_type(f"halo_exchange_{plan.name}", spec)
    PLANS[spec.uid] = plan
    node.implementation = implementation
    with no_line_info():
        sdfg = dace.SDFG(f"{phase}_{plan.name}_{spec.uid}")
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
            state.add_edge(
                node, TOKEN, state.add_write(token), None, _whole(token, sdfg.arrays[token])
            )
        connectors = {f"_{what}": data.name(plan, what) for what in spec.plan_arrays}
        connectors["_comm"] = handle_name(data.prefix)
        for connector, name in connectors.items():
            sdfg.add_datadesc(name, data.descriptor(name))
            state.add_edge(
                state.add_read(name), None, node, connector, _whole(name, sdfg.arrays[name])
            )
        sdfg.arg_names = names
    return sdfg


def handle_name(prefix: str) -> str:
    """The program argument that carries the communicator's handle of the exchange data of
    closure prefix ``prefix``, and the stamp of the running call (``stamps.STAMP``)."""
    return f"{prefix}comm"


def tag_count(field_count: int, directions: tuple) -> int:
    """The MPI tags an exchange may use: one per field group, cartesian one per field and
    direction (``in_place.py``), and one for the stamps (the unstructured MPI expansion's;
    cartesian exchanges send theirs with the fields)."""
    return field_count * (1 + len(directions)) + 1


def process_prefix(name: str) -> str | None:
    """The closure prefix (``CompiledExchangeData.prefix``) ``name`` starts with, if any."""
    found = re.match(rf"{CLOSURE_PREFIX}p\d+_", name)
    return found.group() if found else None


def renamed(name: str, prefixes: dict[str, str]) -> str:
    """``name`` with its closure prefix replaced as ``canonical_names`` says."""
    old = process_prefix(name)
    return name if old not in prefixes else prefixes[old] + name.removeprefix(old)


def canonical_names(sdfg: dace.SDFG) -> dict[str, str]:
    """Give the exchanges of a parsed step names and tags that depend on the step alone.

    Made at parse time, they count what the process made before (closure prefixes per
    decomposition, tags per exchange node), so the same step parsed again, in another order
    or another process, would lower to another graph and build anew. Here, in order of
    appearance, each decomposition's closure becomes ``__halo_<n>_...`` and each exchange
    (a split pair alike) gets tags from 0 up, per decomposition: tags need to differ only
    between the exchanges of one step, as a step finishes its exchanges before it returns.
    Returns the renaming of closure prefixes, which a call applies to the closure it passes
    (``renamed``).
    """
    prefixes: dict[str, str] = {}
    uids: dict[str, tuple[str, int]] = {}  # old uid -> new uid and tag base
    next_tag: dict[str, int] = {}
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, HaloExchange | UnstructuredHaloExchange):
            continue
        comm = next(e.data.data for e in state.in_edges(node) if e.dst_conn == "_comm")
        prefix = prefixes.setdefault(process_prefix(comm), f"{CLOSURE_PREFIX}{len(prefixes)}_")
        spec = node.spec
        if spec.uid not in uids:
            first = next_tag.get(prefix, 0)
            next_tag[prefix] = first + tag_count(spec.field_count, spec.directions)
            uids[spec.uid] = (f"{prefix.removeprefix('__')}{first}", first)
        uid, tag_base = uids[spec.uid]
        node.spec = dataclasses.replace(spec, uid=uid, tag_base=tag_base)
    renames = {
        name: renamed(name, prefixes)
        # in a deterministic order: it orders the renamed arrays, so the graph's digest
        for name in dict.fromkeys([*sdfg.arrays, *sdfg.symbols, *sorted(sdfg.free_symbols)])
        if process_prefix(name) in prefixes
    }
    sdfg.replace_dict(renames)
    return prefixes


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
