"""Settings a run takes from its configuration: the transport, and whether to profile.

Resolution order, first match wins: the argument (``make_exchange``'s backend), the
environment variable (``GT4PY_HALO_BACKEND``, ``GT4PY_HALO_PROFILE``), ``[tool.gt4py_halo]``
in ``pyproject.toml`` of the working directory (``backend = ...``, ``profile = ...``), then
the default (``"mpi"``; no profile: a profile folder configured profiles the whole run). A
key the table does not take (``KEYS``) or a value that is not a string is a ``ConfigError``,
also where the environment sets that setting. Every rank must resolve the same
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
    """``key``'s value and source from the environment, else from the table. The table is
    checked either way: a misspelt key or a value of another type there is an error also
    while the environment variable sets the value."""
    found = _table()
    from_env = os.environ.get(variable, "")
    if from_env.strip():  # (set but blank: unset, as for the table's value)
        return from_env, f"the environment variable {variable}"
    if found is None:
        return None
    pyproject, table = found
    if not table.get(key, "").strip():
        return None
    return table[key], f"[tool.gt4py_halo] {key} in {pyproject}"


def _table() -> tuple[Path, dict] | None:
    """``pyproject.toml`` of the working directory and its ``[tool.gt4py_halo]`` table
    (empty if it has none), checked for keys it does not take and values that are not
    strings; ``None`` without the file."""
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
    for key, value in table.items():
        if not isinstance(value, str):
            raise ConfigError(
                f"[tool.gt4py_halo] {key} in {pyproject} is {value!r}; it takes a string"
            )
    return pyproject, table
