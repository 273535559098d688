"""A step called again with the arguments of one of its last two calls: a model's steady
state, with the same fields at every call or two sets of buffers swapped between calls.

``Program`` converts a call's arguments for DaCe (``construct_arguments``) only when they
differ from those of the last two calls. The same ones again cost no
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
from dace.hooks import _COMPILED_SDFG_CALL_HOOKS as _CALL_HOOKS  # registered in place

from gt4py_halo import _native, profiling
from gt4py_halo.compiled.timers import drain

#: How many calls' arguments a step keeps: a model passing the same fields at every call
#: needs one, one swapping two sets of buffers between calls (``u, u_new = u_new, u``) two.
SLOTS = 2


def again_code(name: str, params: str, names: str) -> str:
    """The entry points added after DaCe's own (``__program_<step>``) in the generated C++ of
    step ``name`` (``params``, ``names``: DaCe's parameters of ``__program_<step>`` after its
    state, declared and passed, each with a leading comma): ``__gh_keep_<step>(slot, ...)``
    and one ``__gh_again_<step>_<slot>()`` per slot."""
    again = "".join(
        f"DACE_EXPORTED void __gh_again_{name}_{slot}() {{ __gh_kept[{slot}](); }}\n"
        for slot in range(SLOTS)
    )
    return f"""
#include <functional>
// gt4py_halo (compiled/last_call.py): the last calls' arguments, to call the step again
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


class LastCall:
    """A call of a step, to run it again at once when a later one passes the same objects;
    its converted arguments are kept in ``slot`` of the step's library.

    It holds the arguments weakly where they allow it (arrays, GT4Py fields: a step never
    keeps a user's field alive): once one has died, the next call converts its arguments
    anew, as it does for one reshaped in place. The check and the call are C
    (``_native.Again``): in Python they cost more than a small exchange."""

    __slots__ = (
        "_again",
        "_prepared",
        "_quick",
        "compiled",
        "name",
        "profiled",
        "slot",
        "timers",
    )

    def __init__(
        self,
        name: str,
        compiled: Any,
        args: tuple,
        buffers: list,
        prepared: tuple,
        rec: Any,
        timers: list,
        slot: int,
    ) -> None:
        """``prepared``: DaCe's arguments for ``compiled`` converted from ``args`` (whose
        arrays are ``buffers``: a GT4Py field's is its ndarray), after a call with them
        (which initialized the library)."""
        self.name, self.compiled, self.timers, self.slot = name, compiled, timers, slot
        self.profiled = rec is not None  # the build with timers, or the one without
        self._prepared = prepared
        lib, step = compiled._lib, compiled._sdfg.name
        keep = lib.get_symbol(f"__gh_keep_{step}", restype=None)
        keep(slot, compiled._libhandle, *prepared[0])
        self._again = lib.get_symbol(f"__gh_again_{step}_{slot}", restype=None)
        address = ctypes.cast(self._again, ctypes.c_void_p).value
        self._quick = _native.Again(args, tuple(buffers), address)

    def same(self, args: tuple) -> bool:
        """Whether ``again`` would run this call for ``args``."""
        return (profiling.recorder is not None) is self.profiled and self._quick.same(args)

    def again(self, args: tuple) -> bool:
        """The call again, if ``args`` are its arguments, no buffer of theirs reshaped, retyped
        or made read-only in place since, and profiling is on or off as it was; else
        ``False``.

        DaCe's ``fast_call`` without its Python, unless DaCe call hooks (instrumentation) are
        registered, which only ``fast_call`` invokes."""
        rec = profiling.recorder
        hooks = bool(_CALL_HOOKS) and any(_CALL_HOOKS)  # an unregistered one leaves a None
        if rec is None and not hooks and not self.profiled:
            return self._quick(args)  # the steady state: checked and called in C
        if (rec is not None) is not self.profiled or not self._quick.same(args):
            return False
        t = rec.now() if rec else 0.0
        if hooks:
            self.compiled.fast_call(*self._prepared)
        else:
            self._again()
        if rec:
            self.recorded(rec, t)
        return True

    def recorded(self, rec: Any, start: float) -> None:
        """Records the call that began at ``start`` in profile ``rec``, whose end collects
        what the step's timers recorded inside it."""
        rec.event(self.name, start, {"timers": len(self.timers)}, "step")
        rec.compiled_events[id(self.compiled)] = functools.partial(
            drain, self.compiled, self.timers, self.name
        )
