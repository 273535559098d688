"""Halo exchanges as DaCe library nodes, each described by one frozen ``CompiledExchange``.

A node says *what* happens: the halos of its fields are filled from their owners. Each field
is one read-write connector (``_f0``, ``_f1``, ...), so a stencil that writes a field before
the exchange, and one that reads it after, are ordered by data edges rather than by side
effects or state boundaries. How the bytes move is an expansion, chosen by name (the
description's ``transport``, which is the node's ``implementation``): each transport registers
its own (``transports.TRANSPORTS``); the node knows none of them.

Everything about the exchange that is the same on every rank is its ``CompiledExchange``
(``node.spec``): made when the step is parsed (``convertible.exchange_sdfg``), replaced by the
lowering passes that decide something about it (``dataclasses.replace``: the phase of a split
pair's finish, the lowering options, which send buffers producer stencils fill), only read by
the expansions. What differs between ranks comes in through small integer arrays: the
communicator (``_comm``) and those the transport's expansion reads (its ``PLAN_ARRAYS``,
connectors ``_<name>``; ``convertible.PLAN_DATA`` makes them): for MPI the rank in each
direction and where each direction's message lies in the buffers, for GHEX this rank's block
of the global domain, for unstructured exchanges index lists or gids. So the code generated
for a node is the same on every rank and every process grid, built by one and loaded by all.

A split-phase exchange (``h = ex.start(v)`` ... ``h.finish()``) is a pair of nodes of the same
type and ``uid``: ``phase="start"`` packs and posts (reads the fields, writes a token),
``phase="finish"`` waits and unpacks (reads the token, reads and writes the fields). Lowering
gives the pair receive buffers of the enclosing SDFG (``split_phase.connect_pairs``), so the
messages the start posts are the ones the finish unpacks.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import dace
import dace.library
from dace import properties
from dace.sdfg import nodes

from gt4py_halo.compiled.phases import phase_connectors

#: ``_peers[k]`` when direction ``k`` leads to the rank itself (a periodic axis not split over
#: ranks); other values: the neighbour's rank, or -1 (``NO_RANK``) beyond an open boundary.
SELF = -2


@dataclasses.dataclass(frozen=True)
class CompiledExchange:
    """One exchange of a compiled step, as every rank sees it: part of the SDFG (its JSON),
    so of a build's key."""

    uid: str  # names the exchange's state in the program and its nested SDFGs
    plan: str  # the name of its exchange plan (``convertible.PLANS[uid]`` is the plan)
    phase: str  # one of PHASES
    field_count: int
    tag_base: int  # its first MPI message tag
    transport: str  # the implementation name of its transport's expansion
    plan_arrays: tuple[str, ...]  # what that expansion reads of the plan: connectors _<name>
    halo: tuple[tuple[int, int], ...] = ()  # cartesian: (lo, hi) widths per decomposed axis
    directions: tuple[tuple[int, ...], ...] = ()  # cartesian: the direction offsets
    # lowering options of the MPI expansion of cartesian exchanges (``program.lower``):
    copy_maps: str = "direction"  # copies per direction, or a map per arena (arena_copies.py)
    in_place_min_bytes: int = 0  # runs of at least this many bytes go in place (0: never)
    # send arena -> the run-time flags under which producer stencils filled it (producer_fusion)
    prepacked: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def packed_by_producers(self, arena: str) -> tuple[str, ...]:
        """The flags under which producer stencils filled send arena ``arena``; () if none."""
        return dict(self.prepacked).get(arena, ())

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], *args: Any, **kwargs: Any) -> CompiledExchange:
        return cls(**{key: _frozen(value) for key, value in data.items()})


def _frozen(value: Any) -> Any:
    """JSON's lists as the tuples ``CompiledExchange`` holds."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


@properties.make_properties
class _Exchange(nodes.LibraryNode):
    """What both exchange nodes share: their description, and connectors made from it."""

    spec = properties.Property(
        dtype=CompiledExchange,
        allow_none=True,
        default=None,
        desc="what the exchange does (CompiledExchange)",
        to_json=lambda spec: None if spec is None else spec.to_json(),
        from_json=lambda data, *args, **kwargs: (
            None if data is None else CompiledExchange.from_json(data)
        ),
    )

    def __init__(self, name: str, spec: CompiledExchange | None = None, **kwargs: Any) -> None:
        inputs, outputs = [], []
        if spec is not None:  # None: DaCe making the node from JSON (connectors follow)
            plan = [f"_{a}" for a in spec.plan_arrays] + ["_comm"]
            inputs, outputs = phase_connectors(spec.phase, spec.field_count, plan)
        super().__init__(name, inputs=inputs, outputs=outputs, **kwargs)
        self.spec = spec


@dace.library.node
class HaloExchange(_Exchange):
    """Halo exchange of the fields of one cartesian exchange plan."""

    implementations: ClassVar[dict] = {}  # transports register theirs (transports.TRANSPORTS)
    default_implementation = None


@dace.library.node
class UnstructuredHaloExchange(_Exchange):
    """Halo exchange of the fields of one unstructured (ICON) dim.

    Axis 0 of every field is the dim's local index space (owned and halo cells, in the
    decomposition's local order).
    """

    implementations: ClassVar[dict] = {}  # transports register theirs (transports.TRANSPORTS)
    default_implementation = None


#: Every exchange node type: what ``lower_halo_exchanges`` expands.
EXCHANGE_NODES = (HaloExchange, UnstructuredHaloExchange)
