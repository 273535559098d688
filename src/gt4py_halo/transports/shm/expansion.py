"""The ``shm`` expansions of both exchange nodes: halos copied from the neighbours' fields.

The runtime ``shm`` exchange's protocol (``runtime.py``) in the step's own code: each phase is
one C++ tasklet calling ``include/gt4py_halo_shm.hpp``, which copies each halo box straight
from the neighbour's field in the node's shared memory (fields from ``gh.shared_allocator``):
no buffer, no message, no Python between the step's stencils. The start publishes the rank's
fields (it writes none: the rule of a split pair's start); the finish copies the rank's own
periodic halos and from the neighbours, and waits until its readers are done.

The exchange data of a step has control records of its own (``ShmTransport`` over its private
communicator, made collectively with the data); what differs between ranks comes in as one
int64 plan array per plan (``plan_array``): the records' and counters' addresses, the pools'
table (``allocation.POOL_TABLE``), the neighbours to read from and the readers to wait for,
and the boxes (cartesian) or cells (unstructured) here and there, a row each. Its length
differs between ranks (a symbol); the generated code is the same on every rank.

A neighbour's fields unlike this rank's (another kind, a box outside them, memory outside the
pools of the exchange's ranks) are noted, nothing copied and every wait released:
``compiled/last_call.py`` raises a ``RanksDisagreeError`` after the call on each rank that
saw it. CPU fields; cartesian plans copy box by box, unstructured ones run by run (cells
consecutive on both sides).
"""

from __future__ import annotations

import hashlib
import weakref
from pathlib import Path
from typing import Any, ClassVar

import dace
import dace.library
import numpy as np
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.allocation import POOL_ROWS, POOL_TABLE, group_key
from gt4py_halo.compiled.convertible import PlanArray
from gt4py_halo.compiled.graph import host_tasklet, nested_for, on_device
from gt4py_halo.compiled.lowered import Lowered
from gt4py_halo.compiled.nodes import HaloExchange, UnstructuredHaloExchange
from gt4py_halo.compiled.phases import packs, unpacks
from gt4py_halo.compiled.stamps import STAMP
from gt4py_halo.decomposition.collective import raise_on_all_ranks
from gt4py_halo.decomposition.plan import BoxRegion, ExchangePlan, IndexRegion, Region
from gt4py_halo.errors import FieldError, RanksDisagreeError
from gt4py_halo.runtime.packing import LOCKSTEP_RUN_BYTES
from gt4py_halo.transports.mpi.environment import MPI as MpiEnvironment
from gt4py_halo.transports.shm import runtime
from gt4py_halo.transports.shm.runtime import ShmTransport


@dace.library.environment
class Shm:
    """Our header (next to this module); MPI's, whose note of what went wrong it shares."""

    cmake_minimum_version = None
    cmake_packages: ClassVar = []
    cmake_files: ClassVar = []
    cmake_variables: ClassVar = {}
    cmake_includes: ClassVar = [str(Path(__file__).parent / "include")]
    cmake_libraries: ClassVar = []
    cmake_compile_flags: ClassVar = []
    cmake_link_flags: ClassVar = []
    headers: ClassVar = {"frame": ["gt4py_halo_shm.hpp"]}
    state_fields: ClassVar = []
    init_code = ""
    finalize_code = ""
    dependencies: ClassVar = [MpiEnvironment]


class _Records:
    """The control records of one exchange data's compiled exchanges, and the counters its
    code keeps: exchanges started, then per slot whether one is in flight."""

    def __init__(self, data: Any) -> None:
        self.transport = ShmTransport(data.decomposition, data.comm)
        self.counters = np.zeros(1 + runtime.SLOTS, np.int64)
        group = data.comm.Get_group()
        self.group = group_key(group)
        group.Free()


_RECORDS: weakref.WeakKeyDictionary[Any, _Records] = weakref.WeakKeyDictionary()


class _PlanArray(PlanArray):
    """A plan array holding what its addresses point into (the records' window); of a length
    that differs between ranks (its lists and rows), so of a symbolic one."""

    records: _Records


def plan_array(data: Any, plan: ExchangePlan) -> np.ndarray:
    """The plan array of ``plan`` (``include/gt4py_halo_shm.hpp`` says its words), for the
    exchange data ``data`` (``convertible.CompiledExchangeData``). Collective the first time
    for ``data`` (its records are made), like the data itself; a plan whose boxes do not pair
    up with the neighbours' is a ``RanksDisagreeError`` on every rank."""
    records = _RECORDS.get(data)
    if records is None:
        records = _RECORDS[data] = _Records(data)
    transport = records.transport
    problem, reads, readers = None, [], []
    try:
        reads, readers = transport.links(plan)
    except RanksDisagreeError as error:
        problem = str(error)
    axes = len(plan.local_shape)
    own = [_rows(n.recv, n.send, axes) for n in plan.neighbours if n.rank == plan.rank]
    theirs = [_rows(here, there, axes) for _, here, there in reads]
    if any(rows is None for rows in own + theirs):
        problem = f"the cells of plan {plan.name!r} do not pair up with the neighbours' ones"
    raise_on_all_ranks(data.comm, problem, RanksDisagreeError)
    rows = np.concatenate([np.zeros((0, 3 * axes), np.int64), *own, *theirs])
    head = (
        records.counters.ctypes.data,
        POOL_TABLE.ctypes.data,
        POOL_ROWS.ctypes.data,
        transport.rank,
        records.group,
        len(reads),
        len(readers),
        sum(map(len, own)),
        transport.records_at(transport.rank),
        axes,
    )
    sources = np.zeros((len(reads), 4 + axes), np.int64)
    first = head[7]
    for j, ((rank, _, _), cells) in enumerate(zip(reads, theirs)):
        reach = (cells[:, 2 * axes :] + cells[:, axes : 2 * axes]).max(axis=0, initial=0)
        sources[j] = (rank, transport.records_at(rank), first, len(cells), *reach)
        first += len(cells)
    waits = np.zeros((len(readers), 2), np.int64)
    for j, (rank, position) in enumerate(readers):
        waits[j] = (rank, transport.records_at(rank) + 8 * (runtime._DONE + position))
    words = np.concatenate([head, sources.ravel(), waits.ravel(), rows.ravel()])
    kept = _PlanArray(words.shape, np.int64)  # its own memory: no view, for DaCe
    kept[...] = words
    kept.records = records
    return kept


def _rows(here: Region, there: Region, axes: int) -> np.ndarray | None:
    """The rows (``include/gt4py_halo_shm.hpp``) of the copies of cells ``there`` (the
    neighbour's) to ``here``: a box per box of a cartesian plan, a run of cells consecutive
    both here and there of an unstructured one; ``None`` where they do not pair up."""
    if isinstance(here, BoxRegion) and isinstance(there, BoxRegion):
        pairs = [(a, b) for a, b in zip(here.boxes, there.boxes) if a.size]
        if len(here.boxes) != len(there.boxes) or any(a.shape != b.shape for a, b in pairs):
            return None
        rows = [(*a.start, *a.shape, *b.start) for a, b in pairs]
        return np.array(rows, np.int64).reshape(len(rows), 3 * axes)
    if isinstance(here, IndexRegion) and isinstance(there, IndexRegion):
        if here.count != there.count:
            return None
        apart = (np.diff(here.indices) != 1) | (np.diff(there.indices) != 1)
        starts = np.flatnonzero(np.concatenate([[here.count > 0], apart]))
        lengths = np.diff(starts, append=here.count)
        return np.stack([here.indices[starts], lengths, there.indices[starts]], axis=1).astype(
            np.int64
        )
    return None


def _signature(plan: str, fields: list[Any]) -> int:
    """What the ranks' records must agree on: the plan, the fields' dtypes and axes (their
    level extents are compared at run time)."""
    described = ";".join([f"{f.dtype.to_string()}/{len(f.shape)}" for f in fields] + [plan])
    digest = hashlib.blake2b(described.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _field(desc: Any, i: int) -> str:
    """The C++ description of field ``i`` (connector ``in{i}``): address, axes, bytes per
    element, shape and strides in bytes."""
    if len(desc.shape) > runtime.MAX_AXES:
        raise FieldError(
            f"field {i} has {len(desc.shape)} axes; the 'shm' transport takes {runtime.MAX_AXES}"
        )
    size = desc.dtype.bytes
    shape = ", ".join(symstr(n, cpp_mode=True) for n in desc.shape)
    strides = ", ".join(f"({symstr(s, cpp_mode=True)}) * {size}" for s in desc.strides)
    return f"{{(char*)in{i}, {len(desc.shape)}, {size}, {{{shape}}}, {{{strides}}}}}"


@dace.library.register_expansion(HaloExchange, "SHM")
class ExpandHaloExchangeShm(ExpandTransformation):
    """Lower the cartesian ``HaloExchange`` to copies from the neighbours' shared fields, a
    box per row."""

    environments: ClassVar[list] = [Shm]
    #: The plan arrays the node gets (``convertible.exchange_sdfg``).
    PLAN_ARRAYS = ("shm",)

    @staticmethod
    def expansion(
        node: Any,
        parent_state: dace.SDFGState,
        parent_sdfg: dace.SDFG,
        lowered: Lowered | None = None,
    ) -> dace.SDFG:
        """``lowered``: nothing to record there, the copies are the header's."""
        spec = node.spec
        uid, phase = spec.uid, spec.phase
        sdfg = nested_for(node, parent_state, parent_sdfg)
        fields = [sdfg.arrays[f"_f{i}"] for i in range(spec.field_count)]
        if on_device(fields):
            raise FieldError(
                "the 'shm' transport has no compiled GPU exchange: use the 'mpi' or 'nccl' "
                "transport for GPU fields inside @gh.program"
            )
        layout = ", ".join(
            str(n)
            for n in (
                runtime.SLOTS,
                runtime._RECORD,
                runtime._STAMP,
                runtime._HEAD,
                runtime._FIELD,
                runtime._DONE,
                runtime.MAX_AXES,
                runtime.MAX_SOURCES,
                LOCKSTEP_RUN_BYTES,
            )
        )
        described = ", ".join(_field(desc, i) for i, desc in enumerate(fields))
        fields_of = f"comm_handle[{STAMP}], {_signature(spec.plan, fields)}L, {len(fields)}, fields"
        number = f"__state->{uid}_number"
        lines = [
            f"const gt4py_halo_shm::Layout layout{{{layout}}};",
            f"const gt4py_halo_shm::Field fields[{len(fields)}] = {{{described}}};",
        ]
        if packs(phase):
            lines.append(
                f"{number} = gt4py_halo_shm::start((const long*)shm, layout, {fields_of});"
            )
        if unpacks(phase):
            lines.append(f"long words[{runtime._HEAD + len(fields) * runtime._FIELD}];")
            lines.append(
                f"gt4py_halo_shm::finish((const long*)shm, layout, {number}, {fields_of}, words);"
            )
        host_tasklet(
            sdfg,
            node,
            f"{uid}_shm_{phase}",
            "\n".join(lines),
            {"shm": "_shm", "comm_handle": "_comm"},
            state_fields=[f"long {uid}_number = -1;"] if packs(phase) else [],
        )
        return sdfg

    @staticmethod
    def message_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any, bool]]:
        """None: the copies go from field to field."""
        return []


@dace.library.register_expansion(UnstructuredHaloExchange, "SHM")
class ExpandUnstructuredHaloExchangeShm(ExpandHaloExchangeShm):
    """Lower ``UnstructuredHaloExchange`` alike: a row per run of halo cells (axis 0 of the
    fields is the dim's local index)."""
