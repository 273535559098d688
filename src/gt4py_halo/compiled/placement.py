"""Exchanges placed in a compiled step from the halo annotations of the GT4Py programs it
calls: ``@gh.program(exchange=ex)``.

Before DaCe parses the step, its source is rewritten: an exchange (``ex.exchange(...)``) is
inserted before each call of a ``gh.halo`` program that reads the halo of a field whose halo
may be stale there, all such fields of the call in one exchange per dim. Which halos are valid
is a forward analysis over the step's statements, the same rules as ``gh.auto_exchange``
applied to the code instead of to a run:

- an exchange (placed, or written by hand: ``ex.exchange(a)``, ``h = ex.start(a)`` ...
  ``h.finish()``) makes its fields' halos valid: hand-placed exchanges are never duplicated;
- an annotated program makes what it writes (its ``out=``) stale; any other statement that
  may write a name (an assignment to it or into it, a call that is not an annotated program
  or an exchange, which gets it as an argument) makes it stale, conservatively;
- a loop's body starts from what is valid both before the loop and at the ways into its next
  turn (its end, each ``continue``; repeated until that holds); after the loop what is valid
  at its head (and after its ``else``) and at each ``break``; after ``if``/``else`` only
  what both branches leave valid is valid;
- the step itself is run again and again: at its start an argument counts as valid unless a
  call of the step leaves it stale (at its end or at a ``return``). Whether the field passed
  there is valid is checked at each call (``Placement``): a field new to the step, one a
  call left stale (a model that swaps buffers between calls), or one written since by another
  step with placed exchanges or an annotated program (``annotations.HaloValidity``) is
  exchanged from Python before the call. So a field the step reads but never writes
  (geometry, coefficients) is exchanged once, at its first call, and again only after such
  a write.

Where every field of an exchange was last written in the same block as the read, the exchange
is split: started right after that write, finished right before the read, so that the work
between (which neither writes those fields nor reads their halos, or the analysis would have
placed or moved it) overlaps the messages; unless a ``return``, ``break`` or ``continue``
between them could leave the start unfinished. Otherwise it is blocking, right before the
read.
A field whose read needs an exchange joins a split exchange placed earlier in its block (same
dim, started after the field's last write): one exchange, one message per neighbour, finished
before the earlier read.

So every halo a program reads is valid, whatever path the step takes; an exchange is placed
only where the analysis cannot show the halo valid. Fields are the step's own names (its
arguments and variables); a program called with an expression for an argument whose halo it
reads is a ``gh.ProgramError``. ``Program.exchange_report()`` lists what was placed. The
placement is made at the step's first use, when its names resolve as DaCe resolves them at
its first build; a method's first parameter names its object.
"""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import inspect
import linecache
import re
import textwrap
import types
from collections.abc import Callable
from typing import Any

from gt4py_halo.annotations import Annotated, cartesian_width_check, dim_of_param
from gt4py_halo.errors import ProgramError

#: The name the rewritten step calls its placed exchanges through.
EXCHANGE_NAME = "__gt4py_halo_placed_exchange"


@dataclasses.dataclass(frozen=True)
class PlacedInStep:
    """One exchange placed in a step: before which program call (line of the step's source),
    of which fields, along which dim; ``started``: the line after which it is started (split
    phase: the fields' last write is in the same block), or None (blocking, before the
    call)."""

    line: int
    program: str
    fields: tuple[str, ...]
    dim: str | None
    started: int | None = None

    def __str__(self) -> str:
        dim = "" if self.dim is None else f", dim={self.dim!r}"
        exchange = f"line {self.line}: exchange({', '.join(self.fields)}{dim})"
        if self.started is None:
            return f"{exchange} before {self.program}"
        return f"{exchange} started after line {self.started}, finished before {self.program}"


@dataclasses.dataclass
class _Block:
    """A block's statements so far, per name the index of the one that last wrote it, and
    the split exchanges placed in it (their start statements, dims, fields, report entries)."""

    out: list[ast.stmt] = dataclasses.field(default_factory=list)
    writers: dict[str, int] = dataclasses.field(default_factory=dict)
    starts: list[tuple[ast.Assign, str | None, list[str], int]] = dataclasses.field(
        default_factory=list
    )

    def insert(self, index: int, statement: ast.stmt) -> None:
        self.out.insert(index, statement)
        self.writers = {n: i + (i >= index) for n, i in self.writers.items()}


@dataclasses.dataclass
class _Jumps:
    """What is valid at each ``break`` and ``continue`` of a loop's body."""

    breaks: list[frozenset[str]] = dataclasses.field(default_factory=list)
    continues: list[frozenset[str]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Placement:
    """A step with exchanges placed: the rewritten function, what was placed, and what it
    takes for granted between its calls: ``valid_at_entry`` (argument position -> dim) are
    arguments whose halos it reads and assumes valid when called (no call of it leaves them
    stale), ``stale_at_exit`` the positions of arguments a call leaves with stale halos.
    ``Program`` checks the first against the objects passed (a new field, or one a call left
    stale: a model swapping buffers) and exchanges such an argument from Python first."""

    function: Callable[..., None]
    placed: list[PlacedInStep]
    valid_at_entry: dict[int, str | None]
    stale_at_exit: tuple[int, ...]
    rewritten: str  # the name the rewritten source goes by (DaCe reads it from ``linecache``)
    source: str  # the file of the step as written
    lines: tuple[int, ...]  # per line of the rewritten source, its line in ``source``

    def located(self, message: str) -> str:
        """``message`` (DaCe's, about the rewritten step) with the places it names in the
        rewritten source (``<name>:<line>``, ``"<name>", line <line>``, or ``at line <line>``
        alone) given in the step as written: its file and line."""

        def line(match: re.Match) -> str:
            n = int(match.group(2))
            return match.group(1).replace(self.rewritten, self.source) + str(
                self.lines[n - 1] if 0 < n <= len(self.lines) else n
            )

        name = re.escape(self.rewritten)
        return re.sub(rf"({name}:|\"{name}\", line |\bat line )(\d+)", line, message)


def place_exchanges(function: Callable[..., None], exchange: Any) -> Placement:
    """``function`` with exchanges placed from annotations (``Placement``). A bound method's
    object is resolved by the name of its first parameter (``self.stencil(u)``: the object's
    annotated program); the step is then that method of the object, rewritten."""
    source = textwrap.dedent(inspect.getsource(function))
    tree = ast.parse(source)
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        raise ProgramError(f"gh.program(exchange=...) takes a function, not {function!r}")
    definition.decorator_list = []
    names = _namespace(function)
    params = [a.arg for a in definition.args.posonlyargs + definition.args.args]
    bound = inspect.ismethod(function)
    if bound:  # its object is no argument of the step's calls
        names[params.pop(0)] = function.__self__
    placer = _Placer(names, exchange, function.__code__.co_firstlineno - 1, _aliases(definition))
    # the step runs again and again: at its start what no call of it writes is valid
    everything = frozenset(n.id for n in ast.walk(definition) if isinstance(n, ast.Name))
    everything |= set(params)
    definition.body, head, after, _ = placer.repeated(definition.body, everything, step=True)
    ast.fix_missing_locations(tree)
    text = ast.unparse(tree) + "\n"
    code = function.__code__
    filename = (
        f"<{code.co_filename}:{code.co_firstlineno}: {function.__qualname__} with exchanges placed>"
    )
    lines = _original_lines(tree, text, code.co_firstlineno - 1)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = _namespace(function)
    namespace[EXCHANGE_NAME] = exchange
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - the user's own step
    placed = namespace[definition.name]
    placed.__module__ = function.__module__
    placed.__qualname__ = function.__qualname__
    return Placement(
        types.MethodType(placed, function.__self__) if bound else placed,
        placer.placed,
        {
            i: placer.halo_reads[p]
            for i, p in enumerate(params)
            if p in head & placer.halo_reads.keys()
        },
        tuple(i for i, p in enumerate(params) if p not in after),
        filename,
        code.co_filename,
        lines,
    )


def _placed_at(code: str, statement: ast.stmt) -> ast.stmt:
    """The statement ``code``, at the place of ``statement`` in the step's source (where DaCe
    reports an error in it)."""
    placed = ast.parse(code).body[0]
    for node in ast.walk(placed):
        if "lineno" in node._attributes:
            ast.copy_location(node, statement)
    return placed


def _original_lines(tree: ast.Module, text: str, first_line: int) -> tuple[int, ...]:
    """Per line of ``text`` (``tree`` unparsed), the line of the step's file its statement
    came from (``tree`` keeps the lines of the step as written, counted from ``first_line``;
    a placed exchange, that of the statement it was placed before or after: ``_placed_at``)."""
    lines = [first_line + 1] * len(text.splitlines())
    for written, unparsed in zip(ast.walk(tree), ast.walk(ast.parse(text))):
        if type(written) is not type(unparsed):  # (unparsing keeps the tree: never seen)
            break
        if isinstance(unparsed, ast.stmt):  # a statement's lines, then those inside it
            for n in range(unparsed.lineno, (unparsed.end_lineno or unparsed.lineno) + 1):
                lines[n - 1] = first_line + written.lineno
    return tuple(lines)


def _namespace(function: Callable[..., None]) -> dict[str, Any]:
    """What the step's names refer to: its globals, then its closure."""
    names = dict(function.__globals__)
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        names[name] = cell.cell_contents
    return names


class _Placer:
    def __init__(
        self,
        names: dict[str, Any],
        exchange: Any,
        first_line: int,
        aliases: dict[str, frozenset[str]],
    ) -> None:
        self._names = names
        self._aliases = aliases
        self._exchange = exchange
        self._first_line = first_line
        self._handles: dict[str, frozenset[str]] = {}  # split exchanges in flight, by handle
        self.placed: list[PlacedInStep] = []
        self._returns: list[frozenset[str]] = []  # what is valid at each return of the step
        self._loops: list[_Jumps] = []  # the loops around the statement, innermost last
        #: The names whose halos programs read, and their dims.
        self.halo_reads: dict[str, str | None] = {}

    def block(self, statements: list[ast.stmt], valid: frozenset[str]) -> tuple[list, frozenset]:
        """The statements with exchanges placed, and what is valid after them."""
        block = _Block()
        for statement in statements:
            placed, after = self._statement(statement, valid, block)
            block.out += placed
            for name in valid - after:  # written by it: the statement last writing the name
                block.writers[name] = len(block.out) - 1
            for name in self._written(statement) - after:
                block.writers[name] = len(block.out) - 1
            valid = after
        return block.out, valid

    def _statement(
        self, statement: ast.stmt, valid: frozenset[str], block: _Block
    ) -> tuple[list, frozenset]:
        if isinstance(statement, (ast.For, ast.While)):
            return self._loop(statement, valid)
        if isinstance(statement, (ast.Return, ast.Break, ast.Continue)):
            after = valid - self._written(statement)
            if isinstance(statement, ast.Return):
                self._returns.append(after)
            elif isinstance(statement, ast.Break):
                self._loops[-1].breaks.append(after)
            else:
                self._loops[-1].continues.append(after)
            return [statement], after
        if isinstance(statement, ast.If):
            statement.body, after_body = self.block(statement.body, valid)
            statement.orelse, after_else = self.block(statement.orelse, valid)
            return [statement], after_body & after_else
        self._refuse_helpers(statement)
        call = statement.value if isinstance(statement, (ast.Expr, ast.Assign)) else None
        if isinstance(call, ast.Call):
            annotated = self._resolve(call.func)
            if isinstance(annotated, Annotated):
                return self._annotated_call(statement, call, annotated, valid, block)
            exchanged = self._exchange_call(statement, call)
            if exchanged is not None:
                return [statement], valid | exchanged
        return [statement], valid - self._written(statement)

    def _written(self, statement: ast.stmt) -> frozenset[str]:
        """The names ``statement`` may write, with every name that may refer to the same
        array (``_aliases``)."""
        return self._linked(_written_names(statement))

    def _linked(self, names: set[str] | frozenset[str]) -> frozenset[str]:
        return frozenset().union(names, *(self._aliases.get(n, ()) for n in names))

    def _refuse_helpers(self, statement: ast.stmt) -> None:
        """A ``ProgramError`` for a call of a Python function that calls annotated programs:
        placement follows the step's own code only, so halos read inside would be stale."""
        for node in ast.walk(statement):
            helper = self._resolve(node.func) if isinstance(node, ast.Call) else None
            if not inspect.isfunction(helper):
                continue
            names = _namespace(helper)
            called = helper.__code__.co_names + helper.__code__.co_freevars
            if any(isinstance(names.get(n), Annotated) for n in called):
                raise ProgramError(
                    f"line {self._line(statement)}: {helper.__name__} calls programs with "
                    "halo annotations; exchanges are placed in the step's own code only: call "
                    "them from the step, or place their exchanges by hand"
                )

    def repeated(
        self, body: list[ast.stmt], valid: frozenset[str], step: bool = False
    ) -> tuple[list, frozenset, frozenset, list[frozenset]]:
        """``body`` run again and again from ``valid``: placed from what is valid both before
        it and at each way into its next turn (narrowed until that holds). A loop's next turn
        starts where its body ends or at a ``continue``; the step's next call where it ends
        or at a ``return``. Returns the body, that head, what is valid at the ways out (the
        end, and each ``return`` of the step), and what is valid at each of the loop's
        ``break``s."""
        head = valid
        while True:
            handles, placed, returns = dict(self._handles), len(self.placed), len(self._returns)
            jumps = _Jumps()
            self._loops.append(jumps)
            try:
                new_body, after = self.block([copy.deepcopy(s) for s in body], head)
            finally:
                self._loops.pop()
            after = after.intersection(*(self._returns[returns:] if step else jumps.continues))
            if head <= after:
                return new_body, head, after, jumps.breaks
            head = head & after
            self._handles = handles  # the body again, from the narrower head
            del self.placed[placed:]
            del self._returns[returns:]

    def _loop(self, loop: ast.For | ast.While, valid: frozenset[str]) -> tuple[list, frozenset]:
        if isinstance(loop, ast.For):  # its target names another array at each turn
            valid = valid - _names_in(loop.target)
        loop.body, head, _, breaks = self.repeated(loop.body, valid)
        loop.orelse, after_else = self.block(loop.orelse, head)
        return [loop], after_else.intersection(*breaks)

    def _annotated_call(
        self,
        statement: ast.stmt,
        call: ast.Call,
        program: Annotated,
        valid: frozenset[str],
        block: _Block,
    ) -> tuple[list, frozenset]:
        arguments = _arguments(call, program.params)
        decomposition = self._exchange.decomposition
        for param in (program.widths.keys() | program.reaches.keys()) & arguments.keys():
            cartesian_width_check(decomposition, program, param)
        stale: dict[str | None, list[str]] = {}
        for param, width in program.widths.items():
            if width == 0 or param not in arguments:
                continue
            argument = arguments[param]
            if not isinstance(argument, ast.Name):
                raise ProgramError(
                    f"line {self._line(statement)}: {program.name} reads the halo of its "
                    f"argument {param}, given as an expression: pass a field by name, or "
                    "place that exchange by hand"
                )
            dim = dim_of_param(decomposition, program, param)
            self.halo_reads[argument.id] = dim
            if argument.id not in valid:
                stale.setdefault(dim, []).append(argument.id)
        placed = []
        for dim, stale_fields in stale.items():
            joined = self._join_started(block, dim, stale_fields)
            valid = valid | joined
            fields = [f for f in stale_fields if f not in joined]
            if not fields:
                continue
            keyword = "" if dim is None else f", dim={dim!r}"
            arguments_code = f"{', '.join(fields)}{keyword}"
            writers = [block.writers.get(f) for f in fields]
            if None in writers or _leaves(block.out[max(writers) + 1 :]):
                # not all written in this block, or a way out of it between the last write
                # and here (a start never finished): exchanged here, blocking
                code = f"{EXCHANGE_NAME}.exchange({arguments_code})"
                placed.append(_placed_at(code, statement))
                started = None
            else:  # started right after the last write, finished here: the work between
                handle = f"__gt4py_halo_placed_{len(self.placed)}"  # overlaps the messages
                after = max(writers)
                code = f"{handle} = {EXCHANGE_NAME}.start({arguments_code})"
                start = _placed_at(code, block.out[after])
                block.insert(after + 1, start)
                block.starts.append((start, dim, list(fields), len(self.placed)))
                placed.append(_placed_at(f"{handle}.finish()", statement))
                started = self._line(block.out[after])
            self.placed.append(
                PlacedInStep(self._line(statement), program.name, tuple(fields), dim, started)
            )
            valid = valid | set(fields)
        written = {
            a.id for p, a in arguments.items() if p in program.writes and isinstance(a, ast.Name)
        }
        if any(p in program.writes and not isinstance(a, ast.Name) for p, a in arguments.items()):
            written |= _names_in(call)  # writes through an expression: whatever it names
        return [*placed, statement], valid - self._linked(written)

    def _join_started(self, block: _Block, dim: str | None, fields: list[str]) -> set[str]:
        """Fields that join a split exchange placed earlier in ``block`` (same dim, started
        after their last write, finished before an earlier read): one exchange, one message
        per neighbour, for both reads. Returns the fields that joined one."""
        joined = set()
        for field in fields:
            written = block.writers.get(field, -1)
            for start, start_dim, started, record in block.starts:
                at = next(i for i, s in enumerate(block.out) if s is start)
                if start_dim != dim or at <= written:
                    continue
                started.append(field)
                keyword = "" if dim is None else f", dim={dim!r}"
                call = f"{EXCHANGE_NAME}.start({', '.join(started)}{keyword})"
                start.value = _placed_at(call, start).value
                self.placed[record] = dataclasses.replace(
                    self.placed[record], fields=tuple(started)
                )
                joined.add(field)
                break
        return joined

    def _exchange_call(self, statement: ast.stmt, call: ast.Call) -> frozenset[str] | None:
        """The fields an exchange written by hand makes valid (a blocking one, or a split
        one's finish), or None if ``call`` is none."""
        func = call.func
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "finish" and isinstance(func.value, ast.Name):
            return self._handles.pop(func.value.id, None)
        owner = self._resolve(func.value)
        if func.attr not in ("exchange", "start") or not hasattr(owner, "decomposition"):
            return None
        fields = frozenset(a.id for a in call.args if isinstance(a, ast.Name))
        if func.attr == "exchange":
            return fields
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
            self._handles[statement.targets[0].id] = fields
        return frozenset()  # valid at the finish

    def _resolve(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Name):
            return self._names.get(node.id, getattr(builtins, node.id, None))
        if isinstance(node, ast.Attribute):
            owner = self._resolve(node.value)
            return getattr(owner, node.attr, None) if owner is not None else None
        return None

    def _line(self, statement: ast.stmt) -> int:
        return self._first_line + statement.lineno


def _leaves(statements: list[ast.stmt]) -> bool:
    """Whether control may leave the block from ``statements``: a ``return``, or a ``break``
    or ``continue`` of a loop around them."""

    def leaves(node: ast.AST, in_loop: bool) -> bool:
        if isinstance(node, ast.Return) or (
            isinstance(node, (ast.Break, ast.Continue)) and not in_loop
        ):
            return True
        if isinstance(node, (ast.For, ast.While)):  # its else's jumps are the outer loop's
            return any(leaves(n, True) for n in node.body) or any(
                leaves(n, in_loop) for n in node.orelse
            )
        return any(leaves(n, in_loop) for n in ast.iter_child_nodes(node))

    return any(leaves(s, False) for s in statements)


def _arguments(call: ast.Call, params: list[str]) -> dict[str, ast.expr]:
    bound = dict(zip(params, call.args))
    bound.update({k.arg: k.value for k in call.keywords if k.arg is not None})
    return bound


def _written_names(statement: ast.stmt) -> frozenset[str]:
    """The names ``statement`` may write: assigned to or into, or passed to a call."""
    written: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                written |= _names_in(target)
        elif isinstance(node, ast.Call):
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                written |= _names_in(argument)
    return frozenset(written)


def _aliases(definition: ast.FunctionDef) -> dict[str, frozenset[str]]:
    """Per name, the names that may refer to the same array: a name given another's array or
    a view of it (``a = u``, ``a = u[1:]``, ``a, b = u, v``, ``for f in (u, v)``, ``a =
    u.reshape(s)``: a call's result is taken for a view of its object and arguments), linked both
    ways and transitively. Placement follows fields by name: a write through one makes all
    of them stale."""
    groups: dict[str, set[str]] = {}
    for node in ast.walk(definition):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, ast.For):
            targets, value = [node.target], node.iter
        else:
            continue
        named = set().union(*(_names_in(t) for t in targets if _is_names(t)))
        linked = named | _arrays_in(value)
        if named and len(linked) > 1:
            group = set().union(linked, *(groups.get(n, ()) for n in linked))
            for name in group:
                groups[name] = group
    return {name: frozenset(group) for name, group in groups.items()}


def _is_names(target: ast.expr) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(map(_is_names, target.elts))
    return isinstance(target, (ast.Name, ast.Starred))


def _arrays_in(value: ast.expr) -> set[str]:
    """The names whose arrays ``value`` may be (or be a view of)."""
    if isinstance(value, ast.Name):
        return {value.id}
    if isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _arrays_in(value.value)
    if isinstance(value, (ast.Tuple, ast.List)):
        return set().union(*map(_arrays_in, value.elts))
    if isinstance(value, ast.IfExp):
        return _arrays_in(value.body) | _arrays_in(value.orelse)
    if isinstance(value, ast.Call):  # a view of its object or arguments, maybe (u.reshape(s))
        parts = [value.func, *value.args, *(k.value for k in value.keywords)]
        return set().union(*map(_arrays_in, parts))
    return set()


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
