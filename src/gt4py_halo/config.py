"""Which transport an exchange uses when the caller does not say.

Resolution order, first match wins: the ``backend`` argument, the ``GT4PY_HALO_BACKEND``
environment variable, ``[tool.gt4py_halo] backend`` in ``pyproject.toml`` of the working
directory, then ``"mpi"``. Every rank must resolve the same name; launchers pass the
environment and working directory to all ranks alike.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

ENV_VARIABLE = "GT4PY_HALO_BACKEND"
DEFAULT_BACKEND = "mpi"


def backend_and_source(explicit: str | None = None) -> tuple[str, str]:
    """The backend name to use, and where it came from (for messages and
    ``python -m gt4py_halo``)."""
    if explicit is not None:
        return explicit, "the backend argument"
    from_env = os.environ.get(ENV_VARIABLE)
    if from_env:
        return from_env, f"the environment variable {ENV_VARIABLE}"
    pyproject = Path.cwd() / "pyproject.toml"
    if pyproject.is_file():
        with pyproject.open("rb") as f:
            table = tomllib.load(f).get("tool", {}).get("gt4py_halo", {})
        if "backend" in table:
            return table["backend"], f"[tool.gt4py_halo] backend in {pyproject}"
    return DEFAULT_BACKEND, "the default"
