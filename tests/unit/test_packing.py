"""The host copies of a runtime exchange run as one program of block copies in C per phase
(``runtime/packing.py``, ``_native.c``): the same bytes and halos as NumPy's copy per
box, in every memory layout a field may have."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

from gt4py_halo import _native
from gt4py_halo.decomposition.plan import (
    Box,
    BoxRegion,
    ExchangePlan,
    FieldSpec,
    IndexRegion,
    NeighbourExchange,
)
from gt4py_halo.runtime import packing

# a rank's send region to a neighbour along axis 0 (faces and corners, not mergeable) and its
# receive region (two halo rows)
SEND = BoxRegion(
    (
        Box((1, 1), (2, 9)),
        Box((4, 1), (5, 9)),
        Box((1, 0), (2, 1)),
        Box((1, 9), (2, 10)),
        Box((4, 0), (5, 1)),
        Box((4, 9), (5, 10)),
    )
)
RECV = BoxRegion((Box((0, 0), (1, 10)), Box((5, 0), (6, 10))))


def layouts(levels: tuple[int, ...]) -> dict[str, np.ndarray]:
    shape = (6, 10, *levels)
    values = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    padded = np.zeros((7, 13, *levels))[: shape[0], 1 : 1 + shape[1]]  # GT4Py pads so
    padded[...] = values
    return {
        "C": values.copy(),
        "Fortran": np.asfortranarray(values),
        "padded": padded,
        "levels outermost": np.moveaxis(np.ascontiguousarray(np.moveaxis(values, -1, 0)), 0, -1),
        "negative strides": np.ascontiguousarray(values[::-1])[::-1],
    }


def numpy_blocks(blocks) -> None:
    for dst, src in blocks:
        np.copyto(dst, src)


@pytest.mark.parametrize("levels", [(), (3,)], ids=["no levels", "3 levels"])
@pytest.mark.parametrize(
    "layout", ["C", "Fortran", "padded", "levels outermost", "negative strides"]
)
def test_one_call_equals_numpy_box_by_box(levels, layout):
    """The host copies of a message, in one call into C: the bytes and halos NumPy's copy
    of each box gives, in every layout a field may have."""
    spec = FieldSpec(np.dtype(np.float64), levels)
    results = []
    for run in (numpy_blocks, lambda blocks: [c() for c in packing.block_copies(blocks, np)]):
        field = layouts(levels)[layout]
        send = packing.MessageBuffer(SEND, [spec], np)
        blocks, gathers = [], []
        send.pack([field], blocks, gathers)
        run(blocks)
        recv = packing.MessageBuffer(RECV, [spec], np)
        recv.data[:] = np.arange(recv.nbytes) % 251
        unpacked = []
        recv.unpack([field], unpacked, gathers)
        run(unpacked)
        assert not gathers and len(packing.block_copies(blocks + unpacked, np)) == 1
        results.append((send.data.copy(), field.copy()))
    (sent, unpacked_field), (sent_c, unpacked_c) = results
    np.testing.assert_array_equal(sent_c, sent)
    np.testing.assert_array_equal(unpacked_c, unpacked_field)


@pytest.mark.parametrize("levels", [(), (3,)], ids=["no levels", "3 levels"])
@pytest.mark.parametrize(
    "layout", ["C", "Fortran", "padded", "levels outermost", "negative strides"]
)
def test_index_lists_in_one_call_equal_numpy_take_and_assignment(levels, layout):
    """An unstructured message's host copies, a gather of its cells and a scatter into the
    halo's, in one call into C: what NumPy's ``take`` and index assignment give, in every
    layout (cells along axis 0: every layout's first column)."""
    spec = FieldSpec(np.dtype(np.float64), levels)
    field = layouts(levels)[layout][:, 0]
    send = packing.MessageBuffer(IndexRegion(np.array([4, 1, 3, 2])), [spec], np)
    recv = packing.MessageBuffer(IndexRegion(np.array([5, 0])), [spec], np)
    recv.data[:] = np.arange(recv.nbytes) % 251
    blocks, copies = [], []
    send.pack([field], blocks, copies)
    recv.unpack([field.copy()], [], copies)  # (its blocks are not run)
    assert not copies and len(packing.block_copies(blocks, np)) == 1
    expected = np.take(field, [4, 1, 3, 2], axis=0)
    for copy in packing.block_copies(blocks, np):
        copy()
    np.testing.assert_array_equal(send.data[: expected.nbytes].view(np.float64), expected.ravel())
    into, blocks = field.copy(), []
    recv.unpack([into], blocks, copies)
    for copy in packing.block_copies(blocks, np):
        copy()
    numpy = field.copy()
    numpy[[5, 0]] = recv.data[: 2 * spec.cell_bytes].view(np.float64).reshape((2, *levels))
    np.testing.assert_array_equal(into, numpy)


def test_records_copy_the_longest_contiguous_runs():
    """Axes of one element go, axes contiguous in both views merge into the run, axes that
    step evenly over the next merge: a padded field's rows of a C-ordered box are one run
    each, a whole C-ordered block one run."""
    field = np.zeros((6, 10, 4))
    buffer = np.zeros((6, 10, 4))
    assert packing._record(buffer, field)[2:] == [6 * 10 * 4 * 8, 0]
    src, dst = field[1:3, 2:5], buffer[:2, :3]  # two rows of 3x4 contiguous elements
    assert packing._record(dst, src)[2:] == [3 * 4 * 8, 1, 2, 10 * 4 * 8, 10 * 4 * 8]
    column = field[1:5, 2:3, 0]  # one element per row
    assert packing._record(np.zeros((4, 1)), column)[2:] == [8, 1, 4, 10 * 4 * 8, 8]
    assert packing._record(np.zeros((0, 3)), field[:0, :3, 0]) == []


@pytest.mark.parametrize("layout", ["C", "Fortran", "padded", "negative strides"])
def test_blocks_in_lockstep_equal_numpy_block_by_block(layout):
    """A rank's own halos (every axis wrapping onto it): a block and the next one of one
    layout with short runs are one record of two in lockstep (the two halos across an axis
    with one element per row, or a few), long runs one record each; the halos NumPy's copy
    of each box gives, in every layout."""
    values = layouts(())[layout]
    field = np.zeros((6, 10, 3), values.dtype)
    field[...] = values[:, :, None] + np.arange(3) / 4
    if layout != "C":  # the layout's own strides, levels added
        field = np.moveaxis(np.asarray(np.moveaxis(field, -1, 0), order="F"), 0, -1)
    boxes = [  # (halo, owned) pairs of axes 0 and 1, halo width 1
        ((slice(0, 1), slice(1, 9)), (slice(4, 5), slice(1, 9))),
        ((slice(5, 6), slice(1, 9)), (slice(1, 2), slice(1, 9))),
        ((slice(1, 5), slice(0, 1)), (slice(1, 5), slice(8, 9))),
        ((slice(1, 5), slice(9, 10)), (slice(1, 5), slice(1, 2))),
    ]
    blocks = [(field[dst], field[src]) for dst, src in boxes]
    program = packing.block_program(blocks, lockstep=True)
    expected = field.copy()
    for dst, src in boxes:
        expected[dst] = expected[src]
    _native.run(program)
    np.testing.assert_array_equal(field, expected)
    records = [packing._record(*b) for b in blocks]
    paired = [r[2] <= packing.LOCKSTEP_RUN_BYTES for r in records[::2]]
    saved = [len(r) - 2 for r, p in zip(records[1::2], paired) if p]  # the second's head
    assert len(program) == sum(map(len, records)) - sum(saved)
    assert any(paired)  # axis 1's halos: a level's element or a cell's levels per row


def test_a_malformed_program_is_refused_before_copying():
    field = np.arange(4.0)
    record = packing._record(np.zeros(4), field)
    entries = packing._entries(np.zeros(2), field, np.array([3, 0]), False)
    for program in (
        record[:3],
        record + [0],
        [*record[:3], 40, *record[4:]],
        entries[:8],
        [*entries[:3], -41, *entries[4:]],
        [*record[:3], _native.PAIRED + record[3], *record[:2]],  # a pair without its dims
        [*record[:3], _native.PAIRED, *record[:2]],  # a pair of blocks without dims
    ):
        with pytest.raises(ValueError, match="malformed"):
            _native.run(np.array(program, np.int64))


def test_runs_of_a_box():
    """A box is one contiguous run per point of the axes before the last one it does not
    cover whole: levels are whole, a decomposed axis where the box spans it from 0."""
    local = (6, 10, 8)
    face = Box((1, 1, 0), (3, 9, 8))  # axis 2 has no halo: whole; axis 1 cut
    assert packing.run_axes(face, local, ()) == 1  # a run of 8x8 cells per plane of axis 0
    assert packing.run_axes(face, local, (3, 2)) == 1  # levels are whole
    assert packing.run_axes(Box((1, 0, 0), (3, 10, 8)), local, ()) == 0  # one run
    assert packing.run_axes(Box((1, 1, 1), (3, 9, 7)), local, (3,)) == 2


def test_boxes_in_place():
    """Runs of at least ``RUNTIME_IN_PLACE_MIN_BYTES`` for every field, at most
    ``MAX_RUNS`` per box and field, go in place; index lists never."""
    local = (10, 130, 80)
    face = Box((1, 1, 0), (2, 129, 80))  # one run of 128x80 cells: 80 KiB of float64
    thick = Box((1, 1, 0), (1 + packing.MAX_RUNS + 1, 129, 80))  # one run too many
    region = BoxRegion((face, Box((1, 0, 0), (2, 1, 80)), thick))
    f64, f32 = (FieldSpec(np.dtype(t), ()) for t in (np.float64, np.float32))
    assert packing.in_place_boxes(region, local, [f64, f64]) == (face,)
    assert packing.in_place_boxes(region, local, [f64, f32]) == ()  # 40 KiB of float32
    assert packing.in_place_boxes(IndexRegion(np.arange(4)), local, [f64]) == ()


def test_messages_leave_runs_out_of_their_buffers():
    """With runs, a buffer holds the boxes that do not go in place, after the count of runs
    its sender sends beside it; the runs bound to C-ordered fields are the fields' own
    memory, to padded ones buffers of their own with the copies to and from them."""
    local = (4, 130, 80)
    face = (Box((1, 1, 0), (2, 129, 80)), Box((2, 1, 0), (3, 129, 80)))
    edge = Box((1, 0, 0), (2, 1, 80))
    halo = (Box((0, 1, 0), (1, 129, 80)), Box((3, 1, 0), (4, 129, 80)))
    plan = ExchangePlan(
        "cartesian",
        0,
        2,
        local,
        (NeighbourExchange(1, BoxRegion((*face, edge)), BoxRegion((*halo, edge))),),
    )
    spec = FieldSpec(np.dtype(np.float64), ())
    messages = packing.Messages(plan, [spec, spec], np, b"trailer!", runs=True)
    assert messages.runs == [(1, face, halo)]
    ((_, sent),) = messages.sends
    ((_, received),) = messages.recvs
    header = packing.RUN_COUNT_BYTES
    assert sent.nbytes == received.nbytes == header + 2 * 80 * 8 + 8
    assert int.from_bytes(sent.data[:header].tobytes(), sys.byteorder) == 4  # 2 boxes x 2
    values = np.arange(np.prod(local), dtype=np.float64).reshape(local)
    padded = np.zeros((4, 130, 83))[..., :80]
    padded[...] = values
    (bound,) = messages.bind_runs([values, padded])
    assert bound.rank == 1 and len(bound.sends) == len(bound.recvs) == 4
    # box by box, field by field: the C-ordered field's runs are its memory
    assert all(np.shares_memory(m, values) for m in bound.sends[::2] + bound.recvs[::2])
    assert not any(np.shares_memory(m, padded) for m in bound.sends + bound.recvs)
    for copy in bound.pack:
        copy()
    np.testing.assert_array_equal(bound.sends[1], values[1, 1:129])
    np.testing.assert_array_equal(bound.sends[3], values[2, 1:129])
    bound.recvs[3][...] = -1.0
    for copy in bound.unpack:
        copy()
    assert (padded[3, 1:129] == -1.0).all() and (padded[0, 1:129] != -1.0).all()


def test_messages_of_a_plan_with_axes_that_wrap():
    """With ``wrapped``, the messages are the plan's ``wrapped`` ones (axis 1 wraps: faces
    across axis 0 span its halos) and the copies to the rank itself come first; without, the
    plain boxes, edges and all."""
    local = (4, 6)
    # by the receiver's direction: towards +1 (its -1) first
    face_out = (Box((2, 0), (3, 6)), Box((1, 0), (2, 6)))
    face_in = (Box((0, 0), (1, 6)), Box((3, 0), (4, 6)))
    plain_out = (
        Box((2, 4), (3, 5)),
        Box((2, 1), (3, 5)),
        Box((2, 1), (3, 2)),
    )  # corner, face, corner
    plain_in = (Box((0, 0), (1, 1)), Box((0, 1), (1, 5)), Box((0, 5), (1, 6)))
    wrap = NeighbourExchange(
        0,
        BoxRegion((Box((1, 4), (3, 5)), Box((1, 1), (3, 2)))),
        BoxRegion((Box((1, 0), (3, 1)), Box((1, 5), (3, 6)))),
    )
    plan = ExchangePlan(
        "cartesian",
        0,
        2,
        local,
        (wrap, NeighbourExchange(1, BoxRegion(plain_out), BoxRegion(plain_in))),
        wrapped=(NeighbourExchange(1, BoxRegion(face_out), BoxRegion(face_in)),),
    )
    spec = FieldSpec(np.dtype(np.float64), ())
    plain = packing.Messages(plan, [spec], np)
    assert not plain.self_first
    assert [b.nbytes for _, b in plain.sends] == [6 * 8]
    messages = packing.Messages(plan, [spec], np, wrapped=True)
    assert messages.self_first
    assert [b.nbytes for _, b in messages.sends] == [2 * 6 * 8]
    values = np.arange(24.0).reshape(local)
    expected = np.concatenate([values[2], values[1]])
    expected[[0, 5, 6, 11]] = values[[2, 2, 1, 1], [4, 1, 4, 1]]  # the wrapped halo columns
    (pack, _, local_copies), _ = messages.bind([values])
    for copy in local_copies + pack:  # the copies to itself first: the faces carry them
        copy()
    ((_, sent),) = messages.sends
    np.testing.assert_array_equal(sent.data.view(np.float64), expected)
    no_wraps = dataclasses.replace(plan, wrapped=())
    assert not packing.Messages(no_wraps, [spec], np, wrapped=True).self_first
