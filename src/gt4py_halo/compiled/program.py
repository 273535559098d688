"""``@gh.program``: a model step of GT4Py programs and halo exchanges as one compiled SDFG.

The pipeline reads like gt4py's own workflow, one step after the other:

1. parse: DaCe's frontend turns the step into an SDFG; GT4Py programs (``__sdfg__``) and
   ``ex.exchange`` calls (``HaloExchange`` nodes) become nested SDFGs. Array arguments get
   symbolic shapes and strides, so one SDFG serves every rank whatever its block size;
2. inline: ``simplify`` inlines the nested SDFGs into one graph;
3. lower: each exchange node is expanded with its transport (``node.implementation``);
4. on a GPU simplify again (the expansions inlined), then compile on one rank and load on
   all (``build_once``).

A build recorded by an earlier run skips all four (``step_cache``).

Compiled steps are kept per argument signature (dtypes and ranks of arrays, types of
scalars): a step called with new shapes reuses its build, as an instance of its own (message
buffers are sized for the shapes).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import ctypes
import dataclasses
import functools
import hashlib
import inspect
import json
import logging
import numbers
import os
import re
import textwrap
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dace
import numpy as np
from dace.frontend.python import parser as dace_parser
from dace.frontend.python.common import DaceSyntaxError
from dace.sdfg.state import ReturnBlock
from dace.transformation.interstate import GPUTransformSDFG
from mpi4py import MPI

from gt4py_halo import _native, profiling, transports
from gt4py_halo.annotations import HaloValidity, note_written
from gt4py_halo.build_once import arrive, build_on_root, largest
from gt4py_halo.compiled import step_cache
from gt4py_halo.compiled.arena_lowering import place_attached_segments
from gt4py_halo.compiled.bindings import bindings
from gt4py_halo.compiled.cache_files import building_in, linked_libraries, load_build
from gt4py_halo.compiled.convertible import (
    BY_PREFIX,
    CLOSURE_PREFIX,
    PLANS,
    CompiledExchangeData,
    canonical_names,
    handle_name,
    process_prefix,
    renamed,
)
from gt4py_halo.compiled.fusion import FusionReport, fuse_exchange_maps
from gt4py_halo.compiled.graph import (
    ignore_assigned_names,
    isolate_nested_sdfgs,
    no_history,
    no_line_info,
    sort_assignments,
)
from gt4py_halo.compiled.gt4py_translations import translated_once
from gt4py_halo.compiled.iteration_order import order_maps_by_strides
from gt4py_halo.compiled.last_call import (
    SLOTS,
    Conversion,
    LastCall,
    add_again_entry,
    again_code,
    element_strides,
)
from gt4py_halo.compiled.lowered import Lowered
from gt4py_halo.compiled.message_buffers import attach_message_buffers
from gt4py_halo.compiled.neighbour_tables import NeighbourTable
from gt4py_halo.compiled.nodes import EXCHANGE_NODES, HaloExchange
from gt4py_halo.compiled.placement import PlacedInStep, Placement, place_exchanges
from gt4py_halo.compiled.producer_fusion import fuse_packs_into_producers
from gt4py_halo.compiled.shared_functions import (
    share_exchange_functions,
)
from gt4py_halo.compiled.split_phase import check_all_finished, connect_pairs
from gt4py_halo.compiled.stamps import StepClock
from gt4py_halo.compiled.threads import run_sequentially
from gt4py_halo.compiled.timers import add_timers
from gt4py_halo.decomposition.plan import IN_PLACE_MIN_BYTES, ExchangePlan
from gt4py_halo.errors import FieldError, HaloError, ProgramError, RanksDisagreeError
from gt4py_halo.gt4py_support import openmp_threads
from gt4py_halo.runtime.exchange import Exchange
from gt4py_halo.runtime.fields import check_disjoint, field_spec
from gt4py_halo.transports.mpi.runtime import StepWaits

log = logging.getLogger(__name__)

#: How a cartesian exchange's copies are laid out: ``program(copy_maps=...)``.
COPY_MAPS = ("direction", "arena")


class Program(_native.Repeating):
    """A step function compiled, with its halo exchanges, into one SDFG per signature.

    A call that passes the arguments of a kept call again runs in C, no Python between the
    caller and the step (``_native.Repeating``, ``_keep_calls``); every other call is
    ``_called``."""

    def __init__(
        self,
        function: Callable[..., None],
        comm: MPI.Comm | None = None,
        device: str = "cpu",
        copy_maps: str | None = None,
        pack_in_producers: bool | None = None,
        in_place_min_bytes: int | None = IN_PLACE_MIN_BYTES,
        exchange: Any = None,
    ) -> None:
        if device not in ("cpu", "gpu"):
            raise ProgramError(f"device must be 'cpu' or 'gpu', got {device!r}")
        if copy_maps not in (None, *COPY_MAPS):
            raise ProgramError(f"copy_maps must be one of {COPY_MAPS} or None, got {copy_maps!r}")
        if in_place_min_bytes is not None and (
            not isinstance(in_place_min_bytes, int) or in_place_min_bytes < 1
        ):
            raise ProgramError(
                f"in_place_min_bytes must be a positive int or None, got {in_place_min_bytes!r}"
            )
        if pack_in_producers is not None and not isinstance(pack_in_producers, bool):
            raise ProgramError(
                f"pack_in_producers must be True, False or None, got {pack_in_producers!r}"
            )
        if comm is not None and not isinstance(comm, MPI.Comm):
            raise ProgramError(f"comm must be an mpi4py communicator or None, got {comm!r}")
        if exchange is not None and not isinstance(exchange, Exchange):
            raise ProgramError(
                f"exchange must be an exchange (gh.make_exchange) or None, got {exchange!r}"
            )
        if isinstance(function, (staticmethod, classmethod)):
            raise ProgramError(
                f"gh.program above @{type(function).__name__}: put it below "
                f"(@{type(function).__name__} above @gh.program)"
            )
        _check_parameters(function)
        functools.update_wrapper(self, function)
        self._clock = StepClock(self.__module__, self.__qualname__)  # (``stamps.py``)
        self._options = (comm, device, copy_maps, pack_in_producers, in_place_min_bytes, exchange)
        self._attribute: str | None = None  # the name it has in a class body
        self._exchange = exchange
        self._valid = HaloValidity()  # the arrays a call left valid
        self._comm = comm if comm is not None else MPI.COMM_WORLD
        self._device = device
        self._copy_maps = copy_maps or ("arena" if device == "gpu" else "direction")
        self._pack_in_producers = (
            device == "gpu" if pack_in_producers is None else pack_in_producers
        )
        self._in_place_min_bytes = in_place_min_bytes or 0
        self._one_thread: bool | None = None  # every rank one thread, at the first build
        self._bindings: tuple = ()  # the names it read at its first build, and as written
        self._bound_names: list[str] = []
        self._built: list[tuple] = []  # the keys of its builds, in order: alike on every rank
        self._binaries: dict[tuple, _Binary] = {}  # per build key
        self._layouts: dict[tuple, list] = {}  # per build key
        self._chosen: dict[tuple, tuple] = {}  # per local pattern (``_local_pattern``): a key
        self._builds: dict[tuple, tuple] = {}  # per local pattern and key: an instance
        self._lowered: dict[tuple, Lowering] = {}  # per build key
        self._shown: dict[tuple, tuple[dace.SDFG, FusionReport]] = {}  # per build key
        self._last_calls: list[LastCall] = []  # the most recently run first (``SLOTS``)

    @functools.cached_property
    def _placement(self) -> Placement | None:
        """The exchanges placed from the programs' halo annotations (``exchange=``): at first
        use, as DaCe resolves the step's names at its first build (a program or attribute
        defined after the step was made is found)."""
        if self._exchange is None:
            return None
        return place_exchanges(self.__wrapped__, self._exchange)

    @functools.cached_property
    def _source(self) -> tuple[list, list]:
        """The step's assignments to plain names and its reshapes (``step_source``)."""
        return step_source(self.__wrapped__)

    @functools.cached_property
    def _dace_program(self) -> Any:
        function = self.__wrapped__ if self._placement is None else self._placement.function
        if inspect.ismethod(function):  # ``self`` is its object, resolved like a global
            program = dace.method(function.__func__).__get__(function.__self__)
        else:
            program = dace.program(function)
        program.global_vars = {}  # taken for each parse (``_globals``)
        # types come from the call's arguments: DaCe would take an annotation over them (an
        # array's, C-ordered strides for a padded field; a string one, from ``from __future__
        # import annotations``, read as an array of characters)
        program.signature = program.signature.replace(
            parameters=[
                p.replace(annotation=p.empty) for p in program.signature.parameters.values()
            ],
            return_annotation=inspect.Signature.empty,
        )
        return program

    @contextlib.contextmanager
    def _globals(self) -> Iterator[None]:
        """While DaCe resolves the step's names: its copy of the step's globals and closure
        (``global_vars``, by DaCe's own function), which it takes when the program is made and
        keeps; arrays among them would live as long as the step. Taken afresh for each parse,
        dropped after."""
        program = self._dace_program
        program.global_vars = dace_parser._get_locals_and_globals(program.f)
        try:
            yield
        finally:
            program.global_vars = {}

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        """A step defined in a class body is, for each object, a step of its bound method,
        made at first use and kept in the object (``functools.cached_property``'s way):
        the object's attributes it reads are resolved like globals, for that object."""
        if obj is None:
            return self
        if self._attribute is None or not hasattr(obj, "__dict__"):
            raise ProgramError(
                f"{self.__name__}: a step in a class body is kept per object in the object's "
                f"__dict__, under the name the class body gave it; {type(obj).__name__} objects "
                "have no __dict__ (__slots__), or the step was set on the class after the class "
                "was made. Make it in __init__ instead: self.step = gh.program(self.<method>)"
            )
        bound = Program(self.__wrapped__.__get__(obj, objtype), *self._options)
        obj.__dict__[self._attribute] = bound
        return bound

    def _called(self, *args: Any, **kwargs: Any) -> None:
        if kwargs or len(args) != len(self._dace_program.argnames):
            try:
                args = self._positional(args, kwargs)
            except ProgramError as error:  # raised on every rank (``_build``)
                self._call(args, error)
                return
        # a model calls its step with the same fields, or swaps two sets between calls
        calls = self._last_calls
        try:
            if self._placement is not None:  # exchanges from Python first, on arguments checked
                kept = next((n for n, call in enumerate(calls) if call.same(args)), None)
                if kept is None:
                    self._call(args)
                    return
                self._keep_placement_valid(args, [_plain(a) for a in args])
            if calls and calls[0].again(args):
                return
            for n in range(1, len(calls)):
                if calls[n].again(args):
                    calls.insert(0, calls.pop(n))  # the most recently run first
                    return
        except _native.Rebound as rebound:  # this rank alone may see it: no collective
            raise self._rebound(rebound.args[0]) from None
        self._call(args)

    def _positional(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """A call's arguments in the order of the step's parameters, defaults filled in;
        ``ProgramError`` where they do not fit its signature."""
        try:
            bound = inspect.signature(self.__wrapped__).bind(*args, **kwargs)
        except TypeError as error:
            raise ProgramError(f"{self.__name__}: {error}") from None
        bound.apply_defaults()
        return bound.args

    def _call(self, args: tuple, failure: ProgramError | None = None) -> None:
        """A call whose arguments differ from those of the kept calls: they are converted
        for the compiled step (``Conversion``) (built first where none fits them) and kept for later calls
        in place of the least recently run (in a slot none of the others holds);
        ``failure``: why they do not fit the step's signature (raised on every rank)."""
        rec = profiling.recorder
        t = rec.now() if rec else 0.0
        values = [_plain(a) for a in args]
        conversion, binary = self._build(values, failure)
        if self._placement is not None:  # (its arguments agreed on every rank: ``_build``)
            self._keep_placement_valid(args, values)
        prepared = conversion(values)
        self._clock.stamp(conversion.handles)
        conversion.compiled.fast_call(*prepared)
        self._clock.ran()
        conversion.check_messages(self.__name__)
        staying = self._last_calls[: SLOTS - 1]
        slot = min(set(range(SLOTS)) - {call.slot for call in staying})
        last = LastCall(
            self.__name__,
            conversion,
            args,
            values,
            prepared,
            rec,
            binary.timers,
            slot,
            self._bindings,
            self._clock,
        )
        self._last_calls = [last, *staying]
        self._keep_calls()
        if rec:
            last.recorded(rec, t)

    def _keep_calls(self) -> None:
        """The kept calls, for the C base to run again when it is passed the arguments of one
        (``_native.Repeating``); none for a step with exchanges from annotations (its calls check
        the placement in Python first)."""
        self._keep(self._last_calls if self._placement is None else None)

    def to_sdfg(self, *args: Any, lowered: bool = True) -> dace.SDFG:
        """The SDFG a call with ``args`` compiles (``lowered=False``: as parsed), to inspect:
        a copy, changing it changes nothing the step runs."""
        values = [_plain(a) for a in args]
        layouts = self._layouts_here(values)
        if not lowered:
            return self._parse(values, layouts)
        return copy.deepcopy(self._show(values, layouts)[0])

    def exchange_report(self) -> list[PlacedInStep]:
        """The exchanges ``exchange=`` placed in the step, in the order of its code
        (``compiled/placement.py``); ``str()`` of each says where and what."""
        return [] if self._placement is None else list(self._placement.placed)

    def _keep_placement_valid(self, args: tuple, values: list[Any]) -> None:
        """Before a call of a step with placed exchanges: an argument whose halo the step
        reads and assumes valid at its start, but which no call of the step left valid or
        which was written since (a new field; buffers swapped between calls; another step or
        an annotated program wrote it, ``annotations.HaloValidity``), is exchanged from
        Python first; then what the call leaves stale is noted written, and the other
        arguments are remembered as valid."""
        placement, valid = self._placement, self._valid
        for position, dim in placement.valid_at_entry.items():
            if values[position] not in valid:
                self._exchange.exchange(args[position], dim=dim)
        stale = {id(values[position]) for position in placement.stale_at_exit}
        for position in placement.stale_at_exit:
            if _is_array(values[position]):  # (a scalar passed to a call is no field)
                note_written(values[position])
        for array in values:
            if _is_array(array) and id(array) not in stale:
                valid.remember(array)

    def _layouts_here(self, values: list[Any]) -> list:
        """The layouts of a build that ``values`` fit, else those of this process's arguments
        alone (no collective: ``to_sdfg`` and ``fusion_report`` show; a build may take
        fewer unit strides and shared shapes, as the arguments of every rank allow)."""
        fitting = self._fitting(values)
        return (
            _layouts_of([_arrays_described(values)]) if fitting is None else self._layouts[fitting]
        )

    def fusion_report(self, *args: Any) -> FusionReport:
        """Which exchange copy maps the pipeline fused for a call with ``args``, by the labels
        the expansions gave them (in ``to_sdfg``'s graph: ``shared_functions.shared_name``)."""
        values = [_plain(a) for a in args]
        return self._show(values, self._layouts_here(values))[1]

    def _show(self, values: list[Any], layouts: list) -> tuple[dace.SDFG, FusionReport]:
        """The lowered step and its fusion report that ``to_sdfg`` and ``fusion_report`` show:
        as this process lowered it, else as an earlier run kept it, else lowered now; kept
        for later runs (``step_cache.store_lowered``)."""
        key = self._key(values, layouts)
        if key in self._shown:
            return self._shown[key]
        with self._globals():
            known = step_cache.step_key(
                self._dace_program, self._descriptors(values, layouts), self._around(key)
            )
        shown = None
        if key not in self._lowered and known is not None:
            shown = step_cache.load_lowered(known)
        if shown is None:
            shown = self._lower(values, layouts)[:2]
            if known is not None:
                step_cache.store_lowered(known, *shown)
        self._shown[key] = shown
        return shown

    def _build(
        self, values: list[Any], failure: Exception | None = None
    ) -> tuple[Conversion, _Binary]:
        """The compiled step for arguments like ``values``, as it takes a call's arguments
        (with the arguments fixed per build and the layout symbols it was built with,
        ``_layouts_of``), and the build (its timers: profiling on when it was lowered,
        ``compiled/timers.py``).

        Every rank runs the same build. Each rank names the build its arrays call for (the
        one its arrays took last time, else the first of the step's builds they fit,
        ``_fits``), and the ranks compare (one allreduce, ``build_once.largest``): what a
        rank's arrays fit depends on its blocks (a block one cell wide has more strides 1,
        blocks of two decompositions may be equal on some ranks only), so ranks with alike
        arguments may name different builds. Where they differ, or none fits, the ranks meet
        and decide from every rank's arguments (``_meet``). A rank whose arguments are of a
        kind no step takes or do not fit the plan of an exchange, or whose exchanged fields'
        dtypes or levels differ from the others', makes every rank raise, before anything is
        posted (at the first call, before any build, where the ranks meet).

        Those are the closure arrays (plan data, GT4Py's neighbour tables) and the lengths of
        plan arrays; shapes and strides are read off the arguments at each call, not solved
        for: DaCe's general symbol inference costs milliseconds per call.

        One binary serves every shape, but each set of shapes gets an instance of its own:
        an instance sizes its message buffers and persistent requests for the shapes of its
        first call (the arguments' levels may differ between calls of one exchange).
        """
        pattern = self._key(values, _local_pattern(values))
        kinds, chosen = [], None
        try:
            if failure is not None:
                raise failure
            _check_kinds(self._dace_program.argnames, values)
            _check_source(self.__name__, *self._source, self._dace_program.argnames, values)
            rebound = _native.rebound(self._bindings)
            if rebound >= 0:
                raise self._rebound(rebound)
            chosen = self._chosen.get(pattern) or self._fitting(values)  # a build's key
            if chosen is not None:  # checked as at a build
                kinds = self._check_arguments(values, self._binaries[chosen])
        except (FieldError, ProgramError) as error:
            failure = error
        if self._comm.Get_size() > 1 and self._built:  # (none yet: none on any rank)
            index = -1 if chosen is None else self._built.index(chosen)
            digest = zlib.crc32(repr(kinds).encode())
            named = largest(
                self._comm, [-index, index, failure is not None, -digest, digest], self.__name__
            )
            if named[2]:
                self._raise_on_every_rank(failure)
            if -named[0] != named[1]:
                chosen = None
            elif -named[3] != named[4]:
                self._check_fields_agree(kinds)
        elif failure is not None and self._comm.Get_size() == 1:
            raise failure
        compiled = None
        if chosen is None:  # (a failure here is a first call's: raised at the meeting)
            chosen, compiled = self._meet(values, failure)
            # the first meeting decides what this rank's threads alone said (``_sequential``)
            pattern = self._key(values, _local_pattern(values))
        self._chosen[pattern] = chosen
        if (pattern, chosen) not in self._builds:
            binary = self._binaries[chosen]
            compiled = compiled or load_build(binary.folder)
            fixed = dict(self._dace_program.__sdfg_closure__())
            for value in list(fixed.values()):
                fixed.update(_closure_symbols(value))
            fixed = {renamed(name, binary.prefixes): value for name, value in fixed.items()}
            names, layouts = self._dace_program.argnames, self._layouts[chosen]
            conversion = Conversion(compiled, fixed, names, layouts)
            # where its exchanges read the stamp of the running call (``stamps.py``)
            conversion.handles = tuple(fixed[handle_name(p)] for p in binary.prefixes.values())
            counter = conversion.entry_point("gt4py_halo_mpi_waits", ctypes.c_ulong)
            if counter is not None:  # its MPI waits watched while it lives
                kinds = sorted({plan.name for _, plan, _ in binary.exchanged}) or ["mpi"]
                conversion.waits = StepWaits(
                    counter, compiled, self.__name__, self._comm.rank, kinds
                )
            self._builds[pattern, chosen] = (conversion, binary)
        return self._builds[pattern, chosen]

    def _meet(self, values: list[Any], failure: Exception | None = None) -> tuple[tuple, Any]:
        """Collectively: the key of the build every rank's arguments fit, made where the step
        has none (its layouts from every rank's arguments, ``_agreed_layouts``), and the
        compiled step if it was just built or loaded (else ``None``); ``failure``: why this
        rank's arguments do not fit the step (raised on every rank)."""
        arrive(self._comm, repr(self.__name__))
        self._raise_on_every_rank(failure)
        if self._one_thread is None:  # shapes the code: decided together (compiled/threads.py)
            self._one_thread = self._comm.allreduce(openmp_threads() == 1, op=MPI.LAND)
            self._bindings, self._bound_names = bindings(self.__wrapped__)
        layouts = self._agreed_layouts(values)
        key = self._key(values, layouts)
        if key in self._binaries:
            self._check_exchanged_everywhere(values, self._binaries[key])
            return key, None
        with self._globals():
            known = step_cache.step_key(
                self._dace_program, self._descriptors(values, layouts), self._around(key)
            )
        found = self._built_before(values, known)
        if found is None:
            compiled, binary, name = self._compile(values, layouts)
            if known is not None:
                step_cache.store(known, _record(known, binary, name))
        else:
            compiled, binary = found
        self._binaries[key], self._layouts[key] = binary, layouts
        self._built.append(key)
        return key, compiled

    def _rebound(self, index: int) -> ProgramError:
        """The error of a call whose name ``self._bound_names[index]`` holds another object
        than at the step's first build (``compiled/bindings.py``)."""
        return ProgramError(
            f"{self.__name__}: {self._bound_names[index]!r} holds another object than at the "
            "step's first build, which compiled in what it held (a step compiles in the "
            "exchanges, GT4Py programs, helpers and numbers it reads by name). Make the step "
            "anew (gh.program) after giving the name another object, or pass what changes "
            "as an argument"
        )

    def _around(self, key: tuple) -> list:
        """What a step's build depends on besides its code and closure (``step_cache``)."""
        options = [self._device, self._copy_maps, self._pack_in_producers]
        return [self.__name__, key, *options, self._in_place_min_bytes]

    def _built_before(self, values: list[Any], known: step_cache.StepKey | None) -> Any:
        """Collectively: the binary an earlier run built for this step, with what a call
        needs besides, if every rank has its record of the same build; else ``None``."""
        data = [] if known is None else [BY_PREFIX[prefix] for prefix in known.prefixes]
        self._check_communicators(data)
        record = None if known is None else step_cache.load(known)
        names = self._comm.allgather(None if record is None else record.sdfg_name)
        if record is None or len(set(names)) > 1:
            return None
        binary = _Binary(
            record.folder,
            [(i, data[k].plans[plan], known.prefixes[k]) for i, k, plan in record.exchanged],
            {p: new for p, new in zip(known.prefixes, record.renamed) if new is not None},
            [tuple(timer) for timer in record.timers],
            record.written,
        )
        self._check_exchanged_everywhere(values, binary)
        log.debug("%s: built in an earlier run, loaded from %s", self.__name__, record.folder)
        return load_build(record.folder), binary

    def _compile(self, values: list[Any], layouts: list) -> tuple[Any, _Binary, str]:
        """Collectively: the step lowered on every rank, compiled on one, loaded on all; with
        what a call needs besides, and the compiled SDFG's name."""
        failure: Exception | None = None
        kinds = []
        try:
            sdfg, _, exchanged, prefixes, timers, written = self._lower(values, layouts)
            binary = _Binary("", exchanged, prefixes, timers, written)
            kinds = self._check_arguments(values, binary)
        except Exception as error:  # noqa: BLE001 - every rank learns of it: none waits
            failure = error
        arrive(self._comm, repr(self.__name__))  # lowering takes each rank its own time
        self._raise_on_every_rank(failure)
        self._check_fields_agree(kinds)
        self._check_programs_agree(sdfg, values, layouts)
        # a build folder of this name holds the same step built alike: reused, even from
        # an earlier run
        with (
            codegen_config(self._device),
            dace.config.set_temporary("compiler", "use_cache", value=True),
        ):
            try:
                compiled = build_on_root(
                    self._comm,
                    build=functools.partial(_compile_in_folder, sdfg),
                    share=lambda _: sdfg.build_folder,
                    load=load_build,
                )
            except Exception as error:  # on every rank: the root's error, or its report
                raise ProgramError(
                    f"{self.__name__} could not be built: {type(error).__name__}: {error}"
                ) from error
        folder = os.path.abspath(self._comm.bcast(sdfg.build_folder))
        return compiled, dataclasses.replace(binary, folder=folder), sdfg.name

    def _check_arguments(self, values: list[Any], binary: _Binary) -> list:
        """``_check_exchanged`` of the arguments the build's exchanges exchange whole and of
        those its placed exchanges take valid at entry (exchanged from Python before the step
        runs, ``_keep_placement_valid``: after this check, on every rank), and
        ``_check_writable`` of those it writes."""
        at_entry = []
        if self._placement is not None:
            plan = self._exchange.decomposition.plan
            at_entry = [(i, plan(dim), "") for i, dim in self._placement.valid_at_entry.items()]
        names = self._dace_program.argnames
        _check_writable(names, values, binary.written)
        return _check_exchanged(names, values, [*binary.exchanged, *at_entry])

    def _check_exchanged_everywhere(self, values: list[Any], binary: _Binary) -> None:
        """Collectively: ``_check_arguments`` on every rank, then ``_check_fields_agree``."""
        failure, kinds = None, []
        try:
            kinds = self._check_arguments(values, binary)
        except FieldError as error:
            failure = error
        self._raise_on_every_rank(failure)
        self._check_fields_agree(kinds)

    def _check_fields_agree(self, kinds: list[tuple[str, str]]) -> None:
        """Collectively: every rank passes the exchanged arguments with the same dtypes and
        levels (``kinds``, from ``_check_exchanged``); else a ``RanksDisagreeError`` on every
        rank names them, before anything is posted (messages of other sizes would be
        truncated or fill part of a buffer; GHEX would move them, or wait for a pattern one
        rank alone makes)."""
        everyone = self._comm.allgather(kinds)
        if all(other == kinds for other in everyone):
            return
        names = dict(kinds)
        lines = [
            f"  {name}: "
            + "; ".join(f"rank {r}: {dict(e).get(name)}" for r, e in enumerate(everyone))
            for name in names
            if len({dict(e).get(name) for e in everyone}) > 1
        ]
        raise RanksDisagreeError(
            f"{self.__name__}: ranks exchange arguments of different dtypes or levels, nothing "
            "was posted:\n" + "\n".join(lines)
        )

    def _raise_on_every_rank(self, failure: Exception | None) -> None:
        """Collectively: if a rank could not lower the step or its arguments do not fit it,
        every rank raises: a ``FieldError`` naming each rank's bad arguments, or, where a
        rank failed otherwise, its own error there (a ``ProgramError`` naming any other
        exception, DaCe's on code it cannot lower) and a ``ProgramError`` naming it on the
        others."""
        problem = None if failure is None else (type(failure).__name__, str(failure))
        problems = self._comm.allgather(problem)  # a first call: raised on every rank
        if not any(problems):
            return
        named = "; ".join(f"rank {r}: {p[1]}" for r, p in enumerate(problems) if p)
        if all(p[0] == FieldError.__name__ for p in problems if p):
            raise FieldError(f"{self.__name__}: {named}")
        if isinstance(failure, HaloError):
            raise failure
        if failure is not None:  # DaCe failing on the step's code: named, its traceback kept
            raise ProgramError(
                f"{self.__name__} was not built: {type(failure).__name__}: {failure}"
            ) from failure
        raise ProgramError(
            f"{self.__name__} was not built: "
            + "; ".join(f"rank {r} failed: {p[0]}: {p[1]}" for r, p in enumerate(problems) if p)
        )

    def _fitting(self, values: list[Any]) -> tuple | None:
        """The key of the first build of the step that ``values`` fit (the same types, unit
        strides where the build has the constant 1, equal shapes where it shares size
        symbols), if any."""
        local = _arrays_described(values)
        for key in self._built:
            layouts = self._layouts[key]
            if self._key(values, layouts) == key and _fits(local, layouts):
                return key
        return None

    def _agreed_layouts(self, values: list[Any]) -> list:
        """Collectively: the layout symbols of a new build, the same on every rank
        (``_layouts_of`` the arguments of every rank).

        Ranks must pass arguments of the same types and profile alike (a build while
        profiling holds timers: ``compiled/timers.py``); else a ``RanksDisagreeError`` on
        every rank names the arguments or the profiling ranks.
        """
        names = self._dace_program.argnames
        mine = (profiling.recorder is not None, _types(values), _arrays_described(values))
        gathered = self._comm.allgather(mine)
        on = [rank for rank, (profiling_on, _, _) in enumerate(gathered) if profiling_on]
        if 0 < len(on) < len(gathered):  # a build with timers on some ranks only
            raise RanksDisagreeError(
                f"{self.__name__}: ranks build the step with profiling on (ranks "
                f"{', '.join(map(str, on[:8]))}) and off (the others): profile all ranks that "
                "call the step, or none (gh.profile(comm=...) takes the step's communicator)"
            )
        everyone = [types for _, types, _ in gathered]
        differing = [i for i in range(len(values)) if len({e[i] for e in everyone}) > 1]
        if differing:
            lines = [
                f"  {names[i]}: " + "; ".join(f"rank {r}: {e[i]}" for r, e in enumerate(everyone))
                for i in differing
            ]
            raise RanksDisagreeError(
                f"{self.__name__}: ranks call the step with arguments that differ in type, "
                "so one compiled step cannot serve them all:\n" + "\n".join(lines)
            )
        return _layouts_of([arrays for _, _, arrays in gathered])

    def _check_programs_agree(self, sdfg: dace.SDFG, values: list[Any], layouts: list) -> None:
        """Collectively: every rank lowered the same SDFG; if not, say where they differ."""
        names = self._comm.allgather(sdfg.name)
        if len(set(names)) == 1:
            return
        where = _first_difference(self._comm.allgather(_outline(self._parse(values, layouts))))
        if where is None:
            json_lines = [
                line
                for line in json.dumps(sdfg.to_json(), indent=1, default=str).splitlines()
                if not re.search(r'"(guid|hash|name)":', line)  # differ by design
            ]
            where = (
                "  (same exchanges and stencils in the same order; in the lowered SDFG's JSON)\n"
                + (_first_difference(self._comm.allgather(json_lines)) or "  (none found)")
            )
        raise RanksDisagreeError(
            f"{self.__name__}: ranks lowered different SDFGs; a step must be the same program on "
            f"every rank, with the same exchanges in the same order. First difference:\n{where}"
        )

    def _check_closure(self) -> None:
        """Raise ``ProgramError`` if the parsed step reads arrays of the user's that are not
        its arguments (globals, attributes): a build would keep them and every later call
        use them, whatever the names hold by then. Its closure may hold the plan data of its
        exchanges and the neighbour tables of its GT4Py programs only."""
        resolved = getattr(self._dace_program, "resolver", None)
        arrays = {} if resolved is None else resolved.closure_arrays  # callbacks aside
        prefixes = dict.fromkeys(p for p in map(process_prefix, arrays) if p is not None)
        self._check_communicators([BY_PREFIX[prefix] for prefix in prefixes])
        theirs = [
            qualname
            for name, (qualname, _, value, _) in arrays.items()
            if process_prefix(name) is None and not isinstance(value(), NeighbourTable)
        ]
        if theirs:
            raise ProgramError(
                f"{self.__name__} reads {', '.join(map(repr, theirs))}, not an argument of the "
                "step: a compiled step would keep the array it found at its build and use it at "
                "every later call, whatever the name holds by then. Pass the array as an "
                "argument of the step"
            )

    def _check_communicators(self, exchanged: list[CompiledExchangeData]) -> None:
        """Raise ``ProgramError`` if the step exchanges over ranks outside its communicator:
        its checks and agreements are collectives over that communicator, so ranks beyond it
        could pass other arguments unchecked (messages of other sizes: wrong halos). Every
        rank sees the same communicators, and so raises alike."""
        mine = self._comm.Get_group()
        try:
            for data in exchanged:
                theirs = data.decomposition.comm.Get_group()
                outside = MPI.UNDEFINED in theirs.Translate_ranks(None, mine)
                size = theirs.Get_size()
                theirs.Free()
                if outside:
                    raise ProgramError(
                        f"{self.__name__} exchanges over {size} ranks, some outside the "
                        f"communicator it runs on ({self._comm.Get_size()} rank(s), @gh.program's "
                        "comm): its checks would not reach them. Make the step with comm= the "
                        "decomposition's communicator (or one holding it)"
                    )
        finally:
            mine.Free()

    def _descriptors(self, values: list[Any], layouts: list) -> list[Any]:
        return [_symbolic_descriptor(v, lay, self._device) for v, lay in zip(values, layouts)]

    def _parse(self, values: list[Any], layouts: list) -> dace.SDFG:
        descriptors = self._descriptors(values, layouts)
        try:
            # what DaCe would drop or leave to Python is an error
            with self._globals(), translated_once(), warnings.catch_warnings():
                for message in UNCOMPILABLE:
                    warnings.filterwarnings("error", message=message, category=UserWarning)
                sdfg = self._dace_program.to_sdfg(*descriptors, simplify=False)
        except DaceSyntaxError as error:  # ours (split phase) or the step's own Python
            raise ProgramError(f"{self.__name__}: {self._located(str(error))}") from error
        except HaloError:
            raise
        except UserWarning as warning:
            raise ProgramError(
                f"{self.__name__}: cannot be compiled as written: {self._located(str(warning))} "
                "(a `raise` would be dropped and the rest run; a function DaCe cannot parse "
                "would run as a Python callback inside the step, its exceptions lost). Check "
                "conditions in Python before calling the step, and call only GT4Py programs, "
                "exchanges and code DaCe compiles inside it"
            ) from None
        except Exception as error:  # DaCe's parser on arguments it cannot take
            raise ProgramError(
                f"{self.__name__}: DaCe cannot parse the step for these arguments: "
                f"{type(error).__name__}: {self._located(str(error))}"
            ) from error
        check_all_finished(sdfg)  # before simplify drops a start whose token nobody reads
        _check_no_helper_returns(sdfg, self.__name__)
        sdfg.simplify(validate=False)  # validated once, before code generation
        _check_no_views(sdfg, self.__name__)
        return sdfg

    def _located(self, message: str) -> str:
        """DaCe's ``message`` about the step, naming places in the step as written (not in
        the source ``exchange=`` rewrote: ``Placement.located``)."""
        return message if self._placement is None else self._placement.located(message)

    def _lower(self, values: list[Any], layouts: list) -> Lowering:
        """The lowered SDFG for arguments like ``values`` with ``layouts``, what was fused,
        which arguments its exchanges exchange whole, with their plans, and the renaming of
        the closure (``canonical_names``); lowered once per build key (the step's build,
        ``to_sdfg`` and ``fusion_report`` share it)."""
        key = self._key(values, layouts)
        if key not in self._lowered:
            with no_history():  # GT4Py's translations too
                self._lowered[key] = self._lower_anew(values, layouts)
        return self._lowered[key]

    def _key(self, values: list[Any], layouts: list) -> tuple:
        """What a build depends on: ``_build_key``, whether a profile is on (timers), and
        whether its maps run sequentially."""
        return (*_build_key(values, layouts), profiling.recorder is not None, self._sequential())

    def _sequential(self) -> bool:
        """Whether the step's CPU maps run sequentially (``compiled/threads.py``): as the ranks
        decided at its first build; before it (``to_sdfg``), as this rank's threads say."""
        if self._device != "cpu":
            return False
        return openmp_threads() == 1 if self._one_thread is None else self._one_thread

    def _lower_anew(self, values: list[Any], layouts: list) -> Lowering:
        sdfg = self._parse(values, layouts)
        self._check_closure()
        exchanged = _exchanged_arguments(sdfg, self._dace_program.argnames)
        written = _written_arguments(sdfg, self._dace_program.argnames)
        prefixes = canonical_names(sdfg)
        with no_line_info():
            lowered = lower_halo_exchanges(
                sdfg,
                self._device == "cpu",
                self._copy_maps,
                self._pack_in_producers,
                self._in_place_min_bytes,
            )
            if self._device == "gpu":
                # inlines the expansions for the GPU transformation; on a CPU they stay
                # functions of their own, which simplify would only analyse again, for the
                # same C++ (docs/compiled_steps.md, "lower")
                ignore_assigned_names(sdfg)  # before simplify reads the symbols used
                sdfg.simplify(validate=False)  # validated once, before code generation
            report = fuse_exchange_maps(sdfg, lowered.copy_maps)
            report.producers = lowered.producers
            if self._device == "gpu":
                transform_for_gpu(sdfg, lowered.host_tasklets)
            else:
                order_maps_by_strides(sdfg)
                if self._sequential():
                    run_sequentially(sdfg)
        timers = add_timers(sdfg, self._device == "gpu") if profiling.recorder is not None else []
        if self._device == "cpu":
            share_exchange_functions(sdfg, lowered.exchanges)
        ignore_assigned_names(sdfg)  # the tasklets a GPU step inlined and the timers too
        sort_assignments(sdfg)
        sdfg.name = f"{self.__name__}_{build_digest(sdfg)}"
        add_again_entry(sdfg)
        return sdfg, report, exchanged, prefixes, timers, written


#: An argument a step exchanges whole: its position, the plan, the exchange's closure prefix.
Exchanged = tuple[int, ExchangePlan, str]
#: What ``Program._lower`` returns: the lowered step, what was fused, the arguments exchanged
#: whole, the closure renamed, the timers, the arguments the step writes (positions).
Lowering = tuple[
    dace.SDFG, FusionReport, list[Exchanged], dict[str, str], list[tuple[str, str]], tuple[int, ...]
]


@dataclasses.dataclass(frozen=True)
class _Binary:
    """A compiled step's folder, and what each call needs besides (``Program._build``)."""

    folder: str
    exchanged: list[Exchanged]
    prefixes: dict[str, str]  # closure prefixes renamed (``canonical_names``)
    timers: list[tuple[str, str]]
    written: tuple[int, ...]  # the positions of the arguments it writes


def _record(known: step_cache.StepKey, binary: _Binary, name: str) -> step_cache.Record:
    """What later runs need of a build: ``binary`` by the positions of ``known``'s prefixes."""
    position = {prefix: k for k, prefix in enumerate(known.prefixes)}
    return step_cache.Record(
        name,
        binary.folder,
        tuple(binary.prefixes.get(prefix) for prefix in known.prefixes),
        tuple((i, position[prefix], plan.name) for i, plan, prefix in binary.exchanged),
        tuple(map(tuple, binary.timers)),
        binary.written,
    )


def _check_parameters(function: Callable[..., None]) -> None:
    """A step is called with its arguments by position (DaCe's programs take no keyword-only
    or variadic parameters), each a value of the call: ``ProgramError`` naming any other, or
    a compile-time parameter (``dace.compiletime``: the step's build and its records are per
    argument kinds, not per value)."""
    parameters = inspect.signature(function).parameters.values()
    others = [
        p.name for p in parameters if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if others:
        raise ProgramError(
            f"{function.__qualname__}: a step's parameters are positional; "
            f"{', '.join(others)} is keyword-only or variadic"
        )
    try:  # (string annotations, ``from __future__ import annotations``, evaluated as DaCe does)
        hints = inspect.get_annotations(function, eval_str=True)
    except Exception:  # noqa: BLE001 - DaCe's parser reports annotations it cannot read
        hints = {}
    constant = [name for name, hint in hints.items() if hint is dace.compiletime]
    if constant:
        raise ProgramError(
            f"{function.__qualname__}: {', '.join(constant)} is annotated dace.compiletime: a "
            "step takes no compile-time parameters; pass the value as an argument, or read it "
            "from a global or closure variable (its value at the step's first build is compiled "
            "in: a later change is a ProgramError at the next call; a later run builds for its "
            "value)"
        )


#: Methods and NumPy functions whose result DaCe takes for a view of a C-contiguous array
_RESHAPES = ("reshape", "ravel")


def step_source(function: Callable[..., None]) -> tuple[list, list]:
    """What ``_check_source`` checks in ``function``'s body, from its source (nothing where
    that is unknown): (line in its file, source, the names it binds, whether DaCe would bind
    them otherwise than Python: ``_in_turn``) of each assignment to plain names (``a = ...``,
    ``a, b = b, a``); (line, source, the name) of each reshape of a name (``u.reshape(s)``,
    ``np.reshape(u, s)``, ``u.ravel()``)."""
    try:
        lines, first = inspect.getsourcelines(function)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return [], []
    found, reshapes = [], []
    for node in ast.walk(tree.body[0]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _RESHAPES and isinstance(node.func.value, ast.Name):
                numpy_function = node.func.value.id in ("np", "numpy")  # (np.reshape(u, s))
                of = (node.args or [None])[0] if numpy_function else node.func.value
                if isinstance(of, ast.Name):
                    reshapes.append((first + node.lineno - 1, ast.unparse(node), of.id))
            continue
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        names = [n for n in names if not any(_subscripted(t, n) for t in targets)]
        if names:
            found.append((first + node.lineno - 1, ast.unparse(node), names, _in_turn(node)))
    return found, reshapes


def _in_turn(node: ast.Assign | ast.AnnAssign) -> bool:
    """Whether ``node`` assigns a tuple whose elements read names it binds before them
    (``x, y = y, x``): DaCe assigns the elements one after another, so a later one reads
    what an earlier one bound, where Python evaluates the whole tuple first."""
    targets, value = getattr(node, "targets", [None]), node.value
    if len(targets) != 1 or not isinstance(targets[0], ast.Tuple):
        return False
    if not isinstance(value, ast.Tuple) or len(value.elts) != len(targets[0].elts):
        return False
    bound: set[str] = set()
    for target, element in zip(targets[0].elts, value.elts):
        if any(isinstance(n, ast.Name) and n.id in bound for n in ast.walk(element)):
            return True
        bound |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return False


def _subscripted(target: ast.AST, name: str) -> bool:
    """Whether ``name`` occurs in ``target`` inside a subscript or attribute (``a[i] = ...``:
    a write into ``a``, or an index), not as a name bound."""
    for node in ast.walk(target):
        if isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)) and any(
            isinstance(n, ast.Name) and n.id == name for n in ast.walk(node)
        ):
            return True
    return False


def _check_source(step: str, assignments: list, reshapes: list, names: list, values: list) -> None:
    """A ``ProgramError`` where the step (``step_source``) reshapes an argument that is an
    array and not C-contiguous (DaCe takes the result for a view of a C-contiguous array: it
    read and wrote other elements than NumPy's reshape; GT4Py's fields are not), assigns to
    the name of an argument that is an array (``a = b``, ``a = a + 1``: DaCe compiles a copy
    into the argument's array, where Python binds the name to another array and leaves the
    argument's as it was), or assigns a tuple whose elements read names it binds before them
    (``x, y = y, x``, numbers too: DaCe assigns them one after another). Each way the step
    would end with other values than the same function gives in Python."""
    arrays = {n for n, v in zip(names, values) if not isinstance(v, (numbers.Number, np.generic))}
    scattered = {n for n, v in zip(names, values) if n in arrays and not _c_contiguous(v)}
    for line, source, name in reshapes:
        if name in scattered:
            raise ProgramError(
                f"{step}, line {line}: `{source}`: {name} is not C-contiguous (a GT4Py field, "
                "a view with steps, F order), and DaCe reshapes as if it were, reading and "
                "writing other elements than NumPy would. Index the array as it is, or "
                "reshape a contiguous copy outside the step"
            )
    for line, source, bound, in_turn in assignments:
        argument = next((n for n in bound if n in arrays), None)
        if in_turn:
            raise ProgramError(
                f"{step}, line {line}: `{source}`: DaCe assigns the tuple's elements one after "
                "another (a later one reads what an earlier one bound; Python evaluates the "
                "whole tuple first), so the step would compute other values. Use a temporary "
                "for numbers; swap arrays between calls of the step (P(a, b); P(b, a) in a "
                "loop's turn, for two)"
            )
        if argument is not None:
            raise ProgramError(
                f"{step}, line {line}: `{source}` assigns to {argument}, an array argument "
                f"of the step: DaCe compiles that as a copy into {argument}'s array (Python "
                "would bind the name to another array and leave that one as it was), so the "
                f"arrays would end with other values. Write into it ({argument}[...] = ...), "
                "use another name, or swap arrays between calls of the step (P(a, b); P(b, a) "
                "in a loop's turn, for two)"
            )


def _c_contiguous(value: Any) -> bool:
    """Whether an array is C-contiguous (one that tells nothing is taken for one)."""
    flags = getattr(value, "flags", None)
    return bool(getattr(flags, "c_contiguous", True))


def build_digest(sdfg: dace.SDFG) -> str:
    """What names a step's build (its folder, and so the binary a later run finds there, see
    ``_build``): a digest of the lowered graph, the C++ headers the expansions include, the
    entry points ``last_call`` adds, the DaCe version, DaCe's compiler settings and the
    libraries the binary links (``linked_libraries``). The same on every rank."""
    headers = sorted(Path(transports.__file__).parent.glob("*/include/*"))
    toolchain = json.dumps(
        [
            dace.__version__,
            dace.Config.get("compiler"),
            [h.read_bytes().hex() for h in headers],
            again_code("step", ", int n", ", n"),
            linked_libraries(),
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256((sdfg.hash_sdfg() + toolchain).encode()).hexdigest()[:16]


#: DaCe's warnings for what it does not compile: a ``raise`` (``preprocessing.visit_Raise``)
#: and a call it cannot parse, left to the Python interpreter as a callback.
UNCOMPILABLE = (
    r"Runtime exception at line \d+ is not supported",
    r"Performance warning: Automatically creating callback to Python interpreter",
)


def program(
    function: Callable[..., None] | None = None,
    *,
    comm: MPI.Comm | None = None,
    device: str = "cpu",
    copy_maps: str | None = None,
    pack_in_producers: bool | None = None,
    in_place_min_bytes: int | None = IN_PLACE_MIN_BYTES,
    exchange: Any = None,
) -> Any:
    """Decorate a step of GT4Py programs and ``ex.exchange`` calls to compile it as one SDFG.

    ``comm`` (default ``MPI_COMM_WORLD``) holds the ranks that call the step together: one of
    them compiles it, all load it. ``device="gpu"``: array arguments live on the GPU (CuPy,
    GT4Py GPU fields) and the step is transformed for it (``transform_for_gpu``).
    ``copy_maps`` and ``pack_in_producers`` are experimental: the GPU defaults they set were
    never measured on a GPU, and on a CPU both are slower than the defaults.
    ``copy_maps``: how cartesian exchanges pack and unpack, ``"direction"`` (per direction:
    on a CPU calls of one vectorized C++ function, the CPU default; on a GPU a map each) or
    ``"arena"`` (one map per message arena over all directions: one kernel, the GPU default;
    ``compiled/arena_copies.py``).
    ``pack_in_producers``: whether the stencil that writes a field right before its exchange
    also packs its messages (``compiled/producer_fusion.py``; default: on a GPU only, where it
    saves kernels; on a CPU its per-point box tests slowed the stencils more than it saved).
    ``in_place_min_bytes``: on a CPU with copies per direction, boxes that are contiguous
    runs of at least this many bytes (at most ``plan.MAX_RUNS`` per field) go from field
    to field as MPI messages of their own instead of through the arenas; ``None``: never
    (``compiled/in_place.py``).
    ``exchange``: an exchange (``gh.make_exchange``) to place exchanges with, before the calls
    of ``gh.halo`` programs that read stale halos (``compiled/placement.py``;
    ``step.exchange_report()`` lists them); exchanges written by hand stay as they are.
    """
    if function is None:
        return functools.partial(
            program,
            comm=comm,
            device=device,
            copy_maps=copy_maps,
            pack_in_producers=pack_in_producers,
            in_place_min_bytes=in_place_min_bytes,
            exchange=exchange,
        )
    return Program(
        function, comm, device, copy_maps, pack_in_producers, in_place_min_bytes, exchange
    )


def codegen_config(device: str) -> contextlib.AbstractContextManager:
    """DaCe settings to generate a step's code under: on a GPU, everything on one stream.

    GT4Py generates its programs for the default stream (``max_concurrent_streams = -1``, see
    gt4py's ``workflow/common.py``), and so do we: pack kernels, the MPI tasklets' copies
    and the one stream wait before ``MPI_Startall``, unpack kernels and the stencils between
    stay in order on that stream. DaCe's own multi-stream scheduling would spread independent
    unpack kernels over streams and wait for each of them at the end of the step.
    """
    if device != "gpu":
        return contextlib.nullcontext()
    return dace.config.set_temporary("compiler", "cuda", "max_concurrent_streams", value=-1)


def transform_for_gpu(sdfg: dace.SDFG, host_tasklets: set[str]) -> None:
    """Offload the step to the GPU, keeping MPI and the data it touches on the host.

    Pack and unpack maps become kernels on the program's stream; the tasklets that call MPI
    stay host code (``host_tasklets``: their labels, ``Lowered.host_tasklets``), as do the
    communicator and neighbour ranks they read and the pinned host mirrors of the message
    buffers.
    """
    isolate_nested_sdfgs(sdfg)  # expansions sharing a state with a stencil: inlined below
    sdfg.simplify(validate=False)  # validated once, before code generation
    host = (dace.StorageType.CPU_Pinned, dace.StorageType.CPU_Heap)  # chosen, not defaulted
    host_data = [
        name
        for name, desc in sdfg.arrays.items()
        if desc.storage in host or name.startswith(CLOSURE_PREFIX)
    ]
    # DaCe copies every non-transient input to the GPU, ``host_data`` or not (it keeps only
    # outputs and transients on the host); the plan arrays would then be copied there and
    # back, on the default stream, before each branch on a neighbour rank: a host wait each
    arguments = [name for name in host_data if not sdfg.arrays[name].transient]
    for name in arguments:
        sdfg.arrays[name].transient = True
    # DaCe gives every top-level transient of constant size the SDFG's lifetime, persistent
    # ones too: a table of segment offsets filled at the first call only, or a buffer that
    # persistent requests point at, would then be allocated anew at every call
    persistent = [
        desc
        for _, _, desc in sdfg.arrays_recursive()
        if desc.lifetime == dace.AllocationLifetime.Persistent
    ]
    sdfg.apply_transformations(
        GPUTransformSDFG,
        options={"exclude_tasklets": ",".join(sorted(host_tasklets)), "host_data": host_data},
    )
    for desc in persistent:
        desc.lifetime = dace.AllocationLifetime.Persistent
    for name in arguments:
        sdfg.arrays[name].transient = False
    sdfg.simplify(validate=False)  # validated once, before code generation


def lower_halo_exchanges(
    sdfg: dace.SDFG,
    separate: bool = False,
    copy_maps: str = "direction",
    pack_in_producers: bool = True,
    in_place_min_bytes: int = 0,
) -> Lowered:
    """Expand every exchange node with its implementation; return what the expansions
    recorded for the passes after them, and which send arenas the stencils producing their
    fields fill (``fuse_packs_into_producers``).

    The nodes first get their message buffers as arrays of the SDFG holding them
    (``attach_message_buffers``), each finish its start's (``connect_pairs``), and the
    producer stencils of cartesian exchanges their packing (``pack_in_producers``); those
    copy with a map per direction or one per arena (``copy_maps``) and send long contiguous
    runs in place (``in_place_min_bytes``, 0: never), see ``program``.
    ``separate``: keep each expansion a function of its own, its buffers pointer arguments
    (``simplify`` would inline it); on a CPU that lets the C compiler vectorize the copies.
    """
    attach_message_buffers(sdfg, EXCHANGE_NODES)
    pairs = connect_pairs(sdfg, EXCHANGE_NODES)
    lowered = Lowered()
    place_attached_segments(sdfg, lowered)
    if pack_in_producers:
        lowered.producers.update(fuse_packs_into_producers(sdfg, HaloExchange))
    found = [
        (node, state)
        for node, state in sdfg.all_nodes_recursive()
        if isinstance(node, EXCHANGE_NODES)
    ]
    for node, state in found:
        if isinstance(node, HaloExchange):
            node.spec = dataclasses.replace(
                node.spec, copy_maps=copy_maps, in_place_min_bytes=in_place_min_bytes
            )
        before = set(state.nodes())
        node.expand(state, node.implementation, lowered=lowered)
        for new in set(state.nodes()) - before:
            if isinstance(new, dace.nodes.NestedSDFG):
                new.no_inline = separate
                lowered.exchanges[new.sdfg.name] = node.spec.uid
    log.debug(
        "lowered %d halo exchange node(s) of %s, %d split-phase pair(s)",
        len(found),
        sdfg.name,
        pairs,
    )
    return lowered


def _types(values: list[Any]) -> list[str]:
    """Per argument, its type in words: what every rank must pass alike."""
    return [
        f"{v.dtype} array of {v.ndim} axes" if _is_array(v) else f"scalar {type(v).__name__}"
        for v in values
    ]


def _compile_in_folder(sdfg: dace.SDFG) -> Any:
    """``sdfg`` compiled in its build folder, which other jobs wait for meanwhile
    (``cache_files.building_in``)."""
    with building_in(sdfg.build_folder), no_history():
        return sdfg.compile()


def _outline(sdfg: dace.SDFG) -> list[str]:
    """The exchanges and stencils of a parsed step, in order, to show where ranks differ."""
    found = []
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, EXCHANGE_NODES):
            found.append(f"{node.spec.phase} of {node.spec.field_count} field(s) ({node.label})")
        elif isinstance(node, (dace.nodes.MapEntry, dace.nodes.LibraryNode)):
            found.append(f"{type(node).__name__} {node.label}")
    return found


def _check_no_views(sdfg: dace.SDFG, step: str) -> None:
    """A ``ProgramError`` for an exchange of a view of an argument in the parsed step: its
    lowering took the view for the array (a raw DaCe validation error at the build)."""
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, EXCHANGE_NODES):
            continue
        for edge in state.in_edges(node):
            source = edge.src
            if isinstance(source, dace.nodes.AccessNode) and isinstance(
                state.sdfg.arrays[source.data], dace.data.View
            ):
                raise ProgramError(
                    f"{step}: an exchange of {source.data!r}, a view of an argument (an alias "
                    "such as `x = u`, or a slice such as `q[..., 0]`): a compiled step exchanges "
                    "its arguments themselves (`ex.exchange(u)`; a slice: pass it as an "
                    "argument of its own)"
                )


def _check_no_helper_returns(sdfg: dace.SDFG, step: str) -> None:
    """A ``ProgramError`` if a Python helper function the step calls returns other than by
    one ``return value`` at its end (a bare ``return``, or any ``return`` in a branch or
    loop): inlined into the step (DaCe 2.0.0a10), it returned from the whole step, even at
    the helper's end (what followed the call dropped without a word)."""
    for nested in sdfg.all_sdfgs_recursive():
        if nested is sdfg or not any(
            isinstance(block, ReturnBlock) for block in nested.all_control_flow_blocks()
        ):
            continue
        helper = nested.name
        if nested.parent_nsdfg_node is not None:
            helper = re.sub(r"^call_|_\d+$", "", nested.parent.label)
        raise ProgramError(
            f"{step}: the helper function {helper!r} returns early or without a value (a "
            "bare `return`, or a `return` in a branch or loop): inlined into the step, it "
            "would end the whole step there (DaCe 2.0.0a10 drops the code after the call, "
            "without an error). Write it with one `return value` at its end, or none"
        )


def _exchanged_arguments(sdfg: dace.SDFG, names: list[str]) -> list[Exchanged]:
    """The step's arguments that its exchanges exchange whole (by position), with each
    exchange's plan and closure prefix: the arguments every call is checked against
    (``_check_exchanged``)."""
    found = []
    for state in sdfg.states():
        for node in state.nodes():
            if not isinstance(node, EXCHANGE_NODES):
                continue
            edges = state.in_edges(node)
            prefix = next(process_prefix(e.data.data) for e in edges if e.dst_conn == "_comm")
            for edge in edges:
                name = edge.data.data
                whole = dace.subsets.Range.from_array(sdfg.arrays[name]) == edge.data.subset
                if edge.dst_conn.startswith("_f") and name in names and whole:
                    found.append((names.index(name), PLANS[node.spec.uid], prefix))
    return found


def _written_arguments(sdfg: dace.SDFG, names: list[str]) -> tuple[int, ...]:
    """The positions of the step's arguments that its parsed SDFG writes (its stencils, its
    exchanges, its own assignments)."""
    written = {
        node.data
        for state in sdfg.all_states()
        for node in state.data_nodes()
        if any(not edge.data.is_empty() for edge in state.in_edges(node))
    }
    return tuple(i for i, name in enumerate(names) if name in written)


def _check_writable(names: list[str], values: list[Any], written: tuple[int, ...]) -> None:
    """A ``FieldError`` naming an argument the step writes that is read-only (a read-only
    memory map, an array over ``bytes``, one made read-only: the compiled step would write
    it, or crash writing it)."""
    for i in written:
        flags = getattr(values[i], "flags", None)  # NumPy's (CuPy's arrays have no such flag)
        if flags is not None and not getattr(flags, "writeable", True):
            raise FieldError(
                f"argument {names[i]} is read-only, and the step writes it: pass a writable array"
            )


#: What no step takes (DaCe converts some into temporary arrays that a later call would reuse)
_NOT_ARGUMENTS = (list, tuple, str, bytes, dict, set, type(None))
#: The largest extent and stride (in elements) of an array a step takes: its shapes and
#: strides are DaCe symbols, C ``int`` (a larger one would wrap to another array's)
_LARGEST = 2**31 - 1


def _check_kinds(names: list[str], values: list[Any]) -> None:
    """A ``FieldError`` naming an argument of a kind no step takes (containers, strings,
    ``None``, complex numbers: DaCe passes those to the compiled step wrongly; Python ints
    beyond int64: they would wrap; arrays of no dimensions: DaCe fails on them), an array
    whose strides are no whole numbers of elements (a field of a structured array: the step
    would read and write between its elements) or an array with an extent or a stride beyond
    the step's sizes (``_LARGEST``); other kinds are DaCe's to take or refuse."""
    for name, value in zip(names, values):
        if isinstance(value, _NOT_ARGUMENTS):
            raise FieldError(
                f"argument {name} is a {type(value).__name__}: a step takes arrays (NumPy, "
                "CuPy, GT4Py fields) and numbers"
            )
        if isinstance(value, (complex, np.complexfloating)):
            raise FieldError(
                f"argument {name} is a complex number, which a compiled step does not take as "
                "a scalar: pass it in an array of one element"
            )
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise FieldError(
                f"argument {name} is {value}, beyond 64-bit integers: a compiled step takes a "
                "Python int as a C int64, where it would wrap"
            )
        if _is_array(value) and not value.ndim:
            raise FieldError(
                f"argument {name} is an array of no dimensions (shape ()), which a compiled "
                "step does not take (DaCe fails on it, at the parse or in the C++ compiler): "
                "pass a number for a value the step reads, an array of one element for one "
                "it writes"
            )
        if _is_array(value) and value.size and any(b % value.itemsize for b in value.strides):
            raise FieldError(
                f"argument {name}: strides {tuple(value.strides)} bytes, not multiples of its "
                f"element size ({value.itemsize} bytes; a field of a structured array?): a "
                "compiled step addresses arrays by element. Pass a copy "
                "(np.ascontiguousarray), or exchange it with ex.exchange outside the step"
            )
        if _is_array(value):
            strides = element_strides(value)
            if max(*value.shape, *map(abs, strides)) > _LARGEST:
                raise FieldError(
                    f"argument {name}: shape {tuple(value.shape)}, strides {strides} elements: "
                    f"a compiled step takes extents and strides of at most {_LARGEST} elements"
                )


def _check_exchanged(names: list[str], values: list[Any], exchanged: list[Exchanged]) -> list:
    """What the runtime exchange checks of its fields, for the arguments a step exchanges,
    and that no two array arguments share memory: a ``FieldError`` naming the argument,
    before anything is posted. Returns what the ranks must pass alike: per exchanged
    argument, its name and its dtype and levels in words."""
    kinds = {}
    for index, plan, _ in exchanged:
        spec = field_spec(plan, values[index], names[index])
        kinds[index] = (names[index], f"{spec.dtype} levels {spec.level_shape}")
    arrays = [i for i, value in enumerate(values) if _is_array(value)]
    check_disjoint(
        [values[i] for i in arrays],
        [names[i] for i in arrays],
        "a compiled step takes distinct arrays (its code assumes arguments do not alias, and "
        "so do the exchanges it places: pass one array once)",
    )
    return [kinds[i] for i in sorted(kinds)]


def _first_difference(per_rank: list[list[str]]) -> str | None:
    """Each rank's entry at the first position where the ranks' lists differ; None if equal."""
    first = next(
        (
            n
            for n in range(max(map(len, per_rank)))
            if len({tuple(o[n : n + 1]) for o in per_rank}) > 1
        ),
        None,
    )
    if first is None:
        return None
    return "\n".join(
        f"  rank {r}: {o[first].strip() if first < len(o) else '(nothing)'}"
        for r, o in enumerate(per_rank)
    )


def _plain(value: Any) -> Any:
    """GT4Py fields enter the compiled step as their buffers."""
    ndarray = getattr(value, "ndarray", None)
    return ndarray if ndarray is not None else value


def _build_key(values: list[Any], layouts: list) -> tuple:
    """What a build depends on: argument types and which arguments share shapes/strides."""
    return (*(_signature(v) for v in values), *layouts)


def _signature(value: Any) -> tuple:
    if hasattr(value, "ndim") and hasattr(value, "dtype"):
        return ("array", value.dtype.str, value.ndim)
    return ("scalar", type(value).__name__)


def _closure_symbols(value: Any) -> dict[str, int]:
    """This rank's values of the symbols in a closure array's sizes and strides.

    Closure arrays whose sizes differ between ranks (plan data, GT4Py's neighbour tables)
    describe themselves to DaCe (``__descriptor__``) with symbolic sizes and strides, so that
    every rank parses the same SDFG; the compiled step gets the symbols' values at each call.
    """
    describe = getattr(value, "__descriptor__", None)
    if describe is None:
        return {}
    desc = describe()
    actual = (*value.shape, *(s // value.itemsize for s in value.strides))
    return {
        str(s): int(a)
        for s, a in zip((*desc.shape, *desc.strides), actual)
        if isinstance(s, dace.symbolic.symbol)
    }


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__")


#: Per argument, ``None`` for non-arrays, else its shape and element strides
Described = list[tuple[tuple[int, ...], tuple[int, ...]] | None]


def _arrays_described(values: list[Any]) -> Described:
    return [(tuple(v.shape), element_strides(v)) if _is_array(v) else None for v in values]


def _layouts_of(ranks: list[Described]) -> list[tuple[tuple, tuple] | None]:
    """Per argument (``None`` for non-arrays): the names of its size symbols and of its
    stride symbols, from the arguments of every rank (``ranks``; a process's own alone
    where it lowers only to show: ``to_sdfg``).

    Arrays whose shapes are equal on every rank share size symbols. One SDFG still serves
    every rank and block size, and DaCe can prove that maps over such fields have the same
    ranges: map fusion needs that (the pack maps of one exchange's fields, stencils over
    several fields). A stride of 1 on every rank is no symbol but the constant 1 (name
    ``None``): the C compiler then sees contiguous inner loops and vectorizes the copies (a
    symbolic unit stride made the compiled exchange of 10 fields of 70x134x80 twice as slow
    as the runtime one). Other strides are symbols of each argument's own, even where a
    rank's array is dense or two arrays' strides coincide: GT4Py pads some blocks and not
    others, so neither is the same on every rank, and the code must be (exchanges test
    density at run time, ``compiled/in_place.py``). A block one cell wide on some ranks
    makes strides 1 there that are not on others, uneven blocks make shapes equal on some
    ranks only: taking what holds on every rank makes one build for all. An axis of extent 0
    or 1 is addressed at index 0 alone, whatever its stride (NumPy gives a column-major array
    of one row the strides of a row-major one): it takes the constant 1 on its rank where
    another rank has stride 1 there (``_constant_unit_stride``).
    """
    groups: dict[tuple, int] = {}
    layouts = []
    for i, mine in enumerate(ranks[0]):
        if mine is None:
            layouts.append(None)
            continue
        g = groups.setdefault(tuple(rank[i][0] for rank in ranks), len(groups))
        unit = [_constant_unit_stride([rank[i] for rank in ranks], k) for k in range(len(mine[0]))]
        layouts.append(
            (
                tuple(f"__shape{g}_{k}" for k in range(len(mine[0]))),
                tuple(None if u else f"__strides{i}_{k}" for k, u in enumerate(unit)),
            )
        )
    return layouts


def _fits(described: Described, layouts: list) -> bool:
    """Whether arrays ``described`` can be passed to a build with ``layouts``: strides of 1
    where it has the constant 1 (``_unit_stride``), equal shapes where it shares size
    symbols."""
    shapes: dict[tuple, tuple] = {}
    for mine, layout in zip(described, layouts):
        if layout is None:
            continue
        if shapes.setdefault(layout[0], mine[0]) != mine[0]:
            return False
        if any(name is None and not _unit_stride(mine, k) for k, name in enumerate(layout[1])):
            return False
    return True


def _constant_unit_stride(described: list[tuple[tuple, tuple]], axis: int) -> bool:
    """Whether a build for arrays ``described`` (one per rank) takes the constant stride 1
    on ``axis``: where every rank may (``_unit_stride``) and one has more than one index
    there (an axis of extent 1 everywhere keeps it only with stride 1 everywhere, as a
    constant 1 picks the axis GHEX copies runs along and the order of loops)."""
    if all(shape[axis] <= 1 for shape, _ in described):
        return all(strides[axis] == 1 for _, strides in described)
    return all(_unit_stride(d, axis) for d in described)


def _unit_stride(described: tuple[tuple, tuple], axis: int) -> bool:
    """Whether an array (its shape and element strides) may take the constant stride 1 on
    ``axis``: it has stride 1 there, or an extent of at most 1 (only index 0)."""
    return described[1][axis] == 1 or described[0][axis] <= 1


def _local_pattern(values: list[Any]) -> list[tuple | None]:
    """What a process's build for ``values`` is found by without a collective: per array,
    its shape and which of its strides are 1."""
    return [
        None if d is None else (d[0], tuple(n == 1 for n in d[1]))
        for d in _arrays_described(values)
    ]


def _symbolic_descriptor(value: Any, layout: tuple | None, device: str) -> Any:
    if layout is None:
        return dace.data.create_datadescriptor(value)
    return dace.data.Array(
        dace.dtypes.typeclass(value.dtype.type),
        shape=[dace.symbol(name) for name in layout[0]],
        strides=[1 if name is None else dace.symbol(name) for name in layout[1]],
        storage=dace.StorageType.GPU_Global if device == "gpu" else dace.StorageType.Default,
    )
