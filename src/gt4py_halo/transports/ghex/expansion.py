"""The GHEX expansions of both exchange nodes: GHEX's own exchange, called from C++.

Each node becomes one C++ tasklet per phase that calls GHEX (``include/gt4py_halo_ghex.hpp``):
on the first call of a program instance it creates the node's context, pattern and
communication object from the plan (collective: every rank runs the same nodes in the same
order), kept in the program's state struct under the node's ``uid``; each call then describes
the fields (pointers, extents and strides read at run time; a descriptor is kept while its
field's memory and layout stay the same) and runs ``communication_object.exchange``: the
blocking node waits at once, a start node returns and its finish waits. GHEX packs, sends and
unpacks; the node has no message buffers of its own. The generated code is the same on every
rank: what differs (gids and their counts, this rank's block) comes in as run-time arrays.

- ``UnstructuredHaloExchange``: GHEX's unstructured API, from the dim's gids in local order.
  Fields of at most one level axis, contiguous along the local index or the levels.
- ``HaloExchange`` (cartesian): GHEX's structured regular API over the decomposed axes and the
  level axes (whole, halo-free), from this rank's block of the global domain. Fields of any
  layout with a unit-stride axis (GT4Py's padded fields included): GHEX copies runs along it.

CPU fields only; a GPU build of GHEX would add ``schedule_exchange``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import dace
import dace.library
import gridtools_cpp
from dace.symbolic import symstr
from dace.transformation.transformation import ExpandTransformation

from gt4py_halo.compiled.graph import host_tasklet, nested_for, on_device
from gt4py_halo.compiled.lowered import Lowered
from gt4py_halo.compiled.nodes import HaloExchange, UnstructuredHaloExchange
from gt4py_halo.compiled.phases import packs, unpacks
from gt4py_halo.errors import BackendUnavailableError, FieldError
from gt4py_halo.transports.mpi.environment import MPI as MpiEnvironment

try:
    import ghex
except ImportError as error:
    raise BackendUnavailableError(
        "the 'ghex' backend needs GHEX, which is not installed: `pip install 'gt4py_halo[ghex]'`"
        f" ({error})"
    ) from error

_GHEX = Path(ghex.__file__).parent
_LIBRARIES = [str(_GHEX / "lib" / f"lib{name}.so") for name in ("ghex", "oomph_mpi", "hwmalloc")]


@dace.library.environment
class Ghex:
    """GHEX's headers (with GridTools', which they include) and libraries, from the installed
    ``ghex`` package; our glue header next to this module."""

    cmake_minimum_version = None
    cmake_packages: ClassVar = []
    cmake_files: ClassVar = []
    cmake_variables: ClassVar = {}
    cmake_includes: ClassVar = [
        str(_GHEX / "include"),
        str(gridtools_cpp.get_include_dir()),
        str(Path(__file__).parent / "include"),
    ]
    cmake_libraries: ClassVar = _LIBRARIES
    cmake_compile_flags: ClassVar = ["-std=c++17"]
    cmake_link_flags: ClassVar = [f"-Wl,-rpath,{_GHEX / 'lib'}"]
    headers: ClassVar = {"frame": ["gt4py_halo_ghex.hpp"]}
    state_fields: ClassVar = []
    init_code = ""
    finalize_code = ""
    dependencies: ClassVar = [MpiEnvironment]


def _expand(
    node: Any,
    parent_state: dace.SDFGState,
    parent_sdfg: dace.SDFG,
    create: Callable[[dace.SDFG, list[Any]], tuple[str, str]],
    describe: Callable[[Any, int], str],
) -> dace.SDFG:
    """The nested SDFG of ``node``: one C++ tasklet that starts and/or waits for its exchange.

    ``create(sdfg, fields)``: the C++ type of the node's GHEX state and the expression that
    creates it (from the plan arrays, connectors named like them, and ``comm``);
    ``describe(field, i)``: the arguments that describe field ``i`` (``in{i}``) after the slot.
    """
    uid = node.spec.uid
    sdfg = nested_for(node, parent_state, parent_sdfg)
    fields = [sdfg.arrays[f"_f{i}"] for i in range(node.spec.field_count)]
    if on_device(fields):
        raise FieldError(
            "the 'ghex' transport has no compiled GPU exchange yet: use the 'mpi' transport "
            "for GPU fields inside @gh.program"
        )
    ghex_object = f"__state->{uid}_ghex"
    lines = []
    reads = {}
    state_fields = []
    if packs(node.spec.phase):
        reads = {name: f"_{name}" for name in node.spec.plan_arrays} | {"comm_handle": "_comm"}
        kind, created = create(sdfg, fields)
        state_fields.append(f"{kind}* {uid}_ghex = nullptr;")
        lines += [
            f"if (!{ghex_object}) {{",
            "    MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)comm_handle[0]);",
            f"    {ghex_object} = new {created};",
            "}",
        ]
        described = ", ".join(
            f"{ghex_object}->{describe(desc, i)}" for i, desc in enumerate(fields)
        )
        lines.append(f"{ghex_object}->exchange.start({described});")
    if unpacks(node.spec.phase):
        lines.append(f"{ghex_object}->exchange.wait();")
    host_tasklet(
        sdfg,
        node,
        f"{uid}_ghex_{node.spec.phase}",
        "\n".join(lines),
        reads,
        state_fields=state_fields,
        code_exit=f"""{{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) delete {ghex_object};  // GHEX frees its communicator
}}"""
        if packs(node.spec.phase)
        else "",
    )
    return sdfg


@dace.library.register_expansion(UnstructuredHaloExchange, "GHEX")
class ExpandUnstructuredHaloExchangeGhex(ExpandTransformation):
    """Lower ``UnstructuredHaloExchange`` to GHEX's unstructured exchange."""

    environments: ClassVar[list] = [Ghex]
    #: The plan arrays the node gets (``convertible.exchange_sdfg``).
    PLAN_ARRAYS = ("gids", "halo_lids")

    @staticmethod
    def expansion(
        node: Any,
        parent_state: dace.SDFGState,
        parent_sdfg: dace.SDFG,
        lowered: Lowered | None = None,
    ) -> dace.SDFG:
        """``lowered``: nothing to record there, GHEX copies inside its own calls."""

        def create(sdfg: dace.SDFG, fields: list[Any]) -> tuple[str, str]:
            n = symstr(sdfg.arrays["_gids"].shape[0], cpp_mode=True)
            nh = symstr(sdfg.arrays["_halo_lids"].shape[0], cpp_mode=True)
            kind = "gt4py_halo::GhexUnstructured"
            return kind, f"{kind}(comm, gids, {n}, halo_lids, {nh})"

        def describe(desc: Any, i: int) -> str:
            return f"describe({i}, in{i}, {_unstructured_layout(desc, i)})"

        return _expand(node, parent_state, parent_sdfg, create, describe)

    @staticmethod
    def message_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any, bool]]:
        """None: GHEX packs into buffers of its own."""
        return []


@dace.library.register_expansion(HaloExchange, "GHEX")
class ExpandHaloExchangeGhex(ExpandTransformation):
    """Lower the cartesian ``HaloExchange`` to GHEX's structured regular exchange."""

    environments: ClassVar[list] = [Ghex]
    #: The plan arrays the node gets (``convertible.exchange_sdfg``).
    PLAN_ARRAYS = ("domain",)

    @staticmethod
    def expansion(
        node: Any,
        parent_state: dace.SDFGState,
        parent_sdfg: dace.SDFG,
        lowered: Lowered | None = None,
    ) -> dace.SDFG:
        """``lowered``: nothing to record there, GHEX copies inside its own calls."""
        decomposed = len(node.spec.halo)
        fields = [
            parent_sdfg.arrays[e.data.data]
            for e in parent_state.in_edges(node)
            if e.dst_conn.startswith("_f")
        ]
        axes = max(len(desc.shape) for desc in fields)  # decomposed, and the most level axes

        def create(sdfg: dace.SDFG, fields: list[Any]) -> tuple[str, str]:
            kind = f"gt4py_halo::GhexRegular<{axes}>"
            halo = ", ".join(str(w) for side in node.spec.halo for w in side)
            return kind, f"{kind}(comm, {decomposed}, domain, {{{halo}}})"

        def describe(desc: Any, i: int) -> str:
            extents, strides, layout = _regular_layout(desc, i, axes)
            return (
                f"template describe<gridtools::layout_map<{layout}>>({i}, in{i}, "
                f"{{{extents}}}, {{{strides}}})"
            )

        return _expand(node, parent_state, parent_sdfg, create, describe)

    @staticmethod
    def message_buffers(node: Any, outer: dict[str, Any]) -> list[tuple[str, list, Any, bool]]:
        """None: GHEX packs into buffers of its own."""
        return []


def _unstructured_layout(desc: Any, i: int) -> str:
    """GHEX's description of field ``i``: levels, whether they are contiguous, outer stride."""
    if len(desc.shape) == 1:
        return f"1, true, {symstr(desc.strides[0], cpp_mode=True)}"
    if len(desc.shape) == 2:
        levels = symstr(desc.shape[1], cpp_mode=True)
        if str(desc.strides[1]) == "1":
            return f"{levels}, true, {symstr(desc.strides[0], cpp_mode=True)}"
        if str(desc.strides[0]) == "1":
            return f"{levels}, false, {symstr(desc.strides[1], cpp_mode=True)}"
    raise FieldError(
        f"field {i}: the 'ghex' transport exchanges unstructured fields of one or two axes, "
        f"contiguous along one of them; got {len(desc.shape)} axes"
        + (
            ""
            if len(desc.shape) > 2
            else ", neither of unit stride on every rank (a strided view, or ranks whose fields "
            "are contiguous along different axes?)"
        )
    )


def _regular_layout(desc: Any, i: int, axes: int) -> tuple[str, str, str]:
    """Extents, element strides and GHEX layout map of field ``i`` described with ``axes``
    axes (the ones it lacks: extent 1). The layout map names the unit-stride axis (the last
    one, if several), along which GHEX copies runs; the other axes keep their order."""
    unit = [k for k, stride in enumerate(desc.strides) if str(stride) == "1"]
    if not unit:
        raise FieldError(
            f"field {i}: the 'ghex' transport exchanges cartesian fields with an axis of unit "
            "stride on every rank; got one of none (a strided view such as a[:, ::2], or ranks "
            "whose fields are contiguous along different axes?; the 'mpi' transport takes any "
            "strides)"
        )
    extra = axes - len(desc.shape)
    extents = [symstr(n, cpp_mode=True) for n in desc.shape] + ["1"] * extra
    strides = [symstr(n, cpp_mode=True) for n in desc.strides] + ["1"] * extra
    others = [k for k in range(axes) if k != unit[-1]]
    layout = [axes - 1 if k == unit[-1] else others.index(k) for k in range(axes)]
    return ", ".join(extents), ", ".join(strides), ", ".join(map(str, layout))
