"""Loops in the order of the memory they walk: on a CPU, a map's innermost loop runs along the
axis its arrays hold with unit stride.

DaCe writes a map of parameters ``(p0, ..., pn)`` as loops nested in that order, ``pn``
innermost. GT4Py orders a stencil's map by its dimensions (``I``, then ``J``, ...), while
GT4Py's default fields hold ``I`` with unit stride: the innermost loop then jumps a whole
column per iteration, and the compiler neither vectorizes it nor keeps its cache lines. A
step knows at its build which stride of each argument is 1 (``Program`` builds per layout),
so each map is reordered here to put innermost the parameter that indexes the unit-stride
axis of most of the data it reads and writes. The iterations of a map are independent, so the
order changes nothing but speed; maps that accumulate (write-conflict resolution, whose sums
would be made in another order) keep theirs.
"""

from __future__ import annotations

from collections import Counter

import dace
from dace.sdfg import nodes


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
    votes: Counter[str] = Counter()
    for edge in state.scope_subgraph(entry, include_entry=True, include_exit=True).edges():
        memlet = edge.data
        if memlet.is_empty() or memlet.data not in state.sdfg.arrays:
            continue
        if memlet.wcr is not None:
            return False
        desc = state.sdfg.arrays[memlet.data]
        subset = memlet.subset
        if subset is None or len(subset) != len(desc.strides):
            continue
        for axis, stride in enumerate(desc.strides):
            if stride == 1 and desc.shape[axis] != 1:
                index = subset[axis][0] if isinstance(subset[axis], tuple) else subset[axis]
                used = {str(s) for s in getattr(index, "free_symbols", ())}
                votes.update(p for p in params if p in used)
    if not votes:
        return False
    inner = max(params, key=lambda p: (votes[p], p == params[-1]))
    if inner == params[-1] or votes[inner] == votes[params[-1]]:
        return False
    order = [i for i, p in enumerate(params) if p != inner] + [params.index(inner)]
    ranges = entry.map.range.ranges
    entry.map.params = [params[i] for i in order]
    entry.map.range = dace.subsets.Range([ranges[i] for i in order])
    return True
