"""Per-rank timelines of a run's exchanges, with viztracer: ``gh.profile``.

While a profile is on, each rank traces its Python calls with viztracer (the three levels
below where the profile started: a model's step functions, the GT4Py programs and exchanges
they call) and records, as events of category ``exchange``:

- each runtime exchange: ``check`` (its fields against the plan), ``start`` (holding, with
  the ``mpi`` transport, ``post`` of the receives, ``pack``, ``post`` of the sends and
  ``self-copies``) and ``finish`` (``wait`` and ``unpack``; GHEX packs and unpacks inside its
  own post and wait), with the dim, the fields (position, dtype, shape), byte counts and peer
  ranks;
- each call of a compiled step (category ``step``) and, in a step built while profiling was
  on, what runs inside it, timed by the generated code itself (``compiled/timers.py``): each
  state of its graph that does work (category ``state``: the stencils, with the pack and
  unpack maps fused into them) and each exchange tasklet (``post``, ``wait``); in a GPU step
  also each state's kernels on the device (category ``device``, CUDA events on the program's
  stream). A step built with profiling off holds no timer code; the build cache keeps the
  two builds apart.

A profile ends when the device work that GPU steps launched inside it has (its one wait for
the device), so their device events lie inside it. When the profile ends (collectively over
its communicator, on a duplicate of its own), the ranks measure their clock offsets to rank 0
(ping-pongs, the one of shortest round trip), rank 0 gathers every rank's events into
``<folder>/trace.json`` (``trace.world<w>.json`` for a profile of some ranks of the world,
``w`` the world rank of its rank 0; Chrome trace format, one process per rank, rank 0's
clock; ``vizviewer <folder>/trace.json`` shows it) and writes ``<folder>/summary.txt``:
per rank the time profiled, in each exchange phase, in compiled steps and outside the
exchanges (stencils and Python), and the slowest rank (the most time outside waits: the one
the others wait for).

Profiling is on inside ``with gh.profile(folder):`` (entered collectively: a rank that
cannot profile is a ``ProfileError`` on every rank), or for a whole run when
``GT4PY_HALO_PROFILE`` or ``[tool.gt4py_halo] profile`` names a folder (from the import of
gt4py_halo to the interpreter's exit, over ``MPI.COMM_WORLD``, confirmed by the ranks at
their first decomposition over all of them: ``agree_on_whole_run``). Off, an exchange pays
one test of a module global per phase.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self

from mpi4py import MPI

from gt4py_halo import _native
from gt4py_halo.config import profile_and_source
from gt4py_halo.decomposition.collective import check_ranks_agree, raise_on_all_ranks
from gt4py_halo.errors import ConfigError, ProfileError, RanksDisagreeError

#: The profile in progress on this process, or None: what the exchanges test (and the C
#: calls of steps and exchanges, ``_native.Repeating``, which run from C only while it is None).
recorder: Recorder | None = None
_native.watch(globals(), "recorder")

#: Levels of Python calls viztracer records below the frame where the profile started.
TRACED_DEPTH = 3
#: Ping-pongs per rank that measure its clock offset to rank 0.
CLOCK_SAMPLES = 16
#: Phases the summary has a column for, in order (``exchange``: GHEX's blocking exchange in
#: a compiled step, all phases in one call).
PHASES = ("check", "pack", "post", "self-copies", "wait", "unpack", "exchange")


class Recorder:
    """Adds events to this rank's viztracer trace. ``now()`` is viztracer's clock
    (microseconds); the timers in compiled steps read ``CLOCK_MONOTONIC``, which viztracer's
    clock follows at an offset (and, counting processor cycles, may drift from): measured
    when the profile begins and ends, and their events moved onto viztracer's clock."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer
        self.now: Callable[[], float] = tracer.getts
        self._pid = os.getpid()
        self._tid = threading.get_native_id()
        #: Drains of the compiled steps called while profiling, by library.
        self.compiled_events: dict[int, Callable[[], list[dict]]] = {}
        self._monotonic_offsets = [_monotonic_offset(self.now)]

    def event(self, name: str, start: float, args: dict, category: str = "exchange") -> float:
        """Record phase ``name`` from ``start`` until now; returns now (the next phase's
        start)."""
        end = self.now()
        self._tracer.add_raw(
            {
                "ph": "X",
                "cat": category,
                "name": name,
                "ts": start,
                "dur": end - start,
                "pid": self._pid,
                "tid": self._tid,
                "args": args,
            }
        )
        return end

    def drain_compiled(self) -> list[dict]:
        """The compiled steps' events (on ``CLOCK_MONOTONIC``); in GPU steps this waits for
        the device work they launched, whose device events it holds."""
        return [event for drain in self.compiled_events.values() for event in drain()]

    def events(self, compiled: list[dict]) -> list[dict]:
        """Everything recorded on this rank: viztracer's events and ``compiled``, the
        compiled steps' (``drain_compiled``) moved onto viztracer's clock."""
        self._monotonic_offsets.append(_monotonic_offset(self.now))
        (t0, o0), (t1, o1) = self._monotonic_offsets
        slope = (o1 - o0) / (t1 - t0) if t1 > t0 else 0.0
        self._tracer.parse()
        found = list(self._tracer.data["traceEvents"])
        for event in compiled:
            ts = event["ts"] + o0 + slope * (event["ts"] - t0)
            found.append(dict(event, ts=ts, pid=self._pid, tid=self._tid))
        return found


class profile:  # lower case: used as `with gh.profile(...)`, like a function
    """``with gh.profile("profiles/run1"):`` — profile what runs inside, on every rank of
    ``comm`` (default ``MPI.COMM_WORLD``); entered and left by all of them. A folder
    configured (``GT4PY_HALO_PROFILE``, ``[tool.gt4py_halo] profile``) profiles the whole run
    instead, and no ``gh.profile`` inside it."""

    def __init__(self, folder: str | os.PathLike | None = None, comm: MPI.Comm | None = None):
        path = None if folder is None else os.fspath(folder)
        if path is None or not path.strip():  # (blank: no folder, as where configured)
            raise ProfileError(
                f"gh.profile({'' if folder is None else repr(folder)}) needs a folder: "
                "gh.profile('profiles/run1') (a folder configured by GT4PY_HALO_PROFILE or "
                "[tool.gt4py_halo] profile profiles the whole run)"
            )
        self.folder = Path(path).absolute()  # where the run started, whatever it does
        self._named = path  # as given: what the ranks compare (mounts may differ)
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self._comm: MPI.Comm | None = None  # its own, while on
        self._tracer: Any = None
        self._began = 0.0
        self._configured_by: str | None = None  # a whole run's: the setting that asked for it

    def __enter__(self) -> Self:
        """Collectively: a ``ProfileError`` on every rank if one cannot profile (a profile on
        already, no viztracer, rank 0 cannot make the folder), a ``RanksDisagreeError`` if
        the ranks name different folders (rank 0's alone would be written), else the profile
        is on."""
        raise_on_all_ranks(self.comm, self._cannot_start(), ProfileError)
        check_ranks_agree(self.comm, "gh.profile", folder=self._named)
        # (made once the ranks agree: a refused profile leaves no folder behind)
        problem = self._folder_problem() if self.comm.rank == 0 else None
        raise_on_all_ranks(self.comm, problem, ProfileError)
        self._comm = self.comm.Dup()  # the clock ping-pongs never meet the user's receives
        self._begin()
        return self

    def _cannot_start(self) -> str | None:
        if recorder is not None and _whole_run is not None:
            return (
                f"the whole run is profiled into {_whole_run._named} (set by "
                f"{_whole_run._configured_by}), and profiles do not nest: drop that setting, or "
                "this gh.profile"
            )
        if recorder is not None:
            return "a profile is already on in this process (profiles do not nest)"
        try:
            import viztracer  # noqa: F401
        except ImportError as error:
            return f"profiling needs viztracer: pip install 'gt4py_halo[profile]' ({error})"
        return None

    def _folder_problem(self) -> str | None:
        """Why rank 0 could not write the profile's files, found before anything is profiled."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return f"cannot make the profile's folder {self.folder}: {error}"
        if not os.access(self.folder, os.W_OK | os.X_OK):
            return f"cannot write into the profile's folder {self.folder}"
        return None

    def _begin(self) -> None:
        """This rank's part of starting the profile: viztracer on, the recorder set."""
        global recorder
        from viztracer import VizTracer

        self._tracer = VizTracer(
            max_stack_depth=TRACED_DEPTH,
            ignore_c_function=True,
            exclude_files=[str(Path(__file__).parent)],  # its own events say more
            register_global=False,
            verbose=0,
        )
        recorder = Recorder(self._tracer)
        self._tracer.start()
        self._began = recorder.now()

    def _stop(self) -> list[dict]:
        """This rank's part of ending the profile: viztracer off, the recorder gone; what it
        recorded."""
        global recorder
        # the profile ends when the device work launched inside it has: its events lie inside
        compiled = recorder.drain_compiled()
        recorder.event("profile", self._began, {"folder": str(self.folder)}, "profile")
        self._tracer.stop()
        events, recorder = recorder.events(compiled), None
        return events

    def __exit__(self, *exc: object) -> None:
        """Collectively: every rank's events to rank 0, which writes the files; a
        ``ProfileError`` on every rank if it could not."""
        events, comm = self._stop(), self._comm
        offset = _clock_offset(comm, self._tracer.getts)
        gathered = comm.gather((events, offset, MPI.COMM_WORLD.rank), root=0)
        problem = None
        if comm.rank == 0:
            whole = comm.size == MPI.COMM_WORLD.size
            # profiles of parts of the world into one folder: named by their first world rank
            suffix = "" if whole else f".world{gathered[0][2]}"
            try:
                merged = merge(gathered, whole)
                with open(self.folder / f"trace{suffix}.json", "w") as f:
                    json.dump(merged, f)
                (self.folder / f"summary{suffix}.txt").write_text(summary(merged))
            except OSError as error:
                problem = f"cannot write the profile into {self.folder}: {error}"
        self._comm = None
        try:  # the files are there (or the error on every rank) when the profile has ended
            raise_on_all_ranks(comm, problem, ProfileError)
        finally:
            comm.Free()


def merge(per_rank: Iterable[tuple[list[dict], float, int]], whole: bool = True) -> dict:
    """One Chrome trace of every rank's events (with its clock offset and world rank):
    process ``rank`` (named so, with the world rank where the profile's ranks are not the
    whole world; sorted by rank), times on rank 0's clock."""
    merged: list[dict] = []
    for rank, (events, offset, world) in enumerate(per_rank):
        merged += [
            {
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "name": "process_name",
                "args": {"name": f"rank {rank}" if whole else f"rank {rank} (world {world})"},
            },
            {
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "name": "process_sort_index",
                "args": {"sort_index": rank},
            },
        ]
        for event in events:
            if event["ph"] == "M" and event["name"] in ("process_name", "process_sort_index"):
                continue
            event = dict(event, pid=rank)
            if "ts" in event:
                event["ts"] = event["ts"] - offset
            merged.append(event)
    return {"traceEvents": merged, "displayTimeUnit": "ns"}


def summary(trace: dict) -> str:
    """Per rank: the time profiled, in each exchange phase, in compiled steps, in stencils
    and Python (outside the exchange phases) and outside waits; and the slowest rank."""
    ranks: dict[int, dict[str, float]] = collections.defaultdict(
        lambda: collections.defaultdict(float)
    )
    for event in trace["traceEvents"]:
        if event["ph"] != "X":
            continue
        rank, category = event["pid"], event.get("cat")
        if category == "profile":
            ranks[rank]["profiled"] += event["dur"]
        elif category == "exchange" and event["name"] in PHASES:
            ranks[rank][event["name"]] += event["dur"]
        elif category == "step":
            ranks[rank]["compiled steps"] += event["dur"]
    columns = ["profiled", *PHASES, "compiled steps", "stencils and Python", "outside waits"]
    lines = [
        "gt4py_halo profile: time per rank in ms (exchange phases summed over all exchanges,",
        "compiled steps' included; stencils and Python: outside the exchange phases; outside",
        "waits: outside wait and exchange, the phases that wait for other ranks)",
        "",
        "| rank | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    outside_waits = {}
    for rank in sorted(ranks):
        times = ranks[rank]
        profiled = times["profiled"]
        in_phases = sum(times[p] for p in PHASES)
        outside_waits[rank] = profiled - times["wait"] - times["exchange"]
        row = [profiled, *(times[p] for p in PHASES), times["compiled steps"]]
        row += [profiled - in_phases, outside_waits[rank]]
        lines.append(f"| {rank} | " + " | ".join(f"{t / 1000:.3f}" for t in row) + " |")
    if outside_waits:
        slowest = max(outside_waits, key=outside_waits.get)
        lines += [
            "",
            f"slowest rank: {slowest} (the most time outside waits: the others wait for it)",
        ]
    return "\n".join(lines) + "\n"


def _monotonic_offset(now: Callable[[], float]) -> tuple[float, float]:
    """A reading of ``CLOCK_MONOTONIC`` (microseconds) and the offset of ``now`` to it there,
    from the tightest of a few bracketing reads."""
    samples = []
    for _ in range(CLOCK_SAMPLES):
        before = time.monotonic_ns() / 1000
        ours = now()
        after = time.monotonic_ns() / 1000
        samples.append((after - before, (before + after) / 2, ours - (before + after) / 2))
    _, monotonic, offset = min(samples)
    return monotonic, offset


def _clock_offset(comm: MPI.Comm, now: Callable[[], float]) -> float:
    """This rank's clock ``now`` minus rank 0's, from the ping-pong of shortest round trip
    with rank 0 (its error is at most half that round trip)."""
    best = (float("inf"), 0.0)
    for peer in range(1, comm.size):
        for _ in range(CLOCK_SAMPLES):
            if comm.rank == 0:
                sent = now()
                comm.send(None, dest=peer, tag=0)
                theirs = comm.recv(source=peer, tag=0)
                back = now()
                comm.send((back - sent, theirs - (sent + back) / 2), dest=peer, tag=0)
            elif comm.rank == peer:
                comm.recv(source=0, tag=0)
                comm.send(now(), dest=0, tag=0)
                best = min(best, comm.recv(source=0, tag=0))
    return best[1] if comm.rank else 0.0


#: The run's profile from the configuration, while on.
_whole_run: profile | None = None
#: Why the configuration could not be read at import: raised at each decomposition made
#: (``agree_on_whole_run``), on every rank of it, not by the import (which would leave
#: ``python -m gt4py_halo`` nothing to report it with)
_unreadable: ConfigError | None = None


def _profile_whole_run() -> None:
    """A profile from now to the interpreter's exit, where the configuration asks for one.

    Started on this rank alone (an import is no collective): the ranks confirm that they all
    profile at the first decomposition made over all of them (``agree_on_whole_run``), and
    only a confirmed profile is gathered at the exit; one never confirmed is dropped there,
    with a word on stderr, as a gather then could wait for ranks that do not profile."""
    global _whole_run, _unreadable
    try:
        folder, source = profile_and_source()
    except ConfigError as error:
        _unreadable = error
        return
    if folder is None:
        return
    whole = profile(folder)
    whole._configured_by = source
    problem = whole._cannot_start()
    if problem is not None:
        raise ProfileError(problem)
    whole._begin()
    _whole_run = whole
    atexit.register(_end_whole_run)  # before mpi4py's own exit handler finalizes MPI


def agree_on_whole_run(comm: MPI.Comm) -> None:
    """Collectively over ``comm`` (a decomposition's): a ``RanksDisagreeError`` on every rank
    if some profile the whole run and others do not, or into other folders (those that do
    drop their profile, so that no exit waits for the others), a ``ProfileError`` if rank 0
    cannot write it. Over all ranks of the world, the profile is confirmed: it gets its
    communicator."""
    whole = _whole_run
    confirming = whole is not None and whole._comm is None and comm.size == MPI.COMM_WORLD.size
    unreadable = None if _unreadable is None else str(_unreadable)
    everyone = comm.allgather((None if whole is None else whole._named, unreadable))
    if any(u for _, u in everyone):
        if _unreadable is not None:
            raise ConfigError(str(_unreadable))
        raise ConfigError(
            "; ".join(f"rank {rank}: {u}" for rank, (_, u) in enumerate(everyone) if u)
        )
    on = [rank for rank, (folder, _) in enumerate(everyone) if folder is not None]
    folders = {folder for folder, _ in everyone if folder is not None}
    if (on and len(on) < comm.size) or len(folders) > 1:
        _drop_whole_run()
        where = "; ".join(f"rank {rank}: {everyone[rank][0]}" for rank in on[:8])
        raise RanksDisagreeError(
            "ranks disagree on profiling the whole run (GT4PY_HALO_PROFILE, [tool.gt4py_halo] "
            f"profile): on at ranks {_ranks(on)} of {comm.size} ({where}); the profile is "
            "dropped"
        )
    if confirming:  # (on every rank alike: they agree) the folder made once they do
        mine = whole._folder_problem() if MPI.COMM_WORLD.rank == 0 else None
        problem = next((p for p in comm.allgather(mine) if p is not None), None)
        if problem is not None:
            _drop_whole_run()
            raise ProfileError(problem)
        whole._comm = MPI.COMM_WORLD.Dup()
        # a program that finalizes MPI itself ends the profile there, while MPI still works:
        # MPI_Finalize deletes MPI_COMM_SELF's attributes first, on every rank
        ending = MPI.Comm.Create_keyval(delete_fn=_end_at_finalize)
        MPI.COMM_SELF.Set_attr(ending, None)


def _drop_whole_run() -> None:
    """The whole-run profile off, unwritten (so that no exit waits for the other ranks)."""
    global _whole_run
    if _whole_run is not None:
        _whole_run._stop()
        _whole_run = None


def _ranks(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:8]))
    return shown + (f" (and {len(ranks) - 8} more)" if len(ranks) > 8 else "")


def _end_whole_run() -> None:
    """At the interpreter's exit, or at ``MPI_Finalize`` if the program calls it first: the
    whole-run profile written (collectively), or dropped with a word on stderr."""
    global _whole_run
    whole, _whole_run = _whole_run, None
    if whole is None:
        return
    if whole._comm is None or MPI.Is_finalized():
        whole._stop()
        why = (
            "MPI was finalized first"
            if whole._comm is not None
            else "the ranks never confirmed that they all profile (they do at the first "
            "decomposition made over all ranks of MPI.COMM_WORLD)"
        )
        print(
            f"gt4py_halo: the whole-run profile into {whole.folder} is not written: {why}",
            file=sys.stderr,
        )
        return
    whole.__exit__(None, None, None)


def _end_at_finalize(*_: object) -> None:
    """``_end_whole_run`` from ``MPI_Finalize``: an error is said, not raised into MPI."""
    try:
        _end_whole_run()
    except Exception as error:  # noqa: BLE001
        print(f"gt4py_halo: {type(error).__name__}: {error}", file=sys.stderr)
