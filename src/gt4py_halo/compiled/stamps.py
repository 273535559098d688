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

A stamp is the step's number (of its qualified name, the same on every rank) in the high
half, its count of calls that ran in the low half. The step writes the stamp of a call into
the handle array of each exchange data it uses (``convertible.CompiledExchangeData``, at
``STAMP``) before it runs, so every build and instance of the step sends the same count. Steps of one qualified name
(one method of several objects) share a number: their counts tell them apart.
"""

from __future__ import annotations

import zlib

#: Where the stamp of the running call lies in the handle array of compiled exchanges (after
#: the communicator's handle).
STAMP = 1

#: Step numbers of this process -> the steps' names, to name them in errors.
_NAMES: dict[int, str] = {}


def step_number(qualname: str) -> int:
    """The number of the step of qualified name ``qualname``: its stamps' high half."""
    number = zlib.crc32(qualname.encode()) & 0x7FFFFFFF
    _NAMES.setdefault(number, qualname)
    return number


def stamp(number: int, calls: int) -> int:
    """The stamp of call ``calls`` of step ``number``."""
    return number << 32 | calls & 0xFFFFFFFF


def described(value: int) -> str:
    """A stamp in words: which call of which step."""
    name = _NAMES.get(value >> 32)
    step = f"step {name!r}" if name is not None else "a step this rank has not made"
    return f"call {value & 0xFFFFFFFF} of {step}"
