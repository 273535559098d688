"""Where GT4Py fields live: GT4Py's CPU layout with start addresses spread over 4 KiB
(``staggered_allocator``), and the same in a node's shared memory, which the ``shm``
transport reads (``shared_allocator``).

GT4Py's CPU allocator aligns the first element of every field to 64 bytes inside a
page-aligned allocation, so every field starts at the same address modulo 4 KiB. A loop that
walks many fields at once (GT4Py fuses the stencils of a program into one loop; a step's
exchanges pack many fields) then finds all its streams on the same few L1 cache sets, which
hold 8 lines each: they evict each other. ``staggered_allocator`` allocates the same layout,
strides and alignment, each field 832 bytes (13 cache lines) further along the 4 KiB than the
last, cycling through all 64 line positions. Values, strides and compiled code are those of
GT4Py's own fields; only addresses differ. ``docs/benchmarks.md`` ("Loop order on GT4Py's
default fields") has the measurement.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import weakref
from typing import Any

import numpy as np

#: Bytes between the start addresses of successive fields, modulo 4 KiB: 13 lines of 64 bytes
#: (13 is prime to 64, so 64 fields in a row all start on different lines).
STAGGER = 13 * 64
_PAGE = 4096


def staggered_allocator() -> Any:
    """A GT4Py field allocator (``gtx.zeros(domain, allocator=...)``, ``gtx.as_field``, ...)
    for CPU fields: GT4Py's standard CPU layout and alignment, start addresses spread over
    4 KiB (module docstring). Allocations from one allocator cycle through the offsets."""
    from gt4py.storage import allocators

    class _StaggeredBuffers(allocators.NDArrayBufferAllocator):
        def malloc(self, length: int, device_id: int) -> Any:
            buffer = super().malloc(length + _PAGE, device_id)
            shift = (next(starts) - self.array_utils.byte_bounds(buffer)[0]) % _PAGE
            return buffer[shift : shift + length]

    starts = itertools.cycle(k * STAGGER % _PAGE for k in range(_PAGE // 64))
    return _with_buffers(
        lambda standard: _StaggeredBuffers(standard.device_type, standard.array_utils)
    )


def _with_buffers(buffers: Any) -> Any:
    """GT4Py's standard CPU field allocator, cutting its fields from ``buffers(standard)``'s
    ``malloc`` (``standard``: GT4Py's own allocator). Equal only to itself: GT4Py caches
    what it builds per allocator by equality, and GT4Py's allocators of equal settings are
    equal, but one of a pool must not allocate from another's."""
    from gt4py.next import custom_layout_allocators as layouts

    class _Allocator(layouts.BaseFieldBufferAllocator):
        __eq__ = object.__eq__
        __hash__ = object.__hash__

    standard = layouts.StandardCPUFieldBufferAllocator()
    allocator = _Allocator(
        device_type=standard.device_type,
        array_utils=standard.array_utils,
        layout_mapper=standard.layout_mapper,
        byte_alignment=standard.byte_alignment,
    )
    # the buffers GT4Py's allocator cuts fields from
    object.__setattr__(allocator, "buffer_allocator", buffers(standard))
    return allocator


def shared_allocator(decomposition: Any, nbytes: int) -> Any:
    """A GT4Py field allocator, as ``staggered_allocator``, whose fields live in memory that
    the decomposition's ranks on one node share: the ``shm`` transport copies halos straight
    from the neighbours' fields there (``transports/shm/runtime.py``), no message between.

    Collective over the decomposition's communicator: every rank reserves ``nbytes`` (each
    its own; ranks may reserve different sizes) in one MPI shared window per node, once. Fields
    are cut from it as they are allocated (``gtx.zeros(domain, allocator=...)``; NumPy
    arrays with ``allocator.empty(shape, dtype, order)``) and their memory returns to it when
    the last view of them dies; a field that no longer fits is a ``FieldError`` naming what
    is left. The memory stays mapped until MPI is finalized (a field may outlive every Python reference to the
    allocator)."""
    pool = SharedPool(decomposition.comm, nbytes)
    from gt4py.storage import allocators

    class _PoolBuffers(allocators.NDArrayBufferAllocator):
        def malloc(self, length: int, device_id: int) -> Any:
            return pool.malloc(length)

    allocator = _with_buffers(
        lambda standard: _PoolBuffers(standard.device_type, standard.array_utils)
    )

    def empty(shape: Any, dtype: Any = np.float64, order: str = "C") -> np.ndarray:
        """A NumPy array in the pool (for code that exchanges NumPy arrays)."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        flat = pool.malloc(count * dtype.itemsize).view(dtype)
        return flat.reshape(shape, order=order)

    object.__setattr__(allocator, "empty", empty)
    return allocator


class SharedPool:
    """One rank's part of an MPI shared window of its node (``MPI.Win.Allocate_shared``),
    cut into buffers first fit; ``of(array)`` finds the pool and offset of an array cut from
    one. Pools are numbered alike on every rank of their communicator (the number is agreed
    when they are made, collectively), so a rank names a field to another by pool number and
    offset; ``group``: the ranks that made it, in the order of their communicator."""

    def __init__(self, comm: Any, nbytes: int) -> None:
        from mpi4py import MPI

        from gt4py_halo.decomposition.collective import raise_on_all_ranks
        from gt4py_halo.errors import FieldError

        bad = None
        if not isinstance(nbytes, int | np.integer) or isinstance(nbytes, bool) or nbytes < 0:
            bad = f"nbytes must be a number of bytes >= 0, got {nbytes!r}"
        raise_on_all_ranks(comm, bad, FieldError)
        self.group = comm.Get_group()  # (outlives the communicator)
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        self.window = MPI.Win.Allocate_shared(max(int(nbytes), 1), 1, comm=node)
        node_size = node.Get_size()
        node.Free()
        self._bytes = np.frombuffer(self.window.tomemory(), np.uint8)[: int(nbytes)]
        self.base = self._bytes.ctypes.data
        self._holes = [(0, int(nbytes))]  # free (start, stop), in address order
        self._last = -1  # the address of the last buffer cut
        self._segments: dict[int, np.ndarray] = {}
        self.number = comm.allreduce(max(_POOLS, default=-1) + 1, MPI.MAX)
        if self.number >= MAX_POOLS:
            raise FieldError(
                f"gh.shared_allocator makes at most {MAX_POOLS} pools per process (this would "
                f"be number {self.number}): reserve more bytes in fewer allocators"
            )
        _POOLS[self.number] = self
        #: per rank of the node, the address and size of its part (what compiled code reads)
        self.table = np.array(
            [[self.segment(r).ctypes.data, self.segment(r).nbytes] for r in range(node_size)],
            np.int64,
        )
        row = (self.number + 1, group_key(self.group), node_size, self.table.ctypes.data)
        POOL_TABLE[self.number] = row
        POOL_ROWS[0] = max(POOL_ROWS[0], self.number + 1)

    def malloc(self, length: int) -> np.ndarray:
        """``length`` bytes, 64-byte aligned and, where the last buffer cut started at the
        same address modulo 4 KiB, 13 lines further (``STAGGER``: equal fields one after the
        other would alias); held as long as any view of them lives."""
        from gt4py_halo.errors import FieldError

        length = int(length)
        for k, (low, high) in enumerate(self._holes):
            at = low + (-(self.base + low) % 64)
            if (self.base + at - self._last) % _PAGE == 0:
                at += STAGGER
            if at + length <= high:
                break
        else:
            free = sum(b - a for a, b in self._holes)
            raise FieldError(
                f"a field of {length} bytes does not fit in the shared memory left to this rank "
                f"({free} bytes free in holes of at most "
                f"{max((b - a for a, b in self._holes), default=0)}): reserve more in "
                "gh.shared_allocator(decomposition, nbytes) (each field takes up to 1 KiB more "
                "than its bytes)"
            )
        self._last = self.base + at
        stop = at + length + (-length % 64)
        self._holes[k : k + 1] = [(a, b) for a, b in ((low, at), (stop, high)) if b > a]
        block = _Block(memoryview(self._bytes[at : at + length]))
        weakref.finalize(block, self._free, at, stop)
        return np.frombuffer(block, np.uint8)

    def _free(self, start: int, stop: int) -> None:
        """Return ``[start, stop)`` to the holes, merged with its neighbours."""
        k = bisect.bisect(self._holes, (start, stop))
        if k < len(self._holes) and self._holes[k][0] == stop:
            stop = self._holes.pop(k)[1]
        if k > 0 and self._holes[k - 1][1] == start:
            start = self._holes.pop(k - 1)[0]
            k -= 1
        self._holes.insert(k, (start, stop))

    def segment(self, rank: int) -> np.ndarray:
        """The bytes of node rank ``rank``'s part of the window (its rank among the node's
        ranks of the communicator, in the communicator's order)."""
        found = self._segments.get(rank)
        if found is None:
            memory, _ = self.window.Shared_query(rank)
            found = self._segments[rank] = np.frombuffer(memory, np.uint8)
        return found

    @staticmethod
    def of(array: np.ndarray) -> tuple[SharedPool, int] | None:
        """The pool whose part on this rank holds every byte of ``array``, and the offset of
        its first element there; ``None`` if there is none."""
        from gt4py_halo.runtime.fields import byte_bounds

        if not isinstance(array, np.ndarray) or array.size == 0:
            return None
        low, high = byte_bounds(array)
        for pool in _POOLS.values():
            if pool.base <= low and high <= pool.base + pool._bytes.nbytes:
                return pool, array.ctypes.data - pool.base
        return None


#: Every pool of this process, by number; kept until exit: fields cut from a pool may outlive
#: every other reference to it, and its window must outlive them.
_POOLS: dict[int, SharedPool] = {}
#: The pools as compiled code finds them (``transports/shm/include/gt4py_halo_shm.hpp``): row
#: ``number`` holds the number + 1 (0: no pool), ``group_key`` of its ranks, how many ranks
#: share it and the address of its ``table`` (per rank: address of its part, bytes).
MAX_POOLS = 1024
POOL_TABLE = np.zeros((MAX_POOLS, 4), np.int64)
#: The rows of ``POOL_TABLE`` in use: past the largest pool number.
POOL_ROWS = np.zeros(1, np.int64)


def group_key(group: Any) -> int:
    """A number of the ranks of MPI group ``group`` (their ranks in ``COMM_WORLD``, in order),
    equal for equal groups: how compiled code tells that a pool is shared by an exchange's
    ranks, as ``MPI.Group.Compare`` tells Python."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD.Get_group()
    ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
    world.Free()
    digest = hashlib.blake2b(np.array(ranks, np.int64).tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class _Block:
    """Bytes of a pool a buffer was cut from: every NumPy view of them holds this object (the
    first non-array base), so it dies, and returns them to the pool, with the last view."""

    __slots__ = ("__weakref__", "_memory")

    def __init__(self, memory: memoryview) -> None:
        self._memory = memory

    def __buffer__(self, flags: int) -> memoryview:
        return self._memory
