"""The MPI build environment of our expansions: DaCe's, made usable in CUDA builds too.

The MPI tasklets keep their requests in the program's state struct (``MPI_Request`` fields),
and DaCe copies that struct into the generated ``.cu`` file as well. DaCe's own MPI
environment includes ``mpi.h`` in the host file only and hands MPI's include directory to the
host compiler only (``cmake_compile_flags``), so nvcc stopped at ``MPI_Request`` (found by
compiling the generated CUDA code with nvcc, ``tests/unit/test_gpu_codegen.py``). Here the
header goes to both files and the include directory to every compiler. The host file also
gets our header (``include/gt4py_halo_mpi.hpp``): the exchanges' check of the messages they
received.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import dace.library
from dace.libraries.mpi.environments.mpi import MPI as DaceMpi


@dace.library.environment
class MPI:
    cmake_minimum_version = DaceMpi.cmake_minimum_version
    cmake_packages: ClassVar = ["MPI"]
    cmake_files: ClassVar = []
    cmake_variables: ClassVar = {}
    cmake_includes: ClassVar = ["${MPI_CXX_INCLUDE_DIRS}", str(Path(__file__).parent / "include")]
    cmake_libraries = DaceMpi.cmake_libraries
    cmake_compile_flags: ClassVar = []
    cmake_link_flags = DaceMpi.cmake_link_flags

    headers: ClassVar = {"frame": ["mpi.h", "gt4py_halo_mpi.hpp"], "cuda": ["mpi.h"]}
    state_fields: ClassVar = []
    init_code = DaceMpi.init_code
    finalize_code = DaceMpi.finalize_code
    dependencies: ClassVar = []
