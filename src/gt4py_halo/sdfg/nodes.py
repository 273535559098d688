"""``HaloExchange``: a halo exchange as a DaCe library node.

The node says *what* happens: the halos of its fields are filled from their owners. Each field
is one read-write connector (``_f0``, ``_f1``, ...), so a stencil that writes a field before
the exchange, and one that reads it after, are ordered by data edges rather than by side
effects or state boundaries. How the bytes move is an expansion, chosen by name
(``implementation``, set from the exchange's transport): each transport registers its own
(``backends.TRANSPORTS``); the node knows none of them.

Everything a rank needs of its exchange plan that differs between ranks comes in through small
integer arrays: the communicator (``_comm``) and those its transport's expansion reads (the
expansion's ``PLAN_ARRAYS``, connectors ``_<name>``; ``convertible.py`` makes them): for MPI
the rank in each direction (``_peers``), for GHEX this rank's block of the global domain. The
node's properties (halo widths, directions, tags) are the same on every rank. So the code
generated for it is the same on every rank, built by one and loaded by all.

A split-phase exchange (``h = ex.start(v)`` ... ``h.finish()``) is a pair of nodes of the same
type and ``uid``: ``phase="start"`` packs and posts (reads the fields, writes a token),
``phase="finish"`` waits and unpacks (reads the token, reads and writes the fields). Lowering
gives the pair receive buffers of the enclosing SDFG (``split_phase.connect_pairs``), so the
messages the start posts are the ones the finish unpacks.
"""

from __future__ import annotations

from typing import ClassVar

import dace
import dace.library
from dace import properties
from dace.sdfg import nodes

from gt4py_halo.sdfg.phases import PHASES, phase_connectors

#: ``_peers[k]`` when direction ``k`` leads to the rank itself (a periodic axis not split over
#: ranks); other values: the neighbour's rank, or -1 (``NO_RANK``) beyond an open boundary.
SELF = -2


@dace.library.node
class HaloExchange(nodes.LibraryNode):
    """Blocking halo exchange of ``field_count`` fields of one cartesian exchange plan."""

    implementations: ClassVar[dict] = {}  # transports register theirs (backends.TRANSPORTS)
    default_implementation = None

    halo = properties.ListProperty(int, desc="(lo, hi) widths per decomposed axis, flattened")
    directions = properties.ListProperty(int, desc="exchange direction offsets, flattened")
    field_count = properties.Property(dtype=int, default=1, desc="number of fields")
    tag_base = properties.Property(dtype=int, default=0, desc="first message tag of this node")
    uid = properties.Property(dtype=str, default="halo", desc="names this exchange's state")
    phase = properties.Property(dtype=str, default="exchange", desc=f"one of {PHASES}")
    copy_maps = properties.Property(
        dtype=str,
        default="direction",
        desc="'direction': a copy map per direction; 'arena': one per arena (arena_copies.py)",
    )
    in_place_min_bytes = properties.Property(
        dtype=int,
        default=0,
        desc="contiguous runs of at least this many bytes are sent in place (0: never)",
    )
    prepacked = properties.DictProperty(
        key_type=str,
        value_type=str,
        desc="send arena -> run-time condition under which producer stencils filled it",
    )

    def __init__(
        self,
        name: str,
        halo: list[tuple[int, int]] | None = None,
        directions: list[tuple[int, ...]] | None = None,
        field_count: int = 1,
        tag_base: int = 0,
        uid: str = "halo",
        phase: str = "exchange",
        plan: tuple[str, ...] = ("peers",),
        **kwargs,
    ) -> None:
        connectors = [f"_{a}" for a in plan] + ["_comm"]
        inputs, outputs = phase_connectors(phase, field_count, connectors)
        super().__init__(name, inputs=inputs, outputs=outputs, **kwargs)
        self.halo = [w for side in halo or [] for w in side]
        self.directions = [o for d in directions or [] for o in d]
        self.field_count = field_count
        self.tag_base = tag_base
        self.uid = uid
        self.phase = phase

    @property
    def halo_widths(self) -> list[tuple[int, int]]:
        return [(self.halo[k], self.halo[k + 1]) for k in range(0, len(self.halo), 2)]

    @property
    def direction_offsets(self) -> list[tuple[int, ...]]:
        ndim = len(self.halo) // 2
        return [tuple(self.directions[k : k + ndim]) for k in range(0, len(self.directions), ndim)]


@dace.library.node
class UnstructuredHaloExchange(nodes.LibraryNode):
    """Blocking halo exchange of ``field_count`` fields of one unstructured (ICON) dim.

    Axis 0 of every field is the dim's local index space (owned, then halo cells). The plan
    comes in as run-time arrays (connectors ``_<name>`` for each of ``plan``, plus
    ``_comm``), those its transport's expansion reads (its ``PLAN_ARRAYS``): for MPI the
    neighbour ranks and per neighbour the local indices to send and to receive, for GHEX the
    gids in local order.
    """

    implementations: ClassVar[dict] = {}  # transports register theirs (backends.TRANSPORTS)
    default_implementation = None

    field_count = properties.Property(dtype=int, default=1, desc="number of fields")
    tag_base = properties.Property(dtype=int, default=0, desc="first message tag of this node")
    uid = properties.Property(dtype=str, default="halo", desc="names this exchange's state")
    phase = properties.Property(dtype=str, default="exchange", desc=f"one of {PHASES}")

    def __init__(
        self,
        name: str,
        field_count: int = 1,
        tag_base: int = 0,
        uid: str = "halo",
        phase: str = "exchange",
        plan: tuple[str, ...] = (),
        **kwargs,
    ) -> None:
        connectors = [f"_{a}" for a in plan] + ["_comm"]
        inputs, outputs = phase_connectors(phase, field_count, connectors)
        super().__init__(name, inputs=inputs, outputs=outputs, **kwargs)
        self.field_count = field_count
        self.tag_base = tag_base
        self.uid = uid
        self.phase = phase


#: Every exchange node type: what ``lower_halo_exchanges`` expands.
EXCHANGE_NODES = (HaloExchange, UnstructuredHaloExchange)
