/* The physical limits of a halo exchange on this machine, for benchmarks/bench.py:
 *
 *  - one-way latency of a small MPI message between ranks 0 and 1 (ping-pong of 8 bytes, half
 *    the median round trip);
 *  - copy bandwidth by size: memcpy of N bytes between two buffers, bytes copied per second
 *    (median over repetitions; the buffers are touched first, so no page fault is timed);
 *  - the MPI transfer by size: both ranks send N contiguous bytes to each other at once
 *    (MPI_Irecv, MPI_Isend, MPI_Waitall), seconds per such exchange (median).
 *
 * An exchange writes every halo cell at least once and waits at least one message latency:
 * halo bytes / copy bandwidth + latency is a bound no implementation can beat. The MPI transfer
 * is what this machine's MPI takes to move a case's remote halo bytes as one message each way,
 * with no packing and no copies between ranks' own blocks: an exchange over MPI pays at least
 * that.
 *
 *   mpicc -O2 -o build/limits benchmarks/limits.c && mpirun -n 2 build/limits
 *
 * Prints one JSON object on rank 0:
 *   {"latency_s": ..., "copy_bytes_per_s": {"N": ...}, "mpi_exchange_s": {"N": ...}}.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *samples, int n) {
  qsort(samples, n, sizeof(double), by_value);
  return samples[n / 2];
}

enum { SAMPLES = 101 };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "run on 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double samples[SAMPLES], message = 0.0;
  const int trips = 1000;
  for (int s = 0; s < SAMPLES; ++s) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < trips; ++i) {
      if (rank == 0) {
        MPI_Send(&message, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(&message, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(&message, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&message, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
      }
    }
    samples[s] = (MPI_Wtime() - t0) / trips / 2.0;
  }
  double latency = median(samples, SAMPLES);
  if (rank == 0) printf("{\"latency_s\": %.4e, \"copy_bytes_per_s\": {", latency);
  const size_t largest = (size_t)1 << 27;
  char *from = malloc(largest), *to = malloc(largest);
  memset(from, 1, largest);
  memset(to, 2, largest);
  for (size_t n = (size_t)1 << 10; n <= largest; n <<= 1) {
    int copies = (int)(((size_t)1 << 28) / n);  /* about 256 MB copied per sample */
    if (copies > 10000) copies = 10000;
    for (int s = 0; s < SAMPLES / 4; ++s) {
      double t0 = MPI_Wtime();
      for (int i = 0; i < copies; ++i) {
        memcpy(to, from, n);
        from[i % n] ^= to[n - 1 - i % n];  /* the copies depend on each other: none is dropped */
      }
      samples[s] = (MPI_Wtime() - t0) / copies;
    }
    double seconds = median(samples, SAMPLES / 4);
    if (rank == 0) printf("%s\"%zu\": %.4e", n == 1024 ? "" : ", ", n, n / seconds);
  }
  if (rank == 0) printf("}, \"mpi_exchange_s\": {");
  for (size_t n = (size_t)1 << 8; n <= ((size_t)1 << 23); n <<= 1) {
    int trips = (int)(((size_t)1 << 26) / n);  /* about 64 MB each way per sample */
    if (trips > 2000) trips = 2000;
    for (int s = 0; s < SAMPLES / 4; ++s) {
      MPI_Request requests[2];
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < trips; ++i) {
        MPI_Irecv(to, (int)n, MPI_BYTE, 1 - rank, 1, MPI_COMM_WORLD, &requests[0]);
        MPI_Isend(from, (int)n, MPI_BYTE, 1 - rank, 1, MPI_COMM_WORLD, &requests[1]);
        MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
      }
      samples[s] = (MPI_Wtime() - t0) / trips;
    }
    /* the slower rank's median */
    double seconds = median(samples, SAMPLES / 4), slowest;
    MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%s\"%zu\": %.4e", n == 256 ? "" : ", ", n, slowest);
  }
  if (rank == 0) printf("}}\n");
  free(from);
  free(to);
  MPI_Finalize();
  return 0;
}
