"""The GHEX transport: pyghex patterns built from the decomposition, cached.

Cartesian decompositions use GHEX's structured regular API, with undecomposed level axes
appended as whole, halo-free dimensions (GHEX supports up to 4 dimensions in all).
Unstructured ones use the unstructured API with the decomposition's gids, in the same local
order (owned, then halo). Tests check that GHEX fills exactly the halos the exchange plan
describes.

What is built once: the context, one pattern per (plan, level shape), field descriptors per
field buffer (a new buffer address, shape or strides makes a new descriptor, so a reallocated
field is never exchanged through a stale one), and a pool of communication objects: GHEX runs
one exchange per communication object at a time, so split-phase exchanges in flight each take
one from the pool. pyghex exchanges one C++ buffer type (dtype and memory layout) per call, so
fields of different types in one call travel as one GHEX exchange per type.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from gt4py_halo.decomposition.cartesian import CartesianDecomposition
from gt4py_halo.decomposition.plan import ExchangePlan, FieldSpec
from gt4py_halo.errors import BackendUnavailableError, DecompositionError, FieldError

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

#: Field descriptors kept per transport; old buffers fall out in least-recently-used order.
DESCRIPTOR_CACHE_SIZE = 256
#: Dimensions GHEX's structured regular bindings are compiled for, at most.
GHEX_MAX_DIMS = 4


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
            np.concatenate([owned, halo]).astype(np.int32),
            np.arange(len(owned), len(owned) + len(halo), dtype=np.int32),
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

    def __init__(self, decomposition: Any) -> None:
        self._decomposition = decomposition
        self._context = make_context(decomposition.comm)
        self._patterns: dict[str, Any] = {}
        self._descriptors: OrderedDict[tuple, Any] = OrderedDict()
        self._idle_objects: dict[str, list[Any]] = {}

    @classmethod
    def for_decomposition(cls, decomposition: Any) -> GhexTransport:
        return cls(decomposition)

    def start(
        self, plan: ExchangePlan, arrays: Sequence[Any], specs: tuple[FieldSpec, ...]
    ) -> PendingGhexExchange:
        patterns = self._patterns_of(plan)
        applied = []
        for position, (array, spec) in enumerate(zip(arrays, specs)):
            _check_device(array, position)
            pattern, domain = patterns.pattern(spec)
            descriptor = self._descriptor(plan, patterns, domain, array, spec, position)
            applied.append(pattern(descriptor))
        # pyghex takes one C++ buffer type (dtype, layout) per call: one call per group
        groups: dict[type, list[Any]] = {}
        for item in applied:
            groups.setdefault(type(item), []).append(item)
        idle = self._idle_objects.setdefault(plan.name, [])
        started = []
        for group in groups.values():
            co = idle.pop() if idle else self._new_communication_object()
            started.append((co.exchange(group), co))
        return PendingGhexExchange(started, idle, arrays)

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
    ) -> Any:
        key = (plan.name, _address(array), array.shape, array.strides, spec.dtype)
        descriptor = self._descriptors.get(key)
        if descriptor is None:
            descriptor = patterns.descriptor(domain, array, spec, position)
            self._descriptors[key] = descriptor
            if len(self._descriptors) > DESCRIPTOR_CACHE_SIZE:
                self._descriptors.popitem(last=False)
        else:
            self._descriptors.move_to_end(key)
        return descriptor

    def _new_communication_object(self) -> Any:
        if isinstance(self._decomposition, CartesianDecomposition):
            return ghex_regular.make_communication_object(self._context)
        return ghex_unstructured.make_communication_object(self._context)


class PendingGhexExchange:
    """GHEX exchanges in flight; ``wait`` returns their communication objects to the pool."""

    def __init__(self, started: list[tuple[Any, Any]], pool: list[Any], arrays: Any) -> None:
        self._started = started
        self._pool = pool
        self._arrays = arrays  # GHEX holds raw pointers: keep the fields alive until done

    def test(self) -> bool:
        return all(handle.is_ready() for handle, _ in self._started)

    def wait(self) -> None:
        try:
            for handle, _ in self._started:
                handle.wait()
        finally:
            self._pool.extend(co for _, co in self._started)


def _address(array: Any) -> int:
    interface = getattr(array, "__cuda_array_interface__", None) or array.__array_interface__
    return interface["data"][0]


def _check_device(array: Any, position: int) -> None:
    if hasattr(array, "__cuda_array_interface__") and not ghex.__config__["gpu"]:
        raise FieldError(
            f"field {position} is a GPU array, but this GHEX build has no GPU support; "
            "build GHEX with GHEX_USE_GPU=ON or use the 'mpi' backend"
        )


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
