"""ICON4Py's own ``Diffusion`` granule on a distributed torus, its halos exchanged by gt4py_halo.

    mpirun -n 2 python -m mpi4py examples/icon4py_diffusion.py [--steps 3]

The switch an ICON4Py user makes is one line: where the model made its exchange runtime with
``definitions.create_exchange(props, decomposition_info)``, it calls
``gt4py_halo.icon4py.create_exchange(props, decomposition_info)`` instead. Nothing else of
ICON4Py changes: ``Diffusion`` calls the runtime's ``exchange``, ``__call__`` and
``create_halo_exchange_wait`` as it always does.

The grid is the periodic triangulated torus of ``icon4py_torus.py`` (``NX`` x ``NY`` quads,
``NLEV`` levels), cut by ICON4Py's own METIS decomposer and halo constructor; each rank's
``IconGrid`` is built the way ICON4Py's ``GridManager`` builds it from a grid file (local
neighbour tables, derived tables, domain bounds from the decomposition). Geometry and
interpolation coefficients are those of a flat torus of equilateral triangles; the initial
state is a sheared wind with noise. Every input is computed on the whole grid and sliced per
rank, so any rank count sees the same problem.

The granule runs a few steps with each exchange runtime (gt4py_halo over each installed
transport, and ICON4Py's own ``GHexMultiNodeExchange`` where GHEX is installed); then:

- every output on every rank, halos included, must be identical bit for bit to what ICON4Py's
  own exchange gives;
- the owned points, gathered on rank 0, must be identical bit for bit to the granule run there
  alone on the whole grid (ICON4Py's ``SingleNodeExchange``).

The exit status is 1 if any differs. The first run compiles ICON4Py's 12 diffusion programs for
each rank's grid and for the whole grid (minutes here); GT4Py's persistent cache
(``.cache/gt4py`` unless ``GT4PY_BUILD_CACHE_DIR`` says otherwise) makes later runs start in
seconds.
"""

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# gt4py reads these when gt4py.next is first imported; the user's settings win
os.environ.setdefault("GT4PY_BUILD_CACHE_LIFETIME", "persistent")
os.environ.setdefault(
    "GT4PY_BUILD_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "gt4py")
)

import gt4py.next as gtx
import numpy as np
from icon4py.model.atmosphere.diffusion import diffusion, diffusion_states
from icon4py.model.common import dimension as dims
from icon4py.model.common.decomposition import definitions, halo, mpi_decomposition
from icon4py.model.common.grid import base, grid_manager, grid_refinement, icon
from icon4py.model.common.grid import states as grid_states
from icon4py.model.common.grid import vertical as v_grid
from icon4py.model.common.states import prognostic_state
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo import icon4py as gh_icon4py
from gt4py_halo.gt4py_support import use_compile_threads

sys.path.insert(0, str(Path(__file__).resolve().parent))
import icon4py_torus

NX, NY, NLEV = 12, 8, 10
L, DTIME = 10_000.0, 10.0  # edge length [m], time step [s]
# the Backend object: ICON4Py 0.4.1's own "gtfn_cpu" descriptor calls a factory gt4py 1.2.3 lacks
BACKEND = gtx.gtfn_cpu
S3 = np.sqrt(3.0)
OFFSETS = (dims.C2E2C, dims.E2C, dims.C2E, dims.C2V, dims.V2C, dims.V2E, dims.E2V)
CELL_OUTPUTS = ("w", "theta_v", "exner", "div_ic", "hdef_ic", "dwdx", "dwdy")
PROGNOSTIC = ("vn", "w", "theta_v", "exner")
# the Smagorinsky shear of both wind components: the granule also computes dwdx and dwdy
SHEAR = diffusion.TurbulenceShearForcingType.VERTICAL_HORIZONTAL_OF_HORIZONTAL_VERTICAL_WIND


def geometry(t: dict[str, np.ndarray]) -> dict[str, Any]:
    """A flat torus of equilateral triangles of side ``L``: vertex (i, j) at
    L * (i - j/2, j * sqrt(3)/2). Normals, orientations, areas and the interpolation
    coefficients ICON computes for it (divergence, nabla2, gradient, RBF vector reconstruction
    at vertices), exact for constant and linear fields."""
    e2c, c2e, v2e = t["E2C"], t["C2E"], t["V2E"]
    kind = np.arange(len(e2c)) % 3
    along = np.array([[1.0, 0.0], [-0.5, S3 / 2], [0.5, S3 / 2]])  # E2V[0] -> E2V[1]
    turned = np.stack([along[:, 1], -along[:, 0]], axis=1)
    sign = np.where(e2c[:, 0] % 2 == 0, 1.0, -1.0) * np.array([1.0, 1.0, -1.0])[kind]
    normal = sign[:, None] * turned[kind]  # primal normal, from E2C[0] to E2C[1]
    tangent = np.stack([-normal[:, 1], normal[:, 0]], axis=1)
    area, dual = S3 / 4 * L**2, L / S3
    orientation = np.where(e2c[c2e, 0] == np.arange(len(c2e))[:, None], 1.0, -1.0)
    div = L * orientation / area
    half = [0.5 * div * normal[c2e, c] for c in (0, 1)]
    n2s = L / (dual * area)
    return {
        "normal": normal,
        "tangent": tangent,
        "tangent_orientation": np.sign((tangent * along[kind]).sum(1)),
        "area": area,
        "dual": dual,
        "geofac_div": div,
        "geofac_n2s": np.hstack([np.full((len(c2e), 1), -3 * n2s), np.full((len(c2e), 3), n2s)]),
        "geofac_grg": [np.hstack([h.sum(1, keepdims=True), h]) for h in half],
        "rbf": [normal[v2e, 0] / 3, normal[v2e, 1] / 3],
    }


def initial_state(t: dict[str, np.ndarray], g: dict[str, Any]) -> dict[str, np.ndarray]:
    """A wind sheared along j, with noise, on the whole grid (the same on every rank)."""
    rng = np.random.default_rng(0)
    j = (np.arange(len(t["E2C"])) // 3) // NX
    cells = len(t["C2E"])
    vn = 10 * np.sin(2 * np.pi * j / NY)[:, None] * g["normal"][:, :1] * np.linspace(1, 1.5, NLEV)
    return {
        "vn": vn + 5 * rng.standard_normal(vn.shape),
        "theta_v": 300 + rng.standard_normal((cells, NLEV)),
        "exner": 0.9 + 1e-3 * rng.standard_normal((cells, NLEV)),
        "w": 0.1 * rng.standard_normal((cells, NLEV + 1)),
    }


def local_grid(t: dict[str, np.ndarray], info: definitions.DecompositionInfo) -> icon.IconGrid:
    """This rank's ``IconGrid``, made as ICON4Py's ``GridManager`` makes it from a grid file."""
    tables = {
        o: halo.global_to_local(
            info.global_index(o.source), t[o.value][info.global_index(o.target[0])]
        )
        for o in OFFSETS
    }
    tables.update(grid_manager._get_derived_connectivities(tables))  # E2C2V, C2E2CO, ...
    refinement = {  # zeros: a global grid, no lateral boundary or nudging zone
        d: gtx.as_field((d,), np.zeros(info.global_index(d).size, np.int32))
        for d in dims.horizontal_dims()
    }
    start, end = icon.get_start_and_end_index(
        functools.partial(
            grid_refinement.compute_domain_bounds,
            refinement_fields=refinement,
            decomposition_info=info,
        )
    )
    config = base.GridConfig(
        horizontal_config=info.get_horizontal_size(),
        vertical_size=NLEV,
        limited_area=False,
        distributed=True,  # on one rank too: the same programs, built for other bounds
        keep_skip_values=False,
    )
    return icon.icon_grid(
        id_=f"torus{NX}x{NY}",
        allocator=BACKEND,
        config=config,
        neighbor_tables=tables,
        start_index=start,
        end_index=end,
        grid_params=icon.GridParams(
            icon.TorusParams(domain_length=NX * L, domain_height=NY * L * S3 / 2)
        ),
        refinement_control=refinement,
    )


def granule(
    grid: icon.IconGrid,
    g: dict[str, Any],
    info: definitions.DecompositionInfo,
    exchange: definitions.ExchangeRuntime,
) -> diffusion.Diffusion:
    """ICON4Py's ``Diffusion`` on this rank's grid, its inputs sliced from the whole grid's."""
    c, e, v = (info.global_index(d) for d in (dims.CellDim, dims.EdgeDim, dims.VertexDim))
    field = functools.partial(gtx.as_field, allocator=BACKEND)
    cells, edges = c.size, e.size
    corners = (dims.EdgeDim, dims.E2C2VDim)
    edge_params = grid_states.EdgeParams(
        tangent_orientation=field((dims.EdgeDim,), g["tangent_orientation"][e]),
        inverse_primal_edge_lengths=field((dims.EdgeDim,), np.full(edges, 1 / L)),
        inverse_dual_edge_lengths=field((dims.EdgeDim,), np.full(edges, 1 / g["dual"])),
        inverse_vertex_vertex_lengths=field((dims.EdgeDim,), np.full(edges, 1 / (S3 * L))),
        primal_normal_vert_x=field(corners, np.repeat(g["normal"][e, :1], 4, 1)),
        primal_normal_vert_y=field(corners, np.repeat(g["normal"][e, 1:], 4, 1)),
        dual_normal_vert_x=field(corners, np.repeat(g["tangent"][e, :1], 4, 1)),
        dual_normal_vert_y=field(corners, np.repeat(g["tangent"][e, 1:], 4, 1)),
        edge_areas=field((dims.EdgeDim,), np.full(edges, L * g["dual"])),
    )
    interpolation = diffusion_states.DiffusionInterpolationState(
        e_bln_c_s=field((dims.CellDim, dims.C2EDim), np.full((cells, 3), 1 / 3)),
        rbf_coeff_1=field((dims.VertexDim, dims.V2EDim), g["rbf"][0][v]),
        rbf_coeff_2=field((dims.VertexDim, dims.V2EDim), g["rbf"][1][v]),
        geofac_div=field((dims.CellDim, dims.C2EDim), g["geofac_div"][c]),
        geofac_n2s=field((dims.CellDim, dims.C2E2CODim), g["geofac_n2s"][c]),
        geofac_grg_x=field((dims.CellDim, dims.C2E2CODim), g["geofac_grg"][0][c]),
        geofac_grg_y=field((dims.CellDim, dims.C2E2CODim), g["geofac_grg"][1][c]),
        nudgecoeff_e=field((dims.EdgeDim,), np.zeros(edges)),
    )
    metric = diffusion_states.DiffusionMetricState(
        theta_ref_mc=field((dims.CellDim, dims.KDim), np.full((cells, NLEV), 300.0)),
        wgtfac_c=field((dims.CellDim, dims.KDim), np.full((cells, NLEV + 1), 0.5)),
        # read only by the truly horizontal temperature diffusion, switched off below
        zd_vertoffset=field(
            (dims.CellDim, dims.C2E2CDim, dims.KDim), np.zeros((cells, 3, NLEV), np.int32)
        ),
        zd_diffcoef=field((dims.CellDim, dims.KDim), np.zeros((cells, NLEV))),
        zd_intcoef=field((dims.CellDim, dims.C2E2CDim, dims.KDim), np.zeros((cells, 3, NLEV))),
    )
    vertical = v_grid.VerticalGridConfig(num_levels=NLEV, rayleigh_damping_height=12_500.0)
    config = diffusion.DiffusionConfig(apply_zdiffusion_t=False, shear_type=SHEAR, ndyn_substeps=1)
    return diffusion.Diffusion(  # compiles (or loads) ICON4Py's 12 diffusion programs
        grid=grid,
        config=config,
        params=diffusion.DiffusionParams(config),
        vertical_grid=v_grid.VerticalGrid(vertical, *v_grid.get_vct_a_and_vct_b(vertical, BACKEND)),
        metric_state=metric,
        interpolation_state=interpolation,
        edge_params=edge_params,
        cell_params=grid_states.CellParams(area=field((dims.CellDim,), np.full(cells, g["area"]))),
        backend=BACKEND,
        exchange=exchange,
    )


def run(
    t: dict[str, np.ndarray],
    g: dict[str, Any],
    state: dict[str, np.ndarray],
    info: definitions.DecompositionInfo,
    exchange: definitions.ExchangeRuntime,
    steps: int,
) -> dict[str, np.ndarray]:
    """``steps`` diffusion steps from ``state`` with ``exchange``; every output, this rank's
    whole local arrays (halos included)."""
    grid = local_grid(t, info)
    model = granule(grid, g, info, exchange)
    c, e = (info.global_index(d) for d in (dims.CellDim, dims.EdgeDim))
    prognostics = prognostic_state.PrognosticState(
        rho=gtx.as_field((dims.CellDim, dims.KDim), np.ones((c.size, NLEV)), allocator=BACKEND),
        **{
            name: gtx.as_field(
                (dims.EdgeDim if name == "vn" else dims.CellDim, dims.KDim),
                state[name][e if name == "vn" else c],
                allocator=BACKEND,
            )
            for name in PROGNOSTIC
        },
    )
    diagnostics = diffusion_states.initialize_diffusion_diagnostic_state(grid, BACKEND)
    for _ in range(steps):
        model.run(diagnostics, prognostics, DTIME)
    outputs = {name: getattr(prognostics, name).asnumpy() for name in PROGNOSTIC}
    outputs |= {name: getattr(diagnostics, name).asnumpy() for name in CELL_OUTPUTS[3:]}
    return outputs


def owned(outputs: dict[str, np.ndarray], info: definitions.DecompositionInfo) -> dict:
    """The owned points of each output, and their global ids."""
    found = {}
    for name, values in outputs.items():
        dim = dims.EdgeDim if name == "vn" else dims.CellDim
        mask = info.owner_mask(dim)
        found[name] = (info.global_index(dim)[mask], values[mask])
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    use_compile_threads()  # before anything compiles: GT4Py's process pool fails under mpirun
    # as ICON4Py's drivers do: this initializes MPI (ICON4Py turns mpi4py's own start off)
    props = definitions.get_process_properties(definitions.get_runtype(with_mpi=True))
    comm = props.comm
    t = icon4py_torus.tables(NX, NY)
    g = geometry(t)
    state = initial_state(t, g)
    info = icon4py_torus.cut(t, props)  # ICON4Py's METIS decomposer and halo constructor
    say = print if comm.rank == 0 else lambda *_: None
    say(
        f"ICON4Py Diffusion on a {NX}x{NY} torus ({len(t['C2E'])} cells, {NLEV} levels), "
        f"{comm.size} rank(s), {args.steps} steps"
    )

    runtimes: dict[str, Any] = {}
    for transport in ("mpi", "ghex"):
        try:
            runtimes[f"gt4py_halo ({transport})"] = gh_icon4py.create_exchange(
                props, info, backend=transport
            )
        except gh.BackendUnavailableError as error:  # raised on every rank alike
            say(f"gt4py_halo ({transport}): not run, {error}")
    if mpi_decomposition.ghex is not None:
        runtimes["ICON4Py's own GHEX exchange"] = mpi_decomposition.GHexMultiNodeExchange(
            props, info
        )
    else:
        say(f"ICON4Py's own GHEX exchange: not run ({mpi_decomposition.import_error})")
    results = {
        name: run(t, g, state, info, runtime, args.steps) for name, runtime in runtimes.items()
    }
    own = results.get("ICON4Py's own GHEX exchange")
    same_as_icon4py = {
        name: own is None or all(np.array_equal(out[k], own[k]) for k in out)
        for name, out in results.items()
    }
    same_as_icon4py = {  # every rank's outputs, halos included
        name: comm.allreduce(same, op=MPI.LAND) for name, same in same_as_icon4py.items()
    }
    gathered = {name: comm.gather(owned(out, info), root=0) for name, out in results.items()}

    same_as_one_rank = {}
    if comm.rank == 0:
        whole = halo.NoHalos(
            base.HorizontalGridSize(
                num_vertices=NX * NY, num_edges=len(t["E2C"]), num_cells=len(t["C2E"])
            )
        )(np.zeros(len(t["C2E"]), np.int32))
        alone = run(t, g, state, whole, definitions.SingleNodeExchange(), args.steps)
        for name, ranks in gathered.items():
            same_as_one_rank[name] = all(
                np.array_equal(values, alone[k][gids])
                for per_rank in ranks
                for k, (gids, values) in per_rank.items()
            )
        say("\n| exchange runtime | outputs vs ICON4Py's own, all ranks | owned vs 1 rank |")
        say("|---|---|---|")
        for name, out in results.items():
            icon = "(reference)" if out is own else _verdict(same_as_icon4py[name])
            say(f"| {name} | {icon} | {_verdict(same_as_one_rank[name])} |")
        say(f"outputs compared: {', '.join(results[next(iter(results))])}")
    ok = comm.bcast(all(same_as_icon4py.values()) and all(same_as_one_rank.values()), root=0)
    return 0 if ok else 1


def _verdict(same: bool) -> str:
    return "identical bit for bit" if same else "DIFFERENT"


if __name__ == "__main__":
    sys.exit(main())
