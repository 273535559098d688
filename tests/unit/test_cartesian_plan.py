"""Plan geometry on one process: process grids, boxes, message layout."""

from __future__ import annotations

import itertools

import numpy as np

import gt4py_halo as gh
from gt4py_halo.decomposition.cartesian import _block_bounds, exchange_directions, side_by_side
from gt4py_halo.decomposition.plan import FieldSpec, segment_offsets


def test_blocks_differ_by_at_most_one_cell_and_cover_the_domain():
    for n in range(1, 40):
        for p in range(1, min(n, 7) + 1):
            bounds = [_block_bounds(n, p, c) for c in range(p)]
            sizes = [b - a for a, b in bounds]
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(a == prev[1] for prev, (a, _) in itertools.pairwise(bounds))
            assert max(sizes) - min(sizes) <= 1


def test_dimensions_without_halo_are_not_split():
    d = gh.CartesianDecomposition((32, 32, 8), halo=(1, 1, 0), periodic=True)
    assert d.proc_grid[2] == 1


def test_single_rank_periodic_plan_is_one_self_message_with_corners():
    d = gh.CartesianDecomposition((6, 5), halo=((1, 2), (1, 1)), periodic=True)
    plan = d.plan()
    assert [n.rank for n in plan.neighbours] == [0]
    (me,) = plan.neighbours
    # 8 directions; face strips plus corners; send and recv cover the same number of cells
    assert len(me.send.boxes) == len(me.recv.boxes) == 8
    assert me.send.count == me.recv.count
    halo_cells = np.prod(d.allocated_shape) - np.prod(d.owned_shape)
    assert me.recv.count == halo_cells


def test_non_periodic_single_rank_has_nothing_to_exchange():
    d = gh.CartesianDecomposition((6, 5), halo=2, periodic=False)
    assert d.plan().neighbours == ()


def test_segments_are_aligned_and_ordered():
    specs = [FieldSpec(np.dtype(np.int32), (3,)), FieldSpec(np.dtype(np.float64), ())]
    offsets, nbytes = segment_offsets(5, specs)
    assert offsets == (0, 64)  # 5 cells * 3 levels * 4 bytes = 60, aligned to 8
    assert nbytes == 64 + 5 * 8


def _cells(boxes) -> list[tuple[int, ...]]:
    """The cells of ``boxes`` in message order: box by box, C order inside."""
    return [cell for box in boxes for cell in itertools.product(*map(range, box.start, box.stop))]


def test_coalesced_boxes_hold_the_same_cells_in_the_same_order():
    """What the runtime exchange copies box by box (``packing.py``) in fewer copies: a halo
    row of corner, face and corner is one box, and the message layout does not change."""
    merged_any = False
    for shape, halo in [((6, 5), ((1, 2), (1, 1))), ((7, 6, 4), (2, 1, 1)), ((9, 4), (3, 0))]:
        d = gh.CartesianDecomposition(shape, halo=halo, periodic=True)
        for neighbour in d.plan().neighbours:
            for region in (neighbour.send, neighbour.recv):
                coalesced = region.coalesced()
                assert _cells(coalesced) == _cells(region.boxes)
                merged_any |= len(coalesced) < len(region.boxes)
    assert merged_any


def test_directions_to_one_rank_are_side_by_side_on_every_rank():
    """The compiled exchange's arena order: on every rank of every grid, the directions that
    lead to one neighbour rank are consecutive (one contiguous message), faces at the end."""
    for ndim in (2, 3):
        directions = exchange_directions(((1, 1),) * ndim)
        for grid in itertools.product(range(1, 5 if ndim == 2 else 4), repeat=ndim):
            for periodic in itertools.product((False, True), repeat=ndim):
                order = side_by_side(directions, grid, periodic)
                assert sorted(order) == list(range(len(directions)))
                for coords in itertools.product(*map(range, grid)):
                    peers = [_peer(coords, directions[k], grid, periodic) for k in order]
                    for peer in set(peers) - {None}:
                        at = [i for i, p in enumerate(peers) if p == peer]
                        assert at == list(range(at[0], at[-1] + 1)), (grid, periodic, coords)
                        widths = [sum(map(abs, directions[order[i]])) for i in at]
                        assert widths == sorted(widths, reverse=True)


def _peer(coords, direction, grid, periodic):
    """The block coordinates ``direction`` leads to from ``coords``; None past an open edge."""
    peer = []
    for c, d, p, per in zip(coords, direction, grid, periodic):
        if not (0 <= c + d < p or per):
            return None
        peer.append((c + d) % p)
    return tuple(peer)
