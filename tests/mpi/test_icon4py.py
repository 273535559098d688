"""gt4py_halo as ICON4Py's exchange runtime (``gt4py_halo.icon4py``), on a torus that ICON4Py's
own METIS decomposer and halo constructor cut: every halo equals the owner's value and what
ICON4Py's own GHEX exchange writes, byte for byte, for what ICON4Py passes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import load_example
from gt4py import next as gtx
from icon4py.model.common import dimension as dims
from icon4py.model.common.decomposition import definitions
from icon4py.model.common.decomposition import mpi_decomposition as icon_mpi
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo import icon4py as gh_icon4py

icon4py_torus = load_example(Path(__file__).resolve().parents[2] / "examples" / "icon4py_torus.py")
NX, NY = 12, 8  # 192 cells, 288 edges, 96 vertices
DIMS = (dims.CellDim, dims.EdgeDim, dims.VertexDim)
BACKENDS = ["mpi", "ghex"]
PADDING = 5  # ICON's nproma: arrays longer than the local size
TABLES = ("C2E2C", "E2C", "C2E", "C2V", "V2C", "V2E")  # what ICON4Py's halo constructor reads


@pytest.fixture(scope="module")
def props():
    return icon_mpi.MPICommProcessProperties(MPI.COMM_WORLD)


@pytest.fixture(scope="module", params=["torus", "SimpleGrid"])
def info(props, request):
    """The torus, or ICON4Py's own SimpleGrid (18 cells: on 4 ranks some own no vertex)."""
    if request.param == "torus":
        return icon4py_torus.decomposition_info(NX, NY, props)
    from icon4py.model.common.grid import simple

    grid = simple.SimpleGridData()
    tables = {name: np.asarray(getattr(grid, f"{name.lower()}_table")) for name in TABLES}
    return icon4py_torus.cut(tables, props)


@pytest.fixture(scope="module")
def icon4py_own(props, info):
    """ICON4Py's own exchange runtime: GHEX from Python."""
    return icon_mpi.GHexMultiNodeExchange(props, info)


@pytest.fixture(scope="module", params=BACKENDS)
def runtime(props, info, request):
    return gh_icon4py.create_exchange(props, info, backend=request.param)


def values(gids: np.ndarray, levels: int | None, dtype) -> np.ndarray:
    column = gids * 100 if levels is None else gids[:, None] * 100 + np.arange(levels)
    return column.astype(dtype)


def before_exchange(info, dim, levels, dtype, length=None) -> np.ndarray:
    """Owned entries hold their values, halo entries -1, padding beyond the local size -2."""
    gids = info.global_index(dim)
    owned = info.owner_mask(dim)
    shape = (length or len(gids),) + (() if levels is None else (levels,))
    array = np.full(shape, -2, dtype=dtype)
    array[: len(gids)] = -1
    array[: len(gids)][owned] = values(gids[owned], levels, dtype)
    return array


KINDS = ["numpy", "gt4py field", "nproma-padded", "strided view"]


def as_passed(kind: str, array: np.ndarray, dim):
    """``array`` as ICON4Py may pass it, and the NumPy array that shows what was written."""
    if kind == "gt4py field":
        field = gtx.as_field([dim, dims.KDim][: array.ndim], array)
        return field, field.ndarray
    if kind == "strided view":
        wide = np.zeros((array.shape[0], 3, *array.shape[1:]), dtype=array.dtype)
        wide[:, 1] = array
        return wide[:, 1], wide[:, 1]
    return array, array


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "levels,dtype",
    [(None, np.float64), (7, np.int32), (3, np.float32), (None, np.int64)],
)
def test_halos_equal_the_owners_and_icon4pys_own_exchange(
    runtime, icon4py_own, info, kind, levels, dtype
):
    for dim in DIMS:
        gids = info.global_index(dim)
        length = len(gids) + PADDING if kind == "nproma-padded" else None
        passed, written = as_passed(kind, before_exchange(info, dim, levels, dtype, length), dim)
        runtime.exchange(dim, passed, stream=definitions.BLOCK)
        np.testing.assert_array_equal(written[: len(gids)], values(gids, levels, dtype))
        assert (written[len(gids) :] == -2).all(), "padding beyond the local size written"
        if kind in ("numpy", "gt4py field"):  # what ICON4Py's own exchange accepts
            theirs, theirs_written = as_passed(kind, before_exchange(info, dim, levels, dtype), dim)
            icon4py_own.exchange(dim, theirs, stream=definitions.BLOCK)
            assert written.tobytes() == np.ascontiguousarray(theirs_written).tobytes()
        # the same field again, new owners' values: the blocking call kept, run from C
        written[: len(gids)] = before_exchange(info, dim, levels, dtype) + 1
        runtime.exchange(dim, passed, stream=definitions.BLOCK)
        np.testing.assert_array_equal(written[: len(gids)], values(gids, levels, dtype) + 1)
        assert (written[len(gids) :] == -2).all(), "padding beyond the local size written"


def test_three_dims_in_flight_with_mixed_dtypes(runtime, info):
    """Split phase: cells (two dtypes in one call, which ICON4Py's own GHEX exchange refuses),
    edges and vertices in flight together; finished in another order, through ICON4Py's
    ``create_halo_exchange_wait`` and the deprecated ``__call__``."""
    cells = [
        before_exchange(info, dims.CellDim, None, np.float64),
        before_exchange(info, dims.CellDim, 4, np.int32),
    ]
    edges = before_exchange(info, dims.EdgeDim, 5, np.float32)
    vertices = before_exchange(info, dims.VertexDim, None, np.int64)
    handles = [
        runtime.start(dims.CellDim, *cells),
        runtime(edges, dim=dims.EdgeDim, full_exchange=False),
        runtime.start(dims.VertexDim, vertices),
    ]
    wait = definitions.create_halo_exchange_wait(runtime)
    for handle in reversed(handles):
        wait(handle)
        assert handle.is_ready()
    expected = [
        (cells[0], dims.CellDim, None, np.float64),
        (cells[1], dims.CellDim, 4, np.int32),
        (edges, dims.EdgeDim, 5, np.float32),
        (vertices, dims.VertexDim, None, np.int64),
    ]
    for array, dim, levels, dtype in expected:
        np.testing.assert_array_equal(array, values(info.global_index(dim), levels, dtype))


@pytest.mark.parametrize("kind", ["numpy", "gt4py field", "nproma-padded"])
def test_the_shm_transport_with_fields_in_shared_memory(props, info, kind):
    """Over ``shm``, fields from ``gh.shared_allocator`` of the adapter's decomposition
    (NumPy arrays, padded ones, GT4Py fields): exact halos from a first call, a kept call
    from C with new owners' values (through ICON4Py's older ``runtime(*fields, dim=...)``),
    and a split call."""
    runtime = gh_icon4py.create_exchange(props, info, backend="shm")
    allocator = gh.shared_allocator(runtime.decomposition, 1 << 20)
    for dim in DIMS:
        gids = info.global_index(dim)
        length = len(gids) + PADDING if kind == "nproma-padded" else None
        made = before_exchange(info, dim, 3, np.float64, length)
        passed = allocator.empty(made.shape)
        passed[...] = made
        written = passed
        if kind == "gt4py field":
            passed = gtx.as_field([dim, dims.KDim], made, allocator=allocator)
            written = passed.ndarray
        for call in range(3):
            written[: len(gids)] = before_exchange(info, dim, 3, np.float64) + call
            if call == 0:
                runtime.exchange(dim, passed, stream=definitions.BLOCK)
            elif call == 1:
                runtime(passed, dim=dim, full_exchange=True)  # the form ICON4Py's granules call
            else:
                runtime.start(dim, passed).finish()
            np.testing.assert_array_equal(written[: len(gids)], values(gids, 3, np.float64) + call)
            assert (written[len(gids) :] == -2).all(), "padding beyond the local size written"


def test_what_icon4py_asks_of_a_runtime(runtime, props):
    assert isinstance(runtime, definitions.ExchangeRuntime)
    assert (runtime.my_rank(), runtime.get_size()) == (props.rank, props.comm_size)
    assert runtime.exchange_runtime.backend in BACKENDS


def test_fields_it_cannot_exchange_are_refused_on_every_rank(runtime, info):
    short = np.zeros(len(info.global_index(dims.EdgeDim)) - 1)
    with pytest.raises(gh.FieldError, match="at least"):
        runtime.exchange(dims.EdgeDim, short)
    with pytest.raises(gh.FieldError, match="not a horizontal dim"):
        runtime.exchange(dims.KDim, np.zeros(3))


def test_fields_of_other_dims_are_refused(runtime, info):
    """A GT4Py field on another dim, or with the dim not first: ICON4Py's own exchange
    asserts that the dim is the field's; the halos of another dim's field would be
    overwritten with this dim's pattern."""
    cells, edges = (len(info.global_index(dim)) for dim in (dims.CellDim, dims.EdgeDim))
    on_edges = gtx.as_field([dims.EdgeDim], np.zeros(max(cells, edges)))
    with pytest.raises(gh.FieldError, match=r"has dims \['Edge'\]; .* first dim is 'Cell'"):
        runtime.exchange(dims.CellDim, on_edges)
    k_first = gtx.as_field([dims.KDim, dims.CellDim], np.zeros((cells, cells)))
    with pytest.raises(gh.FieldError, match=r"has dims \['K', 'Cell'\]"):
        runtime.exchange(dims.CellDim, k_first)
    with pytest.raises(gh.FieldError, match="'Cell' is not a horizontal dim"):
        runtime.exchange("Cell", np.zeros(cells))
    assert (on_edges.ndarray == 0).all()


def test_padded_arrays_changed_in_place_are_checked_again(runtime, info):
    """The view of a padded array's local part is made again when the array was made
    read-only since (a FieldError, nothing written)."""
    dim = dims.CellDim
    padded = before_exchange(info, dim, None, np.float64, len(info.global_index(dim)) + PADDING)
    runtime.exchange(dim, padded)
    padded[: len(info.global_index(dim))][~info.owner_mask(dim)] = -1
    padded.flags.writeable = False
    before = padded.copy()
    with pytest.raises(gh.FieldError, match="read-only"):
        runtime.exchange(dim, padded)
    np.testing.assert_array_equal(padded, before)


def test_a_padded_array_in_flight_outlives_its_result(runtime, info):
    """ICON4Py drops the result of a started exchange, and the padded array: the exchange in
    flight (of a view that holds no reference to the array) keeps the array alive until it
    is finished, here as at exit (it wrote the halos into freed memory: a crash). Then the
    array is freed."""
    import gc
    import weakref

    from gt4py_halo.runtime import in_flight

    dim = dims.CellDim
    gids = info.global_index(dim)
    padded = before_exchange(info, dim, 400, np.float64, len(gids) + PADDING)
    alive = weakref.ref(padded)
    result = runtime.start(dim, padded)
    del result, padded
    gc.collect()
    padded = alive()
    assert padded is not None, "an exchange in flight lost its array"
    for pending in list(in_flight.UNFINISHED):  # what the interpreter's exit does
        pending.wait()
    np.testing.assert_array_equal(padded[: len(gids)], values(gids, 400, np.float64))
    del padded
    gc.collect()
    assert alive() is None, "a finished exchange kept its array alive"


@pytest.mark.parametrize("kind", ["numpy", "gt4py field", "nproma-padded"])
def test_blocking_calls_keep_no_field_alive(runtime, info, kind):
    """Fields exchanged again and again (the call kept, run from C) are freed once the
    caller drops them: what the adapter and the exchange keep of them is weak."""
    import gc
    import weakref

    dim = dims.EdgeDim
    gids = info.global_index(dim)
    length = len(gids) + PADDING if kind == "nproma-padded" else None
    passed, _ = as_passed(kind, before_exchange(info, dim, 2, np.float64, length), dim)
    for _ in range(3):
        runtime.exchange(dim, passed, stream=definitions.BLOCK)
    alive = weakref.ref(passed)
    del passed
    gc.collect()
    assert alive() is None, "a field exchanged by blocking calls kept alive"


def test_nothing_to_exchange_and_a_ready_exchange_is_finished(runtime, info):
    """No fields: nothing to do (as ICON4Py's runtimes). ``is_ready()`` true: the exchange
    has finished, its halos written (ICON4Py's meaning), with every transport."""
    runtime.exchange(dims.CellDim)
    assert runtime.start(dims.EdgeDim).is_ready()
    dim = dims.VertexDim
    array = before_exchange(info, dim, 3, np.float32)
    result = runtime.start(dim, array)
    while not result.is_ready():
        pass
    np.testing.assert_array_equal(array, values(info.global_index(dim), 3, np.float32))
    result.finish()


def test_single_node_properties_are_this_process_alone(info):
    """ICON4Py's single-node properties (no communicator) on each of several processes: an
    exchange over this process alone, not over all of them."""
    props = definitions.SingleNodeProcessProperties()
    mine = definitions.DecompositionInfo()  # this rank's entries, all its own
    for dim in DIMS:
        local = np.unique(info.global_index(dim))
        mine.set_dimension(dim, local, np.ones(len(local), bool), None)
    runtime = gh_icon4py.create_exchange(props, mine)
    assert (runtime.my_rank(), runtime.get_size()) == (0, 1)
    array = np.arange(len(mine.global_index(dims.CellDim)), dtype=np.float64)
    runtime.exchange(dims.CellDim, array)
    np.testing.assert_array_equal(array, np.arange(len(array)))


@pytest.mark.timeout(300)  # a hang fails
def test_a_dim_missing_on_one_rank_is_refused_on_every_rank(props, info):
    """A ``DecompositionInfo`` without the vertices on the last rank: a ``DecompositionError``
    on every rank (the others waited for good in the decomposition's collective)."""
    partial = definitions.DecompositionInfo()
    last = props.comm.Get_rank() == props.comm.Get_size() - 1
    for dim in DIMS[:2] if last else DIMS:
        partial.set_dimension(dim, info.global_index(dim), info.owner_mask(dim), None)
    with pytest.raises(gh.DecompositionError, match="has no .*Vertex.* dim"):
        gh_icon4py.create_exchange(props, partial)
