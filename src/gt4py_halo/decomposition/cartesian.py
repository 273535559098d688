"""Cartesian block decomposition of a regular global grid, and its exchange plan.

The global grid is cut into a ``proc_grid`` of blocks (sizes differ by at most one cell when a
dimension does not divide evenly); ranks are laid out in C order over the process grid, as
``MPI_Cart_create`` does without reordering. Every local array carries the full halo on every
side, also at a non-periodic boundary, where it is never written.

Each rank exchanges with up to ``3**ndim - 1`` neighbours: faces, edges and corners, so 9- and
27-point stencils see correct diagonal values. Messages to one peer are coalesced: with two
ranks in a periodic dimension the left and right neighbour are the same rank and get a single
message holding both strips.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from gt4py_halo.decomposition.collective import (
    check_ranks_agree,
    private_communicator,
    raise_on_all_ranks,
)
from gt4py_halo.decomposition.plan import (
    NO_RANK,
    Box,
    BoxRegion,
    Direction,
    ExchangePlan,
    NeighbourExchange,
)
from gt4py_halo.errors import DecompositionError

HaloSpec = int | Sequence[int] | Sequence[tuple[int, int]]


class CartesianDecomposition:
    """A regular grid split into blocks, one per rank, with halos of given widths.

    ``halo`` is one width for all sides, one width per dimension, or ``(lo, hi)`` per
    dimension. ``proc_grid=None`` chooses a balanced grid like ``MPI_Dims_create``, leaving
    dimensions without halo whole (a vertical dimension with ``halo=(1, 1, 0)``).
    Construction is collective over ``comm`` (default ``MPI_COMM_WORLD``).
    """

    def __init__(
        self,
        global_shape: Sequence[int],
        halo: HaloSpec,
        periodic: bool | Sequence[bool] = False,
        proc_grid: Sequence[int] | None = None,
        comm: MPI.Comm | None = None,
    ) -> None:
        self.comm = private_communicator(self, comm)
        problem = None
        try:
            self.global_shape = _positive_shape(global_shape)
            ndim = len(self.global_shape)
            self.halo = _normalize_halo(halo, ndim)
            self.periodic = _normalize_periodic(periodic, ndim)
            grid = None if proc_grid is None else _integers("proc_grid", proc_grid)
        except DecompositionError as error:
            problem = str(error)
        raise_on_all_ranks(self.comm, problem)  # before anything else collective
        check_ranks_agree(
            self.comm,
            "CartesianDecomposition",
            global_shape=self.global_shape,
            halo=self.halo,
            periodic=self.periodic,
            proc_grid=grid,
        )
        self.rank = self.comm.Get_rank()
        self.proc_grid = _choose_proc_grid(self.comm.Get_size(), self.halo, grid)
        _check_blocks_fit_halo(self.global_shape, self.proc_grid, self.halo, self.periodic)
        self.coords = _rank_coords(self.rank, self.proc_grid)
        bounds = [
            _block_bounds(n, p, c)
            for n, p, c in zip(self.global_shape, self.proc_grid, self.coords)
        ]
        self.global_slices = tuple(slice(a, b) for a, b in bounds)
        self.owned_shape = tuple(b - a for a, b in bounds)
        self.allocated_shape = tuple(
            n + lo + hi for n, (lo, hi) in zip(self.owned_shape, self.halo)
        )
        self.owned = tuple(slice(lo, lo + n) for n, (lo, _) in zip(self.owned_shape, self.halo))
        self._plan = self._build_plan()

    def plan(self, dim: str | None = None) -> ExchangePlan:
        """The exchange plan; a cartesian decomposition has exactly one (``dim=None``)."""
        if dim is not None:
            raise DecompositionError(
                f"dim={dim!r} given, but a CartesianDecomposition has no named dims; "
                "call exchange(*fields) without dim"
            )
        return self._plan

    def rank_of(self, coords: Sequence[int]) -> int:
        """The rank owning the block at process-grid ``coords``."""
        rank = 0
        for c, p in zip(coords, self.proc_grid):
            rank = rank * p + c
        return rank

    def _neighbour(self, direction: tuple[int, ...]) -> int | None:
        coords = []
        for c, d, p, periodic in zip(self.coords, direction, self.proc_grid, self.periodic):
            c += d
            if not 0 <= c < p:
                if not periodic:
                    return None
                c %= p
            coords.append(c)
        return self.rank_of(coords)

    def _build_plan(self) -> ExchangePlan:
        # an axis wraps onto the rank where it is periodic and not split: both neighbours
        # across it are this rank
        wraps = [int(p and n == 1) for p, n in zip(self.periodic, self.proc_grid)]
        widened = functools.partial(wrapped_box, wraps=wraps)
        plain: list[tuple[int, tuple[int, ...], Box | None, Box | None]] = []
        wrapped = []
        directions = []
        for direction in exchange_directions(self.halo):
            peer = self._neighbour(direction)
            directions.append(Direction(direction, NO_RANK if peer is None else peer))
            if peer is None:
                continue
            plain.append((peer, direction, *self._boxes(direction_box, direction)))
            if any(wraps) and peer != self.rank:
                wrapped.append((peer, direction, *self._boxes(widened, direction)))
        return ExchangePlan(
            name="cartesian",
            rank=self.rank,
            comm_size=self.comm.Get_size(),
            local_shape=self.allocated_shape,
            neighbours=_by_peer(plain),
            directions=tuple(directions),
            wrapped=_by_peer(wrapped),
        )

    def _boxes(
        self, bounds: Callable[..., list[tuple[int, int]]], direction: tuple[int, ...]
    ) -> tuple[Box | None, Box | None]:
        """The boxes sent towards and received from ``direction`` (None where empty), given
        ``bounds`` (``direction_box`` or ``wrapped_box``)."""
        found = []
        for sending in (True, False):
            box = bounds(self.owned_shape, self.halo, direction, sending)
            empty = any(a == b for a, b in box)
            found.append(None if empty else Box(tuple(a for a, _ in box), tuple(b for _, b in box)))
        return found[0], found[1]

    def __repr__(self) -> str:
        return (
            f"CartesianDecomposition(global_shape={self.global_shape}, halo={self.halo}, "
            f"periodic={self.periodic}, proc_grid={self.proc_grid}, rank={self.rank})"
        )


def _by_peer(
    boxes: list[tuple[int, tuple[int, ...], Box | None, Box | None]],
) -> tuple[NeighbourExchange, ...]:
    """One ``NeighbourExchange`` per peer rank from (peer, direction, sent, received) boxes:
    boxes ordered by where they lie at the receiver (its direction), the same on both sides,
    so that a receiver's halo row of corner, face and corner comes in order and is unpacked as
    one box (``BoxRegion.coalesced``)."""
    sends: dict[int, list[tuple[tuple[int, ...], Box]]] = {}
    recvs: dict[int, list[tuple[tuple[int, ...], Box]]] = {}
    for peer, direction, sent, received in boxes:
        if sent is not None:
            sends.setdefault(peer, []).append((tuple(-d for d in direction), sent))
        if received is not None:
            recvs.setdefault(peer, []).append((direction, received))
    return tuple(
        NeighbourExchange(
            rank=peer,
            send=BoxRegion(tuple(box for _, box in sorted(sends.get(peer, [])))),
            recv=BoxRegion(tuple(box for _, box in sorted(recvs.get(peer, [])))),
        )
        for peer in sorted(sends.keys() | recvs.keys())
    )


def exchange_directions(halo: Sequence[tuple[int, int]]) -> list[tuple[int, ...]]:
    """Neighbour directions (faces, edges, corners) across which some halo is exchanged.

    The same on every rank: box widths across a direction depend on the halo widths alone,
    so a direction is kept when its send or its receive box is non-empty for any block size.
    """
    ones = (1,) * len(halo)
    return [
        d
        for d in itertools.product((-1, 0, 1), repeat=len(halo))
        if any(d)
        and any(
            all(b > a for a, b in direction_box(ones, halo, d, sending))
            for sending in (True, False)
        )
    ]


def side_by_side(
    directions: Sequence[tuple[int, ...]],
    proc_grid: Sequence[int],
    periodic: Sequence[bool],
) -> tuple[int, ...]:
    """``directions`` (by index) ordered so that those leading to the same rank on every rank
    come side by side, corners before edges before faces within each such group.

    Two directions lead to the same rank wherever both have a neighbour exactly when, on
    every periodic axis, their offsets agree modulo the grid's extent there (a periodic axis
    of 2 ranks: -1 and +1 do) and, on every other axis, they are equal: the same on every
    rank. Laid out in this order, a compiled exchange's message to one rank is one contiguous
    block, with faces (which may go in place) at its end: MPI sends a datatype with gaps
    between its blocks far slower than the same bytes side by side (docs/benchmarks.md).
    """

    def rank_class(d: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(o % p if per else o for o, p, per in zip(d, proc_grid, periodic))

    first: dict[tuple[int, ...], int] = {}
    for k, d in enumerate(directions):
        first.setdefault(rank_class(d), k)
    return tuple(
        sorted(
            range(len(directions)),
            key=lambda k: (
                first[rank_class(directions[k])],
                -sum(o != 0 for o in directions[k]),
                k,
            ),
        )
    )


def direction_box(
    owned_shape: Sequence[Any],
    halo: Sequence[tuple[int, int]],
    direction: Sequence[int],
    sending: bool,
) -> list[tuple[Any, Any]]:
    """Half-open local index bounds of the box sent towards, or received from, ``direction``.

    Pure arithmetic on ``owned_shape``: ints for a rank's plan, symbols for code generated
    once for all ranks. Towards ``+1`` a rank sends as many cells as the receiver's low halo
    is wide, from the top of its owned range ``[lo, lo + n)``; from ``+1`` it receives into its
    high halo.
    """
    bounds = []
    for d, n, (lo, hi) in zip(direction, owned_shape, halo):
        if d == 0:
            bounds.append((lo, lo + n))
        elif sending:
            bounds.append((n, n + lo) if d > 0 else (lo, lo + hi))
        else:
            bounds.append((lo + n, lo + n + hi) if d > 0 else (0, lo))
    return bounds


def wrapped_box(
    owned: Sequence[Any],
    halo: Sequence[tuple[int, int]],
    toward: Sequence[int],
    sending: bool,
    wraps: Sequence[Any],
) -> list[tuple[Any, Any]]:
    """The box of a message towards (from) ``toward`` given ``wraps`` (per decomposed axis, 1
    where it wraps onto the rank itself, else 0; ints, or symbols in generated code):
    ``direction_box`` widened across the halos of the axes that wrap (the sender copied them
    from its own cells first), and empty where ``toward`` crosses such an axis (those cells
    come with the faces of the other axes, or from the rank itself).

    So a face across an axis split over ranks is whole planes where the axes beside it wrap:
    one contiguous run per halo layer of a C-ordered field instead of one per row, and no
    edge messages. Both ends of a message see the same ``wraps`` (a property of the process
    grid) and the same extents along the axes that wrap (not split: every rank holds all of
    them)."""
    bounds = []
    for (a, b), t, (lo, hi), w in zip(
        direction_box(owned, halo, toward, sending), toward, halo, wraps
    ):
        if w == 0:
            bounds.append((a, b))
        elif t == 0:
            bounds.append((a - lo * w, b + hi * w))
        else:
            bounds.append((a, a + (b - a) * (1 - w)))
    return bounds


def _entries(name: str, value: Any, what: str) -> tuple:
    """The entries of ``value``, a sequence (list, tuple, 1-d NumPy array), one per dim: not a
    mapping, set or string, whose entries are in no order of dims (a dict gave its keys);
    else a ``DecompositionError`` saying ``name`` must be ``what``."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return tuple(value)
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise DecompositionError(f"{name} must be {what}, got {value!r}")
    return tuple(value)


def _integers(name: str, values: Any) -> tuple[int, ...]:
    """``values`` as Python ints: any integral (NumPy's too), nothing that would be rounded."""
    try:
        return tuple(operator.index(n) for n in _entries(name, values, "a sequence of ints"))
    except TypeError:
        raise DecompositionError(f"{name} must be a sequence of ints, got {values!r}") from None


def _positive_shape(global_shape: Sequence[int]) -> tuple[int, ...]:
    shape = _integers("global_shape", global_shape)
    if not 1 <= len(shape) <= 3 or not all(n > 0 for n in shape):
        raise DecompositionError(f"global_shape must be 1 to 3 positive ints, got {global_shape!r}")
    return shape


def _normalize_halo(halo: HaloSpec, ndim: int) -> tuple[tuple[int, int], ...]:
    def width(h: object) -> int:
        if not isinstance(h, numbers.Integral) or isinstance(h, bool) or h < 0:
            raise DecompositionError(f"halo widths must be non-negative ints, got {halo!r}")
        return int(h)

    if isinstance(halo, numbers.Integral):
        return ((width(halo), width(halo)),) * ndim
    halo = _entries("halo", halo, f"an int or {ndim} ints or (lo, hi) pairs")
    if len(halo) != ndim:
        raise DecompositionError(
            f"halo {halo!r} has {len(halo)} entries for {ndim} dimensions (one width or one "
            "(low, high) pair per dimension: ((0, 3),) for one dimension)"
        )
    sides = []
    for h in halo:
        pair = "an int or a (lo, hi) pair"
        if isinstance(h, numbers.Integral):
            sides.append((width(h), width(h)))
        elif len(_entries(f"halo entry {h!r}", h, pair)) == 2:
            lo, hi = h
            sides.append((width(lo), width(hi)))
        else:
            raise DecompositionError(f"halo entry {h!r} must be {pair}")
    return tuple(sides)


def _normalize_periodic(periodic: bool | Sequence[bool], ndim: int) -> tuple[bool, ...]:
    """Python's or NumPy's bools, one or one per dim."""
    what = f"a bool or {ndim} bools"
    if isinstance(periodic, (bool, np.bool_)):
        return (bool(periodic),) * ndim
    entries = _entries("periodic", periodic, what)
    if len(entries) != ndim or not all(isinstance(p, (bool, np.bool_)) for p in entries):
        raise DecompositionError(f"periodic must be {what}, got {periodic!r}")
    return tuple(map(bool, entries))


def _choose_proc_grid(
    size: int, halo: tuple[tuple[int, int], ...], proc_grid: Sequence[int] | None
) -> tuple[int, ...]:
    ndim = len(halo)
    if proc_grid is None:
        # like MPI_Dims_create, but dimensions without halo are not split
        splittable = [k for k, (lo, hi) in enumerate(halo) if lo or hi] or list(range(ndim))
        split = MPI.Compute_dims(size, len(splittable))
        grid = [1] * ndim
        for k, p in zip(splittable, split):
            grid[k] = p
        return tuple(grid)
    grid = tuple(proc_grid)
    if len(grid) != ndim or not all(isinstance(p, int) and p > 0 for p in grid):
        raise DecompositionError(f"proc_grid must be {ndim} positive ints, got {proc_grid!r}")
    if math.prod(grid) != size:
        raise DecompositionError(
            f"proc_grid {grid} has {math.prod(grid)} blocks but the communicator has {size} ranks"
        )
    return grid


def _block_bounds(n: int, p: int, c: int) -> tuple[int, int]:
    """Global range of block ``c`` of ``n`` cells in ``p`` blocks; the first blocks get extra."""
    base, extra = divmod(n, p)
    start = c * base + min(c, extra)
    return start, start + base + (c < extra)


def _check_blocks_fit_halo(
    global_shape: tuple[int, ...],
    proc_grid: tuple[int, ...],
    halo: tuple[tuple[int, int], ...],
    periodic: tuple[bool, ...],
) -> None:
    """Every rank runs this on the same global data, so every rank raises alike."""
    for k, (n, p, (lo, hi), per) in enumerate(zip(global_shape, proc_grid, halo, periodic)):
        smallest = n // p
        if smallest == 0:
            raise DecompositionError(
                f"dimension {k} has {n} cells for {p} ranks: some blocks would be empty"
            )
        exchanges = p > 1 or per
        if exchanges and max(lo, hi) > smallest:
            raise DecompositionError(
                f"halo ({lo}, {hi}) in dimension {k} is wider than the smallest local block "
                f"({smallest} cells: {n} cells over {p} ranks); a halo may only reach into "
                "the nearest neighbour"
            )


def _rank_coords(rank: int, proc_grid: tuple[int, ...]) -> tuple[int, ...]:
    coords = []
    for p in reversed(proc_grid):
        rank, c = divmod(rank, p)
        coords.append(c)
    return tuple(reversed(coords))
