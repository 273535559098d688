"""The names a compiled step reads (``compiled/bindings.py``), and ``_native.rebound``'s
check that they still hold what they did: read off the bytecode of unusual code too, never
a failure on code it cannot follow, never keeping what it reads alive."""

from __future__ import annotations

import dis
import gc
import types
import weakref

import numpy as np

from gt4py_halo import _native
from gt4py_halo.compiled.bindings import bindings

SCALE = 2.0
LIMIT = float("nan")


class Holder:
    def __init__(self) -> None:
        self.ex = types.SimpleNamespace(name="ex")
        self.k = 3.0
        self.big = np.zeros(1000)

    def put(self, a):  # a method the step calls: its names are the step's
        a[0] = self.k

    @staticmethod
    def helper(a):  # no object: nothing of one read
        a[0] = 1.0

    def step(self, a):
        self.ex.exchange(a)
        self.put(a)
        self.helper(a)
        a[1] = SCALE * LIMIT
        return [self.k for _ in range(2)]  # nested code: self a cell there


def names(function) -> list[str]:
    return bindings(function)[1]


def test_the_names_of_a_method_and_of_what_it_calls() -> None:
    holder = Holder()
    entries, shown = bindings(holder.step)
    assert sorted(shown) == ["LIMIT", "SCALE", "self.ex", "self.k"]
    assert _native.rebound(entries) == -1
    global SCALE, LIMIT
    SCALE, LIMIT = 2.0 + 0.0, float("nan")  # equal values: no change
    assert _native.rebound(entries) == -1
    holder.k = np.float64(3.0)  # a float of the same bits
    assert _native.rebound(entries) == -1
    holder.k = 4.0
    assert shown[_native.rebound(entries)] == "self.k"
    holder.k = 3.0
    del holder.ex
    assert shown[_native.rebound(entries)] == "self.ex"


def test_an_object_read_is_not_kept_alive() -> None:
    holder = Holder()
    entries = bindings(holder.step)[0]
    alive, big = weakref.ref(holder), weakref.ref(holder.big)
    del holder
    gc.collect()
    assert alive() is None and big() is None
    assert _native.rebound(entries) == 0  # gone: changed


def test_names_beyond_one_byte_of_arguments_and_unusual_objects() -> None:
    """A code object of more than 256 names (``EXTENDED_ARG`` before the attribute loads),
    objects whose attribute lookups raise other errors (an attribute dict), a dict
    subclass, a name holding a weak reference: read, or left out, never a failure."""

    class Attributes(dict):
        def __getattr__(self, key):
            return self[key]  # a KeyError, not an AttributeError

    class Box:
        dt = 0.0

    many = "\n".join(f"    v{i} = a.g{i}" for i in range(300))  # 300 attribute names first
    namespace = {"cfg": Attributes(dt=0.5), "box": Box()}
    namespace["box"].dt = 0.25
    namespace["ref"] = weakref.ref(namespace["box"])
    exec(f"def step(a):\n{many}\n    a[0] = box.dt + cfg.dt\n    return ref", namespace)  # noqa: S102
    assert "EXTENDED_ARG" in {i.opname for i in dis.get_instructions(namespace["step"])}
    entries, shown = bindings(namespace["step"])
    assert "box.dt" in shown and "ref" in shown
    assert _native.rebound(entries) == -1
    namespace["box"].dt = 0.75
    assert shown[_native.rebound(entries)] == "box.dt"
