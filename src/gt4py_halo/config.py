"""Settings a run takes from its configuration: the transport, and whether to profile.

Resolution order, first match wins: the argument (``make_exchange``'s backend), the
environment variable (``GT4PY_HALO_BACKEND``, ``GT4PY_HALO_PROFILE``), ``[tool.gt4py_halo]``
in ``pyproject.toml`` of the working directory (``backend = ...``, ``profile = ...``), then
the default (``"mpi"``; no profile: a profile folder configured profiles the whole run). A
key the table does not take (``KEYS``) is a ``ConfigError``. Every rank must resolve the same
values; launchers pass the environment and working directory to all ranks alike.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from gt4py_halo.errors import ConfigError

ENV_VARIABLE = "GT4PY_HALO_BACKEND"
PROFILE_VARIABLE = "GT4PY_HALO_PROFILE"
DEFAULT_BACKEND = "mpi"
#: The keys ``[tool.gt4py_halo]`` takes.
KEYS = ("backend", "profile")


def backend_and_source(explicit: str | None = None) -> tuple[str, str]:
    """The backend name to use, and where it came from (for messages and
    ``python -m gt4py_halo``)."""
    if explicit is not None:
        return explicit, "the backend argument"
    found = _configured("backend", ENV_VARIABLE)
    return found if found is not None else (DEFAULT_BACKEND, "the default")


def profile_and_source() -> tuple[str | None, str]:
    """The folder the whole run's profile goes to (``None``: no profile), and where that
    came from."""
    found = _configured("profile", PROFILE_VARIABLE)
    return found if found is not None else (None, "the default (off)")


def _configured(key: str, variable: str) -> tuple[str, str] | None:
    from_env = os.environ.get(variable, "")
    if from_env.strip():  # (set but blank: unset, as for the table's value)
        return from_env, f"the environment variable {variable}"
    pyproject = Path.cwd() / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        with pyproject.open("rb") as f:
            tools = tomllib.load(f).get("tool", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(
            f"{pyproject} cannot be read as TOML ({error}); gt4py_halo reads its "
            "[tool.gt4py_halo] settings there"
        ) from None
    table = tools.get("gt4py_halo", {}) if isinstance(tools, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(
            f"tool.gt4py_halo in {pyproject} is {table!r} ({type(table).__name__}), not a table"
        )
    unknown = sorted(set(table) - set(KEYS))
    if unknown:  # (a misspelt key would leave its setting silently at the default)
        raise ConfigError(
            f"[tool.gt4py_halo] in {pyproject} has no key {', '.join(map(repr, unknown))}; "
            f"it takes {' and '.join(KEYS)}"
        )
    if key not in table:
        return None
    if not isinstance(table[key], str):
        raise ConfigError(
            f"[tool.gt4py_halo] {key} in {pyproject} is {table[key]!r}; it takes a string"
        )
    if not table[key].strip():
        return None
    return table[key], f"[tool.gt4py_halo] {key} in {pyproject}"
