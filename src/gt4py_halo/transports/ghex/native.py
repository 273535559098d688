"""The runtime 'ghex' exchange's C++ module (``native.cpp``), built on first use.

It cannot be built at installation: it compiles against GHEX's headers and libraries, which
the optional ``ghex`` package brings, and pip installs that beside this package, not into
its build environment. So the first 'ghex' exchange of an environment builds it (with the
MPI C++ compiler wrapper ``mpicxx``, which GHEX's own build needs too: the environment's,
else the one on PATH) into a cache kept for later runs, ``$XDG_CACHE_HOME/gt4py_halo``
(default ``~/.cache/gt4py_halo``), under a name made from everything the build reads: its
sources, GHEX's version and place, the compiler's identity, Python's. Processes building at
once (the ranks of a job, or jobs sharing the folder) take turns on a file lock: one builds,
the others then load what it wrote. A build is written whole or not at all.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

import ghex
import gridtools_cpp

from gt4py_halo.errors import BackendUnavailableError

_NAME = "_ghex_native"  # its PyInit function's name
_HERE = Path(__file__).parent
_SOURCES = (_HERE / "native.cpp", _HERE / "include" / "gt4py_halo_ghex.hpp")
_GHEX = Path(ghex.__file__).parent
_module: ModuleType | None = None


def module() -> ModuleType:
    """The built module, built first where no build of these sources is cached."""
    global _module
    if _module is None:
        compiler = _compiler()
        if compiler is None:
            raise BackendUnavailableError(
                "the 'ghex' backend builds its C++ exchange with the MPI C++ compiler wrapper "
                "mpicxx (as GHEX's own build does), which is not on PATH"
            )
        path = _cache() / f"{_NAME}-{_digest(compiler)}{sysconfig.get_config_var('EXT_SUFFIX')}"
        if not path.exists():
            with (path.parent / ".lock").open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
                if not path.exists():
                    _build(compiler, path)
        loader = importlib.machinery.ExtensionFileLoader(_NAME, str(path))
        spec = importlib.util.spec_from_file_location(_NAME, path, loader=loader)
        built = importlib.util.module_from_spec(spec)
        loader.exec_module(built)
        _module = built
    return _module


def _compiler() -> str | None:
    """The environment's ``mpicxx`` (the PyPI MPICH wheel's, which mpi4py uses), else the one
    on PATH (a cluster's MPI)."""
    beside = Path(sysconfig.get_path("scripts")) / "mpicxx"
    return str(beside) if beside.exists() else shutil.which("mpicxx")


def _cache() -> Path:
    """The cache folder; where it cannot be made (a read-only home), one in the temporary
    folder."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gt4py_halo"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        root = Path(tempfile.gettempdir()) / f"gt4py_halo-{os.getuid()}"
        root.mkdir(exist_ok=True)
    return root


def _digest(compiler: str) -> str:
    h = hashlib.sha256()
    for source in _SOURCES:
        h.update(source.read_bytes())
    identity = [_compiler_says(compiler, "-show"), _compiler_says(compiler, "--version")]
    library = (_GHEX / "lib" / "libghex.so").stat()
    libraries = [str(_GHEX), ghex.__version__, f"{library.st_size} {library.st_mtime_ns}"]
    h.update("\0".join([*identity, *libraries, *_flags()]).encode())
    return h.hexdigest()[:24]


def _compiler_says(compiler: str, flag: str) -> str:
    return subprocess.run([compiler, flag], capture_output=True, text=True, check=False).stdout


def _flags() -> list[str]:
    lib = _GHEX / "lib"
    includes = [
        sysconfig.get_paths()["include"],
        _GHEX / "include",
        gridtools_cpp.get_include_dir(),
        _HERE / "include",
    ]
    return [
        "-std=c++17",
        "-O3",
        "-fPIC",
        "-shared",
        *(f"-I{path}" for path in includes),
        f"-L{lib}",
        "-lghex",
        "-loomph_mpi",
        "-lhwmalloc",
        f"-Wl,-rpath,{lib}",
    ]


def _build(compiler: str, path: Path) -> None:
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        built = Path(scratch) / path.name
        command = [compiler, str(_SOURCES[0]), "-o", str(built), *_flags()]
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        if run.returncode:
            raise BackendUnavailableError(
                f"building the 'ghex' backend's C++ exchange failed ({' '.join(command)}):\n"
                f"{run.stderr[-4000:]}"
            )
        os.replace(built, path)
