// gt4py_halo: the MPI expansions' waits, which check what arrived (transports/mpi/).
//
// Ranks that exchange fields of different levels or dtypes in one call send messages of
// other sizes than the receivers expect: a longer one is truncated (an error MPI returns),
// a shorter one fills part of its buffer. Either way the halos are wrong, so each wait checks
// its receives and notes the first that is not as expected; the step's caller reads the note
// after the call (compiled/last_call.py) and raises. Each loaded instance of a step has its
// own note: DaCe loads each library privately.
#pragma once
#include <mpi.h>

namespace gt4py_halo_mpi {

struct WrongMessage {
    int rank;  // the sender; -1: every message as expected
    long long got, expected;  // bytes; got -1: more than expected (truncated)
};
static WrongMessage wrong = {-1, 0, 0};

// MPI_Waitall over `count` requests, then per receive: `expected[n]` bytes (a send: < 0;
// `expected` null: errors only, sizes unchecked). A request MPI left pending after another's
// error is waited for: a persistent one is started again at the next call.
static inline void waitall_checked(int count, MPI_Request* requests, MPI_Status* statuses,
                                   const long long* expected) {
    if (count == 0) return;
    const int rc = MPI_Waitall(count, requests, statuses);
    for (int n = 0; n < count; ++n) {
        int error = rc == MPI_ERR_IN_STATUS ? statuses[n].MPI_ERROR : rc;
        if (error == MPI_ERR_PENDING) error = MPI_Wait(&requests[n], &statuses[n]);
        if (expected != nullptr && expected[n] < 0) continue;  // a send
        int got = -1;
        if (error == MPI_SUCCESS) {
            if (expected == nullptr) continue;
            MPI_Get_count(&statuses[n], MPI_BYTE, &got);
            if (got == expected[n]) continue;
        }
        if (wrong.rank < 0)
            wrong = {statuses[n].MPI_SOURCE, got, expected == nullptr ? -1 : expected[n]};
    }
}

}  // namespace gt4py_halo_mpi

// The note of the last call, cleared: the sender's rank, or -1 if every message was as
// expected.
extern "C" __attribute__((visibility("default"))) int __gh_wrong_message(long long* got,
                                                                          long long* expected) {
    const gt4py_halo_mpi::WrongMessage note = gt4py_halo_mpi::wrong;
    gt4py_halo_mpi::wrong.rank = -1;
    *got = note.got;
    *expected = note.expected;
    return note.rank;
}
