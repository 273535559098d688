"""A step called again with its last call's arguments: a model's steady state.

``Program`` converts a call's arguments for DaCe (``construct_arguments``) only when they
differ from the last call's. The same ones again cost no
conversion, and no ctypes conversion either: ctypes turns each argument of a call into a C
value anew, a cost per argument that a step of many fields pays at every call. So each step's
library keeps the last converted arguments itself: ``__gh_keep_<step>`` stores them (once per
new set of arguments), ``__gh_again_<step>``, which takes none, calls the step with them.

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

#: The entry points, after DaCe's own (``__program_<step>``), in the step's generated C++.
AGAIN = """
#include <functional>
// gt4py_halo (compiled/last_call.py): the last call's arguments, to call the step again
DACE_EXPORTED void __program_{name}({name}_state_t *__state{params});
static std::function<void()> __gh_last_call;
DACE_EXPORTED void __gh_keep_{name}({name}_state_t *__state{params})
{{
    __gh_last_call = [=]() {{ __program_{name}(__state{names}); }};
}}
DACE_EXPORTED void __gh_again_{name}()
{{
    __gh_last_call();
}}
"""


def add_again_entry(sdfg: dace.SDFG) -> None:
    """Adds ``__gh_keep_<step>`` and ``__gh_again_<step>`` to the lowered ``sdfg``, named as
    it will be compiled. Their arguments are the ones DaCe declares ``__program_<step>`` with
    and ``CompiledSDFG`` passes it: those of ``sdfg.arglist()``, in its order (a
    declaration that differed from DaCe's would not compile)."""
    arglist = sdfg.arglist()
    params = sdfg.signature(arglist=arglist)
    names = sdfg.signature(with_types=False, for_call=True, arglist=arglist)
    sdfg.append_global_code(
        AGAIN.format(
            name=sdfg.name,
            params=f", {params}" if params else "",
            names=f", {names}" if names else "",
        )
    )


class LastCall:
    """A step's last call, to run it again at once when the next passes the same objects.

    It holds the arguments weakly where they allow it (arrays, GT4Py fields: a step never
    keeps a user's field alive): once one has died, the next call converts its arguments
    anew, as it does for one reshaped in place. The check and the call are C
    (``_native.Again``): in Python they cost more than a small exchange."""

    __slots__ = ("_again", "_prepared", "_quick", "compiled", "name", "profiled", "timers")

    def __init__(
        self,
        name: str,
        compiled: Any,
        args: tuple,
        buffers: list,
        prepared: tuple,
        rec: Any,
        timers: list,
    ) -> None:
        """``prepared``: DaCe's arguments for ``compiled`` converted from ``args`` (whose
        arrays are ``buffers``: a GT4Py field's is its ndarray), after a call with them
        (which initialized the library)."""
        self.name, self.compiled, self.timers = name, compiled, timers
        self.profiled = rec is not None  # the build with timers, or the one without
        self._prepared = prepared
        lib, step = compiled._lib, compiled._sdfg.name
        keep = lib.get_symbol(f"__gh_keep_{step}", restype=None)
        keep(compiled._libhandle, *prepared[0])
        self._again = lib.get_symbol(f"__gh_again_{step}", restype=None)
        address = ctypes.cast(self._again, ctypes.c_void_p).value
        self._quick = _native.Again(args, tuple(buffers), address)

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
