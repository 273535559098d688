#!/usr/bin/env bash
# The whole test suite: single-process tests, then the collective tests under mpirun on 1, 2,
# 3 and 4 ranks. Rank 0 reports; tests/mpi/conftest.py makes every rank agree on each test's
# outcome. Every run has a hard time limit, so a hang fails instead of stalling CI.
set -u
cd "$(dirname "$0")/.."
status=0
ruff check src tests examples benchmarks && ruff format --check -q src tests examples benchmarks || status=1
# two workers, a file each (module fixtures are built once): the nvcc builds of one file
# beside the rest
timeout 900 python -m pytest tests/unit -q -p no:cacheprovider -n 2 --dist loadfile || status=1
for n in ${MPI_TEST_RANKS:-1 2 3 4}; do
  echo "=== tests/mpi on $n rank(s) ==="
  quiet=()
  [ "$n" -gt 1 ] && quiet=(: -n $((n - 1)) python -m mpi4py -m pytest tests/mpi -p no:cacheprovider -p no:terminal)
  timeout 1200 mpirun -n 1 python -m mpi4py -m pytest tests/mpi -q -p no:cacheprovider "${quiet[@]}" || {
    echo "tests/mpi FAILED on $n rank(s)"; status=1; }
done
exit $status
