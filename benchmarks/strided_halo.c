// A halo across the unit-stride axis through shared memory: read where it lies, or packed by
// its owner first.
//
// Two ranks of one node share a 2-D field each (an MPI shared window), GT4Py's default layout:
// axis 0 (I) with unit stride, the grid cut across it, so that a rank's halo column (one I,
// every J) holds one cell per cache line. An exchange is the protocol of the compiled `shm`
// exchange (transports/shm/include/gt4py_halo_shm.hpp) reduced to its flags: publish a
// number, wait for the other rank's, copy, flag done, wait for the other's done. Two ways:
//   direct: each rank copies the other's boundary column into its halo column, cell by cell
//           (what the `shm` transport does: a line from the other core per cell);
//   packed: each rank first packs its own boundary column into a staging row of the shared
//           window (its own lines), then copies the other's staging row into its halo
//           column: a line from the other core per 8 cells.
// With --write, each rank writes its owned boundary column between exchanges (as a stencil
// would), so that its lines are modified in its own cache when the other reads them.
// Variants alternate sample by sample; the slowest rank's time per exchange, medians.
//
// Build and run (2 ranks):
//   mpicc -O2 -o build/strided_halo benchmarks/strided_halo.c
//   mpirun -n 2 build/strided_halo [--write] [N ...]   (N: the grid is NxN; default 32 256 1024 4096)
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SAMPLES = 41, BATCH = 400 };

typedef struct {
    double* field[2];  // each rank's field, (m + 2) x (n + 2), I with unit stride
    double* stage[2];  // each rank's staging row, n cells
    long* flags[2];    // each rank's flags: [0] published, [1] done (cache lines apart)
    long m, n, ld;     // owned rows, columns, the leading dimension (padded rows)
} Shared;

static long load(const long* at) { return __atomic_load_n(at, __ATOMIC_ACQUIRE); }
static void store(long* at, long v) { __atomic_store_n(at, v, __ATOMIC_RELEASE); }
static void reach(const long* at, long target) {
    while (load(at) < target) sched_yield();
}

// Rank `me`'s boundary row facing the other rank, and its halo row there.
static long boundary(const Shared* s, int me) { return me == 0 ? s->m : 1; }
static long halo(const Shared* s, int me) { return me == 0 ? s->m + 1 : 0; }

static void exchange(const Shared* s, int me, long number, int packed) {
    const int other = 1 - me;
    double* mine = s->field[me];
    const long ld = s->ld, n = s->n, b = boundary(s, me), h = halo(s, me);
    if (packed)
        for (long j = 0; j < n; ++j) s->stage[me][j] = mine[b + (j + 1) * ld];
    store(&s->flags[me][0], number);
    reach(&s->flags[other][0], number);
    if (packed) {
        const double* theirs = s->stage[other];
        for (long j = 0; j < n; ++j) mine[h + (j + 1) * ld] = theirs[j];
    } else {
        const double* theirs = s->field[other];
        const long tb = boundary(s, other);
        for (long j = 0; j < n; ++j) mine[h + (j + 1) * ld] = theirs[tb + (j + 1) * ld];
    }
    store(&s->flags[me][8], number);
    reach(&s->flags[other][8], number);
}

static int compare(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size, write = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "strided_halo: run it on 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long sizes[16], count = 0;
    for (int a = 1; a < argc && count < 16; ++a)
        if (strcmp(argv[a], "--write") == 0) write = 1;
        else sizes[count++] = atol(argv[a]);
    if (count == 0) sizes[0] = 32, sizes[1] = 256, sizes[2] = 1024, sizes[3] = 4096, count = 4;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    if (rank == 0) printf("| grid | direct | packed | direct / packed |\n|---|---|---|---|\n");
    for (long c = 0; c < count; ++c) {
        Shared s;
        s.n = sizes[c], s.m = sizes[c] / 2, s.ld = (s.m + 2 + 7) / 8 * 8 + 8;
        const long cells = s.ld * (s.n + 2);
        MPI_Aint bytes = (cells + s.n + 64) * sizeof(double) + 4096;
        char* base;
        MPI_Win win;
        MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node, &base, &win);
        for (int r = 0; r < 2; ++r) {
            MPI_Aint got;
            int unit;
            char* at;
            MPI_Win_shared_query(win, r, &got, &unit, &at);
            at = (char*)(((unsigned long)at + 4095) & ~4095UL);
            s.flags[r] = (long*)at;
            s.stage[r] = (double*)(at + 256);
            s.field[r] = (double*)(at + 256 + ((s.n * 8 + 63) / 64) * 64);
        }
        memset(s.flags[rank], 0, 256);
        for (long k = 0; k < cells; ++k) s.field[rank][k] = rank * 1e6 + k;
        MPI_Barrier(node);
        long number = 0;
        double times[2][SAMPLES];
        for (int sample = 0; sample < SAMPLES; ++sample)
            for (int turn = 0; turn < 2; ++turn) {
                const int packed = (turn + sample) % 2;
                exchange(&s, rank, ++number, packed);  // untimed
                MPI_Barrier(node);
                double t0 = MPI_Wtime();
                for (int k = 0; k < BATCH; ++k) {
                    if (write)
                        for (long j = 0; j < s.n; ++j)
                            s.field[rank][boundary(&s, rank) + (j + 1) * s.ld] += 1.0;
                    exchange(&s, rank, ++number, packed);
                }
                double t = (MPI_Wtime() - t0) / BATCH;
                MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, node);
                times[packed][sample] = t;
            }
        // every halo cell is the other rank's boundary cell
        const int other = 1 - rank;
        long wrong = 0;
        for (long j = 0; j < s.n; ++j)
            wrong += s.field[rank][halo(&s, rank) + (j + 1) * s.ld] !=
                     s.field[other][boundary(&s, other) + (j + 1) * s.ld];
        MPI_Barrier(node);
        if (wrong) fprintf(stderr, "rank %d: %ld halo cells wrong\n", rank, wrong);
        qsort(times[0], SAMPLES, sizeof(double), compare);
        qsort(times[1], SAMPLES, sizeof(double), compare);
        double direct = times[0][SAMPLES / 2], packed = times[1][SAMPLES / 2];
        if (rank == 0)
            printf("| %ldx%ld | %.2f us | %.2f us | %.2fx |\n", s.n, s.n, 1e6 * direct,
                   1e6 * packed, direct / packed);
        MPI_Win_free(&win);
    }
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
