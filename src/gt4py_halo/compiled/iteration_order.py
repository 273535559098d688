"""Loops in the order of the memory they walk: on a CPU, a map's innermost loop runs along the
axis its arrays hold with unit stride.

DaCe writes a map of parameters ``(p0, ..., pn)`` as loops nested in that order, ``pn``
innermost. GT4Py orders a stencil's map by its dimensions (``I``, then ``J``, ...), while
GT4Py's default fields hold ``I`` with unit stride: the innermost loop then jumps a whole
column per iteration, and the compiler neither vectorizes it nor keeps its cache lines. A
step knows at its build which stride of each argument is 1 (``Program`` builds per layout),
so each map is reordered here to put innermost the parameter that indexes the unit-stride
axis of the data it reads and writes, and outermost the ones that index the axes farthest
from it (strides grow away from the unit-stride axis in C and Fortran order alike: GT4Py's
default 3-D fields hold ``K`` outermost). The iterations of a map are independent, so the
order changes nothing but speed; maps that accumulate (write-conflict resolution, whose sums
would be made in another order) keep theirs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import dace
from dace.sdfg import nodes


def unit_stride_axis(desc: Any) -> int | None:
    """The one axis ``desc`` holds with unit stride (the constant 1, of more than one
    element); ``None`` if none or several do."""
    units = [k for k, n in enumerate(desc.strides) if n == 1 and desc.shape[k] != 1]
    return units[0] if len(units) == 1 else None


def loop_order(desc: Any) -> list[int]:
    """The axes of ``desc`` as loops over it nest, outermost first: the unit-stride one
    innermost, the others by their distance from it, farthest outermost (the order
    ``order_maps_by_strides`` gives maps; the exchanges' copy tables on a CPU take it too);
    as they are if no axis has unit stride."""
    axes = list(range(len(desc.strides)))
    unit = unit_stride_axis(desc)
    return axes if unit is None else sorted(axes, key=lambda a: -abs(a - unit))


def order_maps_by_strides(sdfg: dace.SDFG) -> int:
    """Reorder the parameters of every map in ``sdfg`` (nested SDFGs included) so that the
    one indexing unit-stride axes is innermost; returns how many maps changed."""
    changed = 0
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.MapEntry) and len(node.map.params) > 1:
            changed += _reorder(node, state)
    return changed


def _reorder(entry: nodes.MapEntry, state: dace.SDFGState) -> bool:
    params = list(entry.map.params)
    distances: dict[str, Counter[int]] = {p: Counter() for p in params}
    for edge in state.scope_subgraph(entry, include_entry=True, include_exit=True).edges():
        memlet = edge.data
        if memlet.is_empty() or memlet.data not in state.sdfg.arrays:
            continue
        if memlet.wcr is not None:
            return False
        desc = state.sdfg.arrays[memlet.data]
        subset = memlet.subset
        unit = unit_stride_axis(desc)
        if subset is None or len(subset) != len(desc.strides) or unit is None:
            continue
        for axis in range(len(desc.strides)):
            index = subset[axis][0] if isinstance(subset[axis], tuple) else subset[axis]
            used = {str(s) for s in getattr(index, "free_symbols", ())}
            for p in params:
                if p in used:
                    distances[p][abs(axis - unit)] += 1
    # farthest from the unit-stride axis outermost (strides grow away from it: C order,
    # Fortran order); a parameter indexing no such array keeps its place among the outer ones
    far = max((d for c in distances.values() for d in c), default=0) + 1
    reach = {p: c.most_common(1)[0][0] if c else far for p, c in distances.items()}
    order = sorted(range(len(params)), key=lambda i: -reach[params[i]])
    if order == list(range(len(params))) or reach[params[order[-1]]] != 0:
        return False
    ranges = entry.map.range.ranges
    entry.map.params = [params[i] for i in order]
    entry.map.range = dace.subsets.Range([ranges[i] for i in order])
    return True
