#include <dace/dace.h>
typedef void * two_steps_867dfecae099c8b6Handle_t;
extern "C" two_steps_867dfecae099c8b6Handle_t __dace_init_two_steps_867dfecae099c8b6(int __u_size0, int __u_size1, int __u_stride0, int __u_stride1, int __v_size0, int __v_size1, int __v_stride0, int __v_stride1);
extern "C" int __dace_exit_two_steps_867dfecae099c8b6(two_steps_867dfecae099c8b6Handle_t handle);
extern "C" void __program_two_steps_867dfecae099c8b6(two_steps_867dfecae099c8b6Handle_t handle, int * __restrict__ __halo_comm_1, int * __restrict__ __halo_peers_1, double * __restrict__ u, double * __restrict__ v, int __u_size0, int __u_size1, int __u_stride0, int __u_stride1, int __v_size0, int __v_size1, int __v_stride0, int __v_stride1, int i0, int i1, int j0, int j1);
