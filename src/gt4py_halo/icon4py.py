"""gt4py_halo as ICON4Py's exchange runtime: a drop-in for ``GHexMultiNodeExchange``.

ICON4Py exchanges halos through an ``ExchangeRuntime`` it creates from its process properties
and ``DecompositionInfo``; this module implements that protocol on a gt4py_halo
``UnstructuredDecomposition`` of ICON4Py's cells, edges and vertices, over the transport of
gt4py_halo's configuration (``"mpi"``, ``"ghex"``, ...)::

    from gt4py_halo import icon4py as gh_icon4py

    exchange = gh_icon4py.create_exchange(process_props, decomposition_info)
    # instead of icon4py.model.common.decomposition.definitions.create_exchange(...)

What ICON4Py passes is accepted: GT4Py fields and NumPy or CuPy arrays of one axis or with
levels, in any dtype gt4py_halo exchanges, mixed in one call (one message per neighbour);
arrays longer than the dim's local size (ICON's nproma padding: the first entries are
exchanged, the rest left alone); strided views; ICON4Py's local layout as its
``DecompositionInfo`` says (owned and halo entries in any order).

``exchange`` (and ICON4Py's older ``runtime(*fields, dim=..., full_exchange=True)``, which
its granules call) is gt4py_halo's blocking call: for fields exchanged before it runs from C,
no Python step between the checks and the copies; ``start`` returns an exchange in flight.

Streams: host fields exchange at once whatever ``stream`` says (ICON4Py's protocol). For
device fields, ``start`` first waits on the host for ``stream`` (the exchange does not begin
before work submitted to it), and ``finish`` returns once the halos are written, whatever
``stream``: later work on any stream sees them. Construction is collective over
``process_props.comm``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gt4py import next as gtx
from mpi4py import MPI

try:
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.decomposition import definitions
    from icon4py.model.common.utils import data_allocation as data_alloc
except ImportError as error:
    raise ImportError(
        "gt4py_halo.icon4py needs ICON4Py: "
        f"`pip install 'gt4py_halo[icon4py]' icon4py-common==0.4.1` ({error})"
    ) from error

from gt4py_halo import _native
from gt4py_halo.decomposition.collective import raise_on_all_ranks
from gt4py_halo.decomposition.unstructured import UnstructuredDecomposition
from gt4py_halo.errors import FieldError
from gt4py_halo.runtime.exchange import Exchange as _Exchange
from gt4py_halo.runtime.exchange import ExchangeHandle
from gt4py_halo.runtime.fields import as_array
from gt4py_halo.runtime.identity_cache import IdentityCache, unowned_view

#: Fields longer than their dim's local size whose views an exchange keeps.
FIELD_VIEWS = 64


class Exchange(definitions.ExchangeRuntime):
    """ICON4Py's ``ExchangeRuntime`` over a gt4py_halo exchange of its horizontal dims."""

    def __init__(
        self,
        process_props: definitions.ProcessProperties,
        decomposition_info: definitions.DecompositionInfo,
        backend: str | None = None,
    ) -> None:
        info = decomposition_info.as_host()
        self._dims = {dim.value: dim for dim in dims.horizontal_dims()}
        # ICON4Py's single-node properties have no communicator: this process alone
        comm = MPI.COMM_SELF if process_props.comm is None else process_props.comm
        problem = None
        try:
            local_gids = {
                name: (info.global_index(dim), np.asarray(info.owner_mask(dim), dtype=bool))
                for name, dim in self._dims.items()
            }
        except KeyError as error:
            problem = (
                f"the DecompositionInfo has no {error} dim; ICON4Py's exchange runtime takes "
                f"all of {', '.join(self._dims)}"
            )
        raise_on_all_ranks(comm, problem)  # the others would wait in the collective below
        self.decomposition = UnstructuredDecomposition.from_local_gids(local_gids, comm=comm)
        #: the gt4py_halo exchange underneath (``.backend``: the transport in use)
        self.exchange_runtime = _Exchange(self.decomposition, backend)
        self._views = IdentityCache(FIELD_VIEWS)

    def start(
        self,
        dim: gtx.Dimension,
        *fields: gtx.Field | data_alloc.NDArray,
        stream: definitions.StreamLike = definitions.DEFAULT_STREAM,
    ) -> Result:
        """Post the exchange of ``fields`` along horizontal ``dim``; ``finish`` the result.
        No fields: nothing to exchange (as ICON4Py's own runtimes)."""
        if not fields:
            self._name(dim)
            return Result(None, ())
        name, exchanged = self._exchanged(dim, fields, stream)
        handle = self.exchange_runtime.start(*exchanged, dim=name)
        handle._hold(fields)  # the views exchanged hold no reference to them
        return Result(handle, fields)

    def exchange(
        self,
        dim: gtx.Dimension,
        *fields: gtx.Field | data_alloc.NDArray,
        stream: definitions.StreamLike | definitions.BlockType = definitions.DEFAULT_STREAM,
    ) -> None:
        """``start`` and ``finish`` in one: gt4py_halo's blocking exchange, which runs from C
        when the same fields come again (``ex.exchange``). The halos are written when this
        returns, whatever ``stream``."""
        if not fields:
            self._name(dim)
            return
        waited = definitions.DEFAULT_STREAM if stream is definitions.BLOCK else stream
        name, exchanged = self._exchanged(dim, fields, waited)
        self.exchange_runtime.exchange(*exchanged, dim=name)

    def __call__(
        self,
        *fields: gtx.Field | data_alloc.NDArray,
        dim: gtx.Dimension,
        full_exchange: bool = True,
        stream: definitions.StreamLike | definitions.BlockType = definitions.DEFAULT_STREAM,
    ) -> Result | None:
        """ICON4Py's older form, which its granules still call: ``exchange`` where
        ``full_exchange``, else ``start``."""
        if full_exchange:
            return self.exchange(dim, *fields, stream=stream)
        waited = definitions.DEFAULT_STREAM if stream is definitions.BLOCK else stream
        return self.start(dim, *fields, stream=waited)

    def _name(self, dim: Any) -> str:
        """The decomposition's name of horizontal ``dim``."""
        name = getattr(dim, "value", None)
        if not isinstance(dim, gtx.Dimension) or name not in self._dims:
            raise FieldError(
                f"dim {dim!r} is not a horizontal dim of the decomposition "
                f"({', '.join(self._dims)})"
            )
        return name

    def _exchanged(self, dim: Any, fields: tuple, stream: Any) -> tuple[str, list[Any]]:
        """The dim's name and what is exchanged of ``fields`` (``_local_part``), once the
        work submitted to ``stream`` is done where they are device fields."""
        name = self._name(dim)
        size = self.decomposition.local_size(name)
        exchanged = [self._local_part(f, position, dim, size) for position, f in enumerate(fields)]
        if not isinstance(as_array(fields[0], 0), np.ndarray):
            _synchronize(stream)
        return name, exchanged

    def _local_part(self, field: Any, position: int, dim: gtx.Dimension, size: int) -> Any:
        """``field`` itself, or the view of its first ``size`` entries (nproma padding):
        the same view object at each call while the field's array keeps its layout (the
        exchange's checks and GHEX's descriptors are kept per object), kept without keeping
        ``field`` alive. A GT4Py field's first dim must be ``dim``."""
        array = as_array(field, position)
        domain = getattr(field, "domain", None)  # a GT4Py field's (isinstance costs microseconds)
        if array is not field and domain is not None and domain.dims[:1] != (dim,):
            raise FieldError(
                f"field {position} has dims {[d.value for d in field.domain.dims]}; an "
                f"exchange along {dim.value!r} takes fields whose first dim is {dim.value!r}"
            )
        if array.ndim not in (1, 2) or array.shape[0] < size:
            raise FieldError(
                f"field {position} has shape {array.shape}; ICON4Py fields of this dim have 1 "
                f"or 2 axes, the first of at least {size} entries on rank {self.my_rank()}"
            )
        if array.shape[0] == size:
            return field
        kept = self._views.get(size, [field])
        if kept is None or not kept[1].same([array]):  # new, or reshaped / read-only since
            view = unowned_view(array[:size])
            if view is None:  # a device array: sliced at each call
                return array[:size]
            kept = (view, _native.Layout([array]))
            self._views.put(size, [field], kept)
        return kept[0]

    def get_size(self) -> int:
        return self.decomposition.comm.Get_size()

    def my_rank(self) -> int:
        return self.decomposition.rank


class Result(definitions.ExchangeResult):
    """An exchange in flight: ICON4Py's ``ExchangeResult``."""

    def __init__(self, handle: ExchangeHandle | None, fields: tuple) -> None:
        self._handle = handle  # None: nothing in flight
        self._fields = fields  # written until finished (the exchange may hold views only)

    def finish(
        self, stream: definitions.StreamLike | definitions.BlockType = definitions.DEFAULT_STREAM
    ) -> None:
        """Write the halos; they are written when this returns, whatever ``stream``."""
        if self._handle is not None:
            self._handle.finish()
        self._fields = ()

    def is_ready(self) -> bool:
        """Whether the exchange has finished (ICON4Py's meaning): once the messages are in,
        the halos are written here, with every transport."""
        if self._handle is not None and not self._handle.is_ready():
            return False
        self.finish()
        return True


def create_exchange(
    process_props: definitions.ProcessProperties,
    decomposition_info: definitions.DecompositionInfo,
    backend: str | None = None,
) -> Exchange:
    """ICON4Py's ``create_exchange`` with gt4py_halo underneath, on any number of ranks."""
    return Exchange(process_props, decomposition_info, backend)


@definitions.create_halo_exchange_wait.register(Exchange)
def _halo_exchange_wait(runtime: Exchange) -> definitions.HaloExchangeWait:
    return definitions.HaloExchangeWait(runtime)


def _synchronize(stream: Any) -> None:
    """Wait on the host for the work submitted to ICON4Py's ``stream`` (a CuPy-like stream
    with ``ptr`` or one with ``__cuda_stream__``)."""
    import cupy

    pointer = stream.__cuda_stream__()[1] if hasattr(stream, "__cuda_stream__") else stream.ptr
    cupy.cuda.ExternalStream(pointer).synchronize()
