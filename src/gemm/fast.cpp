// The `fast` model: an sgemm on the fp32 operands. The library chooses the
// summation order (blocking, SIMD width, threads), so the result is not
// bit-reproducible across builds, machines or shapes; it is for studies only.
//
// Which sgemm (docs/gemm.md "fast"): Eigen compiled for the best x86 target
// the SIMD kernels dispatch to (AVX-512 or AVX2 + FMA, else the baseline ISA)
// for products of up to kEigenMaxWork multiply-adds, OpenBLAS above that when
// the build found it (Debian's libopenblas picks its kernels for the running
// CPU at load time). bench/gemm_bench.cpp measured Eigen the faster at 1024³
// and OpenBLAS at 512×4096×11008 and 4096³, on AVX2 and AVX-512 machines.
#include <climits>

#include "hwy/targets.h"
#include "models.hpp"

#if FP4EMU_HAVE_OPENBLAS
#include <cblas.h>
#endif

#define FP4EMU_EIGEN_FN eigen_sgemm_baseline
#include "eigen_sgemm-inl.h"

namespace fp4emu::gemm_detail {

#if FP4EMU_EIGEN_X86_TARGETS
void eigen_sgemm_avx2(const float* a, const float* bt, int64_t m, int64_t n, int64_t k, int threads, float* c,
                      int64_t ldc);
void eigen_sgemm_avx512(const float* a, const float* bt, int64_t m, int64_t n, int64_t k, int threads, float* c,
                        int64_t ldc);
#endif

namespace {

// 2^31 multiply-adds (1290³). The measured crossover: docs/gemm.md "fast".
constexpr double kEigenMaxWork = 2147483648.0;

#if FP4EMU_HAVE_OPENBLAS
void openblas_sgemm(const float* a, const float* bt, int64_t m, int64_t n, int64_t k, int threads, float* c,
                    int64_t ldc) {
  // C = A·Bᵀ with A m×k and Bᵀ n×k, both row-major (K-major). OpenBLAS's
  // thread count is process-wide too: set it, then restore it.
  const int before = openblas_get_num_threads();
  openblas_set_num_threads(threads);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, a, static_cast<int>(k), bt, static_cast<int>(k), 0.0f, c, static_cast<int>(ldc));
  openblas_set_num_threads(before);
}
#endif

}  // namespace

FastSgemm openblas_sgemm_if_built() {
#if FP4EMU_HAVE_OPENBLAS
  return {openblas_sgemm, "OpenBLAS", true};
#else
  return {nullptr, "OpenBLAS", true};
#endif
}

// hwy::SupportedTargets also follows simd::force_target: a forced AVX2 run
// gets Eigen's AVX2.
FastSgemm eigen_sgemm_for_cpu() {
#if FP4EMU_EIGEN_X86_TARGETS
  // Highway's x86 bits below HWY_AVX3 are its successors (AVX3_DL, ...),
  // each with AVX-512 F/DQ/VL/BW.
  const int64_t targets = hwy::SupportedTargets();
  if (targets & ((HWY_AVX3 << 1) - 1)) return {eigen_sgemm_avx512, "Eigen (AVX-512)", false};
  if (targets & ((HWY_AVX2 << 1) - 1)) return {eigen_sgemm_avx2, "Eigen (AVX2)", false};
#endif
  return {eigen_sgemm_baseline, "Eigen", false};
}

FastSgemm fast_sgemm(int64_t m, int64_t n, int64_t k) {
#if FP4EMU_HAVE_OPENBLAS
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  // blasint is 32-bit in Debian's build.
  const bool fits = m <= INT_MAX && n <= INT_MAX && k <= INT_MAX;
  if (work > kEigenMaxWork && fits) return openblas_sgemm_if_built();
#endif
  return eigen_sgemm_for_cpu();
}

void fast_gemm(const float* a, const float* b, int64_t m, int64_t n, int64_t k, int threads, float* c,
               int64_t ldc) {
  fast_sgemm(m, n, k).run(a, b, m, n, k, threads, c, ldc);
}

}  // namespace fp4emu::gemm_detail
