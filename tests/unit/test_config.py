"""Backend resolution: argument, then environment, then pyproject.toml, then "mpi"."""

from __future__ import annotations

import pytest

import gt4py_halo as gh
from gt4py_halo.config import ENV_VARIABLE, configured_backend


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VARIABLE, raising=False)
    return tmp_path


def test_default_is_mpi(workdir):
    assert configured_backend() == "mpi"


def test_pyproject_of_the_working_directory(workdir):
    (workdir / "pyproject.toml").write_text('[tool.gt4py_halo]\nbackend = "ghex"\n')
    assert configured_backend() == "ghex"


def test_environment_beats_pyproject(workdir, monkeypatch):
    (workdir / "pyproject.toml").write_text('[tool.gt4py_halo]\nbackend = "ghex"\n')
    monkeypatch.setenv(ENV_VARIABLE, "mpi")
    assert configured_backend() == "mpi"


def test_argument_beats_everything(workdir, monkeypatch):
    monkeypatch.setenv(ENV_VARIABLE, "mpi")
    assert configured_backend("ghex") == "ghex"


def test_make_exchange_uses_the_configuration(workdir, monkeypatch):
    monkeypatch.setenv(ENV_VARIABLE, "ghex")
    d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
    assert gh.make_exchange(d).backend == "ghex"


def test_unknown_configured_backend_is_named(workdir, monkeypatch):
    monkeypatch.setenv(ENV_VARIABLE, "carrier-pigeon")
    d = gh.CartesianDecomposition((8, 8), halo=1)
    with pytest.raises(gh.BackendError, match="'carrier-pigeon'.*known: ghex, mpi"):
        gh.make_exchange(d)
