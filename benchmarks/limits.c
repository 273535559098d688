/* The physical limits of a halo exchange on this machine, for benchmarks/bench.py:
 *
 *  - one-way latency of a small MPI message between ranks 0 and 1 (ping-pong of 8 bytes, half
 *    the median round trip);
 *  - copy bandwidth by size: memcpy of N bytes between two buffers, bytes copied per second
 *    (median over repetitions; the buffers are touched first, so no page fault is timed);
 *  - the MPI transfer by size: both ranks send N contiguous bytes to each other at once
 *    (MPI_Irecv, MPI_Isend, MPI_Waitall), seconds per such exchange (median).
 *  - per case given as an argument ("G0,G1,G2,H0,H1,H2,F": global shape, halo widths, fields;
 *    the block of one of 2 ranks cut along the first axis, float64, C order as the benchmarks'
 *    NumPy fields), the copies of its halo in plain C on each rank at once: every halo cell
 *    written once from the owned cell its periodic image is, axis by axis (the last axis on
 *    owned rows, then whole rows, then whole planes: each copy as contiguous as the layout
 *    allows), as if the rank were its own neighbour in every axis. No messages: what the
 *    layout costs to copy, cache lines and strides included, which the limit's bytes at the
 *    copy bandwidth leave out (a halo across the unit-stride axis is one element per row,
 *    and memory moves whole cache lines);
 *  - per such case, an exchange in plain C and MPI between the 2 ranks as a layout made for
 *    it allows: the same copies of the last two axes first, then the first axis' halo planes,
 *    which are contiguous once those are filled, sent and received in place (MPI_Irecv and
 *    MPI_Isend straight from and into the field, no packing), seconds per exchange;
 *  - per such case, the exchange in plain C through shared memory as that layout allows (the
 *    `shm` transport's way): the fields in an MPI shared window, the same copies of the last
 *    two axes, then a flag to the other rank, and once its flag is there the first axis' halo
 *    planes copied from its fields (memcpy, whole planes), then a flag that the reads are done
 *    and a wait for the other's: the cross-core copies of the other rank's cells included,
 *    seconds per exchange;
 *  - per such case, its limit: a message latency plus the halo bytes of a rank at the copy
 *    bandwidth of the power of two nearest to them, both measured again.
 *
 * An exchange writes every halo cell at least once and waits at least one message latency:
 * halo bytes / copy bandwidth + latency is a bound no implementation can beat. The MPI transfer
 * is what this machine's MPI takes to move a case's remote halo bytes as one message each way,
 * with no packing and no copies between ranks' own blocks: an exchange over MPI pays at least
 * that.
 *
 * The three references of a case (halo copies, ordered and shm exchanges) are also a library,
 * build/liblimits.so (this file with LIMITS_LIBRARY defined: reference_new, reference_run,
 * reference_free), which benchmarks/runtime_exchange.py times sample by sample in turn with
 * the exchanges they are references for: this machine's speed for copies between cores moves
 * within seconds (docs/benchmarks.md), so only numbers taken in one interleaved run compare.
 *
 *   mpicc -O2 -o build/limits benchmarks/limits.c && mpirun -n 2 build/limits [--cases] [CASE ...]
 *   mpicc -O2 -shared -fPIC -DLIMITS_LIBRARY -o build/liblimits.so benchmarks/limits.c
 *
 * Prints one JSON object on rank 0: {"latency_s": ..., "copy_bytes_per_s": {"N": ...},
 * "mpi_exchange_s": {"N": ...}, "halo_copies_s": {"CASE": ...}, "ordered_exchange_s": {...},
 * "shm_exchange_s": {...}, "limit_s": {...}} (each reference in a loop of its own); with
 * --cases "limit_s" alone (benchmarks/comb_peer.py runs it in turn with the exchanges, round
 * by round).
 */
#include <mpi.h>
#include <sched.h>
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

static int rank_of(void) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/* A case "G0,G1,G2,H0,H1,H2,F": a rank's block n (the first axis cut in 2), halo widths h,
   the block's allocated shape a, fields. */
static void parse_case(const char *spec, long n[3], long h[3], long a[3], long *fields) {
  long g[3];
  if (sscanf(spec, "%ld,%ld,%ld,%ld,%ld,%ld,%ld", &g[0], &g[1], &g[2], &h[0], &h[1], &h[2],
             fields) != 7) {
    fprintf(stderr, "a case is G0,G1,G2,H0,H1,H2,F, not %s\n", spec);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  n[0] = g[0] / 2, n[1] = g[1], n[2] = g[2];
  for (int k = 0; k < 3; ++k) a[k] = n[k] + 2 * h[k];
}

/* How a reference fills the first axis' halos: copied on the rank, as its own neighbour
   (COPIES); or from the other rank: by MPI in place (ORDERED), or copied from its fields in
   a shared window (SHM). */
enum { COPIES, ORDERED, SHM };

/* Until the other rank's flag reaches `number`. */
static void until(const long *flag, long number) {
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < number) sched_yield();
}

/* One case's C reference (the file's comment): its fields, and (SHM) the shared window they
   lie in with this rank's flags (started, done) and the other rank's. */
struct reference {
  long n[3], h[3], a[3], fields, number;
  int mode, other;
  double **f, **theirs;
  MPI_Win window;
  long *flags, *their_flags;
  MPI_Request *requests;
};

/* The reference `mode` of case `spec`, its fields filled (collective, on both ranks). */
struct reference *reference_new(const char *spec, int mode) {
  struct reference *r = calloc(1, sizeof *r);
  parse_case(spec, r->n, r->h, r->a, &r->fields);
  r->mode = mode, r->other = 1 - rank_of(), r->window = MPI_WIN_NULL;
  const size_t cells = (size_t)(r->a[0] * r->a[1] * r->a[2]);
  r->f = malloc(r->fields * sizeof *r->f), r->theirs = malloc(r->fields * sizeof *r->theirs);
  if (mode == SHM) {
    double *base, *their_base;
    MPI_Aint size;
    int unit;
    MPI_Win_allocate_shared((MPI_Aint)(r->fields * cells * sizeof(double) + 128),
                            sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &r->window);
    MPI_Win_shared_query(r->window, r->other, &size, &unit, &their_base);
    for (long q = 0; q < r->fields; ++q)
      r->f[q] = base + q * cells, r->theirs[q] = their_base + q * cells;
    r->flags = (long *)(base + r->fields * cells);
    r->their_flags = (long *)(their_base + r->fields * cells);
    r->flags[0] = r->flags[8] = 0;
  } else {
    for (long q = 0; q < r->fields; ++q) r->f[q] = malloc(cells * sizeof(double));
  }
  for (long q = 0; q < r->fields; ++q)
    for (size_t c = 0; c < cells; ++c) r->f[q][c] = (double)c;
  r->requests = malloc(4 * r->fields * sizeof *r->requests);
  MPI_Barrier(MPI_COMM_WORLD);
  return r;
}

/* `count` halo copies or exchanges of reference `r` (ORDERED, SHM: on both ranks). */
void reference_run(struct reference *r, int count) {
  const long *n = r->n, *h = r->h, row = r->a[2], plane = r->a[1] * r->a[2];
  const size_t planes_bytes = h[0] * plane * sizeof(double);
  double **f = r->f, **theirs = r->theirs;
  const int other = r->other;
  for (int i = 0; i < count; ++i) {
    for (long q = 0; q < r->fields; ++q) {
      double *x = f[q];
      /* the last axis, on owned rows: h[2] cells at each end of a row */
      if (h[2])
        for (long i0 = h[0]; i0 < h[0] + n[0]; ++i0)
          for (long i1 = h[1]; i1 < h[1] + n[1]; ++i1) {
            double *w = x + i0 * plane + i1 * row;
            for (long k = 0; k < h[2]; ++k) {
              w[k] = w[n[2] + k];
              w[h[2] + n[2] + k] = w[h[2] + k];
            }
          }
      /* the middle axis: whole rows, on owned planes */
      for (long i0 = h[0]; i0 < h[0] + n[0]; ++i0) {
        double *p = x + i0 * plane;
        if (h[1]) {
          memcpy(p, p + n[1] * row, h[1] * row * sizeof(double));
          memcpy(p + (h[1] + n[1]) * row, p + h[1] * row, h[1] * row * sizeof(double));
        }
      }
      /* the first axis: whole planes */
      if (h[0] && r->mode == COPIES) {
        memcpy(x, x + n[0] * plane, planes_bytes);
        memcpy(x + (h[0] + n[0]) * plane, x + h[0] * plane, planes_bytes);
      }
    }
    if (h[0] && r->mode == ORDERED) {
      /* the other rank is the neighbour on both sides: this rank's low planes fill its
         high halo (tag 0), its high planes its low halo (tag 1) */
      int requests = 0, planes = (int)(h[0] * plane);
      for (long q = 0; q < r->fields; ++q) {
        double *x = f[q];
        MPI_Irecv(x + (h[0] + n[0]) * plane, planes, MPI_DOUBLE, other, 2 * (int)q,
                  MPI_COMM_WORLD, &r->requests[requests++]);
        MPI_Irecv(x, planes, MPI_DOUBLE, other, 2 * (int)q + 1, MPI_COMM_WORLD,
                  &r->requests[requests++]);
        MPI_Isend(x + h[0] * plane, planes, MPI_DOUBLE, other, 2 * (int)q, MPI_COMM_WORLD,
                  &r->requests[requests++]);
        MPI_Isend(x + n[0] * plane, planes, MPI_DOUBLE, other, 2 * (int)q + 1,
                  MPI_COMM_WORLD, &r->requests[requests++]);
      }
      MPI_Waitall(requests, r->requests, MPI_STATUSES_IGNORE);
    }
    if (r->mode == SHM) {
      /* the other rank's planes (their halos filled: its flag says so) into this rank's
         halo planes; then its reads of this rank's planes done before they change */
      const long number = ++r->number;
      __atomic_store_n(&r->flags[0], number, __ATOMIC_RELEASE);
      until(&r->their_flags[0], number);
      for (long q = 0; q < r->fields && h[0]; ++q) {
        memcpy(f[q], theirs[q] + n[0] * plane, planes_bytes);
        memcpy(f[q] + (h[0] + n[0]) * plane, theirs[q] + h[0] * plane, planes_bytes);
      }
      __atomic_store_n(&r->flags[8], number, __ATOMIC_RELEASE);
      until(&r->their_flags[8], number);
    }
  }
}

/* Frees reference `r` (collective, on both ranks). */
void reference_free(struct reference *r) {
  if (r->mode == SHM) {
    MPI_Win_free(&r->window);
  } else {
    for (long q = 0; q < r->fields; ++q) free(r->f[q]);
  }
  free(r->f);
  free(r->theirs);
  free(r->requests);
  free(r);
}

#ifndef LIMITS_LIBRARY
/* Seconds per run of reference `mode` of case `spec` in a loop of its own (median of samples
   of 20, the slower rank's). */
static double reference_seconds(const char *spec, int mode) {
  struct reference *r = reference_new(spec, mode);
  double samples[SAMPLES / 4];
  for (int s = 0; s < SAMPLES / 4; ++s) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    reference_run(r, 20);
    samples[s] = (MPI_Wtime() - t0) / 20;
  }
  double seconds = median(samples, SAMPLES / 4), slowest;
  MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  reference_free(r);
  return slowest;
}

/* One-way latency of a small message between the 2 ranks: half the median round trip. */
static double latency(void) {
  double samples[SAMPLES], message = 0.0;
  const int trips = 1000, rank = rank_of();
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
  return median(samples, SAMPLES);
}

/* Bytes per second of a memcpy of n bytes (median; the buffers touched first). */
static double copy_rate(size_t n) {
  double samples[SAMPLES];
  char *from = malloc(n), *to = malloc(n);
  memset(from, 1, n);
  memset(to, 2, n);
  int copies = (int)(((size_t)1 << 28) / n); /* about 256 MB copied per sample */
  if (copies > 10000) copies = 10000;
  if (copies < 1) copies = 1;
  for (int s = 0; s < SAMPLES / 4; ++s) {
    double t0 = MPI_Wtime();
    for (int i = 0; i < copies; ++i) {
      memcpy(to, from, n);
      from[i % n] ^= to[n - 1 - i % n]; /* the copies depend on each other: none is dropped */
    }
    samples[s] = (MPI_Wtime() - t0) / copies;
  }
  free(from);
  free(to);
  return n / median(samples, SAMPLES / 4);
}

/* The limit of one case (the file's comment): a message latency plus the halo bytes of a
   rank (its fields' halo cells) at the copy bandwidth measured for the power of two nearest
   to them. */
static double limit(const char *spec, double latency_s) {
  long n[3], h[3], a[3], fields;
  parse_case(spec, n, h, a, &fields);
  size_t bytes = (size_t)((a[0] * a[1] * a[2] - n[0] * n[1] * n[2]) * fields) * sizeof(double);
  size_t size = (size_t)1 << 10;
  while (size < ((size_t)1 << 27) && 2 * size * size < bytes * bytes) size <<= 1;
  return latency_s + bytes / copy_rate(size);
}

/* The machine's measures: latency, copy bandwidth by size, the MPI transfer by size (the
   file's comment), printed as the first members of the JSON object. */
static void machine(int rank) {
  double samples[SAMPLES];
  double seconds = latency();
  if (rank == 0) printf("{\"latency_s\": %.4e, \"copy_bytes_per_s\": {", seconds);
  for (size_t n = (size_t)1 << 10; n <= (size_t)1 << 27; n <<= 1) {
    double rate = copy_rate(n);
    if (rank == 0) printf("%s\"%zu\": %.4e", n == 1024 ? "" : ", ", n, rate);
  }
  const size_t largest = (size_t)1 << 23;
  char *from = malloc(largest), *to = malloc(largest);
  memset(from, 1, largest);
  memset(to, 2, largest);
  if (rank == 0) printf("}, \"mpi_exchange_s\": {");
  for (size_t n = (size_t)1 << 8; n <= largest; n <<= 1) {
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
  if (rank == 0) printf("}");
  free(from);
  free(to);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "run on 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* with --cases, the cases' limits alone; else the machine's measures, then per case each
     reference in a loop of its own, then the limits */
  const int limits_only = argc > 1 && strcmp(argv[1], "--cases") == 0;
  if (limits_only) {
    --argc;
    ++argv;
    if (rank == 0) printf("{");
  } else {
    machine(rank);
    static const char *keys[] = {"halo_copies_s", "ordered_exchange_s", "shm_exchange_s"};
    for (int mode = COPIES; mode <= SHM; ++mode) {
      if (rank == 0) printf(", \"%s\": {", keys[mode]);
      for (int c = 1; c < argc; ++c) {
        double seconds = reference_seconds(argv[c], mode);
        if (rank == 0) printf("%s\"%s\": %.4e", c == 1 ? "" : ", ", argv[c], seconds);
      }
      if (rank == 0) printf("}");
    }
    if (rank == 0) printf(", ");
  }
  double latency_s = latency();
  if (rank == 0) printf("\"limit_s\": {");
  for (int c = 1; c < argc; ++c) {
    double seconds = limit(argv[c], latency_s);
    if (rank == 0) printf("%s\"%s\": %.4e", c == 1 ? "" : ", ", argv[c], seconds);
  }
  if (rank == 0) printf("}}\n");
  MPI_Finalize();
  return 0;
}
#endif
