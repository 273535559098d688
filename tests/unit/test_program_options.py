"""``gh.program`` refuses options it does not know, when it is applied (before any build)."""

from __future__ import annotations

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
    ],
)
def test_bad_options_are_named(options, named) -> None:
    with pytest.raises(ValueError, match=named):
        gh.program(step, **options)


def test_good_options_are_taken() -> None:
    for options in ({}, {"in_place_min_bytes": None}, {"in_place_min_bytes": 1}):
        assert callable(gh.program(step, **options))
