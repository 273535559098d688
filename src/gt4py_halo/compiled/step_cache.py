"""Steps built once: a later run finds a step's binary without parsing the step again.

``Program._build`` parses a step with DaCe, lowers its exchanges and finds its binary by the
lowered graph's digest (``build_digest``): the binary is reused across runs, but the parse
and the lowering (seconds per step, on every rank) are paid again at each run. Here a key
known before parsing names a record of that build: the binary's folder, and what a call
needs besides the binary (how the closure is renamed, which arguments are exchanged whole,
the profiling timers).

The key holds what the parse and lowering read: the step as DaCe's preprocessor resolves it
(its code, with globals and closure values folded in; the exchanges, GT4Py programs and other
objects it calls, each by a key of its own: ``value_key``; the values of the globals and
closure variables it leaves names, which the parse looks up: a dtype, ``np.zeros(n,
dtype=DT)``), the closure's array descriptors,
the arguments' types and layouts, the step's options, and the versions and sources of
Python, DaCe (and its configuration), GT4Py and gt4py_halo. So a change of any of them builds
anew. A step that calls an object without such a key (a Python helper function, a nested
``dace.program``) has no key: it is parsed at every run, as before.

Records live beside GT4Py's persistent build cache (``GT4PY_BUILD_CACHE_LIFETIME=persistent``,
in ``GT4PY_BUILD_CACHE_DIR``); without a persistent cache, nothing is kept. A record is
written whole or not at all (jobs may share the folder), and one whose binary is gone or not
whole is ignored (``cache_files.py``).

A step shown with ``Program.to_sdfg`` or ``fusion_report`` keeps its lowered graph and fusion
report under the same key (``store_lowered``): showing it again in a later run loads them
instead of parsing and lowering the step (seconds, where loading its build takes less).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import gzip
import hashlib
import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

import dace
import gt4py
import numpy as np
from dace.frontend.python import preprocessing

from gt4py_halo.compiled.cache_files import (
    linked_libraries,
    whole_gzip,
    whole_library,
    write_whole,
)
from gt4py_halo.compiled.convertible import process_prefix
from gt4py_halo.compiled.fusion import FusionReport
from gt4py_halo.compiled.gt4py_translations import dace_settings, program_key
from gt4py_halo.compiled.lowered import CopyMap

log = logging.getLogger(__name__)

_DIRECTORY = "gt4py_halo_steps"
_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class StepKey:
    """A step's key, and the closure prefixes of its exchanges in the order its closure
    lists them (a record stores what each is renamed to: the prefixes differ by process)."""

    digest: str
    prefixes: tuple[str, ...]


def step_key(dace_program: Any, descriptors: list, around: Any) -> StepKey | None:
    """The key of a step parsed with argument ``descriptors``, given what else its build
    depends on (``around``: arguments' layouts, options; JSON-able); ``None`` where the step
    has none (module docstring). Runs DaCe's preprocessor, which resolves the closure: as
    collective as the parse (it makes the exchanges' plan data on first use)."""
    try:
        with warnings.catch_warnings():  # what it warns of, the parse reports (or raises)
            warnings.simplefilter("ignore")
            tree, closure, names = _preprocessed(dace_program, descriptors)
    except Exception:  # the parse reports it
        log.debug("step %s not preprocessed: no key", dace_program.name, exc_info=True)
        return None
    prefixes = tuple(dict.fromkeys(p for p in map(process_prefix, closure.closure_arrays) if p))
    parts = [_FORMAT, _toolchain(), around]
    if not _described(tree, parts) or closure.callbacks or not _names_described(tree, names, parts):
        log.debug("step %s reads what has no key: parsed at every run", dace_program.name)
        return None
    for name, (_, desc, _, _) in closure.closure_arrays.items():
        prefix = process_prefix(name)
        if prefix is not None:  # the same data in every process: by its position
            name = f"{prefixes.index(prefix)}:{name.removeprefix(prefix)}"
        parts.append((name, desc.to_json()))
    for name, value in closure.closure_constants.items():
        if not _described(value, parts):
            return None
        parts.append(name)
    text = json.dumps(parts, sort_keys=True, default=str)
    return StepKey(hashlib.sha256(text.encode()).hexdigest()[:32], prefixes)


def value_key(value: Any) -> str | None:
    """A key of what ``value`` contributes to a step's SDFG, the same in every process;
    ``None`` if there is none. Objects may say theirs (``__gt4py_halo_key__``)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (np.generic, np.dtype, dace.typeclass)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, type) and issubclass(value, (np.generic, bool, int, float, complex)):
        return f"type:{value.__module__}.{value.__qualname__}"  # a dtype: np.float32, float
    if dace.dtypes.ismodule(value):
        return f"module:{value.__name__}"
    if isinstance(value, dace.symbol):
        return f"symbol:{value.name}:{value.dtype}"
    own = getattr(type(value), "__gt4py_halo_key__", None)
    if own is not None:
        return own(value)
    key, persistent = program_key(value)
    if key is not None and persistent:
        return f"gt4py:{key}"
    if isinstance(value, np.ufunc) or (
        callable(value) and getattr(value, "__module__", None) in ("builtins", "math")
    ):
        return f"function:{getattr(value, '__module__', 'numpy')}.{value.__name__}"
    return None


@dataclasses.dataclass(frozen=True)
class Record:
    """What a build left for later runs (module docstring)."""

    sdfg_name: str
    folder: str
    #: what each of the key's prefixes is renamed to (``canonical_names``)
    renamed: tuple[str, ...]
    #: arguments exchanged whole: position, index of the exchange's prefix, plan name
    exchanged: tuple[tuple[int, int, str], ...]
    timers: tuple[tuple[str, str], ...]
    #: the positions of the arguments the step writes
    written: tuple[int, ...]


def load(key: StepKey) -> Record | None:
    """The record of ``key``, if one was stored and its binary is still there."""
    folder = _folder()
    if folder is None:
        return None
    try:
        with open(folder / f"{key.digest}.json") as file:
            fields = json.load(file)
        record = Record(
            fields["sdfg_name"],
            fields["folder"],
            tuple(fields["renamed"]),
            tuple(tuple(e) for e in fields["exchanged"]),
            tuple(tuple(t) for t in fields["timers"]),
            tuple(fields["written"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    built = Path(record.folder)
    libraries = list(built.glob("build/lib*.so"))
    if not libraries or not whole_gzip(built / "program.sdfgz"):
        return None
    return record if all(map(whole_library, libraries)) else None


def store(key: StepKey, record: Record) -> None:
    """Keeps ``record`` under ``key``: written whole or not at all."""
    folder = _folder()
    if folder is not None:
        write_whole(folder / f"{key.digest}.json", json.dumps(dataclasses.asdict(record)).encode())


def store_lowered(key: StepKey, sdfg: dace.SDFG, report: FusionReport) -> None:
    """Keeps the lowered step of ``key`` and its fusion report, for ``Program.to_sdfg`` and
    ``fusion_report`` of later runs (a build needs the binary only: nothing is kept for it);
    written whole or not at all, where none is kept whole yet."""
    folder = _folder()
    path = None if folder is None else folder / f"{key.digest}.lowered.json.gz"
    if path is None or whole_gzip(path):
        return
    shown = {"sdfg": sdfg.to_json(), "report": dataclasses.asdict(report)}
    write_whole(path, gzip.compress(json.dumps(shown).encode(), compresslevel=1))


def load_lowered(key: StepKey) -> tuple[dace.SDFG, FusionReport] | None:
    """What ``store_lowered`` kept under ``key``, if anything (whole)."""
    folder = _folder()
    if folder is None:
        return None
    try:
        with open(folder / f"{key.digest}.lowered.json.gz", "rb") as file:
            shown = json.loads(gzip.decompress(file.read()))
        report = shown["report"]
        copy_maps = {label: CopyMap(**c) for label, c in report.pop("copy_maps").items()}
        return dace.SDFG.from_json(shown["sdfg"]), FusionReport(**report, copy_maps=copy_maps)
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return None


def _folder() -> Path | None:
    from gt4py.next import config

    if config.BUILD_CACHE_LIFETIME is not config.BuildCacheLifetime.PERSISTENT:
        return None
    return Path(config.BUILD_CACHE_DIR) / _DIRECTORY


def _preprocessed(dace_program: Any, descriptors: list) -> tuple[ast.AST, Any, dict[str, Any]]:
    """The step's code as DaCe's parser gets it, its closure, and the names the parse
    resolves what is left of the code's names by: what ``DaceProgram._generate_pdp`` does
    before it parses, including that the program then knows its closure
    (``__sdfg_closure__``, what a call passes)."""
    argtypes, _, constants, _ = dace_program._get_type_annotations(descriptors, {})
    if dace_program.methodobj is not None:  # a method's object: resolved like a global
        dace_program.global_vars[dace_program.objname] = dace_program.methodobj
    global_vars = copy.copy(dace_program.global_vars)
    global_vars.update(constants)
    modules = {k: v.__name__ for k, v in global_vars.items() if dace.dtypes.ismodule(v)}
    modules["builtins"] = ""
    for argtype in argtypes.values():
        global_vars.update({s.name: s for s in argtype.free_symbols})
    parsed, closure = preprocessing.preprocess_dace_program(
        dace_program.f,
        argtypes,
        global_vars,
        modules,
        resolve_functions=dace_program.resolve_functions,
        default_args=set(),
    )
    dace_program.closure_arg_mapping = {k: v[2] for k, v in closure.closure_arrays.items()}
    dace_program.resolver = closure
    return parsed.preprocessed_ast, closure, global_vars


def _described(node: Any, parts: list) -> bool:
    """Appends a description of ``node`` (the preprocessed code, or a value in it) to
    ``parts``; False where some value in it has no key."""
    if isinstance(node, ast.AST):
        parts.append(type(node).__name__)
        for field, value in ast.iter_fields(node):
            parts.append(field)
            if not _described(value, parts):
                return False
        return True
    if isinstance(node, (list, tuple)):
        parts.append(len(node))
        return all(_described(value, parts) for value in node)
    key = value_key(node)
    parts.append(key)
    return key is not None


def _names_described(tree: ast.AST, names: dict[str, Any], parts: list) -> bool:
    """Appends the values of the names ``tree`` reads that it does not bind (a dtype the
    preprocessor leaves as a name: ``np.zeros(n, dtype=DT)``, ``DT`` a global or a closure
    variable), and the attributes it reads of modules among them (``cfg.DT``), as the parse
    resolves them (``names``: the step's globals and closure); False where one has no key.
    Builtins the parse knows without them are left out."""
    bound = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    bound |= {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    read = sorted(
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        - bound
    )
    for name in read:
        if name not in names:
            continue
        key = value_key(names[name])
        if key is None:
            return False
        parts.append((name, key))
    for node in ast.walk(tree):  # a module's attribute: ``cfg.DT``, ``numpy.zeros``
        chain = _attribute_chain(node)
        if chain is None or chain[0] not in read or not dace.dtypes.ismodule(names.get(chain[0])):
            continue
        value = names[chain[0]]
        for attribute in chain[1:]:
            value = getattr(value, attribute, _MISSING)
        key = value_key(value) or _library_function_key(value)
        if key is None:
            return False
        parts.append((".".join(chain), key))
    return True


_MISSING = object()


def _attribute_chain(node: ast.AST) -> list[str] | None:
    """``["a", "b", "c"]`` for ``a.b.c``; None for anything but a name's attributes."""
    if not isinstance(node, ast.Attribute):
        return None
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return [node.id, *reversed(attributes)] if isinstance(node, ast.Name) else None


def _library_function_key(value: Any) -> str | None:
    """A NumPy, DaCe or math function by its name (DaCe parses them by name: their code is
    not the step's); None for anything else (a user's function may change)."""
    module = getattr(value, "__module__", None) or ""
    if callable(value) and module.split(".")[0] in ("numpy", "dace", "math"):
        return f"function:{module}.{getattr(value, '__qualname__', value)}"
    return None


def _toolchain() -> str:
    """Python, DaCe (with its configuration), GT4Py, gt4py_halo's own sources and the
    libraries a binary links."""
    return json.dumps(
        [
            sys.version,
            dace.__version__,
            gt4py.__version__,
            dace_settings(),
            _sources(),
            linked_libraries(),
        ],
        sort_keys=True,
        default=str,
    )


@functools.cache
def _sources() -> str:
    package = Path(__file__).parent.parent
    sources = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".h", ".hpp"):
            sources.update(str(path.relative_to(package)).encode() + path.read_bytes())
    return sources.hexdigest()
