"""``gh.program`` refuses options and parameters it does not take, when it is applied (before any
build)."""

from __future__ import annotations

import dace
import pytest

import gt4py_halo as gh


def step(u):
    pass


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"device": "tpu"}, "device"),
        ({"copy_maps": "field"}, "copy_maps"),
        ({"in_place_min_bytes": 0}, "in_place_min_bytes"),
        ({"in_place_min_bytes": "32k"}, "in_place_min_bytes"),
        ({"pack_in_producers": "no"}, "pack_in_producers"),  # (was taken for True)
        ({"comm": 3}, "comm must be an mpi4py communicator"),  # (an AttributeError, later)
        ({"exchange": 3}, r"exchange must be an exchange \(gh.make_exchange\)"),
    ],
)
def test_bad_options_are_named(options, named) -> None:
    with pytest.raises(gh.ProgramError, match=named):
        gh.program(step, **options)


def test_good_options_are_taken() -> None:
    from mpi4py import MPI

    for options in (
        {},
        {"in_place_min_bytes": None},
        {"in_place_min_bytes": 1},
        {"pack_in_producers": False},
        {"comm": MPI.COMM_SELF},
    ):
        assert callable(gh.program(step, **options))


def test_keyword_only_and_variadic_parameters_are_refused() -> None:
    """A step is called with its arguments by position (DaCe takes no others)."""

    def keyword_only(v, *, u):
        pass

    def variadic(*fields):
        pass

    for function, named in ((keyword_only, "u"), (variadic, "fields")):
        with pytest.raises(gh.ProgramError, match=f"{named} is keyword-only or variadic"):
            gh.program(function)


def test_compile_time_parameters_are_refused() -> None:
    """DaCe's ``dace.compiletime`` would make a build per value, which the step's build key
    (argument kinds) does not hold; it failed in DaCe's parser with a KeyError."""

    def step_of(v, k: dace.compiletime):
        pass

    with pytest.raises(gh.ProgramError, match="k is annotated dace.compiletime"):
        gh.program(step_of)


def test_static_and_class_methods_are_refused_below_the_step() -> None:
    """``@gh.program`` above ``@staticmethod`` would make a step of the descriptor: the
    error says to swap them."""
    for kind in (staticmethod, classmethod):
        with pytest.raises(gh.ProgramError, match=f"put it below \\(@{kind.__name__} above"):
            gh.program(kind(step))
