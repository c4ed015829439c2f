#pragma once
// Operations and constants that the libraries our recipes name define, and
// that more than one recipe (or a recipe and its SIMD kernel) uses: one
// definition each, read by src/quant/reference/ and src/quant/simd/.
// docs/formats.md cites the library lines behind each.
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace fp4emu::library {

// RN16 = fp32(1/6) = 0x3E2AAAAB, folded with one RNE rounding as nvcc and
// torch fold the kernels' constant (docs/spec notation).
inline constexpr float kRn16 = 1.0f / 6.0f;
static_assert(std::bit_cast<uint32_t>(kRn16) == 0x3E2AAAABu);
inline constexpr float kE2m1Max = 6.0f;

// torch.amax(abs(x)) (and the CUTLASS host reference): a NaN anywhere is the
// result (|NaN|), else the largest |x|.
inline float amax_nan_wins(const float* x, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (std::isnan(a)) return a;
    if (a > amax) amax = a;
  }
  return amax;
}

// ggml's `if (amax < fabsf(v)) amax = fabsf(v);` from 0, and fmaxf over the
// lanes in the TransformerEngine and cuDNN kernels: a NaN lane never wins,
// an Inf lane does. (glibc's fmaxf would return NaN for a signaling NaN,
// CUDA's does not: the comparison keeps CUDA's answer.)
inline float amax_nan_ignored(const float* x, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i)
    if (amax < std::fabs(x[i])) amax = std::fabs(x[i]);
  return amax;
}

// ggml-common.h kvalues_mxfp4 / kvalues_fp4: twice the E2M1 value of each
// code, so code 0x8 is +0.
inline constexpr std::array<int8_t, 16> kGgmlValues = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml best_index_mxfp4 (used by its MXFP4 and NVFP4 quantizers): the first
// code k of argmin fabsf(kv[k] * d - x), strict `<`, in fp32 (one rounding
// per operation: -ffp-contract=off). The first index wins a tie, so ties go
// toward zero and a negative underflow gives +0 (code 0); code 8 is never
// produced. NaN and +-Inf x give code 0 (no comparison is true). kv * d is
// exact but for overflow; the subtraction rounds, so two candidates' errors
// can merge and the first wins: ggml's behaviour, kept.
inline uint8_t ggml_best_index(float d, float x) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kGgmlValues[0]) * d - x);
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(static_cast<float>(kGgmlValues[k]) * d - x);
    if (err < best_err) {
      best = k;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace fp4emu::library
