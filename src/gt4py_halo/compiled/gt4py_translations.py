"""GT4Py programs translated to SDFGs once, not at every call site of every step.

DaCe asks a GT4Py program for its SDFG (``__sdfg__``) at each call inside a step, and GT4Py
translates it anew each time: its GTIR transforms, the SDFG lowering and ``gt_auto_optimize``,
seconds per call, most of a step's build (a step calling one stencil three times translated it
three times). ``translated_once`` keeps each translation, in memory and, when GT4Py's build
cache is persistent (``GT4PY_BUILD_CACHE_LIFETIME=persistent``), on disk beside GT4Py's own
builds, so later steps, processes and runs load it.

A translation is reused only for the same input. The key holds the program's GTIR (GT4Py's
``past_to_itir``, milliseconds; not from GT4Py's cache of it, whose entries ``__sdfg__``
modifies in place), its column axis, the types of its offset providers and the contents of
their neighbour tables (GT4Py's domain inference reads them), what DaCe passes for the
arguments (``__sdfg__`` checks them), the translator's settings, DaCe's configuration and the
GT4Py and DaCe versions. A program whose GTIR cannot be fingerprinted across processes is kept
in memory only; one that cannot be fingerprinted at all is translated as before.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dace
import gt4py
import numpy as np
import xxhash
from gt4py.next import common, config, fingerprinting
from gt4py.next.otf import arguments, toolchain, workflow
from gt4py.next.program_processors.runners.dace import program as dace_program

from gt4py_halo.compiled.cache_files import write_whole
from gt4py_halo.compiled.graph import no_line_info
from gt4py_halo.errors import ProgramError

log = logging.getLogger(__name__)

_GT4PY_PROGRAM = dace_program.Program
#: GT4Py's stage of a program with its arguments: in ``otf.workflow`` since gt4py 1.2.3, in
#: ``otf.toolchain`` in 1.2.1 (what ICON4Py 0.4.1 pins)
_CONCRETE_ARTIFACT = getattr(workflow, "ConcreteArtifact", None) or toolchain.ConcreteArtifact
_TRANSLATE = _GT4PY_PROGRAM.__sdfg__
_DIRECTORY = "gt4py_halo_sdfgs"
_translations: dict[str, tuple[str, dict, dict]] = {}  # key -> SDFG JSON, input/output fields


@contextlib.contextmanager
def translated_once() -> Iterator[None]:
    """While parsing a step: GT4Py programs' ``__sdfg__`` reuses earlier translations."""
    before = _GT4PY_PROGRAM.__sdfg__
    _GT4PY_PROGRAM.__sdfg__ = _sdfg
    try:
        yield
    finally:
        _GT4PY_PROGRAM.__sdfg__ = before


def _sdfg(self: dace_program.Program, *args: Any, **kwargs: Any) -> dace.SDFG:
    # two thirds less time per translation; the setting is part of the key (``dace_settings``)
    _check_integers(self, args, kwargs)
    with no_line_info():
        try:
            return _translated(self, args, kwargs)
        except AssertionError as error:  # GT4Py's check of DaCe's argument types, no message
            seen = ", ".join(_type_in_step(a) for a in (*args, *kwargs.values()))
            raise ProgramError(
                f"GT4Py program {getattr(self, '__name__', self)!r} does not take the types "
                f"the step passes it ({seen})"
            ) from error


def _check_integers(self: dace_program.Program, args: tuple, kwargs: dict) -> None:
    """A ``ProgramError`` for an integer scalar of the step of another width than the
    program declares for it (by position or keyword).

    DaCe types a Python int, and a local integer constant of the step, as ``int64``; GT4Py's
    programs mostly take ``int32`` (domain bounds). Narrowed in C, a value beyond ``int32``
    would wrap (a domain bound: writes out of bounds); GT4Py's own check of DaCe's types is
    an ``assert`` without a message (none under ``python -O``)."""
    stage = getattr(self, "past_stage", None)
    params = getattr(getattr(stage, "past_node", None), "params", None) or []
    kinds = {str(p.id): getattr(p.type, "kind", None) for p in params}
    for name, value in [*zip(kinds, args, strict=False), *kwargs.items()]:
        kind = kinds.get(name)
        integer = isinstance(value, dace.data.Scalar) and value.dtype in _INTEGERS.values()
        if integer and kind is not None and kind.name in _INTEGERS:
            declared = _INTEGERS[kind.name].to_string()
            if value.dtype.to_string() != declared:
                raise ProgramError(
                    f"GT4Py program {getattr(self, '__name__', self)!r} takes {name} as "
                    f"{declared}; the step passes {value.dtype.to_string()} (a Python int, or a "
                    "local integer constant, is int64 in a compiled step): pass "
                    f"gtx.{declared}(...), or np.{declared}(...) for a constant"
                )


#: GT4Py's integer scalar kinds, by name, and DaCe's types of them.
_INTEGERS = {"INT32": dace.int32, "INT64": dace.int64}


def _translated(self: dace_program.Program, args: tuple, kwargs: dict) -> dace.SDFG:
    key, persistent = _key(self, args, kwargs)
    if key is None:
        return _TRANSLATE(self, *args, **kwargs)
    kept = _translations.get(key) or (_load(key) if persistent else None)
    if kept is None:
        sdfg = _TRANSLATE(self, *args, **kwargs)
        kept = (
            json.dumps(sdfg.to_json()),
            dict(sdfg.gt4py_program_input_fields),
            dict(sdfg.gt4py_program_output_fields),
        )
        if persistent:
            _store(key, kept)
    _translations[key] = kept
    sdfg = dace.SDFG.from_json(json.loads(kept[0]))
    sdfg.gt4py_program_input_fields, sdfg.gt4py_program_output_fields = dict(kept[1]), dict(kept[2])
    self.sdfg_closure_cache["arrays"] = sdfg.arrays  # what __sdfg_closure__ reads
    return sdfg


def _type_in_step(value: Any) -> str:
    """The type DaCe gave an argument of a GT4Py program called in a step, in words."""
    if isinstance(value, dace.data.Array):
        return f"{value.dtype.to_string()} array of {len(value.shape)} axes"
    if isinstance(value, dace.data.Data):
        return value.dtype.to_string()
    return type(value).__name__


def _key(self: dace_program.Program, args: tuple, kwargs: dict) -> tuple[str | None, bool]:
    """The translation's key, and whether it is the same in every process."""
    arguments_seen = [
        (type(a).__name__, str(getattr(a, "dtype", "")), len(getattr(a, "shape", ())))
        for a in (*args, *kwargs.values())
    ]
    return program_key(self, kwargs.get("column_axis"), arguments_seen)


def dace_settings() -> dict:
    """DaCe's configuration as far as it shapes what DaCe makes: all of it but the folder
    builds go to (set per process by GT4Py)."""
    settings = dict(dace.Config.get())
    settings.pop("default_build_folder", None)
    return settings


def program_key(
    program: Any, column_axis: Any = None, arguments_seen: list | None = None
) -> tuple[str | None, bool]:
    """What a GT4Py program (DaCe backend) translates to depends on, as a key (``None``
    where it cannot be had), and whether the key is the same in every process: the
    translation's key without what DaCe passes at a call (``arguments_seen``)."""
    if not isinstance(program, _GT4PY_PROGRAM):
        return None, False
    if program.backend is None or "dace" not in program.backend.name.lower():
        return None, False  # __sdfg__ raises its own error
    connectivities = program.compilation_options.connectivities or {}
    lowering = program.backend.transforms.past_to_itir
    if isinstance(lowering, workflow.CachedStep):  # whose results __sdfg__ modifies in place
        lowering = lowering.step
    gtir = lowering(
        _CONCRETE_ARTIFACT(
            data=program.past_stage,
            args=arguments.CompileTimeArgs(
                args=tuple(p.type for p in program.past_stage.past_node.params),
                kwargs={},
                column_axis=column_axis,
                offset_provider=connectivities,
                argument_descriptor_contexts={},
            ),
        )
    ).data
    translator = program.backend.executor.translation
    if isinstance(translator, workflow.CachedStep):
        translator = translator.step
    tables = xxhash.xxh64()
    for name in sorted(connectivities):
        table = connectivities[name]
        if common.is_neighbor_table(table):
            array = np.ascontiguousarray(table.asnumpy())
            tables.update(f"{name}:{array.dtype}:{array.shape}:".encode())
            tables.update(array.tobytes())
    around = json.dumps(
        [
            gt4py.__version__,
            dace.__version__,
            repr(translator),
            arguments_seen,
            dace_settings(),
            tables.hexdigest(),
        ],
        sort_keys=True,
        default=str,
    )
    described = (gtir, column_axis, common.offset_provider_to_type(connectivities))
    with contextlib.suppress(TypeError):  # something in it is not importable by its name
        return fingerprinting.strict_fingerprinter((described, around)), True
    try:
        return fingerprinting.lenient_fingerprinter((described, around)), False
    except (TypeError, ValueError):
        log.debug("GT4Py program %s not fingerprinted: translated anew", program, exc_info=True)
        return None, False


def _folder() -> Path | None:
    if config.BUILD_CACHE_LIFETIME is not config.BuildCacheLifetime.PERSISTENT:
        return None
    return Path(config.BUILD_CACHE_DIR) / _DIRECTORY


def _load(key: str) -> tuple[str, dict, dict] | None:
    folder = _folder()
    if folder is None:
        return None
    try:
        with open(folder / f"{key}.pickle", "rb") as file:
            kept = pickle.load(file)
        json.loads(kept[0])  # a damaged entry is translated again (and replaced)
        return kept
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError):
        return None


def _store(key: str, kept: tuple[str, dict, dict]) -> None:
    """Written whole or not at all: ranks of one job may store the same key at once."""
    folder = _folder()
    if folder is not None:
        write_whole(folder / f"{key}.pickle", pickle.dumps(kept))
