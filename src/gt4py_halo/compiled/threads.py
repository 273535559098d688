"""Steps built for one OpenMP thread per rank: their maps run as plain loops.

GT4Py's CPU stencils compile to OpenMP parallel loops. With one thread per rank (MPI-only
runs, one rank per core: a common way to run a model on CPUs), each parallel region still
makes libgomp start a team and meet at its barrier, per stencil call, which on small blocks
costs more than the loop (docs/benchmarks.md, "One thread per rank"). A step whose ranks all
run one thread is built with every map sequential: the same loops in the same order, the same
bits, no region. The choice shapes the generated code, so the ranks make it together, at the
step's first build (``Program._meet``), from every rank's ``openmp_threads``: a step on ranks
of which one runs more threads keeps OpenMP everywhere. It holds for the step's later builds
(a process that changes its thread count afterwards runs them as built).
"""

from __future__ import annotations

import dace
from dace.sdfg import nodes

_PARALLEL = (dace.ScheduleType.CPU_Multicore, dace.ScheduleType.Default)


def run_sequentially(sdfg: dace.SDFG) -> int:
    """Make every CPU map of ``sdfg`` (nested SDFGs included) sequential; returns how many
    changed. ``Default`` maps too: DaCe makes the outermost ones parallel."""
    changed = 0
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.MapEntry) and node.map.schedule in _PARALLEL:
            node.map.schedule = dace.ScheduleType.Sequential
            changed += 1
    return changed
