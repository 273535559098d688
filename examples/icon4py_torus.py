"""A periodic triangulated torus in ICON's connectivity shapes, decomposed by ICON4Py itself.

``nx * ny`` vertices on a periodic grid; each quad ``(i, j)`` is cut along its diagonal into two
cells; each vertex starts three edges (along i, along j, the diagonal). So every cell has 3
edges, 3 vertices and 3 neighbour cells, every edge 2 cells, every vertex 6 cells and 6 edges,
as on ICON's sphere away from its pentagons. ``decomposition_info`` runs ICON4Py's own
``MetisDecomposer`` and ``IconLikeHaloConstructor`` on it: what an ICON4Py model gets.
"""

from __future__ import annotations

import numpy as np


def tables(nx: int, ny: int) -> dict[str, np.ndarray]:
    """The global neighbour tables ICON4Py's halo constructor reads (C2E2C, E2C, C2E, C2V,
    V2C, V2E) and E2V (from which ICON4Py derives E2C2V), for ``nx, ny >= 3``."""
    i, j = (a.ravel() for a in np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij"))

    def vertex(di: int, dj: int) -> np.ndarray:
        return (i + di) % nx + nx * ((j + dj) % ny)

    def edge(kind: int, di: int, dj: int) -> np.ndarray:  # kind 0: along i, 1: along j, 2: diagonal
        return 3 * vertex(di, dj) + kind

    quad = vertex(0, 0)
    lower, upper = 2 * quad, 2 * quad + 1
    cells = 2 * nx * ny
    c2v = np.empty((cells, 3), np.int32)
    c2e = np.empty((cells, 3), np.int32)
    c2v[lower] = np.stack([vertex(0, 0), vertex(1, 0), vertex(1, 1)], axis=1)
    c2v[upper] = np.stack([vertex(0, 0), vertex(1, 1), vertex(0, 1)], axis=1)
    c2e[lower] = np.stack([edge(0, 0, 0), edge(1, 1, 0), edge(2, 0, 0)], axis=1)
    c2e[upper] = np.stack([edge(2, 0, 0), edge(0, 0, 1), edge(1, 0, 0)], axis=1)
    e2c = _inverse(c2e, 3 * nx * ny, 2)
    v2c = _inverse(c2v, nx * ny, 6)
    e2v = np.empty((3 * nx * ny, 2), np.int32)
    for kind, (di, dj) in enumerate([(1, 0), (0, 1), (1, 1)]):
        e2v[edge(kind, 0, 0)] = np.stack([vertex(0, 0), vertex(di, dj)], axis=1)
    v2e = _inverse(e2v, nx * ny, 6)
    c2e2c = np.array(
        [next(c for c in e2c[e] if c != cell) for cell, row in enumerate(c2e) for e in row],
        np.int32,
    ).reshape(cells, 3)
    return {"C2E2C": c2e2c, "E2C": e2c, "C2E": c2e, "C2V": c2v, "V2C": v2c, "V2E": v2e, "E2V": e2v}


def _inverse(table: np.ndarray, size: int, width: int) -> np.ndarray:
    """For each target, the rows of ``table`` that list it, in row order."""
    rows = np.repeat(np.arange(len(table)), table.shape[1])
    order = np.argsort(table.ravel(), kind="stable")
    inverse = rows[order].reshape(size, width)
    return inverse.astype(np.int32)


def decomposition_info(nx: int, ny: int, process_props):
    """This rank's ICON4Py ``DecompositionInfo`` of the torus, cut by METIS (the same on
    every rank)."""
    return cut(tables(nx, ny), process_props)


def cut(connectivities: dict[str, np.ndarray], process_props):
    """This rank's ``DecompositionInfo`` of any grid given by its global tables (those of
    ``tables``), as an ICON4Py model makes it: METIS on C2E2C, then ICON's halo lines."""
    from icon4py.model.common.decomposition import decomposer, halo

    cell_to_rank = decomposer.MetisDecomposer()(connectivities["C2E2C"], process_props.comm_size)
    constructor = halo.IconLikeHaloConstructor(process_props, connectivities)
    return constructor(np.asarray(cell_to_rank))
