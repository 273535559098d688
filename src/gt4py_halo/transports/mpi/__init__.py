"""The ``mpi`` transport: persistent MPI requests over the plan's messages.

``runtime``: the mover of the Python-level exchange; ``expansion`` and ``unstructured``: the
DaCe expansions of the cartesian and unstructured exchange nodes; ``environment``: the MPI
headers and library they build against.
"""
