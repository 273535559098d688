"""A step called again with the arguments of one of its last calls: a model's steady
state, with the same fields at every call, or two or three sets of buffers taking turns
between calls (swapped; rotated time levels).

``Program`` converts a call's arguments (``Conversion``) only when they differ from those of
the last ``SLOTS`` calls. The same ones again cost no
conversion, and no ctypes conversion either: ctypes turns each argument of a call into a C
value anew, a cost per argument that a step of many fields pays at every call. So each step's
library keeps the converted arguments itself, in ``SLOTS`` slots: ``__gh_keep_<step>`` stores
them in a slot (once per new set of arguments), ``__gh_again_<step>_<slot>``, which takes
none, calls the step with them.

Each loaded library has its own copy of what it keeps: DaCe loads a library loaded already
(another instance of the same build) from a copy of its file, privately (``RTLD_LOCAL``).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import dace
from dace.data.ctypes_interop import make_ctypes_argument
from dace.dtypes import array_interface_ptr
from dace.hooks import _COMPILED_SDFG_CALL_HOOKS as _CALL_HOOKS  # registered in place

from gt4py_halo import _native, profiling
from gt4py_halo.compiled.stamps import StepClock, described
from gt4py_halo.compiled.timers import drain
from gt4py_halo.errors import RanksDisagreeError

# a step's call runs in C (``_native.Repeating``) only while nothing would see it from Python:
# no profile records (``profiling.recorder``, watched there), no DaCe call hooks
_native.watch_hooks(_CALL_HOOKS)

#: How many calls' arguments a step keeps: a model passing the same fields at every call
#: needs one, one swapping two sets of buffers between calls (``u, u_new = u_new, u``) two,
#: one rotating three time levels (``u_old, u, u_new = u, u_new, u_old``: leapfrog, 3rd-order
#: Adams-Bashforth) three.
SLOTS = 3


def again_code(name: str, params: str, names: str) -> str:
    """The entry points added after DaCe's own (``__program_<step>``) in the generated C++ of
    step ``name`` (``params``, ``names``: DaCe's parameters of ``__program_<step>`` after its
    state, declared and passed, each with a leading comma): ``__gh_keep_<step>(slot, ...)``
    and one ``__gh_again_<step>_<slot>()`` per slot, which returns whether its MPI exchanges
    received a message unlike expected (``Conversion.check_messages``)."""
    again = "".join(
        f"DACE_EXPORTED int __gh_again_{name}_{slot}() {{ __gh_kept[{slot}](); return GH_UNEXPECTED; }}\n"
        for slot in range(SLOTS)
    )
    return f"""
#include <functional>
// gt4py_halo (compiled/last_call.py): the last calls' arguments, to call the step again
#ifdef GT4PY_HALO_MPI_CHECKS
#define GH_UNEXPECTED (gt4py_halo_mpi::unexpected().count != 0)
#else
#define GH_UNEXPECTED 0
#endif
DACE_EXPORTED void __program_{name}({name}_state_t *__state{params});
static std::function<void()> __gh_kept[{SLOTS}];
DACE_EXPORTED void __gh_keep_{name}(int slot, {name}_state_t *__state{params})
{{
    __gh_kept[slot] = [=]() {{ __program_{name}(__state{names}); }};
}}
{again}"""


def add_again_entry(sdfg: dace.SDFG) -> None:
    """Adds ``again_code`` to the lowered ``sdfg``, named as it will be compiled. Its
    arguments are the ones DaCe declares ``__program_<step>`` with and ``CompiledSDFG``
    passes it: those of ``sdfg.arglist()``, in its order (a declaration that differed from
    DaCe's would not compile)."""
    arglist = sdfg.arglist()
    params = sdfg.signature(arglist=arglist)
    names = sdfg.signature(with_types=False, for_call=True, arglist=arglist)
    sdfg.append_global_code(
        again_code(sdfg.name, f", {params}" if params else "", f", {names}" if names else "")
    )


class Conversion:
    """A call's arguments as a build's compiled step takes them (``fast_call``), in the order
    of its C signature: what DaCe's ``construct_arguments`` makes of the arguments a step
    takes, without its checks of each argument against its descriptor, made before here.
    Arrays become pointers to their data, numbers C values of their descriptors' types, and
    the symbols of the arrays' shapes and strides (``layouts``) the values read off the
    arrays; what is fixed per build (``fixed``: plan data, neighbour tables and their
    symbols) is converted once.

    The checks made before: a build is chosen for the types of the arguments
    (``Program._build``: an array's dtype and rank, a number's type), so each converts to its
    descriptor's type as DaCe converts it; extents and strides fit the symbols' C ``int``
    (``program._check_kinds``). The compiled step's first call, which also initializes it,
    goes through DaCe's conversion.
    """

    def __init__(self, compiled: Any, fixed: dict[str, Any], names: list[str], layouts: list):
        """``names``: the step's parameters, in order; ``layouts``: per parameter, the names
        of its size and stride symbols (``None`` for numbers, and for strides that are the
        constant 1)."""
        self.compiled, self._fixed, self._names, self._layouts = compiled, fixed, names, layouts
        self._symbols: dict[str, Any] = {}
        self.waits: Any = None  # what watches its MPI waits (``StepWaits``), if it has any
        self.handles: tuple = ()  # where its exchanges read the stamp of the call (stamps.py)
        descriptors = compiled._typedict
        sources: dict[str, tuple] = {}  # where each of the step's C parameters comes from
        for position, (name, layout) in enumerate(zip(names, layouts)):
            sources[name] = (position, None)
            for dim, symbol in enumerate(layout[0] if layout else ()):
                sources.setdefault(symbol, (position, ("shape", dim)))
            for dim, symbol in enumerate(layout[1] if layout else ()):
                if symbol is not None:
                    sources.setdefault(symbol, (position, ("stride", dim)))
        self._order = []
        self._direct = not any(name.startswith("__return") for name in compiled._sig)
        for name in compiled._sig:
            descriptor = descriptors[name]
            if name in fixed:
                converted = make_ctypes_argument(fixed[name], descriptor, name, allow_views=True)
                self._order.append((converted, None, None, None, None))
            elif name in sources:
                position, part = sources[name]
                if isinstance(descriptor, dace.data.Array):
                    self._order.append((None, position, part, None, descriptor.storage))
                else:
                    self._order.append((None, position, part, descriptor.dtype.as_ctypes(), None))
            else:  # what DaCe adds that no step has
                self._direct = False

    def __call__(self, values: list[Any]) -> tuple[tuple, tuple]:
        """``fast_call``'s arguments for a call with ``values`` (the step's arguments, GT4Py
        fields as their buffers), checked to fit the build."""
        if self._direct and self.compiled._initialized:
            converted, strides = [], {}
            for fixed, position, part, ctype, storage in self._order:
                if fixed is not None:
                    converted.append(fixed)
                    continue
                value = values[position]
                if ctype is None:
                    converted.append(ctypes.c_void_p(array_interface_ptr(value, storage)))
                    continue
                if part is not None:
                    dim = part[1]
                    if part[0] == "shape":
                        value = value.shape[dim]
                    else:
                        if position not in strides:
                            strides[position] = element_strides(value)
                        value = strides[position][dim]
                converted.append(ctype(value))
            return tuple(converted), ()
        return self.dace_arguments(values)

    def dace_arguments(self, values: list[Any]) -> tuple[tuple, tuple]:
        """What DaCe's ``construct_arguments`` makes of ``values``: ``fast_call``'s arguments,
        and those that initialize the compiled step."""
        arguments = dict(self._fixed)
        arguments.update(zip(self._names, values))
        for value, layout in zip(values, self._layouts):
            if layout is not None:
                arguments.update(zip(layout[0], value.shape))
                pairs = zip(layout[1], element_strides(value))
                arguments.update((name, n) for name, n in pairs if name is not None)
        # array descriptors carry symbolic strides: views (GT4Py's padded buffers) are fine
        with dace.config.set_temporary("compiler", "allow_view_arguments", value=True):
            prepared = self.compiled.construct_arguments(**arguments)
        # kept by DaCe for Python callbacks, which no step has (``UNCOMPILABLE``): it would
        # keep the arguments alive
        self.compiled._argument_to_pyobject.clear()
        return prepared

    def entry_point(self, name: str, restype: Any = None) -> Any:
        """The loaded step's C function ``name`` (of ``again_code``, or of the MPI
        transport's header), looked up once; ``None`` where the library has none."""
        if name not in self._symbols:
            try:
                self._symbols[name] = self.compiled._lib.get_symbol(name, restype=restype)
            except KeyError:
                self._symbols[name] = None
        return self._symbols[name]

    def check_messages(self, step: str) -> None:
        """After a call of ``step``: ``RanksDisagreeError`` if its MPI exchanges received a
        message unlike expected (``transports/mpi/include/gt4py_halo_mpi.hpp``): of another
        size (the ranks passed fields of other levels or dtypes to one of its exchanges), or
        of another call (ranks out of step, ``stamps.py``), so its halos are not valid.
        Raised on the ranks that received such a message."""
        take = self.entry_point("gt4py_halo_mpi_unexpected", ctypes.c_long)
        note = (ctypes.c_long * 5)()
        if take is None or not take(note):
            return
        count, source, got, expected, stamped = note
        if stamped == 2:
            raise RanksDisagreeError(f"step {step!r}: {_shm_problem(source, got, expected)}")
        if stamped:
            raise RanksDisagreeError(
                f"step {step!r} received {count} message(s) unlike expected, the first of "
                f"another call: from rank {source}, sent in its {described(got)} to an "
                f"exchange this rank ran in its {described(expected)}: the ranks are out of "
                "step (a branch or a loop "
                "around an exchange that differs between ranks, a rank calling the step more "
                "often than the others, or steps called in other orders). The halos of this "
                "call are not valid"
            )
        if source < 0:
            what = f"MPI_Waitall failed (error {got})"
        else:
            size = f"more than {expected}" if got < 0 else f"{got}"
            what = f"a message of {size} bytes from rank {source}, {expected} expected"
        raise RanksDisagreeError(
            f"step {step!r} received {count} message(s) unlike expected, the first {what} "
            "(ranks of the exchange's decomposition): the ranks passed fields of other levels "
            "or dtypes to one of its exchanges (a rank out of step with the others: a call "
            "skipped, or another call's arguments). The halos of this call are not valid"
        )


def _shm_problem(rank: int, problem: int, detail: int) -> str:
    """What a compiled ``shm`` exchange noted (``transports/shm/include/gt4py_halo_shm.hpp``,
    ``Problem``): ``rank`` the rank whose record or field it was, ``detail`` its field (or
    exchange, or the most in flight)."""
    if problem == 5:
        return (
            f"more than {detail} 'shm' exchanges in flight at once: an exchange was refused "
            "(finish some before starting others). The halos of this call are not valid"
        )
    described = {
        0: f"rank {rank} noted problem {problem} (detail {detail})",
        1: f"rank {rank} published its exchange {detail} where this rank ran another: the "
        "ranks are out of step (a branch or a loop around an exchange that differs between "
        "ranks, a rank calling the step more often than the others)",
        2: f"rank {rank} exchanges fields of another kind than this rank ("
        + (f"field {detail}: its levels or axes" if detail >= 0 else "their count or dtypes")
        + ")",
        3: f"rank {rank}'s field {detail} does not hold the box this rank reads, or lies "
        "outside its shared memory",
        4: f"rank {rank}'s field {detail} is not in memory the exchange's ranks share: "
        "allocate the fields a compiled 'shm' exchange gets with gh.shared_allocator of its "
        "decomposition (a field the step makes itself is not)",
    }[problem if 1 <= problem <= 4 else 0]
    return f"a compiled 'shm' exchange copied nothing: {described}. The halos of this call are not valid"


def element_strides(value: Any) -> tuple[int, ...]:
    """The strides of array ``value`` in elements; those of a C-ordered array for an empty
    one (NumPy gives it strides of 0, and ranks must agree on which strides are 1: a rank with
    no entries of a dim passes empty fields)."""
    if value.size == 0:
        found, inner = [], 1
        for n in reversed(value.shape):
            found.insert(0, inner)
            inner *= max(n, 1)
        return tuple(found)
    return tuple(s // value.itemsize for s in value.strides)


class LastCall:
    """A call of a step, to run it again at once when a later one passes the same objects;
    its converted arguments are kept in ``slot`` of the step's library.

    It holds the arguments weakly where they allow it (arrays, GT4Py fields: a step never
    keeps a user's field alive): once one has died, the next call converts its arguments
    anew, as it does for one reshaped in place. The check and the call are C
    (``_native.Again``): in Python they cost more than a small exchange."""

    __slots__ = (
        "_again",
        "_clock",
        "_conversion",
        "_prepared",
        "compiled",
        "name",
        "native",
        "profiled",
        "quick",
        "slot",
        "timers",
    )

    def __init__(
        self,
        name: str,
        conversion: Conversion,
        args: tuple,
        buffers: list,
        prepared: tuple,
        rec: Any,
        timers: list,
        slot: int,
        bindings: tuple,
        clock: StepClock,
    ) -> None:
        """``prepared``: the arguments ``conversion`` made of ``args`` for its compiled step
        (whose arrays are ``buffers``: a GT4Py field's is its ndarray), after a call with
        them (which initialized the library); ``bindings``: the names the step read at its
        build (``compiled/bindings.py``), checked before each call again (``_native.Rebound``
        where one holds another object); ``clock``: the step's count of calls that ran, which
        stamps each call again (``stamps.py``)."""
        compiled = conversion.compiled
        self.name, self.compiled, self.timers, self.slot = name, compiled, timers, slot
        self.profiled = rec is not None  # the build with timers, or the one without
        self._prepared, self._conversion, self._clock = prepared, conversion, clock
        step = compiled._sdfg.name
        conversion.entry_point(f"__gh_keep_{step}")(slot, compiled._libhandle, *prepared[0])
        self._again = conversion.entry_point(f"__gh_again_{step}_{slot}")
        address = ctypes.cast(self._again, ctypes.c_void_p).value
        stamping = clock.native(conversion.handles)
        self.quick = _native.Again(args, tuple(buffers), address, bindings, stamping)
        # what the step's call runs in C (``_native.Repeating``): not a build with timers, which
        # runs while a profile records, from Python
        self.native = None if self.profiled else self.quick

    def same(self, args: tuple) -> bool:
        """Whether ``again`` would run this call for ``args``."""
        return (profiling.recorder is not None) is self.profiled and self.quick.same(args)

    def again(self, args: tuple) -> bool:
        """The call again, if ``args`` are its arguments, no buffer of theirs reshaped, retyped
        or made read-only in place since, and profiling is on or off as it was; else
        ``False``.

        DaCe's ``fast_call`` without its Python, unless DaCe call hooks (instrumentation) are
        registered, which only ``fast_call`` invokes."""
        if self.native is not None and _native.quiet():  # as ``_native.Repeating`` decides
            try:
                return self.native(args)  # the steady state: checked and called in C
            except _native.MessagesUnexpected:  # it ran: the error, raised below
                pass
            self.messages_checked()
            return True
        rec = profiling.recorder
        if (rec is not None) is not self.profiled or not self.quick.same(args):
            return False
        t = rec.now() if rec else 0.0
        self._clock.stamp(self._conversion.handles)
        if any(_CALL_HOOKS):  # an unregistered one leaves a None
            self.compiled.fast_call(*self._prepared)
        else:
            self._again()
        self._clock.ran()
        if rec:
            self.recorded(rec, t)
        self.messages_checked()
        return True

    def messages_checked(self) -> None:
        """After the call ran again: ``RanksDisagreeError`` where it received messages unlike
        expected (``Conversion.check_messages``)."""
        self._conversion.check_messages(self.name)

    def recorded(self, rec: Any, start: float) -> None:
        """Records the call that began at ``start`` in profile ``rec``, whose end collects
        what the step's timers recorded inside it."""
        rec.event(self.name, start, {"timers": len(self.timers)}, "step")
        rec.compiled_events[id(self.compiled)] = functools.partial(
            drain, self.compiled, self.timers, self.name
        )
