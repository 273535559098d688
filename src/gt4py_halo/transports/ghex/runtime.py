"""The GHEX transport: pyghex patterns built from the decomposition, cached.

Cartesian decompositions use GHEX's structured regular API, with undecomposed level axes
appended as whole, halo-free dimensions (GHEX supports up to 4 dimensions in all).
Unstructured ones use the unstructured API with the decomposition's gids, in the same local
order. GHEX describes an unstructured field only if one of its axes is dense: a view strided
along both (every other row of an array, say) is exchanged as a dense copy, its halo copied
back at the wait. Tests check that GHEX fills exactly the halos the exchange plan describes.

What is built once: the context, one pattern per (plan, level shape), field descriptors per
field array, GHEX's buffer infos (a pattern applied to a descriptor) per field set (a
``PreparedGhexExchange``, which the exchange keeps for the same field objects), and pools
of communication objects: GHEX runs one exchange per communication
object at a time, so split-phase exchanges in flight each take one from a pool. pyghex
exchanges one C++ buffer type (dtype, number of axes, memory layout) per call, so fields of
different types in one call travel as one GHEX exchange per type, and a communication object
serves one buffer type for good (pyghex fails on another): one pool per plan and buffer type.

A descriptor is made over a view of the field's memory that does not reference the field
(pyghex's descriptor keeps what it is given alive), kept per field object and dropped when the
field is: the cache never keeps a user's array alive. An exchange in flight keeps its fields,
their descriptors, GHEX's buffer infos and its transport (the GHEX context) alive until it is
waited for, however early the user drops the exchange object (GHEX reads them through raw
pointers: with the buffer infos freed early, exchanges in flight garbled halos and crashed;
with the context freed, the next exchange crashed); exchanges still in flight when the
interpreter exits are finished then, before MPI is.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gt4py_halo import profiling
from gt4py_halo.decomposition.cartesian import CartesianDecomposition
from gt4py_halo.decomposition.plan import ExchangePlan, FieldSpec
from gt4py_halo.errors import BackendUnavailableError, DecompositionError, FieldError
from gt4py_halo.runtime.agreement import ALARM_AFTER_S, POLLS_PER_CLOCK
from gt4py_halo.runtime.identity_cache import IdentityCache, unowned_view

try:
    import ghex
    import ghex.structured.regular as ghex_regular
    import ghex.unstructured as ghex_unstructured
    from ghex.context import make_context
    from ghex.structured.cartesian_sets import ProductSet, UnitRange
except ImportError as error:
    raise BackendUnavailableError(
        "the 'ghex' backend needs GHEX, which is not installed: `pip install 'gt4py_halo[ghex]'` "
        "(GHEX builds from source: it needs an MPI C++ compiler wrapper, mpicxx, on PATH and "
        f"the Boost and libnuma headers, e.g. apt-get install libboost-dev libnuma-dev); ({error})"
    ) from error

#: Field descriptors kept per transport, the oldest dropped first.
DESCRIPTOR_CACHE_SIZE = 256
#: Dimensions GHEX's structured regular bindings are compiled for, at most.
GHEX_MAX_DIMS = 4


#: What oomph writes on rank 0 when MPI runs above MPI_THREAD_SINGLE (mpi4py's default is
#: MPI_THREAD_MULTIPLE): true and harmless, each exchange runs on its rank's calling thread.
OOMPH_THREAD_LINE = b"oomph warning: MPI thread safety is higher than required\n"


@contextlib.contextmanager
def _without_oomph_thread_line() -> Any:
    """Holds the process's stderr (the file descriptor: GHEX writes from C++) while a context
    is made, then passes on what was written but oomph's thread-safety line."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            passed_on = held.read().replace(OOMPH_THREAD_LINE, b"")
            if passed_on:
                os.write(2, passed_on)


class _CartesianPatterns:
    def __init__(self, context: Any, decomposition: CartesianDecomposition) -> None:
        self._context = context
        self._d = decomposition
        self._patterns: dict[tuple[int, ...], tuple[Any, Any]] = {}

    def pattern(self, spec: FieldSpec) -> tuple[Any, Any]:
        levels = spec.level_shape
        if levels not in self._patterns:
            d = self._d
            if len(d.global_shape) + len(levels) > GHEX_MAX_DIMS:
                raise FieldError(
                    f"GHEX exchanges at most {GHEX_MAX_DIMS}-dimensional cartesian fields; "
                    f"got {len(d.global_shape)} decomposed and {len(levels)} level axes"
                )
            whole = [UnitRange(0, n) for n in levels]
            glob = ProductSet(*(UnitRange(0, n) for n in d.global_shape), *whole)
            owned = ProductSet(*(UnitRange(s.start, s.stop) for s in d.global_slices), *whole)
            domain = ghex_regular.DomainDescriptor(d.rank, owned)
            generator = ghex_regular.HaloGenerator(
                glob, d.halo + ((0, 0),) * len(levels), d.periodic + (False,) * len(levels)
            )
            pattern = ghex_regular.make_pattern(self._context, generator, [domain])
            self._patterns[levels] = (pattern, domain)
        return self._patterns[levels]

    def descriptor(self, domain: Any, array: np.ndarray, spec: FieldSpec, position: int) -> Any:
        offsets = tuple(s.start for s in self._d.owned) + (0,) * len(spec.level_shape)
        array = _unit_axes_outermost(array)
        extents = _padded_extents(array, position)
        return ghex_regular.make_field_descriptor(domain, array, offsets, extents)


class _UnstructuredPatterns:
    def __init__(self, context: Any, decomposition: Any, dim: str) -> None:
        owned, halo = decomposition.owned_gids[dim], decomposition.halo_gids[dim]
        if max(owned.max(initial=0), halo.max(initial=0)) >= 2**31:
            raise DecompositionError(
                f"dim {dim!r}: GHEX's unstructured API takes 32-bit gids; this mesh has gids "
                "of 2**31 and above: use the 'mpi' backend"
            )
        domain = ghex_unstructured.DomainDescriptor(
            decomposition.rank,
            decomposition.local_gids(dim).astype(np.int32),
            decomposition.halo_lids[dim].astype(np.int32),
        )
        generator = ghex_unstructured.HaloGenerator.from_gids(halo.astype(np.int32))
        self._pattern = (ghex_unstructured.make_pattern(context, generator, [domain]), domain)

    def pattern(self, spec: FieldSpec) -> tuple[Any, Any]:
        if len(spec.level_shape) > 1:
            raise FieldError(
                "GHEX exchanges unstructured fields of at most one level axis; got "
                f"level shape {spec.level_shape}"
            )
        return self._pattern

    def descriptor(self, domain: Any, array: np.ndarray, spec: FieldSpec, position: int) -> Any:
        return ghex_unstructured.make_field_descriptor(domain, array)  # reads any strides


class GhexTransport:
    """Moves halos with GHEX communication objects over the decomposition's communicator."""

    #: GHEX owns the messages: ranks check their fields together instead (``Exchange._agree``).
    checks_each_message = False

    def __init__(self, decomposition: Any) -> None:
        self._decomposition = decomposition
        with _without_oomph_thread_line():
            self._context = make_context(decomposition.comm)
        self._patterns: dict[str, Any] = {}
        self._descriptors = IdentityCache(DESCRIPTOR_CACHE_SIZE)
        self._idle_objects: dict[tuple[str, type], list[Any]] = {}

    @classmethod
    def for_decomposition(cls, decomposition: Any) -> GhexTransport:
        return cls(decomposition)

    def prepare(
        self, plan: ExchangePlan, arrays: Sequence[Any], specs: tuple[FieldSpec, ...]
    ) -> PreparedGhexExchange:
        """What exchanging ``arrays`` takes: GHEX's buffer infos, grouped by buffer type."""
        patterns = self._patterns_of(plan)  # collective, at the first exchange of a plan
        if 0 in plan.local_shape:  # no entries of this dim here: no neighbours, nothing to move
            return PreparedGhexExchange([], (), [])  # (and GHEX describes no empty field)
        groups, descriptors, staged, unowned = self._buffer_infos(plan, patterns, arrays, specs)
        pooled = [
            (group, self._idle_objects.setdefault((plan.name, kind), [])) for kind, group in groups
        ]
        return PreparedGhexExchange(pooled, descriptors, staged, unowned, self)

    def _buffer_infos(
        self, plan: ExchangePlan, patterns: Any, arrays: Sequence[Any], specs: tuple
    ) -> tuple[list[tuple[type, list[Any]]], list[Any], list, bool]:
        """GHEX's buffer infos (pattern applied to field descriptor) of ``arrays``, grouped
        by C++ buffer type, with the descriptors they point to; the fields exchanged through
        dense copies; and whether no descriptor references its field."""
        applied, descriptors, staged, unowned = [], [], [], True
        for position, (array, spec) in enumerate(zip(arrays, specs)):
            _check_device(array, position)
            pattern, domain = patterns.pattern(spec)
            try:
                descriptor, own = self._descriptor(plan, patterns, domain, array, spec, position)
                unowned = unowned and own
            except TypeError as error:  # GHEX takes no unstructured field with 2 strided axes
                if "strides" not in str(error):
                    raise
                dense = type(array)(array.shape, dtype=array.dtype)  # NumPy or CuPy
                descriptor = patterns.descriptor(domain, dense, spec, position)
                staged.append((position, dense, self._decomposition.halo_lids[plan.name]))
            descriptors.append(descriptor)
            applied.append(pattern(descriptor))
        # pyghex takes one C++ buffer type (dtype, axes, layout) per call: one call per group
        groups: dict[type, list[Any]] = {}
        for item in applied:
            groups.setdefault(type(item), []).append(item)
        return list(groups.items()), descriptors, staged, unowned

    def _patterns_of(self, plan: ExchangePlan) -> Any:
        if plan.name not in self._patterns:
            if isinstance(self._decomposition, CartesianDecomposition):
                self._patterns[plan.name] = _CartesianPatterns(self._context, self._decomposition)
            else:
                self._patterns[plan.name] = _UnstructuredPatterns(
                    self._context, self._decomposition, plan.name
                )
        return self._patterns[plan.name]

    def _descriptor(
        self,
        plan: ExchangePlan,
        patterns: Any,
        domain: Any,
        array: Any,
        spec: FieldSpec,
        position: int,
    ) -> tuple[Any, bool]:
        """GHEX's descriptor of ``array``, and whether it holds no reference to ``array``
        (then it is kept for when ``array`` comes again)."""
        tag = (plan.name, spec)
        descriptor = self._descriptors.get(tag, [array])
        if descriptor is not None:
            return descriptor, True
        view = unowned_view(array)
        descriptor = patterns.descriptor(domain, array if view is None else view, spec, position)
        if view is not None:  # else it references the array: not kept
            self._descriptors.put(tag, [array], descriptor)
        return descriptor, view is not None

    def new_communication_object(self) -> Any:
        if isinstance(self._decomposition, CartesianDecomposition):
            return ghex_regular.make_communication_object(self._context)
        return ghex_unstructured.make_communication_object(self._context)


class PreparedGhexExchange:
    """Exchanging one set of fields: GHEX's buffer infos per buffer type, each with the pool
    of idle communication objects of that type.

    Kept by the exchange for when the same field objects come again (``reusable``): the buffer
    infos point to descriptors over views that do not reference the fields. Not kept where a
    descriptor references its field (no such view: a device array) or a field travels
    through a dense copy.
    """

    def __init__(
        self,
        groups: list[tuple[list[Any], list[Any]]],
        descriptors: Any,
        staged: list,
        unowned: bool = True,
        transport: GhexTransport | None = None,
    ) -> None:
        self._groups = groups
        self._descriptors = descriptors
        self._staged = staged  # (position, the dense copy exchanged instead, its halo)
        self._transport = transport  # its context and patterns: GHEX's, for what is in flight
        #: Whether it may be kept for the same field objects (it references none of them).
        self.reusable = unowned and not staged

    def start(self, arrays: Sequence[Any]) -> PendingGhexExchange:
        staged = (
            [(arrays[n], dense, halo) for n, dense, halo in self._staged] if self._staged else ()
        )
        for field, dense, _ in staged:
            dense[...] = field
        rec = profiling.recorder
        t = rec.now() if rec else 0.0
        started = []
        for group, pool in self._groups:
            co = pool.pop() if pool else self._transport.new_communication_object()
            started.append((co.exchange(group), co, pool))
        if rec:  # GHEX packs and posts in one call
            rec.event("post", t, {"GHEX exchanges (one per buffer type)": len(started)})
        # GHEX reads the fields, their descriptors and buffer infos until the wait, and its
        # communication objects need their context: the exchange may be dropped before
        kept = (arrays, self._descriptors, self._groups, self._transport)
        return PendingGhexExchange(started, kept, staged)


class PendingGhexExchange:
    """GHEX exchanges in flight; ``wait`` returns their communication objects to their pools."""

    def __init__(self, started: list[tuple[Any, Any, list]], kept: Any, staged: Any) -> None:
        self._started = started
        self._kept = kept  # GHEX holds raw pointers: keep what they point to alive until done
        self._staged = staged  # (field, the dense copy exchanged instead, its halo positions)
        _UNFINISHED.add(self)

    def test(self) -> bool:
        return all(handle.is_ready() for handle, _, _ in self._started)

    def wait(self, waiting: Callable[[], None] | None = None) -> None:
        """Wait, unpack, and give the communication objects back. ``waiting``: called at
        every poll once the wait has lasted ``ALARM_AFTER_S`` (``Agreement.waiting``); if it
        raises, the exchange is left in flight for good (its fields and buffers kept alive:
        GHEX may still write into them) and the error passed on."""
        if self not in _UNFINISHED:
            return
        if waiting is not None:
            self._poll(waiting)
        try:
            rec = profiling.recorder
            t = rec.now() if rec else 0.0
            for handle, _, _ in self._started:
                handle.wait()
            if rec:  # GHEX waits and unpacks in one call
                rec.event("wait", t, {"GHEX exchanges (one per buffer type)": len(self._started)})
            for field, dense, halo in self._staged:
                field[halo] = dense[halo]
        finally:
            _UNFINISHED.discard(self)
            for _, co, pool in self._started:
                pool.append(co)

    def _poll(self, waiting: Callable[[], None]) -> None:
        """Poll GHEX until every message is in, calling ``waiting`` at every poll after
        ``ALARM_AFTER_S`` (the clock is read every ``POLLS_PER_CLOCK`` polls)."""
        deadline = 0.0
        for handle, _, _ in self._started:
            polls = 0
            while not handle.is_ready():
                polls += 1
                if polls % POLLS_PER_CLOCK:
                    continue
                if not deadline:
                    deadline = time.monotonic() + ALARM_AFTER_S
                elif time.monotonic() >= deadline:
                    try:
                        waiting()
                    except BaseException:
                        _UNFINISHED.discard(self)
                        _ABANDONED.append(self)
                        raise


#: Exchanges started and not yet waited for, finished at exit (before MPI is finalized); held
#: even where the user dropped the handle: GHEX writes into their fields until then.
_UNFINISHED: set[PendingGhexExchange] = set()
#: Exchanges left in flight because the ranks disagreed, kept for the life of the process.
_ABANDONED: list[PendingGhexExchange] = []


@atexit.register
def _finish_at_exit() -> None:
    unfinished = list(_UNFINISHED)
    if unfinished:
        warnings.warn(
            f"{len(unfinished)} 'ghex' halo exchange(s) started and never finished: finished "
            "at exit (call finish() on what ex.start returned)",
            stacklevel=1,
        )
    for pending in unfinished:
        pending.wait()


def _check_device(array: Any, position: int) -> None:
    if hasattr(array, "__cuda_array_interface__") and not ghex.__config__["gpu"]:
        raise FieldError(
            f"field {position} is a GPU array, but this GHEX build has no GPU support; "
            "build GHEX with GHEX_USE_GPU=ON or use the 'mpi' backend"
        )


def _unit_axes_outermost(array: Any) -> Any:
    """``array`` with the strides of its axes of extent 1 set to put them outermost: those
    strides address nothing, but pyghex orders the axes by stride, and GHEX derives the
    others' from that order (a C-ordered field with one level had a level stride equal to
    the innermost one, which reads as overlapping axes)."""
    if 1 not in array.shape or not isinstance(array, np.ndarray):
        return array
    span = max((n * abs(s) for n, s in zip(array.shape, array.strides) if n != 1), default=0)
    strides = tuple(
        max(span, array.itemsize) if n == 1 else s for n, s in zip(array.shape, array.strides)
    )
    return np.lib.stride_tricks.as_strided(array, strides=strides)


def _padded_extents(array: Any, position: int) -> tuple[int, ...]:
    """Extents of the dense (possibly padded) allocation ``array`` starts at.

    GHEX's structured descriptor derives strides from extents and axis order, so a field
    with padding between axes (as GT4Py allocates for alignment) is described by its padded
    extents. Strides that no padded dense allocation explains are rejected.
    """
    order = sorted(range(array.ndim), key=lambda axis: (array.strides[axis], axis))
    extents = list(array.shape)
    step = array.itemsize
    for inner, outer in zip(order, order[1:] + [None]):
        if array.strides[inner] != step:
            raise FieldError(
                f"field {position} has strides {array.strides}, which no dense or padded "
                "allocation has; the 'ghex' backend cannot describe it, the 'mpi' backend can"
            )
        if outer is not None:
            if array.strides[outer] % step or array.strides[outer] // step < array.shape[inner]:
                raise FieldError(
                    f"field {position} has overlapping or unaligned strides {array.strides}"
                )
            extents[inner] = array.strides[outer] // step
            step = array.strides[outer]
    return tuple(extents)
