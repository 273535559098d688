"""The demo and the examples run, small, on 1 and 2 ranks, and check themselves: each
compares its gathered result with one rank alone, bit for bit, and returns 1 if they differ."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from conftest import at_most_ranks, load_example

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# the examples' own checks compare 1 and N ranks; 2 show it (the compiled-step tests cover
# 3 and 4), and 4 ranks on the 2 cores here took minutes of make test
pytestmark = at_most_ranks(2, "the examples compare 1 and N ranks themselves")


def test_the_demo(diffusion: ModuleType, capsys) -> None:
    """All four variants of the step run; the compiled one and the one from Python give the
    bits of one rank alone."""
    assert diffusion.main(["--shape", "37,29", "--steps", "3", "--rounds", "2"]) == 0
    printed = capsys.readouterr().out
    if diffusion.MPI.COMM_WORLD.rank == 0:
        assert printed.count("identical bit for bit to one rank alone") == 2
        for variant in ("(a) compiled step", "(b) Python", "(c) Python", "(d) Python"):
            assert f"| {variant}" in printed


def test_the_unstructured_example() -> None:
    assert load_example(EXAMPLES / "unstructured_step.py").main() == 0


# GT4Py compiles ICON4Py's 12 diffusion programs at the first run on each grid: 230 s on one
# rank here (two compile threads on the 2 cores), more when the machine is busy
@pytest.mark.timeout(900)
def test_the_icon4py_diffusion_example(capsys) -> None:
    """ICON4Py's Diffusion granule with gt4py_halo as its exchange runtime, each transport:
    every output on every rank as with ICON4Py's own GHEX exchange, and on owned points as on
    one rank alone (ICON4Py's programs compiled once per grid into GT4Py's persistent cache)."""
    example = load_example(EXAMPLES / "icon4py_diffusion.py")
    assert example.main(["--steps", "3"]) == 0
    printed = capsys.readouterr().out
    if example.MPI.COMM_WORLD.rank == 0:
        for runtime in ("gt4py_halo (mpi)", "gt4py_halo (ghex)", "ICON4Py's own GHEX exchange"):
            assert f"| {runtime} |" in printed
        assert "DIFFERENT" not in printed and "not run" not in printed


def test_the_shared_memory_example(capsys) -> None:
    """Both transports give the bits of one rank alone."""
    example = load_example(EXAMPLES / "shared_memory.py")
    assert example.main(["--shape", "20,18,6", "--steps", "3"]) == 0
    printed = capsys.readouterr().out
    if example.MPI.COMM_WORLD.rank == 0:
        for backend in ("shm", "mpi"):
            assert f"| {backend} |" in printed
        assert printed.count("identical bit for bit to one rank alone") == 2


def test_the_shallow_water_example(capsys) -> None:
    """A step written with halo annotations only (uneven blocks): the four exchanges placed,
    and the bits of one rank alone."""
    example = load_example(EXAMPLES / "shallow_water.py")
    assert example.main(["--shape", "23,19", "--steps", "2"]) == 0
    printed = capsys.readouterr().out
    if example.MPI.COMM_WORLD.rank == 0:
        assert printed.count(": exchange(") == 4
        assert "identical bit for bit to one rank alone" in printed
