"""Backend resolution: argument, then environment, then pyproject.toml, then "mpi"."""

from __future__ import annotations

import numpy as np
import pytest

import gt4py_halo as gh
from gt4py_halo import transports
from gt4py_halo.config import (
    ENV_VARIABLE,
    PROFILE_VARIABLE,
    backend_and_source,
    profile_and_source,
)
from gt4py_halo.transports import TRANSPORTS, Transport


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VARIABLE, raising=False)
    return tmp_path


def configured_backend(explicit: str | None = None) -> str:
    return backend_and_source(explicit)[0]


def test_default_is_mpi(workdir):
    assert configured_backend() == "mpi"


def test_pyproject_of_the_working_directory(workdir):
    (workdir / "pyproject.toml").write_text('[tool.gt4py_halo]\nbackend = "ghex"\n')
    assert configured_backend() == "ghex"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[tool.gt4py_halo\n", "cannot be read as TOML"),
        ('[tool]\ngt4py_halo = "ghex"\n', "tool.gt4py_halo in .* is 'ghex' \\(str\\), not a table"),
        ("[tool.gt4py_halo]\nbackend = 1\n", "backend in .* is 1; it takes a string"),
        (  # misspelt: the setting was silently the default
            '[tool.gt4py_halo]\nbakend = "ghex"\nprofiles = "p"\n',
            "has no key 'bakend', 'profiles'; it takes backend and profile",
        ),
        ('[tool.gt4py_halo]\nbackend = "\xff"\n'.encode("latin-1"), "cannot be read as TOML"),
    ],
)
def test_a_pyproject_that_cannot_be_read_is_named(workdir, text, match):
    """Never a raw TOML (or UTF-8) error, nor a setting silently ignored or turned into a
    string."""
    (workdir / "pyproject.toml").write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(gh.ConfigError, match=match):
        configured_backend()


def test_a_pyproject_unreadable_at_import_is_an_error_at_each_decomposition(workdir, monkeypatch):
    """The import reads the profile setting; a ``pyproject.toml`` it cannot read does not fail
    the import (``python -m gt4py_halo`` reports it) but each decomposition made after it,
    on every rank, before anything is exchanged."""
    from mpi4py import MPI

    from gt4py_halo import profiling

    monkeypatch.setattr(profiling, "_unreadable", None)  # (restored after the test)
    (workdir / "pyproject.toml").write_text("[tool.gt4py_halo\n")
    profiling._profile_whole_run()  # what the import does
    for _ in range(2):
        with pytest.raises(gh.ConfigError, match="cannot be read as TOML"):
            gh.CartesianDecomposition((6, 5), halo=1, comm=MPI.COMM_SELF)


def test_a_pyproject_without_settings_of_ours_is_fine(workdir):
    (workdir / "pyproject.toml").write_text('tool = 1\n[project]\nname = "x"\n')
    assert configured_backend() == "mpi"


def test_blank_settings_are_unset(workdir, monkeypatch):
    """A blank value says nothing, in the environment as in the table: no profile into the
    working directory, the next source's backend."""
    (workdir / "pyproject.toml").write_text('[tool.gt4py_halo]\nprofile = ""\nbackend = " "\n')
    monkeypatch.setenv(PROFILE_VARIABLE, " ")
    assert profile_and_source() == (None, "the default (off)")
    assert configured_backend() == "mpi"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[tool.gt4py_halo]\nbakend = "ghex"\n', "has no key 'bakend'"),
        ("[tool.gt4py_halo]\nprofile = 1\n", "profile in .* is 1; it takes a string"),
    ],
)
def test_a_wrong_table_is_named_while_the_environment_sets_everything(
    workdir, monkeypatch, text, match
):
    """The environment beats the table, but does not hide its mistakes: they would show
    only once the variables are unset, a setting silently at its default."""
    (workdir / "pyproject.toml").write_text(text)
    monkeypatch.setenv(ENV_VARIABLE, "mpi")
    monkeypatch.setenv(PROFILE_VARIABLE, str(workdir / "profile"))
    with pytest.raises(gh.ConfigError, match=match):
        configured_backend()
    with pytest.raises(gh.ConfigError, match=match):
        profile_and_source()


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
    with pytest.raises(
        gh.BackendError,
        match="'carrier-pigeon' \\(from the environment variable GT4PY_HALO_BACKEND\\).*known: ghex, mpi, nccl",
    ):
        gh.make_exchange(d)


def test_auto_is_ghex_where_installed(workdir, monkeypatch):
    monkeypatch.setenv(ENV_VARIABLE, "auto")
    d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
    assert gh.make_exchange(d).backend == "ghex"  # `make test` installs GHEX


def test_nccl_without_cupy_says_what_to_install(workdir):
    """``nccl`` is asked for by name only (``auto`` never picks it); without CuPy and NCCL the
    error names what to install. With them but no GPU, or on a rank without one, the error
    names the ranks (``NcclTransport``: a collective check before NCCL is set up)."""
    if transports.installed("nccl"):
        pytest.skip("CuPy is installed: the nccl mover's own checks apply")
    d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
    with pytest.raises(
        gh.BackendUnavailableError, match="needs CuPy with NCCL.*gt4py_halo\\[nccl\\]"
    ):
        gh.make_exchange(d, backend="nccl")
    assert "nccl" not in transports.AUTO_ORDER


@pytest.fixture
def runtime_only(monkeypatch):
    """A transport registered with a runtime mover (MPI's) and no compiled expansion, first
    in ``auto``'s order: what a new transport is until its expansions are written."""
    monkeypatch.setitem(TRANSPORTS, "runtime-only", Transport(TRANSPORTS["mpi"].runtime, ()))
    monkeypatch.setattr(transports, "AUTO_ORDER", ("runtime-only", *transports.AUTO_ORDER))
    return "runtime-only"


def exchange_step(ex: gh.Exchange):
    @gh.program
    def step(u):
        ex.exchange(u)

    return step


def generated_code(step, u) -> str:
    return "".join(
        n.code.as_string
        for n, _ in step.to_sdfg(u).all_nodes_recursive()
        if hasattr(n, "code") and n.code is not None
    )


def test_compiled_step_refuses_a_transport_without_expansion(workdir, runtime_only):
    """Asked for by name, a transport that has no compiled expansion is an error at the
    step's first call, not a silent fallback to another transport."""
    d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
    step = exchange_step(gh.make_exchange(d, backend=runtime_only))
    with pytest.raises(
        gh.BackendError,
        match="'runtime-only' transport has no compiled expansion of HaloExchange yet: such "
        "exchanges inside @gh.program can use 'ghex', 'mpi'",
    ):
        step(np.zeros(d.allocated_shape))


@pytest.mark.parametrize("first", ["runtime-only", "ghex"])
def test_compiled_step_under_auto_uses_a_transport_with_expansion(workdir, runtime_only, first):
    """``auto`` picks the first installed transport; in a compiled step, where that one has
    no expansion, the next one that has (here: with GHEX installed, GHEX)."""
    if first == "ghex":
        transports.AUTO_ORDER = transports.AUTO_ORDER[1:]
    d = gh.CartesianDecomposition((8, 8), halo=1, periodic=True)
    ex = gh.make_exchange(d, backend="auto")
    assert ex.backend == first
    step = exchange_step(ex)
    u = np.zeros(d.allocated_shape)
    u[d.owned] = np.arange(64.0).reshape(8, 8)
    step(u)
    expected = np.pad(np.arange(64.0).reshape(8, 8), 1, mode="wrap")
    np.testing.assert_array_equal(u, expected)
    assert "gt4py_halo::GhexRegular<2>(" in generated_code(step, u)
