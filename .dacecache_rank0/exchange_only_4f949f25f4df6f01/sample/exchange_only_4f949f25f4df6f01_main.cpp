#include <cstdlib>
#include "../include/exchange_only_4f949f25f4df6f01.h"

int main(int argc, char **argv) {
    exchange_only_4f949f25f4df6f01Handle_t handle;
    int err;
    int __a_size0 = 42;
    int __a_size1 = 42;
    int __a_stride0 = 42;
    int __a_stride1 = 42;
    int __b_size0 = 42;
    int __b_size1 = 42;
    int __b_size2 = 42;
    int __b_stride0 = 42;
    int __b_stride1 = 42;
    int __b_stride2 = 42;
    int __c_size0 = 42;
    int __c_size1 = 42;
    int __c_size2 = 42;
    int __c_stride0 = 42;
    int __c_stride1 = 42;
    int __c_stride2 = 42;
    int * __restrict__ __halo_comm_2 = (int*) calloc(1, sizeof(int));
    int * __restrict__ __halo_peers_2 = (int*) calloc(8, sizeof(int));
    double * __restrict__ a = (double*) calloc((__a_size0 * __a_size1), sizeof(double));
    int * __restrict__ b = (int*) calloc(((__b_size0 * __b_size1) * __b_size2), sizeof(int));
    float * __restrict__ c = (float*) calloc(((__c_size0 * __c_size1) * __c_size2), sizeof(float));


    handle = __dace_init_exchange_only_4f949f25f4df6f01(__a_size0, __a_size1, __a_stride0, __a_stride1, __b_size0, __b_size1, __b_size2, __b_stride0, __b_stride1, __b_stride2, __c_size0, __c_size1, __c_size2, __c_stride0, __c_stride1, __c_stride2);
    __program_exchange_only_4f949f25f4df6f01(handle, __halo_comm_2, __halo_peers_2, a, b, c, __a_size0, __a_size1, __a_stride0, __a_stride1, __b_size0, __b_size1, __b_size2, __b_stride0, __b_stride1, __b_stride2, __c_size0, __c_size1, __c_size2, __c_stride0, __c_stride1, __c_stride2);
    err = __dace_exit_exchange_only_4f949f25f4df6f01(handle);

    free(__halo_comm_2);
    free(__halo_peers_2);
    free(a);
    free(b);
    free(c);


    return err;
}
