// The `fast` model: Eigen sgemm on the fp32 operands. Eigen chooses the
// summation order (blocking, SIMD width, threads), so the result is not
// bit-reproducible across builds or machines; it is for studies only.
#include <Eigen/Core>

#include "models.hpp"

namespace fp4emu::gemm_detail {

void eigen_gemm(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n, int64_t k,
                int threads, float* c) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  const Eigen::Map<const RowMajor> am(a.data(), m, k);
  const Eigen::Map<const ColMajor> bm(b.data(), k, n);  // b holds the columns of B, each along k
  Eigen::Map<RowMajor> cm(c, m, n);
  // Eigen's thread count is process-wide: set it for this product, then
  // return it to Eigen's default (OpenMP's).
  Eigen::setNbThreads(threads);
  cm.noalias() = am * bm;
  Eigen::setNbThreads(0);
}

}  // namespace fp4emu::gemm_detail
