#!/usr/bin/env bash
# The GPU check: every GPU test of tests/mpi on 1 and 2 ranks (two ranks share one GPU with the MPI
# transport) and the GPU step benchmark, with a report under $OUT (default gpu-report/).
#
#   tools/gpu-check.sh wheels   on a machine with PyPI: downloads into .whl/ the packages a
#                               CUDA image with CuPy, nvcc and pytest lacks (~30 MB)
#   tools/gpu-check.sh          on the GPU machine, from the repository root, with .whl/ there
#   tools/gpu-check.sh benchmark   there: the benchmark alone
#   tools/gpu-check.sh tests       there: the tests alone (GPU_TESTS=EXPR: pytest -k EXPR of them)
#   tools/gpu-check.sh memcheck    there: the mpi GPU tests under compute-sanitizer's memcheck,
#                                  after the tests in the same call (it needs their builds)
#   GPU_CHECK_SECONDS=N            bounds the whole check (default 1080)
#
# Through the workplace's device tool, with the package's compiled module built here (make
# install) and carried: run(command="tools/gpu-check.sh", carry=[".whl", NATIVE]), NATIVE
# being src/gt4py_halo/_native.cpython-312-x86_64-linux-gnu.so.
set -u
cd "$(dirname "$0")/.."

# what gt4py_halo needs beyond a CUDA Python image (CuPy, numpy, sympy, networkx, pytest...);
# the versions the test suite runs with here
WHEELS="gt4py==1.2.3 dace==2.0.0a10 mpich==5.0.2 mpi4py==4.1.2 gridtools-cpp==2.3.9
  array-api-compat==1.16.0 asttokens==2.4.1 astunparse==1.6.3 boltons==26.2.0 cachebox==5.2.3
  cached-property==2.0.1 cytoolz==1.2.0 deepdiff==9.1.0 devtools==0.13.0 dill==0.4.1
  distro==1.9.0 executing==2.3.0 fparser==0.2.5 frozendict==2.5.1 lark==1.3.1 Mako==1.4.3
  ordered-set==4.1.0 orderly-set==5.5.0 ply==3.11 viztracer==1.1.1 objprint==0.3.0"

if [ "${1:-}" = wheels ]; then
  python=${PYTHON:-.venv/bin/python}
  mkdir -p .whl
  for spec in $WHEELS; do
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux1_x86_64 -d .whl "$spec" 2>/dev/null ||
      "$python" -m pip wheel -q --no-deps -w .whl "$spec" || exit 1  # sdist only (dace)
  done
  du -sh .whl
  exit 0
fi

OUT=${OUT:-gpu-report}
mkdir -p "$OUT"
# a venv over the image's packages (its python3 is itself a venv: a .pth file reaches them) (CuPy, numpy, pytest); the wheels' MPICH libraries and
# mpirun land in its prefix, where mpi4py looks for them
venv=/tmp/gt4py_halo_venv
image_site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
python3 -m venv "$venv" && echo "$image_site" >"$venv/lib/python3.12/site-packages/image.pth" &&
  "$venv/bin/python" -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || exit 1
export PATH="$venv/bin:$PATH" PYTHONPATH="$PWD/src:$PWD/tests/mpi" OMP_NUM_THREADS=1
export PYTHONUNBUFFERED=1
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py_halo_cache
python -c "import gt4py_halo._native" ||
  { echo "gt4py_halo's compiled module is missing: carry it (see the top of $0)"; exit 1; }

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
  python -c "import sys, cupy, dace, gt4py, mpi4py; from mpi4py import MPI
print(sys.version.split()[0], 'cupy', cupy.__version__, 'dace', dace.__version__,
      'gt4py', gt4py.__version__, MPI.Get_library_version().splitlines()[0])"
} 2>&1 | tee "$OUT/env.txt"

# every step is bounded by what is left of GPU_CHECK_SECONDS (a device lease is short): the
# steps run in order of value, each one's output lands under $OUT as it goes
deadline=${GPU_CHECK_SECONDS:-1080}  # seconds from the start of this script
bounded() {  # bounded SECONDS COMMAND...: at most SECONDS, and never past the deadline
  local t=$(($1 < deadline - SECONDS ? $1 : deadline - SECONDS)); shift
  if [ "$t" -lt 30 ]; then echo "not run, no time left: $*"; return 1; fi
  timeout "$t" "$@"
}
# the files holding GPU tests (tests/mpi's others need what the device image lacks, ICON4Py)
GPU_TEST_FILES="tests/mpi/test_compiled_step.py tests/mpi/test_cartesian_exchange.py
  tests/mpi/test_unstructured_exchange.py tests/mpi/test_profiling.py"
gpu_tests() {  # every GPU test on $1 rank(s), at most $2 seconds, each rank under $wrap
  echo "=== GPU tests on $1 rank(s) ${wrap:-} ===" | tee -a "$OUT/tests.log"
  bounded "$2" mpirun -n "$1" ${wrap:-} python -m mpi4py -m pytest $GPU_TEST_FILES -q -p no:cacheprovider \
    -k "${GPU_TESTS:-gpu and not defaults_on_the_cpu}" -rs --durations=12 2>&1 | tee -a "$OUT/tests.log" | tail -15
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
}
benchmark() {  # the GPU step benchmark on $1 rank(s), at most $2 seconds
  bounded "$2" mpirun -n "$1" python -m mpi4py benchmarks/gpu_step.py --repeats 11 2>&1 |
    grep -v "Warning\|warnings.warn" | tee -a "$OUT/benchmark.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
}

status=0
if [ "${1:-}" = benchmark ]; then
  benchmark 1 400 && benchmark 2 400
elif [ "${1:-}" = memcheck ]; then
  # API errors that libraries answer their own probes with (NCCL: docs/benchmarks.md) are no
  # memory errors
  wrap="compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1"
  GPU_TESTS=${GPU_TESTS:-gpu and not nccl and not defaults_on_the_cpu}
  gpu_tests 1 $((deadline * 2 / 3))
  gpu_tests 2 400
elif [ "${1:-}" = tests ]; then
  gpu_tests 1 400
  gpu_tests 2 400
else
  gpu_tests 1 300
  benchmark 1 200
  gpu_tests 2 300
  benchmark 2 240
fi
echo "gpu-check status: $status ($SECONDS s)" | tee -a "$OUT/env.txt"
exit $status
