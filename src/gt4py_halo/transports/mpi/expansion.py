"""The MPI expansion of ``HaloExchange``: arenas sent with persistent requests.

The arenas, pack, unpack and self-copy maps are the transport-neutral lowering
(``compiled/arena_lowering.py``); MPI supplies the start and wait tasklets:

- **start**: on its first run it creates the persistent requests, per group one each way per
  neighbour rank (``_requests``); then it writes the stamp of the running call
  (``compiled/stamps.py``) before the segments of each message it sends, and
  ``MPI_Startall``;
- **wait**: ``MPI_Waitall``, then the size and stamp of each message received checked
  against those expected (``include/gt4py_halo_mpi.hpp``: ranks that passed fields of other
  levels or dtypes to the exchange, ranks out of step with each other, are an error where a
  message of another size or call arrives, not wrong halos).

On a CPU, a direction whose boxes are a few long contiguous runs of the fields sends each run
as an MPI message of its own, posted by the start tasklet and waited for by the wait tasklet
(``in_place.py``): straight from and into the fields, skipping the pack and unpack maps, where
this rank's fields are dense (a run-time test), else from and into the arena segments.

The requests live in the program's state struct under the node's ``uid`` (on a CPU, in the
element of the struct array the exchanges sharing its function index, ``shared_functions.py``):
an exchange allocates nothing and creates no request after its first call.

The PyPI MPICH is not CUDA-aware: for GPU fields MPI works on pinned host mirrors of the
device arenas (in the state struct, allocated on the first call), and the MPI tasklets copy
the segments of remote directions to and from them asynchronously on the program's stream.
The start tasklet then synchronizes the stream once — the one host wait standard MPI needs
before sending; the wait tasklet's copies back need none (``host_staging.py``). Both
tasklets stay host code.
"""

from __future__ import annotations

from typing import ClassVar

import dace
from dace.symbolic import symstr

from gt4py_halo.compiled.arena_lowering import ArenaLowering, ExpandThroughArenas
from gt4py_halo.compiled.arenas import Arena
from gt4py_halo.compiled.graph import HostCode
from gt4py_halo.compiled.host_staging import (
    WAIT_FOR_STREAM,
    allocate_mirror,
    copy_on_stream,
    free_mirrors,
    mirror,
    mirror_fields,
)
from gt4py_halo.compiled.in_place import posts
from gt4py_halo.compiled.nodes import HaloExchange
from gt4py_halo.compiled.shared_functions import TAG_BASE, exchange_constant
from gt4py_halo.compiled.stamps import STAMP_BYTES
from gt4py_halo.decomposition.plan import MAX_RUNS
from gt4py_halo.transports.mpi.environment import MPI as MpiEnvironment


class _MpiLowering(ArenaLowering):
    MOVES_RUNS_IN_PLACE = True

    def start_code(self) -> HostCode:
        """Create the requests on the first call, then start them.

        Per field group, one message per neighbour rank each way: the stamp (in its room
        before the first of them) and the segments of the directions leading to it, in the
        order they lie in the arena (``place_segments``), merged where side by side (a
        contiguous message), else described by an MPI datatype of a few blocks (where a
        segment in the middle goes in place, ``_post_in_place``; where all do, the stamp
        alone). A direction leading to the rank itself
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
        run.append(stamp_sends(f"__state->{uid}"))
        if self.gpu:  # the packed messages to the host; MPI may only read them after this
            run += [line for a in self.sends for line in self._stage(a, to_host=True)]
            run.append(f"if (__state->{uid}_count > 0) {WAIT_FOR_STREAM}")
        run.append(f"MPI_Startall(__state->{uid}_count, __state->{uid}_requests);")
        init_code = "\n    ".join(init)
        code = (
            exchange_constant(TAG_BASE, node.spec.tag_base)
            + f"""
if (!__state->{uid}_ready) {{
    {init_code}
    __state->{uid}_ready = 1;
}}
"""
            + "\n".join(run)
        )
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
            f"MPI_Status {uid}_statuses[{count}];",
            f"long {uid}_expected[{count}];",
            f"char* {uid}_stamps[{count}];",  # where each message's stamp lies
            f"long long {uid}_stamp = 0;",  # this rank's, of the call that started it
            f"int {uid}_count = 0;",
            f"int {uid}_ready = 0;",
        ]
        if self.in_place:
            most = MAX_RUNS * sum(len(runs) for runs in self.in_place.values())
            fields += [
                f"MPI_Request {uid}_in_place[{most}];",
                f"MPI_Status {uid}_in_place_statuses[{most}];",
                f"long {uid}_in_place_expected[{most}];",
                f"int {uid}_posted = 0;",
            ]
        if self.gpu:
            fields += mirror_fields(a.name for a in arenas)
        return HostCode(code, tuple(fields), exit_code)

    def _requests(self, arena: Arena, kind: str) -> list[str]:
        """C code creating ``arena``'s persistent requests, one per neighbour rank, for the
        segments not sent in place and the stamp, with the bytes each receive expects (-1: a
        send) and where each stamp lies."""
        segments = arena.segments
        sending = kind == "Send"
        size = arena.dtype.bytes
        listing = lambda values: ", ".join(values)
        tag = f"{TAG_BASE} + {arena.group}"
        expected = "total" if kind == "Recv" else "-1"
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
            + listing(self.flag(sending, s.direction, False) or "0" for s in segments)
            + "};",
            f"    char* base = (char*){self._wire(arena.name)};",
            f"    int placed[{len(segments)}];  // the segments in the arena's order",
            f"    for (int s = 0; s < {len(segments)}; ++s) {{",
            "        int q = s;",
            "        for (; q > 0 && at[placed[q - 1]] > at[s]; --q) placed[q] = placed[q - 1];",
            "        placed[q] = s;",
            "    }",
            f"    for (int k = 0; k < {len(self.node.spec.directions)}; ++k) {{",
            "        const int p = peers[k];",
            "        bool first = p >= 0;  // the first direction leading to rank p",
            "        for (int j = 0; j < k; ++j) first = first && peers[j] != p;",
            "        if (!first) continue;",
            f"        int c = 0, lengths[{len(segments) + 1}];",
            f"        MPI_Aint displacements[{len(segments) + 1}];",
            "        long stamp = -1;  // before rank p's first segment (place_segments)",
            f"        for (int q = 0; q < {len(segments)}; ++q) {{",
            "            const int s = placed[q];",
            "            if (peers[dirs[s]] != p) continue;",
            "            if (stamp < 0) {",
            f"                stamp = at[s] - {STAMP_BYTES};",
            f"                displacements[c] = stamp; lengths[c++] = {STAMP_BYTES};",
            "            }",
            "            if (in_place[s]) continue;",
            "            if (displacements[c - 1] + lengths[c - 1] == at[s]) {",
            "                lengths[c - 1] += bytes[s];  // side by side: one block",
            "            } else {",
            "                displacements[c] = at[s]; lengths[c++] = bytes[s];",
            "            }",
            "        }",
            "        if (stamp < 0) continue;  // no segment to or from rank p in this arena",
            "        long total = 0;",
            "        for (int b = 0; b < c; ++b) total += lengths[b];",
            f"        __state->{self.uid}_expected[n] = {expected};",
            f"        __state->{self.uid}_stamps[n] = base + stamp;",
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

    def wait_code(self) -> HostCode:
        uid = self.uid
        state = f"__state->{uid}"
        code = [checked_wait(*(f"{state}_{name}" for name in REQUESTS))]
        if self.in_place:  # (their stamps go with the arena's messages to the same ranks)
            places = ("posted", "in_place", "in_place_statuses", "in_place_expected")
            code.append(checked_wait(*(f"{state}_{name}" for name in places), "nullptr", "0"))
        if self.gpu:  # received messages to the device, on the stream: no host wait
            code += [line for a in self.recvs for line in self._stage(a, to_host=False)]
        return HostCode("\n".join(code))

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
            f"long* expected = __state->{uid}_in_place_expected;",
            "int posted = 0;",
        ]
        for sending, call in ((False, "MPI_Irecv"), (True, "MPI_Isend")):
            for arena in self.sends if sending else self.recvs:
                for segment in arena.segments:
                    k = segment.direction
                    condition = self.flag(sending, k, False)
                    if condition is None:
                        continue
                    sender = k if sending else self.opposite[k]
                    lines.append(f"if (peers[{k}] >= 0 && {condition}) {{")
                    fields = self.in_place[(arena.name, k)]
                    size = arena.dtype.bytes
                    tags = [
                        f"(int)({TAG_BASE} + {nfield + sender * nfield + i})" for i, _ in fields
                    ]
                    bytes_expected = "-1" if sending else f"run * {size}"
                    post = (
                        f"{call}(base[f] + at * {size}, (int)(run * {size}), MPI_BYTE, "
                        f"peers[{k}], tags[f], comm, &requests[posted]); "
                        f"expected[posted++] = {bytes_expected};"
                    )
                    # from and into the fields themselves, or the runs packed in the arena
                    direct = self.flag(sending, k, True)
                    in_fields = [f"(char*)field{i}" for i, _ in fields]
                    packed = [
                        runs.packed(segment.offset + j * segment.size)
                        for j, (_, runs) in enumerate(fields)
                    ]
                    for test, boxes, bases in (
                        (f"if ({direct}) {{", [runs for _, runs in fields], in_fields),
                        ("} else {", packed, [f"(char*)_{arena.name}"] * len(fields)),
                    ):
                        tables = {"char* const base[]": bases, "const int tags[]": tags}
                        lines += [test, *posts(boxes, tables, post)]
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


@dace.library.register_expansion(HaloExchange, "MPI")
class ExpandHaloExchangeMPI(ExpandThroughArenas):
    """Lower ``HaloExchange`` to pack maps, MPI persistent requests and unpack maps."""

    environments: ClassVar[list] = [MpiEnvironment]
    LOWERING = _MpiLowering


def stamp_sends(state: str) -> str:
    """C++ writing the stamp of the running call (``comm_handle[1]``, written there before
    each call: ``stamps.StepClock``, ``_native.Again``) into the messages the exchange sends:
    its state members ``<state>_...`` of ``REQUESTS``."""
    return f"""{state}_stamp = comm_handle[1];
for (int n = 0; n < {state}_count; ++n)
    if ({state}_expected[n] < 0) memcpy({state}_stamps[n], &{state}_stamp, {STAMP_BYTES});"""


#: The state members of an exchange's persistent requests that ``checked_wait`` reads.
REQUESTS = ("count", "requests", "statuses", "expected", "stamps", "stamp")


def checked_wait(
    count: str, requests: str, statuses: str, expected: str, stamps: str, stamp: str
) -> str:
    """C++ waiting for the ``count`` ``requests``, then checking what the receives among
    them got against what they expect (``gt4py_halo_mpi::wait_checked``): its size
    (``expected``) and, where ``stamps`` gives its place, its stamp (``stamp``)."""
    return (
        f"gt4py_halo_mpi::wait_checked({count}, {requests}, {statuses}, {expected}, "
        f"{stamps}, {stamp});"
    )
