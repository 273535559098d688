"""The ``shm`` transport: halos copied from the neighbours' fields in a node's shared memory
(``runtime.py``); fields allocated with ``gh.shared_allocator``. No compiled expansion yet."""
