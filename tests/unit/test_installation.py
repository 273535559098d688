"""What a Python package is expected to tell: its version, and what this installation has."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gt4py_halo as gh


def test_version_is_the_installed_one() -> None:
    assert gh.__version__ == importlib.metadata.version("gt4py_halo")


def test_typed_package() -> None:
    assert (Path(gh.__file__).parent / "py.typed").is_file()


def test_python_m_reports_the_installation(tmp_path) -> None:
    """Transports, GPU, the backend in effect and where the setting comes from (run where no
    pyproject.toml configures one): ``auto`` with the transport it resolves to here, a
    transport that is not installed said so; ``--help`` says what it does; a
    ``pyproject.toml`` that cannot be read is reported (the import does not fail on it),
    and the exit status says so."""

    def report(backend: str, *args: str, rc: int = 0) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "gt4py_halo", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": "", "GT4PY_HALO_BACKEND": backend},
        )
        assert done.returncode == rc, done.stderr
        return done.stdout

    auto = report("auto")
    assert auto.startswith(f"gt4py_halo {gh.__version__} ")
    assert "transport mpi: installed" in auto and "transport ghex: " in auto
    assert "GPU: " in auto
    here = "ghex" if "transport ghex: installed" in auto else "mpi"
    assert (
        f"backend: 'auto' (first installed of ghex, mpi: {here} here), from the environment "
        "variable" in auto
    )
    nccl = report("nccl")
    if "transport nccl: not installed" in nccl:
        assert "backend: 'nccl' (not installed here: make_exchange raises)" in nccl
    assert "the version, the transports" in report("mpi", "--help")
    (tmp_path / "pyproject.toml").write_text("[tool.gt4py_halo\n")  # not TOML
    broken = report("", rc=1)
    assert broken.startswith(f"gt4py_halo {gh.__version__} ")
    assert "configuration: " in broken and "cannot be read as TOML" in broken


FRESH_VENV_CHECK = """
import numpy as np
from mpi4py import MPI

import gt4py_halo as gh

d = gh.CartesianDecomposition((6, 5), halo=1, periodic=True, comm=MPI.COMM_SELF)
a = np.zeros(d.allocated_shape)
a[d.owned] = np.arange(30.0).reshape(6, 5)
gh.make_exchange(d).exchange(a)
assert (a == np.pad(np.arange(30.0).reshape(6, 5), 1, mode="wrap")).all()
"""


def test_installs_without_extras_into_a_fresh_venv(tmp_path) -> None:
    """`pip install gt4py_halo` alone, as a new user would, with nothing of this machine's on
    PATH (no MPI of its own, no compiler wrapper; the C compiler that builds the package's C
    module): MPI comes from the MPICH wheel, GHEX is left out, and the package imports,
    reports itself and exchanges."""
    source = tmp_path / "source"  # a copy: the build writes beside the sources
    root = Path(__file__).resolve().parents[2]
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes((root / name).read_bytes())
    shutil.copytree(
        root / "src" / "gt4py_halo",
        source / "src" / "gt4py_halo",
        ignore=shutil.ignore_patterns("__pycache__", "*.so"),  # the install builds its own
    )
    venv = tmp_path / "venv"
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["OMP_NUM_THREADS"] = "1"

    def run(*command: object) -> str:
        done = subprocess.run(
            [str(c) for c in command], check=False, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{done.args} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", source)
    report = run(venv / "bin" / "python", "-m", "gt4py_halo")
    assert "transport mpi: installed" in report and "transport ghex: not installed" in report
    run(venv / "bin" / "python", "-c", FRESH_VENV_CHECK)
