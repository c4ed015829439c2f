// Eigen sgemm compiled for one x86 target (gemm_bench's baselines). Included
// by eigen_avx2.cpp and eigen_avx512.cpp, each built with its target's flags
// (bench/CMakeLists.txt), after defining FP4EMU_EIGEN_FN. The including file
// renames Eigen's namespace first (#define Eigen ...), so the inline template
// code of each target has its own symbols: the linker cannot merge an AVX-512
// instantiation into the baseline build's or the other way round.
#include <Eigen/Core>
#include <cstdint>

void FP4EMU_EIGEN_FN(const float* a, const float* bt, float* c, int64_t m, int64_t n, int64_t k, int threads) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  const Eigen::Map<const RowMajor> am(a, m, k);
  const Eigen::Map<const ColMajor> bm(bt, k, n);  // bt: the columns of B, each along k (n×k row-major)
  Eigen::Map<RowMajor> cm(c, m, n);
  Eigen::setNbThreads(threads);
  cm.noalias() = am * bm;
  Eigen::setNbThreads(0);
}
