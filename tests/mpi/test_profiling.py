"""``gh.profile``: one timeline of every rank's exchanges, runtime and compiled, merged on rank 0
into a Chrome trace, with a summary; and profiling off leaves no trace and no timer code."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from conftest import at_most_ranks
from halo_reference import gpu_or_skip
from mpi4py import MPI

import gt4py_halo as gh

# uneven blocks, GT4Py's default fields padded on some ranks (as in test_compiled_step.py)
GLOBAL_SHAPE = (44 if MPI.COMM_WORLD.size == 3 else 45, 38)
CALLS = 2
RUNTIME_PHASES = {"check", "start", "finish", "post", "pack", "wait", "unpack"}
# compiled timers read CLOCK_MONOTONIC, viztracer its own reading of it: they agree to about
# a microsecond
CLOCKS_AGREE = 2.0


@pytest.fixture(scope="module")
def run(diffusion: ModuleType, tmp_path_factory):
    """A step compiled (two exchanges, blocking and split) and the same step from Python with
    the runtime exchange, both profiled; the profile's folder (rank 0's) and the step."""
    comm = MPI.COMM_WORLD
    folder = comm.bcast(str(tmp_path_factory.mktemp("profile")) if comm.rank == 0 else None)
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True)
    ex = gh.make_exchange(d)
    stencil = diffusion.diffusion_step

    @gh.program(comm=comm)
    def step(u, v, i0, i1, j0, j1):
        ex.exchange(u)
        stencil(u, v, i0, i1, j0, j1)
        h = ex.start(v)
        h.finish()
        stencil(v, u, i0, i1, j0, j1)

    def from_python(u, v, *bounds):
        ex.exchange(u)
        stencil(u, v, *bounds)
        h = ex.start(v)
        h.finish()
        stencil(v, u, *bounds)

    u, v = (gtx.as_field([diffusion.I, diffusion.J], np.ones(d.allocated_shape)) for _ in "uv")
    bounds = [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]
    with gh.profile(folder):
        for _ in range(CALLS):
            step(u, v, *bounds)
            from_python(u, v, *bounds)
    return Path(folder), step, (u, v, *bounds)


def test_one_process_per_rank_with_runtime_and_compiled_phases(run, comm) -> None:
    folder, _, _ = run
    if comm.rank != 0:
        return
    events = json.loads((folder / "trace.json").read_text())["traceEvents"]  # valid JSON
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {r: f"rank {r}" for r in range(comm.size)}
    for rank in range(comm.size):
        timed = [e for e in events if e["pid"] == rank and e["ph"] == "X"]
        assert all(e["dur"] >= 0 for e in timed)
        (profile,) = (e for e in timed if e["cat"] == "profile")
        states = [e for e in timed if e["cat"] == "state"]  # the compiled step's stencils
        steps = [e for e in timed if e["cat"] == "step"]
        phases = [e for e in timed if e["cat"] == "exchange"]
        compiled = [e for e in phases if e["args"].get("compiled")]
        runtime = [e for e in phases if not e["args"].get("compiled")]
        assert len(steps) == CALLS and all(e["name"] == "step" for e in steps)
        assert RUNTIME_PHASES <= {e["name"] for e in runtime}
        assert {e["name"] for e in compiled} == {"post", "wait"}
        assert len(compiled) == 2 * 2 * CALLS  # two exchanges per call, post and wait each
        for event in timed:
            assert within(event, profile), event
        assert len(states) >= 2 * CALLS  # the two stencils of each call
        for event in compiled + states:
            assert any(within(event, s) for s in steps), f"rank {rank}: {event} in no step"
        for event in compiled:  # the exchange tasklets run in the step's states
            assert any(within(event, s) for s in states), f"rank {rank}: {event} in no state"
        parents = {"pack": "start", "self-copies": "start", "unpack": "finish"}
        for event in runtime:
            parent = parents.get(event["name"])
            if parent is not None:
                assert any(within(event, e) for e in runtime if e["name"] == parent), event
        peers = {"rank " + str(r) for r in range(comm.size) if r != rank}
        for event in runtime:  # byte counts per peer rank
            if event["name"] in ("pack", "unpack"):
                (messages,) = event["args"].values()
                assert set(messages) <= peers and all(b.endswith(" B") for b in messages.values())


def test_the_summary_names_every_rank(run, comm) -> None:
    folder, _, _ = run
    if comm.rank == 0:
        summary = (folder / "summary.txt").read_text()
        for rank in range(comm.size):
            assert f"\n| {rank} | " in summary
        assert "slowest rank: " in summary


@at_most_ranks(2, "a build with or without timers, the same on any number of ranks")
def test_timers_only_in_steps_built_while_profiling(run, comm, tmp_path) -> None:
    """Off, the step is another build, without timer code; nothing is written."""
    _, step, args = run
    assert gh.profiling.recorder is None
    assert not timer_code(step.to_sdfg(*args))
    step(*args)  # the build without timers
    assert not list(tmp_path.iterdir())
    folder = comm.bcast(str(tmp_path) if comm.rank == 0 else None)
    with gh.profile(folder):
        assert timer_code(step.to_sdfg(*args))


def test_gpu_step_is_timed_on_the_device(comm, tmp_path) -> None:
    """A GPU step's working states, timed on the device by CUDA events: one device event per
    state and call, inside the profile, starting no earlier than the host launched it. Runs
    where every rank has a GPU (CI has none)."""
    cupy = gpu_or_skip(comm)
    d = gh.CartesianDecomposition((17, 11), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm, device="gpu")
    def gpu_step(a, b):
        ex.exchange(a)
        for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
            b[i, j] = a[i + 1, j] + a[i - 1, j] + a[i, j + 1] + a[i, j - 1]

    a, b = cupy.ones(d.allocated_shape), cupy.zeros(d.allocated_shape)
    folder = Path(comm.bcast(str(tmp_path) if comm.rank == 0 else None))
    with gh.profile(folder):
        for _ in range(CALLS):
            gpu_step(a, b)
    if comm.rank != 0:
        return
    events = [e for e in json.loads((folder / "trace.json").read_text())["traceEvents"]]
    for rank in range(comm.size):
        timed = [e for e in events if e["pid"] == rank and e["ph"] == "X"]
        (profile,) = (e for e in timed if e["cat"] == "profile")
        states = [e for e in timed if e["cat"] == "state"]
        device = [e for e in timed if e["cat"] == "device"]
        assert len(device) == len(states) >= CALLS
        for event in device:
            assert event["dur"] >= 0 and within(event, profile), event
            launched = [s for s in states if s["name"] == event["name"]]
            assert any(s["ts"] <= event["ts"] + CLOCKS_AGREE for s in launched), event


def within(inner: dict, outer: dict) -> bool:
    return (
        inner["ts"] >= outer["ts"] - CLOCKS_AGREE
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + CLOCKS_AGREE
    )


def timer_code(sdfg) -> bool:
    code = [sdfg.global_code["frame"].as_string]
    code += [n.code.as_string for n, _ in sdfg.all_nodes_recursive() if hasattr(n, "code")]
    return any("gt4py_halo_timers" in c for c in code)


def test_a_user_receive_never_takes_the_profile_s_messages(comm, tmp_path) -> None:
    """A receive of any tag the user's code has posted on the profile's communicator while the
    profile ends gets the user's message, not the profile's clock ping-pongs."""
    folder = comm.bcast(str(tmp_path) if comm.rank == 0 else None)
    last = comm.size - 1
    with gh.profile(folder, comm=comm):
        pending = comm.irecv(source=0, tag=MPI.ANY_TAG) if comm.rank == last else None
    if comm.rank == 0:
        comm.send("the user's", dest=last, tag=7)
    if comm.rank == last:
        assert pending.wait() == "the user's"
    if comm.rank == 0:
        assert (Path(folder) / "trace.json").is_file()


def test_a_profile_that_cannot_start_on_one_rank_raises_on_every_rank(comm, tmp_path) -> None:
    """One rank profiling already, or rank 0 unable to make the folder: a ``ProfileError``
    on every rank when the profile is entered, before anything is profiled."""
    folder = comm.bcast(str(tmp_path) if comm.rank == 0 else None)
    last = comm.size - 1
    inner = gh.profile(Path(folder) / "inner", comm=MPI.COMM_SELF)
    if comm.rank == last:
        inner.__enter__()
    try:
        with pytest.raises(gh.ProfileError, match=f"rank {last}: a profile is already on"):
            gh.profile(Path(folder) / "outer", comm=comm).__enter__()
    finally:
        if comm.rank == last:
            inner.__exit__(None, None, None)
    assert gh.profiling.recorder is None
    blocked = Path(folder) / "a file"
    if comm.rank == 0:
        blocked.write_text("")
    comm.barrier()
    with pytest.raises(gh.ProfileError, match="rank 0: cannot make the profile's folder"):
        gh.profile(blocked / "profile", comm=comm).__enter__()
    assert gh.profiling.recorder is None
    if comm.size > 1:  # a folder per rank: rank 0's alone would be written
        with pytest.raises(gh.RanksDisagreeError, match="gh.profile: ranks disagree on\n  folder"):
            gh.profile(Path(folder) / f"rank{comm.rank}", comm=comm).__enter__()
        assert gh.profiling.recorder is None
        assert not (Path(folder) / "rank0").exists()  # (rank 0 made it, empty, before)


def test_profiles_of_groups_of_ranks_into_one_folder(comm, tmp_path) -> None:
    """Groups of ranks profiling into one folder write files named by their first world rank;
    processes are named by their rank and world rank. The whole world writes trace.json."""
    folder = comm.bcast(str(tmp_path) if comm.rank == 0 else None)
    group = comm.Split(comm.rank % 2, comm.rank)
    try:
        with gh.profile(folder, comm=group):
            pass
    finally:
        group.Free()
    comm.barrier()
    if comm.size == 1:
        assert (Path(folder) / "trace.json").is_file()
        return
    if comm.rank < 2:
        events = json.loads((Path(folder) / f"trace.world{comm.rank}.json").read_text())
        names = [e["args"]["name"] for e in events["traceEvents"] if e["name"] == "process_name"]
        assert names == [
            f"rank {r} (world {w})" for r, w in enumerate(range(comm.rank, comm.size, 2))
        ]
        assert (Path(folder) / f"summary.world{comm.rank}.txt").is_file()
    assert not (Path(folder) / "trace.json").exists()


def test_a_whole_run_profile_on_some_ranks_only(comm, tmp_path, monkeypatch) -> None:
    """The whole-run profile (``GT4PY_HALO_PROFILE``) on the last rank only: the first
    decomposition is a ``RanksDisagreeError`` on every rank, and the last rank drops its
    profile (its exit then waits for nobody). On every rank: confirmed by a decomposition over
    all ranks and written at the exit, every rank in it."""
    from gt4py_halo import profiling
    from gt4py_halo.config import PROFILE_VARIABLE

    folder = comm.bcast(str(tmp_path) if comm.rank == 0 else None)
    monkeypatch.setattr(profiling.atexit, "register", lambda f: None)  # ended here instead
    if comm.rank == comm.size - 1:
        monkeypatch.setenv(PROFILE_VARIABLE, folder)
        profiling._profile_whole_run()
    if comm.size > 1:
        with pytest.raises(gh.RanksDisagreeError, match=f"on at ranks {comm.size - 1} of"):
            gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
        assert profiling.recorder is None and profiling._whole_run is None
        # on everywhere, the last rank into another folder: dropped on every rank
        other, ours = f"{folder}/other", f"{folder}/ours"
        monkeypatch.setenv(PROFILE_VARIABLE, other if comm.rank == comm.size - 1 else ours)
        profiling._profile_whole_run()
        with pytest.raises(gh.RanksDisagreeError, match=f"rank {comm.size - 1}: {other}"):
            gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
        assert profiling.recorder is None and profiling._whole_run is None
        assert not Path(ours).exists()  # (rank 0 made it, empty, before)
    monkeypatch.setenv(PROFILE_VARIABLE, folder)
    if profiling._whole_run is None:
        profiling._profile_whole_run()
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    gh.make_exchange(d).exchange(np.ones(d.allocated_shape))
    # a profile inside it names the setting that profiles the run (was: "already on")
    with pytest.raises(gh.ProfileError, match="profiled into .* \\(set by the environment"):
        gh.profile(f"{folder}/inner", comm=comm).__enter__()
    profiling._end_whole_run()
    assert profiling.recorder is None
    comm.barrier()
    events = json.loads((Path(folder) / "trace.json").read_text())["traceEvents"]
    assert {e["pid"] for e in events if e.get("name") == "check"} == set(range(comm.size))


def test_a_step_built_while_some_ranks_profile(comm, tmp_path) -> None:
    """A first call while the last rank alone profiles (its build would hold timers, the
    others' not): a ``RanksDisagreeError`` on every rank naming the profiling rank, before
    anything is lowered."""
    if comm.size == 1:
        pytest.skip("needs a rank that does not profile")
    d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(comm=comm)
    def exchange_one(a):
        ex.exchange(a)

    last = comm.size - 1
    alone = gh.profile(tmp_path, comm=MPI.COMM_SELF) if comm.rank == last else None
    if alone:
        alone.__enter__()
    try:
        with pytest.raises(gh.RanksDisagreeError, match=rf"profiling on \(ranks {last}\)"):
            exchange_one(np.ones(d.allocated_shape))
    finally:
        if alone:
            alone.__exit__(None, None, None)
