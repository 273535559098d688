"""Per-exchange time of ICON4Py's own exchange runtime against gt4py_halo's ICON4Py adapter.

On a periodic triangulated torus cut by ICON4Py's METIS decomposer and halo constructor
(``examples/icon4py_torus.py``), one field of cells, edges or vertices, with or without
levels, exchanged the way ICON4Py does (``runtime.exchange(dim, field, stream=BLOCK)``) by:

- ``icon4py-ghex``: ICON4Py's ``GHexMultiNodeExchange`` (pyghex from Python);
- ``ours-mpi``, ``ours-ghex``, ``ours-shm``: ``gt4py_halo.icon4py.create_exchange`` over each
  transport;
- ``compiled-mpi``, ``compiled-shm``: a ``@gh.program`` holding the exchange alone (along the
  dim, on the adapter's decomposition), lowered with each transport's expansion, called from
  Python per exchange: what an ICON4Py step compiled with its exchanges does per exchange.

Every field lives in the node's shared memory (``gh.shared_allocator``: the ``shm`` transport
copies from the neighbours' fields there), the same memory for all implementations. Every
implementation is first checked to write the owners' values into every halo entry.
Timing interleaves the implementations as ``benchmarks/runtime_exchange.py`` does (its
``interleaved_samples``): the slowest rank's time per sample, medians over samples.

Run (2 ranks):  mpirun -n 2 python -m mpi4py benchmarks/icon4py_exchange.py
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from icon4py.model.common import dimension as dims
from icon4py.model.common.decomposition import definitions
from icon4py.model.common.decomposition import mpi_decomposition as icon_mpi
from mpi4py import MPI
from runtime_exchange import fmt_time, interleaved_samples, time_batch

import gt4py_halo as gh
from gt4py_halo import icon4py as gh_icon4py

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import icon4py_torus

IMPLEMENTATIONS = (
    "icon4py-ghex",
    "ours-mpi",
    "ours-ghex",
    "ours-shm",
    "compiled-mpi",
    "compiled-shm",
)
DIMS = {"cells": dims.CellDim, "edges": dims.EdgeDim, "vertices": dims.VertexDim}


class Compiled:
    """A compiled exchange of one field along a dim, per dim (``exchange(dim, field)``, the
    call of ICON4Py's runtimes; ``stream`` ignored: host fields)."""

    def __init__(self, decomposition: gh.UnstructuredDecomposition, backend: str) -> None:
        ex = gh.make_exchange(decomposition, backend=backend)
        self.programs = {dim: _program(ex, dim.value) for dim in DIMS.values()}

    def exchange(self, dim, field, stream=None) -> None:
        self.programs[dim](field)


def _program(ex: gh.Exchange, name: str):
    @gh.program(comm=ex.decomposition.comm)
    def exchange_one(a):
        ex.exchange(a, dim=name)

    return exchange_one


def runtimes(props, info, decomposition, impls: Sequence[str]) -> dict[str, Any]:
    """The implementations ``impls``; the compiled ones on ``decomposition`` (the ICON4Py
    adapter's of ``info``)."""
    made: dict[str, Any] = {}
    for name in impls:
        kind, backend = name.split("-")
        if name == "icon4py-ghex":
            made[name] = icon_mpi.GHexMultiNodeExchange(props, info)
        elif kind == "ours":
            made[name] = gh_icon4py.create_exchange(props, info, backend=backend)
        else:
            made[name] = Compiled(decomposition, backend)
    return made


def field(info, dim, levels: int, pool) -> np.ndarray:
    """Owned entries at their gid's value, halo entries at -1; in ``pool``."""
    gids = info.global_index(dim).astype(np.float64)
    values = gids if levels == 0 else gids[:, None] + np.arange(levels) / levels
    array = pool.empty(values.shape)
    array[...] = np.where(info.owner_mask(dim).reshape(-1, *[1] * (levels > 0)), values, -1.0)
    return array


def shared_pool(decomposition, levels: Sequence[int], impls: Sequence[str]):
    """The node's shared memory the fields are cut from: room for a field of each dim and
    level count per implementation, and one more (collective)."""
    entries = sum(decomposition.local_size(dim.value) for dim in DIMS.values())
    nbytes = (len(impls) + 1) * entries * 8 * sum(max(1, n) for n in levels) + (1 << 20)
    return gh.shared_allocator(decomposition, nbytes)


def verify(runtime, info, dim, levels: int, name: str, pool) -> None:
    array = field(info, dim, levels, pool)
    runtime.exchange(dim, array, stream=definitions.BLOCK)
    gids = info.global_index(dim).astype(np.float64)
    expected = gids if levels == 0 else gids[:, None] + np.arange(levels) / levels
    if not np.array_equal(array, expected):
        raise AssertionError(f"{name}: wrong halos on rank {MPI.COMM_WORLD.rank}")


def run_case(made: dict, info, dim_name: str, levels: int, repeats: int, sample_s: float, pool):
    comm = MPI.COMM_WORLD
    dim = DIMS[dim_name]
    for name, runtime in made.items():
        verify(runtime, info, dim, levels, name, pool)
    arrays = {name: field(info, dim, levels, pool) for name in made}
    runs: dict[str, Callable[[], None]] = {
        name: (lambda r=runtime, a=arrays[name]: r.exchange(dim, a, stream=definitions.BLOCK))
        for name, runtime in made.items()
    }
    for run in runs.values():
        for _ in range(5):
            run()
    first = next(iter(runs.values()))
    probe = comm.allreduce(float(np.median([time_batch(first, 1) for _ in range(7)])), MPI.MAX)
    batch = max(1, min(1000, round(sample_s / probe)))
    return batch, interleaved_samples(comm, runs, dict.fromkeys(runs, batch), repeats)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torus", default="16x12,64x48", help="torus sizes, NXxNY, commas")
    parser.add_argument("--levels", default="0,80", help="level counts (0: 1-D fields)")
    parser.add_argument("--repeats", type=int, default=100, help="samples per implementation")
    parser.add_argument("--sample-ms", type=float, default=2.0, help="duration of one sample")
    parser.add_argument("--impls", default=",".join(IMPLEMENTATIONS))
    args = parser.parse_args(argv)
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    props = definitions.get_process_properties(definitions.get_runtype(with_mpi=True))
    comm = props.comm
    base = impls[0]
    lines = [
        f"| torus | field | entries (rank 0) | batch | {' | '.join(impls)} |",
        "|---|---|---|---|" + "---|" * len(impls),
    ]
    started = time.perf_counter()
    for torus in args.torus.split(","):
        nx, ny = (int(n) for n in torus.split("x"))
        info = icon4py_torus.decomposition_info(nx, ny, props)
        decomposition = gh_icon4py.create_exchange(props, info, backend="mpi").decomposition
        made = runtimes(props, info, decomposition, impls)
        level_counts = [int(n) for n in args.levels.split(",")]
        pool = shared_pool(decomposition, level_counts, impls)
        for dim_name, dim in DIMS.items():
            for levels in level_counts:
                batch, samples = run_case(
                    made, info, dim_name, levels, args.repeats, args.sample_ms * 1e-3, pool
                )
                median = {n: float(np.median(s)) for n, s in samples.items()}
                cells = [
                    fmt_time(median[n])
                    + ("" if n == base else f" ({median[n] / median[base]:.2f}x)")
                    for n in impls
                ]
                what = dim_name + ("" if levels == 0 else f" x {levels} levels")
                entries = len(info.global_index(dim))
                lines.append(
                    f"| {torus} | {what} | {entries} | {batch} | " + " | ".join(cells) + " |"
                )
                if comm.rank == 0:
                    print(
                        f"# {torus} {what} ({time.perf_counter() - started:.0f} s)", file=sys.stderr
                    )
    if comm.rank == 0:
        print(
            f"{datetime.date.today()}, {comm.size} ranks on {platform.node()} "
            f"({MPI.Get_library_version().splitlines()[0].strip()}), repeats {args.repeats}, "
            f"sample ~{args.sample_ms} ms; median per exchange, ratio to {base}\n"
        )
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
