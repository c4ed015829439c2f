// The `fast` model: an sgemm on the fp32 operands. The library chooses the
// summation order (blocking, SIMD width, threads), so the result is not
// bit-reproducible across builds or machines; it is for studies only.
//
// OpenBLAS when the build found it (Debian's libopenblas picks its kernels for
// the running CPU at load time), else Eigen as this file is compiled (the
// project's baseline ISA). bench/gemm_bench.cpp measures both against Eigen
// compiled for AVX2 and AVX-512: OpenBLAS is the faster (docs/gemm.md "fast").
#include <climits>

#include <Eigen/Core>

#include "models.hpp"

#if FP4EMU_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace fp4emu::gemm_detail {
namespace {

void eigen_sgemm(const float* a, const float* b, int64_t m, int64_t n, int64_t k, int threads, float* c,
                 int64_t ldc) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  const Eigen::Map<const RowMajor> am(a, m, k);
  const Eigen::Map<const ColMajor> bm(b, k, n);  // b holds the columns of B, each along k
  Eigen::Map<RowMajor, 0, Eigen::OuterStride<>> cm(c, m, n, Eigen::OuterStride<>(ldc));
  // Eigen's thread count is process-wide: set it for this product, then
  // return it to Eigen's default (OpenMP's).
  Eigen::setNbThreads(threads);
  cm.noalias() = am * bm;
  Eigen::setNbThreads(0);
}

}  // namespace

const char* fast_gemm_library() {
#if FP4EMU_HAVE_OPENBLAS
  return "OpenBLAS";
#else
  return "Eigen";
#endif
}

bool fast_gemm_has_own_threads() {
#if FP4EMU_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

void fast_gemm(const float* a, const float* b, int64_t m, int64_t n, int64_t k, int threads, float* c,
               int64_t ldc) {
#if FP4EMU_HAVE_OPENBLAS
  if (m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && ldc <= INT_MAX) {  // blasint is 32-bit in Debian's build
    // C = A·Bᵀ with A m×k and b = Bᵀ n×k, both row-major (K-major). OpenBLAS's
    // thread count is process-wide too: set it, then restore it.
    const int before = openblas_get_num_threads();
    openblas_set_num_threads(threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, a, static_cast<int>(k), b, static_cast<int>(k), 0.0f, c,
                static_cast<int>(ldc));
    openblas_set_num_threads(before);
    return;
  }
#endif
  eigen_sgemm(a, b, m, n, k, threads, c, ldc);
}

}  // namespace fp4emu::gemm_detail
