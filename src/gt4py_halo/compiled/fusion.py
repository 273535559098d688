"""Fusion of the lowered exchanges' copy maps: fewer loops on a CPU, fewer kernels on a GPU.

The expansions write one pack, unpack or self-copy map per field group and direction, each
in the fields' own index space, and record what each copies (``Lowered.copy_maps``); a group
(fields of one shape and dtype) is copied by one map from the start. Groups of the same shape
but different dtypes have maps of the same ranges (``Program`` gives arguments of one shape
the same shape symbols), so DaCe's ``MapFusionHorizontal`` merges them: one loop nest, or one
GPU kernel, per direction and shape.

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
    """Which copy maps were fused into one (``fused``: ``(uid, kind, direction) -> labels``),
    which send arenas the stencils producing their fields fill (``producers``: arena ->
    labels of the stencils' maps, ``producer_fusion.py``), and what every copy map the
    expansions wrote copies (``copy_maps``: label -> ``CopyMap``)."""

    fused: dict[tuple[str, str, int], list[str]] = dataclasses.field(default_factory=dict)
    producers: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    copy_maps: dict[str, CopyMap] = dataclasses.field(default_factory=dict)

    def __str__(self) -> str:
        parts = [
            f"{uid} {kind} direction {k}: {' + '.join(labels)}"
            for (uid, kind, k), labels in sorted(self.fused.items())
        ]
        parts += [f"{arena} packed by {', '.join(maps)}" for arena, maps in self.producers.items()]
        return "; ".join(parts) or "no exchange copy maps fused"


def fuse_exchange_maps(sdfg: dace.SDFG, copy_maps: dict[str, CopyMap]) -> FusionReport:
    """Fuse, per state, the pack (unpack) maps of one exchange and one direction;
    ``copy_maps``: what the expansions recorded (``Lowered.copy_maps``)."""
    report = FusionReport(copy_maps=dict(copy_maps))
    states = [state for graph in sdfg.all_sdfgs_recursive() for state in graph.all_states()]
    for state in states:
        groups: dict[CopyMap, list[dace.nodes.MapEntry]] = defaultdict(list)
        for node in state.nodes():
            if isinstance(node, dace.nodes.MapEntry) and state.entry_node(node) is None:
                key = copy_maps.get(node.map.label)
                if key is not None:
                    groups[key].append(node)
        for key, entries in groups.items():
            first, labels = entries[0], [entries[0].map.label]
            for other in entries[1:]:
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
                if fusion.can_be_applied(state, 0, state.sdfg):
                    label = other.map.label
                    fusion.apply(state, state.sdfg)
                    labels.append(label)
            if len(labels) > 1:
                first.map.label = labels[0]  # as the expansion named it
                report.fused[(key.uid, key.kind, key.direction)] = labels
    log.debug("%s: %s", sdfg.name, report)
    return report
