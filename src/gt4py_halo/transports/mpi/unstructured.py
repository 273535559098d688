"""The MPI expansion of ``UnstructuredHaloExchange``: gathered buffers, persistent requests.

Gathers and scatters are the transport-neutral lowering (``compiled/gather_lowering.py``);
MPI supplies the start tasklet (on the first call, persistent requests in a loop over the
neighbour ranks, one per neighbour and field each way and one for the stamp of the running
call, kept in the program's state struct; then ``MPI_Startall``) and the wait tasklet
(``MPI_Waitall``, then the sizes and stamps received checked as in the cartesian expansion).

For GPU fields MPI works on pinned host mirrors of the device buffers, staged as in the
cartesian expansion (``host_staging.py``): one host wait per exchange, before sending.
"""

from __future__ import annotations

from typing import Any, ClassVar

import dace
from dace.symbolic import symstr

from gt4py_halo.compiled import host_staging as staging
from gt4py_halo.compiled.gather_lowering import ExpandThroughGathers, Messages
from gt4py_halo.compiled.graph import HostCode
from gt4py_halo.compiled.nodes import UnstructuredHaloExchange
from gt4py_halo.compiled.shared_functions import TAG_BASE, exchange_constant
from gt4py_halo.compiled.stamps import STAMP_BYTES
from gt4py_halo.transports.mpi.environment import MPI as MpiEnvironment
from gt4py_halo.transports.mpi.expansion import REQUESTS, checked_wait


def _start_code(
    sdfg: dace.SDFG, node: Any, sends: Messages, recvs: Messages, gpu: bool
) -> HostCode:
    uid = node.spec.uid
    count = symstr(sdfg.arrays["_neighbours"].shape[0], cpp_mode=True)
    fields = node.spec.field_count
    names = [name for name, *_ in recvs + sends]
    lines = [
        "MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_handle[0]);",
        f"__state->{uid}_count = 2 * ({fields} + 1) * ({count});",
        f"__state->{uid}_requests = new MPI_Request[__state->{uid}_count + 1];",
        f"__state->{uid}_statuses = new MPI_Status[__state->{uid}_count + 1];",
        f"__state->{uid}_expected = new long[__state->{uid}_count + 1];",
        f"__state->{uid}_stamps = new char*[__state->{uid}_count + 1]();",
        f"__state->{uid}_received = new long long[({count}) + 1];",
        "int n = 0;",
    ]
    if gpu:
        lines += [staging.allocate_mirror(name, _bytes(sdfg, name)) for name in names]
    lines.append(f"for (int p = 0; p < {count}; ++p) {{")
    messages = [(r, "Recv", "recv_ptr") for r in recvs] + [(s, "Send", "send_ptr") for s in sends]
    for (name, _, dtype, i, cell), kind, ptr in messages:
        cells = symstr(cell, cpp_mode=True)
        wire = f"(({dtype.ctype}*){staging.mirror(name)})" if gpu else f"_{name}"
        size = f"({ptr}[p + 1] - {ptr}[p]) * ({cells}) * {dtype.bytes}"
        lines.append(f"    __state->{uid}_expected[n] = {size if kind == 'Recv' else -1};")
        lines.append(
            f"    MPI_{kind}_init({wire} + {ptr}[p] * ({cells}), {size}, MPI_BYTE, neighbours[p], "
            f"{TAG_BASE} + {i}, comm, &__state->{uid}_requests[n++]);"
        )
    # the stamps: a message of their own per neighbour each way (the fields' messages are
    # parts of buffers filled back to back)
    stamps = (
        (f"&__state->{uid}_received[p]", STAMP_BYTES, "Recv"),
        (f"&__state->{uid}_stamp", -1, "Send"),
    )
    for buffer, expected, kind in stamps:
        lines += [
            f"    __state->{uid}_expected[n] = {expected};",
            f"    __state->{uid}_stamps[n] = (char*){buffer};",
            (
                f"    MPI_{kind}_init({buffer}, {STAMP_BYTES}, MPI_BYTE, neighbours[p], "
                f"{TAG_BASE} + {fields}, comm, &__state->{uid}_requests[n++]);"
            ),
        ]
    lines.append("}")
    init = "\n    ".join(lines)
    copy_to_host = ""
    if gpu:  # the gathered messages to the host; MPI may only read them after this
        copies = [_stage(sdfg, name, to_host=True) for name, *_ in sends]
        copy_to_host = "\n".join([*copies, staging.WAIT_FOR_STREAM])
    code = (
        exchange_constant(TAG_BASE, node.spec.tag_base)
        + f"""
if (!__state->{uid}_ready) {{
    {init}
    __state->{uid}_ready = 1;
}}
__state->{uid}_stamp = comm_handle[1];
{copy_to_host}
MPI_Startall(__state->{uid}_count, __state->{uid}_requests);
"""
    )
    exit_code = f"""{{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (__state->{uid}_ready) {{
        if (!finalized)
            for (int n = 0; n < __state->{uid}_count; ++n) MPI_Request_free(&__state->{uid}_requests[n]);
        delete[] __state->{uid}_requests;
        delete[] __state->{uid}_statuses;
        delete[] __state->{uid}_expected;
        delete[] __state->{uid}_stamps;
        delete[] __state->{uid}_received;{staging.free_mirrors(names) if gpu else ""}
    }}
}}"""
    state_fields = (
        f"MPI_Request* {uid}_requests = nullptr;",
        f"MPI_Status* {uid}_statuses = nullptr;",
        f"long* {uid}_expected = nullptr;",
        f"char** {uid}_stamps = nullptr;",  # per request: its stamp's place (receives)
        f"long long* {uid}_received = nullptr;",  # the stamps received, per neighbour
        f"long long {uid}_stamp = 0;",  # this rank's, of the call that started it
        f"int {uid}_count = 0;",
        f"int {uid}_ready = 0;",
        *(staging.mirror_fields(names) if gpu else []),
    )
    return HostCode(code, state_fields, exit_code)


def _wait_code(sdfg: dace.SDFG, node: Any, recvs: Messages, gpu: bool) -> HostCode:
    uid = node.spec.uid
    state = f"__state->{uid}"
    code = [checked_wait(*(f"{state}_{name}" for name in REQUESTS))]
    if gpu:  # received messages to the device, on the stream: no host wait
        code += [_stage(sdfg, name, to_host=False) for name, *_ in recvs]
    return HostCode("\n".join(code))


def _bytes(sdfg: dace.SDFG, name: str) -> str:
    desc = sdfg.arrays[name]
    return symstr(desc.total_size * desc.dtype.bytes, cpp_mode=True)


def _stage(sdfg: dace.SDFG, name: str, to_host: bool) -> str:
    """A whole buffer to (from) its host mirror, on the stream: every cell goes to a
    neighbour rank."""
    return staging.copy_on_stream(
        name, sdfg.arrays[name].dtype.ctype, "0", _bytes(sdfg, name), to_host
    )


@dace.library.register_expansion(UnstructuredHaloExchange, "MPI")
class ExpandUnstructuredHaloExchangeMPI(ExpandThroughGathers):
    """Lower ``UnstructuredHaloExchange`` to gathers, MPI persistent requests and scatters."""

    environments: ClassVar[list] = [MpiEnvironment]
    start_code = staticmethod(_start_code)
    wait_code = staticmethod(_wait_code)
