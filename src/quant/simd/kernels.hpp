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
  hif4_v14,    // docs/spec/hif4.md §6.1, §6.3, §6.6: fp32 products (v14, v14_noclip, v14_special, v12_pow2)
  hif4_amct,   // docs/spec/hif4.md §6.4: fp32 products, element ratio rounded to bf16
  hif4_f64,    // docs/spec/hif4.md §6.2: exact products (v14_f64)
  hif4_a6,     // docs/spec/hif4.md §6.5 (hif4.a6), bf16 inputs
  mxfp4,       // docs/spec/mxfp4.md §4.1-§4.5 scale rules + E2M1 conversion
  mxfp4_ggml,  // docs/spec/mxfp4.md §4.2, §5.4: ggml's wrapped log2f scale and argmin elements
  nvfp4,          // docs/spec/nvfp4.md §4: every NVFP4 rule but the two below, one kernel over scale policies
  nvfp4_4over6,   // docs/spec/nvfp4.md §4.2: two candidate scales, the smaller block error
  nvfp4_ggml,     // docs/spec/nvfp4.md §4.0: ggml's UE4M3 and argmin elements
};

// The element rule of nvfp4.ggml and mxfp4.ggml, ggml's argmin best_index_mxfp4
// (ggml-quants.c:337-348 at d99724f2: the first k of the smallest fp32
// |kvalues_fp4[k]*d - x|, ggml-common.h:1126-1129), as thresholds on |x| for
// one unit d, the block scale's half (driver.cpp ggml_argmin_row).
struct GgmlArgminRow {
  // threshold[k], k = 1..7: the smallest fp32 |x| the argmin gives magnitude k
  // rather than k - 1 (+Inf where fp32(kv*d) overflows: never); threshold[0]
  // = 0; 8..15 are +Inf, never indexed.
  alignas(64) float threshold[16] = {};
  float minus_threshold1 = 0.0f;  // -threshold[1]: x at or below it has code 8 + magnitude
  float d = 0.0f;      // the unit: ggml_ue4m3_to_fp32(s) or ggml_e8m0_to_fp32_half(c)
  float ratio = 0.0f;  // fp32(kGgmlArgminRatio / d) (0 when d = 0): the lookup's estimate of |x| / d
  // Blocks whose largest |x| bits (NaN included) reach this take the literal
  // argmin: beyond 2^20 d fp32 differences merge candidates, beyond the
  // largest finite candidate the lookup could name an Inf threshold, and NaN
  // needs the NaN-dropping amax. At most the bits of +Inf.
  uint32_t limit_bits = 0;
};
inline constexpr float kGgmlArgminRatio = 0.79f;
// The rows of every scale code, built once: nvfp4 128 (UE4M3 codes
// 0..0x7F), mxfp4 256 (E8M0 codes).
const GgmlArgminRow* ggml_argmin_table(Format format);
// nvfp4.ggml: the smallest largest-|x| bits (NaN above +Inf's) at which a
// block may reach its row's limit_bits. A group whose blocks are all below it
// skips the per-block test (NvGgmlGroupScales); at most +Inf's bits.
uint32_t nvfp4_ggml_literal_bits();

// The amax reductions of NvAmaxNan in one pass: the fmaxf maximum, and whether
// any / every value is NaN (propagate: the first NaN wins; maxnum: NaN only
// when all are).
struct AbsMaxStats {
  float max_dropping_nan = 0.0f;
  bool any_nan = false;
  bool all_nan = true;
};

struct KernelArgs {
  const Recipe* recipe = nullptr;
  KernelFamily family = KernelFamily::mxfp4;
  Rounding rounding = Rounding::rne;
  NibbleOrder nibble_order = NibbleOrder::low_first;
  ScaleBitOrder scale_bit_order = ScaleBitOrder::lsb_first;
  // NVFP4: the per-tensor scale (reference::NvTensorScale).
  float nv_global_amax = 0.0f;
  float nv_encode = 1.0f;
  float nv_decode = 1.0f;
  // NVFP4 decode of a block (fake-quant and dequantize): fp32(q * nv_factor[scale
  // byte]) (reference::nvfp4_decode_factor), then * S_dec for the recipes
  // without a library dequantize (!reference::nvfp4_decode_is_block_factor);
  // code 0x8 decodes to +0 when nv_positive_zero.
  const float* nv_factor = nullptr;
  bool nv_positive_zero = false;
  // NVFP4 16x16 tiles (tile_2d): the amax of each block of the run, or null.
  const float* nv_block_amax = nullptr;
  // nvfp4.ggml and mxfp4.ggml: the argmin's rows, ggml_argmin_table(format).
  const GgmlArgminRow* ggml_argmin = nullptr;
  uint32_t ggml_literal_bits = 0;  // nvfp4.ggml: nvfp4_ggml_literal_bits()
  // nvfp4.ggml quantize, where set: receives abs_max_stats(x, n) of the run,
  // taken from the block maxima the kernel reduces anyway (a separate pass was
  // 0.5 of 5.0 AVX2 instructions per value and a second read of the run).
  AbsMaxStats* run_amax = nullptr;
  // Rounding::stochastic: the run's random bytes, one per value from its
  // start, for the run rounded up to kRbitsPad values (the zero padding of a
  // tail rounds to 0 whatever its bytes); null otherwise.
  const uint8_t* rbits = nullptr;
};
// Every kernel reads its random bytes in groups of at most this many values.
inline constexpr int64_t kRbitsPad = 64;

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
// Stochastic rounding reads rbits[i], the random byte of in[i].
void codec_op(CodecOp op, Rounding rounding, const float* in, float* out, int64_t n,
              const uint8_t* rbits = nullptr);
AbsMaxStats abs_max_stats(const float* x, int64_t n);
// NVFP4 16x16 tiles, one row of a tile at a time: lane_amax[i] = max(lane_amax[i],
// |x_i|) over the non-NaN x_i, i < n, and the row's AbsMaxStats, in one pass.
AbsMaxStats nv_tile_row_amax(const float* x, int64_t n, float* lane_amax);

}  // namespace fp4emu::simd
