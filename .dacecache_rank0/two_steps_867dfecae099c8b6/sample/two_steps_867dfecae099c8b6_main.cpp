#include <cstdlib>
#include "../include/two_steps_867dfecae099c8b6.h"

int main(int argc, char **argv) {
    two_steps_867dfecae099c8b6Handle_t handle;
    int err;
    int __u_size0 = 42;
    int __u_size1 = 42;
    int __u_stride0 = 42;
    int __u_stride1 = 42;
    int __v_size0 = 42;
    int __v_size1 = 42;
    int __v_stride0 = 42;
    int __v_stride1 = 42;
    int i0 = 42;
    int i1 = 42;
    int j0 = 42;
    int j1 = 42;
    int * __restrict__ __halo_comm_1 = (int*) calloc(1, sizeof(int));
    int * __restrict__ __halo_peers_1 = (int*) calloc(8, sizeof(int));
    double * __restrict__ u = (double*) calloc((__u_size0 * __u_size1), sizeof(double));
    double * __restrict__ v = (double*) calloc((__v_size0 * __v_size1), sizeof(double));


    handle = __dace_init_two_steps_867dfecae099c8b6(__u_size0, __u_size1, __u_stride0, __u_stride1, __v_size0, __v_size1, __v_stride0, __v_stride1);
    __program_two_steps_867dfecae099c8b6(handle, __halo_comm_1, __halo_peers_1, u, v, __u_size0, __u_size1, __u_stride0, __u_stride1, __v_size0, __v_size1, __v_stride0, __v_stride1, i0, i1, j0, j1);
    err = __dace_exit_two_steps_867dfecae099c8b6(handle);

    free(__halo_comm_1);
    free(__halo_peers_1);
    free(u);
    free(v);


    return err;
}
