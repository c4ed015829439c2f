// Eigen's sgemm compiled for one x86 target (the `fast` model's Eigen,
// fast.cpp). Included by eigen_sgemm_avx2.cpp and eigen_sgemm_avx512.cpp, each
// built with its target's flags (CMakeLists.txt), and by fast.cpp for the
// baseline ISA, after defining FP4EMU_EIGEN_FN. The per-target files rename
// Eigen's namespace first (#define Eigen ...), so the inline template code of
// each target has its own symbols: the linker cannot merge an AVX-512
// instantiation into the baseline build's or the other way round.
#include <Eigen/Core>
#include <cstdint>

namespace fp4emu::gemm_detail {

// c (rows ldc apart) = a · btᵀ: a m×k and bt n×k, row-major (the columns of B, each along k).
void FP4EMU_EIGEN_FN(const float* a, const float* bt, int64_t m, int64_t n, int64_t k, int threads, float* c,
                     int64_t ldc) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  const Eigen::Map<const RowMajor> am(a, m, k);
  const Eigen::Map<const ColMajor> bm(bt, k, n);
  Eigen::Map<RowMajor, 0, Eigen::OuterStride<>> cm(c, m, n, Eigen::OuterStride<>(ldc));
  // Eigen's thread count is process-wide: set it for this product, then
  // return it to Eigen's default (OpenMP's).
  Eigen::setNbThreads(threads);
  cm.noalias() = am * bm;
  Eigen::setNbThreads(0);
}

}  // namespace fp4emu::gemm_detail
