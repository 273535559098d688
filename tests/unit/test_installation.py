"""What a Python package is expected to tell: its version, and what this installation has."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import gt4py_halo as gh


def test_version_is_the_installed_one() -> None:
    assert gh.__version__ == importlib.metadata.version("gt4py_halo")


def test_typed_package() -> None:
    assert (Path(gh.__file__).parent / "py.typed").is_file()


def test_python_m_reports_the_installation(tmp_path) -> None:
    """Transports, GPU and where the backend setting comes from (run where no pyproject.toml
    configures one)."""
    report = subprocess.run(
        [sys.executable, "-m", "gt4py_halo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "", "GT4PY_HALO_BACKEND": "auto"},
    ).stdout
    assert report.startswith(f"gt4py_halo {gh.__version__} ")
    assert "transport mpi: installed" in report and "transport ghex: " in report
    assert "GPU: " in report
    assert "backend: 'auto' (first installed of ghex, mpi), from the environment variable" in report
