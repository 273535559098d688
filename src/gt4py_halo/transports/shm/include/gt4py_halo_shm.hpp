// The compiled `shm` exchange (transports/shm/expansion.py): the protocol of the runtime one
// (transports/shm/runtime.py, whose module docstring says it in full) in C++, on control
// records of the compiled exchange data's own (a window of its private communicator).
//
// start: the rank's record (signature, the stamp of the step's call, and per field its pool,
// offset, shape and strides) and, last, the exchange's number (a release store); it writes
// no field. finish: the copies to the rank's own halo; then wait for each neighbour's record
// of that number, check it (the same call, the same kind of fields, their boxes inside their
// fields and their fields inside their shared memory), copy the neighbours' owned cells into
// the halos, set this rank's done flag per neighbour, wait for each reader's done flag for
// this rank. Ranks run a step's exchanges in the same order, so
// no wait here needs another exchange read first.
//
// A rank whose neighbour's record is not what it expects copies nothing, sets every done
// flag (no rank that waits for it is left waiting) and notes it (gt4py_halo_mpi.hpp's note,
// kind 2: compiled/last_call.py raises after the call). A rank's field outside the shared
// memory of the exchange's ranks is published as such (pool -2): its readers note it too.
//
#pragma once
#include <sched.h>

#include "gt4py_halo_mpi.hpp"

#include <cstdint>
#include <cstring>

namespace gt4py_halo_shm {

// The plan array (expansion.py, plan_array), words: the address of the counters (exchanges
// started, then per slot whether its exchange is in flight), of the pool table
// (allocation.py POOL_TABLE) and of its count of rows in use (POOL_ROWS); this rank, the
// key of the exchange's group; how many sources and readers, how many rows are this rank's
// own (the first ones); the address of this rank's records; the axes of the plan. Then the
// lists: per source (rank, address of its records, its first row, its count of rows, per
// axis how far its rows reach there: the least extent of its fields), per reader (rank,
// the address of its done flag for this rank in its record of slot 0); then the rows, each
// a box of cells: its start and shape here, its start there (an unstructured plan: a row
// per run of cells consecutive here and there, of one axis).
enum {
    COUNTERS, POOLS, POOL_ROWS, RANK, GROUP, SOURCES, READERS, OWN, RECORDS, AXES, HEAD
};

// The words of a record (runtime.py): number + 1, signature, count, at `stamp` the stamp of
// the step's call (compiled/stamps.py), from `fields` per field (pool, offset, ndim,
// shape[max_axes], strides[max_axes] in bytes), then at `done` the done flags.
struct Layout {
    long slots, record, stamp, fields, field, done, max_axes, max_sources;
    long lockstep;  // the longest runs (bytes) of two boxes copied in lockstep
};

struct Field {
    char* data;
    long ndim, itemsize;
    long shape[6], strides[6];  // strides in bytes
};

// Why a record is not what this rank expects: the note's `got` (kind 2), its `expected` a
// detail (compiled/last_call.py says them); a record of another call of the step is noted
// as the MPI exchanges note a message of one (kind 1: its stamp and this rank's).
enum Problem { OUT_OF_STEP = 1, OTHER_FIELDS, OUTSIDE, NOT_SHARED, TOO_MANY, OTHER_CALL };

static inline void note(long source, long problem, long detail, long stamp) {
    gt4py_halo_mpi::Unexpected& found = gt4py_halo_mpi::unexpected();
    if (found.count++ == 0) {
        found.source = source, found.stamped = problem == OTHER_CALL ? 1 : 2;
        found.got = problem == OTHER_CALL ? detail : problem;
        found.expected = problem == OTHER_CALL ? stamp : detail;
    }
}

static inline long load(const long* at) { return __atomic_load_n(at, __ATOMIC_ACQUIRE); }
static inline void store(long* at, long value) { __atomic_store_n(at, value, __ATOMIC_RELEASE); }

// Until *at >= target; counted as a wait (gt4py_halo_mpi::waits, watched from Python).
static inline void reach(const long* at, long target) {
    if (load(at) >= target) return;
    __atomic_fetch_add(&gt4py_halo_mpi::waits(), 1, __ATOMIC_RELAXED);
    while (load(at) < target) sched_yield();
    __atomic_fetch_add(&gt4py_halo_mpi::waits(), 1, __ATOMIC_RELAXED);
}

// Bytes [0, n) of `from` to `to`: short runs (a cell or two of an unstructured plan) in
// 8-byte moves rather than a call.
static inline void copy_bytes(char* to, const char* from, long n) {
    if (n > 64 || n % 8) return (void)std::memcpy(to, from, n);
    for (long b = 0; b < n; b += 8) {
        uint64_t value;
        std::memcpy(&value, from + b, 8);
        std::memcpy(to + b, &value, 8);
    }
}

// Rows of n1 elements of T, n0 of them (the two innermost axes of a box), of `boxes` boxes
// (one or two) of the same loops in lockstep: two boxes that share cache lines (the two
// halos across the unit-stride axis, each one element per row: the cells of one lie in the
// cache lines of the other's sources) touch each row once.
template <typename T, int boxes>
static void copy_rows(char* const* to, long t0, long t1, const char* const* from, long f0,
                      long f1, long n0, long n1) {
    char* here[boxes];  // local copies: the stores below (of bytes) could alias `to` itself
    const char* there[boxes];
    for (int b = 0; b < boxes; ++b) here[b] = to[b], there[b] = from[b];
    for (long i = 0; i < n0; ++i) {
        if (t1 == (long)sizeof(T) && f1 == (long)sizeof(T)) {
            for (int b = 0; b < boxes; ++b)
                copy_bytes(here[b] + i * t0, there[b] + i * f0, n1 * sizeof(T));
            continue;
        }
        for (long k = 0; k < n1; ++k)
            for (int b = 0; b < boxes; ++b) {
                T value;
                std::memcpy(&value, there[b] + i * f0 + k * f1, sizeof(T));
                std::memcpy(here[b] + i * t0 + k * t1, &value, sizeof(T));
            }
    }
}

// The loops of a box: `axes` (two at least) of `extents`, outermost first, with the strides
// in bytes here (`ts`) and there (`fs`).
struct Loops {
    int axes;
    long extents[8], ts[8], fs[8];
};

// The two innermost loops of `boxes` boxes, of elements of `itemsize` bytes.
template <int boxes>
static void copy_inner(char* const* to, long t0, long t1, const char* const* from, long f0,
                       long f1, long n0, long n1, long itemsize) {
    switch (itemsize) {
        case 8: return copy_rows<uint64_t, boxes>(to, t0, t1, from, f0, f1, n0, n1);
        case 4: return copy_rows<uint32_t, boxes>(to, t0, t1, from, f0, f1, n0, n1);
        case 2: return copy_rows<uint16_t, boxes>(to, t0, t1, from, f0, f1, n0, n1);
        case 1: return copy_rows<uint8_t, boxes>(to, t0, t1, from, f0, f1, n0, n1);
    }
    for (int b = 0; b < boxes; ++b)
        for (long i = 0; i < n0; ++i)
            for (long k = 0; k < n1; ++k)
                std::memcpy(to[b] + i * t0 + k * t1, from[b] + i * f0 + k * f1, itemsize);
}

// Boxes of `loops` from `from[b]` to `to[b]`, `boxes` of them (one or two) in lockstep.
static void copy_box(char* const* to, const char* const* from, const Loops& loops, int axis,
                     long itemsize, int boxes) {
    if (loops.axes - axis > 2) {
        for (long i = 0; i < loops.extents[axis]; ++i) {
            char* inner_to[2];
            const char* inner_from[2];
            for (int b = 0; b < boxes; ++b)
                inner_to[b] = to[b] + i * loops.ts[axis],
                inner_from[b] = from[b] + i * loops.fs[axis];
            copy_box(inner_to, inner_from, loops, axis + 1, itemsize, boxes);
        }
        return;
    }
    const long t0 = loops.ts[axis], t1 = loops.ts[axis + 1], f0 = loops.fs[axis],
               f1 = loops.fs[axis + 1], n0 = loops.extents[axis], n1 = loops.extents[axis + 1];
    if (boxes == 2) return copy_inner<2>(to, t0, t1, from, f0, f1, n0, n1, itemsize);
    copy_inner<1>(to, t0, t1, from, f0, f1, n0, n1, itemsize);
}

// The loops of a box of `shape` (in the plan's axes; every level) of `to`, read where the
// strides are `from_strides`: the axes of more than one element ordered by the strides of
// `to`, the largest first, those that both fields hold contiguously joined, two at least
// (axes of one element before them). False where the box is empty.
static bool loops_of(const Field& to, const long* from_strides, const long* shape, long plan_axes,
                     Loops* loops) {
    long order[6], n = 0;
    for (long k = 0; k < to.ndim; ++k) {
        long extent = k < plan_axes ? shape[k] : to.shape[k];
        if (extent <= 0) return false;
        if (extent > 1) order[n++] = k;
    }
    for (long a = 1; a < n; ++a)  // insertion sort, by |stride| descending
        for (long b = a; b > 0; --b) {
            long x = to.strides[order[b]], y = to.strides[order[b - 1]];
            if ((x < 0 ? -x : x) <= (y < 0 ? -y : y)) break;
            long keep = order[b];
            order[b] = order[b - 1], order[b - 1] = keep;
        }
    // from the innermost axis out, each axis joined to the one inside it where both fields
    // hold them one after the other (a row across both)
    long extents[8], ts[8], fs[8], axes = 8;
    for (long a = n - 1; a >= 0; --a) {
        long k = order[a], extent = k < plan_axes ? shape[k] : to.shape[k];
        if (axes < 8 && to.strides[k] == ts[axes] * extents[axes] &&
            from_strides[k] == fs[axes] * extents[axes]) {
            extents[axes] *= extent;
            continue;
        }
        --axes;
        extents[axes] = extent, ts[axes] = to.strides[k], fs[axes] = from_strides[k];
    }
    while (axes > 6) --axes, extents[axes] = 1, ts[axes] = 0, fs[axes] = 0;
    loops->axes = 8 - (int)axes;
    for (int a = 0; a < loops->axes; ++a)
        loops->extents[a] = extents[axes + a], loops->ts[a] = ts[axes + a],
        loops->fs[a] = fs[axes + a];
    return true;
}

// Where box `row` of the plan (its start here, its shape, its start there) begins in `to`
// and in `from`.
static inline void corners(const Field& to, const char* from, const long* from_strides,
                           const long* row, long plan_axes, char** at, const char** source) {
    *at = to.data, *source = from;
    for (long k = 0; k < plan_axes; ++k)
        *at += row[k] * to.strides[k], *source += row[2 * plan_axes + k] * from_strides[k];
}

// Boxes `rows` (`boxes` of them, one or two of the same shape) of the plan from `from` to
// `to`, every level: in lockstep where their rows are short (`lockstep` bytes at most, or
// one element each), else one after the other (long runs stream better one box at a time).
static void copy_rows_as_boxes(const Field& to, const char* from, const long* from_strides,
                               const long* const* rows, int boxes, long plan_axes,
                               long lockstep) {
    Loops loops;
    if (!loops_of(to, from_strides, rows[0] + plan_axes, plan_axes, &loops)) return;
    char* at[2];
    const char* source[2];
    for (int b = 0; b < boxes; ++b)
        corners(to, from, from_strides, rows[b], plan_axes, &at[b], &source[b]);
    const int last = loops.axes - 1;
    if (loops.ts[last] == to.itemsize && loops.fs[last] == to.itemsize &&
        loops.extents[last] * to.itemsize > lockstep) {
        for (int b = 0; b < boxes; ++b) copy_box(&at[b], &source[b], loops, 0, to.itemsize, 1);
        return;
    }
    copy_box(at, source, loops, 0, to.itemsize, boxes);
}

// Box `row` of the plan from `from` to `to`, every level.
static inline void copy_row(const Field& to, const long* row, const char* from,
                            const long* from_strides, long plan_axes) {
    copy_rows_as_boxes(to, from, from_strides, &row, 1, plan_axes, 0);
}

// `count` rows of an unstructured plan (one plan axis, the cells: a row is a run of cells
// consecutive in both fields) from `from` to `to`, every level. Where a cell's levels lie
// contiguous in both fields: a copy per run (the cells contiguous too) or per cell; where
// the cells do (GT4Py's CPU layout, one level axis): a copy per level and run; else row by
// row as a box.
static void copy_cells(const Field& to, const char* from, const long* from_strides,
                       const long* rows, long count) {
    const long size = to.itemsize, t0 = to.strides[0], f0 = from_strides[0];
    long cell = size;  // the bytes of a cell's levels where contiguous in both, else 0
    for (long k = to.ndim - 1; k >= 1 && cell > 0; --k)
        cell = to.strides[k] == cell && from_strides[k] == cell ? cell * to.shape[k] : 0;
    for (long r = 0; r < count && cell > 0; ++r) {
        const long* row = rows + 3 * r;
        char* at = to.data + row[0] * t0;
        const char* source = from + row[2] * f0;
        if (t0 == cell && f0 == cell) {
            copy_bytes(at, source, row[1] * cell);
            continue;
        }
        for (long c = 0; c < row[1]; ++c) copy_bytes(at + c * t0, source + c * f0, cell);
    }
    if (cell > 0) return;
    if (to.ndim == 2 && t0 == size && f0 == size) {
        for (long k = 0; k < to.shape[1]; ++k)
            for (long r = 0; r < count; ++r) {
                const long* row = rows + 3 * r;
                copy_bytes(to.data + k * to.strides[1] + row[0] * size,
                           from + k * from_strides[1] + row[2] * size, row[1] * size);
            }
        return;
    }
    for (long r = 0; r < count; ++r) copy_row(to, rows + 3 * r, from, from_strides, 1);
}

// `count` rows of the plan, from `rows` on, from `from` to `to`; each box with the next one
// of the same shape, if any, in lockstep (the two halos of an axis that wraps onto the rank).
static void copy_rows_of(const Field& to, const char* from, const long* from_strides,
                         const long* rows, long count, long axes, long lockstep) {
    if (axes == 1) return copy_cells(to, from, from_strides, rows, count);
    enum { MAX_BOXES = 729 };  // of a cartesian plan per neighbour: 3^6 - 1 directions
    bool paired[MAX_BOXES] = {};
    for (long r = 0; r < count; ++r) {
        if (r < MAX_BOXES && paired[r]) continue;
        const long* pair[2] = {rows + 3 * axes * r, nullptr};
        int boxes = 1;
        for (long q = r + 1; q < count && q < MAX_BOXES && boxes == 1; ++q)
            if (!paired[q] &&
                std::memcmp(pair[0] + axes, rows + 3 * axes * q + axes, axes * sizeof(long)) == 0)
                pair[1] = rows + 3 * axes * q, paired[q] = true, boxes = 2;
        copy_rows_as_boxes(to, from, from_strides, pair, boxes, axes, lockstep);
    }
}

static inline const long* pool_row(const long* plan, long pool) {
    if (pool < 0 || pool >= *(const long*)plan[POOL_ROWS]) return nullptr;
    const long* row = (const long*)plan[POOLS] + 4 * pool;
    return row[0] == pool + 1 && row[1] == plan[GROUP] ? row : nullptr;
}

// The pool number of this rank's part holding [low, high), and the offset of `at` in it;
// -2 if none does.
static long find_pool(const long* plan, long rank, uintptr_t low, uintptr_t high, uintptr_t at,
                      long* offset) {
    for (long pool = 0, rows = *(const long*)plan[POOL_ROWS]; pool < rows; ++pool) {
        const long* row = pool_row(plan, pool);
        if (row == nullptr || rank >= row[2]) continue;
        const long* part = (const long*)row[3] + 2 * rank;
        uintptr_t base = (uintptr_t)part[0];
        if (base <= low && high <= base + (uintptr_t)part[1]) {
            *offset = (long)(at - base);
            return pool;
        }
    }
    return -2;
}

// The first and one past the last byte of a field (of its description: address, shape,
// strides in bytes), as offsets from its address.
// Whether they fit in a long (a record's words may be anything).
static inline bool extent_of(long ndim, const long* shape, const long* strides, long itemsize,
                             long* low, long* high) {
    *low = 0, *high = itemsize;
    for (long a = 0; a < ndim; ++a) {
        if (shape[a] == 0) return *low = 0, *high = 0, true;
        long reach;
        if (shape[a] < 0 || __builtin_mul_overflow(shape[a] - 1, strides[a], &reach) ||
            __builtin_add_overflow(reach < 0 ? *low : *high, reach, reach < 0 ? low : high))
            return false;
    }
    return true;
}

static inline long* record_of(long address, const Layout& L, long slot) {
    return (long*)address + slot * L.record;
}

static inline const long* source_of(const long* plan, long j) {
    return plan + HEAD + (4 + plan[AXES]) * j;
}
static inline const long* readers_of(const long* plan) { return source_of(plan, plan[SOURCES]); }
static inline const long* row_of(const long* plan, long r) {
    return readers_of(plan) + 2 * plan[READERS] + r * 3 * plan[AXES];
}

// Starts an exchange of `count` fields: its number, -1 where it is refused (every rank
// refuses it alike: they run the same exchanges).
static long start(const long* plan, const Layout& L, long stamp, long signature, long count,
                  const Field* fields) {
    long* counters = (long*)plan[COUNTERS];
    long number = counters[0];
    if (counters[1 + number % L.slots]) {  // the exchange `slots` before it not finished
        note(plan[RANK], TOO_MANY, L.slots, stamp);
        return -1;
    }
    ++counters[0];
    counters[1 + number % L.slots] = 1;
    long* own = record_of(plan[RECORDS], L, number % L.slots);
    own[1] = signature, own[2] = count, own[L.stamp] = stamp;
    for (long i = 0; i < count; ++i) {
        const Field& f = fields[i];
        long* words = own + L.fields + i * L.field;
        long low, high, offset = 0;
        extent_of(f.ndim, f.shape, f.strides, f.itemsize, &low, &high);  // (a real field)
        uintptr_t at = (uintptr_t)f.data;
        words[0] = high == 0 ? -1 : find_pool(plan, plan[RANK], at + low, at + high, at, &offset);
        words[1] = offset, words[2] = f.ndim;
        for (long a = 0; a < f.ndim; ++a)
            words[3 + a] = f.shape[a], words[3 + L.max_axes + a] = f.strides[a];
    }
    store(own, number + 1);
    return number;
}

// What is wrong with `record`, source `j`'s for exchange `number` (0: nothing), with a
// detail; where nothing is, its fields' addresses in `theirs`. `record`: this rank's copy
// of the words it reads (what is checked is what the copies use).
static long check(const long* plan, const Layout& L, long number, long stamp, long signature,
                  long count, const Field* fields, long j, const long* record,
                  const char** theirs, long* detail) {
    if (record[L.stamp] != stamp) return *detail = record[L.stamp], OTHER_CALL;
    if (record[0] != number + 1) return *detail = record[0] - 1, OUT_OF_STEP;
    if (record[1] != signature || record[2] != count) return *detail = -1, OTHER_FIELDS;
    const long axes = plan[AXES], rank = source_of(plan, j)[0];
    const long* reach = source_of(plan, j) + 4;
    for (long i = 0; i < count; ++i) {
        const long* words = record + L.fields + i * L.field;
        const long* shape = words + 3;
        *detail = i;
        if (words[2] != fields[i].ndim) return OTHER_FIELDS;
        for (long a = axes; a < words[2]; ++a)
            if (shape[a] != fields[i].shape[a]) return OTHER_FIELDS;
        for (long a = 0; a < axes; ++a)  // the boxes read there inside the field
            if (reach[a] > shape[a]) return OUTSIDE;
        if (words[0] == -2) return NOT_SHARED;
        long low, high;
        if (!extent_of(words[2], shape, words + 3 + L.max_axes, fields[i].itemsize, &low, &high))
            return OUTSIDE;
        theirs[i] = nullptr;
        if (high == 0) continue;  // no cells (and no box read from it, above)
        const long* row = pool_row(plan, words[0]);
        if (row == nullptr || rank >= row[2]) return NOT_SHARED;
        const long* part = (const long*)row[3] + 2 * rank;
        if (words[1] < 0 || words[1] > part[1] || low < -words[1] || high > part[1] - words[1])
            return OUTSIDE;
        theirs[i] = (const char*)part[0] + words[1];
    }
    return 0;
}

// Finishes exchange `number` (of start).
// This rank's copy of the words of source `j`'s record for `slot` that it checks and reads.
static inline void snapshot(const long* plan, const Layout& L, long j, long slot, long count,
                            long* words) {
    const long* record = record_of(source_of(plan, j)[1], L, slot);
    std::memcpy(words, record, (L.fields + count * L.field) * sizeof(long));
}

// Finishes exchange `number` (of start): the copies to this rank's own halo, then those from
// its sources, each from a copy of its record checked first (`words`: room for the head and
// `count` fields of a record).
static void finish(const long* plan, const Layout& L, long number, long stamp, long signature,
                   long count, const Field* fields, long* words) {
    if (number < 0) return;
    const long slot = number % L.slots, axes = plan[AXES], sources = plan[SOURCES];
    long* own = record_of(plan[RECORDS], L, slot);
    long problem = 0, culprit = plan[RANK], detail = 0;
    for (long i = 0; i < count && !problem; ++i)
        if (own[L.fields + i * L.field] == -2) problem = NOT_SHARED, detail = i;
    for (long i = 0; i < count; ++i)
        copy_rows_of(fields[i], fields[i].data, fields[i].strides, row_of(plan, 0), plan[OWN],
                     axes, L.lockstep);
    const char* theirs[64];
    for (long j = 0; j < sources && !problem; ++j) {
        reach(record_of(source_of(plan, j)[1], L, slot), number + 1);
        snapshot(plan, L, j, slot, count, words);
        problem = check(plan, L, number, stamp, signature, count, fields, j, words, theirs,
                        &detail);
        if (problem) culprit = source_of(plan, j)[0];
    }
    // again, each copied from what was checked (a record that changed since, against the
    // protocol, stops the copies there)
    for (long j = 0; j < sources && !problem; ++j) {
        snapshot(plan, L, j, slot, count, words);
        problem = check(plan, L, number, stamp, signature, count, fields, j, words, theirs,
                        &detail);
        if (problem) {
            culprit = source_of(plan, j)[0];
            break;
        }
        const long first = source_of(plan, j)[2], rows = source_of(plan, j)[3];
        for (long i = 0; i < count; ++i)
            copy_rows_of(fields[i], theirs[i], words + L.fields + i * L.field + 3 + L.max_axes,
                         row_of(plan, first), rows, axes, L.lockstep);
    }
    for (long j = 0; j < (problem ? L.max_sources : sources); ++j)
        store(own + L.done + j, number + 1);
    const long* readers = readers_of(plan);
    for (long j = 0; j < plan[READERS]; ++j)
        reach((const long*)readers[2 * j + 1] + slot * L.record, number + 1);
    ((long*)plan[COUNTERS])[1 + slot] = 0;
    if (problem) note(culprit, problem, detail, stamp);
}

}  // namespace gt4py_halo_shm
