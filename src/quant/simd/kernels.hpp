#pragma once
// The interface between the fast tensor driver (driver.cpp, OpenMP, no SIMD)
// and the per-target Highway kernels (kernels.cpp). Private to src/quant/simd.
#include <cstdint>
#include <optional>
#include <vector>

#include "fp4emu/quant/recipe.hpp"

namespace fp4emu::simd {

// The block kernels that exist; which recipes each covers is decided in one
// place, fast_kernel() in driver.cpp.
enum class KernelFamily : uint8_t {
  hif4_v14,  // hif4.md §6.1 (hif4.v14)
  hif4_a6,   // hif4.md §6.5 (hif4.a6), bf16 inputs
  mxfp4,     // mxfp4.md §4.1, §4.3-§4.5 scale rules + E2M1 conversion
  nvfp4_te,  // nvfp4.md §4.1 (nvfp4.te)
};

struct KernelArgs {
  const Recipe* recipe = nullptr;
  KernelFamily family = KernelFamily::mxfp4;
  Rounding rounding = Rounding::rne;
  NibbleOrder nibble_order = NibbleOrder::low_first;
  ScaleBitOrder scale_bit_order = ScaleBitOrder::lsb_first;
  float nv_encode_rn16 = 0.0f;  // NVFP4: fp32(S_enc * fp32(1/6))
  float nv_decode = 1.0f;       // NVFP4: S_dec used by the decode
  float nv_global_amax = 0.0f;  // NVFP4: G (TE's dequantize)
  float nv_factor_inv = 0.0f;   // NVFP4: fp32(1/(6*M)) (TE's dequantize)
  // NVFP4 dequantize of the recipes whose library multiplies the element by
  // one factor per block: x = q * nv_factor[scale byte] (null: the
  // fp32(fp32(q*s)*S_dec) order); code 0x8 decodes to +0 when nv_positive_zero.
  const float* nv_factor = nullptr;
  bool nv_positive_zero = false;
};

// n consecutive values of one row that start at a block boundary: n / block
// whole blocks, then a tail of n % block values zero-padded to a block.
void fake_quant_values(const KernelArgs& k, const float* x, float* y, int64_t n);
// Codes: n rounded up to a block, two per byte; scales: scale_bytes_per_block per block.
void quantize_values(const KernelArgs& k, const float* x, int64_t n, uint8_t* codes, uint8_t* scales);
// Decodes the blocks that hold n values and writes those n values.
void dequantize_values(const KernelArgs& k, const uint8_t* codes, const uint8_t* scales, int64_t n, float* y);
// max |x_i| over the non-NaN values (0 if none): the fmaxf reduction.
float abs_max_dropping_nan(const float* x, int64_t n);

}  // namespace fp4emu::simd
