"""A compiled exchange step called with argument sets in turn: two (a model swapping buffers
between calls), each call runs the arguments kept by the call two before it; three or more
(``--sets``), every call converts its arguments and agrees on the build with the other ranks.
Prints the median microseconds per call of the slowest rank (docs/benchmarks.md).

Run:  mpirun -n 2 python -O benchmarks/swapped_arguments.py [--sets N]
"""

import argparse
import time

import numpy as np
from mpi4py import MPI

import gt4py_halo as gh

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--sets", type=int, default=2)
sets = parser.parse_args().sets

comm = MPI.COMM_WORLD
d = gh.CartesianDecomposition((32, 32), halo=1, periodic=True, comm=comm)
ex = gh.make_exchange(d)


@gh.program(comm=comm)
def step(a, b):
    ex.exchange(a)


arrays = [np.zeros(d.allocated_shape + (8,)) for _ in range(sets)]
calls = [(arrays[k], arrays[(k + 1) % sets]) for k in range(sets)]
for args in calls:
    step(*args)
samples = []
for _ in range(30):
    comm.Barrier()
    t = time.perf_counter()
    for n in range(200):
        step(*calls[n % sets])
    samples.append((time.perf_counter() - t) / 200 * 1e6)
worst = comm.allreduce(float(np.median(samples)), op=MPI.MAX)
if comm.rank == 0:
    print(f"{worst:.1f} us per call ({sets} argument sets in turn)")
