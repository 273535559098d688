"""An ICON-like step on a partitioned triangle mesh: GT4Py neighbour-table stencils + exchanges.

    mpirun -n 3 python -m mpi4py examples/unstructured_step.py

The mesh is a periodic grid of ``NX`` x ``NY`` quads, each cut into two triangles: cells and
edges numbered by global id as in an unstructured ICON grid, with the neighbour tables ``E2C``
(the two cells of an edge) and ``C2E`` (the three edges of a cell). Each rank owns a contiguous
run of quads (what a space-filling-curve partition gives) with their cells and edges; its halo
holds exactly the cells and edges that the stencils of its owned elements read.

One step, compiled by ``@gh.program`` into one SDFG with the exchanges as graph nodes::

    exchange cells -> cells to edges (E2C) -> exchange edges -> edges to cells (C2E)

Each rank's neighbour tables have their own lengths. GT4Py describes them to DaCe with
symbolic sizes, ``NeighbourTables`` hands this rank's tables to the step as closure arrays
(``gt4py_halo.compiled.neighbour_tables``), so every rank parses the same SDFG and one build, on
rank 0, serves all.

The demo runs the compiled step on all ranks, gathers the owned cells on rank 0 and compares
them with the same steps run there alone, from Python; the exit status is 1 if they differ by
a single bit.
"""

import dataclasses
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# gt4py reads these when gt4py.next is first imported; the user's settings win
os.environ.setdefault("GT4PY_BUILD_CACHE_LIFETIME", "persistent")
os.environ.setdefault(
    "GT4PY_BUILD_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "gt4py")
)

import gt4py.next as gtx
import numpy as np
from gt4py.next.program_processors.runners.dace import run_dace_cpu
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo.compiled.neighbour_tables import NeighbourTables
from gt4py_halo.gt4py_support import compile_on_one_rank

Cell = gtx.Dimension("Cell", kind=gtx.DimensionKind.HORIZONTAL)
Edge = gtx.Dimension("Edge", kind=gtx.DimensionKind.HORIZONTAL)
E2CDim = gtx.Dimension("E2C", kind=gtx.DimensionKind.LOCAL)
C2EDim = gtx.Dimension("C2E", kind=gtx.DimensionKind.LOCAL)
E2C = gtx.FieldOffset("E2C", source=Cell, target=(Edge, E2CDim))
C2E = gtx.FieldOffset("C2E", source=Edge, target=(Cell, C2EDim))
CellField = gtx.Field[gtx.Dims[Cell], gtx.float64]
EdgeField = gtx.Field[gtx.Dims[Edge], gtx.float64]

NX, NY = 11, 7  # quads: 154 cells and 231 edges, split evenly over none of 2, 3 and 4 ranks
STEPS = 6


# Sums are written out left to right and scaled last: no multiply-add that one compiler run
# could fuse and another not, so every build of a stencil gives the same bits.
@gtx.field_operator
def cells_to_edges(c: CellField) -> EdgeField:
    return 0.5 * (c(E2C[0]) + c(E2C[1]))


@gtx.field_operator
def edges_to_cells(c: CellField, e: EdgeField) -> CellField:
    return 0.25 * (c + e(C2E[0]) + e(C2E[1]) + e(C2E[2]))


@gtx.program(backend=run_dace_cpu)
def interpolate_to_edges(c: CellField, e: EdgeField, e0: gtx.int32, e1: gtx.int32) -> None:
    cells_to_edges(c, out=e, domain={Edge: (e0, e1)})


@gtx.program(backend=run_dace_cpu)
def average_from_edges(
    c: CellField, e: EdgeField, c_new: CellField, c0: gtx.int32, c1: gtx.int32
) -> None:
    edges_to_cells(c, e, out=c_new, domain={Cell: (c0, c1)})


# --- the mesh -------------------------------------------------------------------------------


def global_tables(nx: int, ny: int) -> tuple[np.ndarray, np.ndarray]:
    """``(e2c, c2e)`` in global ids, for the periodic ``nx`` x ``ny`` quads cut in two.

    Quad ``q = j * nx + i`` holds the lower cell ``2q`` (corners (i, j), (i+1, j), (i, j+1)),
    the upper cell ``2q + 1``, and the edges ``3q`` (bottom), ``3q + 1`` (left) and ``3q + 2``
    (the diagonal between its two cells).
    """
    j, i = np.divmod(np.arange(nx * ny), nx)
    q = j * nx + i
    below, above = ((j - 1) % ny) * nx + i, ((j + 1) % ny) * nx + i
    left, right = j * nx + (i - 1) % nx, j * nx + (i + 1) % nx
    e2c = np.empty((3 * q.size, 2), np.int64)
    e2c[3 * q] = np.stack([2 * q, 2 * below + 1], axis=1)
    e2c[3 * q + 1] = np.stack([2 * q, 2 * left + 1], axis=1)
    e2c[3 * q + 2] = np.stack([2 * q, 2 * q + 1], axis=1)
    c2e = np.empty((2 * q.size, 3), np.int64)
    c2e[2 * q] = np.stack([3 * q, 3 * q + 1, 3 * q + 2], axis=1)
    c2e[2 * q + 1] = np.stack([3 * q + 2, 3 * above, 3 * right + 1], axis=1)
    return e2c, c2e


@dataclasses.dataclass
class LocalMesh:
    """One rank's part of the mesh: gids (owned first, then halo) and local neighbour tables.

    Table rows of halo elements may name neighbours this rank does not hold; those point to
    local index 0. The stencils compute owned elements only, whose neighbours are all local.
    """

    cells: tuple[np.ndarray, np.ndarray]  # owned gids, halo gids
    edges: tuple[np.ndarray, np.ndarray]
    e2c: np.ndarray  # (local edges, 2): local cell indices
    c2e: np.ndarray  # (local cells, 3): local edge indices

    @property
    def owned_cells(self) -> int:
        return len(self.cells[0])

    @property
    def owned_edges(self) -> int:
        return len(self.edges[0])

    def decomposition(self, comm: MPI.Comm) -> gh.UnstructuredDecomposition:
        return gh.UnstructuredDecomposition({"cell": self.cells, "edge": self.edges}, comm)

    def offset_provider(self) -> dict[str, Any]:
        return {
            "E2C": gtx.as_connectivity([Edge, E2CDim], Cell, self.e2c.astype(np.int32)),
            "C2E": gtx.as_connectivity([Cell, C2EDim], Edge, self.c2e.astype(np.int32)),
        }


def local_mesh(nx: int, ny: int, rank: int, size: int) -> LocalMesh:
    """Rank ``rank`` of ``size`` owns the ``rank``-th of ``size`` contiguous runs of quads."""
    e2c, c2e = global_tables(nx, ny)
    quads = np.array_split(np.arange(nx * ny), size)[rank]
    owned_cells = np.stack([2 * quads, 2 * quads + 1], axis=1).ravel()
    owned_edges = np.stack([3 * quads, 3 * quads + 1, 3 * quads + 2], axis=1).ravel()
    halo_cells = np.setdiff1d(e2c[owned_edges], owned_cells)  # read by owned edges
    halo_edges = np.setdiff1d(c2e[owned_cells], owned_edges)  # read by owned cells
    cells = np.concatenate([owned_cells, halo_cells])
    edges = np.concatenate([owned_edges, halo_edges])
    return LocalMesh(
        cells=(owned_cells, halo_cells),
        edges=(owned_edges, halo_edges),
        e2c=_to_local(e2c[edges], cells),
        c2e=_to_local(c2e[cells], edges),
    )


def _to_local(table: np.ndarray, gids: np.ndarray) -> np.ndarray:
    """Global neighbour ids as local indices into ``gids``; 0 where ``gids`` lacks them."""
    order = np.argsort(gids)
    local = order[np.minimum(np.searchsorted(gids, table, sorter=order), len(gids) - 1)]
    return np.where(gids[local] == table, local, 0)


def initial_fields(mesh: LocalMesh) -> tuple[Any, Any, Any]:
    """Local ``(c, e, c_new)``: exact values of the cell gids, zero elsewhere (halos too)."""
    gids = mesh.cells[0]
    c = np.zeros(mesh.owned_cells + len(mesh.cells[1]))
    c[: mesh.owned_cells] = ((7 * gids) % 13) / 8.0 + (gids // 24) % 3
    e = np.zeros(mesh.owned_edges + len(mesh.edges[1]))
    return gtx.as_field([Cell], c), gtx.as_field([Edge], e), gtx.as_field([Cell], np.zeros_like(c))


# --- the step -------------------------------------------------------------------------------


@dataclasses.dataclass
class Step:
    """One rank's step, compiled (``program``) and run from Python (``from_python``).

    Both forms take local ``(c, e, c_new)`` fields and write the new owned cells to ``c_new``;
    ``c``'s halo and ``e`` are refreshed on the way, ``c_new``'s halo is left as it was.
    """

    program: Any  # the @gh.program; takes (c, e, c_new, *bounds)
    bounds: tuple  # c0, c1, e0, e1: the owned cells and edges
    from_python: Callable[[Any, Any, Any], None]

    def compiled(self, c: Any, e: Any, c_new: Any) -> None:
        self.program(c, e, c_new, *self.bounds)


def make_step(mesh: LocalMesh, comm: MPI.Comm, backend: str | None = None) -> Step:
    """The step on this rank's ``mesh``; collective over ``comm`` (builds the exchange plans).
    ``backend``: the transport, compiled and from Python (default: the configuration)."""
    ex = gh.make_exchange(mesh.decomposition(comm), backend=backend)
    tables = NeighbourTables(mesh.offset_provider())
    to_edges = tables.bind(interpolate_to_edges)
    to_cells = tables.bind(average_from_edges)

    @gh.program(comm=comm)
    def step(c, e, c_new, c0, c1, e0, e1):  # types come from the arguments of a call
        ex.exchange(c, dim="cell")
        to_edges(c, e, e0, e1)
        ex.exchange(e, dim="edge")
        to_cells(c, e, c_new, c0, c1)

    zero, c1, e1 = gtx.int32(0), gtx.int32(mesh.owned_cells), gtx.int32(mesh.owned_edges)

    def from_python(c: Any, e: Any, c_new: Any) -> None:
        ex.exchange(c, dim="cell")
        interpolate_to_edges(c, e, zero, e1, offset_provider=tables.offset_provider)
        ex.exchange(e, dim="edge")
        average_from_edges(c, e, c_new, zero, c1, offset_provider=tables.offset_provider)

    return Step(step, (zero, c1, zero, e1), from_python)


def run(step: Callable[[Any, Any, Any], None], mesh: LocalMesh, steps: int) -> list[np.ndarray]:
    """``steps`` steps from the initial fields; the local ``c, e, c_new`` arrays at the end."""
    c, e, c_new = initial_fields(mesh)
    for _ in range(steps):
        step(c, e, c_new)
        c, c_new = c_new, c
    return [c.asnumpy(), e.asnumpy(), c_new.asnumpy()]


def gather_cells(mesh: LocalMesh, comm: MPI.Comm, c: np.ndarray) -> np.ndarray | None:
    """The owned cells of all ranks in global order, on rank 0 (``None`` elsewhere)."""
    parts = comm.gather((mesh.cells[0], c[: mesh.owned_cells]), root=0)
    if parts is None:
        return None
    cells = np.empty(sum(len(gids) for gids, _ in parts))
    for gids, values in parts:
        cells[gids] = values
    return cells


def compile_stencils(comm: MPI.Comm) -> None:
    """Compile both GT4Py programs on rank 0 of ``comm``; the others load them from the cache.

    A call on a tiny mesh compiles them: programs are compiled for field types and table
    types, not sizes, so every rank's part of any mesh reuses them.
    """
    mesh = local_mesh(2, 2, 0, 1)
    tables = mesh.offset_provider()

    def compile_both() -> None:
        c, e, c_new = initial_fields(mesh)
        zero, c1, e1 = gtx.int32(0), gtx.int32(mesh.owned_cells), gtx.int32(mesh.owned_edges)
        interpolate_to_edges(c, e, zero, e1, offset_provider=tables)
        average_from_edges(c, e, c_new, zero, c1, offset_provider=tables)

    compile_on_one_rank(comm, compile_both)


def main() -> int:
    """The demo; returns the exit status, the same on every rank."""
    comm = MPI.COMM_WORLD
    compile_stencils(comm)
    mesh = local_mesh(NX, NY, comm.rank, comm.size)
    step = make_step(mesh, comm)
    t0 = time.perf_counter()
    step.compiled(*initial_fields(mesh))  # the first call compiles the step (rank 0) or loads it
    ready_s = time.perf_counter() - t0
    c = run(step.compiled, mesh, STEPS)[0]
    cells = gather_cells(mesh, comm, c)
    equal = None
    if comm.rank == 0:
        alone = local_mesh(NX, NY, 0, 1)
        reference = run(make_step(alone, MPI.COMM_SELF).from_python, alone, STEPS)[0]
        equal = bool(np.array_equal(cells, reference))
        print(
            f"{NX}x{NY} quads ({2 * NX * NY} cells, {3 * NX * NY} edges), {STEPS} steps, "
            f"{comm.size} rank(s); step compiled and loaded in {ready_s:.1f} s"
        )
        print(
            "gathered cells equal the single-rank result bit for bit"
            if equal
            else "MISMATCH: gathered cells differ from the single-rank result"
        )
    return 0 if comm.bcast(equal, root=0) else 1


if __name__ == "__main__":
    sys.exit(main())
