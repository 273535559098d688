"""Exceptions of gt4py_halo.

Every error is raised before anything is posted to MPI, and says which argument, field, rank or
global id is wrong, so that a user on rank 3 of 512 knows what to fix without a debugger.
"""


class HaloError(Exception):
    """Base class of all gt4py_halo errors."""


class DecompositionError(HaloError, ValueError):
    """A decomposition that cannot work: bad shapes, halos wider than blocks, bad global ids."""


class FieldError(HaloError, ValueError):
    """A field that does not fit its exchange plan (shape, dtype, layout, writability), or
    shares memory with another field of the same exchange."""


class BackendError(HaloError, ValueError):
    """An unknown or misconfigured transport, or one without a compiled expansion of an
    exchange."""


class BackendUnavailableError(HaloError, ImportError):
    """A known backend whose software (GHEX, CuPy) is not installed."""


class ProgramError(HaloError, ValueError):
    """A compiled step (``gh.program``) that cannot be built as written: bad options, a split
    exchange started and never finished, more exchanges than MPI has message tags."""


class ConfigError(HaloError, ValueError):
    """A configuration that cannot be read: a ``pyproject.toml`` in the working directory that
    is no TOML, a ``[tool.gt4py_halo]`` that is no table, a setting that is no string."""


class ProfileError(HaloError, RuntimeError):
    """A profile (``gh.profile``) that cannot be taken as asked: no folder configured, one
    already on, no viztracer, a folder rank 0 cannot write."""


class RanksDisagreeError(HaloError, RuntimeError):
    """Ranks that must agree do not: the error says what differs, and is raised on every rank
    of the communicator, before anything is posted."""
