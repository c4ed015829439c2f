// Eigen's sgemm built for AVX2 + FMA (eigen_sgemm-inl.h; the flags are set in
// CMakeLists.txt, which defines FP4EMU_EIGEN_X86_TARGETS where it sets them).
#if FP4EMU_EIGEN_X86_TARGETS
#define Eigen fp4emu_eigen_avx2
#define FP4EMU_EIGEN_FN eigen_sgemm_avx2
#include "eigen_sgemm-inl.h"
#endif
