"""Halo annotations on GT4Py programs, and exchanges placed from them: ``gh.halo``,
``gh.auto_exchange``.

``@gh.halo(u=1, v=2)`` on a ``@gtx.program`` says how wide a halo of which argument it reads,
where the program is defined, independent of any decomposition. What the program writes comes
from the program itself: the ``out=`` arguments of its field operator calls. The widths it
reads are inferred too: for cartesian programs by GT4Py's domain inference (each argument's
accessed domain against the domain written, in cells), for unstructured ones by GT4Py's shift
tracing (the neighbour tables between an argument and the output: 1 is the neighbours of the
entries written); in a program of several calls each call counts from its own domain,
through the temporaries earlier calls computed for it (``read_reaches``). A declared width
smaller than that is a ``gh.ProgramError`` at decoration, never a silent stale halo, and so
is a call reading beyond what an earlier call of the program wrote, or where GT4Py cannot
tell how far that wrote (no exchange before the program can make those cells valid); where
GT4Py cannot tell what a call reads of an argument (dynamic offsets, ``concat_where``,
bounds that are no literal offsets of the call's domain, stencils it cannot trace), the
declared width is taken as it is. Offsets along vertical dims need no declared width
(vertical dims are taken for never decomposed: where a decomposition splits one or gives it a
halo, such a read is a ``gh.ProgramError`` at the call unless a width is declared, which
exchanges it). An unstructured argument's dim is the dim of the decomposition that its type
in the program's signature has (by name, in any case: GT4Py's ``Cell`` is the dim ``cell``).

Inside ``with gh.auto_exchange(ex) as placed:`` calls of annotated programs exchange lazily:
each field's halo is valid after an exchange and stale once a program writes it (a field seen
for the first time counts as stale); a call that reads a field's halo while it is stale first
exchanges all such fields of the call in one exchange (one message per neighbour and dim), and
a field whose halo is still valid is not exchanged again. ``placed`` records each exchange
(``placed.exchanges``: the program, the arguments exchanged, the dim). A read further into the
halo than the decomposition's halo on some side of an axis is a ``gh.ProgramError`` at that
call, before anything is posted: how far, on each side, GT4Py's inference tells (the axes of
a cartesian decomposition are the dims of the argument's type, in order: a stencil reading
``I +- 2`` and ``J +- 1`` takes ``halo=(2, 1)``), else, or where the declared width is wider
than every side inferred, the declared width on every side. Fields
are tracked by identity, without keeping them alive.

In ``@gh.program(exchange=ex)`` steps the same rules place exchanges in the step's code
(``compiled/placement.py``); in other steps an annotated program is the program itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from gt4py_halo.errors import ProgramError

#: The auto-exchange in effect (``auto_exchange``), or None.
_active: Tracker | None = None


def halo(**widths: int) -> Callable[[Any], Annotated]:
    """``@gh.halo(u=1, v=2)`` above ``@gtx.program``: the program reads ``u``'s halo up to 1
    cell and ``v``'s up to 2 (on its widest side; for unstructured dims, ``> 0`` needs the
    dim's halo)."""
    for name, width in widths.items():
        if not isinstance(width, int) or isinstance(width, bool) or width < 0:
            raise ProgramError(f"gh.halo: width of {name!r} must be an int >= 0, got {width!r}")

    def annotate(program: Any) -> Annotated:
        return Annotated(program, widths)

    return annotate


class Annotated:
    """A GT4Py program with the halo widths it reads and the arguments it writes; called
    as the program, exchanging first inside ``gh.auto_exchange``."""

    def __init__(self, program: Any, widths: dict[str, int]) -> None:
        # a GT4Py program, or one bound to neighbour tables (``NeighbourTables.bind``)
        gt4py_program = getattr(program, "gt4py_program", program)
        past = getattr(getattr(gt4py_program, "past_stage", None), "past_node", None)
        if past is None:
            raise ProgramError(f"gh.halo annotates GT4Py programs (@gtx.program), not {program!r}")
        self.program = program
        self.name = str(past.id)
        self.params = [str(p.id) for p in past.params]
        #: The dims of each field argument (or tuple of fields of the same dims), by the
        #: program's signature, and which of all those are vertical.
        dims = {str(p.id): _type_dims(getattr(p, "type", None)) for p in past.params}
        self.param_dims = {n: tuple(d.value for d in ds) for n, ds in dims.items() if ds}
        self.vertical = frozenset(
            d.value for ds in dims.values() for d in ds or () if d.kind.value == "vertical"
        )
        unknown = sorted(set(widths) - set(self.params))
        if unknown:
            raise ProgramError(f"gh.halo on {self.name}: no argument named {', '.join(unknown)}")
        self.widths = dict(widths)
        #: The arguments the program writes (its ``out=``).
        self.writes = frozenset(_written(past))
        #: How far beyond the domain it writes the program reads each argument, per side of
        #: each dim (``read_reaches``); arguments GT4Py cannot tell left out.
        self.reaches = read_reaches(self.name, _calls(gt4py_program))
        for name in self.reaches:
            if self.widths.get(name, 0) < (read := self.horizontal_reach(name)):
                raise ProgramError(
                    f"gh.halo on {self.name}: it reads {name} {read} cell(s) (or neighbour "
                    f"tables) beyond the domain it writes, declared {self.widths.get(name, 0)}: "
                    f"@gh.halo({name}={read}, ...)"
                )

    def horizontal_reach(self, name: str) -> int:
        """How far the program reads argument ``name`` on its widest horizontal side, as
        GT4Py infers it (0 where it cannot tell)."""
        reach = self.reaches.get(name, {})
        return max([0, *(cells for side, cells in reach.items() if side[:-1] not in self.vertical)])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bound = dict(zip(self.params, args)) | kwargs
        if _active is not None:
            _active.before(self, bound)
        result = self.program(*args, **kwargs)
        for name in self.writes & bound.keys():
            note_written(bound[name])
        return result

    def __getattr__(self, name: str) -> Any:  # the program's own interface, DaCe's included
        return getattr(self.program, name)

    def __gt4py_halo_key__(self) -> str | None:
        """In a step, the program alone (``compiled/step_cache.py``): widths only place."""
        from gt4py_halo.compiled.step_cache import value_key

        return value_key(self.program)

    def __repr__(self) -> str:
        return f"gh.halo({self.widths})({self.name})"


@dataclasses.dataclass(frozen=True)
class Placed:
    """One exchange placed before a call: the program, the arguments exchanged, the dim."""

    program: str
    arguments: tuple[str, ...]
    dim: str | None


#: How often the memory of each array that owns its memory was written by code that tells
#: (``note_written``), by the owner's id: a weak reference to the owner and the count.
_writes: dict[int, tuple[weakref.ref, int]] = {}


def note_written(field: Any) -> None:
    """``field`` was written: every ``HaloValidity`` that holds its halo valid drops it, and
    every other view of its memory (a write through ``u[:, :]`` writes ``u``). Called by
    annotated programs (what they write) and steps with placed exchanges (what a call leaves
    stale)."""
    array = _owner(_buffer(field))
    key = id(array)
    ref, count = _writes.get(key, (None, 0))
    if ref is None or ref() is not array:
        ref, count = weakref.ref(array, lambda _, key=key: _writes.pop(key, None)), 0
    _writes[key] = (ref, count + 1)


class HaloValidity:
    """Fields whose halos are valid, by identity (GT4Py fields by their buffers, as compiled
    steps get them), held weakly: a field is valid from ``remember`` until a write that
    ``note_written`` hears of, by any annotated program or step with placed exchanges of the
    process. Writes it cannot hear of (NumPy from Python, programs without
    ``gh.halo``, steps without ``exchange=``) must be followed by an exchange of the field
    where its halo is read later (``docs/guide.md``)."""

    def __init__(self) -> None:
        self._valid: dict[int, tuple[weakref.ref, int]] = {}  # id -> (reference, writes)

    def __contains__(self, field: Any) -> bool:
        array = _buffer(field)
        entry = self._valid.get(id(array))
        return entry is not None and entry[0]() is array and entry[1] == _writes_of(array)

    def remember(self, field: Any) -> None:
        array = _buffer(field)
        key, writes = id(array), _writes_of(array)
        entry = self._valid.get(key)
        if entry is None or entry[0]() is not array:  # a model passes the same fields
            ref = weakref.ref(array, lambda _, key=key: self._valid.pop(key, None))
            self._valid[key] = (ref, writes)
        elif entry[1] != writes:
            self._valid[key] = (entry[0], writes)


def _buffer(field: Any) -> Any:
    ndarray = getattr(field, "ndarray", None)
    return ndarray if ndarray is not None else field


def _owner(array: Any) -> Any:
    """The array that owns the memory ``array`` views (itself if it owns it): NumPy's and
    CuPy's views name it as their ``base`` (a view of a subclass too). Writes are counted
    per owner: a write through any view makes every array over that memory stale, those
    that share no element with it too (an exchange more, never a halo taken as valid)."""
    while isinstance(base := getattr(array, "base", None), (np.ndarray, type(array))):
        array = base
    return array


def _writes_of(array: Any) -> int:
    """How often the memory of ``array`` was written (``note_written``)."""
    array = _owner(array)
    entry = _writes.get(id(array))
    return entry[1] if entry is not None and entry[0]() is array else 0


class Tracker:
    """Which fields' halos are valid; exchanges what a call needs and is stale."""

    def __init__(self, exchange: Any) -> None:
        self._exchange = exchange
        self._decomposition = exchange.decomposition
        self._valid = HaloValidity()
        #: The (program, argument) pairs checked against the decomposition: once each.
        self._checked: set[tuple[Annotated, str]] = set()
        #: The exchanges placed, in order.
        self.exchanges: list[Placed] = []

    def before(self, program: Annotated, bound: dict[str, Any]) -> None:
        for name in (program.widths.keys() | program.reaches.keys()) & bound.keys():
            if (program, name) not in self._checked:
                cartesian_width_check(self._decomposition, program, name)
                self._checked.add((program, name))
        stale: dict[str | None, list[tuple[str, Any]]] = {}
        for name, width in program.widths.items():
            field = bound.get(name)
            if width == 0 or field is None:
                continue
            dim = dim_of_param(self._decomposition, program, name)
            known = stale.get(dim, [])
            for part in field if isinstance(field, (tuple, list)) else (field,):  # (a tuple arg)
                if part not in self._valid and all(
                    _buffer(f) is not _buffer(part) for _, f in known
                ):
                    known.append((name, part))  # (a field passed twice: exchanged once)
            if known:
                stale[dim] = known
        for dim, fields in stale.items():
            self._exchange.exchange(*(f for _, f in fields), dim=dim)
            self.exchanges.append(Placed(program.name, tuple(n for n, _ in fields), dim))
            for _, field in fields:
                self._valid.remember(field)


def cartesian_width_check(decomposition: Any, program: Annotated, name: str) -> None:
    """A ``ProgramError`` if ``program`` reads argument ``name`` further into its halo than a
    cartesian decomposition's halo reaches, on some side of an axis with a halo or split over
    ranks (a program reading across an axis split without a halo reads cells no exchange
    fills; an axis neither split nor with a halo is nobody's to exchange, unless no axis has
    one: a decomposition without a halo has none to read), or reads along a
    vertical dim across such an axis with no width declared (vertical reads need none, as
    vertical dims are taken for never decomposed: no exchange would fill that halo). How far
    it reads on each side: the reach GT4Py inferred for the dim of the argument's type that
    the axis is (``Annotated.reaches``), else, and on horizontal dims where the declared
    width is wider than every horizontal side inferred (the author knows of a read GT4Py
    does not see), the declared width."""
    if getattr(decomposition, "dims", None) is not None:
        return  # unstructured: a width above 0 needs the dim's halo, whatever it holds
    width, reach = program.widths.get(name, 0), program.reaches.get(name)
    widest = program.horizontal_reach(name)
    declared = reach is None or width > widest
    dims = program.param_dims.get(name, ())
    axes = list(enumerate(zip(decomposition.halo, decomposition.proc_grid)))
    if max(width, widest) > 0 and not any(any(s) or blocks > 1 for _, (s, blocks) in axes):
        raise ProgramError(  # (a single block without any halo)
            f"{program.name} reads {name} {max(width, widest)} cell(s) into its halo; the "
            "decomposition's halo is 0 wide"
        )
    for axis, (sides, blocks) in axes:
        if not (any(sides) or blocks > 1):
            continue
        dim = dims[axis] if axis < len(dims) else None
        vertical = dim in program.vertical
        for side, have in zip("-+", sides):
            if reach is None or dim is None or (declared and not vertical):
                wants = width
            else:
                wants = reach.get(dim + side, 0)
            where = f"axis {axis}, {'lower' if side == '-' else 'upper'} side"
            if wants > have:
                raise ProgramError(
                    f"{program.name} reads {name} {wants} cell(s) into its halo; the "
                    f"decomposition's halo is {have} wide ({where})"
                )
            if vertical and wants and not width:
                raise ProgramError(
                    f"{program.name} reads {name} {wants} cell(s) along {dim}, a vertical dim, "
                    f"into the decomposition's halo ({where}), with no width declared: "
                    f"@gh.halo({name}=...) so that it is exchanged"
                )


def _type_dims(type_: Any) -> tuple[Any, ...] | None:
    """The dims of a field type, or of a tuple type whose fields all have the same; None
    for any other type."""
    if hasattr(type_, "dims"):
        return tuple(type_.dims)
    parts = [_type_dims(t) for t in getattr(type_, "types", ())]
    return parts[0] if parts and parts[0] and all(p == parts[0] for p in parts) else None


def dim_of_param(decomposition: Any, program: Annotated, name: str) -> str | None:
    """The decomposition's dim that argument ``name`` of ``program`` is exchanged along:
    None for a cartesian decomposition; else the one dim of the argument's type (by name, in
    any case: GT4Py's ``Cell`` is the dim ``cell``) that the decomposition has."""
    dims = getattr(decomposition, "dims", None)
    if dims is None:
        return None
    named = {dim.lower(): dim for dim in dims}
    found = [named[d.lower()] for d in program.param_dims.get(name, ()) if d.lower() in named]
    if len(found) != 1:
        raise ProgramError(
            f"{program.name}: argument {name} has no (or more than one) dim of the "
            f"decomposition ({', '.join(dims)}) to exchange"
        )
    return found[0]


@contextlib.contextmanager
def auto_exchange(exchange: Any) -> Iterator[Tracker]:
    """``with gh.auto_exchange(ex) as placed:`` — calls of ``gh.halo`` programs exchange
    their stale halos with ``ex`` first; ``placed.exchanges`` lists what was placed. Every
    rank must make the same calls (the exchanges are collective)."""
    global _active
    if _active is not None:
        raise ProgramError("gh.auto_exchange is on already (they do not nest)")
    _active = Tracker(exchange)
    try:
        yield _active
    finally:
        _active = None


def _written(past: Any) -> set[str]:
    """The program's arguments its field operator calls write (``out=``)."""
    written: set[str] = set()
    for statement in past.body:
        out = getattr(statement, "kwargs", {}).get("out")
        stack = [out] if out is not None else []
        while stack:
            node = stack.pop()
            if hasattr(node, "elts"):  # a tuple of outputs
                stack.extend(node.elts)
            elif hasattr(node, "id"):
                written.add(str(node.id))
            elif hasattr(node, "value"):  # a slice of an output: out=v[1:-1]
                stack.append(node.value)
    return written


#: How far beyond a domain, per side of an axis (cartesian: the dim's name with ``-`` or
#: ``+``, in cells, less than 0 where short of it) or in neighbour tables (unstructured: the
#: key ``""``); a side not named is 0.
Reach = dict[str, int]


@dataclasses.dataclass(frozen=True)
class _Call:
    """One call of a program, as GT4Py lowers it: the arguments it writes (per output, None
    for one that is no argument), those it writes on their whole field, the domains it
    writes (per output, as ``SymbolicDomain``s; None where GT4Py cannot read them), its
    expression, whether it is cartesian, and the program's offsets: the cartesian ones by
    name with their dim (GT4Py's domain inference takes them), the names of neighbour
    tables."""

    writes: tuple[str | None, ...]
    whole: frozenset[str]
    domains: tuple[Any, ...] | None
    shape: Any  # the tuple shape of its outputs: a template for GT4Py's domain inference
    expr: Any
    cartesian: bool
    offsets: dict[str, Any]
    tables: frozenset[str] | None  # None: the program's offsets unknown, every one a table


def read_reaches(name: str, calls: list[_Call]) -> dict[str, Reach]:
    """Per argument the program (named ``name``) reads before writing it, how far beyond the
    domain of a call it is read, per side of each dim: each call counts from its own domain,
    through the temporaries earlier calls computed for it (a temporary on an extended domain
    reads its inputs further by as much). Cartesian programs by GT4Py's
    domain inference (cells), unstructured ones by the neighbour tables GT4Py's shift tracing
    finds between an argument and the output (1: the neighbours of the entries written).
    Arguments neither tells are left out (their declared width stands).

    A ``ProgramError`` where a call reads an argument that an earlier call writes beyond what
    that one wrote, or where GT4Py cannot tell how far it wrote or what the later call reads
    of it (domains that differ by more than literal offsets, neighbour tables, dynamic
    offsets), unless it wrote the argument's whole field: no exchange before the program
    makes those cells valid."""
    reaches: dict[str, Reach] = {}
    for k, call in enumerate(calls):
        frames = call.domains
        pending = [(k, _target(call, None), 0)]  # (a call, the domain read of it, tables)
        seen: set[tuple] = set()  # (the same read reached along two paths: followed once)
        while pending:
            at, target, tables = pending.pop()
            if (key := (at, repr(target), tables)) in seen:
                continue
            seen.add(key)
            reads = _reads(calls[at], target, tables)
            if reads is None:  # GT4Py cannot tell what the call reads
                reads = {n: None for n in _symbols(calls[at].expr)} if at == k else {}
            for symbol, read in reads.items():
                writer = next((j for j in reversed(range(at)) if symbol in calls[j].writes), None)
                if writer is None:  # an argument as the program got it: its halo
                    reach = None if read is None else _reach_from(frames, read)
                    if reach is not None:
                        known = reaches.setdefault(symbol, {})
                        for side, cells in reach.items():
                            known[side] = max(known.get(side, 0), cells)
                    continue
                if at == k:  # (each call's own reads: the earlier writes checked once)
                    _check_written(name, calls[writer], symbol, read, calls[at])
                if isinstance(read, int):
                    pending.append((writer, None, read))
                elif read is not None:
                    pending.append((writer, _target(calls[writer], read), 0))
    return reaches


def _target(call: _Call, read: Any) -> Any:
    """What GT4Py's domain inference takes for ``call`` read at ``read`` (its own domains
    where None), in the shape of its outputs; None where it cannot be inferred."""
    if not call.cartesian or call.domains is None:
        return None
    each = iter(call.domains)

    def shaped(shape: Any) -> Any:
        if isinstance(shape, tuple):
            return tuple(shaped(part) for part in shape)
        own = next(each)
        return own if read is None else read

    return shaped(call.shape)


def _reads(call: _Call, target: Any, tables: int) -> dict[str, Any] | None:
    """What ``call`` reads of each symbol when read at ``target``: the domain (cartesian;
    None where GT4Py cannot tell it, as for a dynamic offset), or the neighbour tables on
    the way plus ``tables`` (unstructured); symbols never read left out. None where GT4Py
    cannot tell what the call reads at all."""
    if not call.cartesian:
        try:
            hops = _neighbour_hops(call.expr, 0, call.tables)
        except Exception:  # noqa: BLE001 - one GT4Py cannot trace
            return None
        return {n: h + tables for n, h in hops.items()}
    if target is None:
        return None
    from gt4py.next.iterator.transforms import infer_domain

    provider = {d.value: d for d in call.domains[0].ranges}  # cartesian offsets: the dims
    try:
        expr = _cartesian_offsets(call.expr, call.offsets)
        _, accessed = infer_domain.infer_expr(expr, target, offset_provider=provider)
    except Exception:  # noqa: BLE001 - one GT4Py cannot infer (concat_where, ...)
        return None
    return {str(n): None if d == "unknown" else d for n, d in accessed.items() if d != "never"}


def _cartesian_offsets(expr: Any, offsets: dict[str, Any]) -> Any:
    """``expr`` with its shifts by named cartesian offsets (``Ioff = FieldOffset("Ioff",
    source=I, target=(I,))``, ``u(Ioff[1])``) as shifts along their dim (``u(I + 1)``), which
    GT4Py's domain inference takes without an offset provider."""
    if not offsets:
        return expr
    from gt4py import eve
    from gt4py.next.iterator import ir as itir
    from gt4py.next.iterator.ir_utils import ir_makers as im

    class Named(eve.NodeTranslator):
        def visit_OffsetLiteral(self, node: Any) -> Any:
            dim = offsets.get(node.value) if isinstance(node.value, str) else None
            if dim is None:
                return node
            return itir.CartesianOffset(domain=im.axis_literal(dim), codomain=im.axis_literal(dim))

    return Named().visit(expr)


def _symbols(expr: Any) -> set[str]:
    """The names ``expr`` refers to (arguments among them)."""
    from gt4py.next.iterator import ir as itir

    return {str(node.id) for node in expr.pre_walk_values().if_isinstance(itir.SymRef)}


def _reach_from(frames: tuple[Any, ...] | None, read: Any) -> Reach | None:
    """How far ``read`` (a domain, or neighbour tables) reaches beyond the domains
    ``frames``, per side of each dim where it does; None where GT4Py cannot tell."""
    if isinstance(read, int):
        return {"": read}
    if frames is None:
        return None
    reaches = [_reach(frame, read) for frame in frames]
    if None in reaches:
        return None
    sides: Reach = {}
    for reach in reaches:
        for side, cells in reach.items():
            if cells > 0:
                sides[side] = max(sides.get(side, 0), cells)
    return sides


def _check_written(program: str, writer: _Call, name: str, read: Any, reader: _Call) -> None:
    """A ``ProgramError`` unless ``writer`` surely wrote the cells of ``name`` that a later
    call of the program reads (``read``: a domain, neighbour tables, or None: GT4Py cannot
    tell)."""
    if name in writer.whole:
        return
    if read is None or isinstance(read, tuple):  # (a tuple argument is followed no further)
        short = None
    elif isinstance(read, int):  # unstructured: the entries read are the neighbours of others
        if read == 0:
            return
        short = read if writer.domains is not None and writer.domains == reader.domains else None
    else:
        own = None if writer.domains is None else writer.domains[writer.writes.index(name)]
        reach = _reach(own, read)
        short = None if reach is None else max([0, *reach.values()])
        if short == 0:
            return
    how = (
        f"{short} cell(s) (or neighbour tables) beyond what the earlier call wrote"
        if short is not None
        else "where GT4Py cannot tell that the earlier call wrote it (domains that differ by "
        "more than literal offsets, neighbour tables, dynamic offsets, tuples)"
    )
    raise ProgramError(
        f"gh.halo on {program}: a call writes {name} and a later call reads it {how}: no "
        "exchange before the program can make those cells valid. Split the program there, so "
        f"that an exchange can go between the two calls, or write {name} on a domain as wide "
        "as it is read, or on its whole field"
    )


def _calls(program: Any) -> list[_Call]:
    """The program's calls in order (``_Call``); none where GT4Py cannot lower it without
    arguments."""
    import gt4py.next as gtx
    from gt4py.next import common
    from gt4py.next.iterator.ir_utils import common_pattern_matcher as cpm
    from gt4py.next.iterator.ir_utils import domain_utils
    from gt4py.next.iterator.transforms import inline_fundefs, inline_lambdas

    try:
        gtir = program.gtir
    except Exception:  # noqa: BLE001 - GT4Py cannot lower it without arguments: nothing told
        return []
    gtir = inline_fundefs.prune_unreferenced_fundefs(inline_fundefs.InlineFundefs().visit(gtir))
    gtir = inline_lambdas.InlineLambdas.apply(gtir, opcount_preserving=True)
    try:
        known = program._all_closure_vars.items()
    except Exception:  # noqa: BLE001 - (no GT4Py program of ours: its offsets unknown)
        known = None
    # by the offsets' own names, which GT4Py's IR uses (not the Python names they are bound to)
    fields = [o for _, o in known or () if isinstance(o, gtx.FieldOffset)]
    offsets = {o.value: o.source for o in fields if tuple(o.target) == (o.source,)}
    tables = None if known is None else frozenset(o.value for o in fields if len(o.target) == 2)

    def flat(expr: Any) -> list[Any]:  # the elements of a tuple of outputs, or of domains
        if cpm.is_call_to(expr, "make_tuple"):
            return [e for part in expr.args for e in flat(part)]
        return [expr]

    def shape(expr: Any) -> Any:  # the tuple shape of the outputs
        if cpm.is_call_to(expr, "make_tuple"):
            return tuple(shape(part) for part in expr.args)
        return None

    def written(target: Any) -> str | None:  # an argument, or an element of a tuple one
        if cpm.is_call_to(target, "tuple_get"):
            return written(target.args[1])
        return str(target.id) if hasattr(target, "id") else None

    calls: list[_Call] = []
    for statement in gtir.body:
        domain = getattr(statement, "domain", None)
        if domain is None:
            continue
        writes = tuple(written(t) for t in flat(statement.target))
        try:
            domains = tuple(domain_utils.SymbolicDomain.from_expr(d) for d in flat(domain))
        except Exception:  # noqa: BLE001 - a domain GT4Py cannot read: nothing told
            call = _Call(writes, frozenset(), None, None, statement.expr, False, offsets, tables)
            calls.append(call)
            continue
        whole = frozenset(t for t, d in zip(writes, domains) if t is not None and _whole(t, d))
        cartesian = domains[0].grid_type == common.GridType.CARTESIAN
        calls.append(
            _Call(writes, whole, domains, shape(domain), statement.expr, cartesian, offsets, tables)
        )
    return calls


def _whole(name: str, domain: Any) -> bool:
    """Whether ``domain`` is the whole field of argument ``name`` (``out=name`` as it is)."""
    for dim, bounds in domain.ranges.items():
        for end, bound in enumerate((bounds.start, bounds.stop)):
            args = getattr(bound, "args", ())
            if not (
                getattr(getattr(bound, "fun", None), "id", None) == "tuple_get"
                and len(args) == 2
                and getattr(args[0], "value", None) == str(end)
                and getattr(getattr(args[1], "fun", None), "id", None) == "get_domain_range"
                and str(getattr(args[1].args[0], "id", "")) == name
                and getattr(args[1].args[1], "value", None) == dim.value
            ):
                return False
    return True


def _neighbour_hops(expr: Any, hops: int, tables: frozenset[str] | None) -> dict[str, int]:
    """Per argument (symbol) that ``expr`` reads, the most neighbour tables (unstructured
    shifts through the offsets named ``tables``; all named offsets where None) between it
    and ``expr``'s value, ``hops`` already on the way."""
    from gt4py.next.iterator import ir as itir
    from gt4py.next.iterator.ir_utils import common_pattern_matcher as cpm
    from gt4py.next.iterator.transforms import trace_shifts

    found: dict[str, int] = {}

    def is_table(offset: Any) -> bool:
        name = getattr(offset, "value", None)
        return isinstance(name, str) and (tables is None or name in tables)

    def visit(node: Any, hops: int) -> None:
        if isinstance(node, itir.SymRef):
            found[str(node.id)] = max(found.get(str(node.id), 0), hops)
        elif isinstance(node, itir.FunCall) and cpm.is_applied_as_fieldop(node):
            shifts = trace_shifts.trace_stencil(node.fun.args[0], num_args=len(node.args))
            for argument, sequences in zip(node.args, shifts):
                through = max((sum(map(is_table, s)) for s in sequences), default=0)
                visit(argument, hops + through)
        elif isinstance(node, itir.FunCall):
            for argument in node.args:
                visit(argument, hops)

    visit(expr, hops)
    return found


def _reach(base: Any, domain: Any) -> Reach | None:
    """How far ``domain`` (a symbolic domain, or a tuple of them: a tuple argument) reaches
    beyond ``base`` on each side of each axis; None where GT4Py cannot tell: domains not
    ``start - k`` / ``stop + k`` of each other, unstructured ones that differ (their index
    ranges are no neighbour tables)."""
    if base is None or domain is None:
        return None
    if isinstance(domain, tuple):
        if any(getattr(part, "value", None) == "unknown" for part in domain):
            return None  # (an element GT4Py cannot tell; one never read counts nothing)
        reaches = [_reach(base, part) for part in domain if hasattr(part, "ranges")]
        if None in reaches:
            return None
        sides = {side for reach in reaches for side in reach}  # (a side not named: 0)
        return {side: max(reach.get(side, 0) for reach in reaches) for side in sides}
    ranges = getattr(domain, "ranges", None)
    if not isinstance(ranges, dict):
        return None
    if domain == base:
        return {}
    from gt4py.next import common

    if base.grid_type != common.GridType.CARTESIAN:
        return None
    reach: Reach = {}
    for dim, bounds in ranges.items():
        if dim not in base.ranges:
            return None
        own = base.ranges[dim]
        low = _offset(own.start, bounds.start)
        high = _offset(own.stop, bounds.stop)
        if low is None or high is None:
            return None
        reach[f"{dim.value}-"], reach[f"{dim.value}+"] = -low, high
    return reach


def _offset(base: Any, expr: Any) -> int | None:
    """``expr - base`` where it is a literal integer (sums and products of the same terms
    cancel: ``2 * n - 1`` against ``n * 2``); None where it is not."""
    import sympy

    difference = sympy.expand(_sympy(expr) - _sympy(base))
    return int(difference) if difference.is_Integer else None


def _sympy(expr: Any) -> Any:
    """``expr`` (a GT4Py index expression) for sympy: sums, differences and products of
    literal integers and terms (any other expression: a symbol named by its text)."""
    import sympy

    operations = {"plus": sympy.Add, "minus": lambda a, b: a - b, "multiplies": sympy.Mul}
    fun = getattr(getattr(expr, "fun", None), "id", None)
    args = getattr(expr, "args", ())
    if fun in operations and len(args) == 2:
        return operations[fun](_sympy(args[0]), _sympy(args[1]))
    value = getattr(expr, "value", None)
    if value is not None and not hasattr(expr, "kind"):  # (an axis literal has a kind)
        try:
            return sympy.Integer(int(value))
        except (TypeError, ValueError):
            pass
    return sympy.Symbol(str(expr))
