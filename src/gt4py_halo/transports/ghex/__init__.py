"""The ``ghex`` transport: GHEX's patterns and communication objects.

``runtime``: the mover of the Python-level exchange, its exchange in C++ (``native.cpp``,
built on first use by ``native``); ``expansion``: the DaCe expansions of both exchange nodes
and the GHEX environment. Both call GHEX from C++ through ``include/gt4py_halo_ghex.hpp``. Importing it without GHEX installed raises
``BackendUnavailableError``.
"""
