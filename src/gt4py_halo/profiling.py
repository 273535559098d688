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
its communicator), the ranks measure their clock
offsets to rank 0 (ping-pongs, the one of shortest round trip), rank 0 gathers every rank's
events into ``<folder>/trace.json`` (Chrome trace format, one process per rank, rank 0's
clock; ``vizviewer <folder>/trace.json`` shows it) and writes ``<folder>/summary.txt``:
per rank the time profiled, in each exchange phase, in compiled steps and outside the
exchanges (stencils and Python), and the slowest rank (the most time outside waits: the one
the others wait for).

Profiling is on inside ``with gh.profile(folder):``, or for a whole run when
``GT4PY_HALO_PROFILE`` or ``[tool.gt4py_halo] profile`` names a folder (from the import of
gt4py_halo to the interpreter's exit, over ``MPI.COMM_WORLD``). Off, an exchange pays one
test of a module global per phase.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self

from mpi4py import MPI

from gt4py_halo.config import profile_and_source
from gt4py_halo.errors import BackendUnavailableError, ProfileError

#: The profile in progress on this process, or None: what the exchanges test.
recorder: Recorder | None = None

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
    ``comm`` (default ``MPI.COMM_WORLD``); entered and left by all of them. ``folder=None``
    takes the configured folder (``GT4PY_HALO_PROFILE``, ``[tool.gt4py_halo] profile``)."""

    def __init__(self, folder: str | os.PathLike | None = None, comm: MPI.Comm | None = None):
        path, _ = profile_and_source(folder)
        if path is None:
            raise ProfileError(
                "gh.profile() needs a folder: gh.profile('profiles/run1'), or "
                "GT4PY_HALO_PROFILE, or [tool.gt4py_halo] profile in pyproject.toml"
            )
        self.folder = Path(path).absolute()  # where the run started, whatever it does
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self._tracer: Any = None
        self._began = 0.0

    def __enter__(self) -> Self:
        global recorder
        if recorder is not None:
            raise ProfileError("a profile is already on in this process (profiles do not nest)")
        try:
            from viztracer import VizTracer
        except ImportError as error:
            raise BackendUnavailableError(
                f"profiling needs viztracer: pip install 'gt4py_halo[profile]' ({error})"
            ) from error
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
        return self

    def __exit__(self, *exc: object) -> None:
        global recorder
        # the profile ends when the device work launched inside it has: its events lie inside
        compiled = recorder.drain_compiled()
        recorder.event("profile", self._began, {"folder": str(self.folder)}, "profile")
        self._tracer.stop()
        events, recorder = recorder.events(compiled), None
        offset = _clock_offset(self.comm, self._tracer.getts)
        gathered = self.comm.gather((events, offset), root=0)
        if self.comm.rank == 0:
            self.folder.mkdir(parents=True, exist_ok=True)
            merged = merge(gathered)
            with open(self.folder / "trace.json", "w") as f:
                json.dump(merged, f)
            (self.folder / "summary.txt").write_text(summary(merged))
        self.comm.barrier()  # the files are there when the profile has ended


def merge(per_rank: Iterable[tuple[list[dict], float]]) -> dict:
    """One Chrome trace of every rank's events: process ``rank`` (named so, sorted by rank),
    times on rank 0's clock."""
    merged: list[dict] = []
    for rank, (events, offset) in enumerate(per_rank):
        merged += [
            {
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "name": "process_name",
                "args": {"name": f"rank {rank}"},
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


def _profile_whole_run() -> None:
    """A profile from now to the interpreter's exit, where the configuration asks for one."""
    folder, _ = profile_and_source()
    if folder is None:
        return
    whole = profile(folder)
    whole.__enter__()
    atexit.register(whole.__exit__)  # before mpi4py's own exit handler finalizes MPI
