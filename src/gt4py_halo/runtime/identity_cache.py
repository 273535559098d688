"""A small cache of what was computed for particular objects (fields, arrays).

A model exchanges the same few fields every step (``u``, then ``v``, ...): checking them and
slicing their views again on every call would cost more than the copies of a small halo. Keys
are object identities; entries hold the objects themselves, so an id cannot be reused by a new
object while its entry lives. Least recently used entries go beyond ``size``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any


class IdentityCache:
    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple, tuple[tuple[Any, ...], Any]] = OrderedDict()

    def get(self, tag: Hashable, objects: Sequence[Any]) -> Any:
        """The value stored for exactly these objects (and ``tag``), or ``None``."""
        key = (tag, *map(id, objects))
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, tag: Hashable, objects: Sequence[Any], value: Any) -> None:
        self._entries[(tag, *map(id, objects))] = (tuple(objects), value)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
