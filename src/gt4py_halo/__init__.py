"""gt4py_halo: halo exchanges for GT4Py models on distributed memory.

A decomposition (cartesian blocks or unstructured ICON-style dims) is described once and turned
into exchange plans; ``make_exchange`` builds a runtime exchange over a transport (``"mpi"``,
``"ghex"``, ``"nccl"`` for GPU fields, or ``"auto"``) that moves exactly what the plan says;
``program`` compiles a step of GT4Py programs and exchanges into one SDFG.
"""

__version__ = "0.1.0"

from gt4py_halo.gt4py_support import quiet_library_reloads, use_compile_threads

# before any GT4Py compilation: under mpirun, gt4py's default spawn pool cannot start
use_compile_threads()
quiet_library_reloads()

from gt4py_halo.allocation import shared_allocator, staggered_allocator
from gt4py_halo.annotations import auto_exchange, halo
from gt4py_halo.decomposition.cartesian import CartesianDecomposition
from gt4py_halo.decomposition.plan import ExchangePlan, FieldSpec, NeighbourExchange
from gt4py_halo.decomposition.unstructured import UnstructuredDecomposition
from gt4py_halo.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    DecompositionError,
    FieldError,
    HaloError,
    ProfileError,
    ProgramError,
    RanksDisagreeError,
)
from gt4py_halo.profiling import profile
from gt4py_halo.runtime.exchange import Exchange, ExchangeHandle


def program(function=None, **options):
    """Compile a step of GT4Py programs and ``ex.exchange`` calls into one SDFG.

    Options (``comm``, ``exchange`` to place exchanges from ``gh.halo`` annotations,
    ``device``, ``copy_maps``, ``pack_in_producers``, ``in_place_min_bytes``): see
    ``gt4py_halo.compiled.program.program``; imported on first use, as DaCe takes seconds to
    import.
    """
    from gt4py_halo.compiled.program import program as _program

    return _program(function, **options)


def make_exchange(decomposition, backend: str | None = None) -> Exchange:
    """A runtime halo exchange for ``decomposition``; ``backend=None`` reads the configuration."""
    return Exchange(decomposition, backend)


__all__ = [
    "BackendError",
    "BackendUnavailableError",
    "CartesianDecomposition",
    "ConfigError",
    "DecompositionError",
    "Exchange",
    "ExchangeHandle",
    "ExchangePlan",
    "FieldError",
    "FieldSpec",
    "HaloError",
    "NeighbourExchange",
    "ProfileError",
    "ProgramError",
    "RanksDisagreeError",
    "UnstructuredDecomposition",
    "auto_exchange",
    "halo",
    "make_exchange",
    "profile",
    "program",
    "shared_allocator",
    "staggered_allocator",
]

from gt4py_halo.profiling import _profile_whole_run

_profile_whole_run()  # where GT4PY_HALO_PROFILE or pyproject.toml asks for it
