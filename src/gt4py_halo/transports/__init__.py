"""Transports that move the bytes an exchange plan describes: the one registry of both paths.

A transport is chosen by name, as data: ``TRANSPORTS`` maps each name to its runtime mover
(module and class) and to the modules whose import registers its DaCe expansions of the
exchange nodes (``compiled/nodes.py``) under the implementation name ``name.upper()``. Nothing is
imported before it is chosen, so a missing optional dependency (GHEX) only matters to those
who ask for it. ``"auto"`` picks the first transport of ``AUTO_ORDER`` that can be used.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from gt4py_halo.decomposition.collective import check_ranks_agree
from gt4py_halo.errors import BackendError, BackendUnavailableError


@dataclasses.dataclass(frozen=True)
class Transport:
    runtime: tuple[str, str]  # module, class of the runtime mover
    expansions: tuple[str, ...]  # modules registering the compiled expansions; () for none


TRANSPORTS = {
    "mpi": Transport(
        ("gt4py_halo.transports.mpi.runtime", "MpiTransport"),
        ("gt4py_halo.transports.mpi.expansion", "gt4py_halo.transports.mpi.unstructured"),
    ),
    "ghex": Transport(
        ("gt4py_halo.transports.ghex.runtime", "GhexTransport"),
        ("gt4py_halo.transports.ghex.expansion",),
    ),
    "shm": Transport(
        ("gt4py_halo.transports.shm.runtime", "ShmTransport"),
        ("gt4py_halo.transports.shm.expansion",),
    ),
    "nccl": Transport(
        ("gt4py_halo.transports.nccl.runtime", "NcclTransport"),
        ("gt4py_halo.transports.nccl.expansion", "gt4py_halo.transports.nccl.unstructured"),
    ),
}
#: ``backend="auto"``: the first of these whose software is installed (not ``nccl``: it
#: moves GPU fields only, and is asked for by name).
AUTO_ORDER = ("ghex", "mpi")


def make_transport(
    name: str, decomposition: Any, source: str = "the backend argument"
) -> tuple[str, Any]:
    """Build the transport called ``name`` (or chosen by ``"auto"``) for ``decomposition``;
    return its registered name and the transport. ``source``: where ``name`` came from
    (``config.backend_and_source``), for the error if it names no transport.

    Collective over the decomposition's communicator, like the transports' own setup: ranks
    must ask for the same transport (else a ``RanksDisagreeError`` on every rank), and
    ``"auto"`` picks the first of ``AUTO_ORDER`` installed on every rank.
    """
    comm = decomposition.comm
    check_ranks_agree(
        comm, "make_exchange", backend=name.lower() if isinstance(name, str) else name
    )
    if isinstance(name, str) and name.lower() == "auto":
        per_rank = comm.allgather([c for c in AUTO_ORDER if installed(c)])
        name = next(c for c in AUTO_ORDER if all(c in found for found in per_rank))
    if not isinstance(name, str) or name.lower() not in TRANSPORTS:
        raise BackendError(
            f"unknown halo-exchange backend {name!r} (from {source}); known: "
            f"{', '.join(sorted(TRANSPORTS))} and 'auto'"
        )
    name = name.lower()
    module_name, class_name = TRANSPORTS[name].runtime
    transport_class = getattr(importlib.import_module(module_name), class_name)
    return name, transport_class.for_decomposition(decomposition)


def installed(name: str) -> bool:
    """Whether transport ``name``'s software is installed (its runtime mover imports)."""
    try:
        importlib.import_module(TRANSPORTS[name].runtime[0])
    except BackendUnavailableError:
        return False
    return True


def compiled_implementation(name: str, node_type: type, auto: bool = False) -> str:
    """The implementation name of transport ``name``'s DaCe expansion of ``node_type``,
    registered on return.

    ``auto``: the transport was chosen by ``"auto"``, so another one may stand in for it; a
    transport asked for by name that has no expansion of the node is a ``BackendError``,
    never a silent fallback.
    """
    candidates = [name] + ([c for c in AUTO_ORDER if c != name] if auto else [])
    for candidate in candidates:
        if _expands(candidate, node_type):
            return candidate.upper()
    able = [n for n in sorted(TRANSPORTS) if _expands(n, node_type)]
    raise BackendError(
        f"the {name!r} transport has no compiled expansion of {node_type.__name__} yet: such "
        f"exchanges inside @gh.program can use {', '.join(map(repr, able))} "
        "(make_exchange(d, backend=...)); the runtime exchange (ex.exchange from Python) works "
        f"with {name!r}"
    )


def _expands(name: str, node_type: type) -> bool:
    """Whether transport ``name`` is installed and registers an expansion of ``node_type``."""
    try:
        for module in TRANSPORTS[name].expansions:
            importlib.import_module(module)
    except BackendUnavailableError:
        return False
    return name.upper() in node_type.implementations
