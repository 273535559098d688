// NCCL for the expansions of gt4py_halo's nccl transport: one communicator per exchange node,
// made on its first call from the node's MPI communicator, and a check of NCCL's results.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <mpi.h>
#include <nccl.h>

namespace gt4py_halo {

// An NCCL call that failed: the exchange cannot go on and no error reaches Python from
// here, so the process stops with NCCL's reason (as DaCe's DACE_GPU_CHECK does).
inline void nccl_check(ncclResult_t result, const char* call) {
    if (result != ncclSuccess) {
        std::fprintf(stderr, "gt4py_halo: %s failed: %s\n", call, ncclGetErrorString(result));
        std::abort();
    }
}

// An NCCL communicator over the ranks of `comm` (collective over it: rank 0 makes the unique
// id, MPI broadcasts it, every rank joins).
inline ncclComm_t nccl_communicator(MPI_Comm comm) {
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ncclUniqueId id;
    if (rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    ncclComm_t nccl = nullptr;
    nccl_check(ncclCommInitRank(&nccl, size, id, rank), "ncclCommInitRank");
    return nccl;
}

}  // namespace gt4py_halo

#define GT4PY_HALO_NCCL(call) ::gt4py_halo::nccl_check((call), #call)
