"""A small cache of what was computed for particular objects (fields, arrays).

A model exchanges the same few fields every step (``u``, then ``v``, ...): checking them and
slicing their views again on every call would cost more than the copies of a small halo. Keys
are object identities. The cache never keeps those objects alive: it holds no reference to
them, and an entry is dropped the moment one of its objects is garbage-collected (so an id
reused by a new object never finds an old entry). Values must not reference the objects
either (``unowned_view``). Nor do the objects keep the cache alive. Objects that cannot be
weakly referenced are not cached. Beyond ``size`` entries the oldest goes: a hit costs one
dict lookup (a model's working set of field sets fits, and is never evicted while it does).
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Hashable, Sequence
from functools import partial
from typing import Any

import numpy as np

from gt4py_halo._native import identities, lookup


class IdentityCache:
    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[tuple, Any] = {}
        self._watched: set[int] = set()  # ids of objects whose collection drops their entries
        #: ``get(tag, objects)``: the value stored for exactly these objects (and ``tag``), or
        #: ``None``; one C call (it is on every exchange's path).
        self.get = partial(lookup, self._entries)

    def put(self, tag: Hashable, objects: Sequence[Any], value: Any) -> None:
        try:
            for obj in objects:
                if id(obj) not in self._watched:
                    weakref.finalize(obj, _forget, weakref.ref(self), id(obj))
                    self._watched.add(id(obj))
        except TypeError:  # not weakly referenceable: not cached
            return
        self._entries[identities(tag, objects)] = value
        if len(self._entries) > self._size:
            del self._entries[next(iter(self._entries))]

    def _forget(self, identity: int) -> None:
        """An object is gone: drop every entry it keys (its id may be reused now)."""
        self._watched.discard(identity)
        for key in [k for k in self._entries if identity in k[1:]]:
            del self._entries[key]


def _forget(cache: weakref.ref[IdentityCache], identity: int) -> None:
    """``cache._forget(identity)`` if the cache is still there: a cached object that outlives
    the cache (a user's field, its exchange dropped) does not keep the cache and its values
    (prepared exchanges, their transport) alive."""
    alive = cache()
    if alive is not None:
        alive._forget(identity)


def unowned_view(array: Any) -> np.ndarray | None:
    """A view of ``array``'s memory that holds no reference to ``array``; ``None`` where that
    cannot be made (device arrays, empty ones).

    What a cache keeps for a user's array must not keep it alive; whoever uses the view keeps
    the array alive meanwhile (an exchange in flight holds its fields).
    """
    if not isinstance(array, np.ndarray) or array.size == 0:
        return None
    low = sum((n - 1) * s for n, s in zip(array.shape, array.strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(array.shape, array.strides) if s > 0)
    address = array.__array_interface__["data"][0] + low
    memory = (ctypes.c_char * (high - low + array.itemsize)).from_address(address)
    view = np.ndarray(array.shape, array.dtype, memory, offset=-low, strides=array.strides)
    view.flags.writeable = array.flags.writeable
    return view
