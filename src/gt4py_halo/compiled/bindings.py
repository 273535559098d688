"""The names a compiled step read when it was built, and whether they still hold what they did.

DaCe resolves a step's globals, closure variables and attributes when it parses the step,
and compiles in what it found: the exchanges' plans, GT4Py programs, helper functions,
numbers as constants. A name given another object afterwards (``ex = gh.make_exchange(d2)``,
``self.ex = ...``, a global ``dt`` changed) would not be seen: the step would run with what
it found, wrong halos or stale constants. So the step notes, at its first build, what each
name it reads resolves to (``bindings``), and a call whose names resolve to other objects
is a ``ProgramError`` before anything runs (``_native.rebound``, also inside the C of a call
with the same arguments as a last one: ``last_call``). Reading the names never fails a
step: code it cannot follow is left out.

The names are read off the bytecode: each global or closure variable the step (and each
Python helper function it calls, and theirs) loads, followed through the attributes loaded
right after it while they are attributes of the object itself (in its ``__dict__``), and,
for a step that is a method, the attributes of ``self`` (and of the methods of the user's
it calls on the objects it reaches so). Modules and their attributes, classes and builtins
are not followed: what they hold is the libraries' own. A binding holds its object, and the
object its attributes are read from, weakly where it can (a step never keeps a user's
array alive), else holds it (numbers, strings, tuples: compared by value where the object
differs).
"""

from __future__ import annotations

import dis
import inspect
import logging
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from dace.frontend.python.parser import DaceProgram

log = logging.getLogger(__name__)

#: What a name may hold that the step does not compile in as found
_NOT_FOLLOWED = (
    types.ModuleType,
    type,
    types.BuiltinFunctionType,
    types.MethodWrapperType,
    np.ufunc,
)
#: Instructions between a load and its attribute loads that load nothing
_NOTHING = {"EXTENDED_ARG", "CACHE", "NOP"}


def bindings(function: Callable[..., Any]) -> tuple[tuple, list[str]]:
    """What ``function`` (a step: a function or bound method) reads by name now: the
    entries ``_native.rebound`` checks, ``(root, names, held, weak)`` (``root`` a dict whose
    ``names[0]`` is looked up, a closure cell, or an object, by a weak reference where it
    takes one; the rest of ``names`` its attributes; ``held`` the object found, weakly if
    ``weak``), and each entry's name as written (``self.ex``)."""
    entries: dict[tuple, tuple] = {}
    this = getattr(function, "__self__", None) if inspect.ismethod(function) else None
    seen: set[tuple[int, int]] = set()
    todo = [(getattr(function, "__func__", function), this)]
    while todo:
        f, obj = todo.pop()
        if (id(f), id(obj)) in seen or not isinstance(f, types.FunctionType):
            continue
        seen.add((id(f), id(obj)))
        try:
            reads = list(_reads(f, obj))
        except Exception as error:  # noqa: BLE001 - code it cannot follow: left out
            log.debug("the names %s reads are not checked: %r", f.__qualname__, error)
            continue
        for root, names, shown in reads:
            if root is None:  # a method of the object called: read as well
                todo.append(names)
                continue
            value = _resolve(root, names)
            if value is _GONE or isinstance(value, _NOT_FOLLOWED):
                continue
            key = (id(root), names)
            if key not in entries:
                entries[key] = ((_weakly(root), names, *_held(value)), shown)
            helper = value.f if isinstance(value, DaceProgram) else value
            if isinstance(helper, types.FunctionType) and _users(helper):
                todo.append((helper, None))
    found = list(entries.values())
    return tuple(e for e, _ in found), [shown for _, shown in found]


_GONE = object()


def _reads(f: types.FunctionType, obj: Any) -> Iterator[tuple[Any, Any, str]]:
    """Each name ``f``'s code (its nested code too) loads, with the attributes loaded right
    after it that its object holds itself: ``(root, names, as written)``; and each method
    of the user's it calls on an object it reaches so: ``(None, (function, object), "")``."""
    cells = dict(zip(f.__code__.co_freevars, f.__closure__ or ()))
    first = f.__code__.co_varnames[0] if obj is not None and f.__code__.co_argcount else None
    for code in _codes(f.__code__):
        chain: list = []
        for ins in [*dis.get_instructions(code), None]:
            if ins is not None and ins.opname in _NOTHING:
                continue
            if ins is not None and ins.opname == "LOAD_ATTR" and chain:
                chain.append(ins.argval)
                continue
            if chain:
                yield from _bound(chain, f.__globals__, cells, obj, first)
            chain = [] if ins is None else _load(ins)


def _load(ins: dis.Instruction) -> list:
    """The start of a chain: ``[kind, name]`` for a load of a global, a closure variable or a
    local (the last of a combined load of two locals, as newer Pythons make), else ``[]``."""
    name = ins.argval
    if ins.opname == "LOAD_GLOBAL":
        return ["global", name]
    if ins.opname == "LOAD_DEREF":
        return ["cell", name]
    if ins.opname.startswith("LOAD_FAST"):
        return ["local", name[-1] if isinstance(name, tuple) else name]
    return []


def _bound(chain: list, namespace: dict, cells: dict, obj: Any, first: str | None) -> Any:
    """The entry of a load and the attributes after it (``_reads``), if it is one: a global
    (not a builtin), a closure variable, or an attribute of the method's object (a local, or
    a cell where nested code uses it)."""
    kind, name, *attributes = chain
    if name == first and kind in ("local", "cell") and attributes:
        root, names = obj, ()
    elif kind == "global" and name in namespace:
        root, names = namespace, (name,)
    elif kind == "cell" and name in cells:
        root, names = cells[name], ()
    else:
        return
    value = _resolve(root, names)
    for attribute in attributes:  # as far as the objects hold the attributes themselves
        if isinstance(value, types.ModuleType):
            break
        if attribute not in getattr(value, "__dict__", ()):
            method = inspect.getattr_static(type(value), attribute, None)  # of its class
            if isinstance(method, types.FunctionType) and _users(method):
                yield None, (method, value), ""
            break
        value = getattr(value, attribute)
        if isinstance(value, (types.MethodType, types.BuiltinMethodType)):  # the object's
            break
        names += (attribute,)
    if names or isinstance(root, types.CellType):
        yield root, names, ".".join(names if type(root) is dict else [name, *names])


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _resolve(root: Any, names: tuple[str, ...]) -> Any:
    """What ``root`` and ``names`` resolve to now (as ``_native.rebound`` does), or
    ``_GONE``."""
    rest = names
    if type(root) is dict:
        if names[0] not in root:
            return _GONE
        value, rest = root[names[0]], names[1:]
    elif isinstance(root, types.CellType):
        try:
            value = root.cell_contents
        except ValueError:
            return _GONE
    else:
        value = root
    for attribute in rest:
        try:
            value = getattr(value, attribute)
        except Exception:  # noqa: BLE001 - as the C: whatever it raises, it holds nothing
            return _GONE
    return value


def _weakly(root: Any) -> Any:
    """``root`` as a binding holds it: an object by a weak reference where it takes one."""
    if type(root) is dict or isinstance(root, types.CellType):
        return root
    try:
        return weakref.ref(root)
    except TypeError:
        return root


def _held(value: Any) -> tuple[Any, bool]:
    """``value`` as a binding holds it, and whether weakly."""
    try:
        return weakref.ref(value), True
    except TypeError:
        return value, False


def _users(f: types.FunctionType) -> bool:
    """Whether ``f`` is the user's, not a library's (whose names are not followed)."""
    top = (f.__module__ or "").partition(".")[0]
    return top not in {"dace", "gt4py", "gt4py_halo", "numpy", "cupy", "mpi4py"}
