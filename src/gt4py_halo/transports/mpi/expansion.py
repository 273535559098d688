"""The MPI expansion of ``HaloExchange``: pack maps, persistent requests, unpack maps.

Fields of the same shape and dtype form a *group*; each group has one send and one receive
*arena*, a flat buffer holding every direction's boxes (*segments*) back to back. The node
becomes a nested SDFG (a split pair: the ``start`` node the part up to ``MPI_Startall``, the
``finish`` node the rest):

1. per direction leading to another rank, one **pack** map per group, written in the fields'
   own index space (so it can fuse with other maps, ``fusion.py``), into the send arena;
2. a **start** tasklet: on its first run it creates the persistent requests, per group one
   each way per neighbour rank (``_requests``); then ``MPI_Startall``;
3. a **wait** tasklet (``MPI_Waitall``);
4. per direction, on what lies there (``_peers[k]``, a run-time value: a conditional block):
   another rank: one **unpack** map per group from the receive arena; the rank itself
   (``SELF``, a periodic axis not split over ranks): one **self-copy** map per group, owned
   cells straight to the halo; nothing beyond an open boundary (the halo keeps what it held).

On a CPU, a direction whose boxes are a few long contiguous runs of the fields sends each run
as an MPI message of its own, posted by the start tasklet and waited for by the wait tasklet
(``in_place.py``): straight from and into the fields, skipping the pack and unpack maps, where
this rank's fields are dense (a run-time test), else from and into the arena segments.

Box bounds are symbolic in the fields' shapes (``direction_box``, the same geometry the
runtime plan is built from). Arenas are persistent arrays of the SDFG holding the node
(``message_buffers.py``), and the requests live in the program's state struct under the
node's ``uid``: an exchange allocates nothing and creates no request after its first call.

GPU fields (``GPU_Global`` storage) get device arenas, so the copy maps become kernels on the
program's stream. The PyPI MPICH is not CUDA-aware: MPI works on pinned host mirrors of the
arenas (in the state struct, allocated on the first call), and the MPI tasklets copy the
segments of remote directions to and from them asynchronously on the program's stream. The
start tasklet then synchronizes the stream once — the one host wait standard MPI needs before
sending; the wait tasklet's copies back need none (``host_staging.py``). The MPI tasklets
are labelled ``*_mpi_start`` / ``*_mpi_wait`` so that the GPU transformation keeps them on
the host (``host_staging.HOST_TASKLET_SUFFIXES``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

import dace
from dace import dtypes
from dace.properties import CodeBlock
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.compiled.arena_copies import add_arena_copy, direction_symbols
from gt4py_halo.compiled.arenas import Arena, Segment, arenas, opposites
from gt4py_halo.compiled.fusion import copy_map_label
from gt4py_halo.compiled.graph import add_persistent, connect_whole, on_device
from gt4py_halo.compiled.host_staging import (
    WAIT_FOR_STREAM,
    allocate_mirror,
    copy_on_stream,
    free_mirrors,
    mirror,
    mirror_fields,
)
from gt4py_halo.compiled.in_place import MAX_RUNS, Runs, box_runs
from gt4py_halo.compiled.nodes import SELF, HaloExchange
from gt4py_halo.compiled.phases import TOKEN, TOKEN_CONNECTOR, packs, unpacks
from gt4py_halo.transports.mpi.environment import MPI as MpiEnvironment


@dace.library.register_expansion(HaloExchange, "MPI")
class ExpandHaloExchangeMPI(ExpandTransformation):
    """Lower ``HaloExchange`` to pack maps, MPI persistent requests and unpack maps."""

    environments: ClassVar[list] = [MpiEnvironment]
    #: The plan arrays the node gets (``convertible.exchange_sdfg``).
    PLAN_ARRAYS = ("peers",)

    @staticmethod
    def expansion(node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> dace.SDFG:
        return _Lowering(node, parent_state, parent_sdfg).sdfg

    @staticmethod
    def message_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any, bool]]:
        """(name, shape, dtype, receiving) of the node's buffers (``message_buffers.py``);
        ``outer``: connector -> descriptor of the node's inputs."""
        fields = [outer[f"_f{i}"] for i in range(node.spec.field_count)]
        return [
            (a.name, [a.length], a.dtype, not sending)
            for sending in (True, False)
            for a in arenas(node, fields, sending)
        ]


def _alike(ours: list[tuple[int, Runs]], theirs: list[tuple[int, Runs]]) -> bool:
    """Whether two segments' fields are cut into the same runs (lengths and counts)."""
    return all(
        i == j and str(a.length) == str(b.length) and str(a.count) == str(b.count)
        for (i, a), (j, b) in zip(ours, theirs, strict=True)
    )


def _unless(flags: tuple[str, ...]) -> str:
    """The condition's tail that skips packing where producer stencils packed already."""
    return f" and not ({' and '.join(flags)})" if flags else ""


class _Lowering:
    def __init__(self, node: Any, parent_state: dace.SDFGState, parent_sdfg: dace.SDFG) -> None:
        self.node = node
        self.uid = node.spec.uid
        self.sdfg = dace.SDFG(f"{self.uid}_{node.spec.phase}")
        self.ndim = len(node.spec.halo)
        outer = {e.dst_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.in_edges(node)}
        outer.update(
            {e.src_conn: parent_sdfg.arrays[e.data.data] for e in parent_state.out_edges(node)}
        )
        self.fields = [self._argument(f"_f{i}", outer) for i in range(node.spec.field_count)]
        self._argument("_peers", outer)
        self._argument("_comm", outer)
        self.gpu = on_device(self.fields)
        self.sends = arenas(node, self.fields, sending=True)
        self.recvs = arenas(node, self.fields, sending=False)
        for arena in self.sends + self.recvs:  # the enclosing SDFG's (message_buffers.py)
            if arena.name in outer:
                self._argument(arena.name, outer)
            elif packs(node.spec.phase):  # a node lowered without attach_message_buffers
                add_persistent(self.sdfg, arena.name, [arena.length], arena.dtype, self.gpu)
        if TOKEN in outer:
            self._argument(TOKEN, outer)
        offsets = node.spec.directions
        self.opposite = opposites(offsets)
        self.in_place = self._in_place_runs()
        last = self.sdfg.add_state("begin", is_start_block=True)
        if packs(node.spec.phase):
            for flags, _ in self._pack_groups():
                for flag in flags:
                    self.sdfg.add_symbol(flag, dtypes.int32)
            if node.spec.copy_maps == "arena":
                last = self._arena_copies(last, "pack")
            else:
                for k in range(len(offsets)):
                    packed = self._unless_direct(self.sends, k)
                    for n, (flags, group) in enumerate(self._pack_groups()):
                        fill = functools.partial(self._add_copies, group, k, "pack")
                        condition = f"_peers[{k}] >= 0" + _unless(flags) + packed
                        last = self._branch(last, f"pack_{k}_{n}", [(condition, fill)])
            last = self._then(last, "start", self._add_start)
        if unpacks(node.spec.phase):
            last = self._then(last, "wait", self._add_wait)
            if node.spec.copy_maps == "arena":
                last = self._arena_copies(last, "unpack")
            for k in range(len(offsets)):
                from_self = functools.partial(self._add_self_copies, k)
                branches = [(f"_peers[{k}] == {SELF}", from_self)]
                if node.spec.copy_maps != "arena":
                    unpack = functools.partial(self._add_copies, self.recvs, k, "unpack")
                    packed = self._unless_direct(self.recvs, k)
                    branches.insert(0, (f"_peers[{k}] >= 0" + packed, unpack))
                last = self._branch(last, f"unpack_{k}", branches)

    def _in_place_runs(self) -> dict[tuple[str, int], list[tuple[int, Runs]]]:
        """(arena, direction) -> (field, runs) of the segments whose fields MPI moves in
        place when their runs are long enough (``in_place.py``; on a CPU, with copy maps per
        direction). A direction qualifies if, in every arena, every field is cut into runs
        alike, and alike to the segment the neighbour exchanges with it (the same box, so the
        same runs: checked, not assumed). All arenas of a direction go in place or none: their
        copy maps then stay in one state, where they fuse."""
        min_bytes = self.node.spec.in_place_min_bytes
        if self.gpu or self.node.spec.copy_maps == "arena" or min_bytes <= 0:
            return {}
        found = {}
        for arena in self.sends + self.recvs:
            for segment in arena.segments:
                starts = [a for a, _ in segment.bounds] + [0] * (len(segment.box) - self.ndim)
                runs = [(i, box_runs(self.fields[i], starts, segment.box)) for i in arena.fields]
                if all(r is not None for _, r in runs):
                    conditions = {r.condition(arena.dtype.bytes, min_bytes, True) for _, r in runs}
                    if len(conditions) == 1:
                        found[(arena.name, segment.direction)] = runs
        recvs = {arena.group: arena for arena in self.recvs}
        chosen = {}
        for k in range(len(self.node.spec.directions)):
            pairs = [
                ((send.name, k), (recvs[send.group].name, self.opposite[k])) for send in self.sends
            ]
            if pairs and all(
                ours in found and theirs in found and _alike(found[ours], found[theirs])
                for ours, theirs in pairs
            ):
                chosen.update((key, found[key]) for pair in pairs for key in pair)
        return chosen

    def _in_place_condition(self, arenas: list[Arena], k: int, cpp: bool) -> str | None:
        """When ``arenas``' segments of direction ``k`` go in place (run-time values of the
        shape symbols); ``None``: never."""
        conditions = []
        for arena in arenas:
            runs = self.in_place.get((arena.name, k))
            if runs is None:
                return None
            min_bytes = self.node.spec.in_place_min_bytes
            conditions.append(runs[0][1].condition(arena.dtype.bytes, min_bytes, cpp))
        return (" && " if cpp else " and ").join(conditions) if conditions else None

    def _direct_condition(self, arenas: list[Arena], k: int, cpp: bool) -> str | None:
        """When MPI moves ``arenas``' segments of direction ``k`` straight from or into the
        fields: they go in place and this rank's fields are dense where their runs were
        merged (else the runs go through the arena segments, packed); ``None``: never."""
        condition = self._in_place_condition(arenas, k, cpp)
        if condition is None:
            return None
        dense = {
            runs.dense_condition(cpp) for a in arenas for _, runs in self.in_place[(a.name, k)]
        }
        return (" && " if cpp else " and ").join([condition, *sorted(dense)])

    def _unless_direct(self, arenas: list[Arena], k: int) -> str:
        """The condition's tail that leaves direction ``k`` of ``arenas`` to MPI, from field
        to field: no copy map runs for it."""
        condition = self._direct_condition(arenas, k, cpp=False)
        return f" and not ({condition})" if condition else ""

    def _arena_copies(self, last: Any, kind: str) -> Any:
        """After ``last``, one copy map per arena over all directions (``arena_copies.py``);
        packing skipped where producer stencils did it (``_pack_groups``)."""
        state = self.sdfg.add_state(f"{kind}_directions")
        remote = direction_symbols(self.uid, len(self.node.spec.directions))
        self.sdfg.add_edge(last, state, dace.InterstateEdge(assignments=remote))
        groups = self._pack_groups() if kind == "pack" else [((), self.recvs)]
        for n, (flags, group) in enumerate(groups):

            def fill(state: dace.SDFGState, group: list[Arena] = group) -> None:
                for arena in group:
                    add_arena_copy(state, self.uid, arena, kind, self.gpu)

            label = f"{kind}_all_{n}"
            if flags:
                state = self._branch(state, label, [(_unless(flags).removeprefix(" and "), fill)])
            else:
                state = self._then(state, label, fill)
        return state

    def _pack_groups(self) -> list[tuple[tuple[str, ...], list[Arena]]]:
        """The send arenas, by the flags (symbols) telling that producer stencils wrote them
        already (``producer_fusion.py``; none: packed here): an arena is packed unless all
        its flags are set."""
        groups: dict[tuple[str, ...], list[Arena]] = {}
        for arena in self.sends:
            flags = self.node.spec.packed_by_producers(arena.name)
            groups.setdefault(flags, []).append(arena)
        return list(groups.items())

    def _then(self, last: Any, label: str, fill: Callable[[dace.SDFGState], None]) -> Any:
        state = self.sdfg.add_state(label)
        self.sdfg.add_edge(last, state, dace.InterstateEdge())
        fill(state)
        return state

    def _branch(self, last: Any, label: str, branches: list[tuple[str, Callable]]) -> Any:
        """A conditional block after ``last``: per (condition on the ranks, filler) a state.

        Whether a direction leads to another rank, to this rank or nowhere is known at run
        time only; branching on it per direction keeps the copies free of per-element tests.
        """
        block = ConditionalBlock(f"{self.uid}_{label}")
        self.sdfg.add_node(block)
        self.sdfg.add_edge(last, block, dace.InterstateEdge())
        for n, (condition, fill) in enumerate(branches):
            body = ControlFlowRegion(f"{block.label}_{n}", sdfg=self.sdfg)
            fill(body.add_state(f"{block.label}_{n}_copy", is_start_block=True))
            block.add_branch(CodeBlock(condition), body)
        return block

    def _argument(self, name: str, outer: dict[str, Any]) -> Any:
        desc = outer[name].clone()
        desc.transient = False
        self.sdfg.add_datadesc(name, desc)
        return desc

    def _add_copies(self, arenas: list[Arena], k: int, kind: str, state: dace.SDFGState) -> None:
        """Pack the fields into (``kind="pack"``) or unpack them from direction ``k``'s
        segments of their arenas: one map per field group, copying all its fields (built
        fused: DaCe's ``MapFusionHorizontal`` spent minutes propagating the arena's flat
        indices when it fused one map per field)."""
        for arena in arenas:
            for segment in (s for s in arena.segments if s.direction == k):
                copies, box = [], self._box(segment.bounds, segment.box)
                end = segment.offset + len(arena.fields) * segment.size
                whole = {arena.name: f"{symstr(segment.offset)}:{symstr(end)}"}
                for j, i in enumerate(arena.fields):
                    field = f"_f{i}[{self._params(segment)}]"
                    flat = f"{arena.name}[{self._flat(segment, j)}]"
                    copies.append((field, flat) if kind == "pack" else (flat, field))
                    whole[f"_f{i}"] = box
                label = copy_map_label(self.uid, kind, arena.group, k)
                self._add_map(state, label, segment, copies, whole)

    def _add_self_copies(self, k: int, state: dace.SDFGState) -> None:
        """Direction ``k``'s halo from this rank's own cells: what it would have sent itself
        towards the opposite direction (a periodic axis not split over ranks)."""
        sent = {(a.group, s.direction): s for a in self.sends for s in a.segments}
        for arena in self.recvs:
            for segment in (s for s in arena.segments if s.direction == k):
                source = sent[(arena.group, self.opposite[k])]
                shifted = ", ".join(
                    [
                        f"h{d} - ({symstr(a)}) + ({symstr(sa)})"
                        for d, ((a, _), (sa, _)) in enumerate(zip(segment.bounds, source.bounds))
                    ]
                    + [f"l{d}" for d in range(len(segment.box) - self.ndim)]
                )
                here = self._params(segment)
                copies = [(f"_f{i}[{shifted}]", f"_f{i}[{here}]") for i in arena.fields]
                reads = {f"_f{i}": self._box(source.bounds, segment.box) for i in arena.fields}
                writes = {f"_f{i}": self._box(segment.bounds, segment.box) for i in arena.fields}
                label = copy_map_label(self.uid, "self", arena.group, k)
                self._add_map(state, label, segment, copies, reads, writes)

    def _params(self, segment: Segment) -> str:
        levels = len(segment.box) - self.ndim
        return ", ".join([f"h{d}" for d in range(self.ndim)] + [f"l{d}" for d in range(levels)])

    def _flat(self, segment: Segment, j: int) -> str:
        """Arena index of the element at the map's parameters: field ``j`` of the group."""
        return segment.flat_index(self._params(segment).split(", "), j)

    def _box(self, bounds: list[tuple[Any, Any]], box: list[Any]) -> str:
        """The range of a box in a field: ``bounds``, then all levels."""
        ranges = [f"{symstr(a)}:{symstr(b)}" for a, b in bounds]
        return ", ".join(ranges + [f"0:{symstr(n)}" for n in box[self.ndim :]])

    def _add_map(
        self,
        state: dace.SDFGState,
        label: str,
        segment: Segment,
        copies: list[tuple[str, str]],
        reads: dict[str, str],
        writes: dict[str, str] | None = None,
    ) -> None:
        """A copy map over ``segment``'s box (in the fields' index space): ``dst = src`` for
        each (src, dst) of ``copies``.

        The memlets outside the map are given (``reads``, ``writes``: array -> range; by
        default the same), not propagated: DaCe's propagation of the arenas' flat indices
        took most of a large step's build (40 s for one 10-field exchange)."""
        levels = segment.box[self.ndim :]
        ranges = {f"h{d}": f"{symstr(a)}:{symstr(b)}" for d, (a, b) in enumerate(segment.bounds)}
        ranges.update({f"l{d}": f"0:{symstr(n)}" for d, n in enumerate(levels)})
        _, entry, exit_ = state.add_mapped_tasklet(
            label,
            ranges,
            {f"_in{n}": dace.Memlet(src) for n, (src, _) in enumerate(copies)},
            "\n".join(f"_out{n} = _in{n}" for n in range(len(copies))),
            {f"_out{n}": dace.Memlet(dst) for n, (_, dst) in enumerate(copies)},
            # on a CPU one thread, as the runtime exchange: halo strips are small, and an
            # OpenMP region per copy map cost more than it saved
            schedule=dtypes.ScheduleType.Default if self.gpu else dtypes.ScheduleType.Sequential,
            external_edges=True,
            propagate=False,
        )
        writes = reads if writes is None else writes
        for e in state.in_edges(entry):
            e.data = dace.Memlet(f"{e.data.data}[{reads[e.data.data]}]")
        for e in state.out_edges(exit_):
            e.data = dace.Memlet(f"{e.data.data}[{writes[e.data.data]}]")

    def _add_start(self, state: dace.SDFGState) -> None:
        """Create the requests on the first call, then start them.

        Per field group, one message per neighbour rank each way: the segments of the
        directions leading to it, merged where side by side (a contiguous message), else
        described by an MPI datatype of a few blocks. A direction leading to the rank itself
        (``SELF``) is a copy in the unpack phase; none goes beyond an open boundary.
        """
        node, uid = self.node, self.uid
        # at most one request per arena and direction (each leads to at most one new rank)
        count = max(len(node.spec.directions) * (len(self.sends) + len(self.recvs)), 1)
        init = ["MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_handle[0]);", "int n = 0;"]
        for arena, kind in [(a, "Recv") for a in self.recvs] + [(a, "Send") for a in self.sends]:
            init += self._allocate_mirror(arena)
            init += self._requests(arena, kind)
        init.append(f"__state->{uid}_count = n;")
        run = self._post_in_place()
        if self.gpu:  # the packed messages to the host; MPI may only read them after this
            run += [line for a in self.sends for line in self._stage(a, to_host=True)]
            run.append(f"if (__state->{uid}_count > 0) {WAIT_FOR_STREAM}")
        run.append(f"MPI_Startall(__state->{uid}_count, __state->{uid}_requests);")
        init_code = "\n    ".join(init)
        code = f"""
if (!__state->{uid}_ready) {{
    {init_code}
    __state->{uid}_ready = 1;
}}
""" + "\n".join(run)
        arenas = self.recvs + self.sends
        freed = free_mirrors(a.name for a in arenas) if self.gpu else ""
        exit_code = f"""{{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && __state->{uid}_ready)
        for (int n = 0; n < __state->{uid}_count; ++n)
            MPI_Request_free(&__state->{uid}_requests[n]);
    if (__state->{uid}_ready) {{{freed} }}
}}"""
        fields = [
            f"MPI_Request {uid}_requests[{count}];",
            f"int {uid}_count = 0;",
            f"int {uid}_ready = 0;",
        ]
        if self.in_place:
            most = MAX_RUNS * sum(len(runs) for runs in self.in_place.values())
            fields += [f"MPI_Request {uid}_in_place[{most}];", f"int {uid}_posted = 0;"]
        if self.gpu:
            fields += mirror_fields(a.name for a in arenas)
        moved = self._fields_in_place()
        tasklet = state.add_tasklet(
            f"{uid}_mpi_start",
            ["peers", "comm_handle"]
            + [f"_{a.name}" for a in self.sends]
            + [f"field{i}" for i in moved],
            [f"_{a.name}" for a in self.recvs]
            + ([TOKEN_CONNECTOR] if node.spec.phase == "start" else []),
            code,
            language=dtypes.Language.CPP,
            side_effects=True,
            state_fields=fields,
            code_exit=exit_code,
        )
        # tasklet connectors must not be named like arrays: "peers" reads "_peers"
        for connector, name in (("peers", "_peers"), ("comm_handle", "_comm")):
            connect_whole(state, self.sdfg, state.add_read(name), tasklet, connector)
        for a in self.sends:  # packed in the states before
            connect_whole(state, self.sdfg, state.add_read(a.name), tasklet, f"_{a.name}")
        for i in moved:  # runs sent from, received into
            connect_whole(state, self.sdfg, state.add_read(f"_f{i}"), tasklet, f"field{i}")
        for a in self.recvs:  # orders the wait after the start
            connect_whole(state, self.sdfg, tasklet, state.add_write(a.name), f"_{a.name}")
        if node.spec.phase == "start":
            connect_whole(state, self.sdfg, tasklet, state.add_write(TOKEN), TOKEN_CONNECTOR)

    def _requests(self, arena: Arena, kind: str) -> list[str]:
        """C code creating ``arena``'s persistent requests, one per neighbour rank, for the
        segments not sent in place."""
        segments = arena.segments
        side = self.sends if kind == "Send" else self.recvs
        size = arena.dtype.bytes
        listing = lambda values: ", ".join(values)
        tag = self.node.spec.tag_base + arena.group
        return [
            "{",
            f"    const int dirs[] = {{{listing(str(s.direction) for s in segments)}}};",
            "    const long at[] = {"
            + listing(f"(long)({symstr(s.offset, cpp_mode=True)}) * {size}" for s in segments)
            + "};",
            "    const long bytes[] = {"
            + listing(
                f"(long)({symstr(len(arena.fields) * s.size, cpp_mode=True)}) * {size}"
                for s in segments
            )
            + "};",
            "    const bool in_place[] = {"
            + listing(self._in_place_condition(side, s.direction, True) or "0" for s in segments)
            + "};",
            f"    char* base = (char*){self._wire(arena.name)};",
            f"    for (int k = 0; k < {len(self.node.spec.directions)}; ++k) {{",
            "        const int p = peers[k];",
            "        bool first = p >= 0;  // the first direction leading to rank p",
            "        for (int j = 0; j < k; ++j) first = first && peers[j] != p;",
            "        if (!first) continue;",
            f"        int c = 0, lengths[{len(segments)}];",
            f"        MPI_Aint displacements[{len(segments)}];",
            f"        for (int s = 0; s < {len(segments)}; ++s) {{",
            "            if (peers[dirs[s]] != p || in_place[s]) continue;",
            "            if (c > 0 && displacements[c - 1] + lengths[c - 1] == at[s]) {",
            "                lengths[c - 1] += bytes[s];  // side by side: one block",
            "            } else {",
            "                displacements[c] = at[s]; lengths[c++] = bytes[s];",
            "            }",
            "        }",
            "        if (c == 0) continue;  // all in place",
            "        if (c == 1) {",
            (
                f"            MPI_{kind}_init(base + displacements[0], lengths[0], MPI_BYTE, p, {tag},"
                f" comm, &__state->{self.uid}_requests[n++]);"
            ),
            "        } else {",
            "            MPI_Datatype blocks;",
            "            MPI_Type_create_hindexed(c, lengths, displacements, MPI_BYTE, &blocks);",
            "            MPI_Type_commit(&blocks);",
            (
                f"            MPI_{kind}_init(base, 1, blocks, p, {tag}, comm, "
                f"&__state->{self.uid}_requests[n++]);"
            ),
            "            MPI_Type_free(&blocks);",
            "        }",
            "    }",
            "}",
        ]

    def _add_wait(self, state: dace.SDFGState) -> None:
        uid = self.uid
        code = [f"MPI_Waitall(__state->{uid}_count, __state->{uid}_requests, MPI_STATUSES_IGNORE);"]
        if self.in_place:
            code.append(
                f"MPI_Waitall(__state->{uid}_posted, __state->{uid}_in_place, MPI_STATUSES_IGNORE);"
            )
        moved = self._fields_in_place()
        if self.gpu:  # received messages to the device, on the stream: no host wait
            code += [line for a in self.recvs for line in self._stage(a, to_host=False)]
        names = [a.name for a in self.recvs]
        token = [TOKEN_CONNECTOR] if self.node.spec.phase == "finish" else []
        tasklet = state.add_tasklet(
            f"{uid}_mpi_wait",
            ["peers"] + [f"_{n}_in" for n in names] + token,
            [f"_{n}" for n in names] + [f"field{i}" for i in moved],
            "\n".join(code),
            language=dtypes.Language.CPP,
            side_effects=True,
        )
        connect_whole(state, self.sdfg, state.add_read("_peers"), tasklet, "peers")
        for name in names:  # unpacked in the states after
            connect_whole(state, self.sdfg, state.add_read(name), tasklet, f"_{name}_in")
            connect_whole(state, self.sdfg, tasklet, state.add_write(name), f"_{name}")
        for i in moved:  # halos received in place
            connect_whole(state, self.sdfg, tasklet, state.add_write(f"_f{i}"), f"field{i}")
        if token:
            connect_whole(state, self.sdfg, state.add_read(TOKEN), tasklet, TOKEN_CONNECTOR)

    def _fields_in_place(self) -> list[int]:
        """The fields some of whose runs MPI moves (tasklet connectors ``field<i>``)."""
        return sorted({i for runs in self.in_place.values() for i, _ in runs})

    def _post_in_place(self) -> list[str]:
        """C++ posting, per call, the receives and then the sends of the runs that go in
        place: non-persistent requests, as the fields may be other arrays at each call. Runs
        of one field and direction share a tag and match in posting order."""
        if not self.in_place:
            return []
        uid, nfield = self.uid, self.node.spec.field_count
        lines = [
            "{",
            "MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_handle[0]);",
            f"MPI_Request* requests = __state->{uid}_in_place;",
            "int posted = 0;",
        ]
        for kind, call in ((self.recvs, "MPI_Irecv"), (self.sends, "MPI_Isend")):
            for arena in kind:
                for segment in arena.segments:
                    k = segment.direction
                    condition = self._in_place_condition(kind, k, cpp=True)
                    if condition is None:
                        continue
                    sender = k if call == "MPI_Isend" else self.opposite[k]
                    direct = self._direct_condition(kind, k, cpp=True)
                    lines.append(f"if (peers[{k}] >= 0 && {condition}) {{")
                    for where in ("field", "arena"):
                        lines.append(f"if ({direct}) {{" if where == "field" else "} else {")
                        for j, (i, runs) in enumerate(self.in_place[(arena.name, k)]):
                            tag = self.node.spec.tag_base + nfield + sender * nfield + i
                            size = arena.dtype.bytes
                            base = f"field{i}" if where == "field" else f"_{arena.name}"
                            post = (
                                f"{call}((char*){base} + at * {size}, (int)(run * {size}), "
                                f"MPI_BYTE, peers[{k}], {tag}, comm, &requests[posted++]);"
                            )
                            if where == "arena":  # field j of the group, packed
                                runs = runs.packed(segment.offset + j * segment.size)
                            lines += runs.posts(post)
                    lines += ["}", "}"]
        lines += [f"__state->{uid}_posted = posted;", "}"]
        return lines

    def _wire(self, name: str) -> str:
        """What MPI reads or writes: the arena, or on a GPU its pinned host mirror."""
        return mirror(name) if self.gpu else f"_{name}"

    def _allocate_mirror(self, arena: Arena) -> list[str]:
        if not self.gpu:
            return []
        return [
            allocate_mirror(arena.name, symstr(arena.length * arena.dtype.bytes, cpp_mode=True))
        ]

    def _stage(self, arena: Arena, to_host: bool) -> list[str]:
        """Copies of the segments of directions leading to other ranks, on the stream."""
        lines = []
        for s in arena.segments:
            at = symstr(s.offset, cpp_mode=True)
            size = symstr(len(arena.fields) * s.size * arena.dtype.bytes, cpp_mode=True)
            copy = copy_on_stream(arena.name, arena.dtype.ctype, at, size, to_host)
            lines.append(f"if (peers[{s.direction}] >= 0) {copy}")
        return lines
