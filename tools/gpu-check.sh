#!/usr/bin/env bash
# The GPU check: every GPU test on 1 and 2 ranks (two ranks share one GPU with the MPI
# transport) and the GPU step benchmark, with a report under $OUT (default gpu-report/).
#
#   tools/gpu-check.sh wheels   on a machine with PyPI: downloads into .whl/ the packages a
#                               CUDA image with CuPy, nvcc and pytest lacks (~30 MB)
#   tools/gpu-check.sh          on the GPU machine, from the repository root, with .whl/ there
#   tools/gpu-check.sh benchmark   there: the benchmark alone
#
# Through the workplace's device tool: run(command="tools/gpu-check.sh", carry=[".whl"]).
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

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
  python -c "import sys, cupy, dace, gt4py, mpi4py; from mpi4py import MPI
print(sys.version.split()[0], 'cupy', cupy.__version__, 'dace', dace.__version__,
      'gt4py', gt4py.__version__, MPI.Get_library_version().splitlines()[0])"
} 2>&1 | tee "$OUT/env.txt"

status=0
[ "${1:-}" = benchmark ] || {
timeout 300 python -m pytest tests/unit/test_gpu_codegen.py -q -p no:cacheprovider 2>&1 |
  tee "$OUT/unit.log" | tail -3
[ "${PIPESTATUS[0]}" = 0 ] || status=1
for n in 1 2; do
  echo "=== GPU tests on $n rank(s) ===" | tee -a "$OUT/tests.log"
  timeout 400 mpirun -n "$n" python -m mpi4py -m pytest tests/mpi -q -p no:cacheprovider \
    -k "gpu" -rs 2>&1 | tee -a "$OUT/tests.log" | tail -15
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
}
if [ -f benchmarks/gpu_step.py ]; then
  for n in 1 2; do
    timeout 240 mpirun -n $n python -m mpi4py benchmarks/gpu_step.py 2>&1 | grep -v "Warning\|warnings.warn" |
      tee -a "$OUT/benchmark.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
fi
echo "gpu-check status: $status" | tee -a "$OUT/env.txt"
exit $status
