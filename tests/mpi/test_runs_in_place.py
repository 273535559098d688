"""The runtime ``mpi`` transport's runs in place: long contiguous runs of a box travel as
messages of their own, straight between the fields where each side's layout allows
(``packing.in_place_boxes``, ``RunMessages``). Halos stay exact whatever the layouts on
either side, and ranks that disagree on the fields raise on every rank and leave no message
behind: the exchange works after."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import gt4py.next as gtx
import numpy as np
import pytest
from halo_reference import expected_local, filled_local

import gt4py_halo as gh
from gt4py_halo.decomposition.plan import FieldSpec
from gt4py_halo.runtime.packing import in_place_boxes

# faces across axis 0, the axis cut in blocks of 13 cells over 1-4 ranks (uneven), are whole
# planes of 42x256 float64 (84 KiB: in place): they span the halo of axis 1, which wraps
GLOBAL, HALO = (13, 40, 256), (1, 1, 0)


def decomposition(comm):
    return gh.CartesianDecomposition(GLOBAL, halo=HALO, periodic=True, proc_grid=(comm.size, 1, 1))


def local(d, dtype, kind):
    """The rank's field of values in ``kind`` of memory: C-ordered NumPy (runs contiguous),
    rows padded (each run cut at every row: sent through buffers of their own), Fortran order,
    or a GT4Py field."""
    field = filled_local(d, (), dtype)
    if kind == "padded":
        padded = np.empty((*field.shape[:2], field.shape[2] + 3), dtype)[..., : field.shape[2]]
        padded[...] = field
        return padded
    if kind == "fortran":
        return np.asfortranarray(field)
    if kind == "gt4py":
        dims = [gtx.Dimension(n) for n in ("I", "J", "K")]
        return gtx.as_field(dims, field)
    return field


def values(field):
    return field.asnumpy() if hasattr(field, "asnumpy") else np.asarray(field)


def test_the_case_sends_runs(comm):
    """The messages (the plan's ``wrapped`` ones: axis 1 wraps onto each rank) are the faces
    across the cut axis alone, whole planes, in place (where there are other ranks to send
    them to)."""
    d = decomposition(comm)
    plan, specs = d.plan(), [FieldSpec(np.dtype(np.float64), ())]
    assert len(plan.wrapped) == len(plan.remote_neighbours)
    for neighbour in plan.wrapped:
        boxes = in_place_boxes(neighbour.send, plan.local_shape, specs)
        assert boxes == neighbour.send.boxes
        assert all(box.shape[1:] == (42, 256) for box in boxes), boxes
        assert in_place_boxes(neighbour.send, plan.local_shape, specs * 2) == boxes
        # half the bytes per run: not in place, for every field of the call
        halved = [FieldSpec(np.dtype(np.float32), ())]
        assert not in_place_boxes(neighbour.send, plan.local_shape, specs + halved)


@pytest.mark.parametrize("kind", ["numpy", "padded", "fortran", "gt4py"])
def test_runs_fill_owner_values(comm, kind):
    """Two fields of each kind, blocking, split (finished at once, or polled) and repeated
    (the kept call, from C): exact halos."""
    d = decomposition(comm)
    ex = gh.make_exchange(d, backend="mpi")
    expected = expected_local(d, (), np.float64)
    for _ in range(3):
        u, v = local(d, np.float64, kind), local(d, np.float64, kind)
        ex.exchange(u, v)
        np.testing.assert_array_equal(values(u), expected)
        np.testing.assert_array_equal(values(v), expected)
        w, x = local(d, np.float64, kind), local(d, np.float64, kind)
        h = ex.start(w)
        h.finish()
        polled = ex.start(x)
        while not polled.is_ready():  # true once the runs too have come and gone
            pass
        polled.finish()
        np.testing.assert_array_equal(values(w), expected)
        np.testing.assert_array_equal(values(x), expected)
    kept = local(d, np.float64, kind)
    for _ in range(3):
        ex.exchange(kept)
    np.testing.assert_array_equal(values(kept), expected)


def test_layouts_that_differ_between_ranks(comm):
    """Even ranks send and receive their runs in place, odd ranks through buffers of their
    own (padded rows): the same messages, exact halos."""
    d = decomposition(comm)
    ex = gh.make_exchange(d, backend="mpi")
    field = local(d, np.float64, "numpy" if comm.rank % 2 == 0 else "padded")
    ex.exchange(field)
    np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


@pytest.mark.timeout(120)  # a hang fails
def test_ranks_finish_exchanges_with_runs_in_different_orders(comm):
    """Split exchanges with runs, finished in another order on odd ranks: each one's runs
    were sent at its start, on a tag of its own, so no order of finishes waits on another
    and no run lands in another exchange's fields."""
    d = decomposition(comm)
    ex = gh.make_exchange(d, backend="mpi")
    offsets = [0.0, 1000.0, 2000.0]
    fields = [filled_local(d, (), np.float64) + off for off in offsets]
    handles = [ex.start(f) for f in fields]
    for h in reversed(handles) if comm.rank % 2 else handles:
        h.finish()
    expected = expected_local(d, (), np.float64)
    for field, off in zip(fields, offsets):
        np.testing.assert_array_equal(field, expected + off)


def exchange(ex, fields, how):
    """Exchange ``fields`` with a blocking call, or started and ``is_ready`` polled."""
    if how == "blocking":
        ex.exchange(*fields)
        return
    started = ex.start(*fields)
    while not started.is_ready():
        pass
    started.finish()


@pytest.mark.timeout(120)  # a hang fails
@pytest.mark.parametrize(
    "theirs",
    [
        ((np.float64, np.float64), "blocking"),
        ((np.float32,), "blocking"),
        ((np.float32,), "polled"),
    ],
    ids=["more-runs", "no-runs", "no-runs-polled"],
)
def test_ranks_that_disagree_on_fields_with_runs(comm, theirs):
    """The last rank exchanges two fields (twice the runs) or one of float32 (no runs: its
    runs would be too short) where the others exchange one of float64, which has runs: the
    last rank and its neighbours raise ``RanksDisagreeError``, none hangs, and every run sent
    is received (drained), so the next exchange is exact on every rank."""
    if comm.size == 1:
        pytest.skip("needs at least two ranks")
    dtypes, how = theirs
    d = decomposition(comm)
    ex = gh.make_exchange(d, backend="mpi")
    mine = dtypes if comm.rank == comm.size - 1 else (np.float64,)
    fields = [filled_local(d, (), dtype) for dtype in mine]
    last = comm.size - 1
    if comm.rank in (last, last - 1, 0):  # the last rank and its neighbours along axis 0
        with pytest.raises(gh.RanksDisagreeError, match=r"halos not written: rank \d+ sent "):
            exchange(ex, fields, how)
    else:  # no neighbour of the last rank: its halos are right
        exchange(ex, fields, how)
        np.testing.assert_array_equal(fields[0], expected_local(d, (), np.float64))
    for _ in range(2):
        field = filled_local(d, (), np.float64)
        ex.exchange(field)
        np.testing.assert_array_equal(field, expected_local(d, (), np.float64))


def test_profiled_runs(comm, tmp_path_factory):
    """Profiled (the phases one by one, from Python): the runs are posted within the start
    and waited for within the finish, as events of their own naming their boxes per rank;
    exact halos."""
    folder = comm.bcast(str(tmp_path_factory.mktemp("profile")) if comm.rank == 0 else None)
    d = decomposition(comm)
    ex = gh.make_exchange(d, backend="mpi")
    u, v = filled_local(d, (), np.float64), filled_local(d, (), np.float64)
    with gh.profile(folder):
        ex.exchange(u)
        ex.start(v).finish()
    expected = expected_local(d, (), np.float64)
    np.testing.assert_array_equal(u, expected)
    np.testing.assert_array_equal(v, expected)
    if comm.rank != 0:
        return
    events = json.loads((Path(folder) / "trace.json").read_text())["traceEvents"]
    for rank in range(comm.size):
        timed = [e for e in events if e["pid"] == rank and e.get("cat") == "exchange"]
        runs = [e for e in timed if "runs" in e["args"]]
        peers = {(rank + step) % comm.size for step in (-1, 1)} - {rank}
        assert len(runs) == (4 if peers else 0), runs  # posted and waited for, two exchanges
        for event in runs:
            assert set(event["args"]["runs"]) == {f"rank {p}" for p in peers}
            parent = "start" if event["name"] == "post" else "finish"
            assert event["name"] in ("post", "wait")
            # (within a microsecond: the trace's times are rounded)
            assert any(
                e["name"] == parent
                and e["ts"] - 1 <= event["ts"]
                and event["ts"] + event["dur"] <= e["ts"] + e["dur"] + 1
                for e in timed
            ), event


def test_fields_sent_in_runs_are_not_kept_alive(comm):
    """The runs bound to a field set (kept for its next exchange) hold its memory, not the
    arrays: dropped, the fields are freed."""
    d = decomposition(comm)
    ex = gh.make_exchange(d, backend="mpi")
    field = filled_local(d, (), np.float64)
    ex.exchange(field)
    ex.exchange(field)  # (from C: the kept call)
    ex.start(field).finish()
    alive = weakref.ref(field)
    del field
    gc.collect()
    assert alive() is None
