"""A compiled exchange step called with two argument sets in turn (a model swapping buffers):
every call converts its arguments and agrees on the build with the other ranks (no last-call
reuse). Prints the median microseconds per call of the slowest rank (docs/benchmarks.md).

Run:  mpirun -n 2 python -O benchmarks/swapped_arguments.py
"""

import time

import numpy as np
from mpi4py import MPI

import gt4py_halo as gh

comm = MPI.COMM_WORLD
d = gh.CartesianDecomposition((32, 32), halo=1, periodic=True, comm=comm)
ex = gh.make_exchange(d)


@gh.program(comm=comm)
def step(a, b):
    ex.exchange(a)


x, y = np.zeros(d.allocated_shape + (8,)), np.zeros(d.allocated_shape + (8,))
step(x, y)
step(y, x)
samples = []
for _ in range(30):
    comm.Barrier()
    t = time.perf_counter()
    for _ in range(100):
        step(x, y)
        step(y, x)
    samples.append((time.perf_counter() - t) / 200 * 1e6)
worst = comm.allreduce(float(np.median(samples)), op=MPI.MAX)
if comm.rank == 0:
    print(f"{worst:.1f} us per call")
