/* A probe, not a transport: what the largest case of make bench (128x128x80, halo (3,3,0),
 * 10 fields, float64, C order, 2 ranks cut along axis 0, axis 1 periodic on the rank) would
 * take if its faces did not go through MPI's transfer between the two processes of one node.
 * Three exchanges, each after the same copies of axis 1's halo on the rank:
 *
 *  - ordered: the faces, whole planes, sent and received in place by MPI (MPICH moves them
 *    with one kernel copy, CMA: `ordered` in limits.c, the best layout for MPI);
 *  - staged: each rank copies its faces into an arena in shared memory
 *    (MPI_Win_allocate_shared), the neighbour copies them out into its halo (two copies,
 *    no kernel);
 *  - direct: the fields themselves lie in shared memory, and the neighbour copies the faces
 *    straight out of them into its halo (one copy), a flag each way saying the faces are
 *    ready and another that they were read.
 *
 * Rounds alternate the three, 20 exchanges per sample, the slower rank's time, medians of 31;
 * every halo plane is checked against the neighbour's owned planes at the end.
 *
 *   mpicc -O2 -std=c11 -o build/shared_memory benchmarks/shared_memory.c
 *   mpirun -n 2 build/shared_memory
 */
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define F 10
static const long n0 = 64, n1 = 128, n2 = 80, h0 = 3, h1 = 3;
static long a0, a1, plane, cells, face;
static int rank, other;
static double *field[F], *peer_field[F], *arena, *peer_arena;
static _Atomic long *flag, *peer_flag; /* flag[0]: packed up to; flag[1]: consumed up to */

static void self_copies(double *x) {
  for (long i0 = h0; i0 < h0 + n0; ++i0) {
    double *p = x + i0 * plane;
    memcpy(p, p + n1 * n2, h1 * n2 * sizeof(double));
    memcpy(p + (h1 + n1) * n2, p + h1 * n2, h1 * n2 * sizeof(double));
  }
}
static void wait_for(_Atomic long *f, long v) { while (atomic_load_explicit(f, memory_order_acquire) < v) ; }

static void ordered(void) {
  MPI_Request r[4 * F]; int c = 0;
  for (int q = 0; q < F; ++q) self_copies(field[q]);
  for (int q = 0; q < F; ++q) {
    double *x = field[q];
    MPI_Irecv(x + (h0 + n0) * plane, face, MPI_DOUBLE, other, 2 * q, MPI_COMM_WORLD, &r[c++]);
    MPI_Irecv(x, face, MPI_DOUBLE, other, 2 * q + 1, MPI_COMM_WORLD, &r[c++]);
    MPI_Isend(x + h0 * plane, face, MPI_DOUBLE, other, 2 * q, MPI_COMM_WORLD, &r[c++]);
    MPI_Isend(x + n0 * plane, face, MPI_DOUBLE, other, 2 * q + 1, MPI_COMM_WORLD, &r[c++]);
  }
  MPI_Waitall(c, r, MPI_STATUSES_IGNORE);
}
static void staged(long it) {
  for (int q = 0; q < F; ++q) self_copies(field[q]);
  wait_for(&peer_flag[1], it - 1); /* the neighbour consumed the last exchange's arena */
  for (int q = 0; q < F; ++q) {
    memcpy(arena + (2 * q) * face, field[q] + h0 * plane, face * sizeof(double));
    memcpy(arena + (2 * q + 1) * face, field[q] + n0 * plane, face * sizeof(double));
  }
  atomic_store_explicit(&flag[0], it, memory_order_release);
  wait_for(&peer_flag[0], it);
  for (int q = 0; q < F; ++q) {
    memcpy(field[q] + (h0 + n0) * plane, peer_arena + (2 * q) * face, face * sizeof(double));
    memcpy(field[q], peer_arena + (2 * q + 1) * face, face * sizeof(double));
  }
  atomic_store_explicit(&flag[1], it, memory_order_release);
}
static void direct(long it) {
  for (int q = 0; q < F; ++q) self_copies(field[q]);
  atomic_store_explicit(&flag[0], it, memory_order_release); /* my owned planes are ready */
  wait_for(&peer_flag[0], it);
  for (int q = 0; q < F; ++q) {
    memcpy(field[q] + (h0 + n0) * plane, peer_field[q] + h0 * plane, face * sizeof(double));
    memcpy(field[q], peer_field[q] + n0 * plane, face * sizeof(double));
  }
  atomic_store_explicit(&flag[1], it, memory_order_release);
  wait_for(&peer_flag[1], it); /* the neighbour read my planes before I write them again */
}
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return (x > y) - (x < y); }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  other = 1 - rank;
  a0 = n0 + 2 * h0; a1 = n1 + 2 * h1; plane = a1 * n2; cells = a0 * plane; face = h0 * plane;
  MPI_Aint bytes = (MPI_Aint)((F * cells + 2 * F * face) * sizeof(double) + 128);
  MPI_Win win; char *base;
  MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Aint size; int unit; char *pbase;
  MPI_Win_shared_query(win, other, &size, &unit, &pbase);
  flag = (_Atomic long *)base; peer_flag = (_Atomic long *)pbase;
  for (int q = 0; q < F; ++q) {
    field[q] = (double *)(base + 128) + q * cells; peer_field[q] = (double *)(pbase + 128) + q * cells;
    for (long c = 0; c < cells; ++c) field[q][c] = c + rank;
  }
  arena = (double *)(base + 128) + F * cells; peer_arena = (double *)(pbase + 128) + F * cells;
  atomic_store(&flag[0], 0); atomic_store(&flag[1], 0);
  MPI_Barrier(MPI_COMM_WORLD);
  const int rounds = 31, reps = 20;
  double t[3][31]; long it = 0;
  for (int r = 0; r < rounds; ++r)
    for (int m = 0; m < 3; ++m) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < reps; ++i) {
        if (m == 0) ordered();
        else if (m == 1) staged(++it);
        else direct(++it);
      }
      double s = (MPI_Wtime() - t0) / reps, slowest;
      MPI_Allreduce(&s, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t[m][r] = slowest;
    }
  MPI_Barrier(MPI_COMM_WORLD); /* every mode filled the same halos: check them once */
  long wrong = 0;
  for (int q = 0; q < F; ++q)
    for (long c = 0; c < face; ++c)
      wrong += field[q][(h0 + n0) * plane + c] != peer_field[q][h0 * plane + c] ||
               field[q][c] != peer_field[q][n0 * plane + c];
  if (wrong) fprintf(stderr, "rank %d: %ld wrong halo cells\n", rank, wrong);
  const char *names[] = {"ordered (MPI, CMA)", "staged (shared arena)", "direct (shared fields)"};
  for (int m = 0; m < 3; ++m) {
    qsort(t[m], rounds, sizeof(double), cmp);
    if (rank == 0) printf("%-24s median %.1f us\n", names[m], 1e6 * t[m][rounds / 2]);
  }
  MPI_Win_free(&win);
  MPI_Finalize();
}
