"""Fusion of the lowered exchanges' copy maps: fewer loops on a CPU, fewer kernels on a GPU.

The expansions record what each copy map copies (``Lowered.copy_maps``). A cartesian
exchange on a GPU builds one map per direction and box range for all its field groups of
that shape (``ArenaLowering._add_copies``; on a CPU its copies are no maps, but calls of one
C++ function); an unstructured one gathers and scatters each field with a
map of its own over the neighbours' index lists (``gather_lowering.py``), and fields of one
shape have maps of the same ranges (``Program`` gives arguments of one shape the same shape
symbols), so DaCe's ``MapFusionHorizontal`` merges them here: one loop nest, or one GPU
kernel, per kind and shape.

``fuse_exchange_maps`` returns what it fused (``FusionReport``), and logs it at debug level
(logger ``gt4py_halo.compiled.fusion``); ``Program.fusion_report`` gives it for a step.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict

import dace
from dace.transformation.dataflow import MapFusionHorizontal

from gt4py_halo.compiled.lowered import CopyMap

log = logging.getLogger(__name__)


@dataclasses.dataclass
class FusionReport:
    """Which copy maps were fused into one (``fused``: the fused map's label -> the labels of
    the maps it holds, its own first), which send arenas the stencils producing their fields
    fill (``producers``: arena -> labels of the stencils' maps, ``producer_fusion.py``), and
    what every copy map the expansions wrote copies (``copy_maps``: label -> ``CopyMap``)."""

    fused: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    producers: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    copy_maps: dict[str, CopyMap] = dataclasses.field(default_factory=dict)

    def __str__(self) -> str:
        parts = [" + ".join(labels) for _, labels in sorted(self.fused.items())]
        parts += [f"{arena} packed by {', '.join(maps)}" for arena, maps in self.producers.items()]
        return "; ".join(parts) or "no exchange copy maps fused"


def fuse_exchange_maps(sdfg: dace.SDFG, copy_maps: dict[str, CopyMap]) -> FusionReport:
    """Fuse, per state, the copy maps of one exchange, kind and direction that have the same
    ranges (each into the first of its ranges); ``copy_maps``: what the expansions recorded
    (``Lowered.copy_maps``)."""
    report = FusionReport(copy_maps=dict(copy_maps))
    states = [state for graph in sdfg.all_sdfgs_recursive() for state in graph.all_states()]
    for state in states:
        groups: dict[CopyMap, list[dace.nodes.MapEntry]] = defaultdict(list)
        for node in state.nodes():
            if isinstance(node, dace.nodes.MapEntry) and state.entry_node(node) is None:
                key = copy_maps.get(node.map.label)
                if key is not None:
                    groups[key].append(node)
        for entries in groups.values():
            firsts: list[tuple[dace.nodes.MapEntry, list[str]]] = []
            for other in entries:
                for first, labels in firsts:
                    if _fused(state, first, other):
                        labels.append(other.map.label)
                        break
                else:
                    firsts.append((other, [other.map.label]))
            for first, labels in firsts:
                if len(labels) > 1:
                    first.map.label = labels[0]  # as the expansion named it
                    report.fused[labels[0]] = labels
    log.debug("%s: %s", sdfg.name, report)
    return report


def _fused(state: dace.SDFGState, first: dace.nodes.MapEntry, other: dace.nodes.MapEntry) -> bool:
    """Fuse ``other`` into ``first`` if DaCe can (maps of the same ranges); whether it did."""
    fusion = MapFusionHorizontal()
    fusion.setup_match(
        state.sdfg,
        state.parent_graph.cfg_id,
        state.block_id,
        {
            MapFusionHorizontal.first_parallel_map_entry: state.node_id(first),
            MapFusionHorizontal.second_parallel_map_entry: state.node_id(other),
        },
        0,
    )
    if not fusion.can_be_applied(state, 0, state.sdfg):
        return False
    fusion.apply(state, state.sdfg)
    return True
