"""Messages straight out of and into the fields: the contiguous runs of a box, unpacked.

A packed message costs three copies: the pack into the send arena, MPI's move (MPICH on one
node: one copy, CMA, from the sender's memory into the receiver's) and the unpack. Where a
box is a few long contiguous runs of a field (a face across the outermost axis of a C-ordered
field: one run per halo layer), MPI can move each run from the sender's field into the
receiver's halo: one copy, and the arenas stay untouched. Measured here (2 ranks, 10 fields of
70x134x80, halo 3): the two faces as 60 messages of 80 KiB took 0.75 ms, packed 1.33 ms.

Both sides must cut a box into the same messages without asking each other. They can: the
box has the same extents on both sides (the same cells), the fields' descriptors are the
same on every rank (a step is one SDFG, ``program.py``), and a run is found from the
descriptor alone, symbolically: from the unit stride outwards, dimensions are merged while
the box covers a dimension whole and the next stride is the product of the sizes inside it
(a dense layout, written so by ``program._stride_specs``). Whether runs are long enough to
pay for a message each (``min_bytes``) is then an expression in the shape symbols that
every rank evaluates to the same value.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import dace
import sympy
from dace.symbolic import symstr

#: Default of ``gh.program(in_place_min_bytes=...)``: shorter runs are packed. Each message
#: costs MPI a rendezvous (about 5 us here); a run of 32 KiB takes about as long to pack and
#: unpack.
IN_PLACE_MIN_BYTES = 32 * 1024

#: At most this many runs per box and field go in place (the request array is sized by it).
MAX_RUNS = 16


@dataclasses.dataclass(frozen=True)
class Runs:
    """A box of a field as contiguous runs: ``length`` elements each, one per point of the
    ``outer`` dimensions (extent, stride), the first at element ``first``."""

    length: Any
    outer: list[tuple[Any, Any]]
    first: Any

    @property
    def count(self) -> Any:
        return math.prod(extent for extent, _ in self.outer)

    def condition(self, itemsize: int, min_bytes: int, cpp: bool) -> str:
        """Whether this box goes in place: long enough runs, not too many."""
        length, count = (symstr(e, cpp_mode=cpp) for e in (self.length, self.count))
        both = "&&" if cpp else "and"
        return f"(({length}) * {itemsize} >= {min_bytes} {both} ({count}) <= {MAX_RUNS})"

    def posts(self, post: str) -> list[str]:
        """C++ loops calling ``post`` (a statement using ``at``, the element offset of a run,
        and ``run``, its length in elements) once per run, in the same order on every rank."""
        lines = [f"{{ const long run = {symstr(self.length, cpp_mode=True)};"]
        terms = [f"(long)({symstr(self.first, cpp_mode=True)})"]
        for n, (extent, stride) in enumerate(self.outer):
            lines.append(f"for (long o{n} = 0; o{n} < {symstr(extent, cpp_mode=True)}; ++o{n})")
            terms.append(f"o{n} * (long)({symstr(stride, cpp_mode=True)})")
        lines.append(f"{{ const long at = {' + '.join(terms)}; {post} }}")
        return [*lines, "}"]


def box_runs(
    desc: Any, starts: list[Any], extents: list[Any], dense: dict[str, str]
) -> Runs | None:
    """The box of ``desc`` from ``starts`` with ``extents`` (per dimension) as contiguous runs,
    or ``None`` if the layout does not say (no unit stride). ``dense``: stride symbol -> the
    product of size symbols it equals."""
    shape = list(desc.shape)
    strides = [_substituted(stride, dense) for stride in desc.strides]
    dims = range(len(shape))
    current = next((d for d in dims if _equal(strides[d], 1)), None)
    if current is None:
        return None
    merged, length = [current], extents[current]
    while _equal(starts[current], 0) and _equal(extents[current], shape[current]):
        product = strides[current] * shape[current]
        following = [d for d in dims if d not in merged and _equal(strides[d], product)]
        if not following:
            break
        current = following[0]
        merged.append(current)
        length = length * extents[current]
    outer = [(extents[d], strides[d]) for d in dims if d not in merged]
    first = sum(start * stride for start, stride in zip(starts, strides))
    return Runs(length, outer, first)


def _substituted(expr: Any, products: dict[str, str]) -> Any:
    expr = sympy.sympify(expr)
    known = {
        s: dace.symbolic.pystr_to_symbolic(products[str(s)])
        for s in expr.free_symbols
        if str(s) in products
    }
    return expr.subs(known, simultaneous=True)


def _equal(a: Any, b: Any) -> bool:
    return sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0
