"""Unstructured halos: a mesh scattered over ranks by random partitions, halos in shuffled order."""

from __future__ import annotations

import numpy as np
import pytest
from halo_reference import gpu_or_skip

import gt4py_halo as gh

BACKENDS = ["mpi", "ghex"]
SIZES = {"cell": 240, "edge": 361, "vertex": 123}


def random_mesh(comm, seed=7):
    """Per dim: a random owner per gid (same on all ranks), owned gids and halo gids shuffled.

    Each rank mirrors a random sample of the gids it does not own, so it can have halo
    neighbours that do not have it as one.
    """
    dims = {}
    for number, (name, size) in enumerate(SIZES.items()):
        owner = np.random.default_rng(seed + number).integers(0, comm.size, size)
        local = np.random.default_rng(1000 * seed + 10 * comm.rank + number)
        owned = np.flatnonzero(owner == comm.rank)
        others = np.flatnonzero(owner != comm.rank)
        halo = local.choice(others, size=min(len(others), size // 5), replace=False)
        local.shuffle(owned)
        dims[name] = (owned, halo)
    return dims


def values(gids, levels, dtype):
    return (
        gids.reshape(-1, *([1] * len(levels))) * 10
        + np.arange(int(np.prod(levels))).reshape(levels)
    ).astype(dtype)


def local_field(d, dim, levels, dtype, order="C"):
    owned, halo = d.owned_gids[dim], d.halo_gids[dim]
    a = np.full((len(owned) + len(halo), *levels), -1, dtype=dtype, order=order)
    a[: len(owned)] = values(owned, levels, dtype)
    return a


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "levels,dtype,order",
    [((), np.float64, "C"), ((5,), np.int32, "C"), ((4,), np.float32, "F"), ((3,), np.int64, "C")],
)
def test_halo_holds_owner_values(comm, backend, levels, dtype, order):
    d = gh.UnstructuredDecomposition(random_mesh(comm))
    ex = gh.make_exchange(d, backend=backend)
    for dim in SIZES:
        field = local_field(d, dim, levels, dtype, order)
        ex.exchange(field, dim=dim)
        np.testing.assert_array_equal(
            field[: len(d.owned_gids[dim])], values(d.owned_gids[dim], levels, dtype)
        )
        np.testing.assert_array_equal(
            field[len(d.owned_gids[dim]) :], values(d.halo_gids[dim], levels, dtype)
        )


@pytest.mark.parametrize("backend", ["mpi", "nccl"])
def test_gpu_fields_hold_owner_values(comm, backend):
    """CuPy fields of every dim in flight at once, and GT4Py's default GPU (Edge, K) field
    (what ICON4Py passes on a GPU), twice: exact halos. Runs where CuPy and a GPU are
    present; skipped elsewhere (CI has no GPU)."""
    cupy = gpu_or_skip(comm, backend)
    import gt4py.next as gtx

    edge_k = [gtx.Dimension("Edge"), gtx.Dimension("K", gtx.DimensionKind.VERTICAL)]
    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=5))
    ex = gh.make_exchange(d, backend=backend)
    for _ in range(2):
        fields = {dim: cupy.asarray(local_field(d, dim, (3,), np.float32, "F")) for dim in SIZES}
        gt4py_edges = gtx.as_field(edge_k, cupy.asarray(local_field(d, "edge", (4,), np.float64)))
        handles = [ex.start(fields[dim], dim=dim) for dim in SIZES]
        ex.exchange(gt4py_edges, dim="edge")
        for handle in handles:
            handle.finish()
        for dim, field in fields.items():
            gids = np.concatenate([d.owned_gids[dim], d.halo_gids[dim]])
            np.testing.assert_array_equal(field.get(), values(gids, (3,), np.float32))
        gids = np.concatenate([d.owned_gids["edge"], d.halo_gids["edge"]])
        np.testing.assert_array_equal(gt4py_edges.asnumpy(), values(gids, (4,), np.float64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_dims_in_flight_and_mixed_fields(comm, backend):
    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=11))
    ex = gh.make_exchange(d, backend=backend)
    fields = {
        dim: [local_field(d, dim, (), np.float64), local_field(d, dim, (6,), np.int32)]
        for dim in SIZES
    }
    handles = [ex.start(*fields[dim], dim=dim) for dim in SIZES]
    for h in handles:
        h.finish()
    for dim in SIZES:
        halo = d.halo_gids[dim]
        n = len(d.owned_gids[dim])
        np.testing.assert_array_equal(fields[dim][0][n:], values(halo, (), np.float64))
        np.testing.assert_array_equal(fields[dim][1][n:], values(halo, (6,), np.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_layouts_that_differ_between_ranks(comm, backend):
    """Each rank lays its fields out its own way (levels or local indices contiguous, every
    other row, two level axes): exact halos. GHEX's messages hold each index's levels in
    turn, whatever the layout; fields whose rows are not contiguous travel through a dense
    copy."""
    kinds = ["C", "F", "every-other"]
    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=13))
    ex = gh.make_exchange(d, backend=backend)
    for turn in range(len(kinds)):
        kind = kinds[(comm.rank + turn) % len(kinds)]
        for levels in [(4,), (2, 3)]:
            field = local_field(d, "edge", levels, np.float64, "F" if kind == "F" else "C")
            if kind == "every-other":
                wide = np.zeros((2 * len(field), *levels))[::2]
                wide[...] = field
                field = wide
            ex.exchange(field, dim="edge")
            gids = np.concatenate([d.owned_gids["edge"], d.halo_gids["edge"]])
            np.testing.assert_array_equal(field, values(gids, levels, np.float64))


def test_backends_fill_identical_halos(comm):
    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=3))
    n = d.local_size("edge")
    original = np.random.default_rng(comm.rank).random((n, 3))
    results = []
    for backend in BACKENDS:
        field = original.copy()
        gh.make_exchange(d, backend=backend).exchange(field, dim="edge")
        results.append(field)
    np.testing.assert_array_equal(results[0], results[1])


def test_plan_orders_both_sides_alike(comm):
    """What rank r sends to rank p lists, gid for gid, what p expects from r."""
    d = gh.UnstructuredDecomposition(random_mesh(comm, seed=5))
    plan = d.plan("cell")
    gids = np.concatenate([d.owned_gids["cell"], d.halo_gids["cell"]])
    sent = {n.rank: gids[n.send.indices].tolist() for n in plan.neighbours}
    expected = {n.rank: gids[n.recv.indices].tolist() for n in plan.neighbours}
    everyone_sent = comm.alltoall([sent.get(p, []) for p in range(comm.size)])
    for peer in range(comm.size):
        assert everyone_sent[peer] == expected.get(peer, [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_owned_and_halo_in_any_local_order(comm, backend):
    """``from_local_gids``: owned and halo positions interleaved (ICON4Py's layouts may be);
    halos written at their positions from the owners, owned entries untouched, and the same
    halos as the owned-first layout of the same mesh."""
    mesh = random_mesh(comm, seed=13)
    layouts = {}
    for number, (dim, (owned, halo)) in enumerate(mesh.items()):
        gids = np.concatenate([owned, halo])
        order = np.random.default_rng(100 * comm.rank + number).permutation(len(gids))
        layouts[dim] = (gids[order], order < len(owned))
    d = gh.UnstructuredDecomposition.from_local_gids(layouts)
    owned_first = gh.UnstructuredDecomposition(mesh)
    ex = gh.make_exchange(d, backend=backend)
    for dim, (gids, owned) in layouts.items():
        assert np.array_equal(d.local_gids(dim), gids)
        field = np.where(owned[:, None], values(gids, (2,), np.float64), -1.0)
        ex.exchange(field, dim=dim)
        np.testing.assert_array_equal(field, values(gids, (2,), np.float64))
        reference = local_field(owned_first, dim, (2,), np.float64)
        gh.make_exchange(owned_first, backend=backend).exchange(reference, dim=dim)
        np.testing.assert_array_equal(
            field[np.argsort(gids)], reference[np.argsort(owned_first.local_gids(dim))]
        )
    if any(not np.array_equal(lids, np.arange(len(lids))) for lids in d.owned_lids.values()):
        with pytest.raises(gh.DecompositionError, match="owned_lids"):
            d.owned  # noqa: B018


def test_local_gids_need_one_owned_flag_per_gid(comm):
    with pytest.raises(gh.DecompositionError, match="one per gid"):
        gh.UnstructuredDecomposition.from_local_gids({"cell": (np.arange(4), np.ones(3, bool))})


def sparse_owners(comm) -> tuple[np.ndarray, np.ndarray]:
    """This rank's owned and halo gids of 40 entries where the last rank has none at all and
    (on 3 ranks or more) the one before it owns none but mirrors some."""
    gids = np.arange(40)
    owners = max(comm.size - 2, 1)
    if comm.rank < owners:
        return gids[gids % owners == comm.rank], gids[
            (gids % owners != comm.rank) & (gids % 3 == 0)
        ]
    if comm.rank == comm.size - 2:
        return gids[:0], gids[::5]
    return gids[:0], gids[:0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_without_entries_of_a_dim(comm, backend):
    """The last rank has no cells at all (neither owned nor halo), the one before it owns no
    cell but mirrors some: the others' halos are exact, and nothing fails there."""
    owned, halo = sparse_owners(comm)
    d = gh.UnstructuredDecomposition({"cell": (owned, halo)})
    ex = gh.make_exchange(d, backend=backend)
    for levels in [(), (3,)]:
        field = local_field(d, "cell", levels, np.float64)
        ex.exchange(field, dim="cell")
        np.testing.assert_array_equal(field[len(owned) :], values(halo, levels, np.float64))
