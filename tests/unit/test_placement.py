"""Where ``@gh.program(exchange=ex)`` places exchanges in a step's code (no build: the report
of the placement, which the step then compiles; tests/mpi/test_annotations.py runs one)."""

from __future__ import annotations

import inspect
import re

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next.ffront.experimental import as_offset
from mpi4py import MPI
from test_gt4py_translations import example

import gt4py_halo as gh
from gt4py_halo.compiled.placement import place_exchanges

DEMO = example("diffusion_2d")
I, J, FieldIJ = DEMO.I, DEMO.J, DEMO.FieldIJ


@gtx.field_operator
def cross(a: FieldIJ, b: FieldIJ) -> FieldIJ:
    return a(I + 1) + b(J - 1)


@gtx.program(backend=DEMO.run_dace_cpu)
def cross_step(
    a: FieldIJ, b: FieldIJ, out: FieldIJ, i0: gtx.int32, i1: gtx.int32, j0: gtx.int32, j1: gtx.int32
) -> None:
    """Reads two fields' halos: ``a`` east, ``b`` south."""
    cross(a, b, out=out, domain={I: (i0, i1), J: (j0, j1)})


@pytest.fixture(scope="module")
def programs():
    """The demo's programs, annotated: diffusion reads u's halo, energy none."""
    return gh.halo(u=1)(DEMO.diffusion_step), gh.halo()(DEMO.energy)


@pytest.fixture(scope="module")
def ex():
    return gh.make_exchange(gh.CartesianDecomposition((8, 6), halo=1, comm=MPI.COMM_SELF))


def placed(function, ex) -> list[tuple[str, tuple[str, ...]]]:
    step = gh.program(comm=MPI.COMM_SELF, exchange=ex)(function)
    return [(p.program, p.fields) for p in step.exchange_report()]


def test_both_branches_must_leave_a_halo_valid(programs, ex) -> None:
    diffuse, _ = programs

    def step(u, v, flag, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)  # u valid since the last call's end: nothing placed
        if flag:
            diffuse(v, u, i0, i1, j0, j1)  # v written above: placed; u written
        else:
            ex.exchange(v)
        diffuse(u, v, i0, i1, j0, j1)  # u stale after one branch: placed

    assert placed(step, ex) == [("diffusion_step", ("v",)), ("diffusion_step", ("u",))]


def test_hand_placed_split_exchanges_count_at_their_finish(programs, ex) -> None:
    diffuse, energy = programs

    def step(u, v, w, i0, i1, j0, j1):
        h = ex.start(u)
        energy(u, w, i0, i1, j0, j1)  # reads no halo
        h.finish()
        diffuse(u, v, i0, i1, j0, j1)  # valid since the finish: nothing placed

    assert placed(step, ex) == []


def test_other_writes_make_halos_stale(programs, ex) -> None:
    diffuse, _ = programs

    def step(u, v, i0, i1, j0, j1):
        ex.exchange(u)
        u[1:3, 1:3] = 0.0  # written by an assignment
        diffuse(u, v, i0, i1, j0, j1)
        ex.exchange(u)
        scale(u)  # passed to a call that is no annotated program: may write it
        diffuse(u, v, i0, i1, j0, j1)

    assert placed(step, ex) == [("diffusion_step", ("u",))] * 2


def scale(a):
    a *= 2.0


def test_an_expression_whose_halo_is_read_is_refused(programs, ex) -> None:
    diffuse, _ = programs

    def step(fields, v, i0, i1, j0, j1):
        diffuse(fields[0], v, i0, i1, j0, j1)

    with pytest.raises(gh.ProgramError, match="reads the halo of its argument u, given as an"):
        placed(step, ex)


def test_a_width_wider_than_the_halo_is_refused(programs, ex) -> None:
    wide = gh.halo(u=2)(programs[0].program)

    def step(u, v, i0, i1, j0, j1):
        wide(u, v, i0, i1, j0, j1)

    with pytest.raises(gh.ProgramError, match="reads u 2 cell.*halo is 1 wide"):
        placed(step, ex)
    diffuse = programs[0]

    def narrow(u, v, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)

    no_halo = gh.CartesianDecomposition((8, 6), halo=0, comm=MPI.COMM_SELF)
    with pytest.raises(gh.ProgramError, match="reads u 1 cell.*halo is 0 wide"):
        placed(narrow, gh.make_exchange(no_halo))


def test_an_exchange_starts_right_after_the_last_write(programs, ex) -> None:
    """Split: started after the call that wrote v, finished before the one that reads its
    halo; the energy diagnostic between overlaps the messages."""
    diffuse, energy = programs

    def step(u, v, w, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)
        energy(u, w, i0, i1, j0, j1)
        diffuse(v, u, i0, i1, j0, j1)

    made = gh.program(comm=MPI.COMM_SELF, exchange=ex)(step)
    first, second = made.exchange_report()
    assert (first.fields, first.started) == (("u",), None)
    assert second.fields == ("v",) and second.started == first.line
    assert second.line == first.line + 2


def test_exchanges_at_the_minimum(programs, ex) -> None:
    """Steps whose minimum is known: three programs of which two read the same field (one
    exchange); a field written twice before it is read (one); a field read with its halo but
    never written (none placed: checked once per field at the call); two fields one program
    reads (one exchange of both: one message per neighbour)."""
    diffuse, energy = programs
    cross = gh.halo(a=1, b=1)(cross_step)

    def two_readers(x, u, v, w, i0, i1, j0, j1):
        diffuse(x, u, i0, i1, j0, j1)
        diffuse(u, v, i0, i1, j0, j1)
        diffuse(u, w, i0, i1, j0, j1)

    def written_twice(x, u, v, i0, i1, j0, j1):
        energy(x, u, i0, i1, j0, j1)
        energy(x, u, i0, i1, j0, j1)
        diffuse(u, v, i0, i1, j0, j1)

    def never_written(x, v, i0, i1, j0, j1):
        diffuse(x, v, i0, i1, j0, j1)

    def two_fields(x, a, b, w, i0, i1, j0, j1):
        diffuse(x, a, i0, i1, j0, j1)
        diffuse(x, b, i0, i1, j0, j1)
        cross(a, b, w, i0, i1, j0, j1)

    assert placed(two_readers, ex) == [("diffusion_step", ("u",))]
    assert placed(written_twice, ex) == [("diffusion_step", ("u",))]
    assert placed(never_written, ex) == []
    assert placed(two_fields, ex) == [("cross_step", ("a", "b"))]


def test_fields_written_before_a_started_exchange_join_it(programs, ex) -> None:
    """b is written before a; a's exchange is started after a's write: b's read joins it
    (one exchange of both, started after the last write, finished before the first read)."""
    diffuse, _ = programs

    def step(x, a, b, w, w2, i0, i1, j0, j1):
        diffuse(x, b, i0, i1, j0, j1)
        diffuse(x, a, i0, i1, j0, j1)
        diffuse(a, w, i0, i1, j0, j1)
        diffuse(b, w2, i0, i1, j0, j1)

    made = gh.program(comm=MPI.COMM_SELF, exchange=ex)(step)
    (merged,) = made.exchange_report()
    assert merged.fields == ("a", "b") and merged.started == merged.line - 1


def test_returns_breaks_and_continues_are_followed(programs, ex) -> None:
    """A ``return`` leaves the step, a ``continue`` goes to the loop's next turn, a ``break``
    after the loop, each with the halos valid where it is: an exchange the code after it
    would have made is not taken for granted; a split exchange never spans a way out (its
    start would be left unfinished)."""
    diffuse, _ = programs

    def early_return(u, v, i0, i1, j0, j1, flag):
        diffuse(u, v, i0, i1, j0, j1)
        diffuse(v, u, i0, i1, j0, j1)
        if flag:
            return
        ex.exchange(u)

    def skips(u, v, i0, i1, j0, j1, n):
        for k in range(n):
            diffuse(u, v, i0, i1, j0, j1)
            diffuse(v, u, i0, i1, j0, j1)
            if k == 0:
                continue
            ex.exchange(u)

    def stops(u, v, w, i0, i1, j0, j1, n):
        for k in range(n):
            diffuse(u, v, i0, i1, j0, j1)
            diffuse(v, u, i0, i1, j0, j1)
            if k == 1:
                break
            ex.exchange(u)
        diffuse(u, w, i0, i1, j0, j1)

    def leaves_between(u, v, w, i0, i1, j0, j1, flag):
        diffuse(u, v, i0, i1, j0, j1)
        if flag:
            return
        diffuse(v, w, i0, i1, j0, j1)

    u_then_v = [("diffusion_step", ("u",)), ("diffusion_step", ("v",))]
    assert placed(early_return, ex) == u_then_v  # u stale where the step returns
    assert placed(skips, ex) == u_then_v  # u stale at the next turn after a continue
    assert placed(stops, ex) == u_then_v[::-1]  # u stale after the loop after a break
    (blocking,) = gh.program(comm=MPI.COMM_SELF, exchange=ex)(leaves_between).exchange_report()
    assert blocking.fields == ("v",) and blocking.started is None


def test_names_are_resolved_when_the_step_is_first_used(programs, ex) -> None:
    """A program the step calls may be defined after the step is made (as DaCe resolves the
    step's names at its first build)."""

    def step(u, v, w, i0, i1, j0, j1):
        later(u, v, i0, i1, j0, j1)
        later(v, w, i0, i1, j0, j1)

    made = gh.program(comm=MPI.COMM_SELF, exchange=ex)(step)
    later = programs[0]
    assert [(p.program, p.fields) for p in made.exchange_report()] == [("diffusion_step", ("v",))]


def test_positional_only_parameters_are_arguments(programs, ex) -> None:
    """``u`` before ``/`` is read and never written: assumed valid at the step's start, so
    checked at each call (exchanged from Python when new)."""
    diffuse, _ = programs

    def step(u, /, v, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)

    assert place_exchanges(step, ex).valid_at_entry == {0: None}


I, J = gtx.Dimension("I"), gtx.Dimension("J")
F = gtx.Field[gtx.Dims[I, J], gtx.float64]


@gtx.field_operator
def _sum_of_shifted(uv: tuple[F, F]) -> F:
    return uv[0](I + 1) + uv[1](J - 1)


@gtx.program
def _reads_a_tuple(uv: tuple[F, F], c: F, i0: gtx.int32, i1: gtx.int32):
    _sum_of_shifted(uv, out=c, domain={I: (i0, i1), J: (i0, i1)})


@gtx.field_operator
def _two(u: F) -> tuple[F, F]:
    return u(I + 1), u(I - 1)


@gtx.program
def _writes_a_tuple(u: F, a: F, b: F, i0: gtx.int32, i1: gtx.int32):
    _two(u, out=(a, b), domain={I: (i0, i1), J: (i0, i1)})


@gtx.program
def _writes_a_tuple_argument_then_reads_it(
    u: F, uv: tuple[F, F], c: F, i0: gtx.int32, i1: gtx.int32
):
    _two(u, out=uv, domain={I: (i0, i1), J: (i0, i1)})
    _sum_of_shifted(uv, out=c, domain={I: (i0, i1), J: (i0, i1)})  # reads uv beyond it


@gtx.program
def _writes_a_slice(u: F, a: F):
    cross(u, u, out=a[1:-1, 2:])


def test_tuple_arguments_and_outputs() -> None:
    """A tuple argument's halo read is seen (it was taken for none: never exchanged); a
    program writing a tuple of outputs is annotated (GT4Py's AssertionError escaped), its
    reads inferred (they were not: a narrower width was taken), and so are those of a
    program writing a slice of its output (``out=a[1:-1, 2:]``)."""
    with pytest.raises(gh.ProgramError, match="reads uv 1 cell.*declared 0"):
        gh.halo()(_reads_a_tuple)
    assert gh.halo(uv=1)(_reads_a_tuple).widths == {"uv": 1}
    assert gh.halo(u=1)(_writes_a_tuple).writes == {"a", "b"}
    with pytest.raises(gh.ProgramError, match="_writes_a_tuple: it reads u 1 cell.*declared 0"):
        gh.halo()(_writes_a_tuple)
    with pytest.raises(gh.ProgramError, match="_writes_a_slice: it reads u 1 cell.*declared 0"):
        gh.halo()(_writes_a_slice)
    assert gh.halo(u=1)(_writes_a_slice).writes == {"a"}
    # a tuple argument written as a whole (``out=uv``), then read (taken for no write: its
    # halo exchanged before the program, then read as if computed there)
    with pytest.raises(gh.ProgramError, match="writes uv and a later call reads it"):
        gh.halo(u=1, uv=1)(_writes_a_tuple_argument_then_reads_it)


@gtx.field_operator
def _copy(u: F) -> F:
    return u


@gtx.field_operator
def _south(u: F) -> F:
    return u(J - 1)


@gtx.program
def _temporary_too_narrow(u: F, t: F, v: F, i0: gtx.int32, i1: gtx.int32):
    _copy(u, out=t, domain={I: (i0, i1), J: (i0, i1)})
    cross(t, t, out=v, domain={I: (i0, i1), J: (i0, i1)})


@gtx.program
def _temporary_wide_on_the_wrong_axis(u: F, t: F, v: F, i0: gtx.int32, i1: gtx.int32):
    _copy(u, out=t, domain={I: (i0 - 1, i1 + 1), J: (i0, i1)})
    _south(t, out=v, domain={I: (i0, i1), J: (i0, i1)})


@gtx.program
def _temporary_wide_enough(u: F, t: F, v: F, i0: gtx.int32, i1: gtx.int32):
    _copy(u, out=t, domain={I: (i0, i1), J: (i0 - 1, i1)})
    _south(t, out=v, domain={I: (i0, i1), J: (i0, i1)})
    _copy(v, out=t, domain={I: (i0, i1), J: (i0, i1)})  # (t written again, read by none)


@gtx.program
def _temporary_on_its_whole_field(u: F, t: F, v: F, i0: gtx.int32, i1: gtx.int32):
    _copy(u, out=t)
    cross(t, t, out=v, domain={I: (i0, i1), J: (i0, i1)})


@gtx.program
def _temporary_wide_on_the_wrong_side(u: F, t: F, v: F, i0: gtx.int32, i1: gtx.int32):
    _copy(u, out=t, domain={I: (i0, i1), J: (i0, i1 + 1)})
    _south(t, out=v, domain={I: (i0, i1), J: (i0, i1)})


@gtx.program
def _temporary_shifted(u: F, t: F, v: F, i0: gtx.int32, i1: gtx.int32):
    _south(u, out=t, domain={I: (i0, i1), J: (i0 - 1, i1 - 1)})  # t[j - 1] = u[j - 2]
    cross(u, t, out=v, domain={I: (i0, i1), J: (i0, i1)})  # u[i + 1] + u[j - 2]


@gtx.program
def _temporary_read_then_narrower_result(u: F, t: F, v: F, w: F, i0: gtx.int32, i1: gtx.int32):
    _copy(u, out=t, domain={I: (i0, i1), J: (i0, i1)})
    cross(t, t, out=v, domain={I: (i0, i1), J: (i0, i1)})  # reads t[i1], never written
    _copy(v, out=w, domain={I: (i0 + 1, i1 - 1), J: (i0, i1)})


@gtx.program
def _whole_temporary_written_again(u: F, t: F, v: F, w: F, i0: gtx.int32, i1: gtx.int32):
    _copy(u, out=t)
    cross(t, t, out=v, domain={I: (i0, i1), J: (i0, i1)})  # u's halo, through t
    _copy(w, out=t)


@gtx.program
def _temporary_of_a_slice(u: F, t: F, v: F):
    _copy(u, out=t[:, 1:])
    _south(t, out=v[:, 1:])  # reads t[:, 0], never written


Ioff = gtx.FieldOffset("Ioff", source=I, target=(I,))
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
FK = gtx.Field[gtx.Dims[I, J, K], gtx.float64]


@gtx.field_operator
def _east_by_name(u: F) -> F:
    return u(Ioff[1])


@gtx.program
def _named_offset(u: F, v: F, i0: gtx.int32, i1: gtx.int32):
    _east_by_name(u, out=v, domain={I: (i0, i1), J: (i0, i1)})


@gtx.program
def _reordered_bounds(u: F, v: F, i0: gtx.int32, n: gtx.int32):
    _east_by_name(u, out=v, domain={I: (i0, 2 * n - 1), J: (i0, n)})  # GT4Py reads n * 2


@gtx.field_operator
def _up(x: FK) -> FK:
    return x(K + 1) - x


@gtx.program
def _vertical(x: FK, y: FK, i0: gtx.int32, i1: gtx.int32, k0: gtx.int32, k1: gtx.int32):
    _up(x, out=y, domain={I: (i0, i1), J: (i0, i1), K: (k0, k1)})


@gtx.field_operator
def _east_by(u: F, o: gtx.Field[gtx.Dims[I, J], gtx.int32]) -> F:
    return u(as_offset(Ioff, o))


@gtx.program
def _temporary_at_a_dynamic_offset(
    u: F, t: F, v: F, o: gtx.Field[gtx.Dims[I, J], gtx.int32], i0: gtx.int32, i1: gtx.int32
):
    _copy(u, out=t, domain={I: (i0, i1), J: (i0, i1)})
    _east_by(t, o, out=v, domain={I: (i0, i1), J: (i0, i1)})


def test_widths_through_named_vertical_and_dynamic_offsets() -> None:
    """A named cartesian offset (``u(Ioff[1])``) is read as its dim (GT4Py's inference failed
    on it: taken for no read), bounds GT4Py writes in another order (``2 * n`` and
    ``n * 2``) are compared (taken for no read), an offset along a vertical dim reads no
    halo (not decomposed: it asked for an exchange, or a halo the decomposition has not),
    and a temporary read at a dynamic offset is refused (taken for no read; a review's
    finds)."""
    with pytest.raises(gh.ProgramError, match="_named_offset: it reads u 1 cell.*declared 0"):
        gh.halo()(_named_offset)
    with pytest.raises(gh.ProgramError, match="_reordered_bounds: it reads u 1 cell"):
        gh.halo()(_reordered_bounds)
    assert gh.halo()(_vertical).widths == {}
    with pytest.raises(gh.ProgramError, match="writes t and a later call reads it where GT4Py"):
        gh.halo(u=1, t=1)(_temporary_at_a_dynamic_offset)


def test_temporaries_of_a_program() -> None:
    """A program that writes an argument and reads it in a later call beyond what it wrote
    is refused whatever the widths (no exchange before the program makes those cells
    valid: it was taken for a halo to exchange, and the halo read stale), and so is one
    where GT4Py cannot tell how far it was written; one computed on a domain as wide as it
    is read needs no halo of its own, but its inputs' halo as far as that domain reaches,
    side by side (it was taken for none); one written on its whole field counts as written
    as far as it is read."""
    with pytest.raises(gh.ProgramError, match="writes t and a later call reads it 1 cell"):
        gh.halo(u=1, t=1)(_temporary_too_narrow)
    with pytest.raises(gh.ProgramError, match="writes t and a later call reads it 1 cell"):
        gh.halo(u=1, t=1)(_temporary_wide_on_the_wrong_axis)
    with pytest.raises(gh.ProgramError, match="reads u 1 cell.*declared 0"):
        gh.halo(t=1)(_temporary_wide_enough)
    assert gh.halo(u=1)(_temporary_wide_enough).writes == {"t", "v"}
    with pytest.raises(gh.ProgramError, match="reads u 1 cell.*declared 0"):
        gh.halo()(_temporary_on_its_whole_field)
    # the side each reach is on counts (the two sides were one)
    with pytest.raises(gh.ProgramError, match="writes t and a later call reads it 1 cell"):
        gh.halo(u=1, t=1)(_temporary_wide_on_the_wrong_side)
    with pytest.raises(gh.ProgramError, match="reads u 2 cell.*declared 1"):
        gh.halo(u=1)(_temporary_shifted)
    assert gh.halo(u=2)(_temporary_shifted).widths == {"u": 2}
    # each call counts from its own domain: one writing less than an earlier one does not
    # hide the temporary's cells that no call wrote, nor a whole field written again the
    # reads through the first (a review's finds)
    with pytest.raises(gh.ProgramError, match="writes t and a later call reads it 1 cell"):
        gh.halo(u=1, t=1)(_temporary_read_then_narrower_result)
    with pytest.raises(gh.ProgramError, match="reads u 1 cell.*declared 0"):
        gh.halo()(_whole_temporary_written_again)
    # where GT4Py cannot compare what was written with what is read: refused
    with pytest.raises(
        gh.ProgramError, match="writes t and a later call reads it where GT4Py cannot tell"
    ):
        gh.halo(u=1, t=1)(_temporary_of_a_slice)


def test_writes_through_another_name_and_helpers(programs, ex) -> None:
    """A field written through another name (``a = u``) is stale under both names; a Python
    helper that calls annotated programs is refused (placement follows the step's own code:
    its halos were read stale)."""
    diffuse, _ = programs

    def aliased(u, v, w, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)
        a = u
        diffuse(v, a, i0, i1, j0, j1)
        diffuse(u, w, i0, i1, j0, j1)

    assert placed(aliased, ex)[-1] == ("diffusion_step", ("u",))

    def helper(v, w, i0, i1, j0, j1):
        diffuse(v, w, i0, i1, j0, j1)

    def calls_a_helper(u, v, w, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)
        helper(v, w, i0, i1, j0, j1)

    with pytest.raises(gh.ProgramError, match="helper calls programs with halo annotations"):
        placed(calls_a_helper, ex)


def test_dace_errors_name_the_lines_of_the_step_as_written(programs, ex) -> None:
    """DaCe parses the step as ``exchange=`` rewrote it (exchanges inserted, the code unparsed
    without its comments): its errors name the file and lines of the step as written, as
    for the same step without placement."""
    diffuse, _ = programs

    def opens(u, v, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)
        # an exchange of v is placed here: the rewritten lines below move
        diffuse(v, u, i0, i1, j0, j1)
        with open("x"):  # here
            pass

    def raises(u, v, i0, i1, j0, j1):
        diffuse(u, v, i0, i1, j0, j1)
        diffuse(v, u, i0, i1, j0, j1)
        if i0 > 3:
            raise ValueError("no")  # here

    fields = [gtx.as_field([I, J], np.zeros((10, 8))) for _ in range(2)]
    bounds = [np.int32(b) for b in (1, 9, 1, 7)]
    for function, shown in ((opens, "{file}:{line} "), (raises, "at line {line} ")):
        lines, first = inspect.getsourcelines(function)
        line = first + next(n for n, text in enumerate(lines) if text.endswith("# here\n"))
        expected = shown.format(file=function.__code__.co_filename, line=line)
        for exchange in (None, ex):
            step = gh.program(comm=MPI.COMM_SELF, exchange=exchange)(function)
            with pytest.raises(gh.ProgramError, match=re.escape(expected)):
                step(*fields, *bounds)
