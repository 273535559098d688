#!/usr/bin/env bash
# The whole test suite: single-process tests, and the collective tests under mpirun on 1, 2,
# 3 and 4 ranks. Rank 0 reports; tests/mpi/conftest.py makes every rank agree on each test's
# outcome. Every run has a hard time limit, so a hang fails instead of stalling CI.
set -u
cd "$(dirname "$0")/.."
status=0
ruff check src tests examples benchmarks && ruff format --check -q src tests examples benchmarks || status=1
# On one rank the collective tests (they build most steps first; the runs on more ranks load
# those builds) take one core, the other examples with them, then the installation tests
# (a fresh venv: a minute); the other core runs the other single-process tests, with a DaCe
# build folder of their own (they remove and truncate builds), then the ICON4Py example
# (GT4Py translates ICON4Py's programs: minutes), so that both cores end about together.
# Jobs may share the build folders and caches otherwise (compiled/cache_files.py). The runs
# on 2 or more ranks use both cores: the runs on one end before them.
# Each run lists its slowest tests (--durations): where make test's minutes go.
ICON4PY_EXAMPLE=tests/mpi/test_examples.py::test_the_icon4py_diffusion_example
INSTALLATION=tests/unit/test_installation.py
second_core() {
  local failed=0
  echo "=== tests/unit but $INSTALLATION ==="
  DACE_default_build_folder=.dacecache/unit \
    timeout 1500 python -m pytest tests/unit --ignore="$INSTALLATION" -q -p no:cacheprovider \
    --durations=10 || { echo "tests/unit FAILED"; failed=1; }
  echo "=== $ICON4PY_EXAMPLE on 1 rank ==="
  timeout 1500 mpirun -n 1 python -m mpi4py -m pytest "$ICON4PY_EXAMPLE" -q -p no:cacheprovider \
    --durations=1 || { echo "$ICON4PY_EXAMPLE FAILED on 1 rank"; failed=1; }
  return $failed
}
side_log=$(mktemp)
second_core >"$side_log" 2>&1 &
side=$!
for n in ${MPI_TEST_RANKS:-1 2 3 4}; do
  only=()
  [ "$n" -eq 1 ] && only=(--deselect "$ICON4PY_EXAMPLE")
  if [ "$n" -gt 1 ] && [ -n "$side" ]; then
    wait "$side" || status=1
    cat "$side_log"; rm -f "$side_log"; side=
  fi
  echo "=== tests/mpi on $n rank(s) ==="
  quiet=()
  [ "$n" -gt 1 ] && quiet=(: -n $((n - 1)) python -m mpi4py -m pytest tests/mpi -p no:cacheprovider -p no:terminal)
  timeout 1500 mpirun -n 1 python -m mpi4py -m pytest tests/mpi "${only[@]}" -q -p no:cacheprovider --durations=15 "${quiet[@]}" || {
    echo "tests/mpi FAILED on $n rank(s)"; status=1; }
  if [ "$n" -eq 1 ]; then
    echo "=== $INSTALLATION ==="
    timeout 600 python -m pytest "$INSTALLATION" -q -p no:cacheprovider ||
      { echo "$INSTALLATION FAILED"; status=1; }
  fi
done
if [ -n "$side" ]; then
  wait "$side" || status=1
  cat "$side_log"; rm -f "$side_log"
fi
exit $status
