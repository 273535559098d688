"""``gh.halo`` and ``gh.auto_exchange``: exchanges placed from annotations on GT4Py programs,
only where a halo is read while stale, with the bits of exchanges placed by hand."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import gt4py.next as gtx
import numpy as np
import pytest
from conftest import at_most_ranks, load_example
from mpi4py import MPI

import gt4py_halo as gh

# uneven blocks, GT4Py's default fields padded on some ranks (as in test_compiled_step.py)
GLOBAL_SHAPE = (44 if MPI.COMM_WORLD.size == 3 else 45, 38)
CALLS = 3
# where exchanges go follows the step's code and the programs' annotations, the same on any
# number of ranks: 2 show the placed exchanges' bits on uneven blocks (the exchanges
# themselves run on 1 to 4 ranks in test_compiled_step.py)
pytestmark = at_most_ranks(2, "placement follows the code, not the decomposition")


I, J = gtx.Dimension("I"), gtx.Dimension("J")  # the example's
IJField = gtx.Field[gtx.Dims[I, J], gtx.float64]


@gtx.field_operator
def _shifted_sum(a: IJField, b: IJField) -> IJField:
    return a(I + 1) + 2.0 * b(J - 1)


@gtx.program
def _add_shifted(
    a: IJField, b: IJField, c: IJField, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
):
    _shifted_sum(a, b, out=c, domain={I: (i0, i1), J: (j0, j1)})


@gtx.field_operator
def _doubled(a: IJField) -> IJField:
    return 2.0 * a


@gtx.field_operator
def _east_west(a: IJField) -> IJField:
    return a(I + 1) - a(I - 1)


@gtx.program
def _via_temporary(
    u: IJField, t: IJField, v: IJField, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
):
    """``t`` on the domain of ``v`` and one more cell east and west: ``u``'s halo is read."""
    _doubled(u, out=t, domain={I: (i0 - 1, i1 + 1), J: (j0, j1)})
    _east_west(t, out=v, domain={I: (i0, i1), J: (j0, j1)})


@gtx.field_operator
def _west_difference(a: IJField) -> IJField:
    return a - a(I - 1)


@gtx.field_operator
def _east_difference(a: IJField) -> IJField:
    return a(I + 1) - a


@gtx.program
def _flux_divergence(
    u: IJField, f: IJField, v: IJField, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
):
    """Fluxes ``f`` on the faces east of ``v``'s cells, the first one west of them too:
    ``u``'s halo is read 1 cell wide (west), not 2."""
    _west_difference(u, out=f, domain={I: (i0, i1 + 1), J: (j0, j1)})
    _east_difference(f, out=v, domain={I: (i0, i1), J: (j0, j1)})


@gtx.field_operator
def _two_shifts(a: IJField) -> tuple[IJField, IJField]:
    return a(I - 1), a(J + 1)


@gtx.program
def _tuple_out(
    a: IJField, b: IJField, c: IJField, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
):
    _two_shifts(a, out=(b, c), domain={I: (i0, i1), J: (j0, j1)})


_unstructured = load_example(Path(__file__).resolve().parents[2] / "examples/unstructured_step.py")
Cell, Edge, CellField, EdgeField = (
    _unstructured.Cell,
    _unstructured.Edge,
    _unstructured.CellField,
    _unstructured.EdgeField,
)
cells_to_edges, edges_to_cells = _unstructured.cells_to_edges, _unstructured.edges_to_cells


@gtx.program
def _edges_then_cells(
    c: CellField,
    e: EdgeField,
    c_new: CellField,
    e0: gtx.int32,
    e1: gtx.int32,
    c0: gtx.int32,
    c1: gtx.int32,
):
    cells_to_edges(c, out=e, domain={Edge: (e0, e1)})
    edges_to_cells(c, e, out=c_new, domain={Cell: (c0, c1)})


@gtx.field_operator
def _two_by_one(a: IJField) -> IJField:
    return a(I - 2) + 3.0 * a(I + 2) + 5.0 * a(J - 1) + 7.0 * a(J + 1)


@gtx.program
def _wide_in_i(a: IJField, b: IJField, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32):
    _two_by_one(a, out=b, domain={I: (i0, i1), J: (j0, j1)})


@gtx.field_operator
def _east(a: IJField) -> IJField:
    return a(I + 1) - a


@gtx.program
def _east_only(a: IJField, b: IJField, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32):
    _east(a, out=b, domain={I: (i0, i1), J: (j0, j1)})


@gtx.field_operator
def _east_of_pair(a: tuple[IJField, IJField]) -> IJField:
    return a[0](I + 1) - a[1]


@gtx.program
def _tuple_in(
    a: tuple[IJField, IJField],
    b: IJField,
    i0: gtx.int32,
    i1: gtx.int32,
    j0: gtx.int32,
    j1: gtx.int32,
):
    _east_of_pair(a, out=b, domain={I: (i0, i1), J: (j0, j1)})


East = gtx.FieldOffset("Ioff", source=I, target=(I,))  # (a Python name not the offset's)


@gtx.field_operator
def _named_east(a: IJField) -> IJField:
    return a(East[1]) - a


@gtx.program
def _named_east_only(
    a: IJField, b: IJField, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
):
    _named_east(a, out=b, domain={I: (i0, i1), J: (j0, j1)})


K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
IKField = gtx.Field[gtx.Dims[I, K], gtx.float64]


@gtx.field_operator
def _up_down(a: IKField) -> IKField:
    return a(K + 1) - 2.0 * a(K - 1)


@gtx.program
def _vertical(a: IKField, b: IKField, i0: gtx.int32, i1: gtx.int32, k0: gtx.int32, k1: gtx.int32):
    _up_down(a, out=b, domain={I: (i0, i1), K: (k0, k1)})


@gtx.program
def _west_only(a: IJField, b: IJField, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32):
    _west_difference(a, out=b, domain={I: (i0, i1), J: (j0, j1)})


def fields(diffusion: ModuleType, d: gh.CartesianDecomposition) -> list:
    i, j = np.meshgrid(*(np.arange(s.start, s.stop) for s in d.global_slices), indexing="ij")
    u = np.zeros(d.allocated_shape)
    u[d.owned] = diffusion.initial_condition(i, j)
    return [gtx.as_field([diffusion.I, diffusion.J], a) for a in (u, np.zeros_like(u), u * 0)]


def torus(diffusion: ModuleType, backend: str | None = None) -> tuple:
    """The tests' decomposition of ``GLOBAL_SHAPE`` (halo 1, periodic), its exchange, the
    owned bounds as the example's stencil takes them, and that stencil annotated as reading
    ``u``'s halo 1 cell wide."""
    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=1, periodic=True)
    bounds = [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]
    return d, gh.make_exchange(d, backend), bounds, gh.halo(u=1)(diffusion.diffusion_step)


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_exchanges_placed_from_annotations_match_hand_placed_ones(diffusion, comm, backend) -> None:
    """Diffuse u into v and back, with an energy diagnostic of u (no halo read) between:
    the one exchange each diffusion needs is placed (the field written before it), none for
    the diagnostic nor for a halo still valid; the bits are those of the hand-placed run."""
    d, ex, bounds, diffuse = torus(diffusion, backend)
    energy = gh.halo()(diffusion.energy)
    assert diffuse.writes == {"v"} and energy.writes == {"w"}

    u, v, w = fields(diffusion, d)
    with gh.auto_exchange(ex) as placed:
        for _ in range(CALLS):
            diffuse(u, v, *bounds)
            energy(u, w, *bounds)
            diffuse(v, u, *bounds)
            energy(v, w, *bounds)  # reads v's owned cells only: its valid halo stays valid
    placed_runs = [(p.program, p.arguments, p.dim) for p in placed.exchanges]
    assert placed_runs == [("diffusion_step", ("u",), None)] * 2 * CALLS

    for ours, theirs in zip((u, v, w), hand_placed(diffusion, d, ex, bounds, energy_of_v=True)):
        np.testing.assert_array_equal(ours.asnumpy(), theirs.asnumpy())


def hand_placed(diffusion: ModuleType, d, ex, bounds, energy_of_v: bool, uvw=None) -> list:
    """``CALLS`` times: diffuse u into v, energy of u, diffuse v back into u (then energy of v
    if ``energy_of_v``), each exchange placed by hand; the fields ``u, v, w`` (``uvw``, or new
    ones) at the end."""
    u, v, w = uvw or fields(diffusion, d)
    for _ in range(CALLS):
        ex.exchange(u)
        diffusion.diffusion_step(u, v, *bounds)
        diffusion.energy(u, w, *bounds)
        ex.exchange(v)
        diffusion.diffusion_step(v, u, *bounds)
        if energy_of_v:
            diffusion.energy(v, w, *bounds)
    return [u, v, w]


def test_a_width_smaller_than_the_program_reads_is_refused(diffusion) -> None:
    """Naming the program, the argument and both widths: cartesian (cells) and unstructured
    (neighbour tables)."""
    with pytest.raises(gh.ProgramError, match=r"diffusion_step: it reads u 1 cell.*declared 0"):
        gh.halo()(diffusion.diffusion_step)
    example = load_example(Path(__file__).resolve().parents[2] / "examples/unstructured_step.py")
    with pytest.raises(gh.ProgramError, match=r"average_from_edges: it reads e 1 .*declared 0"):
        gh.halo(c=1)(example.average_from_edges)
    with pytest.raises(gh.ProgramError, match=r"_named_east_only: it reads a 1 cell.*declared 0"):
        gh.halo()(_named_east_only)  # (a named offset, by the name GT4Py's IR gives it)
    with pytest.raises(gh.ProgramError, match="no argument named x"):
        gh.halo(u=1, x=2)(diffusion.diffusion_step)
    with pytest.raises(gh.ProgramError, match="must be an int >= 0"):
        gh.halo(u=-1)
    # the example's two programs in one: which edges the first writes, GT4Py cannot tell
    # against the neighbours of the cells the second writes (taken for e's halo: stale)
    with pytest.raises(gh.ProgramError, match="writes e and a later call reads it where GT4Py"):
        gh.halo(c=2, e=1)(_edges_then_cells)


def test_a_width_wider_than_the_decomposition_halo_is_refused(diffusion, comm) -> None:
    """At the call, on every rank, before anything is posted or computed."""
    d, ex, bounds, _ = torus(diffusion)
    u, v, _ = fields(diffusion, d)
    before = v.asnumpy().copy()
    with (
        gh.auto_exchange(ex) as placed,
        pytest.raises(gh.ProgramError, match="reads u 2 cell.*halo is 1 wide"),
    ):
        gh.halo(u=2)(diffusion.diffusion_step)(u, v, *bounds)
    assert not placed.exchanges
    np.testing.assert_array_equal(v.asnumpy(), before)


def test_an_axis_split_without_a_halo_refuses_a_width(diffusion, comm) -> None:
    """A decomposition that splits an axis over ranks with no halo (a proc_grid given) fills
    no cell across it: a program reading a width into its halo may read across that axis
    (the diffusion stencil reads both axes), so the call is refused, on every rank, before
    anything is posted (before, the axis was skipped: the stencil read cells no exchange
    filled, wrong values). Not split, such an axis is nobody's to exchange: accepted."""
    split = comm.size > 1
    d = gh.CartesianDecomposition(
        GLOBAL_SHAPE, halo=(1, 0), periodic=True, proc_grid=(1, comm.size), comm=comm
    )
    u, v, _ = fields(diffusion, d)
    bounds = [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]
    bounds[2:] = [gtx.int32(d.owned[1].start + 1), gtx.int32(d.owned[1].stop - 1)]
    before = v.asnumpy().copy()
    with gh.auto_exchange(gh.make_exchange(d)) as placed:
        if split:
            with pytest.raises(gh.ProgramError, match=r"halo is 0 wide \(axis 1"):
                gh.halo(u=1)(diffusion.diffusion_step)(u, v, *bounds)
            np.testing.assert_array_equal(v.asnumpy(), before)
        else:  # (the stencil's rows kept off the unexchanged edge of the one block)
            gh.halo(u=1)(diffusion.diffusion_step)(u, v, *bounds)
    assert len(placed.exchanges) == (0 if split else 1)


def global_and_local(d: gh.CartesianDecomposition, dims: tuple) -> tuple:
    """A global 2-D array of distinct values, this rank's field ``a`` of ``dims`` holding its
    owned part (halo 0), a zero field ``b``, and the owned bounds as the programs take them."""
    i, j = np.meshgrid(*(np.arange(n, dtype=float) for n in d.global_shape), indexing="ij")
    whole = np.sin(i) + 10.0 * np.cos(j)
    a = np.zeros(d.allocated_shape)
    a[d.owned] = whole[d.global_slices]
    a, b = (gtx.as_field(list(dims), x) for x in (a, np.zeros_like(a)))
    return whole, a, b, [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]


def placed_in_step(comm, ex, annotated) -> list:
    """The exchanges placed in a step calling ``annotated`` once (none: its argument is
    valid at the step's start), after the same checks as at a call from Python."""

    @gh.program(comm=comm, exchange=ex)
    def step(a, b, i0, i1, j0, j1):
        annotated(a, b, i0, i1, j0, j1)

    return step.exchange_report()


def test_reads_checked_per_side_of_each_axis(comm) -> None:
    """A stencil reading ``I +- 2`` and ``J +- 1`` runs on ``halo=(2, 1)``, one reading
    ``I + 1`` alone on a halo on that side only, and so does a tuple of fields (the axes
    are the dims of the argument's type; GT4Py's inference tells each side's reach): the values of the global stencil
    computed on one array. Reading a side with no halo is refused, naming the side, from
    Python and in a compiled step alike."""
    for program, halo, stencil in (
        (
            _wide_in_i,
            (2, 1),
            lambda g: sum(
                c * np.roll(g, s, (0, 1))
                for c, s in ((1.0, (2, 0)), (3.0, (-2, 0)), (5.0, (0, 1)), (7.0, (0, -1)))
            ),
        ),
        (_east_only, ((0, 1), (0, 0)), lambda g: np.roll(g, -1, 0) - g),
        (_tuple_in, ((0, 1), (0, 0)), lambda g: np.roll(g, -1, 0) - g),
    ):
        d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=halo, periodic=True, comm=comm)
        annotated = gh.halo(a=max(d.halo[0]))(program)
        whole, a, b, bounds = global_and_local(d, (I, J))
        ex = gh.make_exchange(d)
        with gh.auto_exchange(ex) as placed:
            annotated((a, a) if program is _tuple_in else a, b, *bounds)
        assert len(placed.exchanges) == 1
        np.testing.assert_array_equal(b.asnumpy()[d.owned], stencil(whole)[d.global_slices])
        if program is not _tuple_in:
            assert placed_in_step(comm, ex, annotated) == []  # (checked alike; not built here)

    d = gh.CartesianDecomposition(GLOBAL_SHAPE, halo=((0, 1), (0, 0)), periodic=True, comm=comm)
    a, b = (gtx.as_field([I, J], np.zeros(d.allocated_shape)) for _ in range(2))
    bounds = [gtx.int32(x) for s in d.owned for x in (s.start, s.stop)]
    with (
        gh.auto_exchange(gh.make_exchange(d)) as placed,
        pytest.raises(gh.ProgramError, match=r"reads a 1 cell.*halo is 0 wide \(axis 0, lower"),
    ):
        gh.halo(a=1)(_west_only)(a, b, *bounds)
    assert not placed.exchanges
    with pytest.raises(gh.ProgramError, match=r"halo is 0 wide \(axis 0, lower"):
        placed_in_step(comm, gh.make_exchange(d), gh.halo(a=1)(_west_only))


def test_vertical_reads_across_a_decomposed_axis(comm) -> None:
    """Vertical reads need no declared width, as vertical dims are taken for never
    decomposed; on a decomposition that gives one a halo (and splits it over the ranks) a
    vertical read without a width is refused at the call, on every rank, before anything is
    posted, and with a width it is exchanged: the global stencil's values. Split without a
    halo, refused either way (no exchange fills those cells)."""
    shape = (5, 12)
    k_halo = gh.CartesianDecomposition(shape, halo=((0, 0), (1, 1)), periodic=True, comm=comm)
    assert k_halo.proc_grid == (1, comm.size)
    whole, a, b, bounds = global_and_local(k_halo, (I, K))
    ex = gh.make_exchange(k_halo)
    before = b.asnumpy().copy()
    with gh.auto_exchange(ex) as placed:
        with pytest.raises(gh.ProgramError, match=r"along K, a vertical dim.*axis 1.*@gh.halo\(a="):
            gh.halo()(_vertical)(a, b, *bounds)
        np.testing.assert_array_equal(b.asnumpy(), before)
        gh.halo(a=1)(_vertical)(a, b, *bounds)
    assert len(placed.exchanges) == 1
    expected = np.roll(whole, -1, 1) - 2.0 * np.roll(whole, 1, 1)
    np.testing.assert_array_equal(b.asnumpy()[k_halo.owned], expected[k_halo.global_slices])

    if comm.size > 1:
        split = gh.CartesianDecomposition(
            shape, halo=((1, 1), (0, 0)), periodic=True, proc_grid=(1, comm.size), comm=comm
        )
        for width in (0, 1):
            with pytest.raises(gh.ProgramError, match=r"halo is 0 wide \(axis 1"):
                placed_in_step(comm, gh.make_exchange(split), gh.halo(a=width)(_vertical))


def test_unstructured_exchanges_placed_per_dim(comm) -> None:
    """The ICON-like step of ``examples/unstructured_step.py`` (cells to edges through E2C,
    back through C2E) from annotations: a cell exchange before the first program, an edge
    exchange before the second, every step; the bits of the hand-placed exchanges."""
    example = load_example(Path(__file__).resolve().parents[2] / "examples/unstructured_step.py")
    example.compile_stencils(comm)
    mesh = example.local_mesh(12, 8, comm.rank, comm.size)
    ex = gh.make_exchange(mesh.decomposition(comm))
    to_edges = gh.halo(c=1)(example.interpolate_to_edges)
    to_cells = gh.halo(e=1)(example.average_from_edges)
    provider = mesh.offset_provider()
    zero, c1, e1 = (gtx.int32(n) for n in (0, mesh.owned_cells, mesh.owned_edges))

    def annotated(c, e, c_new) -> None:
        to_edges(c, e, zero, e1, offset_provider=provider)
        to_cells(c, e, c_new, zero, c1, offset_provider=provider)

    with gh.auto_exchange(ex) as placed:
        ours = example.run(annotated, mesh, CALLS)
    once = [("interpolate_to_edges", ("c",), "cell"), ("average_from_edges", ("e",), "edge")]
    assert [(p.program, p.arguments, p.dim) for p in placed.exchanges] == once * CALLS
    hand = example.run(example.make_step(mesh, comm).from_python, mesh, CALLS)
    for a, b in zip(ours, hand):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_compiled_step_with_exchanges_placed_from_annotations(diffusion, comm, backend) -> None:
    """``@gh.program(exchange=ex)``: the exchanges are placed in the step's code where a read
    halo may be stale (at a loop's head too), none where one was placed by hand, split where
    the field was written in the same block; the bits are those of the hand-placed exchanges
    from Python."""
    d, ex, bounds, diffuse = torus(diffusion, backend)
    energy = gh.halo()(diffusion.energy)

    @gh.program(comm=comm, exchange=ex)
    def looped(u, v, w, i0, i1, j0, j1):
        ex.exchange(u)  # by hand: nothing placed before the first diffusion
        for _ in range(CALLS):
            diffuse(u, v, i0, i1, j0, j1)
            energy(u, w, i0, i1, j0, j1)
            diffuse(v, u, i0, i1, j0, j1)

    report = looped.exchange_report()
    assert [(p.program, p.fields, p.dim) for p in report] == [
        ("diffusion_step", ("u",), None),  # written in the loop's previous turn: blocking
        ("diffusion_step", ("v",), None),  # written above: started there, overlaps energy
    ]
    assert report[0].started is None and report[1].started == report[0].line
    assert str(report[1]).endswith("finished before diffusion_step")
    u, v, w = fields(diffusion, d)
    looped(u, v, w, *bounds)

    for ours, theirs in zip((u, v, w), hand_placed(diffusion, d, ex, bounds, energy_of_v=False)):
        np.testing.assert_array_equal(ours.asnumpy(), theirs.asnumpy())


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_exchanges_placed_in_a_method(diffusion, comm, backend) -> None:
    """ICON4Py's way: a granule keeps its exchange and annotated programs as attributes and
    steps in a method. ``gh.program(obj.run, exchange=ex)`` and ``@gh.program(exchange=ex)``
    in a class body resolve ``self.diffuse`` and the hand-written ``self.ex.exchange`` through
    the object and place what the function form places: ``c``, read and never written, is
    exchanged from Python at the first call only (an argument position past ``self``). The
    bits of the same exchanges placed by hand from Python, two calls."""
    d, ex, bounds, _ = torus(diffusion, backend)

    class Granule:
        def __init__(self) -> None:
            self.ex = ex
            self.diffuse = gh.halo(u=1)(diffusion.diffusion_step)
            self.energy = gh.halo()(diffusion.energy)
            self.bound = gh.program(self.run, comm=comm, exchange=ex)

        def run(self, c, u, v, w, i0, i1, j0, j1):
            self.diffuse(c, u, i0, i1, j0, j1)
            self.ex.exchange(u)  # by hand: nothing placed before the loop's first turn
            for _ in range(CALLS):
                self.diffuse(u, v, i0, i1, j0, j1)
                self.energy(u, w, i0, i1, j0, j1)
                self.diffuse(v, u, i0, i1, j0, j1)

        in_body = gh.program(run, comm=comm, exchange=ex)

    granule = Granule()
    c, u, v = fields(diffusion, d)
    _, w, _ = fields(diffusion, d)
    for _ in range(2):
        ex.exchange(c)
        diffusion.diffusion_step(c, u, *bounds)
        hand_placed(diffusion, d, ex, bounds, energy_of_v=False, uvw=(u, v, w))
    for step in (granule.bound, granule.in_body):
        assert [
            (p.program, p.fields, p.dim, p.started is None) for p in step.exchange_report()
        ] == [
            ("diffusion_step", ("u",), None, True),  # written in the loop's previous turn
            ("diffusion_step", ("v",), None, False),  # written above: split around energy
        ]
        ours = [*fields(diffusion, d), fields(diffusion, d)[1]]
        for _ in range(2):
            step(*ours, *bounds)
        for a, b in zip(ours, (c, u, v, w)):
            np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_a_step_that_returns_early_exchanges_what_it_left_stale(diffusion, comm) -> None:
    """A call that returns before its last exchange leaves ``u`` stale: the next call
    exchanges it first (the placement follows the ``return``); the bits of the same
    exchanges by hand from Python, calls taking either way."""
    d, ex, bounds, diffuse = torus(diffusion)

    @gh.program(comm=comm, exchange=ex)
    def step(u, v, i0, i1, j0, j1, stop):
        diffuse(u, v, i0, i1, j0, j1)
        diffuse(v, u, i0, i1, j0, j1)
        if stop == 1:
            return
        ex.exchange(u)

    ours, (u, v, _) = fields(diffusion, d)[:2], fields(diffusion, d)
    for stop in (1, 0, 1, 1, 0):
        step(*ours, *bounds, gtx.int32(stop))
        ex.exchange(u)
        diffusion.diffusion_step(u, v, *bounds)
        ex.exchange(v)
        diffusion.diffusion_step(v, u, *bounds)
        if stop != 1:
            ex.exchange(u)
    for a, b in zip(ours, (u, v)):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_writes_by_other_steps_and_programs_are_seen(diffusion, comm) -> None:
    """A field a step reads and never writes is exchanged at its first call only, and again
    after another step with placed exchanges or an annotated program wrote it; under
    ``gh.auto_exchange`` a step's write is seen too. The bits of the same calls with an
    exchange before each read (but the one annotated call made outside auto_exchange)."""
    d, ex, bounds, diffuse = torus(diffusion)

    @gh.program(comm=comm, exchange=ex)
    def reader(c, u, i0, i1, j0, j1):
        diffuse(c, u, i0, i1, j0, j1)

    @gh.program(comm=comm, exchange=ex)
    def writer(u, c, i0, i1, j0, j1):
        diffuse(u, c, i0, i1, j0, j1)

    c, u, _ = fields(diffusion, d)
    hand_c, hand_u, _ = fields(diffusion, d)

    def by_hand(a, b, exchanged=True):
        if exchanged:
            ex.exchange(a)
        diffusion.diffusion_step(a, b, *bounds)

    reader(c, u, *bounds)
    by_hand(hand_c, hand_u)
    writer(u, c, *bounds)  # writes c
    by_hand(hand_u, hand_c)
    reader(c, u, *bounds)  # exchanges c again
    by_hand(hand_c, hand_u)
    diffuse(u, c, *bounds)  # an annotated program writes c (from Python: nothing exchanged)
    by_hand(hand_u, hand_c, exchanged=False)
    reader(c, u, *bounds)
    by_hand(hand_c, hand_u)
    with gh.auto_exchange(ex):
        diffuse(c, u, *bounds)
        by_hand(hand_c, hand_u)
        writer(u, c, *bounds)
        by_hand(hand_u, hand_c)
        diffuse(c, u, *bounds)  # c written by the step: exchanged again
        by_hand(hand_c, hand_u)
    for a, b in zip((c, u), (hand_c, hand_u)):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_a_write_through_a_view_is_a_write_of_the_field(diffusion, comm) -> None:
    """An annotated program writing ``u[:, :]`` (another array object over ``u``'s memory)
    writes ``u``: under ``gh.auto_exchange`` its halo is exchanged again before it is read,
    and so is that of a field a step with placed exchanges reads at entry (both were taken
    as valid: wrong halos). The bits of the same calls with exchanges placed by hand."""
    d, ex, bounds, diffuse = torus(diffusion)

    @gh.program(comm=comm, exchange=ex)
    def reader(c, u, i0, i1, j0, j1):
        diffuse(c, u, i0, i1, j0, j1)

    u, v, w = fields(diffusion, d)
    hu, hv, hw = fields(diffusion, d)
    with gh.auto_exchange(ex) as placed:
        diffuse(u, v, *bounds)
        diffuse(v, u[:, :], *bounds)  # writes u through a view
        diffuse(u, w, *bounds)
    assert len(placed.exchanges) == 3
    for a, b in ((hu, hv), (hv, hu), (hu, hw)):
        ex.exchange(a)
        diffusion.diffusion_step(a, b, *bounds)
    reader(u, v, *bounds)
    diffuse(w, u[:, :], *bounds)  # from Python: nothing exchanged, u written
    reader(u, v, *bounds)
    ex.exchange(hu)
    diffusion.diffusion_step(hu, hv, *bounds)
    diffusion.diffusion_step(hw, hu, *bounds)
    ex.exchange(hu)
    diffusion.diffusion_step(hu, hv, *bounds)
    for ours, theirs in zip((u, v, w), (hu, hv, hw)):
        np.testing.assert_array_equal(ours.asnumpy(), theirs.asnumpy())


def test_a_write_through_a_call_s_result_is_a_write_of_its_array(diffusion, comm) -> None:
    """In a step, a name given a call's result over a field (``x = v.reshape(s)``, a view)
    is the field's: a program writing ``x`` makes ``v`` stale, and the exchange of ``v``
    its next reader needs is started after that write (it was placed nowhere: the reader
    read the halo ``v`` had before the write; or, ``x`` made before the write, started
    before it: messages of the old values). Placement alone, no build."""
    _, ex, _, diffuse = torus(diffusion)

    @gh.program(comm=comm, exchange=ex)
    def step(u, v, w, i0, i1, j0, j1):
        ex.exchange(v)
        x = v.reshape(w.shape)
        diffuse(u, x, i0, i1, j0, j1)  # writes v
        diffuse(v, w, i0, i1, j0, j1)  # reads v's halo

    first = step.__wrapped__.__code__.co_firstlineno  # (the decorator's line)
    assert [(p.fields, p.line, p.started) for p in step.exchange_report()] == [
        (("v",), first + 5, first + 4)
    ]


@pytest.mark.parametrize("backend", ["mpi", "ghex"])
def test_compiled_unstructured_step_from_annotations_only(comm, backend) -> None:
    """The unstructured step with no exchange written: a cell exchange before the first
    program and an edge exchange split around nothing before the second, placed in the
    compiled step; the caller swaps c and c_new between calls (the step assumes no stale
    halo of c at entry: the swapped-in c_new is exchanged from Python first). The bits of
    the hand-placed step from Python, both transports."""
    from gt4py_halo.compiled.neighbour_tables import NeighbourTables

    example = load_example(Path(__file__).resolve().parents[2] / "examples/unstructured_step.py")
    example.compile_stencils(comm)
    mesh = example.local_mesh(12, 8, comm.rank, comm.size)
    ex = gh.make_exchange(mesh.decomposition(comm), backend=backend)
    tables = NeighbourTables(mesh.offset_provider())
    to_edges = gh.halo(c=1)(tables.bind(example.interpolate_to_edges))
    to_cells = gh.halo(e=1)(tables.bind(example.average_from_edges))

    @gh.program(comm=comm, exchange=ex)
    def step(c, e, c_new, c0, c1, e0, e1):
        to_edges(c, e, e0, e1)
        to_cells(c, e, c_new, c0, c1)

    assert [(p.program, p.fields, p.dim) for p in step.exchange_report()] == [
        ("average_from_edges", ("e",), "edge")  # e written just above it: split
    ]
    bounds = (gtx.int32(0), gtx.int32(mesh.owned_cells), gtx.int32(0), gtx.int32(mesh.owned_edges))
    ours = example.run(lambda c, e, c_new: step(c, e, c_new, *bounds), mesh, CALLS)
    hand = example.run(example.make_step(mesh, comm, backend).from_python, mesh, CALLS)
    for a, b in zip(ours, hand):
        np.testing.assert_array_equal(a, b)


def test_a_field_given_twice_and_written_through_another_name(diffusion, comm) -> None:
    """``gh.auto_exchange``: a field passed for two arguments whose halos are read is
    exchanged once (was the same array twice in one exchange). A compiled step with placed
    exchanges: a field written through another name (``a = u``) is exchanged again before its
    halo is read, and an unannotated program given the scalar bounds runs (a TypeError: the
    scalars were noted written); the bits of hand-placed exchanges. One field given for two
    arguments of such a step is refused (the placement took them as distinct: wrong halos)."""
    d, ex, bounds, diffuse = torus(diffusion)
    u, v, _ = fields(diffusion, d)
    with gh.auto_exchange(ex) as placed:
        gh.halo(a=1, b=1)(_add_shifted)(u, u, v, *bounds)
    assert [p.arguments for p in placed.exchanges] == [("a",)]
    hu, hv, _ = fields(diffusion, d)
    ex.exchange(hu)
    _add_shifted(hu, hu, hv, *bounds)
    np.testing.assert_array_equal(v.asnumpy(), hv.asnumpy())
    energy = diffusion.energy  # no annotation

    @gh.program(comm=comm, exchange=ex)
    def aliased(u, v, w, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)
        a = u
        diffuse(v, a, i0, i1, j0, j1)
        energy(u, w, i0, i1, j0, j1)
        diffuse(u, w, i0, i1, j0, j1)

    u, v, w = fields(diffusion, d)
    aliased(u, v, w, *bounds)
    hu, hv, hw = fields(diffusion, d)
    ex.exchange(hu)
    diffusion.diffusion_step(hu, hv, *bounds)
    ex.exchange(hv)
    diffusion.diffusion_step(hv, hu, *bounds)
    diffusion.energy(hu, hw, *bounds)
    ex.exchange(hu)
    diffusion.diffusion_step(hu, hw, *bounds)
    for ours, theirs in zip((u, v, w), (hu, hv, hw)):
        np.testing.assert_array_equal(ours.asnumpy(), theirs.asnumpy())

    @gh.program(comm=comm, exchange=ex)
    def two_names(a, b, w, i0, i1, j0, j1):
        diffuse(w, b, i0, i1, j0, j1)  # writes b
        diffuse(a, w, i0, i1, j0, j1)  # reads a's halo, taken as not written since entry

    # one field for a and b (here through a view): refused on every rank, before it runs
    with pytest.raises(gh.FieldError, match="fields a and b share memory"):
        two_names(u, u[:, :], w, *bounds)


def test_temporaries_and_tuples_of_outputs(diffusion, comm) -> None:
    """A program that computes a temporary on a domain wider than its result reads its
    input's halo through it (taken for no halo read: stale), as far on each side as it
    reaches there; one writing a tuple of outputs reads its input's halo (taken for none).
    Inferred and placed, the temporaries' own halos not exchanged; the bits of hand-placed
    exchanges."""
    d, ex, bounds, _ = torus(diffusion)
    with pytest.raises(gh.ProgramError, match="_via_temporary: it reads u 1 cell.*declared 0"):
        gh.halo(t=1)(_via_temporary)
    with pytest.raises(gh.ProgramError, match="_tuple_out: it reads a 1 cell.*declared 0"):
        gh.halo()(_tuple_out)
    via, pair = gh.halo(u=1)(_via_temporary), gh.halo(a=1)(_tuple_out)
    flux = gh.halo(u=1)(_flux_divergence)  # (taken for 2 when the sides were one)

    def run(exchange) -> list:
        u, t, v = fields(diffusion, d)
        w = gtx.as_field([I, J], np.zeros(d.allocated_shape))
        for _ in range(CALLS):
            exchange(u)
            via(u, t, v, *bounds)
            exchange(v)
            pair(v, u, w, *bounds)
            exchange(u)
            flux(u, t, w, *bounds)
        return [f.asnumpy() for f in (u, t, v, w)]

    with gh.auto_exchange(ex) as placed:
        ours = run(lambda field: None)
    # u's halo stays valid from the flux divergence to the next turn's first call
    via_u, pair_a, flux_u = (
        (name, (a,), None)
        for name, a in (("_via_temporary", "u"), ("_tuple_out", "a"), ("_flux_divergence", "u"))
    )
    runs = [via_u] + [pair_a, flux_u] * CALLS
    assert [(p.program, p.arguments, p.dim) for p in placed.exchanges] == runs
    for a, b in zip(ours, run(ex.exchange)):
        np.testing.assert_array_equal(a, b)


def test_a_loop_over_fields_exchanges_each(diffusion, comm) -> None:
    """``for f in (u, v): diffuse(f, w, ...)``: the loop's target is another field at each
    turn, read and never written: exchanged at each (nothing was placed: stale halos); the
    bits of hand-placed exchanges."""
    d, ex, bounds, diffuse = torus(diffusion)

    @gh.program(comm=comm, exchange=ex)
    def each(u, v, w, i0, i1, j0, j1):
        for f in (u, v):
            diffuse(f, w, i0, i1, j0, j1)

    u, v, w = fields(diffusion, d)
    v = gtx.as_field([diffusion.I, diffusion.J], u.asnumpy() * 0.5)
    hu, hv, hw = (gtx.as_field([diffusion.I, diffusion.J], f.asnumpy()) for f in (u, v, w))
    for _ in range(2):
        each(u, v, w, *bounds)
        for f in (hu, hv):
            ex.exchange(f)
            diffusion.diffusion_step(f, hw, *bounds)
        for ours, theirs in zip((u, v, w), (hu, hv, hw)):
            np.testing.assert_array_equal(ours.asnumpy(), theirs.asnumpy())
    assert [p.fields for p in each.exchange_report()] == [("f",)]


@pytest.mark.timeout(300)  # a hang fails
def test_bad_arguments_on_one_rank_of_a_step_with_placed_exchanges(diffusion, comm) -> None:
    """Before a step with placed exchanges runs, the fields it takes valid at entry are
    exchanged from Python: only once every rank's arguments are checked, those fields' too
    (the ranks drifted apart where one rank's arguments were bad: one waited at the build
    meeting or raised alone, the others exchanged: a hang). A call that does not fit the
    step's signature, a read-only field, a field of another shape and the same field given
    twice, on the last rank only, at the first call and after a build: an error on every
    rank; then an agreeing call is exact."""
    d, ex, bounds, diffuse = torus(diffusion)

    @gh.program(comm=comm, exchange=ex)
    def step(u, v, w, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)
        diffuse(v, w, i0, i1, j0, j1)

    expected = fields(diffusion, d)  # exchanges by hand, from Python
    ex.exchange(expected[0])
    diffusion.diffusion_step(expected[0], expected[1], *bounds)
    ex.exchange(expected[1])
    diffusion.diffusion_step(expected[1], expected[2], *bounds)
    last = comm.rank == comm.size - 1

    def read_only(u, v, w):
        if last:
            u.ndarray.setflags(write=False)
        return step(u, v, w, *bounds)

    def other_shape(u, v, w):
        wider = np.zeros((d.allocated_shape[0] + 1, d.allocated_shape[1]))
        return step(gtx.as_field([I, J], wider) if last else u, v, w, *bounds)

    cases = [
        (
            gh.ProgramError,
            "missing a required argument",
            lambda u, v, w: step(u, v, w, *bounds[: 3 if last else 4]),
        ),
        (gh.FieldError, "read-only", read_only),
        (gh.FieldError, "share memory", lambda u, v, w: step(u, u if last else v, w, *bounds)),
        (gh.FieldError, f"rank {comm.size - 1}: ", other_shape),
    ]
    for built in (False, True):
        for error, match, call in cases if comm.size > 1 else []:
            with pytest.raises(error, match=match):
                call(*fields(diffusion, d))
        u, v, w = fields(diffusion, d)
        step(u, v, w, *bounds)
        for ours, theirs in zip((u, v, w), expected):
            np.testing.assert_array_equal(ours.asnumpy(), theirs.asnumpy())
