"""The runtime (Python-level) halo exchange: what ``gh.make_exchange`` returns.

``Exchange`` validates fields against the decomposition's plan, then hands arrays to the
transport chosen at construction. Blocking ``exchange`` is ``start`` followed by ``finish``.

Both are objects rather than methods: called from Python they exchange now (a blocking call
that passes a kept call's fields again runs from C, ``_native.Repeating``); called inside a
``@gh.program`` DaCe turns them into exchange nodes through their ``__sdfg__`` protocol
(``compiled/convertible.py``). A blocking ``ex.exchange`` also works in a plain ``@dace.program``
(DaCe's default expansion); a split pair needs ``@gh.program``, whose lowering pairs it.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import numpy as np

from gt4py_halo import _native, profiling
from gt4py_halo.config import backend_and_source
from gt4py_halo.decomposition.plan import FieldSpec, signature
from gt4py_halo.errors import FieldError, RanksDisagreeError
from gt4py_halo.runtime import in_flight
from gt4py_halo.runtime.agreement import ALARM_AFTER_S, Agreement
from gt4py_halo.runtime.fields import as_array, specs_of
from gt4py_halo.runtime.identity_cache import IdentityCache
from gt4py_halo.transports import make_transport

#: Field sets per dim whose checks and prepared exchanges an exchange keeps (and calls its
#: blocking call runs from C).
FIELD_SETS_REMEMBERED = 16


class Exchange:
    """Halo exchanges of one decomposition over one transport (``gh.make_exchange``).

    ``ex.exchange(*fields, dim=None)`` fills the halos of ``fields`` from their owning ranks
    and returns when all are written; ``h = ex.start(*fields, dim=None)`` posts the same
    exchange and returns at once, ``h.finish()`` writes the halos. Fields are the rank's local
    arrays, owned entries and halo (``decomposition.allocated_shape`` for cartesian ones,
    ``len(decomposition.local_gids(dim))`` entries first for unstructured ones, then any
    levels): NumPy or CuPy arrays, GT4Py fields. ``dim`` names the unstructured dim the fields
    live on. Inside ``@gh.program`` steps both become nodes of the compiled step.

    Its two calls share its ``_Exchanger`` and do not refer back to it, so that dropping the
    exchange frees its transport and communicators at once, on every rank alike: waiting for
    Python's cycle collector, whose timing differs between ranks, would free them at
    rank-dependent times, and MPI needs communicators freed on all ranks to reuse them.
    """

    def __init__(self, decomposition: Any, backend: str | None = None) -> None:
        exchanger = _Exchanger(decomposition, backend)
        self._exchanger = exchanger
        self.decomposition = decomposition
        #: The transport in use (``"auto"`` resolved).
        self.backend = exchanger.backend
        #: ``ex.exchange(*fields, dim=None)``: fill the halos of ``fields`` from their owners,
        #: returning when all are written; inside a DaCe program, a ``HaloExchange`` node.
        self.exchange = BlockingExchange(exchanger)
        #: ``h = ex.start(*fields, dim=None)``: post the exchange and return at once; the
        #: halos are written by ``h.finish()``. Inside a DaCe program, a start/finish node pair.
        self.start = SplitExchange(exchanger)

    def __repr__(self) -> str:
        return f"Exchange(backend={self.backend!r}, decomposition={self.decomposition!r})"


class _Exchanger:
    """What an ``Exchange``'s calls share: its transport, checks and prepared field sets."""

    def __init__(self, decomposition: Any, backend: str | None) -> None:
        name, source = backend_and_source(backend)
        self.decomposition = decomposition
        self.backend: str
        self.backend, self._transport = make_transport(name, decomposition, source)
        self._auto = name.lower() == "auto"
        # per dim, field sets checked and prepared (a model exchanges the same few every step)
        self._prepared = IdentityCache(FIELD_SETS_REMEMBERED)
        # where messages do not say what fields they hold, ranks check new kinds of fields
        self._agreement = (
            None
            if self._transport.checks_each_message
            else Agreement(decomposition.comm, self._transport)
        )
        self._compiled_data: Any = None
        #: The blocking calls kept for ``BlockingExchange`` to run from C when their fields
        #: come again (``_native.ExchangeAgain``), the most recently run first.
        self.kept: list[_native.ExchangeAgain] = []

    def exchange(self, fields: tuple[Any, ...], dim: str | None) -> None:
        """Exchange ``fields`` now: ``_start`` then ``_finish``, in one call to the transport
        (``prepared.exchange``) where nothing is profiled (on a small halo the Python calls
        cost more than the messages)."""
        if profiling.recorder:
            _finish(*self._start(fields, dim))
            return
        prepared, waiting, arrays = self._checked(fields, dim)
        prepared.exchange(arrays, waiting)

    def _start(self, fields: tuple[Any, ...], dim: str | None) -> tuple[Any, Any, Any]:
        """Post the exchange of ``fields`` and return at once: what ``_finish`` takes.

        Until ``_finish`` the fields' owned cells must not change and their halos must not be
        read. All fields travel together: one message per neighbour.
        """
        rec = profiling.recorder
        t = rec.now() if rec else 0.0
        prepared, waiting, arrays = self._checked(fields, dim)
        if waiting is not None:  # its finish may come after later calls: it waits for this one
            waiting = partial(waiting, call=self._agreement.call)
        if not rec:
            return prepared.start(arrays), waiting, None
        described = {
            "dim": dim,
            "transport": self.backend,
            "fields": [f"{i}: {a.dtype} {tuple(a.shape)}" for i, a in enumerate(arrays)],
        }
        t = rec.event("check", t, described)
        pending = prepared.start(arrays)
        rec.event("start", t, described)
        return pending, waiting, described

    def _checked(self, fields: tuple[Any, ...], dim: str | None) -> tuple[Any, Any, list[Any]]:
        """The prepared exchange of ``fields`` (checked now, or before for these same
        objects with the same layouts), what a slow wait for its messages does, if anything,
        and the fields' arrays. A call refused by a check of this rank's own (a ``FieldError``
        before the agreement) is no call of the exchange: the ranks still count alike."""
        arrays = _native.arrays(fields, np.ndarray, as_array)
        try:
            cached = self._prepared.get(dim, fields)
        except TypeError:  # an unhashable dim: the plan's lookup names it
            cached = None
        if cached is None or not cached[4].same(arrays):
            cached = self._prepare(fields, arrays, dim)
        elif self._agreement is not None:
            self._agreement.next_call()
            if self._agreement.last.get(cached[5]) != cached[3]:
                self._agreement.check(cached[5], cached[2], cached[3])
        if self._agreement is not None:
            self._agreement.made(cached[5], cached[2], cached[3])
        return cached[0], cached[1], arrays

    def _prepare(
        self, fields: tuple[Any, ...], arrays: list[Any], dim: str | None
    ) -> tuple[Any, Any, tuple[FieldSpec, ...], int, _native.Layout | None, str | None]:
        """Check ``fields`` against the plan of ``dim`` and have the transport prepare their
        exchange; with what a slow wait for their messages does (``Agreement.waiting``), if
        anything, their specs, kind, arrays' layouts and the dim the ranks compare (``dim=None``
        on an unstructured decomposition of one dim is that dim; a cartesian one has none).
        Kept for the same field objects where the transport allows, while their arrays keep
        those layouts: an array reshaped or made read-only in place is checked and bound
        again; also as a call the blocking call runs from C (``kept``) where the dim is None
        or a str, which C compares."""
        _check_libraries(arrays)
        plan = self.decomposition.plan(dim)
        specs = specs_of(plan, arrays)
        name = dim if dim is not None else getattr(self.decomposition, "dims", (None,))[0]
        kind = int.from_bytes(signature(specs, name), "little", signed=True)
        waiting = None
        if self._agreement is not None:  # before the transport's collective setup
            self._agreement.next_call()
            self._agreement.check(name, specs, kind)
            peers = tuple(n.rank for n in plan.remote_neighbours)
            waiting = partial(self._agreement.waiting, name, specs, peers)
        prepared = self._transport.prepare(plan, arrays, specs)
        if not prepared.reusable:
            return prepared, waiting, specs, kind, None, name
        checked = (prepared, waiting, specs, kind, _native.Layout(arrays), name)
        self._prepared.put(dim, fields, checked)
        if dim is None or type(dim) is str:
            kept = (fields, tuple(arrays), dim, prepared.kept(arrays), waiting, self._agreement)
            self.kept.insert(0, _native.ExchangeAgain(*kept, (name, kind, specs)))
            del self.kept[FIELD_SETS_REMEMBERED:]
        return checked


class _CompiledCall:
    """An exchange call DaCe can compile: DaCe's ``__sdfg__`` protocol over one ``Exchange``.

    The SDFG holds one exchange node of ``PHASE``; the closure is the rank's plan data.
    """

    PHASE = "exchange"

    def __init__(self, exchanger: _Exchanger) -> None:
        self._exchanger = exchanger

    def __sdfg__(self, *descriptors: Any, dim: str | None = None) -> Any:
        from gt4py_halo.compiled.convertible import exchange_sdfg

        dim = getattr(dim, "value", dim)  # DaCe passes string constants as StringLiteral
        return exchange_sdfg(self._data(), dim, descriptors, self.PHASE)

    def __sdfg_signature__(self) -> tuple[list[str], list[str]]:
        from gt4py_halo.compiled.convertible import field_names

        return field_names(), []

    def __sdfg_closure__(self, reevaluate: Any = None) -> dict[str, Any]:
        return self._data().arrays

    def closure_resolver(
        self, constant_args: Any, given_args: Any, parent_closure: Any = None
    ) -> Any:
        """DaCe's preprocessor collects a program's closure arrays through this."""
        return self._data().closure()

    def __gt4py_halo_key__(self) -> str:
        """What its SDFG depends on, besides its arguments (``compiled/step_cache.py``)."""
        return f"{type(self).__name__}:{self._data().key()}"

    def _data(self) -> Any:
        from gt4py_halo.compiled.convertible import CompiledExchangeData

        exchange = self._exchanger
        if exchange._compiled_data is None:
            exchange._compiled_data = CompiledExchangeData(
                exchange.decomposition, exchange.backend, exchange._auto
            )
        return exchange._compiled_data


class BlockingExchange(_CompiledCall, _native.Repeating):
    """``ex.exchange``: a call from Python exchanges now; DaCe turns a call into a graph node.

    ``ex.exchange(*fields, dim=None)`` fills the halos of ``fields`` (local arrays, owned
    entries and halo) from their owning ranks; ``dim``: the unstructured dim they live on.
    Collective: every rank of the decomposition makes the same calls with alike fields. A call
    passing the fields (and dim) of a kept call again, their arrays of the layouts then and
    nothing profiled, runs from C (``_native.Repeating``: the checks, the agreement's numbering
    and the prepared exchange, no Python frame); every other call is ``_called``.

    ``ex.exchange(u, v)`` inside ``@gh.program`` or ``@dace.program`` becomes one
    ``HaloExchange`` node reading and writing ``u`` and ``v``.
    """

    def __init__(self, exchanger: _Exchanger) -> None:
        super().__init__(exchanger)
        self._keep(exchanger.kept)

    def _called(self, *fields: Any, dim: str | None = None) -> None:
        """Exchange ``fields`` now (the class docstring), checked from Python."""
        self._exchanger.exchange(fields, dim)


class SplitExchange(_CompiledCall):
    """``ex.start``: from Python, posts the exchange and returns its ``ExchangeHandle``.

    Inside a compiled step, ``h = ex.start(v)`` becomes a start node returning a token and
    ``h.finish()`` the matching finish node (``compiled/split_phase.py``).
    """

    PHASE = "start"

    def __call__(self, *fields: Any, dim: str | None = None) -> ExchangeHandle:
        """Post the exchange of ``fields`` (as ``ex.exchange``) and return at once; the
        halos are written by the returned handle's ``finish()``."""
        return ExchangeHandle(*self._exchanger._start(fields, dim))


class ExchangeHandle:
    """A split-phase exchange in flight."""

    def __init__(self, pending: Any, waiting: Any, described: dict | None) -> None:
        self._pending = pending
        self._waiting = waiting  # what a slow wait does (``Agreement.waiting``), if anything
        self._described = described  # what a profile records of it (profiling.py)
        self._started = time.monotonic() if waiting is not None else 0.0

    def _hold(self, objects: tuple) -> None:
        """Keeps ``objects`` alive until the exchange is finished, even if it never is before
        the interpreter exits (``in_flight``): the arrays of fields passed as views that hold
        no reference to them."""
        if self._pending is not None:
            in_flight.hold(self._pending, objects)

    def is_ready(self) -> bool:
        """Whether ``finish`` would return without waiting for messages. Polled for
        ``ALARM_AFTER_S`` and more, it does what a wait that long does (``Agreement.waiting``):
        ranks that disagree about this call raise ``RanksDisagreeError`` here, as in
        ``finish`` (a loop polling it waited for good); the exchange is then left as a failed
        ``finish`` leaves it."""
        if self._pending is None or self._pending.test():
            return True
        if self._waiting is not None and time.monotonic() - self._started >= ALARM_AFTER_S:
            try:
                self._waiting()
            except RanksDisagreeError as error:
                pending, self._pending = self._pending, None
                _finish(pending, partial(_raise, error), self._described)
                raise
        return False

    def finish(self) -> None:
        """Wait for all messages and write the halos; calling it again does nothing."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            _finish(pending, self._waiting, self._described)


def _finish(pending: Any, waiting: Any, described: dict | None) -> None:
    """Finish an exchange ``_Exchanger._start`` posted: wait for its messages, write the
    halos."""
    rec = profiling.recorder
    t = rec.now() if rec else 0.0
    if waiting is None:
        pending.wait()
    else:
        pending.wait(waiting)
    if rec and described is not None:
        rec.event("finish", t, described)


def _raise(error: Exception) -> None:
    raise error


def _check_libraries(arrays: list[Any]) -> None:
    """Host and device fields go in separate calls: one call's messages are in one memory.
    Subclasses of NumPy's ndarray are host arrays, whatever module defines them."""
    if not arrays:
        raise FieldError("no fields given to exchange")
    kinds = {
        "numpy" if isinstance(a, np.ndarray) else type(a).__module__.split(".")[0] for a in arrays
    }
    if len(kinds) > 1:
        raise FieldError(
            f"fields mix array libraries ({', '.join(sorted(kinds))}); exchange host and "
            "device fields in separate calls"
        )
