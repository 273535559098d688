"""The files of compiled steps kept between runs: step records (``step_cache.py``), GT4Py
translations (``gt4py_translations.py``) and the binaries DaCe builds in its build folders.

Jobs may share a cache folder, and jobs started from one working directory share DaCe's build
folders. So a cache file is written whole or not at all (a temporary file renamed over it); a
build folder is locked while a step is built in it (DaCe, told to reuse what a folder holds,
would load another job's library half written); and a library that is not whole (a build
killed while linking, a full disk: loading one ends the process with a bus error) is built
again, as is a build whose saved SDFG (``program.sdfgz``, which loading the build reads) is
not whole. A cache folder that cannot be written (read-only, full) only means that nothing is
kept there: the run goes on, with a warning. A binary is kept for the libraries it was linked
against (``linked_libraries``): another MPI (a module swapped on a cluster) or another GHEX
builds anew, where loading the old binary could crash.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import importlib.metadata
import itertools
import os
import shutil
import socket
import struct
import tempfile
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dace

from gt4py_halo.errors import ProgramError

_WARNED: set[Path] = set()  # cache folders found unwritable, warned about once


@functools.cache
def linked_libraries() -> tuple[str, ...]:
    """What a step's binary links besides its code, as keys of builds and their records: the
    MPI library (its own version string: implementation, version, ABI, configuration) and
    the GHEX package, if installed."""
    from mpi4py import MPI

    try:
        ghex = importlib.metadata.version("ghex")
    except importlib.metadata.PackageNotFoundError:
        ghex = "none"
    return (MPI.Get_library_version(), f"ghex {ghex}")


def write_whole(path: Path, data: bytes) -> None:
    """``data`` into ``path``, whole or not at all; nothing where its folder cannot be
    written (a warning, once per folder)."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, delete=False, suffix=".part") as file:
            try:
                file.write(data)
            except BaseException:
                os.unlink(file.name)
                raise
        os.replace(file.name, path)
    except OSError as error:
        if folder not in _WARNED:
            _WARNED.add(folder)
            warnings.warn(
                f"gt4py_halo: cannot write into the cache folder {folder} ({error}); nothing is "
                "kept there, so later runs build again",
                stacklevel=2,
            )


@contextlib.contextmanager
def building_in(folder: str) -> Iterator[None]:
    """While a step is built in DaCe's build folder ``folder``: other jobs building in it wait
    (a lock file beside it), and a library there that is not whole is removed (built again),
    as are the SDFG and every library of a build whose saved SDFG is missing or not whole
    (loading the build reads it)."""
    path = Path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f"{path.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
        saved = path / "program.sdfgz"
        libraries = list(path.glob("build/lib*.so"))
        broken = (saved.exists() or bool(libraries)) and not whole_gzip(saved)
        for library in libraries:
            if broken or not whole_library(library):
                library.unlink()
        if broken:
            saved.unlink(missing_ok=True)
        yield


def load_build(folder: str) -> Any:
    """The build in DaCe's build folder ``folder``, loaded as an instance of its own.

    Each instance of a step keeps state of its own in its library (requests, kept calls), so
    a library this process loaded already is loaded from a copy. DaCe names its copies
    ``lib….so_N`` beside the library, the first such name that does not exist yet: ranks
    sharing the folder took each other's copies, one still being written (a rank failed to
    load it). The copy here is this process's own (named by host and process), made whole
    before it is loaded and removed once it is (the loaded library stays mapped).
    """
    from dace.codegen import compiler

    path = Path(folder)
    saved = path / "program.sdfgz"
    try:
        sdfg = dace.SDFG.from_file(str(saved))
        library = Path(compiler.get_binary_name(path, sdfg_name=sdfg.name))
        copy = library.with_name(
            f"{library.name}.{socket.gethostname()}.{os.getpid()}.{next(_COPIES)}"
        )
        shutil.copyfile(library, copy)
    except FileNotFoundError as error:  # (a later call's new shapes load the build again)
        raise ProgramError(
            f"the build in {path} is gone ({error.filename} missing): its folder was removed "
            "while the job ran. Remove build folders between runs only"
        ) from None
    try:
        return compiler.get_program_handle(
            copy, sdfg, stub_library_path=compiler._get_stub_library_path(library)
        )
    finally:
        copy.unlink()


_COPIES = itertools.count()  # this process's copies of libraries, numbered


def whole_gzip(path: Path) -> bool:
    """Whether ``path`` holds a whole gzip stream of some data (read through: its end and
    checksum; an empty file is none)."""
    size = 0
    try:
        with gzip.open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                size += len(chunk)
    except (OSError, EOFError, zlib.error):
        return False
    return size > 0


def whole_library(path: Path) -> bool:
    """Whether the ELF shared library at ``path`` holds every byte its headers point to."""
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            head = file.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF
                return False
            order = "<" if head[5] == 1 else ">"
            program_headers, section_headers = struct.unpack_from(order + "QQ", head, 0x20)
            entry, count, section_entry, sections = struct.unpack_from(order + "HHHH", head, 0x36)
            if (
                max(program_headers + entry * count, section_headers + section_entry * sections)
                > size
            ):
                return False
            file.seek(program_headers)
            table = file.read(entry * count)
    except OSError:
        return False
    for n in range(count):  # each segment's bytes in the file: p_offset + p_filesz
        offset, _, _, in_file = struct.unpack_from(order + "QQQQ", table, n * entry + 8)
        if offset + in_file > size:
            return False
    return True
