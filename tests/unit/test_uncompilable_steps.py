"""What DaCe cannot compile in a step is a ``gh.ProgramError`` when the step is built, never
a warning: DaCe drops a ``raise`` and runs the rest, and runs a function it cannot parse as a
Python callback inside the compiled step (exceptions lost, Python between the kernels)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import gt4py_halo as gh

d = gh.CartesianDecomposition((12, 10), halo=1, periodic=True, comm=MPI.COMM_SELF)
ex = gh.make_exchange(d, backend="mpi")


@gh.program(comm=MPI.COMM_SELF)
def raising(a):
    if a.shape[0] > 3:
        raise ValueError("too large")
    ex.exchange(a)


def check(a):
    if a.shape[0] > 3:
        raise ValueError("too large")


@gh.program(comm=MPI.COMM_SELF)
def calling_a_raising_helper(a):
    check(a)
    ex.exchange(a)


@gh.program(comm=MPI.COMM_SELF)
def printing(a):
    ex.exchange(a)
    print(f"exchanged {a.shape}")


def double(a):
    a[1:-1, 1:-1] *= 2.0


@gh.program(comm=MPI.COMM_SELF)
def calling_a_helper(a):
    double(a)
    ex.exchange(a)


def maybe_double(a, n):
    if n > 5:
        return
    a[1:-1, 1:-1] *= 2.0


@gh.program(comm=MPI.COMM_SELF)
def returning_early_in_a_loop(a, b, n):
    for i in range(n):
        maybe_double(b, n)
        ex.exchange(a)
        if i > 1:
            continue


def test_a_raise_is_an_error() -> None:
    with pytest.raises(gh.ProgramError, match=r"raising: .*Runtime exception at line \d+"):
        raising(np.zeros(d.allocated_shape))


def test_a_helper_dace_cannot_parse_is_an_error() -> None:
    with pytest.raises(gh.ProgramError, match="calling_a_raising_helper: .*callback.*check"):
        calling_a_raising_helper(np.zeros(d.allocated_shape))


def test_python_side_effects_are_an_error() -> None:
    with pytest.raises(gh.ProgramError, match="printing: .*callback.*print"):
        printing(np.zeros(d.allocated_shape))


def test_helpers_dace_compiles_still_build() -> None:
    a = np.ones(d.allocated_shape)
    calling_a_helper(a)
    assert (a == 2.0).all()  # every cell: owned ones doubled, the halo from periodic owners


def test_a_helper_returning_without_a_value_is_an_error() -> None:
    """DaCe 2.0.0a10 inlines a helper's ``return`` as a return from the whole step: the code
    after the call was dropped without a word (inside a loop that continues, its
    simplification failed instead)."""
    a, b = np.zeros(d.allocated_shape), np.zeros(d.allocated_shape)
    with pytest.raises(gh.ProgramError, match="function '.*maybe_double' returns early or"):
        returning_early_in_a_loop(a, b, 3)


def test_an_error_of_dace_lowering_a_step_is_named(monkeypatch) -> None:
    """Whatever DaCe raises lowering a step is a ``ProgramError`` naming it, chained."""
    from gt4py_halo.compiled import program

    def failing(*args, **kwargs):
        raise ValueError("what DaCe raised")

    monkeypatch.setattr(program, "fuse_exchange_maps", failing)
    step = gh.program(calling_a_helper.__wrapped__, comm=MPI.COMM_SELF)  # (nothing lowered)
    with pytest.raises(gh.ProgramError, match="was not built: ValueError: what DaCe raised"):
        step(np.zeros(d.allocated_shape))
