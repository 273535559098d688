// The compiled MPI exchanges' check of what they received (transports/mpi/expansion.py,
// unstructured.py): each receive expects a message of a size fixed by the fields of its
// exchange, and (the receives with a stamp) the stamp of the call it runs in: the step and its
// call count (compiled/stamps.py), which every sender writes into its messages. A message
// of another size (a truncated one included) means the ranks passed fields of other levels or
// dtypes to the same exchange; one of another stamp, that the sender runs another call of the
// step, or another step, than this rank (control flow that differs between ranks: a branch
// or loop around an exchange, a rank that calls the step more often, steps called in other
// orders): its halos are not valid. A library of a compiled step notes the first such
// message; gt4py_halo_mpi_unexpected hands the note to Python (compiled/last_call.py), which
// raises. MPI's errors return (mpi4py sets MPI_ERRORS_RETURN; the exchanges' communicators
// are duplicates of the decomposition's).
#pragma once
#include <mpi.h>

#include <cstring>

#define GT4PY_HALO_MPI_CHECKS 1

namespace gt4py_halo_mpi {

struct Unexpected {
    long count = 0;  // messages unlike expected since the last note
    // the first: its sender, what it got and what was expected: bytes (stamped 0), or
    // stamps (stamped 1)
    long source = -1, got = 0, expected = 0, stamped = 0;
};

// Of this library alone (internal linkage: an inline function's static would be one object
// shared by every library loaded, GNU's unique symbols, and would keep them loaded).
static Unexpected& unexpected() {
    static Unexpected note;
    return note;
}

// Twice the waits begun, plus one while one lasts (odd: waiting): read from another thread
// (transports/mpi/runtime.py, StepWaits), which says on stderr when a wait lasts. This
// library's own, as unexpected().
static unsigned long& waits() {
    static unsigned long count = 0;
    return count;
}

// MPI_Waitall on the count requests, then what the receives among them got checked:
// requests whose expected[k] >= 0 are receives of that many bytes, whose stamp (where stamps
// and stamps[k] are not null) lies at stamps[k], to be equal to stamp. A wait that fails
// for some requests (a truncated message) may leave others active (MPI_ERR_PENDING): those
// are waited for one by one, so that every request is inactive again, as the next start
// needs. Noted: got -1 for more than expected (truncated); source -1 where the wait failed
// as a whole (its error code in got).
static void wait_checked(int count, MPI_Request* requests, MPI_Status* statuses,
                         const long* expected, char* const* stamps, long long stamp) {
    __atomic_fetch_add(&waits(), 1, __ATOMIC_RELAXED);
    int rc = MPI_Waitall(count, requests, statuses);
    __atomic_fetch_add(&waits(), 1, __ATOMIC_RELAXED);
    Unexpected& note = unexpected();
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        if (note.count++ == 0) note.source = -1, note.got = rc, note.expected = 0;
        return;
    }
    for (int k = 0; k < count; ++k) {
        int error = rc == MPI_SUCCESS ? MPI_SUCCESS : statuses[k].MPI_ERROR;
        if (error == MPI_ERR_PENDING) error = MPI_Wait(&requests[k], &statuses[k]);
        if (expected[k] < 0) continue;  // a send
        int got = -1;
        if (error == MPI_SUCCESS) MPI_Get_count(&statuses[k], MPI_BYTE, &got);
        if (got != expected[k]) {
            if (note.count++ == 0)
                note.source = statuses[k].MPI_SOURCE, note.got = got,
                note.expected = expected[k], note.stamped = 0;
            continue;
        }
        if (stamps == nullptr || stamps[k] == nullptr) continue;
        long long sent;
        std::memcpy(&sent, stamps[k], sizeof sent);
        if (sent != stamp && note.count++ == 0)
            note.source = statuses[k].MPI_SOURCE, note.got = sent, note.expected = stamp,
            note.stamped = 1;
    }
}

}  // namespace gt4py_halo_mpi

// The note (count, source, got, expected, stamped) into details[5], and cleared; returns
// the count.
extern "C" DACE_EXPORTED long gt4py_halo_mpi_unexpected(long* details) {
    gt4py_halo_mpi::Unexpected& note = gt4py_halo_mpi::unexpected();
    details[0] = note.count, details[1] = note.source, details[2] = note.got;
    details[3] = note.expected, details[4] = note.stamped;
    long count = note.count;
    note = gt4py_halo_mpi::Unexpected();
    return count;
}

// The library's wait counter (gt4py_halo_mpi::waits).
extern "C" DACE_EXPORTED unsigned long gt4py_halo_mpi_waits() {
    return __atomic_load_n(&gt4py_halo_mpi::waits(), __ATOMIC_RELAXED);
}
