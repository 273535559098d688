"""The GHEX transport: GHEX's patterns and communication objects, driven from C++.

The exchange is ``native.cpp`` (built on first use: ``native.py``): GHEX's structured regular
API for cartesian decompositions, its unstructured API (with the decomposition's gids, in the
same local order) for unstructured ones. A blocking exchange is one call into it: pack, post,
poll until done, unpack; a split one is a start and a polled wait.

Fields are described to GHEX in bytes, so that fields of any dtypes travel together, in one
GHEX exchange (one message per neighbour): a cartesian field as a 4-D grid (missing axes
outermost, of extent 1; at most 4 axes in all), its innermost axis merged with its elements'
bytes; an unstructured one as a row of bytes per local index. Messages are laid out by the
grid (never by a field's memory layout), so ranks whose fields differ in layout exchange exact
halos. A field whose innermost axis (cartesian) or row (unstructured) is not contiguous
travels through a dense copy of it, copied back when the exchange is finished.

What is built once: the context (per transport); patterns, per plan and the bytes of a row
(cartesian: and the level shape); a field set's descriptors and buffer infos with the
communication objects that exchanged it (``PreparedGhexExchange``, which the exchange keeps
for the same field objects: it holds their addresses, never the fields). GHEX runs one
exchange per communication object at a time: a field set's exchanges in flight together take
one each. An exchange in flight keeps its fields (GHEX writes into them until it is done);
exchanges still in flight when the interpreter exits are finished then, before MPI is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gt4py_halo import profiling
from gt4py_halo.decomposition.cartesian import CartesianDecomposition
from gt4py_halo.decomposition.collective import raise_on_all_ranks
from gt4py_halo.decomposition.plan import ExchangePlan, FieldSpec
from gt4py_halo.errors import BackendUnavailableError, FieldError
from gt4py_halo.runtime.agreement import ALARM_AFTER_S, POLLS_PER_CLOCK
from gt4py_halo.runtime.in_flight import UNFINISHED

try:
    from gt4py_halo.transports.ghex import native
except ImportError as error:
    raise BackendUnavailableError(
        "the 'ghex' backend needs GHEX, which is not installed: `pip install 'gt4py_halo[ghex]'` "
        "(GHEX builds from source: it needs an MPI C++ compiler wrapper, mpicxx, on PATH and "
        f"the Boost and libnuma headers, e.g. apt-get install libboost-dev libnuma-dev); ({error})"
    ) from error

#: Axes of the grid a cartesian field is described on (GHEX's structured regular API is
#: compiled for that many here: ``native.cpp``).
GRID_AXES = 4


class _CartesianPatterns:
    """The 4-D grids of a cartesian decomposition's fields: per level shape and element size
    (the innermost axis counts bytes), this rank's block as a GHEX pattern."""

    def __init__(self, native_module: Any, context: Any, decomposition: CartesianDecomposition):
        self._native = native_module
        self._context = context
        self._d = decomposition
        self._patterns: dict[tuple[tuple[int, ...], int], Any] = {}

    def describe(self, array: np.ndarray, spec: FieldSpec) -> tuple | None:
        """GHEX's description of ``array``, ``None`` if its innermost axis is not contiguous."""
        *outer, inner = array.strides
        if array.shape[-1] > 1 and inner != array.itemsize or min(outer, default=1) <= 0:
            return None
        pattern = self._pattern(spec, array.itemsize)
        pad = GRID_AXES - array.ndim
        span = max(n * s for n, s in zip(array.shape, array.strides))
        extents = (1,) * pad + array.shape[:-1] + (array.shape[-1] * array.itemsize,)
        strides = (span,) * pad + tuple(outer) + (1,)
        return pattern, array.ctypes.data, extents, strides

    def _pattern(self, spec: FieldSpec, itemsize: int) -> Any:
        key = (spec.level_shape, itemsize)
        if key not in self._patterns:  # collective: ranks meet new kinds of fields together
            d = self._d
            axes = len(d.global_shape) + len(spec.level_shape)
            if axes > GRID_AXES:
                raise FieldError(
                    f"the 'ghex' transport exchanges cartesian fields of at most {GRID_AXES} "
                    f"axes; got {len(d.global_shape)} decomposed and "
                    f"{len(spec.level_shape)} level axes"
                )
            pad = GRID_AXES - axes
            # per axis: first and last owned index, last global index, halo, periodic, offset
            grid = [(0, 0, 0, (0, 0), False, 0)] * pad
            for s, owned, n, halo, periodic in zip(
                d.global_slices, d.owned, d.global_shape, d.halo, d.periodic
            ):
                grid.append((s.start, s.stop - 1, n - 1, halo, periodic, owned.start))
            grid += [(0, n - 1, n - 1, (0, 0), False, 0) for n in spec.level_shape]
            first, last, glast, halo, periodic, offset = grid[-1]  # the innermost, in bytes
            b = itemsize
            grid[-1] = (
                first * b,
                (last + 1) * b - 1,
                (glast + 1) * b - 1,
                (halo[0] * b, halo[1] * b),
                periodic,
                offset * b,
            )
            first, last, glast, halo, periodic, offset = zip(*grid)
            self._patterns[key] = self._native.regular_pattern(
                self._context,
                first,
                last,
                glast,
                [w for pair in halo for w in pair],
                [int(p) for p in periodic],
                offset,
            )
        return self._patterns[key]


class _UnstructuredPatterns:
    """An unstructured dim's GHEX pattern; its fields are rows of bytes per local index."""

    def __init__(self, native_module: Any, context: Any, decomposition: Any, dim: str) -> None:
        owned, halo = decomposition.owned_gids[dim], decomposition.halo_gids[dim]
        large = max(owned.max(initial=0), halo.max(initial=0)) >= 2**31
        raise_on_all_ranks(  # GHEX's pattern setup is collective: no rank may stay in it
            decomposition.comm,
            f"dim {dim!r}: GHEX's unstructured API takes 32-bit gids; this rank has gids of "
            "2**31 and above: use the 'mpi' backend"
            if large
            else None,
        )
        comm = decomposition.comm  # a domain id per rank and dim: GHEX's tags differ per dim
        self._pattern = native_module.unstructured_pattern(
            context,
            decomposition.local_gids(dim).astype(np.int32).tobytes(),
            decomposition.halo_lids[dim].astype(np.int32).tobytes(),
            decomposition.dims.index(dim) * comm.size + comm.rank,
        )

    def describe(self, array: np.ndarray, spec: FieldSpec) -> tuple | None:
        """GHEX's description of ``array``, ``None`` if its rows are not contiguous."""
        row = array.itemsize * int(np.prod(spec.level_shape, dtype=np.int64))
        if array.ndim > 1 and not array[0].flags.c_contiguous or array.strides[0] < row:
            return None
        return self._pattern, array.ctypes.data, row, array.strides[0]


class GhexTransport:
    """Moves halos with GHEX over the decomposition's communicator."""

    #: GHEX owns the messages: ranks check their fields together instead (``Exchange._agree``).
    checks_each_message = False

    def __init__(self, decomposition: Any) -> None:
        self._decomposition = decomposition
        problem = None
        try:  # (a rank that cannot build it must not leave the others in GHEX's collectives)
            self._native = native.module()
        except BackendUnavailableError as error:
            problem = str(error)
        raise_on_all_ranks(decomposition.comm, problem, BackendUnavailableError)
        self._context = self._native.Context(
            decomposition.comm.py2f(), ALARM_AFTER_S, POLLS_PER_CLOCK
        )
        self._patterns: dict[str, Any] = {}

    @classmethod
    def for_decomposition(cls, decomposition: Any) -> GhexTransport:
        return cls(decomposition)

    def prepare(
        self, plan: ExchangePlan, arrays: Sequence[Any], specs: tuple[FieldSpec, ...]
    ) -> PreparedGhexExchange:
        """What exchanging ``arrays`` takes: GHEX's buffer infos of their descriptions, and
        the dense copies that travel instead of fields GHEX cannot describe."""
        patterns = self._patterns_of(plan)  # collective, at the first exchange of a plan
        if 0 in plan.local_shape:  # no entries of this dim here: no neighbours, nothing to move
            return PreparedGhexExchange(None, ())
        described, staged = [], []
        for position, (array, spec) in enumerate(zip(arrays, specs)):
            if hasattr(array, "__cuda_array_interface__"):
                raise FieldError(
                    f"field {position} is a GPU array; the 'ghex' transport exchanges host "
                    "fields (its C++ is built for GHEX's CPU architecture): use the 'mpi' or "
                    "'nccl' backend for GPU fields"
                )
            if array.size == 0:  # a level axis of length 0: no cells (on every rank alike:
                continue  # the ranks' level shapes are compared before posting)
            description = patterns.describe(array, spec)
            if description is None:
                dense = np.empty(array.shape, array.dtype)
                staged.append((position, dense))
                description = patterns.describe(dense, spec)
            described.append(description)
        if not described:
            return PreparedGhexExchange(None, ())
        return PreparedGhexExchange(self._native.Prepared(described), tuple(staged))

    def _patterns_of(self, plan: ExchangePlan) -> Any:
        if plan.name not in self._patterns:
            if isinstance(self._decomposition, CartesianDecomposition):
                self._patterns[plan.name] = _CartesianPatterns(
                    self._native, self._context, self._decomposition
                )
            else:
                self._patterns[plan.name] = _UnstructuredPatterns(
                    self._native, self._context, self._decomposition, plan.name
                )
        return self._patterns[plan.name]


class PreparedGhexExchange:
    """Exchanging one set of fields (``native.Prepared``: their addresses, never the fields
    themselves), with the dense copies that travel in the place of some. Kept by the exchange
    for when the same field objects come again."""

    #: Whether it may be kept for the same field objects: it references none of them.
    reusable = True

    def __init__(self, prepared: Any, staged: tuple[tuple[int, np.ndarray], ...]) -> None:
        self._prepared = prepared  # None: nothing to move
        self._staged = staged  # (position, the dense copy exchanged instead)
        if prepared is not None and not staged:  # no copies around it: one call into C++
            self.exchange = prepared.exchange  # (it keeps ``arrays`` if it must abandon them)

    def exchange(self, arrays: Sequence[Any], waiting: Callable[[], None] | None) -> None:
        """Exchange now, in one call (``waiting``: as for ``PendingGhexExchange.wait``)."""
        for n, dense in self._staged:
            dense[...] = arrays[n]
        if self._prepared is not None:
            self._prepared.exchange((arrays, self._staged), waiting)
        for n, dense in self._staged:
            arrays[n][...] = dense

    def kept(self, arrays: Sequence[Any]) -> Callable[[Sequence[Any], Any], None]:
        """What a kept call of ``arrays`` runs (``_native.ExchangeAgain``): ``exchange`` (the
        C++ exchange itself where nothing is copied around it)."""
        return self.exchange

    def start(self, arrays: Sequence[Any]) -> PendingGhexExchange:
        for n, dense in self._staged:
            dense[...] = arrays[n]
        rec = profiling.recorder
        t = rec.now() if rec else 0.0
        handle = None if self._prepared is None else self._prepared.start((arrays, self._staged))
        if rec:  # GHEX packs and posts in one call
            rec.event("post", t, {"fields": len(arrays)})
        return PendingGhexExchange(handle, arrays, self._staged)


class PendingGhexExchange:
    """A GHEX exchange in flight."""

    def __init__(self, handle: Any, arrays: Sequence[Any], staged: tuple) -> None:
        self._handle = handle  # native.Handle (it keeps the arrays until done), or None
        self._arrays = arrays
        self._staged = staged  # (position, the dense copy exchanged instead)
        UNFINISHED[self] = ()

    def test(self) -> bool:
        return self._handle is None or self._handle.test()

    def wait(self, waiting: Callable[[], None] | None = None) -> None:
        """Wait and unpack. ``waiting``: called at every clock read once the wait has lasted
        ``ALARM_AFTER_S`` (``Agreement.waiting``); if it raises, the exchange is left in
        flight for good (its fields and GHEX's buffers kept alive: GHEX may still write into
        them) and the error passed on."""
        if self not in UNFINISHED:
            return
        rec = profiling.recorder
        t = rec.now() if rec else 0.0
        try:
            if self._handle is not None:
                self._handle.wait(waiting)
        finally:
            UNFINISHED.pop(self, None)
        if rec:  # GHEX waits and unpacks in one call
            rec.event("wait", t, {"fields": len(self._arrays)})
        for n, dense in self._staged:
            self._arrays[n][...] = dense
