// Eigen sgemm built for AVX-512 (F, DQ, VL, BW) + FMA (eigen_sgemm-inl.h).
#define Eigen fp4emu_bench_eigen_avx512
#define FP4EMU_EIGEN_FN eigen_sgemm_avx512
#include "eigen_sgemm-inl.h"
