"""What ``Program._lower`` leaves of a CPU step: the graph a build hashes, saves and copies
(``graph.no_history``; docs/compiled_steps.md, "lower")."""

from __future__ import annotations

import dace
import numpy as np

import gt4py_halo as gh


def test_a_cpu_step_keeps_no_history_and_its_exchanges_as_functions() -> None:
    """DaCe's transformation history would hold a copy of the whole step from before its
    exchanges were expanded, which each hash and saved file writes out; the exchanges stay
    nested SDFGs of their own (C++ functions), which is why the step is not simplified again
    on a CPU."""
    d = gh.CartesianDecomposition((20, 9), halo=(2, 1), periodic=True)
    ex = gh.make_exchange(d, "mpi")

    @gh.program
    def step(a, b):
        ex.exchange(a, b)

    a = np.zeros(d.allocated_shape)
    sdfg = step.to_sdfg(a, a.copy())
    assert sdfg.orig_sdfg is None and not sdfg.transformation_hist
    nested = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.NestedSDFG)]
    exchanges = [n for n in nested if n.no_inline]
    assert exchanges, [n.sdfg.name for n in nested]
