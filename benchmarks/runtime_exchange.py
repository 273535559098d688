"""Per-exchange time of the runtime halo exchange against hand-written baselines.

Compared, on the same fields of the same decomposition:

- ``ours-mpi``, ``ours-ghex``, ``ours-shm``: ``gh.make_exchange(d, backend).exchange(*fields)``,
  the whole user-facing call (field checks included); ``shm`` copies from the neighbours'
  fields in shared memory, so every implementation's fields live there
  (``gh.shared_allocator``: the same memory for all);
- ``mpi4py``: what a competent user writes by hand with mpi4py and NumPy: a
  dimension-by-dimension exchange over an ``MPI_Cart_create`` communicator, all fields packed
  into one preallocated buffer per face, ``Irecv``/``Isend``/``Waitall``, unpack; a dimension
  with a single periodic block is a plain NumPy copy. Faces span the whole allocated extent of
  the other dimensions, so corners are filled once the last dimension is done;
- ``pyghex``: GHEX's structured regular Python API, with pattern, field descriptors and
  communication object built once: ``co.exchange(buffers).wait()`` per exchange;
- ``compiled-mpi``, ``compiled-ghex``, ``compiled-shm``: a ``@gh.program`` holding the
  exchange alone, lowered with each transport's expansion (MPI: pack maps and persistent
  requests; GHEX: its communication object called from the generated C++; shm: the copies
  from the neighbours' fields in the generated C++), called from Python per exchange;
- with ``--references build/liblimits.so`` (2 ranks), ``benchmarks/limits.c``'s plain C
  references: ``halo copies``, ``ordered``, ``shm in C``, on fields of their own (a sample is
  one call of a batch of them from Python), timed in turn with the rest.

Every implementation of ours and every peer is first checked to fill every halo cell with
the value its owner holds (and so all to agree). Timing then interleaves the implementations:
each sample is one exchange untimed, a barrier and ``batch`` back-to-back exchanges of one
implementation (each sample starts in its own implementation's caches: a steady state of
repeated exchanges), implementations take turns (in an order shuffled each round) for
``--repeats`` rounds. A sample's time is the slowest rank's; the table gives the median over
samples, per exchange.

Run (2 ranks):  mpirun -n 2 python -m mpi4py benchmarks/runtime_exchange.py
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import datetime
import gc
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

import gt4py_halo as gh


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    global_shape: tuple[int, int, int]
    halo: tuple[int, int, int]
    nfields: int

    @property
    def label(self) -> str:
        shape = "x".join(map(str, self.global_shape))
        halo = "(" + ",".join(map(str, self.halo)) + ")"
        return f"{shape}, halo {halo}, {self.nfields} field{'s' if self.nfields > 1 else ''}"

    @property
    def spec(self) -> str:
        """The case as ``benchmarks/limits.c`` takes it (G0,G1,G2,H0,H1,H2,F)."""
        return ",".join(map(str, (*self.global_shape, *self.halo, self.nfields)))


CASES = {
    c.name: c
    for c in (
        Case("small", (32, 32, 8), (1, 1, 0), 1),
        Case("cube", (64, 64, 64), (1, 1, 1), 1),
        Case("wide", (64, 64, 64), (3, 3, 3), 4),
        Case("big", (128, 128, 128), (1, 1, 1), 3),
        Case("large", (128, 128, 80), (3, 3, 0), 10),
    )
}
IMPLEMENTATIONS = (
    "ours-mpi",
    "ours-ghex",
    "ours-shm",
    "mpi4py",
    "pyghex",
    "compiled-mpi",
    "compiled-ghex",
    "compiled-shm",
)
DTYPE = np.float64
#: The C references of ``benchmarks/limits.c`` (its library, ``--references``): their names
#: here and their modes there (its ``enum { COPIES, ORDERED, SHM }``).
REFERENCES = {"halo copies": 0, "ordered": 1, "shm in C": 2}


# --------------------------------------------------------------------------------------------
# Baseline 1: hand-written mpi4py + NumPy
# --------------------------------------------------------------------------------------------


class HandWrittenExchange:
    """Dimension-by-dimension halo exchange, as a user would write it with mpi4py and NumPy.

    Only plain data is taken from the decomposition (process grid, halo widths, local shape):
    the neighbours come from ``MPI_Cart_create`` / ``MPI_Cart_shift``.
    """

    def __init__(self, d: gh.CartesianDecomposition, fields: Sequence[np.ndarray]) -> None:
        self.fields = list(fields)
        self.cart = MPI.COMM_WORLD.Create_cart(d.proc_grid, periods=d.periodic, reorder=False)
        assert self.cart.Get_coords(self.cart.Get_rank()) == list(d.coords)
        shape = d.allocated_shape
        nf = len(fields)
        self.steps: list[Callable[[], None]] = []
        for k, (lo, hi) in enumerate(d.halo):
            if lo == 0 and hi == 0:
                continue
            n = d.owned_shape[k]

            def strip(a: int, b: int, k: int = k) -> tuple[slice, ...]:
                return tuple(slice(a, b) if j == k else slice(None) for j in range(len(shape)))

            # towards +1: my top `lo` owned cells fill the upper neighbour's low halo;
            # towards -1: my bottom `hi` owned cells fill the lower neighbour's high halo
            send_up, recv_lo = strip(n, n + lo), strip(0, lo)
            send_down, recv_hi = strip(lo, lo + hi), strip(lo + n, lo + n + hi)
            if d.proc_grid[k] == 1 and d.periodic[k]:
                self.steps.append(self._local_step(send_up, recv_lo, send_down, recv_hi))
            else:
                below, above = self.cart.Shift(k, 1)
                self.steps.append(
                    self._remote_step(
                        k, below, above, nf, shape, send_up, recv_lo, send_down, recv_hi
                    )
                )

    def _local_step(self, send_up, recv_lo, send_down, recv_hi) -> Callable[[], None]:
        fields = self.fields

        def step() -> None:
            for f in fields:
                f[recv_lo] = f[send_up]
                f[recv_hi] = f[send_down]

        return step

    def _remote_step(
        self, k, below, above, nf, shape, send_up, recv_lo, send_down, recv_hi
    ) -> Callable[[], None]:
        fields, cart = self.fields, self.cart

        def buffer(region: tuple[slice, ...]) -> np.ndarray:
            extents = (len(range(*s.indices(n))) for s, n in zip(region, shape))
            return np.empty((nf, *extents), DTYPE)

        sbuf_up, sbuf_down = buffer(send_up), buffer(send_down)
        rbuf_lo, rbuf_hi = buffer(recv_lo), buffer(recv_hi)
        tag_up, tag_down = 2 * k, 2 * k + 1
        has_below, has_above = below != MPI.PROC_NULL, above != MPI.PROC_NULL

        def step() -> None:
            requests = [
                cart.Irecv(rbuf_lo, source=below, tag=tag_up),
                cart.Irecv(rbuf_hi, source=above, tag=tag_down),
            ]
            for i, f in enumerate(fields):
                sbuf_up[i] = f[send_up]
                sbuf_down[i] = f[send_down]
            requests.append(cart.Isend(sbuf_up, dest=above, tag=tag_up))
            requests.append(cart.Isend(sbuf_down, dest=below, tag=tag_down))
            MPI.Request.Waitall(requests)
            for i, f in enumerate(fields):
                if has_below:  # at a non-periodic boundary the halo is left alone
                    f[recv_lo] = rbuf_lo[i]
                if has_above:
                    f[recv_hi] = rbuf_hi[i]

        return step

    def exchange(self) -> None:
        for step in self.steps:
            step()


# --------------------------------------------------------------------------------------------
# Baseline 2: direct pyghex, structured regular API
# --------------------------------------------------------------------------------------------


class PyGhexExchange:
    """GHEX's structured regular API used directly; everything but the exchange built once."""

    def __init__(self, d: gh.CartesianDecomposition, fields: Sequence[np.ndarray]) -> None:
        from ghex.context import make_context
        from ghex.structured import regular
        from ghex.structured.cartesian_sets import ProductSet, UnitRange

        self.comm = MPI.COMM_WORLD.Dup()
        self.context = make_context(self.comm)
        glob = ProductSet(*(UnitRange(0, n) for n in d.global_shape))
        owned = ProductSet(*(UnitRange(s.start, s.stop) for s in d.global_slices))
        self.domain = regular.DomainDescriptor(d.rank, owned)
        generator = regular.HaloGenerator(glob, d.halo, d.periodic)
        self.pattern = regular.make_pattern(self.context, generator, [self.domain])
        self.co = regular.make_communication_object(self.context)
        offsets = tuple(s.start for s in d.owned)
        self.fields = list(fields)  # GHEX keeps raw pointers: keep the arrays alive
        self.descriptors = [
            regular.make_field_descriptor(self.domain, f, offsets, f.shape) for f in fields
        ]
        self.buffers = [self.pattern(fd) for fd in self.descriptors]

    def exchange(self) -> None:
        self.co.exchange(self.buffers).wait()


# --------------------------------------------------------------------------------------------
# References: plain C (benchmarks/limits.c)
# --------------------------------------------------------------------------------------------


def load_references(path: str) -> ctypes.CDLL:
    """``build/liblimits.so``: ``benchmarks/limits.c``'s references as a library."""
    library = ctypes.CDLL(path)
    library.reference_new.restype = ctypes.c_void_p
    library.reference_new.argtypes = [ctypes.c_char_p, ctypes.c_int]
    library.reference_run.argtypes = [ctypes.c_void_p, ctypes.c_int]
    library.reference_free.argtypes = [ctypes.c_void_p]
    return library


class CReference:
    """A case's C reference (``benchmarks/limits.c``: halo copies, ordered or shm exchange
    in plain C, on fields of its own, 2 ranks), run ``count`` times per call: a sample of it
    is one call from Python, timed as ours are, in turn with ours."""

    def __init__(self, library: ctypes.CDLL, case: Case, mode: int) -> None:
        self._library = library
        self._reference = library.reference_new(case.spec.encode(), mode)  # collective

    def __call__(self, count: int = 1) -> None:
        self._library.reference_run(self._reference, count)

    def free(self) -> None:
        """Collective, as the making."""
        self._library.reference_free(self._reference)


# --------------------------------------------------------------------------------------------
# Harness
# --------------------------------------------------------------------------------------------


def global_values(d: gh.CartesianDecomposition, field_index: int) -> np.ndarray:
    """Every cell of the local array (halo included) as the periodic global grid holds it."""
    axes = []
    for k, n in enumerate(d.global_shape):
        lo = d.halo[k][0]
        local = np.arange(d.allocated_shape[k])
        axes.append((d.global_slices[k].start + local - lo) % n)
    i, j, k = np.meshgrid(*axes, indexing="ij")
    # unique, exactly representable in float64
    return (((field_index + 1) * 1000.0 + i) * 1000.0 + j) * 1000.0 + k


#: Per decomposition, a pool of shared memory its fields are cut from (``fresh_fields``).
_POOLS: dict[int, Any] = {}


def fresh_fields(d: gh.CartesianDecomposition, nfields: int) -> list[np.ndarray]:
    """Owned cells hold their global values, halo cells a sentinel no owned cell holds; in
    the node's shared memory (the ``shm`` transport reads them there), from a pool made per
    decomposition, large enough for a field set per implementation and two more (collective:
    the first call for a decomposition is made by every rank)."""
    pool = _POOLS.get(id(d))
    if pool is None:
        nbytes = (len(IMPLEMENTATIONS) + 2) * nfields * (math.prod(d.allocated_shape) * 8 + 1024)
        pool = _POOLS[id(d)] = gh.shared_allocator(d, nbytes)
    fields = []
    for f in range(nfields):
        a = pool.empty(d.allocated_shape, DTYPE)
        a[...] = -1.0
        a[d.owned] = global_values(d, f)[d.owned]
        fields.append(a)
    return fields


def compiled_exchange(ex: gh.Exchange, nfields: int) -> Callable[..., None]:
    """A ``@gh.program`` of the exchange of ``nfields`` fields alone (DaCe takes no *args:
    one function per field count of ``CASES``)."""

    def exchange_1(u0):
        ex.exchange(u0)

    def exchange_3(u0, u1, u2):
        ex.exchange(u0, u1, u2)

    def exchange_4(u0, u1, u2, u3):
        ex.exchange(u0, u1, u2, u3)

    def exchange_10(u0, u1, u2, u3, u4, u5, u6, u7, u8, u9):
        ex.exchange(u0, u1, u2, u3, u4, u5, u6, u7, u8, u9)

    steps = {1: exchange_1, 3: exchange_3, 4: exchange_4, 10: exchange_10}
    return gh.program(steps[nfields])


#: Compiled exchanges by (implementation, decomposition): built once, by ``verify``.
_COMPILED: dict[tuple[str, int], Callable[..., None]] = {}


def build(name: str, d: gh.CartesianDecomposition, fields: list[np.ndarray]) -> Callable[[], None]:
    if name in ("ours-mpi", "ours-ghex", "ours-shm"):
        ex = gh.make_exchange(d, backend=name.split("-")[1])
        return lambda: ex.exchange(*fields)
    if name.startswith("compiled-"):
        key = (name, id(d))
        if key not in _COMPILED:
            _COMPILED[key] = compiled_exchange(gh.make_exchange(d, name.split("-")[1]), len(fields))
        step = _COMPILED[key]
        return lambda: step(*fields)
    if name == "mpi4py":
        return HandWrittenExchange(d, fields).exchange
    if name == "pyghex":
        return PyGhexExchange(d, fields).exchange
    raise ValueError(name)


def verify(case: Case, d: gh.CartesianDecomposition, impls: Sequence[str]) -> None:
    """Each implementation, on its own fresh fields, fills every halo cell correctly.

    Every cell of every field is compared with the periodic global grid, so all
    implementations also agree with each other, corners included. All ranks raise alike.
    """
    comm = MPI.COMM_WORLD
    expected = [global_values(d, f) for f in range(case.nfields)]
    problems = []
    for name in impls:
        fields = fresh_fields(d, case.nfields)
        exchange = build(name, d, fields)
        for _ in range(2):  # also a second time, over already filled halos
            exchange()
        for f, (got, want) in enumerate(zip(fields, expected)):
            if wrong := np.count_nonzero(got != want):
                problems.append(f"{name}: rank {d.rank} field {f}: {wrong} wrong cells")
    problems = [p for ps in comm.allgather(problems) for p in ps]
    if problems:
        raise AssertionError(f"{case.name}: " + "; ".join(problems))


def time_batch(exchange: Callable[[], None], batch: int) -> float:
    """Seconds per run of ``batch`` back-to-back runs, after one run untimed: a sample starts
    in the caches its own implementation leaves, not in those of the one before it, as Comb
    and the C references run: repeated exchanges, each after the last."""
    exchange()
    MPI.COMM_WORLD.Barrier()
    t0 = time.perf_counter()
    if isinstance(exchange, CReference):
        exchange(batch)
    else:
        for _ in range(batch):
            exchange()
    return (time.perf_counter() - t0) / batch


def interleaved_samples(
    comm: MPI.Comm, runs: dict[str, Callable[[], None]], batch: dict[str, int], repeats: int
) -> dict[str, np.ndarray]:
    """Seconds per run of each implementation: ``repeats`` samples, slowest rank's time.

    Implementations take turns sample by sample, in an order shuffled each round (the same on
    every rank), so a noisy stretch of a shared machine hits all alike and none follows the
    same one each time; a sample is a batch of back-to-back runs (``time_batch``).
    """
    names = list(runs)
    samples = {name: np.empty(repeats) for name in names}
    orders = np.random.default_rng(0)
    gc.collect()
    gc.disable()
    try:
        for r in range(repeats):
            for k in orders.permutation(len(names)):
                name = names[k]
                samples[name][r] = time_batch(runs[name], batch[name])
    finally:
        gc.enable()
    for name in names:  # a sample lasts as long as its slowest rank
        comm.Allreduce(MPI.IN_PLACE, samples[name], op=MPI.MAX)
    return samples


def run_case(
    case: Case,
    impls: Sequence[str],
    repeats: int,
    sample_s: float,
    references: ctypes.CDLL | None = None,
) -> dict:
    """Samples of each implementation and (given ``references``) each C reference, in turn."""
    comm = MPI.COMM_WORLD
    d = gh.CartesianDecomposition(case.global_shape, halo=case.halo, periodic=True)
    verify(case, d, impls)

    fields = fresh_fields(d, case.nfields)  # the same data for every implementation
    exchanges: dict[str, Callable[..., None]] = {name: build(name, d, fields) for name in impls}
    made = [CReference(references, case, m) for m in REFERENCES.values()] if references else []
    exchanges.update(zip(REFERENCES, made))
    for exchange in exchanges.values():  # warm up: caches, first-touch, MPI connections
        for _ in range(5):
            exchange()
    # batch: back-to-back exchanges per sample, so that a sample lasts about sample_s
    probe = comm.allreduce(
        float(np.median([time_batch(exchanges[impls[0]], 1) for _ in range(7)])), op=MPI.MAX
    )
    batch = max(1, min(1000, round(sample_s / probe)))

    samples = interleaved_samples(comm, exchanges, dict.fromkeys(exchanges, batch), repeats)
    for reference in made:
        reference.free()
    return {
        "case": case,
        "proc_grid": d.proc_grid,
        "local_shape": d.allocated_shape,
        "batch": batch,
        "samples": samples,
    }


def fmt_time(seconds: float) -> str:
    if abs(seconds) < 1e-3 or math.isnan(seconds):
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


def report(results: Sequence[dict], impls: Sequence[str], repeats: int) -> str:
    base = impls[0]
    lines = [
        "Median time per exchange (ratio to " + base + "; below 1 = faster than " + base + ")",
        "",
        "| case | proc grid | local shape | batch | " + " | ".join(impls) + " |",
        "|---|---|---|---|" + "---|" * len(impls),
    ]
    for res in results:
        med = {name: float(np.median(res["samples"][name])) for name in impls}
        cells = [
            fmt_time(med[name]) + ("" if name == base else f" ({med[name] / med[base]:.2f}x)")
            for name in impls
        ]
        lines.append(
            f"| {res['case'].label} | {'x'.join(map(str, res['proc_grid']))} | "
            f"{'x'.join(map(str, res['local_shape']))} | {res['batch']} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "Spread: 25th-75th percentile per exchange over the " + str(repeats) + " samples",
        "",
        "| case | " + " | ".join(impls) + " |",
        "|---|" + "---|" * len(impls),
    ]
    for res in results:
        cells = []
        for name in impls:
            q1, q3 = np.percentile(res["samples"][name], [25, 75])
            cells.append(f"{fmt_time(q1)} - {fmt_time(q3)}")
        lines.append(f"| {res['case'].label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=200, help="samples per implementation and case"
    )
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"comma-separated, from: {', '.join(CASES)} (default: all)",
    )
    parser.add_argument(
        "--impls",
        default=",".join(IMPLEMENTATIONS),
        help="comma-separated, the first is the base of the ratios "
        f"(default: {','.join(IMPLEMENTATIONS)})",
    )
    parser.add_argument(
        "--sample-ms", type=float, default=2.0, help="target duration of one sample (batch)"
    )
    parser.add_argument(
        "--references",
        help="build/liblimits.so: its C references (2 ranks) in turn too, as the last columns",
    )
    args = parser.parse_args(argv)
    cases = [CASES[c.strip()] for c in args.cases.split(",") if c.strip()]
    impls = tuple(i.strip() for i in args.impls.split(",") if i.strip())
    if unknown := set(impls) - set(IMPLEMENTATIONS):
        parser.error(f"unknown implementations: {sorted(unknown)}")
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if args.references and comm.Get_size() != 2:
        parser.error("--references: its C references run on 2 ranks")
    references = load_references(args.references) if args.references else None

    results = []
    started = time.perf_counter()
    for case in cases:
        results.append(run_case(case, impls, args.repeats, args.sample_ms * 1e-3, references))
        if rank == 0:
            print(f"# {case.name} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if rank == 0:
        print(
            f"{datetime.date.today()}, {comm.Get_size()} ranks on {platform.node()} "
            f"({MPI.Get_library_version().splitlines()[0].strip()}), "
            f"numpy {np.__version__}, repeats {args.repeats}, "
            f"sample ~{args.sample_ms} ms\n"
        )
        print(report(results, (*impls, *(REFERENCES if references else ())), args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
