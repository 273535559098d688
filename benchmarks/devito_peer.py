"""Devito against our compiled step: the halo-exchange overhead of a 2-D diffusion step.

The step is explicit 5-point diffusion, ``u' = u + 0.2 (u[i+1] + u[i-1] + u[j+1] + u[j-1] -
4 u)``, on an NxN grid of float64 cut in two blocks (2 ranks), halo 1, not periodic (outside
the grid: zeros). Each cuts the axis its arrays hold with the larger stride, so that a halo
across the cut is one contiguous row: Devito its first (C order), ours the second, ``J``
(GT4Py's default fields hold ``I`` with unit stride; cut across ``I``, a halo holds one cell
per cache line). What is compared is each one's *exchange overhead per step*: the time per
step of the step with its halo exchange, minus that of the same step without one (the lower
bound: the computation alone on the rank's block).

- ours: a ``@gh.program`` of two steps (exchange ``u``, diffuse ``u`` into ``v``, exchange
  ``v``, diffuse ``v`` into ``u``; the demo's GT4Py program, ``examples/diffusion_2d.py``, on
  the DaCe CPU backend, GT4Py's default fields), called from Python; without exchange: the
  same ``@gh.program`` without the two exchanges. Ours in two modes, as Devito's: the
  exchange before the stencil (``blocking``), and ``overlapped``: the exchange started, the
  columns that read no halo computed while the messages travel, the exchange finished, the
  two columns beside the cut computed (three stencil calls instead of one; the same bits). And
  ``looped``: the blocking steps with the time loop inside the ``@gh.program`` (``for _ in
  range(count)``, the count an argument), one call for all of a run's steps as Devito's
  ``apply`` makes; without exchange: the same loop without the exchanges. Each mode with each
  of our transports: ``mpi``, messages as Devito's, and ``shm``, each rank copying its halo
  from its neighbour's field in the node's shared memory (every mode's fields come from
  ``gh.shared_allocator``); the report gives our best mode overall and our best over MPI.
- Devito (4.8.23, C without OpenMP, in a venv of its own: it pins another NumPy): an
  ``Operator`` of ``Eq(u.forward, u + 0.2 * u.laplace)`` on the 2-rank grid, built in each
  MPI mode below (``configuration['mpi']``, what ``DEVITO_MPI`` sets), applied for a number of
  time steps; without exchange: the same operator without MPI on one rank's block.

Each is timed as the slope of time against steps (runs of S and 2S steps), which leaves out
what a call costs once (Devito's ``apply`` argument processing); the slowest rank's time per
sample; medians over the samples of all rounds. Rounds alternate the two processes (who goes
first swaps). Both first run 10 steps from the same initial condition and report the global
sum of squares, which must agree (to rounding: Devito orders the stencil's sums its own way).

Run (it calls mpirun itself, 2 ranks; the Devito venv: ``make bench`` makes it):
    python benchmarks/devito_peer.py --devito-python .venv-devito/bin/python [--rounds 5]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODES = ("basic", "diag", "diag2", "full")
#: our transports: MPI as Devito's, and ``shm`` (the ranks' fields in the node's shared memory)
TRANSPORTS = ("mpi", "shm")
#: our modes, each with what it is compared with: the same calls without the exchanges
STEP_MODES = {
    "blocking": "no exchange",
    "overlapped": "no exchange",
    "looped": "looped, no exchange",
}
#: each mode with each transport ("blocking, mpi", ...), and its baseline
WITHOUT = {f"{m}, {t}": without for t in TRANSPORTS for m, without in STEP_MODES.items()}
OUR_MODES = tuple(WITHOUT)
OVER_MPI = tuple(f"{m}, mpi" for m in STEP_MODES)
#: the mode whose bits every other one must compute
REFERENCE = OUR_MODES[0]
SIZES = (32, 256)
#: steps per sample (the short run; the long one has twice as many), by grid size
STEPS = {32: 2000, 256: 200}
CHECK_STEPS = 10  # steps before the checksum: even (ours makes two per call)


def initial(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Exactly representable values of the global indices (the same bits on any cut)."""
    return ((3 * i + 5 * j) % 11) / 10.0


def slope(comm, run: Callable[[int], None], steps: int) -> float:
    """Seconds per step of ``run(n)`` (``n`` steps): (T(2S) - T(S)) / S, slowest rank."""
    from mpi4py import MPI

    spans = []
    for n in (steps, 2 * steps):
        comm.Barrier()
        t0 = time.perf_counter()
        run(n)
        spans.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return (spans[1] - spans[0]) / steps


def sampled(comm, runs: dict[str, Callable[[int], None]], steps: int, repeats: int) -> dict:
    """Median seconds per step of each run, taking turns ``repeats`` times (after a run of
    each untimed: a first call loads and sets up what later calls reuse)."""
    for run in runs.values():
        run(steps)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(slope(comm, runs[name], steps))
    return {name: statistics.median(s) for name, s in samples.items()}


def ours(n: int, steps: int, repeats: int) -> dict:
    """Worker, under mpirun in our venv: ours with and without exchange, and the checksum."""
    import importlib.util

    import gt4py.next as gtx
    from mpi4py import MPI

    import gt4py_halo as gh

    # the demo's GT4Py program: the same stencil, compiled once on rank 0
    spec = importlib.util.spec_from_file_location("demo", HERE.parent / "examples/diffusion_2d.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    diffusion = demo.diffusion_step
    comm = MPI.COMM_WORLD
    demo.compile_stencil(comm)

    d = gh.CartesianDecomposition((n, n), halo=1, periodic=False, proc_grid=(1, comm.size))
    bounds = [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]
    inner = [gtx.int32(d.owned[1].start + 1), gtx.int32(d.owned[1].stop - 1)]

    def runner(program, *extra):  # k steps, two per call
        def run(k: int, a, b) -> None:
            for _ in range(k // 2):
                program(a, b, *bounds, *extra)

        return run

    def in_one_call(program):  # k steps in one call
        def run(k: int, a, b) -> None:
            program(a, b, *bounds, gtx.int32(k // 2))

        return run

    def exchanging(ex: gh.Exchange) -> dict:
        """Our modes with the exchanges of ``ex``, and its two exchanges alone."""

        @gh.program
        def step(u, v, i0, i1, j0, j1):
            ex.exchange(u)
            diffusion(u, v, i0, i1, j0, j1)
            ex.exchange(v)
            diffusion(v, u, i0, i1, j0, j1)

        @gh.program
        def step_overlapped(u, v, i0, i1, j0, j1, b0, b1):
            # columns b0..b1 read no halo: computed while the messages travel
            h = ex.start(u)
            diffusion(u, v, i0, i1, b0, b1)
            h.finish()
            diffusion(u, v, i0, i1, j0, b0)
            diffusion(u, v, i0, i1, b1, j1)
            h = ex.start(v)
            diffusion(v, u, i0, i1, b0, b1)
            h.finish()
            diffusion(v, u, i0, i1, j0, b0)
            diffusion(v, u, i0, i1, b1, j1)

        @gh.program
        def looped(u, v, i0, i1, j0, j1, count):
            for _ in range(count):
                ex.exchange(u)
                diffusion(u, v, i0, i1, j0, j1)
                ex.exchange(v)
                diffusion(v, u, i0, i1, j0, j1)

        @gh.program
        def exchange_alone(u, v, i0, i1, j0, j1):
            ex.exchange(u)
            ex.exchange(v)

        return {
            "blocking": runner(step),
            "overlapped": runner(step_overlapped, *inner),
            "looped": in_one_call(looped),
            "exchange alone": runner(exchange_alone),
        }

    @gh.program
    def looped_without_exchange(u, v, i0, i1, j0, j1, count):
        for _ in range(count):
            diffusion(u, v, i0, i1, j0, j1)
            diffusion(v, u, i0, i1, j0, j1)

    @gh.program
    def step_without_exchange(u, v, i0, i1, j0, j1):
        diffusion(u, v, i0, i1, j0, j1)
        diffusion(v, u, i0, i1, j0, j1)

    i, j = np.meshgrid(*(np.arange(s.start, s.stop) for s in d.global_slices), indexing="ij")
    u0 = np.zeros(d.allocated_shape)
    u0[d.owned] = initial(i, j)
    # every mode's fields in the node's shared memory, which `shm` reads (`mpi` takes any)
    pool = gh.shared_allocator(d, 8 * u0.nbytes + 2**20)  # GT4Py pads: room to spare

    def fresh() -> tuple:
        return tuple(gtx.as_field([demo.I, demo.J], x, allocator=pool) for x in (u0, 0 * u0))

    runs = {
        f"{mode}, {transport}": run
        for transport in TRANSPORTS
        for mode, run in exchanging(gh.make_exchange(d, backend=transport)).items()
    }
    runs["no exchange"] = runner(step_without_exchange)
    runs["looped, no exchange"] = in_one_call(looped_without_exchange)
    u, v = fresh()
    runs[REFERENCE](CHECK_STEPS, u, v)
    checksum = comm.allreduce(float((u.asnumpy()[d.owned] ** 2).sum()))
    for mode in OUR_MODES[1:]:  # the same steps: the same bits as REFERENCE
        w, x = fresh()
        runs[mode](CHECK_STEPS, w, x)
        if not np.array_equal(w.asnumpy()[d.owned], u.asnumpy()[d.owned]):
            raise SystemExit(f"rank {comm.rank}: the {mode} step computed another result")
    for mode in [m for m in runs if m not in OUR_MODES]:  # built before timing (same order)
        runs[mode](2, u, v)

    times = sampled(
        comm, {mode: functools.partial(run, a=u, b=v) for mode, run in runs.items()}, steps, repeats
    )
    return {"checksum": checksum, **times}


def devito(n: int, steps: int, repeats: int) -> dict:
    """Worker, under mpirun in Devito's venv: each MPI mode, the step without MPI on the
    rank's block, and the checksum (from the first mode)."""
    from devito import Eq, Grid, Operator, TimeFunction, configuration
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    configuration["language"] = "C"  # one thread per rank, as ours
    configuration["log-level"] = "ERROR"

    def build(mode, shape, distributed):
        configuration["mpi"] = mode
        grid = Grid(
            shape=shape,
            extent=tuple(s - 1 for s in shape),  # spacing 1: u.laplace is the 5-point sum
            dtype=np.float64,
            **({"comm": comm} if distributed else {}),
        )
        u = TimeFunction(name="u", grid=grid, space_order=2, dtype=np.float64)
        return u, Operator(Eq(u.forward, u + 0.2 * u.laplace))

    runs, checksum = {}, None
    for mode in MODES:
        u, op = build(mode, (n, n), True)
        if checksum is None:
            i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            u.data[0, :, :] = initial(i, j)  # global indices: each rank sets its block
            op.apply(time_M=CHECK_STEPS - 1)
            local = np.asarray(u.data_ro_domain._local[CHECK_STEPS % 2])
            checksum = comm.allreduce(float((local**2).sum()))
        runs[mode] = lambda k, op=op: op.apply(time_M=k - 1)
    block = (n // comm.size + (comm.rank < n % comm.size), n)
    _, alone = build(0, block, False)
    runs["no exchange"] = lambda k: alone.apply(time_M=k - 1)
    return {"checksum": checksum, **sampled(comm, runs, steps, repeats)}


def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    result = (ours if args.worker == "ours" else devito)(args.size, STEPS[args.size], args.repeats)
    if MPI.COMM_WORLD.rank == 0:
        print("RESULT " + json.dumps(result), flush=True)


def run_worker(python: str, side: str, n: int, repeats: int) -> dict:
    """One worker process on 2 ranks (the mpirun beside ``python``); its result."""
    mpirun = str(Path(python).parent / "mpirun")
    command = [mpirun, "-n", "2", python, "-O", __file__, "--worker", side, "--size", str(n)]
    command += ["--repeats", str(repeats)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PATH"] = f"{Path(python).parent}:{env['PATH']}"  # Devito's JIT calls mpicc
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def us(seconds: float) -> str:
    return f"{1e6 * seconds:.2f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devito-python", help="the Python of a venv with devito==4.8.23")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5, help="samples per run and round")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--json", help="write the results there too")
    parser.add_argument("--worker", choices=("ours", "devito"), help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if not args.devito_python:
        parser.error("--devito-python is needed")
    sizes = [int(s) for s in args.sizes.split(",")]
    sides = {"ours": sys.executable, "devito": args.devito_python}
    found: dict[int, dict[str, list[dict]]] = {n: {side: [] for side in sides} for n in sizes}
    t0 = time.perf_counter()
    for r in range(args.rounds):
        for n in sizes:
            for side in list(sides)[:: 1 if r % 2 == 0 else -1]:
                found[n][side].append(run_worker(sides[side], side, n, args.repeats))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(
        f"Devito 4.8.23 against our compiled step, 2 ranks, {args.rounds} rounds x "
        f"{args.repeats} samples, {datetime.date.today()}, "
        f"{(time.perf_counter() - t0) / 60:.1f} min\n"
    )
    print("| grid | ours: step (best mode) | ours: exchange overhead | Devito: step (best mode) "
          "| Devito: exchange overhead | ours / Devito |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    results = {}
    for n in sizes:
        med = {
            side: {k: statistics.median(run[k] for run in runs) for k in runs[0] if k != "checksum"}
            for side, runs in found[n].items()
        }
        sums = [run["checksum"] for runs in found[n].values() for run in runs]
        if not np.allclose(sums, sums[0], rtol=1e-12, atol=0):
            raise SystemExit(f"{n}x{n}: the two do not compute the same step: {sums}")
        ours = {m: med["ours"][m] - med["ours"][WITHOUT[m]] for m in OUR_MODES}
        overheads = {m: med["devito"][m] - med["devito"]["no exchange"] for m in MODES}
        mine, best = min(ours, key=ours.get), min(overheads, key=overheads.get)
        over_mpi = min(OVER_MPI, key=ours.get)
        results[n] = {
            "ours": med["ours"],
            "devito": med["devito"],
            "best": best,
            "mine": mine,
            "mine over mpi": over_mpi,
            "overhead": {
                "ours": ours[mine],
                "ours over mpi": ours[over_mpi],
                "devito": overheads[best],
            },
        }
        for m in dict.fromkeys((mine, over_mpi)):
            print(
                f"| {n}x{n} | {us(med['ours'][m])} ({m}) | {us(ours[m])} "
                f"| {us(med['devito'][best])} ({best}) | {us(overheads[best])} "
                f"| {ours[m] / overheads[best]:.2f}x |"
            )
    for side, modes, without in (
        ("ours", OUR_MODES, WITHOUT),
        ("devito", MODES, dict.fromkeys(MODES, "no exchange")),
    ):
        bases = list(dict.fromkeys(without.values()))
        print(f"\n{side} per mode, time per step (exchange overhead):\n")
        print("| grid | " + " | ".join([*modes, *bases]) + " |")
        print("|---|" + "---|" * (len(modes) + len(bases)))
        for n in sizes:
            t = results[n][side]
            cells = [f"{us(t[m])} ({us(t[m] - t[without[m]])})" for m in modes]
            cells += [us(t[b]) for b in bases]
            print(f"| {n}x{n} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
