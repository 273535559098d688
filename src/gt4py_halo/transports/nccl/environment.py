"""NCCL's headers and library for the expansions: NVIDIA's PyPI wheel, else the system's.

The wheel (``nvidia-nccl-cu13``, the ``nccl`` extra) ships ``include/nccl.h`` and
``lib/libnccl.so.2`` (no unversioned name to link by): linked by path, found at run time
through an rpath. Without the wheel, ``nccl.h`` and ``libnccl`` come from the compiler's
default paths (a CUDA image's NCCL). The header goes to the host and the CUDA file alike: the
state struct holding the NCCL communicators is in both.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import dace.library

from gt4py_halo.transports.mpi.environment import MPI


def _wheel_root() -> Path | None:
    try:
        import nvidia.nccl  # namespace package of nvidia-nccl-cu13
    except ImportError:
        return None
    for path in nvidia.nccl.__path__:
        if (Path(path) / "include" / "nccl.h").is_file():
            return Path(path)
    return None


_ROOT = _wheel_root()


@dace.library.environment
class NCCL:
    cmake_minimum_version = None
    cmake_packages: ClassVar = []
    cmake_files: ClassVar = []
    cmake_variables: ClassVar = {}
    cmake_includes: ClassVar = [str(Path(__file__).parent / "include")] + (
        [str(_ROOT / "include")] if _ROOT else []
    )
    cmake_libraries: ClassVar = [str(_ROOT / "lib" / "libnccl.so.2")] if _ROOT else ["nccl"]
    cmake_compile_flags: ClassVar = []
    cmake_link_flags: ClassVar = [f"-Wl,-rpath,{_ROOT / 'lib'}"] if _ROOT else []
    headers: ClassVar = {"frame": ["gt4py_halo_nccl.hpp"], "cuda": ["gt4py_halo_nccl.hpp"]}
    state_fields: ClassVar = []
    init_code = ""
    finalize_code = ""
    dependencies: ClassVar = [MPI]  # the unique id travels over the exchange's communicator
