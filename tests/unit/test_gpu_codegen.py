"""The CUDA code of a compiled step, checked without a GPU: generated and compiled, not run.

Pack and unpack maps must become kernels, MPI calls must stay on the host, nothing may
synchronize the whole device, and the host may wait for the stream once per exchange (the
wait standard MPI needs before sending), plus once when the step returns to Python.

Where nvcc is installed (the ``nvcc`` extra: NVIDIA's CUDA 13 compiler wheels from PyPI, or
a CUDA toolkit on ``PATH``), DaCe's own CMake build also compiles and links the step; it
needs no GPU and no driver.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import dace
import numpy as np
import pytest
from dace.codegen.exceptions import CompilationError, CompilerConfigurationError

import gt4py_halo as gh
from gt4py_halo import transports
from gt4py_halo.compiled.program import codegen_config

EXCHANGES = 2
CUDA_ARCH = "90"  # any architecture nvcc knows: nothing runs


@pytest.fixture(scope="module")
def sdfg():
    return lowered_step()


def lowered_step() -> dace.SDFG:
    d = gh.CartesianDecomposition((17, 11), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(device="gpu")
    def step(a, b):
        ex.exchange(a)
        for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
            b[i, j] = a[i + 1, j] + a[i - 1, j] + a[i, j + 1] + a[i, j - 1]
        h = ex.start(b)  # split phase: nothing in between here, but a start/finish pair
        h.finish()

    a = np.zeros(d.allocated_shape)
    return step.to_sdfg(a, a.copy())


@pytest.fixture(scope="module")
def called_sdfg():
    return lowered_called_step()


def lowered_called_step() -> dace.SDFG:
    """Stencils called as functions around the exchanges: after simplification the
    expansions share states with them, and the GPU lowering gives each a state of its own."""
    d = gh.CartesianDecomposition((17, 11), halo=1, periodic=True)
    ex = gh.make_exchange(d)

    @gh.program(device="gpu")
    def step(a, b):
        ex.exchange(a)
        laplace(a, b)
        h = ex.start(b)
        h.finish()
        laplace(b, a)

    a = np.zeros(d.allocated_shape)
    return step.to_sdfg(a, a.copy())


def laplace(a, b):
    for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
        b[i, j] = a[i + 1, j] + a[i - 1, j] + a[i, j + 1] + a[i, j - 1]


def test_lowering_is_the_same_in_every_process():
    """Ranks lower a step each and must agree on its hash: nothing in the lowered SDFG may
    depend on the process (DaCe's GPU transformation orders some interstate assignments by
    string hashes, salted per process; node order must not follow object ids). Two processes
    with different string hash salts lower the same steps."""
    script = (
        "import test_gpu_codegen as t; print(t.lowered_step().name, t.lowered_called_step().name)"
    )
    names = []
    for salt in ("1", "2"):
        lowered = subprocess.run(
            [sys.executable, "-c", script],
            check=False,
            cwd=Path(__file__).parent,
            # lowered, not loaded from what an earlier showing kept (``step_cache``)
            env={**os.environ, "PYTHONHASHSEED": salt, "GT4PY_BUILD_CACHE_LIFETIME": "session"},
            capture_output=True,
            text=True,
        )
        assert lowered.returncode == 0, lowered.stderr
        names.append(lowered.stdout.split()[-2:])
    assert names[0] == names[1]


@pytest.fixture(scope="module")
def generated(sdfg):
    return _host_and_device_code(sdfg)


def _host_and_device_code(sdfg) -> tuple[str, str]:
    """The body of the step's host function, and its CUDA code."""
    with codegen_config("gpu"):
        codes = sdfg.generate_code()
    host = next(c.clean_code for c in codes if c.language == "cpp" and "__program_" in c.clean_code)
    cuda = next(c.clean_code for c in codes if c.language == "cu")
    return host[host.index(f"void __program_{sdfg.name}_internal(") :], cuda


def test_one_pack_and_one_unpack_kernel_per_exchange(generated):
    """On a GPU an exchange copies each arena (here one: one field) with one kernel over all
    directions; self copies (periodic axes on one rank) one kernel per direction, but one
    for the two faces across the unit-stride axis (8 directions: 7 kernels)."""
    body, cuda = generated
    for kind in ("pack", "unpack"):
        launches = re.findall(rf"__dace_runkernel_\w+_{kind}_0_all\w*\(", body)
        assert len(launches) == EXCHANGES
        assert len(re.findall(rf"__global__ .*_{kind}_0_all", cuda)) == EXCHANGES
    assert not re.search(r"__dace_runkernel_\w+_(un)?pack_\d+_\d+", body), "a per-direction copy"
    assert len(re.findall(r"__dace_runkernel_\w+_self_0_\d+\w*\(", body)) == EXCHANGES * 7


def test_stencil_kernel_packs_what_it_computed(generated):
    """The map writing ``b`` right before ``ex.start(b)`` also writes ``b``'s send arena: its
    kernel takes the arena; the pack kernels run only if its range missed a send box."""
    body, cuda = generated
    stencil = re.search(r"__global__ void\s+__launch_bounds__\(\d+\) \w*step_\w+\(([^)]*)\)", cuda)
    assert stencil and re.search(r"double \* __restrict__ halo_\w+_sarena_0", stencil[1])
    assert re.search(r"prepacked_\w+_pack", cuda), "the fused pack is device code"
    unless_packed = body[: body.rindex("_pack_0_all")].rsplit("if (", 1)[1]
    assert unless_packed.startswith("(! "), "the pack kernel runs unless the stencil packed"


def test_plan_arrays_stay_on_the_host(generated):
    """Neighbour ranks and communicator are read by host code only: no device copy of them,
    and no copy at all but the staging of messages through the pinned mirrors."""
    body, _ = generated
    assert "gpu___halo" not in body
    copies = [line for line in body.splitlines() if "cudaMemcpy" in line]
    assert copies and all("_host" in line for line in copies)


def test_segment_offsets_are_placed_once_per_instance(generated):
    """The table of segment offsets, filled at an instance's first call only, lives in the
    instance's state: DaCe's GPU transformation would allocate it at every call (its size is
    constant), and every call after the first would read offsets from fresh memory."""
    body, _ = generated
    assert body.count("_placed_ready) {") == EXCHANGES
    assert re.findall(r"int64_t\* placed = __state->\w+_placed;", body)
    assert not re.search(r"\n\s*\w+_placed = new ", body), "a table allocated per call"


def test_mpi_stays_on_the_host(generated):
    body, cuda = generated
    assert body.count("MPI_Startall(") == EXCHANGES
    assert body.count("gt4py_halo_mpi::wait_checked(") == EXCHANGES
    assert not re.search(r"MPI_\w+\(", cuda), "an MPI call in device code"


def test_one_stream_wait_per_exchange_and_no_device_wide_sync(generated):
    body, _ = generated
    assert "cudaDeviceSynchronize" not in body
    assert body.count("cudaStreamSynchronize") <= EXCHANGES + 1  # + the return to Python
    before_send = body.split("MPI_Startall(")
    for part in before_send[:-1]:
        assert part.rstrip().endswith("cudaStreamSynchronize(__dace_current_stream));")


@pytest.fixture(scope="module")
def profiled_sdfg(tmp_path_factory):
    """The step of ``lowered_called_step``, lowered while a profile is on: with timers."""
    from mpi4py import MPI

    with gh.profile(tmp_path_factory.mktemp("profile"), comm=MPI.COMM_SELF):
        return lowered_called_step()


def test_profiled_step_records_cuda_events_without_waiting(called_sdfg, profiled_sdfg):
    """Each working state of a profiled GPU step records a CUDA event on the program's stream
    before and after its kernels (and reads the host clock); it adds no wait for the stream or
    the device: the events are read when the profile ends."""
    plain, _ = _host_and_device_code(called_sdfg)
    body, cuda = _host_and_device_code(profiled_sdfg)
    begins = re.findall(r"gt4py_halo_timers::device_begin\((\d+)\)", body)
    ends = re.findall(r"gt4py_halo_timers::device_end\((\d+)\)", body)
    assert begins and sorted(begins) == sorted(ends)
    assert len(begins) >= 2  # the two stencils' states at least
    for wait in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"):
        assert body.count(wait) == plain.count(wait), wait
    assert "gt4py_halo_timers" not in cuda  # host code only
    frame = profiled_sdfg.global_code["frame"].as_string
    assert "cudaEventRecord(e, nullptr)" in frame  # the default stream: codegen_config


@pytest.fixture(scope="module")
def unstructured_sdfg():
    """An unstructured exchange of GPU fields, split phase and blocking (one rank: the
    neighbour count is a run-time value, the code is the same as on many)."""
    d = gh.UnstructuredDecomposition({"cell": (np.arange(12), np.array([], dtype=np.int64))})
    ex = gh.make_exchange(d)

    @gh.program(device="gpu")
    def step(c, e):
        h = ex.start(c)
        ex.exchange(e)
        h.finish()

    c = np.zeros((12, 4))
    return step.to_sdfg(c, np.zeros(12, dtype=np.int32))


@pytest.fixture(scope="module")
def unstructured_generated(unstructured_sdfg):
    return _host_and_device_code(unstructured_sdfg)


def test_unstructured_gathers_and_scatters_are_kernels(unstructured_generated):
    """One gather and one scatter kernel per field, reading device copies of the index
    lists, uploaded once; MPI on the host, one stream wait per exchange before sending."""
    body, cuda = unstructured_generated
    for kind in ("pack", "unpack"):
        assert len(re.findall(rf"__global__ .*_{kind}_\d+_0", cuda)) == EXCHANGES
    assert re.findall(r"_(send|recv)_idx_device", cuda), "kernels read the device index lists"
    uploads = [line for line in body.splitlines() if "cudaMemcpyHostToDevice" in line]
    assert sum("host_list" in line for line in uploads) == 2 * EXCHANGES  # send and recv lists
    assert body.count("MPI_Startall(") == EXCHANGES and not re.search(r"MPI_\w+\(", cuda)
    assert "cudaDeviceSynchronize" not in body
    assert body.count("cudaStreamSynchronize") <= EXCHANGES + 1  # + the return to Python
    for part in body.split("MPI_Startall(")[:-1]:
        assert part.rstrip().endswith("cudaStreamSynchronize(__dace_current_stream));")


@contextlib.contextmanager
def nccl_exchanges():
    """``make_exchange(d, backend="nccl")`` made possible where CuPy is not installed (here):
    the compiled step uses the nccl transport's expansions and never its runtime mover,
    which needs CuPy; without CuPy the exchange object gets the mpi transport's mover."""
    with pytest.MonkeyPatch.context() as patch:
        if not transports.installed("nccl"):
            mover = transports.TRANSPORTS["mpi"].runtime
            nccl = dataclasses.replace(transports.TRANSPORTS["nccl"], runtime=mover)
            patch.setitem(transports.TRANSPORTS, "nccl", nccl)
        yield


def nccl_step(device: str = "gpu") -> dace.SDFG:
    """A step of cartesian exchanges (blocking and split, around a stencil) with nccl."""
    d = gh.CartesianDecomposition((17, 11), halo=1, periodic=True)
    with nccl_exchanges():
        ex = gh.make_exchange(d, backend="nccl")

    @gh.program(device=device)
    def step(a, b):
        ex.exchange(a)
        laplace(a, b)
        h = ex.start(b)
        h.finish()

    a = np.zeros(d.allocated_shape)
    return step.to_sdfg(a, a.copy())


def nccl_unstructured_step() -> dace.SDFG:
    d = gh.UnstructuredDecomposition({"cell": (np.arange(12), np.array([], dtype=np.int64))})
    with nccl_exchanges():
        ex = gh.make_exchange(d, backend="nccl")

    @gh.program(device="gpu")
    def step(c, e):
        h = ex.start(c)
        ex.exchange(e)
        h.finish()

    return step.to_sdfg(np.zeros((12, 4)), np.zeros(12, dtype=np.int32))


@pytest.fixture(scope="module")
def nccl_sdfg():
    return nccl_step()


@pytest.fixture(scope="module")
def nccl_unstructured_sdfg():
    return nccl_unstructured_step()


@pytest.mark.parametrize("step", ["nccl_sdfg", "nccl_unstructured_sdfg"])
def test_nccl_exchanges_never_wait_on_the_host(step, request):
    """With nccl, an exchange is pack kernels, one NCCL group of sends and receives on the
    program's stream, unpack kernels: no stream or device wait, no MPI call per exchange (MPI
    only broadcasts the NCCL id on the first call)."""
    body, cuda = _host_and_device_code(request.getfixturevalue(step))
    assert body.count("ncclGroupStart()") == EXCHANGES
    assert body.count("ncclGroupEnd()") == EXCHANGES
    posts = re.findall(r"(ncclSend|ncclRecv)\((.*)\)\);", body)
    assert {call for call, _ in posts} == {"ncclSend", "ncclRecv"}
    assert all(args.endswith("__dace_current_stream") for _, args in posts)
    assert not re.search(r"MPI_(Start|Wait|Isend|Irecv)", body)
    assert "cudaDeviceSynchronize" not in body
    assert "cudaStreamSynchronize" not in body
    assert not re.search(r"nccl(Send|Recv|Group)", cuda), "NCCL called from device code"


def test_nccl_refuses_host_fields():
    """A CPU step with the nccl transport: a FieldError when it is lowered (every rank lowers
    the same step), before anything runs."""
    with pytest.raises(gh.FieldError, match="'nccl' transport exchanges GPU fields only"):
        nccl_step(device="cpu")


def cuda_toolkit() -> Path | None:
    """The root of a CUDA toolkit: NVIDIA's PyPI wheels (``nvidia/cu13``), else nvcc on PATH."""
    try:
        import nvidia  # namespace package of nvidia-cuda-nvcc, nvidia-cuda-runtime, ...

        roots = [Path(p) / "cu13" for p in nvidia.__path__]
    except ImportError:
        roots = []
    if nvcc := shutil.which("nvcc"):
        roots.append(Path(nvcc).resolve().parent.parent)
    for root in roots:
        if (root / "bin" / "nvcc").is_file() and (root / "include" / "cuda_runtime.h").is_file():
            return root
    return None


def cmake_args(root: Path) -> str:
    """Point CMake at this toolkit's nvcc. The wheel ships ``libcudart.so.13`` but not the
    unversioned ``libcudart.so`` that CMake's FindCUDAToolkit looks for: name it."""
    args = [f"-DCMAKE_CUDA_COMPILER={root / 'bin' / 'nvcc'}"]
    versioned = sorted((root / "lib").glob("libcudart.so.*"))
    if versioned and not (root / "lib" / "libcudart.so").exists():
        args += [f"-DCUDA_CUDART={versioned[0]}", f"-DCUDA_cudart_LIBRARY={versioned[0]}"]
    return shlex.join(args)


@pytest.mark.parametrize(
    "step",
    [  # (not called_sdfg: profiled_sdfg is its step with timers, its code and more)
        "sdfg",
        "profiled_sdfg",
        "unstructured_sdfg",
        "nccl_sdfg",
        "nccl_unstructured_sdfg",
    ],
)
def test_generated_code_compiles_with_nvcc(step, request, tmp_path):
    root = cuda_toolkit()
    if root is None:
        pytest.skip("no nvcc: pip install -e '.[nvcc]' (NVIDIA's CUDA 13 wheels)")
    build = copy.deepcopy(request.getfixturevalue(step))
    build.build_folder = str(tmp_path)
    settings = {
        ("compiler", "cuda", "backend"): "cuda",
        ("compiler", "cuda", "path"): str(root),
        ("compiler", "cuda", "cuda_arch"): CUDA_ARCH,
        ("compiler", "extra_cmake_args"): cmake_args(root),
    }
    failure = None
    with contextlib.ExitStack() as stack:
        stack.enter_context(codegen_config("gpu"))
        for key, value in settings.items():
            stack.enter_context(dace.config.set_temporary(*key, value=value))
        try:
            build.compile(return_program_handle=False)  # no GPU here: build, do not load
        except (CompilationError, CompilerConfigurationError) as error:
            failure = str(error)
    if failure is not None:  # the compiler's errors, not its pages of warnings
        errors = [line for line in failure.splitlines() if re.search(r"(?i)error|failed", line)]
        pytest.fail("the generated code does not build:\n" + "\n".join(errors[:40]), pytrace=False)

    commands = json.loads((tmp_path / "build" / "compile_commands.json").read_text())
    cuda = [c for c in commands if c["file"].endswith(".cu")]
    assert cuda and all(str(root / "bin" / "nvcc") in c["command"] for c in cuda)
    assert f"arch=compute_{CUDA_ARCH}" in cuda[0]["command"]
    assert any(c["file"].endswith(".cpp") for c in commands), "no host code compiled"
    assert list((tmp_path / "build").glob(f"lib{build.name}.so")), "no library linked"
