"""A GT4Py program with neighbour tables (unstructured mesh) inside a compiled step.

GT4Py's DaCe backend lowers a program using ``E2C``-like offsets to an SDFG that reads a
table array ``gt_conn_E2C`` of symbolic sizes and strides (checked with gt4py 1.2.3), but its
``__sdfg_closure__`` hands DaCe only that symbolic descriptor, not the table: the caller must
pass the tables. And each rank's tables have their own lengths, so they must stay symbolic for
every rank to parse the same SDFG.

``NeighbourTables(offset_provider).bind(program)`` binds a program to this rank's tables. The
result is called like the program without ``offset_provider``, from Python (the runtime path)
or inside ``@gh.program``, where its tables become closure arrays of the step: arrays whose
descriptors keep GT4Py's symbolic sizes and strides, and whose values ``Program`` passes, with
the values of those symbols, at each call (``program._closure_symbols``). Host (NumPy) tables
only, like the unstructured exchange nodes.
"""

from typing import Any

import dace
import numpy as np
from dace.frontend.python.common import SDFGClosure, SDFGConvertible


class NeighbourTable(np.ndarray):
    """A rank's neighbour table, described to DaCe as GT4Py describes it: symbolic shape."""

    descriptor: dace.data.Array

    def __descriptor__(self) -> dace.data.Array:
        return self.descriptor


class NeighbourTables:
    """One rank's neighbour tables (a GT4Py ``offset_provider``), to bind programs to.

    Programs bound to the same ``NeighbourTables`` share its table arrays: DaCe gives one
    array object one name in a step, so a table read by several programs is passed once.
    """

    def __init__(self, offset_provider: dict[str, Any]) -> None:
        from gt4py.next import common
        from gt4py.next.program_processors.runners.dace import sdfg_args

        self.offset_provider = offset_provider
        types = common.offset_provider_to_type(offset_provider)
        self.arrays: dict[str, NeighbourTable] = {}
        for offset, connectivity in offset_provider.items():
            if not common.is_neighbor_table(connectivity):
                continue
            name = sdfg_args.connectivity_identifier(offset)
            dims = connectivity.domain.dims
            table = np.asarray(connectivity.ndarray).view(NeighbourTable)  # host tables only
            table.descriptor = dace.data.Array(
                dace.dtypes.dtype_to_typeclass(table.dtype.type),
                shape=[sdfg_args.field_size_symbol(name, d, types) for d in dims],
                strides=[sdfg_args.field_stride_symbol(name, d, types) for d in dims],
            )
            self.arrays[name] = table

    def bind(self, program: Any) -> "ProgramWithTables":
        """``program`` (GT4Py, DaCe backend), called with these tables wherever it runs."""
        return ProgramWithTables(program, self)


class ProgramWithTables(SDFGConvertible):
    """A GT4Py program bound to one rank's neighbour tables; see the module docstring."""

    def __init__(self, program: Any, tables: NeighbourTables) -> None:
        self._program = program
        self._tables = tables
        self._for_sdfg = program.with_backend(_uncached_lowering(program.backend))
        self._for_sdfg = self._for_sdfg.with_compilation_options(
            connectivities=tables.offset_provider
        )
        self.__name__ = getattr(program, "__name__", type(program).__name__)

    @property
    def gt4py_program(self) -> Any:
        """The GT4Py program bound (what ``gh.halo`` reads the signature and writes of)."""
        return self._program

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self._program(*args, offset_provider=self._tables.offset_provider, **kwargs)

    def __sdfg__(self, *args: Any, **kwargs: Any) -> dace.SDFG:
        return self._for_sdfg.__sdfg__(*args, **kwargs)

    def __sdfg_signature__(self) -> tuple[list[str], list[str]]:
        return self._for_sdfg.__sdfg_signature__()

    def __sdfg_closure__(self, reevaluate: Any = None) -> dict[str, Any]:
        return dict(self._tables.arrays)

    def __gt4py_halo_key__(self) -> str | None:
        """The program with this rank's tables (``compiled/step_cache.py``)."""
        from gt4py_halo.compiled.step_cache import value_key

        return value_key(self._for_sdfg)

    def closure_resolver(
        self, constant_args: Any, given_args: Any, parent_closure: Any = None
    ) -> SDFGClosure:
        """DaCe's preprocessor collects the step's closure arrays through this."""
        closure = SDFGClosure()
        for name, table in self._tables.arrays.items():
            closure.closure_arrays[name] = (name, table.descriptor, lambda t=table: t, False)
        return closure


def _uncached_lowering(backend: Any) -> Any:
    """``backend`` with a lowering to GTIR that keeps no results.

    gt4py 1.2.3's ``__sdfg__`` modifies, in place, the stage its cached lowering returned
    (``data``: after the field-view transforms; ``args.offset_provider``: tables replaced by
    their types). A later compilation of the same program for a call from Python gets that
    stage from the cache and fails (``AssertionError`` in ``domain_utils.translate``). Lowering
    without the cache gives ``__sdfg__`` a stage of its own.
    """
    import dataclasses

    from gt4py.next.ffront.past_to_itir import past_to_gtir_factory

    transforms = dataclasses.replace(backend.transforms, past_to_itir=past_to_gtir_factory(False))
    return dataclasses.replace(backend, transforms=transforms)
