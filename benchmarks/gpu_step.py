"""Time per model step on a GPU: a step compiled with its halo exchanges (``@gh.program``,
``device="gpu"``) against the same step from Python, in the method of the ICON4Py
halo-exchange investigation (full step, no exchange, sync instead of exchange).

A *step* exchanges ``u``, runs a 5-point stencil (a DaCe map: a GPU kernel) writing ``v`` on
the owned cells, then exchanges ``v`` split-phase around nothing; one *iteration* is two steps
(``u -> v``, then ``v -> u``). Per step (half an iteration), slowest rank, medians:

- ``a-compiled``: one ``@gh.program`` of the iteration, exchanges included (MPI transport:
  pack kernels, one stream wait, ``MPI_Startall``, unpack kernels, all in the SDFG);
- ``b-python``: the same stencils compiled without exchanges, ``ex.exchange`` of the CuPy
  fields (the runtime exchange) between them from Python;
- ``c-noex``: the stencils alone (lower bound);
- ``d-sync``: the stencils, with a stream synchronization and a barrier where ``a`` exchanges
  (the host synchronization alone);
- ``n-compiled-nccl``, ``m-python-nccl``: ``a`` and ``b`` with the ``nccl`` transport, where it
  is installed and every rank has a GPU of its own (NCCL refuses two ranks on one GPU).

It also counts the host waits for the stream in the compiled steps' generated code
(``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``cudaEventSynchronize``) per
exchange, and checks that all variants with exchanges give the same bits.

Run (2 ranks may share one GPU for MPI):  mpirun -n 2 python -m mpi4py benchmarks/gpu_step.py
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import cupy
import dace
import numpy as np
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo import transports
from gt4py_halo.compiled.program import codegen_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_exchange import fmt_time, interleaved_samples

EXCHANGES_PER_ITERATION = 4
SYNCS = re.compile(r"cuda(Stream|Device|Event)Synchronize\(")


def stencil(a, b):
    for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
        b[i, j] = 0.25 * (a[i + 1, j] + a[i - 1, j] + a[i, j + 1] + a[i, j - 1])


def compiled_iteration(ex: gh.Exchange, comm: MPI.Comm) -> object:
    def with_exchanges(u, v):
        ex.exchange(u)
        stencil(u, v)
        first = ex.start(v)
        first.finish()
        ex.exchange(v)
        stencil(v, u)
        second = ex.start(u)
        second.finish()

    return gh.program(with_exchanges, comm=comm, device="gpu")


def host_waits(compiled: object, fields: list) -> int:
    """The host waits for the stream in the code generated for ``compiled``."""
    with codegen_config("gpu"):  # as the step's build generates it
        code = compiled.to_sdfg(*fields).generate_code()
    host = next(c.clean_code for c in code if c.language == "cpp" and "__program_" in c.clean_code)
    return len(SYNCS.findall(host))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="global cells per axis")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--iterations", type=int, default=50, help="iterations per sample")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    gpus = cupy.cuda.runtime.getDeviceCount()
    cupy.cuda.Device(comm.rank % gpus).use()
    d = gh.CartesianDecomposition((args.size, args.size), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="mpi")
    compiled = compiled_iteration(ex, comm)
    stencils = gh.program(stencil, comm=comm, device="gpu")
    rng = np.random.default_rng(comm.rank)

    def fresh():
        return [cupy.asarray(rng.random(d.allocated_shape)) for _ in range(2)]

    def python_step(u, v, exchange):
        exchange(u)
        stencils(u, v)
        exchange(v)
        exchange(v)
        stencils(v, u)
        exchange(u)

    def sync_only(_):
        cupy.cuda.get_current_stream().synchronize()
        comm.Barrier()

    variants = {
        "a-compiled": lambda u, v: compiled(u, v),
        "b-python": lambda u, v: python_step(u, v, ex.exchange),
        "c-noex": lambda u, v: python_step(u, v, lambda _: None),
        "d-sync": lambda u, v: python_step(u, v, sync_only),
    }
    compiled_steps = {"a-compiled": compiled}
    if transports.installed("nccl") and comm.size <= gpus:
        nccl = gh.make_exchange(d, backend="nccl")
        compiled_steps["n-compiled-nccl"] = compiled_iteration(nccl, comm)
        variants["n-compiled-nccl"] = compiled_steps["n-compiled-nccl"]
        variants["m-python-nccl"] = lambda u, v: python_step(u, v, nccl.exchange)

    # the same bits from every variant with exchanges
    first = fresh()
    exchanging = [n for n in variants if n not in ("c-noex", "d-sync")]
    results = {name: [f.copy() for f in first] for name in exchanging}
    for _ in range(3):
        for name in exchanging:
            variants[name](*results[name])
    for name in exchanging:
        for x, y in zip(results[name], results["a-compiled"]):
            assert cupy.array_equal(x, y), f"{name} differs from a-compiled"
    syncs = {name: host_waits(step, first) for name, step in compiled_steps.items()}

    fields = {name: fresh() for name in variants}

    def batch(name):
        def run():
            for _ in range(args.iterations):
                variants[name](*fields[name])
            cupy.cuda.get_current_stream().synchronize()

        return run

    runs = {name: batch(name) for name in variants}
    for run in runs.values():  # warm up
        run()
    samples = interleaved_samples(comm, runs, dict.fromkeys(runs, 1), args.repeats)
    if comm.rank == 0:
        device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        print(
            f"device: {device}; ranks: {comm.size}; global {args.size}x{args.size}, halo 1, "
            f"float64; local {d.allocated_shape}; {args.repeats} samples of "
            f"{args.iterations} iterations; per step (median, slowest rank)"
        )
        per_step = {k: np.median(v) / args.iterations / 2 for k, v in samples.items()}
        for name, t in per_step.items():
            print(f"  {name:12s} {fmt_time(t)}")
        print(
            f"  exchange overhead per step: compiled {fmt_time(per_step['a-compiled'] - per_step['c-noex'])}, "
            f"python {fmt_time(per_step['b-python'] - per_step['c-noex'])}"
        )
        for name, count in syncs.items():
            print(
                f"host waits for the stream in {name}'s code: {count} for "
                f"{EXCHANGES_PER_ITERATION} exchanges (the step's return included)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
