// Eigen sgemm built for AVX2 + FMA (eigen_sgemm-inl.h).
#define Eigen fp4emu_bench_eigen_avx2
#define FP4EMU_EIGEN_FN eigen_sgemm_avx2
#include "eigen_sgemm-inl.h"
