#!/usr/bin/env bash
# The whole test suite: single-process tests, and the collective tests under mpirun on 1, 2,
# 3 and 4 ranks. Rank 0 reports; tests/mpi/conftest.py makes every rank agree on each test's
# outcome. Every run has a hard time limit, so a hang fails instead of stalling CI.
set -u
cd "$(dirname "$0")/.."
status=0
ruff check src tests examples benchmarks && ruff format --check -q src tests examples benchmarks || status=1
# The single-process tests run on one core while the collective tests on one rank use the
# other (they build most steps first; the runs on more ranks load those builds), with DaCe
# build folders of their own: two processes must not build one step into one folder at once.
# The runs on 2 or more ranks use both cores: the single-process tests end before them.
# Each run lists its slowest tests (--durations): where make test's minutes go.
unit_log=$(mktemp)
DACE_default_build_folder=.dacecache/unit \
  timeout 1500 python -m pytest tests/unit -q -p no:cacheprovider --durations=10 >"$unit_log" 2>&1 &
unit=$!
unit_done() {
  echo "=== tests/unit ==="
  wait "$unit" || { echo "tests/unit FAILED"; status=1; }
  cat "$unit_log"; rm -f "$unit_log"; unit=
}
for n in ${MPI_TEST_RANKS:-1 2 3 4}; do
  if [ "$n" -gt 1 ] && [ -n "$unit" ]; then unit_done; fi
  echo "=== tests/mpi on $n rank(s) ==="
  quiet=()
  [ "$n" -gt 1 ] && quiet=(: -n $((n - 1)) python -m mpi4py -m pytest tests/mpi -p no:cacheprovider -p no:terminal)
  timeout 1500 mpirun -n 1 python -m mpi4py -m pytest tests/mpi -q -p no:cacheprovider --durations=15 "${quiet[@]}" || {
    echo "tests/mpi FAILED on $n rank(s)"; status=1; }
done
if [ -n "$unit" ]; then unit_done; fi
exit $status
