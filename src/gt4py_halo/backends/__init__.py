"""Transports that move the bytes an exchange plan describes.

A transport is chosen by name, as data: ``TRANSPORTS`` maps each name to the module and class
that implement it, imported only when chosen, so a missing optional dependency (GHEX) only
matters to those who ask for it.
"""

from __future__ import annotations

import importlib
from typing import Any

from gt4py_halo.errors import BackendError

TRANSPORTS = {
    "mpi": ("gt4py_halo.backends.mpi", "MpiTransport"),
    "ghex": ("gt4py_halo.backends.ghex", "GhexTransport"),
}


def make_transport(name: str, decomposition: Any) -> Any:
    """Build the transport called ``name`` for ``decomposition``."""
    if not isinstance(name, str) or name.lower() not in TRANSPORTS:
        raise BackendError(
            f"unknown halo-exchange backend {name!r}; known: {', '.join(sorted(TRANSPORTS))}"
        )
    module_name, class_name = TRANSPORTS[name.lower()]
    transport_class = getattr(importlib.import_module(module_name), class_name)
    return transport_class.for_decomposition(decomposition)
