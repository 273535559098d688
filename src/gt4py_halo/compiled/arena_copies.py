"""One copy map per arena: every direction of an exchange packed (unpacked) by one loop.

The MPI expansion's default copies one box per map, per direction: 8 maps per field group in
2-D, 26 in 3-D, each a GPU kernel launch of a few thousand threads. Here one map runs over the
whole arena instead (``arenas.py``): element ``p`` finds its segment by comparing ``p`` with
the segments' bounds (run-time values, ``place_segments``), its field and its place in the
box by division, and copies only if its
direction leads to another rank (a symbol per direction, set from ``_peers`` on the host
before the map). One kernel per arena and phase, at the price of an index computation per
element and a gather (a scatter) instead of strided copies: on a CPU the per-direction loops
vectorize and are faster, so this is the GPU's default (``Program(copy_maps=...)``).
"""

from __future__ import annotations

import math

import dace
from dace import dtypes
from dace.symbolic import symstr

from gt4py_halo.compiled.arenas import Arena

#: The map parameter: an index into the arena.
INDEX = "arena_index"


def direction_symbols(uid: str, directions: int) -> dict[str, str]:
    """Symbol -> condition on ``_peers``: whether direction ``k`` leads to another rank."""
    return {remote_symbol(uid, k): f"_peers[{k}] >= 0" for k in range(directions)}


def remote_symbol(uid: str, k: int) -> str:
    return f"{uid}_remote_{k}"


def add_arena_copy(
    state: dace.SDFGState, uid: str, arena: Arena, kind: str, gpu: bool
) -> dace.nodes.MapEntry:
    """Copy the fields of ``arena``'s group into it (``kind="pack"``) or out of it
    (``"unpack"``), every remote direction's segment, with one map over the arena."""
    sdfg = state.sdfg
    fields = [f"_f{i}" for i in arena.fields]
    whole = {
        name: dace.Memlet.from_array(name, sdfg.arrays[name]) for name in [arena.name, *fields]
    }
    for memlet in whole.values():
        memlet.dynamic = True  # each element reads one field (writes one) of them
    sources, targets = ([*fields], [arena.name]) if kind == "pack" else ([arena.name], [*fields])
    _, entry, exit_ = state.add_mapped_tasklet(
        f"{uid}_{kind}_{arena.group}_all",
        {INDEX: f"0:{symstr(arena.length)}"},
        {f"_{n}_in": whole[n] for n in sources},
        _copy_code(uid, arena, kind),
        {f"_{n}_out": whole[n] for n in targets},
        schedule=dtypes.ScheduleType.Default if gpu else dtypes.ScheduleType.Sequential,
        external_edges=True,
        propagate=False,
    )
    for e in [*state.in_edges(entry), *state.out_edges(exit_)]:
        e.data = dace.Memlet.from_array(e.data.data, sdfg.arrays[e.data.data])
    return entry


def _copy_code(uid: str, arena: Arena, kind: str) -> str:
    """The tasklet: locate ``INDEX`` in its segment, box and field, then copy one element."""
    ndim = len(arena.segments[0].bounds)
    source = "_{}_in".format
    target = "_{}_out".format
    lines = []
    for n, segment in enumerate(arena.segments):
        end = segment.offset + len(arena.fields) * segment.size
        within = f"{INDEX} >= {symstr(segment.offset)} and {INDEX} < {symstr(end)}"
        lines.append(f"{'if' if n == 0 else 'elif'} {within}:")
        lines.append(f"    if {remote_symbol(uid, segment.direction)}:")
        body = [
            f"q = {INDEX} - ({symstr(segment.offset)})",
            f"j = q // ({symstr(segment.size)})",
            f"r = q - j * ({symstr(segment.size)})",
        ]
        coordinates = []
        for d, extent in enumerate(segment.box):
            start = segment.bounds[d][0] if d < ndim else 0
            stride = math.prod(segment.box[d + 1 :])
            body.append(
                f"c{d} = (r // ({symstr(stride)})) % ({symstr(extent)}) + ({symstr(start)})"
            )
            coordinates.append(f"c{d}")
        at = ", ".join(coordinates)
        for jj, i in enumerate(arena.fields):
            body.append(f"{'if' if jj == 0 else 'elif'} j == {jj}:")
            if kind == "pack":
                body.append(f"    {target(arena.name)}[{INDEX}] = {source(f'_f{i}')}[{at}]")
            else:
                body.append(f"    {target(f'_f{i}')}[{at}] = {source(arena.name)}[{INDEX}]")
        lines += [f"        {line}" for line in body]
    return "\n".join(lines)
