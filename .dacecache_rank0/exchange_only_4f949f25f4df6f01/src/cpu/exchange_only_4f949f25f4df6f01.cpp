/* DaCe AUTO-GENERATED FILE. DO NOT MODIFY */
#include <dace/dace.h>
#include "../../include/hash.h"
#include "mpi.h"

struct exchange_only_4f949f25f4df6f01_state_t {
    double * __restrict__ __0_sbuf_0_0;
    double * __restrict__ __0_sbuf_0_1;
    double * __restrict__ __0_sbuf_0_2;
    double * __restrict__ __0_sbuf_0_3;
    double * __restrict__ __0_sbuf_0_4;
    double * __restrict__ __0_sbuf_0_5;
    double * __restrict__ __0_sbuf_0_6;
    double * __restrict__ __0_sbuf_0_7;
    int * __restrict__ __0_sbuf_1_0;
    int * __restrict__ __0_sbuf_1_1;
    int * __restrict__ __0_sbuf_1_2;
    int * __restrict__ __0_sbuf_1_3;
    int * __restrict__ __0_sbuf_1_4;
    int * __restrict__ __0_sbuf_1_5;
    int * __restrict__ __0_sbuf_1_6;
    int * __restrict__ __0_sbuf_1_7;
    float * __restrict__ __0_sbuf_2_0;
    float * __restrict__ __0_sbuf_2_1;
    float * __restrict__ __0_sbuf_2_2;
    float * __restrict__ __0_sbuf_2_3;
    float * __restrict__ __0_sbuf_2_4;
    float * __restrict__ __0_sbuf_2_5;
    float * __restrict__ __0_sbuf_2_6;
    float * __restrict__ __0_sbuf_2_7;
    double * __restrict__ __0_rbuf_0_0;
    double * __restrict__ __0_rbuf_0_1;
    double * __restrict__ __0_rbuf_0_2;
    double * __restrict__ __0_rbuf_0_3;
    double * __restrict__ __0_rbuf_0_4;
    double * __restrict__ __0_rbuf_0_5;
    double * __restrict__ __0_rbuf_0_6;
    double * __restrict__ __0_rbuf_0_7;
    int * __restrict__ __0_rbuf_1_0;
    int * __restrict__ __0_rbuf_1_1;
    int * __restrict__ __0_rbuf_1_2;
    int * __restrict__ __0_rbuf_1_3;
    int * __restrict__ __0_rbuf_1_4;
    int * __restrict__ __0_rbuf_1_5;
    int * __restrict__ __0_rbuf_1_6;
    int * __restrict__ __0_rbuf_1_7;
    float * __restrict__ __0_rbuf_2_0;
    float * __restrict__ __0_rbuf_2_1;
    float * __restrict__ __0_rbuf_2_2;
    float * __restrict__ __0_rbuf_2_3;
    float * __restrict__ __0_rbuf_2_4;
    float * __restrict__ __0_rbuf_2_5;
    float * __restrict__ __0_rbuf_2_6;
    float * __restrict__ __0_rbuf_2_7;
    MPI_Request halo0_requests[48];
    int halo0_ready = 0;
};

void __program_exchange_only_4f949f25f4df6f01_internal(exchange_only_4f949f25f4df6f01_state_t*__state, int * __restrict__ __halo_comm_2, int * __restrict__ __halo_peers_2, double * __restrict__ a, int * __restrict__ b, float * __restrict__ c, int __a_size0, int __a_size1, int __a_stride0, int __a_stride1, int __b_size0, int __b_size1, int __b_size2, int __b_stride0, int __b_stride1, int __b_stride2, int __c_size0, int __c_size1, int __c_size2, int __c_stride0, int __c_stride1, int __c_stride2)
{

    {

        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    {
                        double _in = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_0)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_0[((h0 + h1) - 3)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = 2; h1 < (__a_size1 - 1); h1 += 1) {
                    {
                        double _in = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_1)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_1[((h1 + ((__a_size1 - 3) * (h0 - 1))) - 2)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = (__a_size1 - 3); h1 < (__a_size1 - 1); h1 += 1) {
                    {
                        double _in = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_2)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_2[((((- __a_size1) + (2 * h0)) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__a_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    {
                        double _in = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_3)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_3[((h0 + h1) - 3)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__a_size0 - 2); h0 += 1) {
                for (int h1 = (__a_size1 - 3); h1 < (__a_size1 - 1); h1 += 1) {
                    {
                        double _in = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_4)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_4[((((- __a_size1) + (2 * h0)) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__a_size0 - 3); h0 < (__a_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    {
                        double _in = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_5)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_5[((((- __a_size0) + h0) + h1) + 1)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__a_size0 - 3); h0 < (__a_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < (__a_size1 - 1); h1 += 1) {
                    {
                        double _in = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_6)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_6[((h1 + ((__a_size1 - 3) * (((- __a_size0) + h0) + 3))) - 2)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__a_size0 - 3); h0 < (__a_size0 - 2); h0 += 1) {
                for (int h1 = (__a_size1 - 3); h1 < (__a_size1 - 1); h1 += 1) {
                    {
                        double _in = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        double _out;

                        ///////////////////
                        // Tasklet code (pack_0_7)
                        _out = _in;
                        ///////////////////

                        __state->__0_sbuf_0_7[(((((-2 * __a_size0) - __a_size1) + (2 * h0)) + h1) + 9)] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _out;

                            ///////////////////
                            // Tasklet code (pack_1_0)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_1_0[(((__b_size2 * (h0 - 1)) + (__b_size2 * (h1 - 2))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = 2; h1 < (__b_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _out;

                            ///////////////////
                            // Tasklet code (pack_1_1)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_1_1[((((__b_size2 * (__b_size1 - 3)) * (h0 - 1)) + (__b_size2 * (h1 - 2))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = (__b_size1 - 3); h1 < (__b_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _out;

                            ///////////////////
                            // Tasklet code (pack_1_2)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_1_2[((((2 * __b_size2) * (h0 - 1)) + (__b_size2 * (((- __b_size1) + h1) + 3))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__b_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _out;

                            ///////////////////
                            // Tasklet code (pack_1_3)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_1_3[(((__b_size2 * (h0 - 1)) + (__b_size2 * (h1 - 2))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__b_size0 - 2); h0 += 1) {
                for (int h1 = (__b_size1 - 3); h1 < (__b_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _out;

                            ///////////////////
                            // Tasklet code (pack_1_4)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_1_4[((((2 * __b_size2) * (h0 - 1)) + (__b_size2 * (((- __b_size1) + h1) + 3))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__b_size0 - 3); h0 < (__b_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _out;

                            ///////////////////
                            // Tasklet code (pack_1_5)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_1_5[(((__b_size2 * (h1 - 2)) + (__b_size2 * (((- __b_size0) + h0) + 3))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__b_size0 - 3); h0 < (__b_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < (__b_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _out;

                            ///////////////////
                            // Tasklet code (pack_1_6)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_1_6[((((__b_size2 * (__b_size1 - 3)) * (((- __b_size0) + h0) + 3)) + (__b_size2 * (h1 - 2))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__b_size0 - 3); h0 < (__b_size0 - 2); h0 += 1) {
                for (int h1 = (__b_size1 - 3); h1 < (__b_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _out;

                            ///////////////////
                            // Tasklet code (pack_1_7)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_1_7[((((2 * __b_size2) * (((- __b_size0) + h0) + 3)) + (__b_size2 * (((- __b_size1) + h1) + 3))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            float _out;

                            ///////////////////
                            // Tasklet code (pack_2_0)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_2_0[(((__c_size2 * (h0 - 1)) + (__c_size2 * (h1 - 2))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = 2; h1 < (__c_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            float _out;

                            ///////////////////
                            // Tasklet code (pack_2_1)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_2_1[((((__c_size2 * (__c_size1 - 3)) * (h0 - 1)) + (__c_size2 * (h1 - 2))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < 3; h0 += 1) {
                for (int h1 = (__c_size1 - 3); h1 < (__c_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            float _out;

                            ///////////////////
                            // Tasklet code (pack_2_2)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_2_2[((((2 * __c_size2) * (h0 - 1)) + (__c_size2 * (((- __c_size1) + h1) + 3))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__c_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            float _out;

                            ///////////////////
                            // Tasklet code (pack_2_3)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_2_3[(((__c_size2 * (h0 - 1)) + (__c_size2 * (h1 - 2))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__c_size0 - 2); h0 += 1) {
                for (int h1 = (__c_size1 - 3); h1 < (__c_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            float _out;

                            ///////////////////
                            // Tasklet code (pack_2_4)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_2_4[((((2 * __c_size2) * (h0 - 1)) + (__c_size2 * (((- __c_size1) + h1) + 3))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__c_size0 - 3); h0 < (__c_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < 3; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            float _out;

                            ///////////////////
                            // Tasklet code (pack_2_5)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_2_5[(((__c_size2 * (h1 - 2)) + (__c_size2 * (((- __c_size0) + h0) + 3))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__c_size0 - 3); h0 < (__c_size0 - 2); h0 += 1) {
                for (int h1 = 2; h1 < (__c_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            float _out;

                            ///////////////////
                            // Tasklet code (pack_2_6)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_2_6[((((__c_size2 * (__c_size1 - 3)) * (((- __c_size0) + h0) + 3)) + (__c_size2 * (h1 - 2))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__c_size0 - 3); h0 < (__c_size0 - 2); h0 += 1) {
                for (int h1 = (__c_size1 - 3); h1 < (__c_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            float _out;

                            ///////////////////
                            // Tasklet code (pack_2_7)
                            _out = _in;
                            ///////////////////

                            __state->__0_sbuf_2_7[((((2 * __c_size2) * (((- __c_size0) + h0) + 3)) + (__c_size2 * (((- __c_size1) + h1) + 3))) + l0)] = _out;
                        }
                    }
                }
            }
        }
        {
            int* _peers = &__halo_peers_2[0];
            int* _comm = &__halo_comm_2[0];
            double* _sbuf_0_0 = &__state->__0_sbuf_0_0[0];
            double* _sbuf_0_1 = &__state->__0_sbuf_0_1[0];
            double* _sbuf_0_2 = &__state->__0_sbuf_0_2[0];
            double* _sbuf_0_3 = &__state->__0_sbuf_0_3[0];
            double* _sbuf_0_4 = &__state->__0_sbuf_0_4[0];
            double* _sbuf_0_5 = &__state->__0_sbuf_0_5[0];
            double* _sbuf_0_6 = &__state->__0_sbuf_0_6[0];
            double* _sbuf_0_7 = &__state->__0_sbuf_0_7[0];
            int* _sbuf_1_0 = &__state->__0_sbuf_1_0[0];
            int* _sbuf_1_1 = &__state->__0_sbuf_1_1[0];
            int* _sbuf_1_2 = &__state->__0_sbuf_1_2[0];
            int* _sbuf_1_3 = &__state->__0_sbuf_1_3[0];
            int* _sbuf_1_4 = &__state->__0_sbuf_1_4[0];
            int* _sbuf_1_5 = &__state->__0_sbuf_1_5[0];
            int* _sbuf_1_6 = &__state->__0_sbuf_1_6[0];
            int* _sbuf_1_7 = &__state->__0_sbuf_1_7[0];
            float* _sbuf_2_0 = &__state->__0_sbuf_2_0[0];
            float* _sbuf_2_1 = &__state->__0_sbuf_2_1[0];
            float* _sbuf_2_2 = &__state->__0_sbuf_2_2[0];
            float* _sbuf_2_3 = &__state->__0_sbuf_2_3[0];
            float* _sbuf_2_4 = &__state->__0_sbuf_2_4[0];
            float* _sbuf_2_5 = &__state->__0_sbuf_2_5[0];
            float* _sbuf_2_6 = &__state->__0_sbuf_2_6[0];
            float* _sbuf_2_7 = &__state->__0_sbuf_2_7[0];
            double* _rbuf_0_0 = __state->__0_rbuf_0_0;
            double* _rbuf_0_1 = __state->__0_rbuf_0_1;
            double* _rbuf_0_2 = __state->__0_rbuf_0_2;
            double* _rbuf_0_3 = __state->__0_rbuf_0_3;
            double* _rbuf_0_4 = __state->__0_rbuf_0_4;
            double* _rbuf_0_5 = __state->__0_rbuf_0_5;
            double* _rbuf_0_6 = __state->__0_rbuf_0_6;
            double* _rbuf_0_7 = __state->__0_rbuf_0_7;
            int* _rbuf_1_0 = __state->__0_rbuf_1_0;
            int* _rbuf_1_1 = __state->__0_rbuf_1_1;
            int* _rbuf_1_2 = __state->__0_rbuf_1_2;
            int* _rbuf_1_3 = __state->__0_rbuf_1_3;
            int* _rbuf_1_4 = __state->__0_rbuf_1_4;
            int* _rbuf_1_5 = __state->__0_rbuf_1_5;
            int* _rbuf_1_6 = __state->__0_rbuf_1_6;
            int* _rbuf_1_7 = __state->__0_rbuf_1_7;
            float* _rbuf_2_0 = __state->__0_rbuf_2_0;
            float* _rbuf_2_1 = __state->__0_rbuf_2_1;
            float* _rbuf_2_2 = __state->__0_rbuf_2_2;
            float* _rbuf_2_3 = __state->__0_rbuf_2_3;
            float* _rbuf_2_4 = __state->__0_rbuf_2_4;
            float* _rbuf_2_5 = __state->__0_rbuf_2_5;
            float* _rbuf_2_6 = __state->__0_rbuf_2_6;
            float* _rbuf_2_7 = __state->__0_rbuf_2_7;

            ///////////////////

            if (!__state->halo0_ready) {
                MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)_comm[0]);
                int n = 0;
                MPI_Recv_init(_rbuf_0_0, 16, MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 21, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_1, (8*__a_size1 - 24), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 18, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_2, 8, MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 15, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_3, (16*__a_size0 - 48), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 12, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_4, (8*__a_size0 - 24), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 9, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_5, 32, MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 6, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_6, (16*__a_size1 - 48), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 3, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_0_7, 16, MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 0, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_1_0, (8*__b_size2), MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 22, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_1_1, (4*__b_size2*(__b_size1 - 3)), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 19, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_1_2, (4*__b_size2), MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 16, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_1_3, (4*__b_size2*(2*__b_size0 - 6)), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 13, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_1_4, (4*__b_size2*(__b_size0 - 3)), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 10, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_1_5, (16*__b_size2), MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 7, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_1_6, (4*__b_size2*(2*__b_size1 - 6)), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 4, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_1_7, (8*__b_size2), MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 1, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_2_0, (8*__c_size2), MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 23, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_2_1, (4*__c_size2*(__c_size1 - 3)), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 20, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_2_2, (4*__c_size2), MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 17, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_2_3, (4*__c_size2*(2*__c_size0 - 6)), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 14, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_2_4, (4*__c_size2*(__c_size0 - 3)), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 11, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_2_5, (16*__c_size2), MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 8, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_2_6, (4*__c_size2*(2*__c_size1 - 6)), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 5, comm, &__state->halo0_requests[n++]);
                MPI_Recv_init(_rbuf_2_7, (8*__c_size2), MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 2, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_0, 16, MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 0, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_1, (16*__a_size1 - 48), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 3, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_2, 32, MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 6, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_3, (8*__a_size0 - 24), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 9, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_4, (16*__a_size0 - 48), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 12, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_5, 8, MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 15, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_6, (8*__a_size1 - 24), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 18, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_0_7, 16, MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 21, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_1_0, (8*__b_size2), MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 1, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_1_1, (4*__b_size2*(2*__b_size1 - 6)), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 4, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_1_2, (16*__b_size2), MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 7, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_1_3, (4*__b_size2*(__b_size0 - 3)), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 10, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_1_4, (4*__b_size2*(2*__b_size0 - 6)), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 13, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_1_5, (4*__b_size2), MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 16, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_1_6, (4*__b_size2*(__b_size1 - 3)), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 19, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_1_7, (8*__b_size2), MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 22, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_2_0, (8*__c_size2), MPI_BYTE, _peers[0] < 0 ? MPI_PROC_NULL : _peers[0], 2, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_2_1, (4*__c_size2*(2*__c_size1 - 6)), MPI_BYTE, _peers[1] < 0 ? MPI_PROC_NULL : _peers[1], 5, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_2_2, (16*__c_size2), MPI_BYTE, _peers[2] < 0 ? MPI_PROC_NULL : _peers[2], 8, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_2_3, (4*__c_size2*(__c_size0 - 3)), MPI_BYTE, _peers[3] < 0 ? MPI_PROC_NULL : _peers[3], 11, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_2_4, (4*__c_size2*(2*__c_size0 - 6)), MPI_BYTE, _peers[4] < 0 ? MPI_PROC_NULL : _peers[4], 14, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_2_5, (4*__c_size2), MPI_BYTE, _peers[5] < 0 ? MPI_PROC_NULL : _peers[5], 17, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_2_6, (4*__c_size2*(__c_size1 - 3)), MPI_BYTE, _peers[6] < 0 ? MPI_PROC_NULL : _peers[6], 20, comm, &__state->halo0_requests[n++]);
                MPI_Send_init(_sbuf_2_7, (8*__c_size2), MPI_BYTE, _peers[7] < 0 ? MPI_PROC_NULL : _peers[7], 23, comm, &__state->halo0_requests[n++]);
                __state->halo0_ready = 1;
            }
            MPI_Startall(48, __state->halo0_requests);
            ///////////////////

        }
        {
            double* _rbuf_0_0_in = &__state->__0_rbuf_0_0[0];
            double* _rbuf_0_1_in = &__state->__0_rbuf_0_1[0];
            double* _rbuf_0_2_in = &__state->__0_rbuf_0_2[0];
            double* _rbuf_0_3_in = &__state->__0_rbuf_0_3[0];
            double* _rbuf_0_4_in = &__state->__0_rbuf_0_4[0];
            double* _rbuf_0_5_in = &__state->__0_rbuf_0_5[0];
            double* _rbuf_0_6_in = &__state->__0_rbuf_0_6[0];
            double* _rbuf_0_7_in = &__state->__0_rbuf_0_7[0];
            int* _rbuf_1_0_in = &__state->__0_rbuf_1_0[0];
            int* _rbuf_1_1_in = &__state->__0_rbuf_1_1[0];
            int* _rbuf_1_2_in = &__state->__0_rbuf_1_2[0];
            int* _rbuf_1_3_in = &__state->__0_rbuf_1_3[0];
            int* _rbuf_1_4_in = &__state->__0_rbuf_1_4[0];
            int* _rbuf_1_5_in = &__state->__0_rbuf_1_5[0];
            int* _rbuf_1_6_in = &__state->__0_rbuf_1_6[0];
            int* _rbuf_1_7_in = &__state->__0_rbuf_1_7[0];
            float* _rbuf_2_0_in = &__state->__0_rbuf_2_0[0];
            float* _rbuf_2_1_in = &__state->__0_rbuf_2_1[0];
            float* _rbuf_2_2_in = &__state->__0_rbuf_2_2[0];
            float* _rbuf_2_3_in = &__state->__0_rbuf_2_3[0];
            float* _rbuf_2_4_in = &__state->__0_rbuf_2_4[0];
            float* _rbuf_2_5_in = &__state->__0_rbuf_2_5[0];
            float* _rbuf_2_6_in = &__state->__0_rbuf_2_6[0];
            float* _rbuf_2_7_in = &__state->__0_rbuf_2_7[0];
            double* _rbuf_0_0 = __state->__0_rbuf_0_0;
            double* _rbuf_0_1 = __state->__0_rbuf_0_1;
            double* _rbuf_0_2 = __state->__0_rbuf_0_2;
            double* _rbuf_0_3 = __state->__0_rbuf_0_3;
            double* _rbuf_0_4 = __state->__0_rbuf_0_4;
            double* _rbuf_0_5 = __state->__0_rbuf_0_5;
            double* _rbuf_0_6 = __state->__0_rbuf_0_6;
            double* _rbuf_0_7 = __state->__0_rbuf_0_7;
            int* _rbuf_1_0 = __state->__0_rbuf_1_0;
            int* _rbuf_1_1 = __state->__0_rbuf_1_1;
            int* _rbuf_1_2 = __state->__0_rbuf_1_2;
            int* _rbuf_1_3 = __state->__0_rbuf_1_3;
            int* _rbuf_1_4 = __state->__0_rbuf_1_4;
            int* _rbuf_1_5 = __state->__0_rbuf_1_5;
            int* _rbuf_1_6 = __state->__0_rbuf_1_6;
            int* _rbuf_1_7 = __state->__0_rbuf_1_7;
            float* _rbuf_2_0 = __state->__0_rbuf_2_0;
            float* _rbuf_2_1 = __state->__0_rbuf_2_1;
            float* _rbuf_2_2 = __state->__0_rbuf_2_2;
            float* _rbuf_2_3 = __state->__0_rbuf_2_3;
            float* _rbuf_2_4 = __state->__0_rbuf_2_4;
            float* _rbuf_2_5 = __state->__0_rbuf_2_5;
            float* _rbuf_2_6 = __state->__0_rbuf_2_6;
            float* _rbuf_2_7 = __state->__0_rbuf_2_7;

            ///////////////////
            MPI_Waitall(48, __state->halo0_requests, MPI_STATUSES_IGNORE);
            ///////////////////

        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_0[((2 * h0) + h1)];
                        double _old = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        int _peer = __halo_peers_2[0];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_0)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        a[((__a_stride0 * h0) + (__a_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 2; h1 < (__a_size1 - 1); h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_1[(((h0 * (__a_size1 - 3)) + h1) - 2)];
                        double _old = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        int _peer = __halo_peers_2[1];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_1)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        a[((__a_stride0 * h0) + (__a_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = (__a_size1 - 1); h1 < __a_size1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_2[((((- __a_size1) + h0) + h1) + 1)];
                        double _old = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        int _peer = __halo_peers_2[2];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_2)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        a[((__a_stride0 * h0) + (__a_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__a_size0 - 2); h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_3[(((2 * h0) + h1) - 2)];
                        double _old = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        int _peer = __halo_peers_2[3];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_3)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        a[((__a_stride0 * h0) + (__a_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__a_size0 - 2); h0 += 1) {
                for (int h1 = (__a_size1 - 1); h1 < __a_size1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_4[(((- __a_size1) + h0) + h1)];
                        double _old = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        int _peer = __halo_peers_2[4];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_4)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        a[((__a_stride0 * h0) + (__a_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__a_size0 - 2); h0 < __a_size0; h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_5[((((-2 * __a_size0) + (2 * h0)) + h1) + 4)];
                        double _old = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        int _peer = __halo_peers_2[5];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_5)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        a[((__a_stride0 * h0) + (__a_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__a_size0 - 2); h0 < __a_size0; h0 += 1) {
                for (int h1 = 2; h1 < (__a_size1 - 1); h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_6[((h1 + ((__a_size1 - 3) * (((- __a_size0) + h0) + 2))) - 2)];
                        double _old = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        int _peer = __halo_peers_2[6];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_6)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        a[((__a_stride0 * h0) + (__a_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__a_size0 - 2); h0 < __a_size0; h0 += 1) {
                for (int h1 = (__a_size1 - 1); h1 < __a_size1; h1 += 1) {
                    {
                        double _in = __state->__0_rbuf_0_7[(((((- __a_size0) - __a_size1) + h0) + h1) + 3)];
                        double _old = a[((__a_stride0 * h0) + (__a_stride1 * h1))];
                        int _peer = __halo_peers_2[7];
                        double _out;

                        ///////////////////
                        // Tasklet code (unpack_0_7)
                        _out = ((_peer >= 0) ? _in : _old);
                        ///////////////////

                        a[((__a_stride0 * h0) + (__a_stride1 * h1))] = _out;
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = __state->__0_rbuf_1_0[((((2 * __b_size2) * h0) + (__b_size2 * h1)) + l0)];
                            int _old = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _peer = __halo_peers_2[0];
                            int _out;

                            ///////////////////
                            // Tasklet code (unpack_1_0)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 2; h1 < (__b_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = __state->__0_rbuf_1_1[((((__b_size2 * h0) * (__b_size1 - 3)) + (__b_size2 * (h1 - 2))) + l0)];
                            int _old = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _peer = __halo_peers_2[1];
                            int _out;

                            ///////////////////
                            // Tasklet code (unpack_1_1)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = (__b_size1 - 1); h1 < __b_size1; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = __state->__0_rbuf_1_2[(((__b_size2 * h0) + (__b_size2 * (((- __b_size1) + h1) + 1))) + l0)];
                            int _old = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _peer = __halo_peers_2[2];
                            int _out;

                            ///////////////////
                            // Tasklet code (unpack_1_2)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__b_size0 - 2); h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = __state->__0_rbuf_1_3[(((__b_size2 * h1) + ((2 * __b_size2) * (h0 - 1))) + l0)];
                            int _old = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _peer = __halo_peers_2[3];
                            int _out;

                            ///////////////////
                            // Tasklet code (unpack_1_3)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__b_size0 - 2); h0 += 1) {
                for (int h1 = (__b_size1 - 1); h1 < __b_size1; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = __state->__0_rbuf_1_4[(((__b_size2 * (h0 - 1)) + (__b_size2 * (((- __b_size1) + h1) + 1))) + l0)];
                            int _old = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _peer = __halo_peers_2[4];
                            int _out;

                            ///////////////////
                            // Tasklet code (unpack_1_4)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__b_size0 - 2); h0 < __b_size0; h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = __state->__0_rbuf_1_5[(((__b_size2 * h1) + ((2 * __b_size2) * (((- __b_size0) + h0) + 2))) + l0)];
                            int _old = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _peer = __halo_peers_2[5];
                            int _out;

                            ///////////////////
                            // Tasklet code (unpack_1_5)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__b_size0 - 2); h0 < __b_size0; h0 += 1) {
                for (int h1 = 2; h1 < (__b_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = __state->__0_rbuf_1_6[((((__b_size2 * (__b_size1 - 3)) * (((- __b_size0) + h0) + 2)) + (__b_size2 * (h1 - 2))) + l0)];
                            int _old = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _peer = __halo_peers_2[6];
                            int _out;

                            ///////////////////
                            // Tasklet code (unpack_1_6)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__b_size0 - 2); h0 < __b_size0; h0 += 1) {
                for (int h1 = (__b_size1 - 1); h1 < __b_size1; h1 += 1) {
                    for (int l0 = 0; l0 < __b_size2; l0 += 1) {
                        {
                            int _in = __state->__0_rbuf_1_7[(((__b_size2 * (((- __b_size0) + h0) + 2)) + (__b_size2 * (((- __b_size1) + h1) + 1))) + l0)];
                            int _old = b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))];
                            int _peer = __halo_peers_2[7];
                            int _out;

                            ///////////////////
                            // Tasklet code (unpack_1_7)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            b[(((__b_stride0 * h0) + (__b_stride1 * h1)) + (__b_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = __state->__0_rbuf_2_0[((((2 * __c_size2) * h0) + (__c_size2 * h1)) + l0)];
                            float _old = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            int _peer = __halo_peers_2[0];
                            float _out;

                            ///////////////////
                            // Tasklet code (unpack_2_0)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = 2; h1 < (__c_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = __state->__0_rbuf_2_1[((((__c_size2 * h0) * (__c_size1 - 3)) + (__c_size2 * (h1 - 2))) + l0)];
                            float _old = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            int _peer = __halo_peers_2[1];
                            float _out;

                            ///////////////////
                            // Tasklet code (unpack_2_1)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 0; h0 < 1; h0 += 1) {
                for (int h1 = (__c_size1 - 1); h1 < __c_size1; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = __state->__0_rbuf_2_2[(((__c_size2 * h0) + (__c_size2 * (((- __c_size1) + h1) + 1))) + l0)];
                            float _old = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            int _peer = __halo_peers_2[2];
                            float _out;

                            ///////////////////
                            // Tasklet code (unpack_2_2)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__c_size0 - 2); h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = __state->__0_rbuf_2_3[(((__c_size2 * h1) + ((2 * __c_size2) * (h0 - 1))) + l0)];
                            float _old = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            int _peer = __halo_peers_2[3];
                            float _out;

                            ///////////////////
                            // Tasklet code (unpack_2_3)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = 1; h0 < (__c_size0 - 2); h0 += 1) {
                for (int h1 = (__c_size1 - 1); h1 < __c_size1; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = __state->__0_rbuf_2_4[(((__c_size2 * (h0 - 1)) + (__c_size2 * (((- __c_size1) + h1) + 1))) + l0)];
                            float _old = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            int _peer = __halo_peers_2[4];
                            float _out;

                            ///////////////////
                            // Tasklet code (unpack_2_4)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__c_size0 - 2); h0 < __c_size0; h0 += 1) {
                for (int h1 = 0; h1 < 2; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = __state->__0_rbuf_2_5[(((__c_size2 * h1) + ((2 * __c_size2) * (((- __c_size0) + h0) + 2))) + l0)];
                            float _old = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            int _peer = __halo_peers_2[5];
                            float _out;

                            ///////////////////
                            // Tasklet code (unpack_2_5)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__c_size0 - 2); h0 < __c_size0; h0 += 1) {
                for (int h1 = 2; h1 < (__c_size1 - 1); h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = __state->__0_rbuf_2_6[((((__c_size2 * (__c_size1 - 3)) * (((- __c_size0) + h0) + 2)) + (__c_size2 * (h1 - 2))) + l0)];
                            float _old = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            int _peer = __halo_peers_2[6];
                            float _out;

                            ///////////////////
                            // Tasklet code (unpack_2_6)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }
        {
            #pragma omp parallel for
            for (int h0 = (__c_size0 - 2); h0 < __c_size0; h0 += 1) {
                for (int h1 = (__c_size1 - 1); h1 < __c_size1; h1 += 1) {
                    for (int l0 = 0; l0 < __c_size2; l0 += 1) {
                        {
                            float _in = __state->__0_rbuf_2_7[(((__c_size2 * (((- __c_size0) + h0) + 2)) + (__c_size2 * (((- __c_size1) + h1) + 1))) + l0)];
                            float _old = c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))];
                            int _peer = __halo_peers_2[7];
                            float _out;

                            ///////////////////
                            // Tasklet code (unpack_2_7)
                            _out = ((_peer >= 0) ? _in : _old);
                            ///////////////////

                            c[(((__c_stride0 * h0) + (__c_stride1 * h1)) + (__c_stride2 * l0))] = _out;
                        }
                    }
                }
            }
        }

    }
}

DACE_EXPORTED void __program_exchange_only_4f949f25f4df6f01(exchange_only_4f949f25f4df6f01_state_t *__state, int * __restrict__ __halo_comm_2, int * __restrict__ __halo_peers_2, double * __restrict__ a, int * __restrict__ b, float * __restrict__ c, int __a_size0, int __a_size1, int __a_stride0, int __a_stride1, int __b_size0, int __b_size1, int __b_size2, int __b_stride0, int __b_stride1, int __b_stride2, int __c_size0, int __c_size1, int __c_size2, int __c_stride0, int __c_stride1, int __c_stride2)
{
    __program_exchange_only_4f949f25f4df6f01_internal(__state, __halo_comm_2, __halo_peers_2, a, b, c, __a_size0, __a_size1, __a_stride0, __a_stride1, __b_size0, __b_size1, __b_size2, __b_stride0, __b_stride1, __b_stride2, __c_size0, __c_size1, __c_size2, __c_stride0, __c_stride1, __c_stride2);
}

DACE_EXPORTED exchange_only_4f949f25f4df6f01_state_t *__dace_init_exchange_only_4f949f25f4df6f01(int __a_size0, int __a_size1, int __a_stride0, int __a_stride1, int __b_size0, int __b_size1, int __b_size2, int __b_stride0, int __b_stride1, int __b_stride2, int __c_size0, int __c_size1, int __c_size2, int __c_stride0, int __c_stride1, int __c_stride2)
{

    int __result = 0;
    exchange_only_4f949f25f4df6f01_state_t *__state = new exchange_only_4f949f25f4df6f01_state_t();

    if (__result) {
        delete __state;
        return nullptr;
    }
    {  // Environment: MPI
        int t; MPI_Initialized(&t);  if (!t) MPI_Init(NULL, NULL);
    }
    __state->__0_sbuf_0_0 = new (std::align_val_t(64)) double [2];
    __state->__0_sbuf_0_1 = new (std::align_val_t(64)) double [((2 * __a_size1) - 6)];
    __state->__0_sbuf_0_2 = new (std::align_val_t(64)) double [4];
    __state->__0_sbuf_0_3 = new (std::align_val_t(64)) double [(__a_size0 - 3)];
    __state->__0_sbuf_0_4 = new (std::align_val_t(64)) double [((2 * __a_size0) - 6)];
    __state->__0_sbuf_0_5 = new (std::align_val_t(64)) double [1];
    __state->__0_sbuf_0_6 = new (std::align_val_t(64)) double [(__a_size1 - 3)];
    __state->__0_sbuf_0_7 = new (std::align_val_t(64)) double [2];
    __state->__0_sbuf_1_0 = new (std::align_val_t(64)) int [(2 * __b_size2)];
    __state->__0_sbuf_1_1 = new (std::align_val_t(64)) int [(__b_size2 * ((2 * __b_size1) - 6))];
    __state->__0_sbuf_1_2 = new (std::align_val_t(64)) int [(4 * __b_size2)];
    __state->__0_sbuf_1_3 = new (std::align_val_t(64)) int [(__b_size2 * (__b_size0 - 3))];
    __state->__0_sbuf_1_4 = new (std::align_val_t(64)) int [(__b_size2 * ((2 * __b_size0) - 6))];
    __state->__0_sbuf_1_5 = new (std::align_val_t(64)) int [__b_size2];
    __state->__0_sbuf_1_6 = new (std::align_val_t(64)) int [(__b_size2 * (__b_size1 - 3))];
    __state->__0_sbuf_1_7 = new (std::align_val_t(64)) int [(2 * __b_size2)];
    __state->__0_sbuf_2_0 = new (std::align_val_t(64)) float [(2 * __c_size2)];
    __state->__0_sbuf_2_1 = new (std::align_val_t(64)) float [(__c_size2 * ((2 * __c_size1) - 6))];
    __state->__0_sbuf_2_2 = new (std::align_val_t(64)) float [(4 * __c_size2)];
    __state->__0_sbuf_2_3 = new (std::align_val_t(64)) float [(__c_size2 * (__c_size0 - 3))];
    __state->__0_sbuf_2_4 = new (std::align_val_t(64)) float [(__c_size2 * ((2 * __c_size0) - 6))];
    __state->__0_sbuf_2_5 = new (std::align_val_t(64)) float [__c_size2];
    __state->__0_sbuf_2_6 = new (std::align_val_t(64)) float [(__c_size2 * (__c_size1 - 3))];
    __state->__0_sbuf_2_7 = new (std::align_val_t(64)) float [(2 * __c_size2)];
    __state->__0_rbuf_0_0 = new (std::align_val_t(64)) double [2];
    __state->__0_rbuf_0_1 = new (std::align_val_t(64)) double [(__a_size1 - 3)];
    __state->__0_rbuf_0_2 = new (std::align_val_t(64)) double [1];
    __state->__0_rbuf_0_3 = new (std::align_val_t(64)) double [((2 * __a_size0) - 6)];
    __state->__0_rbuf_0_4 = new (std::align_val_t(64)) double [(__a_size0 - 3)];
    __state->__0_rbuf_0_5 = new (std::align_val_t(64)) double [4];
    __state->__0_rbuf_0_6 = new (std::align_val_t(64)) double [((2 * __a_size1) - 6)];
    __state->__0_rbuf_0_7 = new (std::align_val_t(64)) double [2];
    __state->__0_rbuf_1_0 = new (std::align_val_t(64)) int [(2 * __b_size2)];
    __state->__0_rbuf_1_1 = new (std::align_val_t(64)) int [(__b_size2 * (__b_size1 - 3))];
    __state->__0_rbuf_1_2 = new (std::align_val_t(64)) int [__b_size2];
    __state->__0_rbuf_1_3 = new (std::align_val_t(64)) int [(__b_size2 * ((2 * __b_size0) - 6))];
    __state->__0_rbuf_1_4 = new (std::align_val_t(64)) int [(__b_size2 * (__b_size0 - 3))];
    __state->__0_rbuf_1_5 = new (std::align_val_t(64)) int [(4 * __b_size2)];
    __state->__0_rbuf_1_6 = new (std::align_val_t(64)) int [(__b_size2 * ((2 * __b_size1) - 6))];
    __state->__0_rbuf_1_7 = new (std::align_val_t(64)) int [(2 * __b_size2)];
    __state->__0_rbuf_2_0 = new (std::align_val_t(64)) float [(2 * __c_size2)];
    __state->__0_rbuf_2_1 = new (std::align_val_t(64)) float [(__c_size2 * (__c_size1 - 3))];
    __state->__0_rbuf_2_2 = new (std::align_val_t(64)) float [__c_size2];
    __state->__0_rbuf_2_3 = new (std::align_val_t(64)) float [(__c_size2 * ((2 * __c_size0) - 6))];
    __state->__0_rbuf_2_4 = new (std::align_val_t(64)) float [(__c_size2 * (__c_size0 - 3))];
    __state->__0_rbuf_2_5 = new (std::align_val_t(64)) float [(4 * __c_size2)];
    __state->__0_rbuf_2_6 = new (std::align_val_t(64)) float [(__c_size2 * ((2 * __c_size1) - 6))];
    __state->__0_rbuf_2_7 = new (std::align_val_t(64)) float [(2 * __c_size2)];

    if (__result) {
        delete __state;
        return nullptr;
    }

    return __state;
}

DACE_EXPORTED int __dace_exit_exchange_only_4f949f25f4df6f01(exchange_only_4f949f25f4df6f01_state_t *__state)
{

    int __err = 0;
    {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized && __state->halo0_ready)
        for (int n = 0; n < 48; ++n) MPI_Request_free(&__state->halo0_requests[n]);
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
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_1_0, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_1_1, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_1_2, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_1_3, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_1_4, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_1_5, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_1_6, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_1_7, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_2_0, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_2_1, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_2_2, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_2_3, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_2_4, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_2_5, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_2_6, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_sbuf_2_7, std::align_val_t(64));
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
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_1_0, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_1_1, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_1_2, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_1_3, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_1_4, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_1_5, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_1_6, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<int>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_1_7, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_2_0, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_2_1, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_2_2, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_2_3, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_2_4, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_2_5, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_2_6, std::align_val_t(64));
    static_assert(std::is_trivially_destructible<float>::value, "aligned heap deallocation skips destructors");
    ::operator delete[](__state->__0_rbuf_2_7, std::align_val_t(64));
    {  // Environment: MPI
        // MPI_Finalize();
    }
    delete __state;
    return __err;
}
