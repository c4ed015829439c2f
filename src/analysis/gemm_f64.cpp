// gemm_f64.hpp: Highway kernels (dynamic dispatch) over strips of B's rows;
// OpenMP over strips. A strip of W rows of B is packed along k, in chunks of
// kChunk values of k, so the packed chunk stays in L1 while every row of A
// passes over it; the accumulators go back to the strip's C between chunks,
// which keeps each output's fma chain in increasing k.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <omp.h>
#include <stdexcept>
#include <vector>

#include "fp4emu/analysis/gemm_f64.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/analysis/gemm_f64.cpp"  // relative to the repository root
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef FP4EMU_GEMM_F64_ONCE
#define FP4EMU_GEMM_F64_ONCE
namespace fp4emu::analysis::gemm_f64_detail {
constexpr int kMaxRows = 8;     // rows of A per kernel call, at most
constexpr int64_t kChunk = 256; // values of k per packed chunk
}  // namespace fp4emu::analysis::gemm_f64_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace fp4emu::analysis::gemm_f64_detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kVecs = 2;  // vectors of B rows per strip

// Rows per call: 8 x 2 accumulators where there are 32 vector registers
// (AVX-512), 4 x 2 with 16.
#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86
constexpr int kRows = 8;
#else
constexpr int kRows = 4;
#endif
static_assert(kRows <= kMaxRows);

#if HWY_TARGET == HWY_SCALAR
size_t StripWidth() { return 1; }
#else
size_t StripWidth() { return kVecs * hn::Lanes(hn::ScalableTag<double>()); }
#endif
size_t StripRows() { return kRows; }

// c (rows x W, row-major) += over k in [0, kc): a[r][k] * bp[k][0..W), one fma
// per step. `rows` <= StripRows().
void StripChunk(const double* a, int64_t lda, int rows, const double* bp, int64_t kc, double* c) {
  const size_t w = StripWidth();
#if HWY_TARGET != HWY_SCALAR && HWY_NATIVE_FMA
  const hn::ScalableTag<double> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  V acc[kRows][kVecs];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v) acc[r][v] = r < rows ? hn::LoadU(d, c + r * w + v * lanes) : hn::Zero(d);
  if (rows == kRows) {
    for (int64_t k = 0; k < kc; ++k) {
      const V b0 = hn::LoadU(d, bp + k * w), b1 = hn::LoadU(d, bp + k * w + lanes);
      for (int r = 0; r < kRows; ++r) {
        const V av = hn::Set(d, a[r * lda + k]);
        acc[r][0] = hn::MulAdd(av, b0, acc[r][0]);
        acc[r][1] = hn::MulAdd(av, b1, acc[r][1]);
      }
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      const V b0 = hn::LoadU(d, bp + k * w), b1 = hn::LoadU(d, bp + k * w + lanes);
      for (int r = 0; r < rows; ++r) {
        const V av = hn::Set(d, a[r * lda + k]);
        acc[r][0] = hn::MulAdd(av, b0, acc[r][0]);
        acc[r][1] = hn::MulAdd(av, b1, acc[r][1]);
      }
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < kVecs; ++v) hn::StoreU(acc[r][v], d, c + r * w + v * lanes);
#else
  // No fused multiply-add on this target: the scalar fma keeps the bits.
  for (int r = 0; r < rows; ++r)
    for (size_t j = 0; j < w; ++j) {
      double acc = c[r * w + j];
      for (int64_t k = 0; k < kc; ++k) acc = std::fma(a[r * lda + k], bp[k * w + j], acc);
      c[r * w + j] = acc;
    }
#endif
}

}  // namespace fp4emu::analysis::gemm_f64_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fp4emu::analysis {
namespace gemm_f64_detail {
HWY_EXPORT(StripWidth);
HWY_EXPORT(StripRows);
HWY_EXPORT(StripChunk);
}  // namespace gemm_f64_detail

std::vector<double> gemm_abt_f64_scalar(std::span<const double> a, std::span<const double> b, int64_t m, int64_t d,
                                        int64_t n) {
  std::vector<double> c(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < d; ++k) acc = std::fma(a[i * d + k], b[j * d + k], acc);
      c[i * n + j] = acc;
    }
  return c;
}

namespace {

// B is double, or fp32 widened as it is packed (exact: the same bits as
// widening B first, without a double copy of a large weight).
template <class TB>
void gemm_abt_into(std::span<const double> a, std::span<const TB> b, int64_t m, int64_t d, int64_t n, int threads,
                   std::span<double> c) {
  using namespace gemm_f64_detail;
  const int64_t w = int64_t(HWY_DYNAMIC_DISPATCH(StripWidth)());
  const int64_t rows = int64_t(HWY_DYNAMIC_DISPATCH(StripRows)());
  const int64_t strips = (n + w - 1) / w;
  const int nt = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel num_threads(nt)
  {
    std::vector<double> bp(size_t(kChunk * w)), cs(size_t(m * w));
#pragma omp for schedule(dynamic, 1)
    for (int64_t s = 0; s < strips; ++s) {
      const int64_t j0 = s * w, cols = std::min(w, n - j0);
      std::fill(cs.begin(), cs.end(), 0.0);
      for (int64_t k0 = 0; k0 < d; k0 += kChunk) {
        const int64_t kc = std::min(kChunk, d - k0);
        for (int64_t j = 0; j < w; ++j)
          for (int64_t k = 0; k < kc; ++k)
            bp[size_t(k * w + j)] = j < cols ? double(b[(j0 + j) * d + k0 + k]) : 0.0;
        for (int64_t i0 = 0; i0 < m; i0 += rows)
          HWY_DYNAMIC_DISPATCH(StripChunk)(a.data() + i0 * d + k0, d, int(std::min<int64_t>(rows, m - i0)),
                                           bp.data(), kc, cs.data() + i0 * w);
      }
      for (int64_t i = 0; i < m; ++i)
        std::copy(cs.begin() + i * w, cs.begin() + i * w + cols, c.begin() + i * n + j0);
    }
  }
}

}  // namespace

std::vector<double> gemm_abt_f64(std::span<const double> a, std::span<const double> b, int64_t m, int64_t d,
                                 int64_t n, int threads) {
  std::vector<double> c(size_t(m * n));
  gemm_abt_into(a, b, m, d, n, threads, std::span<double>(c));
  return c;
}

void gemm_abt_f64(std::span<const double> a, std::span<const float> b, int64_t m, int64_t d, int64_t n, int threads,
                  std::span<double> c) {
  if (a.size() != size_t(m * d) || b.size() != size_t(n * d) || c.size() != size_t(m * n))
    throw std::invalid_argument("gemm_abt_f64: operand sizes do not match m x d, n x d, m x n");
  gemm_abt_into(a, b, m, d, n, threads, c);
}

}  // namespace fp4emu::analysis
#endif  // HWY_ONCE
