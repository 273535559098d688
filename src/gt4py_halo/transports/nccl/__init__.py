"""The ``nccl`` transport: stream-ordered messages between GPUs, no host synchronization.

``runtime``: the mover of the Python-level exchange (CuPy's NCCL bindings); ``expansion``
and ``unstructured``: the DaCe expansions of the cartesian and unstructured exchange nodes,
calling NCCL on the program's stream; ``environment``: NCCL's headers and library. GPU fields
only.
"""
