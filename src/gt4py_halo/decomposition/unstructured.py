"""Unstructured (ICON-style) decomposition: per dim, owned and halo global ids on each rank.

Local arrays of a dim hold the owned gids first, in the given order, then the halo gids, in
the given order; or, built ``from_local_gids``, any local order (ICON4Py's arrays are not
guaranteed to be owned first): each gid's local position is where it is listed. Owners of
halo gids are discovered, not passed: every gid is registered with a *directory rank*
(``gid % size``), which detects gids owned twice and answers who owns each halo gid, or that
nobody does. Memory and messages scale with the local sizes, never with the global mesh. Each
rank then asks each owner for its gids; the owner's send list follows the order of the
request, so both sides of every message agree cell by cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from mpi4py import MPI

from gt4py_halo.decomposition.collective import (
    alltoallv,
    private_communicator,
    raise_on_all_ranks,
)
from gt4py_halo.decomposition.plan import (
    ExchangePlan,
    IndexRegion,
    NeighbourExchange,
)
from gt4py_halo.errors import DecompositionError

GidLists = tuple[Sequence[int] | np.ndarray, Sequence[int] | np.ndarray]


class UnstructuredDecomposition:
    """Per named dim (``"cell"``, ``"edge"``, ...), which gids this rank owns and mirrors.

    ``dims`` maps each name to ``(owned_gids, halo_gids)``: a local array of the dim holds the
    owned gids first, then the halo gids. Construction is collective over ``comm``: every rank
    must pass the same dim names.
    """

    def __init__(self, dims: Mapping[str, GidLists], comm: MPI.Comm | None = None) -> None:
        self._build(dims, comm, owned_first=True)

    @classmethod
    def from_local_gids(
        cls, dims: Mapping[str, GidLists], comm: MPI.Comm | None = None
    ) -> UnstructuredDecomposition:
        """Per dim ``(gids, owned)``: the gid at each local position, in local order, and
        which positions this rank owns (booleans); owned and halo positions may interleave.
        That is ICON4Py's ``DecompositionInfo``: ``global_index(dim)`` and
        ``owner_mask(dim)``. Collective over ``comm``, like the constructor."""
        decomposition = cls.__new__(cls)
        decomposition._build(dims, comm, owned_first=False)
        return decomposition

    def _build(self, dims: Mapping[str, GidLists], comm: MPI.Comm | None, owned_first: bool):
        self.comm = private_communicator(self, comm)
        self.rank = self.comm.Get_rank()
        self.dims = _same_names(self.comm, list(dims) if isinstance(dims, Mapping) else None)
        #: per dim, the owned and the halo gids, and (``*_lids``) their local positions
        self.owned_gids: dict[str, np.ndarray] = {}
        self.halo_gids: dict[str, np.ndarray] = {}
        self.owned_lids: dict[str, np.ndarray] = {}
        self.halo_lids: dict[str, np.ndarray] = {}
        self._plans: dict[str, ExchangePlan] = {}
        for name in self.dims:
            read = _gid_arrays if owned_first else _local_gid_arrays
            owned, halo, owned_lids, halo_lids = read(self.comm, name, dims[name])
            self.owned_gids[name], self.halo_gids[name] = owned, halo
            self.owned_lids[name], self.halo_lids[name] = owned_lids, halo_lids
            self._plans[name] = _build_plan(self.comm, name, owned, halo, owned_lids, halo_lids)

    def local_size(self, dim: str) -> int:
        """Length of axis 0 of a local field of ``dim``: owned plus halo cells."""
        return self.plan(dim).local_shape[0]

    def local_gids(self, dim: str) -> np.ndarray:
        """The gid at each local position of ``dim``."""
        gids = np.empty(self.local_size(dim), dtype=np.int64)
        gids[self.owned_lids[dim]] = self.owned_gids[dim]
        gids[self.halo_lids[dim]] = self.halo_gids[dim]
        return gids

    @property
    def owned(self) -> dict[str, slice]:
        """Per dim, the slice of owned cells in a local array (owned first; else
        ``DecompositionError``: use ``owned_lids``)."""
        for name, lids in self.owned_lids.items():
            if not np.array_equal(lids, np.arange(len(lids))):
                raise DecompositionError(
                    f"dim {name!r}: the owned cells are not first in local arrays; their "
                    "positions are owned_lids[dim]"
                )
        return {name: slice(0, len(gids)) for name, gids in self.owned_gids.items()}

    def plan(self, dim: str | None = None) -> ExchangePlan:
        """The exchange plan of ``dim``; ``None`` is allowed when there is only one dim."""
        if dim is None:
            if len(self.dims) == 1:
                return self._plans[self.dims[0]]
            raise DecompositionError(
                f"this decomposition has dims {', '.join(self.dims)}: pass dim=... to exchange"
            )
        if not isinstance(dim, str) or dim not in self._plans:
            raise DecompositionError(
                f"unknown dim {dim!r}; this decomposition has {', '.join(self.dims)}"
            )
        return self._plans[dim]

    def __repr__(self) -> str:
        sizes = ", ".join(
            f"{n}: {len(self.owned_gids[n])}+{len(self.halo_gids[n])}" for n in self.dims
        )
        return f"UnstructuredDecomposition({{{sizes}}}, rank={self.rank})"


def _same_names(comm: MPI.Comm, names: list[str] | None) -> tuple[str, ...]:
    """The dim names, sorted, once every rank has passed the same strings."""
    problem = None
    if names is None:
        problem = "dims must be a mapping of dim name to (owned_gids, halo_gids)"
    elif not names or not all(isinstance(n, str) for n in names):
        problem = f"dim names must be a non-empty set of strings, got {names!r}"
    raise_on_all_ranks(comm, problem)
    names = sorted(names)
    everyone = comm.allgather(names)
    if any(other != names for other in everyone):
        raise_on_all_ranks(comm, f"dims differ between ranks: {everyone[:4]}")
    return tuple(names)


def _gid_arrays(comm: MPI.Comm, name: str, lists: GidLists) -> tuple[np.ndarray, ...]:
    """Owned and halo gids as int64 arrays, and their local positions (owned first), after
    checks every rank agrees on."""
    problem, owned, halo = None, np.empty(0, np.int64), np.empty(0, np.int64)
    try:
        owned_in, halo_in = lists
        owned, halo = (_gids(a) for a in (owned_in, halo_in))
        problem = _repeated_gids(owned, halo)
    except (TypeError, ValueError) as error:
        problem = f"{error} (expected (owned_gids, halo_gids))"
    raise_on_all_ranks(comm, f"dim {name!r}: {problem}" if problem else None)
    return owned, halo, np.arange(len(owned)), np.arange(len(owned), len(owned) + len(halo))


def _local_gid_arrays(comm: MPI.Comm, name: str, lists: GidLists) -> tuple[np.ndarray, ...]:
    """``_gid_arrays`` of ``from_local_gids``' ``(gids, owned)``."""
    problem, gids, owned = None, np.empty(0, np.int64), np.empty(0, bool)
    try:
        gids_in, owned_in = lists
        gids, owned = _gids(gids_in), np.asarray(owned_in)
        if owned.dtype != bool or owned.shape != gids.shape:
            raise ValueError(
                f"owned must be booleans, one per gid; got {owned.dtype} of shape "
                f"{owned.shape} for {gids.shape[0]} gids"
            )
        problem = _repeated_gids(gids[owned], gids[~owned])
    except (TypeError, ValueError) as error:
        problem = f"{error} (expected (gids, owned))"
    raise_on_all_ranks(comm, f"dim {name!r}: {problem}" if problem else None)
    return gids[owned], gids[~owned], np.flatnonzero(owned), np.flatnonzero(~owned)


def _gids(values: Sequence[int] | np.ndarray) -> np.ndarray:
    gids = np.asarray(values)
    if gids.ndim != 1:
        raise ValueError("gid lists must be one-dimensional")
    if gids.size and gids.dtype.kind not in "iu":
        raise ValueError("gids must be integers")
    if gids.size and gids.dtype.kind == "u" and gids.max() > np.iinfo(np.int64).max:
        raise ValueError(f"gids must fit in int64; got {gids.max()}")
    gids = gids.astype(np.int64)
    if gids.size and gids.min() < 0:
        raise ValueError("gids must be non-negative")
    return gids


def _repeated_gids(owned: np.ndarray, halo: np.ndarray) -> str | None:
    return (
        _repeated("owned gid", owned, "listed twice as owned")
        or _repeated("halo gid", halo, "listed twice as halo")
        or _repeated("gid", np.concatenate([owned, halo]), "listed both as owned and as halo")
    )


def _repeated(what: str, gids: np.ndarray, how: str) -> str | None:
    values, counts = np.unique(gids, return_counts=True)
    twice = values[counts > 1]
    return f"{what} {int(twice[0])} is {how}" if twice.size else None


def _build_plan(
    comm: MPI.Comm,
    name: str,
    owned: np.ndarray,
    halo: np.ndarray,
    owned_lids: np.ndarray,
    halo_lids: np.ndarray,
) -> ExchangePlan:
    size, rank = comm.Get_size(), comm.Get_rank()

    # 1. register owned gids with their directory ranks
    home = owned % size
    registered = alltoallv(comm, [owned[home == r] for r in range(size)])
    dir_gids = np.concatenate(registered)
    dir_owner = np.repeat(np.arange(size), [len(part) for part in registered])
    order = np.argsort(dir_gids, kind="stable")
    dir_gids, dir_owner = dir_gids[order], dir_owner[order]
    problem = None
    twice = np.flatnonzero(dir_gids[1:] == dir_gids[:-1])
    if twice.size:
        k = twice[0]
        problem = (
            f"dim {name!r}: gid {int(dir_gids[k])} is owned by ranks "
            f"{int(dir_owner[k])} and {int(dir_owner[k + 1])}"
        )
    raise_on_all_ranks(comm, problem)

    # 2. ask the directory who owns each halo gid
    home = halo % size
    asked_positions = [np.flatnonzero(home == r) for r in range(size)]
    questions = alltoallv(comm, [halo[p] for p in asked_positions])
    answers = []
    for asked in questions:  # -1: owned by no rank (this directory may hold no gid at all)
        owner = np.full(len(asked), -1, np.int64)
        at = np.searchsorted(dir_gids, asked)
        inside = np.flatnonzero(at < len(dir_gids))
        hit = inside[dir_gids[at[inside]] == asked[inside]]
        owner[hit] = dir_owner[at[hit]]
        answers.append(owner)
    replies = alltoallv(comm, answers)
    halo_owner = np.empty(len(halo), np.int64)
    for positions, reply in zip(asked_positions, replies):
        halo_owner[positions] = reply
    orphans = halo[halo_owner < 0]
    raise_on_all_ranks(
        comm,
        f"dim {name!r}: halo gid {int(orphans[0])} is owned by no rank" if orphans.size else None,
    )

    # 3. ask each owner for its gids, in halo order; the owner sends in that order
    recv_positions = [np.flatnonzero(halo_owner == r) for r in range(size)]
    requests = alltoallv(comm, [halo[p] for p in recv_positions])
    by_gid = np.argsort(owned)
    neighbours = []
    for peer in range(size):
        wanted = requests[peer]
        if not wanted.size and not recv_positions[peer].size:
            continue
        send_indices = by_gid[np.searchsorted(owned, wanted, sorter=by_gid)]
        neighbours.append(
            NeighbourExchange(
                rank=peer,
                send=IndexRegion(owned_lids[send_indices].astype(np.int64)),
                recv=IndexRegion(halo_lids[recv_positions[peer]].astype(np.int64)),
            )
        )
    return ExchangePlan(
        name=name,
        rank=rank,
        comm_size=size,
        local_shape=(len(owned) + len(halo),),
        neighbours=tuple(neighbours),
    )
