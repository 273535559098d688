/* DaCe AUTO-GENERATED FILE. DO NOT MODIFY */
#include <dace/dace.h>
#include "../../include/hash.h"
#include "mpi.h"

struct two_steps_867dfecae099c8b6_state_t {
    double * __restrict__ __0_sbuf_0_0;
    double * __restrict__ __0_sbuf_0_1;
    double * __restrict__ __0_sbuf_0_2;
    double * __restrict__ __0_sbuf_0_3;
    double * __restrict__ __0_sbuf_0_4;
    double * __restrict__ __0_sbuf_0_5;
    double * __restrict__ __0_sbuf_0_6;
    double * __restrict__ __0_sbuf_0_7;
    double * __restrict__ __0_rbuf_0_0;
    double * __restrict__ __0_rbuf_0_1;
    double * __restrict__ __0_rbuf_0_2;
    double * __restrict__ __0_rbuf_0_3;
    double * __restrict__ __0_rbuf_0_4;
    double * __restrict__ __0_rbuf_0_5;
    double * __restrict__ __0_rbuf_0_6;
    double * __restrict__ __0_rbuf_0_7;
    double * __restrict__ __0_halo8_exchange_sbuf_0_0;
    double * __restrict__ __0_halo8_exchange_sbuf_0_1;
    double * __restrict__ __0_halo8_exchange_sbuf_0_2;
    double * __restrict__ __0_halo8_exchange_sbuf_0_3;
    double * __restrict__ __0_halo8_exchange_sbuf_0_4;
    double * __restrict__ __0_halo8_exchange_sbuf_0_5;
    double * __restrict__ __0_halo8_exchange_sbuf_0_6;
    double * __restrict__ __0_halo8_exchange_sbuf_0_7;
    double * __restrict__ __0_halo8_exchange_rbuf_0_0;
    double * __restrict__ __0_halo8_exchange_rbuf_0_1;
    double * __restrict__ __0_halo8_exchange_rbuf_0_2;
    double * __restrict__ __0_halo8_exchange_rbuf_0_3;
    double * __restrict__ __0_halo8_exchange_rbuf_0_4;
    double * __restrict__ __0_halo8_exchange_rbuf_0_5;
    double * __restrict__ __0_halo8_exchange_rbuf_0_6;
    double * __restrict__ __0_halo8_exchange_rbuf_0_7;
    MPI_Request halo0_requests[16];
    int halo0_ready = 0;
    MPI_Request halo8_requests[16];
    int halo8_ready = 0;
};

void __program_two_steps_867dfecae099c8b6_internal(two_steps_867dfecae099c8b6_state_t*__state, int * __restrict__ __halo_comm_1, int * __restrict__ __halo_peers_1, double * __restrict__ u, double * __restrict__ v, int __u_size0, int __u_size1, int __u_stride0, int __u_stride1, int __v_size0, int __v_size1, int __v_stride0, int __v_stride1, int i0, int i1, int j0, int j1)
{
    int __sym_i0;
    int __sym_i1;
    int __sym_j0;
    int __sym_j1;

    {

        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 2; h0 += 1) {
                for (int h1 = 1; h1 < 2; h1 += 1) {
                    {
                        double _in = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_0)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_0[((h0 + h1) - 2)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 2; h0 += 1) {
                for (int h1 = 1; h1 < (__u_size1 - 1); h1 += 1) {
                    {
                        double _in = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_1)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_1[((h1 + ((__u_size1 - 2) * (h0 - 1))) - 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 2; h0 += 1) {
                for (int h1 = (__u_size1 - 2); h1 < (__u_size1 - 1); h1 += 1) {
                    {
                        double _in = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_2)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_2[((((- __u_size1) + h0) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__u_size0 - 1); h0 += 1) {
                for (int h1 = 1; h1 < 2; h1 += 1) {
                    {
                        double _in = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_3)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_3[((h0 + h1) - 2)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__u_size0 - 1); h0 += 1) {
                for (int h1 = (__u_size1 - 2); h1 < (__u_size1 - 1); h1 += 1) {
                    {
                        double _in = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_4)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_4[((((- __u_size1) + h0) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__u_size0 - 2); h0 < (__u_size0 - 1); h0 += 1) {
                for (int h1 = 1; h1 < 2; h1 += 1) {
                    {
                        double _in = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_5)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_5[((((- __u_size0) + h0) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__u_size0 - 2); h0 < (__u_size0 - 1); h0 += 1) {
                for (int h1 = 1; h1 < (__u_size1 - 1); h1 += 1) {
                    {
                        double _in = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_6)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_6[((h1 + ((__u_size1 - 2) * (((- __u_size0) + h0) + 2))) - 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__u_size0 - 2); h0 < (__u_size0 - 1); h0 += 1) {
                for (int h1 = (__u_size1 - 2); h1 < (__u_size1 - 1); h1 += 1) {
                    {
                        double _in = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_7)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_7[(((((- __u_size0) - __u_size1) + h0) + h1) + 4)] = _out;
                    }
                }
            }
        }
        {
            int* _peers = &__halo_peers_1[0];
            int* _comm = &__halo_comm_1[0];
            double* _sbuf_0_0 = &__state->__0_sbuf_0_0[0];
            double* _sbuf_0_1 = &__state->__0_sbuf_0_1[0];
            double* _sbuf_0_2 = &__state->__0_sbuf_0_2[0];
            double* _sbuf_0_3 = &__state->__0_sbuf_0_3[0];
            double* _sbuf_0_4 = &__state->__0_sbuf_0_4[0];
            double* _sbuf_0_5 = &__state->__0_sbuf_0_5[0];
            double* _sbuf_0_6 = &__state->__0_sbuf_0_6[0];
            double* _sbuf_0_7 = &__state->__0_sbuf_0_7[0];
            double* _rbuf_0_0 = __state->__0_rbuf_0_0;
            double* _rbuf_0_1 = __state->__0_rbuf_0_1;
            double* _rbuf_0_2 = __state->__0_rbuf_0_2;
            double* _rbuf_0_3 = __state->__0_rbuf_0_3;
            double* _rbuf_0_4 = __state->__0_rbuf_0_4;
            double* _rbuf_0_5 = __state->__0_rbuf_0_5;
            double* _rbuf_0_6 = __state->__0_rbuf_0_6;
            double* _rbuf_0_7 = __state->__0_rbuf_0_7;

            ///////////////////

            if (!__state->halo0_ready) {
                MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)_comm[0]);
                int n = 0;
                MPI_Recv_init(_rbuf_0_0, 8, MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 7, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_1, (8*__u_size1 - 16), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 6, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_2, 8, MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 5, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_3, (8*__u_size0 - 16), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 4, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_4, (8*__u_size0 - 16), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 3, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_5, 8, MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 2, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_6, (8*__u_size1 - 16), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 1, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_7, 8, MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 0, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_0, 8, MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 0, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_1, (8*__u_size1 - 16), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 1, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_2, 8, MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 2, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_3, (8*__u_size0 - 16), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 3, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_4, (8*__u_size0 - 16), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 4, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_5, 8, MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 5, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_6, (8*__u_size1 - 16), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 6, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_7, 8, MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 7, comm, &__state->halo0_requests[n++]);
                __state->halo0_ready = 1;
            }
            MPI_Startall(16, __state->halo0_requests);
            ///////////////////

        }

    }
    __sym_i0 = i0;
    __sym_i1 = i1;
    __sym_j0 = j0;
    __sym_j1 = j1;
    {

        {
            double* _rbuf_0_0_in = &__state->__0_rbuf_0_0[0];
            double* _rbuf_0_1_in = &__state->__0_rbuf_0_1[0];
            double* _rbuf_0_2_in = &__state->__0_rbuf_0_2[0];
            double* _rbuf_0_3_in = &__state->__0_rbuf_0_3[0];
            double* _rbuf_0_4_in = &__state->__0_rbuf_0_4[0];
            double* _rbuf_0_5_in = &__state->__0_rbuf_0_5[0];
            double* _rbuf_0_6_in = &__state->__0_rbuf_0_6[0];
            double* _rbuf_0_7_in = &__state->__0_rbuf_0_7[0];
            double* _rbuf_0_0 = __state->__0_rbuf_0_0;
            double* _rbuf_0_1 = __state->__0_rbuf_0_1;
            double* _rbuf_0_2 = __state->__0_rbuf_0_2;
            double* _rbuf_0_3 = __state->__0_rbuf_0_3;
            double* _rbuf_0_4 = __state->__0_rbuf_0_4;
            double* _rbuf_0_5 = __state->__0_rbuf_0_5;
            double* _rbuf_0_6 = __state->__0_rbuf_0_6;
            double* _rbuf_0_7 = __state->__0_rbuf_0_7;

            ///////////////////
            MPI_Waitall(16, __state->halo0_requests, MPI_STATUSES_IGNORE);
            ///////////////////

        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 0; h1 < 1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_0[(h0 + h1)];
                        double _old = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        int _peer = __halo_peers_1[0];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_0)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        u[((__u_stride0 * h0) + (__u_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 1; h1 < (__u_size1 - 1); h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_1[(((h0 * (__u_size1 - 2)) + h1) - 1)];
                        double _old = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        int _peer = __halo_peers_1[1];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_1)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        u[((__u_stride0 * h0) + (__u_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = (__u_size1 - 1); h1 < __u_size1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_2[((((- __u_size1) + h0) + h1) + 1)];
                        double _old = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        int _peer = __halo_peers_1[2];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_2)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        u[((__u_stride0 * h0) + (__u_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__u_size0 - 1); h0 += 1) {
                for (int h1 = 0; h1 < 1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_3[((h0 + h1) - 1)];
                        double _old = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        int _peer = __halo_peers_1[3];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_3)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        u[((__u_stride0 * h0) + (__u_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__u_size0 - 1); h0 += 1) {
                for (int h1 = (__u_size1 - 1); h1 < __u_size1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_4[(((- __u_size1) + h0) + h1)];
                        double _old = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        int _peer = __halo_peers_1[4];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_4)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        u[((__u_stride0 * h0) + (__u_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__u_size0 - 1); h0 < __u_size0; h0 += 1) {
                for (int h1 = 0; h1 < 1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_5[((((- __u_size0) + h0) + h1) + 1)];
                        double _old = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        int _peer = __halo_peers_1[5];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_5)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        u[((__u_stride0 * h0) + (__u_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__u_size0 - 1); h0 < __u_size0; h0 += 1) {
                for (int h1 = 1; h1 < (__u_size1 - 1); h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_6[((h1 + ((__u_size1 - 2) * (((- __u_size0) + h0) + 1))) - 1)];
                        double _old = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        int _peer = __halo_peers_1[6];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_6)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        u[((__u_stride0 * h0) + (__u_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__u_size0 - 1); h0 < __u_size0; h0 += 1) {
                for (int h1 = (__u_size1 - 1); h1 < __u_size1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_7[(((((- __u_size0) - __u_size1) + h0) + h1) + 2)];
                        double _old = u[((__u_stride0 * h0) + (__u_stride1 * h1))];
                        int _peer = __halo_peers_1[7];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_7)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        u[((__u_stride0 * h0) + (__u_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int i_I_gtx_horizontal = __sym_i0; i_I_gtx_horizontal < __sym_i1; i_I_gtx_horizontal += 1) {
                for (int i_J_gtx_horizontal = __sym_j0; i_J_gtx_horizontal < __sym_j1; i_J_gtx_horizontal += 1) {
                    double diffusion_step___map_fusion_gtir_tmp_2;
                    double diffusion_step___map_fusion_gtir_tmp_4;
                    double diffusion_step___map_fusion_gtir_tmp_6;
                    double diffusion_step___map_fusion_gtir_tmp_8;
                    double diffusion_step___map_fusion_gtir_tmp_10;
                    double diffusion_step___map_fusion_gtir_tmp_12;
                    double diffusion_step___map_fusion_gtir_tmp_14;
                    double diffusion_step___map_fusion_gtir_tmp_17;
                    double diffusion_step___map_fusion_gtir_tmp_19;
                    double diffusion_step___map_fusion_gtir_tmp_21;
                    double diffusion_step___gtx_double_write_remover_inner_inner_distribution_node;
                    double diffusion_step_gtir_tmp_0_0;
                    double diffusion_step_gtir_tmp_15_0;
                    {
                        double __tlet_out;

                        ///////////////////
                        // Tasklet code (tlet_0_get_value__clone_0)
                        __tlet_out = 0.2;
                        ///////////////////

                        diffusion_step_gtir_tmp_0_0 = __tlet_out;
                    }
                    {
                        double __tlet_out;

                        ///////////////////
                        // Tasklet code (tlet_8_get_value__clone_0)
                        __tlet_out = 4.0;
                        ///////////////////

                        diffusion_step_gtir_tmp_15_0 = __tlet_out;
                    }
                    {
                        double __tlet_arg0 = diffusion_step_gtir_tmp_15_0;
                        double __tlet_arg1 = u[((__u_stride0 * i_I_gtx_horizontal) + (__u_stride1 * i_J_gtx_horizontal))];
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_9_multiplies)
                        __tlet_result = (__tlet_arg0 * __tlet_arg1);
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_17 = __tlet_result;
                    }
                    {
                        double _cpy_in = u[((__u_stride0 * i_I_gtx_horizontal) + (__u_stride1 * (i_J_gtx_horizontal - 1)))];
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_u_to_diffusion_step___map_fusion_gtir_tmp_12)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_12 = _cpy_out;
                    }
                    {
                        double _cpy_in = u[((__u_stride0 * i_I_gtx_horizontal) + (__u_stride1 * (i_J_gtx_horizontal + 1)))];
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_u_to_diffusion_step___map_fusion_gtir_tmp_8)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_8 = _cpy_out;
                    }
                    {
                        double _cpy_in = u[((__u_stride0 * (i_I_gtx_horizontal - 1)) + (__u_stride1 * i_J_gtx_horizontal))];
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_u_to_diffusion_step___map_fusion_gtir_tmp_4)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_4 = _cpy_out;
                    }
                    {
                        double _cpy_in = u[((__u_stride0 * (i_I_gtx_horizontal + 1)) + (__u_stride1 * i_J_gtx_horizontal))];
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_u_to_diffusion_step___map_fusion_gtir_tmp_2)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_2 = _cpy_out;
                    }
                    {
                        double __tlet_arg0 = diffusion_step___map_fusion_gtir_tmp_2;
                        double __tlet_arg1 = diffusion_step___map_fusion_gtir_tmp_4;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_3_plus)
                        __tlet_result = (__tlet_arg0 + __tlet_arg1);
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_6 = __tlet_result;
                    }
                    {
                        double __tlet_arg0 = diffusion_step___map_fusion_gtir_tmp_6;
                        double __tlet_arg1 = diffusion_step___map_fusion_gtir_tmp_8;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_5_plus)
                        __tlet_result = (__tlet_arg0 + __tlet_arg1);
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_10 = __tlet_result;
                    }
                    {
                        double __tlet_arg0 = diffusion_step___map_fusion_gtir_tmp_10;
                        double __tlet_arg1 = diffusion_step___map_fusion_gtir_tmp_12;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_7_plus)
                        __tlet_result = (__tlet_arg0 + __tlet_arg1);
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_14 = __tlet_result;
                    }
                    {
                        double __tlet_arg0 = diffusion_step___map_fusion_gtir_tmp_14;
                        double __tlet_arg1 = diffusion_step___map_fusion_gtir_tmp_17;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_10_minus)
                        __tlet_result = (__tlet_arg0 - __tlet_arg1);
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_19 = __tlet_result;
                    }
                    {
                        double __tlet_arg0 = diffusion_step_gtir_tmp_0_0;
                        double __tlet_arg1 = diffusion_step___map_fusion_gtir_tmp_19;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_11_multiplies)
                        __tlet_result = (__tlet_arg0 * __tlet_arg1);
                        ///////////////////

                        diffusion_step___map_fusion_gtir_tmp_21 = __tlet_result;
                    }
                    {
                        double __tlet_arg1 = diffusion_step___map_fusion_gtir_tmp_21;
                        double __tlet_arg0 = u[((__u_stride0 * i_I_gtx_horizontal) + (__u_stride1 * i_J_gtx_horizontal))];
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_12_plus)
                        __tlet_result = (__tlet_arg0 + __tlet_arg1);
                        ///////////////////

                        diffusion_step___gtx_double_write_remover_inner_inner_distribution_node = __tlet_result;
                    }
                    {
                        double _cpy_in = diffusion_step___gtx_double_write_remover_inner_inner_distribution_node;
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_diffusion_step___gtx_double_write_remover_inner_inner_distribution_node_to_v)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        v[((__v_stride0 * i_I_gtx_horizontal) + (__v_stride1 * i_J_gtx_horizontal))] = _cpy_out;
                    }
                }
            }
        }

    }
    __sym_i0 = i0;
    __sym_i1 = i1;
    __sym_j0 = j0;
    __sym_j1 = j1;
    {

        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 2; h0 += 1) {
                for (int h1 = 1; h1 < 2; h1 += 1) {
                    {
                        double _in = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_0)
                        _out = _in;
                        ///////////////////

                        __state->__0_halo8_exchange_sbuf_0_0[((h0 + h1) - 2)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 2; h0 += 1) {
                for (int h1 = 1; h1 < (__v_size1 - 1); h1 += 1) {
                    {
                        double _in = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_1)
                        _out = _in;
                        ///////////////////

                        __state->__0_halo8_exchange_sbuf_0_1[((h1 + ((__v_size1 - 2) * (h0 - 1))) - 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 2; h0 += 1) {
                for (int h1 = (__v_size1 - 2); h1 < (__v_size1 - 1); h1 += 1) {
                    {
                        double _in = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_2)
                        _out = _in;
                        ///////////////////

                        __state->__0_halo8_exchange_sbuf_0_2[((((- __v_size1) + h0) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__v_size0 - 1); h0 += 1) {
                for (int h1 = 1; h1 < 2; h1 += 1) {
                    {
                        double _in = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_3)
                        _out = _in;
                        ///////////////////

                        __state->__0_halo8_exchange_sbuf_0_3[((h0 + h1) - 2)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__v_size0 - 1); h0 += 1) {
                for (int h1 = (__v_size1 - 2); h1 < (__v_size1 - 1); h1 += 1) {
                    {
                        double _in = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_4)
                        _out = _in;
                        ///////////////////

                        __state->__0_halo8_exchange_sbuf_0_4[((((- __v_size1) + h0) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__v_size0 - 2); h0 < (__v_size0 - 1); h0 += 1) {
                for (int h1 = 1; h1 < 2; h1 += 1) {
                    {
                        double _in = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_5)
                        _out = _in;
                        ///////////////////

                        __state->__0_halo8_exchange_sbuf_0_5[((((- __v_size0) + h0) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__v_size0 - 2); h0 < (__v_size0 - 1); h0 += 1) {
                for (int h1 = 1; h1 < (__v_size1 - 1); h1 += 1) {
                    {
                        double _in = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_6)
                        _out = _in;
                        ///////////////////

                        __state->__0_halo8_exchange_sbuf_0_6[((h1 + ((__v_size1 - 2) * (((- __v_size0) + h0) + 2))) - 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__v_size0 - 2); h0 < (__v_size0 - 1); h0 += 1) {
                for (int h1 = (__v_size1 - 2); h1 < (__v_size1 - 1); h1 += 1) {
                    {
                        double _in = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_7)
                        _out = _in;
                        ///////////////////

                        __state->__0_halo8_exchange_sbuf_0_7[(((((- __v_size0) - __v_size1) + h0) + h1) + 4)] = _out;
                    }
                }
            }
        }
        {
            int* _peers = &__halo_peers_1[0];
            int* _comm = &__halo_comm_1[0];
            double* _sbuf_0_0 = &__state->__0_halo8_exchange_sbuf_0_0[0];
            double* _sbuf_0_1 = &__state->__0_halo8_exchange_sbuf_0_1[0];
            double* _sbuf_0_2 = &__state->__0_halo8_exchange_sbuf_0_2[0];
            double* _sbuf_0_3 = &__state->__0_halo8_exchange_sbuf_0_3[0];
            double* _sbuf_0_4 = &__state->__0_halo8_exchange_sbuf_0_4[0];
            double* _sbuf_0_5 = &__state->__0_halo8_exchange_sbuf_0_5[0];
            double* _sbuf_0_6 = &__state->__0_halo8_exchange_sbuf_0_6[0];
            double* _sbuf_0_7 = &__state->__0_halo8_exchange_sbuf_0_7[0];
            double* _rbuf_0_0 = __state->__0_halo8_exchange_rbuf_0_0;
            double* _rbuf_0_1 = __state->__0_halo8_exchange_rbuf_0_1;
            double* _rbuf_0_2 = __state->__0_halo8_exchange_rbuf_0_2;
            double* _rbuf_0_3 = __state->__0_halo8_exchange_rbuf_0_3;
            double* _rbuf_0_4 = __state->__0_halo8_exchange_rbuf_0_4;
            double* _rbuf_0_5 = __state->__0_halo8_exchange_rbuf_0_5;
            double* _rbuf_0_6 = __state->__0_halo8_exchange_rbuf_0_6;
            double* _rbuf_0_7 = __state->__0_halo8_exchange_rbuf_0_7;

            ///////////////////

            if (!__state->halo8_ready) {
                MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)_comm[0]);
                int n = 0;
                MPI_Recv_init(_rbuf_0_0, 8, MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 15, comm, &__state->halo8_requests[n++]);
                MPI_Recv_init(_rbuf_0_1, (8*__v_size1 - 16), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 14, comm, &__state->halo8_requests[n++]);
                MPI_Recv_init(_rbuf_0_2, 8, MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 13, comm, &__state->halo8_requests[n++]);
                MPI_Recv_init(_rbuf_0_3, (8*__v_size0 - 16), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 12, comm, &__state->halo8_requests[n++]);
                MPI_Recv_init(_rbuf_0_4, (8*__v_size0 - 16), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 11, comm, &__state->halo8_requests[n++]);
                MPI_Recv_init(_rbuf_0_5, 8, MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 10, comm, &__state->halo8_requests[n++]);
                MPI_Recv_init(_rbuf_0_6, (8*__v_size1 - 16), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 9, comm, &__state->halo8_requests[n++]);
                MPI_Recv_init(_rbuf_0_7, 8, MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 8, comm, &__state->halo8_requests[n++]);
                MPI_Send_init(_sbuf_0_0, 8, MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 8, comm, &__state->halo8_requests[n++]);
                MPI_Send_init(_sbuf_0_1, (8*__v_size1 - 16), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 9, comm, &__state->halo8_requests[n++]);
                MPI_Send_init(_sbuf_0_2, 8, MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 10, comm, &__state->halo8_requests[n++]);
                MPI_Send_init(_sbuf_0_3, (8*__v_size0 - 16), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 11, comm, &__state->halo8_requests[n++]);
                MPI_Send_init(_sbuf_0_4, (8*__v_size0 - 16), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 12, comm, &__state->halo8_requests[n++]);
                MPI_Send_init(_sbuf_0_5, 8, MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 13, comm, &__state->halo8_requests[n++]);
                MPI_Send_init(_sbuf_0_6, (8*__v_size1 - 16), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 14, comm, &__state->halo8_requests[n++]);
                MPI_Send_init(_sbuf_0_7, 8, MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 15, comm, &__state->halo8_requests[n++]);
                __state->halo8_ready = 1;
            }
            MPI_Startall(16, __state->halo8_requests);
            ///////////////////

        }
        {
            double* _rbuf_0_0_in = &__state->__0_halo8_exchange_rbuf_0_0[0];
            double* _rbuf_0_1_in = &__state->__0_halo8_exchange_rbuf_0_1[0];
            double* _rbuf_0_2_in = &__state->__0_halo8_exchange_rbuf_0_2[0];
            double* _rbuf_0_3_in = &__state->__0_halo8_exchange_rbuf_0_3[0];
            double* _rbuf_0_4_in = &__state->__0_halo8_exchange_rbuf_0_4[0];
            double* _rbuf_0_5_in = &__state->__0_halo8_exchange_rbuf_0_5[0];
            double* _rbuf_0_6_in = &__state->__0_halo8_exchange_rbuf_0_6[0];
            double* _rbuf_0_7_in = &__state->__0_halo8_exchange_rbuf_0_7[0];
            double* _rbuf_0_0 = __state->__0_halo8_exchange_rbuf_0_0;
            double* _rbuf_0_1 = __state->__0_halo8_exchange_rbuf_0_1;
            double* _rbuf_0_2 = __state->__0_halo8_exchange_rbuf_0_2;
            double* _rbuf_0_3 = __state->__0_halo8_exchange_rbuf_0_3;
            double* _rbuf_0_4 = __state->__0_halo8_exchange_rbuf_0_4;
            double* _rbuf_0_5 = __state->__0_halo8_exchange_rbuf_0_5;
            double* _rbuf_0_6 = __state->__0_halo8_exchange_rbuf_0_6;
            double* _rbuf_0_7 = __state->__0_halo8_exchange_rbuf_0_7;

            ///////////////////
            MPI_Waitall(16, __state->halo8_requests, MPI_STATUSES_IGNORE);
            ///////////////////

        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 0; h1 < 1; h1 += 1) {
                    {
                        double _in = __state->__0_halo8_exchange_rbuf_0_0[(h0 + h1)];
                        double _old = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        int _peer = __halo_peers_1[0];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_0)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        v[((__v_stride0 * h0) + (__v_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 1; h1 < (__v_size1 - 1); h1 += 1) {
                    {
                        double _in = __state->__0_halo8_exchange_rbuf_0_1[(((h0 * (__v_size1 - 2)) + h1) - 1)];
                        double _old = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        int _peer = __halo_peers_1[1];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_1)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        v[((__v_stride0 * h0) + (__v_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = (__v_size1 - 1); h1 < __v_size1; h1 += 1) {
                    {
                        double _in = __state->__0_halo8_exchange_rbuf_0_2[((((- __v_size1) + h0) + h1) + 1)];
                        double _old = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        int _peer = __halo_peers_1[2];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_2)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        v[((__v_stride0 * h0) + (__v_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__v_size0 - 1); h0 += 1) {
                for (int h1 = 0; h1 < 1; h1 += 1) {
                    {
                        double _in = __state->__0_halo8_exchange_rbuf_0_3[((h0 + h1) - 1)];
                        double _old = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        int _peer = __halo_peers_1[3];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_3)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        v[((__v_stride0 * h0) + (__v_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__v_size0 - 1); h0 += 1) {
                for (int h1 = (__v_size1 - 1); h1 < __v_size1; h1 += 1) {
                    {
                        double _in = __state->__0_halo8_exchange_rbuf_0_4[(((- __v_size1) + h0) + h1)];
                        double _old = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        int _peer = __halo_peers_1[4];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_4)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        v[((__v_stride0 * h0) + (__v_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__v_size0 - 1); h0 < __v_size0; h0 += 1) {
                for (int h1 = 0; h1 < 1; h1 += 1) {
                    {
                        double _in = __state->__0_halo8_exchange_rbuf_0_5[((((- __v_size0) + h0) + h1) + 1)];
                        double _old = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        int _peer = __halo_peers_1[5];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_5)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        v[((__v_stride0 * h0) + (__v_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__v_size0 - 1); h0 < __v_size0; h0 += 1) {
                for (int h1 = 1; h1 < (__v_size1 - 1); h1 += 1) {
                    {
                        double _in = __state->__0_halo8_exchange_rbuf_0_6[((h1 + ((__v_size1 - 2) * (((- __v_size0) + h0) + 1))) - 1)];
                        double _old = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        int _peer = __halo_peers_1[6];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_6)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        v[((__v_stride0 * h0) + (__v_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__v_size0 - 1); h0 < __v_size0; h0 += 1) {
                for (int h1 = (__v_size1 - 1); h1 < __v_size1; h1 += 1) {
                    {
                        double _in = __state->__0_halo8_exchange_rbuf_0_7[(((((- __v_size0) - __v_size1) + h0) + h1) + 2)];
                        double _old = v[((__v_stride0 * h0) + (__v_stride1 * h1))];
                        int _peer = __halo_peers_1[7];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_7)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        v[((__v_stride0 * h0) + (__v_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int i_I_gtx_horizontal = __sym_i0; i_I_gtx_horizontal < __sym_i1; i_I_gtx_horizontal += 1) {
                for (int i_J_gtx_horizontal = __sym_j0; i_J_gtx_horizontal < __sym_j1; i_J_gtx_horizontal += 1) {
                    double __map_fusion_gtir_tmp_2;
                    double __map_fusion_gtir_tmp_4;
                    double __map_fusion_gtir_tmp_6;
                    double __map_fusion_gtir_tmp_8;
                    double __map_fusion_gtir_tmp_10;
                    double __map_fusion_gtir_tmp_12;
                    double __map_fusion_gtir_tmp_14;
                    double __map_fusion_gtir_tmp_17;
                    double __map_fusion_gtir_tmp_19;
                    double __map_fusion_gtir_tmp_21;
                    double __gtx_double_write_remover_inner_inner_distribution_node;
                    double gtir_tmp_0_0;
                    double gtir_tmp_15_0;
                    {
                        double __tlet_out;

                        ///////////////////
                        // Tasklet code (tlet_0_get_value__clone_0)
                        __tlet_out = 0.2;
                        ///////////////////

                        gtir_tmp_0_0 = __tlet_out;
                    }
                    {
                        double __tlet_out;

                        ///////////////////
                        // Tasklet code (tlet_8_get_value__clone_0)
                        __tlet_out = 4.0;
                        ///////////////////

                        gtir_tmp_15_0 = __tlet_out;
                    }
                    {
                        double __tlet_arg1 = v[((__v_stride0 * i_I_gtx_horizontal) + (__v_stride1 * i_J_gtx_horizontal))];
                        double __tlet_arg0 = gtir_tmp_15_0;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_9_multiplies)
                        __tlet_result = (__tlet_arg0 * __tlet_arg1);
                        ///////////////////

                        __map_fusion_gtir_tmp_17 = __tlet_result;
                    }
                    {
                        double _cpy_in = v[((__v_stride0 * i_I_gtx_horizontal) + (__v_stride1 * (i_J_gtx_horizontal - 1)))];
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_v_to___map_fusion_gtir_tmp_12)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        __map_fusion_gtir_tmp_12 = _cpy_out;
                    }
                    {
                        double _cpy_in = v[((__v_stride0 * i_I_gtx_horizontal) + (__v_stride1 * (i_J_gtx_horizontal + 1)))];
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_v_to___map_fusion_gtir_tmp_8)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        __map_fusion_gtir_tmp_8 = _cpy_out;
                    }
                    {
                        double _cpy_in = v[((__v_stride0 * (i_I_gtx_horizontal - 1)) + (__v_stride1 * i_J_gtx_horizontal))];
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_v_to___map_fusion_gtir_tmp_4)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        __map_fusion_gtir_tmp_4 = _cpy_out;
                    }
                    {
                        double _cpy_in = v[((__v_stride0 * (i_I_gtx_horizontal + 1)) + (__v_stride1 * i_J_gtx_horizontal))];
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy_v_to___map_fusion_gtir_tmp_2)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        __map_fusion_gtir_tmp_2 = _cpy_out;
                    }
                    {
                        double __tlet_arg0 = __map_fusion_gtir_tmp_2;
                        double __tlet_arg1 = __map_fusion_gtir_tmp_4;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_3_plus)
                        __tlet_result = (__tlet_arg0 + __tlet_arg1);
                        ///////////////////

                        __map_fusion_gtir_tmp_6 = __tlet_result;
                    }
                    {
                        double __tlet_arg0 = __map_fusion_gtir_tmp_6;
                        double __tlet_arg1 = __map_fusion_gtir_tmp_8;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_5_plus)
                        __tlet_result = (__tlet_arg0 + __tlet_arg1);
                        ///////////////////

                        __map_fusion_gtir_tmp_10 = __tlet_result;
                    }
                    {
                        double __tlet_arg0 = __map_fusion_gtir_tmp_10;
                        double __tlet_arg1 = __map_fusion_gtir_tmp_12;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_7_plus)
                        __tlet_result = (__tlet_arg0 + __tlet_arg1);
                        ///////////////////

                        __map_fusion_gtir_tmp_14 = __tlet_result;
                    }
                    {
                        double __tlet_arg0 = __map_fusion_gtir_tmp_14;
                        double __tlet_arg1 = __map_fusion_gtir_tmp_17;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_10_minus)
                        __tlet_result = (__tlet_arg0 - __tlet_arg1);
                        ///////////////////

                        __map_fusion_gtir_tmp_19 = __tlet_result;
                    }
                    {
                        double __tlet_arg1 = __map_fusion_gtir_tmp_19;
                        double __tlet_arg0 = gtir_tmp_0_0;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_11_multiplies)
                        __tlet_result = (__tlet_arg0 * __tlet_arg1);
                        ///////////////////

                        __map_fusion_gtir_tmp_21 = __tlet_result;
                    }
                    {
                        double __tlet_arg0 = v[((__v_stride0 * i_I_gtx_horizontal) + (__v_stride1 * i_J_gtx_horizontal))];
                        double __tlet_arg1 = __map_fusion_gtir_tmp_21;
                        double __tlet_result;

                        ///////////////////
                        // Tasklet code (tlet_12_plus)
                        __tlet_result = (__tlet_arg0 + __tlet_arg1);
                        ///////////////////

                        __gtx_double_write_remover_inner_inner_distribution_node = __tlet_result;
                    }
                    {
                        double _cpy_in = __gtx_double_write_remover_inner_inner_distribution_node;
                        double _cpy_out;

                        ///////////////////
                        // Tasklet code (copy___gtx_double_write_remover_inner_inner_distribution_node_to_u)
                        _cpy_out = _cpy_in;
                        ///////////////////

                        u[((__u_stride0 * i_I_gtx_horizontal) + (__u_stride1 * i_J_gtx_horizontal))] = _cpy_out;
                    }
                }
            }
        }

    }
}

DACE_EXPORTED void __program_two_steps_867dfecae099c8b6(two_steps_867dfecae099c8b6_state_t *__state, int * __restrict__ __halo_comm_1, int * __restrict__ __halo_peers_1, double * __restrict__ u, double * __restrict__ v, int __u_size0, int __u_size1, int __u_stride0, int __u_stride1, int __v_size0, int __v_size1, int __v_stride0, int __v_stride1, int i0, int i1, int j0, int j1)
{
    __program_two_steps_867dfecae099c8b6_internal(__state, __halo_comm_1, __halo_peers_1, u, v, __u_size0, __u_size1, __u_stride0, __u_stride1, __v_size0, __v_size1, __v_stride0, __v_stride1, i0, i1, j0, j1);
}

DACE_EXPORTED two_steps_867dfecae099c8b6_state_t *__dace_init_two_steps_867dfecae099c8b6(int __u_size0, int __u_size1, int __u_stride0, int __u_stride1, int __v_size0, int __v_size1, int __v_stride0, int __v_stride1)
{

    int __result = 0;
    two_steps_867dfecae099c8b6_state_t *__state = new two_steps_867dfecae099c8b6_state_t();

    if (__result) {
        delete __state;
        return nullptr;
    }
    {  // Environment: MPI
        int t; MPI_Initialized(&t);  if (!t) MPI_Init(NULL, NULL);
    }
    __state->__0_sbuf_0_0 = new (std::align_val_t(64)) double [1];
    __state->__0_sbuf_0_1 = new (std::align_val_t(64)) double [(__u_size1 - 2)];
    __state->__0_sbuf_0_2 = new (std::align_val_t(64)) double [1];
    __state->__0_sbuf_0_3 = new (std::align_val_t(64)) double [(__u_size0 - 2)];
    __state->__0_sbuf_0_4 = new (std::align_val_t(64)) double [(__u_size0 - 2)];
    __state->__0_sbuf_0_5 = new (std::align_val_t(64)) double [1];
    __state->__0_sbuf_0_6 = new (std::align_val_t(64)) double [(__u_size1 - 2)];
    __state->__0_sbuf_0_7 = new (std::align_val_t(64)) double [1];
    __state->__0_rbuf_0_0 = new (std::align_val_t(64)) double [1];
    __state->__0_rbuf_0_1 = new (std::align_val_t(64)) double [(__u_size1 - 2)];
    __state->__0_rbuf_0_2 = new (std::align_val_t(64)) double [1];
    __state->__0_rbuf_0_3 = new (std::align_val_t(64)) double [(__u_size0 - 2)];
    __state->__0_rbuf_0_4 = new (std::align_val_t(64)) double [(__u_size0 - 2)];
    __state->__0_rbuf_0_5 = new (std::align_val_t(64)) double [1];
    __state->__0_rbuf_0_6 = new (std::align_val_t(64)) double [(__u_size1 - 2)];
    __state->__0_rbuf_0_7 = new (std::align_val_t(64)) double [1];
    __state->__0_halo8_exchange_sbuf_0_0 = new (std::align_val_t(64)) double [1];
    __state->__0_halo8_exchange_sbuf_0_1 = new (std::align_val_t(64)) double [(__v_size1 - 2)];
    __state->__0_halo8_exchange_sbuf_0_2 = new (std::align_val_t(64)) double [1];
    __state->__0_halo8_exchange_sbuf_0_3 = new (std::align_val_t(64)) double [(__v_size0 - 2)];
    __state->__0_halo8_exchange_sbuf_0_4 = new (std::align_val_t(64)) double [(__v_size0 - 2)];
    __state->__0_halo8_exchange_sbuf_0_5 = new (std::align_val_t(64)) double [1];
    __state->__0_halo8_exchange_sbuf_0_6 = new (std::align_val_t(64)) double [(__v_size1 - 2)];
    __state->__0_halo8_exchange_sbuf_0_7 = new (std::align_val_t(64)) double [1];
    __state->__0_halo8_exchange_rbuf_0_0 = new (std::align_val_t(64)) double [1];
    __state->__0_halo8_exchange_rbuf_0_1 = new (std::align_val_t(64)) double [(__v_size1 - 2)];
    __state->__0_halo8_exchange_rbuf_0_2 = new (std::align_val_t(64)) double [1];
    __state->__0_halo8_exchange_rbuf_0_3 = new (std::align_val_t(64)) double [(__v_size0 - 2)];
    __state->__0_halo8_exchange_rbuf_0_4 = new (std::align_val_t(64)) double [(__v_size0 - 2)];
    __state->__0_halo8_exchange_rbuf_0_5 = new (std::align_val_t(64)) double [1];
    __state->__0_halo8_exchange_rbuf_0_6 = new (std::align_val_t(64)) double [(__v_size1 - 2)];
    __state->__0_halo8_exchange_rbuf_0_7 = new (std::align_val_t(64)) double [1];

    if (__result) {
        delete __state;
        return nullptr;
    }

    return __state;
}

DACE_EXPORTED int __dace_exit_two_steps_867dfecae099c8b6(two_steps_867dfecae099c8b6_state_t *__state)
{

    int __err = 0;
    {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized && __state->halo0_ready)
        for (int n = 0; n < 16; ++n) MPI_Request_free(&__state->halo0_requests[n]);
    }
    {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized && __state->halo8_ready)
        for (int n = 0; n < 16; ++n) MPI_Request_free(&__state->halo8_requests[n]);
    }
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_0_0, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_0_1, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_0_2, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_0_3, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_0_4, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_0_5, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_0_6, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_0_7, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_0_0, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_0_1, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_0_2, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_0_3, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_0_4, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_0_5, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_0_6, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_0_7, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_sbuf_0_0, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_sbuf_0_1, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_sbuf_0_2, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_sbuf_0_3, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_sbuf_0_4, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_sbuf_0_5, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_sbuf_0_6, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_sbuf_0_7, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_rbuf_0_0, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_rbuf_0_1, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_rbuf_0_2, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_rbuf_0_3, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_rbuf_0_4, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_rbuf_0_5, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_rbuf_0_6, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<double>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_halo8_exchange_rbuf_0_7, std::align_val_t(64));
    {  // Environment: MPI
        // MPI_Finalize();
    }
    delete __state;
    return __err;
}
