"""Messages straight out of and into the fields: the contiguous runs of a box, unpacked.

A packed message costs three copies: the pack into the send arena, MPI's move (MPICH on one
node: one copy, CMA, from the sender's memory into the receiver's) and the unpack. Where a
box is a few long contiguous runs of a field (a face across the outermost axis of a C-ordered
field: one run per halo layer), MPI can move each run from the sender's field into the
receiver's halo: one copy, and the arenas stay untouched. Measured here (2 ranks, 10 fields of
70x134x80, halo 3): the two faces as 60 messages of 80 KiB took 0.75 ms, packed 1.33 ms.

Both sides must cut a box into the same messages without asking each other, and each side
must be free to use its own memory layout: GT4Py pads some blocks' rows and not others, so two
neighbours' fields may differ in density. So the *wire* is fixed by the box alone: a box of a
C-ordered field (unit stride last) is cut as if the field were dense, merging dimensions from
the last one outwards while the box covers a dimension whole (the same cells on both sides of
a message, from the same symbolic descriptors: a step is one SDFG, ``program.py``). Whether
runs are long enough to pay for a message each (``min_bytes``) is an expression in the shape
symbols that both sides of a message evaluate alike. Each side then decides at run time, for
itself, where the runs lie: in the field when its strides are dense where runs were merged
(``Runs.dense``), else in the arena segment, packed in C order, whose pieces are the same runs
back to back (``Runs.packed``). Nothing that shapes the generated code depends on a rank's
own strides.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Collection
from typing import Any

import sympy
from dace.symbolic import symstr

from gt4py_halo.decomposition.plan import MAX_RUNS


@dataclasses.dataclass(frozen=True)
class Runs:
    """A box of a field as contiguous runs: ``length`` elements each, one per point of the
    ``outer`` dimensions (extent, stride), the first at element ``first``."""

    length: Any
    outer: list[tuple[Any, Any]]
    first: Any
    dense: tuple[tuple[Any, Any], ...] = ()  # (stride, product of sizes) the merges assume

    @property
    def count(self) -> Any:
        return math.prod(extent for extent, _ in self.outer)

    def condition(self, itemsize: int, min_bytes: int, cpp: bool) -> str:
        """Whether this box goes in place: long enough runs, not too many."""
        length, count = (symstr(e, cpp_mode=cpp) for e in (self.length, self.count))
        both = "&&" if cpp else "and"
        return f"(({length}) * {itemsize} >= {min_bytes} {both} ({count}) <= {MAX_RUNS})"

    def dense_condition(self, cpp: bool) -> str:
        """Whether the field's strides are dense where the runs were merged (run time)."""
        equal = [
            f"(({symstr(a, cpp_mode=cpp)}) == ({symstr(b, cpp_mode=cpp)}))" for a, b in self.dense
        ]
        if not equal:
            return "1" if cpp else "True"
        return f"({(' && ' if cpp else ' and ').join(equal)})"

    def packed(self, first: Any) -> Runs:
        """The same runs packed back to back in C order from element ``first`` (a segment
        of an arena)."""
        outer, stride = [], self.length
        for extent, _ in reversed(self.outer):
            outer.insert(0, (extent, stride))
            stride = stride * extent
        return Runs(self.length, outer, first)


def posts(boxes: list[Runs], tables: dict[str, list[Any]], post: str) -> list[str]:
    """C++ calling ``post`` once per run of each box of ``boxes`` (a box per field), box after
    box, each box's runs in order: the same order on every rank. Boxes cut alike (the same
    run length and extents, as the fields of an arena's group are) share one loop over C
    arrays of their offsets and strides, not a loop nest per box: the posts of ten fields
    in as many lines as those of one. ``post`` is a statement using ``f`` (the box's index
    in its loop), ``at`` (the element offset of a run) and ``run`` (its length in elements),
    and may read the arrays of ``tables`` (declaration -> one value per box) at ``f``."""
    lines, start = [], 0
    while start < len(boxes):
        first, end = boxes[start], start + 1
        while end < len(boxes) and _sizes(boxes[end]) == _sizes(first):
            end += 1
        alike = boxes[start:end]
        lines.append(f"{{ const long run = {symstr(first.length, cpp_mode=True)};")
        arrays = {"const long first[]": [r.first for r in alike]}
        arrays.update(
            {
                f"const long stride{n}[]": [r.outer[n][1] for r in alike]
                for n in range(len(first.outer))
            }
        )
        for declaration, values in arrays.items():
            listed = ", ".join(f"(long)({symstr(v, cpp_mode=True)})" for v in values)
            lines.append(f"{declaration} = {{{listed}}};")
        for declaration, values in tables.items():
            lines.append(f"{declaration} = {{{', '.join(map(str, values[start:end]))}}};")
        lines.append(f"for (int f = 0; f < {len(alike)}; ++f)")
        terms = ["first[f]"]
        for n, (extent, _) in enumerate(first.outer):
            lines.append(f"for (long o{n} = 0; o{n} < {symstr(extent, cpp_mode=True)}; ++o{n})")
            terms.append(f"o{n} * stride{n}[f]")
        lines += [f"{{ const long at = {' + '.join(terms)}; {post} }}", "}"]
        start = end
    return lines


def _sizes(runs: Runs) -> list[str]:
    """How a box is cut: the run length and the extents of the runs' outer dimensions."""
    return [str(runs.length), *(str(extent) for extent, _ in runs.outer)]


def box_runs(
    desc: Any, starts: list[Any], extents: list[Any], wraps: Collection[str] = ()
) -> Runs | None:
    """The box of ``desc`` from ``starts`` with ``extents`` (per dimension) as contiguous runs
    of a dense C-ordered field, or ``None`` if the field is not C-ordered (its last stride is
    not 1). The merges' assumptions are ``Runs.dense``, to check at run time.

    Where the box depends on symbols of ``wraps`` (each 0 or 1 at run time: a box widened
    across the axes that wrap, ``cartesian.wrapped_box``), runs merge differently for each of
    their values: the runs are then those of every case, each length and extent the sum of
    the cases' weighted by the indicator of its case (the product of ``w`` or ``1 - w`` over
    the symbols), a case with fewer outer dimensions padded with extent 1; the merges that a
    case assumes are checked only in that case (both sides of a dense pair times its
    indicator)."""
    symbols = sorted(
        {x for e in [*starts, *extents] for x in sympy.sympify(e).free_symbols if str(x) in wraps},
        key=str,
    )
    if not symbols:
        return _box_runs(desc, starts, extents)
    cases = []
    for values in itertools.product((0, 1), repeat=len(symbols)):
        at = dict(zip(symbols, values))
        runs = _box_runs(
            desc,
            [sympy.sympify(e).subs(at) for e in starts],
            [sympy.sympify(e).subs(at) for e in extents],
        )
        if runs is None:
            return None
        cases.append((math.prod(w if v else 1 - w for w, v in at.items()), runs))
    depth = max(len(runs.outer) for _, runs in cases)
    outer = [
        (
            sum(c * (r.outer[d][0] if d < len(r.outer) else 1) for c, r in cases),
            desc.strides[d],
        )
        for d in range(depth)
    ]
    first = sum(start * stride for start, stride in zip(starts, desc.strides))
    dense = tuple((c * a, c * b) for c, r in cases for a, b in r.dense)
    return Runs(sum(c * r.length for c, r in cases), outer, first, dense)


def _box_runs(desc: Any, starts: list[Any], extents: list[Any]) -> Runs | None:
    """``box_runs`` of a box that depends on no wrap symbol."""
    shape, strides = list(desc.shape), list(desc.strides)
    current = len(shape) - 1
    if not _equal(strides[current], 1):
        return None
    length, dense = extents[current], []
    while current > 0 and _equal(starts[current], 0) and _equal(extents[current], shape[current]):
        product = strides[current] * shape[current]
        if not _equal(strides[current - 1], product):
            dense.append((strides[current - 1], product))
        current -= 1
        length = length * extents[current]
    outer = [(extents[d], strides[d]) for d in range(current)]
    first = sum(start * stride for start, stride in zip(starts, strides))
    return Runs(length, outer, first, tuple(dense))


def _equal(a: Any, b: Any) -> bool:
    """Whether ``a == b`` for all values of the symbols: shapes, strides and offsets are
    polynomials in them, which ``expand`` brings to one form (``simplify`` proves the same,
    some thousand times slower)."""
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0
