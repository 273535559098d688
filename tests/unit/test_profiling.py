"""Profiles for a whole run from the configuration (environment, pyproject.toml), none without
it, and what ``gh.profile`` refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import gt4py_halo as gh
from gt4py_halo.config import PROFILE_VARIABLE

RUN = textwrap.dedent(
    """
    import numpy as np
    from mpi4py import MPI
    import gt4py_halo as gh

    d = gh.CartesianDecomposition((6, 5), halo=1, periodic=True, comm=MPI.COMM_SELF)
    a = np.zeros(d.allocated_shape)
    ex = gh.make_exchange(d)
    for _ in range(3):
        ex.exchange(a)
    """
)


def run(cwd, after: str = "", **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != PROFILE_VARIABLE} | env
    return subprocess.run(
        [sys.executable, "-c", RUN + after],
        cwd=cwd,
        env=environment,
        check=True,
        capture_output=True,
    )


def phases(trace_file) -> list[str]:
    events = json.loads(trace_file.read_text())["traceEvents"]
    return [e["name"] for e in events if e.get("cat") == "exchange"]


def test_the_environment_profiles_a_whole_run(tmp_path) -> None:
    run(tmp_path, **{PROFILE_VARIABLE: "profiles/run1"})
    assert phases(tmp_path / "profiles/run1/trace.json").count("check") == 3
    assert "\n| 0 | " in (tmp_path / "profiles/run1/summary.txt").read_text()


def test_a_whole_run_profile_of_a_program_that_finalizes_mpi(tmp_path) -> None:
    """A program ending with ``MPI.Finalize()``: the profile is written at the finalize
    (the exit is too late for its MPI calls: the process failed and wrote nothing)."""
    done = run(tmp_path, "MPI.Finalize()\n", **{PROFILE_VARIABLE: "profiles/run1"})
    assert phases(tmp_path / "profiles/run1/trace.json").count("check") == 3
    assert b"gt4py_halo" not in done.stderr, done.stderr


def test_pyproject_profiles_a_whole_run(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.gt4py_halo]\nprofile = "from_pyproject"\n')
    run(tmp_path)
    assert phases(tmp_path / "from_pyproject/trace.json").count("finish") == 3


def test_a_profile_setting_that_is_no_string_is_an_error(tmp_path) -> None:
    """``profile = false`` neither profiles into a folder named False nor is ignored."""
    (tmp_path / "pyproject.toml").write_text("[tool.gt4py_halo]\nprofile = false\n")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        run(tmp_path)
    assert b"ConfigError: [tool.gt4py_halo] profile in" in failed.value.stderr
    assert not (tmp_path / "False").exists()


def test_nothing_is_written_without_a_profile(tmp_path) -> None:
    run(tmp_path)
    assert not list(tmp_path.iterdir())


def test_a_profile_needs_a_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(PROFILE_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    for blank in ((), ("",), (" ",)):  # a blank folder is none, as where configured
        with pytest.raises(gh.ProfileError, match="needs a folder"):
            gh.profile(*blank)
    assert not list(tmp_path.iterdir())


def test_profiles_do_not_nest(tmp_path) -> None:
    from mpi4py import MPI

    with (
        gh.profile(tmp_path / "outer", comm=MPI.COMM_SELF),
        pytest.raises(gh.ProfileError, match="already on"),
    ):
        gh.profile(tmp_path / "inner", comm=MPI.COMM_SELF).__enter__()
    assert (tmp_path / "outer/trace.json").is_file()
    assert not (tmp_path / "inner").exists()
