"""What the expansions of the exchange nodes hand to the passes after them.

An expansion knows which of the maps it writes copy halos (and may fuse with their kind, see
``fusion.py``) and which of its tasklets must stay host code on a GPU (they call MPI or the
CUDA runtime, ``program.transform_for_gpu``). It records them here, by the labels it gave
them, instead of those passes recognizing its nodes by label patterns. ``lower_halo_exchanges``
makes one ``Lowered`` per step, passes it to every expansion and returns it.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class CopyMap:
    """What a copy map of a lowered exchange copies: maps of equal ``CopyMap`` in one state
    copy the same cells of fields of one shape, so they fuse."""

    uid: str  # the exchange
    kind: str  # "pack", "unpack" or "self"
    direction: int  # the direction's index (0 for all of an unstructured exchange)


@dataclasses.dataclass
class Lowered:
    """Filled by the expansions of one step: copy map label -> what it copies, the labels of
    tasklets that stay on the host, and (``lower_halo_exchanges``) the send arenas that
    producer stencils fill: arena -> labels of their maps."""

    copy_maps: dict[str, CopyMap] = dataclasses.field(default_factory=dict)
    host_tasklets: set[str] = dataclasses.field(default_factory=set)
    producers: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: the nested SDFGs the expansions made: name -> the exchange's uid (``shared_functions``)
    exchanges: dict[str, str] = dataclasses.field(default_factory=dict)

    def copy_map(self, entry: Any, copies: CopyMap) -> None:
        """Record the map of ``entry`` (a ``MapEntry``) as one that ``copies``."""
        self.copy_maps[entry.map.label] = copies

    def host_tasklet(self, label: str) -> str:
        """``label``, recorded as the label of a tasklet that stays host code."""
        self.host_tasklets.add(label)
        return label
