#!/usr/bin/env bash
# Builds LLNL Comb (https://github.com/LLNL/Comb), the C++ halo-exchange benchmark that
# benchmarks/comb_peer.py runs as a peer, against the MPICH of this project's venv. Nothing is
# fetched: give the sources, Comb with its BLT submodule, e.g. from a machine with network:
#   git clone --recursive https://github.com/LLNL/Comb.git
# (checked with Comb v0.3.1, e0a74ee, and BLT 2f503dc in its blt/ folder).
#
#   benchmarks/build-comb.sh SOURCE_DIR [BUILD_DIR]     (default BUILD_DIR: build/comb)
#
# Built: sequential CPU execution, host memory, MPI only (no RAJA, OpenMP or CUDA): the
# pattern ours compiles to on a CPU. Prints the path of the comb executable.
set -euo pipefail
source=$(realpath "${1:?usage: $0 SOURCE_DIR [BUILD_DIR]}")
build=${2:-build/comb}
[ -f "$source/blt/SetupBLT.cmake" ] || {
  echo "$source/blt has no SetupBLT.cmake: Comb needs its BLT submodule (git clone --recursive)" >&2
  exit 1
}
mpicxx=$(command -v mpicxx) || { echo "no mpicxx on PATH (the venv's MPICH: make install)" >&2; exit 1; }
mpicc=$(command -v mpicc)
mkdir -p "$(dirname "$build")"  # its logs go beside it
cmake -S "$source" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$mpicxx" -DCMAKE_C_COMPILER="$mpicc" \
  -DENABLE_MPI=On -DCOMB_ENABLE_RAJA=Off -DENABLE_OPENMP=Off -DENABLE_CUDA=Off \
  -DENABLE_TESTS=Off -DENABLE_EXAMPLES=Off >"$build.configure.log" 2>&1 || {
  tail -30 "$build.configure.log" >&2
  exit 1
}
cmake --build "$build" -j "$(nproc)" >"$build.build.log" 2>&1 || {
  tail -30 "$build.build.log" >&2
  exit 1
}
realpath "$build/bin/comb"
