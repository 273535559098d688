"""An unstructured GT4Py step (neighbour tables) with exchanges, compiled by ``@gh.program``.

The step of ``examples/unstructured_step.py`` (cells to edges through ``E2C``, edges to cells
through ``C2E``, each after an exchange) on a triangle mesh split into runs of uneven length:
compiled, with either transport, it must give the same bits as the same step run from Python
with the runtime exchange, halos included, and, gathered, as one rank alone (so the
transports agree bit for bit). Every rank's neighbour tables have
their own lengths, yet all ranks must parse the same SDFG (one build serves all).
"""

from pathlib import Path
from types import ModuleType

import dace
import numpy as np
import pytest
from conftest import calls_out_of_step, load_example
from mpi4py import MPI

from gt4py_halo.compiled.nodes import EXCHANGE_NODES

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "unstructured_step.py"
STEPS = 4


@pytest.fixture(scope="module")
def unstructured() -> ModuleType:
    """The example's module, its GT4Py programs compiled on rank 0 and loaded by all."""
    module = load_example(EXAMPLE)
    module.compile_stencils(MPI.COMM_WORLD)
    return module


@pytest.fixture(scope="module")
def mesh(unstructured: ModuleType):
    comm = MPI.COMM_WORLD
    return unstructured.local_mesh(unstructured.NX, unstructured.NY, comm.rank, comm.size)


@pytest.fixture(scope="module", params=["mpi", "ghex"])
def step(unstructured: ModuleType, mesh, request):
    """The step with each transport, compiled and from Python alike."""
    return unstructured.make_step(mesh, MPI.COMM_WORLD, backend=request.param)


def test_compiled_step_equals_runtime_path_and_single_rank(
    unstructured: ModuleType, mesh, step, comm
) -> None:
    compiled = unstructured.run(step.compiled, mesh, STEPS)
    from_python = unstructured.run(step.from_python, mesh, STEPS)
    # all local arrays, halos included: the last exchanged c and e, and c_new's old halo
    same_locally = all(np.array_equal(a, b) for a, b in zip(compiled, from_python))

    cells = unstructured.gather_cells(mesh, comm, compiled[0])
    equal = None
    if comm.rank == 0:
        alone = unstructured.local_mesh(unstructured.NX, unstructured.NY, 0, 1)
        single = unstructured.make_step(alone, MPI.COMM_SELF)
        equal = bool(np.array_equal(cells, unstructured.run(single.from_python, alone, STEPS)[0]))
    assert same_locally, "compiled step differs from the runtime path on this rank"
    assert comm.bcast(equal, root=0), "gathered compiled result differs from one rank alone"


def test_ranks_parse_one_sdfg_with_symbolic_tables(
    unstructured: ModuleType, mesh, step, comm
) -> None:
    """Tables of different lengths enter as closure arrays of symbolic shape, not constants.

    Checks are collected, not asserted, until the ranks have compared their SDFGs: a rank
    failing alone before a collective would leave the others waiting.
    """
    lengths = comm.allgather((len(mesh.e2c), len(mesh.c2e)))
    args = (*unstructured.initial_fields(mesh), *step.bounds)
    parsed = step.program.to_sdfg(*args, lowered=False)
    lowered = step.program.to_sdfg(*args)
    names = comm.allgather(lowered.name)

    assert comm.size == 1 or len(set(lengths)) > 1, f"the mesh should split unevenly: {lengths}"
    assert len(set(names)) == 1, f"ranks parsed different SDFGs: {names}"
    exchanges = [n for n, _ in parsed.all_nodes_recursive() if isinstance(n, EXCHANGE_NODES)]
    assert len(exchanges) == 2
    for table in ("gt_conn_E2C", "gt_conn_C2E"):
        desc = lowered.arrays[table]
        assert not desc.transient
        assert all(dace.symbolic.issymbolic(s) for s in (*desc.shape, *desc.strides)), desc
    assert not any(isinstance(n, dace.nodes.LibraryNode) for n, _ in lowered.all_nodes_recursive())
    assert not lowered.callback_mapping, "a Python callback in the compiled step"


def test_ranks_out_of_step_between_kept_calls_raise(comm) -> None:
    """The unstructured MPI expansion's check of the sizes received: two kept calls with
    fields of other levels, the first rank one call out of step with the others (every rank
    straight to the binary): each rank (a neighbour of every other) raises; back in step,
    exact halos."""
    import gt4py_halo as gh

    if comm.size == 1:
        pytest.skip("ranks out of step need two")
    others = [r for r in range(comm.size) if r != comm.rank]
    d = gh.UnstructuredDecomposition({"cell": ([comm.rank], others)}, comm=comm)
    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=comm)
    def step(a):
        ex.exchange(a)

    fields = [np.zeros((comm.size, 4)), np.zeros((comm.size, 2))]

    def exchanged(field) -> None:
        field[...] = -1.0
        field[0] = comm.rank  # owned first, then the halo: each gid's value is itself
        step(field)
        np.testing.assert_array_equal(
            field[1:], np.broadcast_to(np.array(others)[:, None], field[1:].shape)
        )

    for field in fields:  # both kept
        exchanged(field)
    with pytest.raises(gh.RanksDisagreeError, match="received .* unlike expected"):
        step(fields[0 if comm.rank == 0 else 1])
    for k in (1, 0):
        exchanged(fields[k])


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_column_major_fields_of_one_entry_or_none(comm, backend) -> None:
    """Column-major fields (entries contiguous, GT4Py's CPU order) where a rank holds one
    entry (NumPy gives a column-major array of one row a row-major array's strides) or none
    (strides 0): compiled, exact halos, as the runtime exchange gives them (with ``ghex``
    the ranks' strides of 1 disagreed, and the build refused the fields as strided views)."""
    import gt4py_halo as gh

    if comm.rank == 0:
        owned, halo = [0, 1, 2], []
    elif comm.rank == comm.size - 1:
        owned, halo = [], [0]  # one entry
    elif comm.rank == 1:
        owned, halo = [], []  # none
    else:
        owned, halo = [3 + comm.rank], [1]
    d = gh.UnstructuredDecomposition({"cell": (owned, halo)}, comm=comm)
    ex = gh.make_exchange(d, backend=backend)

    @gh.program(comm=comm)
    def step(a):
        ex.exchange(a, dim="cell")

    gids = d.local_gids("cell")
    expected = gids[:, None] * 10.0 + np.arange(3)
    mine = np.isin(np.arange(len(gids)), d.owned_lids["cell"])[:, None]
    for run in (step, lambda a: ex.exchange(a, dim="cell")):
        a = np.asfortranarray(np.where(mine, expected, -1.0))
        run(a)
        np.testing.assert_array_equal(a, expected)


@pytest.mark.parametrize("order", ["C", "gt4py"])
def test_ranks_out_of_step_inside_a_step_raise(comm, order) -> None:
    """The unstructured MPI expansion's stamps (a message of their own per neighbour): a loop
    around an exchange whose trips differ between ranks, in kept calls. After a first call
    in step, rank 0 makes two trips in a call and one in the next, the others one and then
    two: rank 0 raises after its first call out of step, every other rank (each a neighbour
    of every other) after its second; back in step, exact halos. Ranks own uneven numbers of
    cells; NumPy's and GT4Py's fields."""
    import gt4py.next as gtx

    import gt4py_halo as gh

    if comm.size == 1:
        pytest.skip("ranks out of step need two")
    start = [r * (r + 1) // 2 for r in range(comm.size)]  # rank r owns r + 1 cells
    owned = list(range(start[comm.rank], start[comm.rank] + comm.rank + 1))
    halo = [start[r] for r in range(comm.size) if r != comm.rank]
    d = gh.UnstructuredDecomposition({"cell": (owned, halo)}, comm=comm)
    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=comm)
    def step(a, trips):
        for _ in range(trips[0]):
            ex.exchange(a)

    gids = d.local_gids("cell")
    expected = gids[:, None] * 10.0 + np.arange(3)
    mine = np.isin(np.arange(len(gids)), d.owned_lids["cell"])[:, None]
    initial = np.where(mine, expected, -1.0)
    if order == "gt4py":
        field = gtx.as_field([gtx.Dimension("Cell"), gtx.Dimension("K")], initial)
        values = field.ndarray
    else:
        field = values = initial.copy()
    calls_out_of_step(step, field, neighbour=True)  # (every rank a neighbour of every other)
    values[...] = initial
    step(field, np.ones(1, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(values), expected)
