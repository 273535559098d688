"""Which call of which step a compiled exchange's messages belong to: their *stamp*.

MPI pairs an exchange's messages between two ranks in the order they were posted, whichever
call posted them. Ranks out of step (a branch or a loop around an exchange that differs between
ranks, a rank that calls a step more often than the others, steps called in other orders)
pair one call's messages with another's: of the same size, they filled halos with wrong
values, silently. So each step counts its calls that ran (not those every rank refused before
anything was sent), and its MPI exchanges send with every message
the stamp of the call that sent it (``transports/mpi/expansion.py``, ``unstructured.py``) and
compare the stamps they receive with their own (``gt4py_halo_mpi::wait_checked``): a
difference is a ``RanksDisagreeError`` after the call, on each rank that received one.

A stamp is the step's number (of its module and qualified name, the same on every rank) in
the high
half, its count of calls that ran in the low half (``StepClock``, one per step). Before a
call runs, the stamp is written into the handle array of each exchange data its build uses
(``convertible.CompiledExchangeData``, at ``STAMP``), so every build and instance of the step
sends the same count; a kept call does that in C (``_native.Again``), costing nothing
measurable (docs/benchmarks.md, "Stamps"). Steps of one name (a method's, of several
objects; those one factory function makes) share a number: ranks calling two of them in
other orders are told apart where the steps' counts differ, not where they are equal (a
number per step made would differ between ranks that make or first touch them in other
orders: false errors).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

#: Where the stamp of the running call lies in the handle array of compiled exchanges (after
#: the communicator's handle).
STAMP = 1
#: A stamp's bytes in a message.
STAMP_BYTES = 8

#: Step numbers of this process -> the steps' names, to name them in errors.
_NAMES: dict[int, str] = {}


class StepClock:
    """A step's count of calls that ran, shared by all its builds and instances."""

    def __init__(self, module: str, qualname: str) -> None:
        self.number = zlib.crc32(f"{module}.{qualname}".encode()) & 0x7FFFFFFF
        _NAMES.setdefault(self.number, qualname)
        self.calls = np.zeros(1, dtype=np.int64)

    def stamp(self, handles: tuple[np.ndarray, ...]) -> None:
        """Write the stamp of the next call into ``handles`` (those a build reads); as
        ``_native.Again`` does for a kept call (``again_call``)."""
        value = self.number << 32 | (int(self.calls[0]) + 1) & 0xFFFFFFFF
        for handle in handles:
            handle[STAMP] = value

    def ran(self) -> None:
        """Count the call stamped last: it ran."""
        self.calls[0] += 1

    def native(self, handles: tuple[np.ndarray, ...]) -> tuple[Any, int, int, tuple[int, ...]]:
        """What ``_native.Again`` takes to do ``stamp`` and ``ran`` itself in C."""
        slots = tuple(h.ctypes.data + STAMP * h.itemsize for h in handles)
        return ((self, handles), self.calls.ctypes.data, self.number, slots)


def described(value: int) -> str:
    """A stamp in words: which call of which step."""
    name = _NAMES.get(value >> 32)
    step = f"step {name!r}" if name is not None else "a step this rank has not made"
    return f"call {value & 0xFFFFFFFF} of {step}"
