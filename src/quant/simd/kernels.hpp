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
  hif4_v14,    // hif4.md §6.1, §6.3, §6.6: fp32 products (v14, v14_noclip, v14_special, v12_pow2)
  hif4_amct,   // hif4.md §6.4: fp32 products, element ratio rounded to bf16
  hif4_f64,    // hif4.md §6.2: exact products (v14_f64)
  hif4_a6,     // hif4.md §6.5 (hif4.a6), bf16 inputs
  mxfp4,       // mxfp4.md §4.1-§4.5 scale rules + E2M1 conversion
  mxfp4_ggml,  // mxfp4.md §4.2, §5.4: ggml's wrapped log2f scale and argmin elements
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

// The SIMD codec ops of codec-inl.h on their own, for the tests: on the
// dispatched target, out[i] = op(in[i]) for n a multiple of 16. *_grid:
// RoundToGrid of a magnitude (E2M1 and S1P2 with `rounding`, the others
// RNE); *_code: CodeOf of a value on the grid (the code as a float);
// *_value: ValueOf of a code given as a float.
enum class CodecOp : uint8_t {
  e2m1_grid, s1p2_grid, ue4m3_grid, e6m2_grid, bf16_grid,
  e2m1_code, s1p2_code, ue4m3_code, e6m2_code,
  e2m1_value, s1p2_value, ue4m3_value, e6m2_value,
};
void codec_op(CodecOp op, Rounding rounding, const float* in, float* out, int64_t n);

}  // namespace fp4emu::simd
