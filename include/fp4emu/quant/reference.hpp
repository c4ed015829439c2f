#pragma once
// Scalar reference block quantizers: the specifications in code
// (src/quant/reference/<format>.cpp, one per format, each following its spec
// step by step). They work on one block of fp32 values; the tensor driver
// (src/quant/quantize.cpp) gathers blocks along the axis, pads tails and packs.
//
// Codes are unpacked here: one 4-bit code per byte (sign in bit 3).
// `rbits` is the random byte of each element of the block, read only when the
// rounding is Rounding::stochastic (then it is required).
#include <cstdint>
#include <span>

#include "fp4emu/codec/rounding.hpp"
#include "fp4emu/quant/recipe.hpp"

namespace fp4emu::reference {

// ---------------------------------------------------------------- HiF4 ------
inline constexpr int kHif4Block = 64;

// The scale word in its canonical (LSB-first, docs/spec/hif4.md §5.2) form:
// bits 7..0 E6M2 code, bit 8+j = L2 bit b_j, bit 16+k = L3 bit c_k.
// Returns the word; writes 64 codes.
uint32_t hif4_quantize_block(const Recipe& recipe, Rounding rounding, const float* x, uint8_t* codes,
                             const uint8_t* rbits = nullptr);
// Exact decode (docs/spec/hif4.md §4): (-1)^s (q/4) 2^(b+c) E6M2(S); scale 0xFF -> NaN block.
// For hif4.v12_pow2 the E6M2 byte holds the power-of-two exponent (see hif4.cpp).
void hif4_decode_block(const Recipe& recipe, uint32_t word, const uint8_t* codes, float* out);
// Fused fake quantization; equals decode(quantize) except where the recipe
// says otherwise (V14-special passes NaN/Inf through).
void hif4_fake_quant_block(const Recipe& recipe, Rounding rounding, const float* x, float* out,
                           const uint8_t* rbits = nullptr);
// Scale word bit order conversion between canonical LSB-first and stored
// form (docs/spec/hif4.md §5.2). lsb_first (PTO spec, pto-isa): the canonical
// word itself. msb_first (AMCT): the same bytes [E6M2, L2, L3 groups 0-7, L3
// groups 8-15], bits reversed inside bytes 1..3 (b_0 in bit 7 of byte 1, c_0
// in bit 7 of byte 2, c_8 in bit 7 of byte 3); its own inverse. The reversal
// swaps bits, then bit pairs, then nibbles, in every byte at once (inline:
// the fast quantize and dequantize convert a word per block).
constexpr uint32_t hif4_word_to_stored(uint32_t canonical, ScaleBitOrder order) {
  if (order == ScaleBitOrder::lsb_first) return canonical;
  uint32_t x = canonical;
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return (x & 0xFFFFFF00u) | (canonical & 0xFFu);
}
constexpr uint32_t hif4_word_from_stored(uint32_t stored, ScaleBitOrder order) {
  return hif4_word_to_stored(stored, order);
}

// --------------------------------------------------------------- MXFP4 ------
inline constexpr int kMxBlock = 32;

// Returns the E8M0 scale code; writes 32 codes.
uint8_t mxfp4_quantize_block(const Recipe& recipe, Rounding rounding, const float* x, uint8_t* codes,
                             const uint8_t* rbits = nullptr);
// v_i = 2^(c-127) * e2m1(P_i) rounded to fp32; 0xFF -> NaN block.
void mxfp4_decode_block(const Recipe& recipe, uint8_t scale, const uint8_t* codes, float* out);
void mxfp4_fake_quant_block(const Recipe& recipe, Rounding rounding, const float* x, float* out,
                            const uint8_t* rbits = nullptr);
// ggml's GGML_E8M0_TO_FP32_HALF (ggml-impl.h): 2^(c-128), half the scale, the
// unit of mxfp4.ggml's argmin (0xFF gives 2^127, not NaN).
float ggml_e8m0_to_fp32_half(uint8_t c);

// --------------------------------------------------------------- NVFP4 ------
inline constexpr int kNvBlock = 16;

// Per-tensor scale, computed once from the global amax G (docs/spec/nvfp4.md §2.2).
struct NvTensorScale {
  float global_amax = 0.0f;
  float encode = 1.0f;  // S_enc (1 for single-level recipes)
  float decode = 1.0f;  // S_dec
};
NvTensorScale nvfp4_tensor_scale(const Recipe& recipe, float global_amax);
// The global amax as the recipe's library reduces it (NaN handling differs).
float nvfp4_global_amax(const Recipe& recipe, std::span<const float> x);
// Block amax as the recipe's library reduces it (used for 1D blocks and to
// combine the rows of a 16x16 tile).
float nvfp4_block_amax(const Recipe& recipe, const float* x, int n);
// Returns the UE4M3 scale code; writes 16 codes. `block_amax` is the amax the
// scale is derived from (of the 16 values, or of the 16x16 tile).
uint8_t nvfp4_quantize_block(const Recipe& recipe, Rounding rounding, const NvTensorScale& ts,
                             float block_amax, const float* x, uint8_t* codes, const uint8_t* rbits = nullptr);
// The recipe's library dequantize (docs/formats.md, NVFP4 dequantize table).
void nvfp4_decode_block(const Recipe& recipe, const NvTensorScale& ts, uint8_t scale,
                        const uint8_t* codes, float* out);
// Block scale only, no per-tensor scale: e2m1 * s (ggml: its own decoder of
// s). The GEMM operand value; the per-tensor scales are applied after the sum.
void nvfp4_decode_block_unscaled(const Recipe& recipe, uint8_t scale, const uint8_t* codes, float* out);
// Whether the recipe's dequantize is x = fp32(q * f) with one factor f per
// block, and that factor (the fast path decodes through these); whether code
// 0x8 decodes to +0 there.
bool nvfp4_decode_is_block_factor(const Recipe& recipe);
float nvfp4_decode_factor(const Recipe& recipe, const NvTensorScale& ts, uint8_t scale);
bool nvfp4_decode_positive_zero(const Recipe& recipe);
// ggml's own UE4M3 conversions (ggml-impl.h), used by nvfp4.ggml. The decoder
// returns half the value, as ggml's does.
uint8_t ggml_fp32_to_ue4m3(float x);
float ggml_ue4m3_to_fp32(uint8_t x);
void nvfp4_fake_quant_block(const Recipe& recipe, Rounding rounding, const NvTensorScale& ts,
                            float block_amax, const float* x, float* out, const uint8_t* rbits = nullptr);

// ------------------------------------------------------- every format ------
// One block's stored scale: scale_bytes_per_block(format) bytes, little-endian,
// a HiF4 word in bit order `order`. The canonical scale is HiF4's LSB-first
// word, or the MXFP4/NVFP4 scale byte.
// Inline: the GEMM operands read one per block.
inline uint32_t load_scale(Format format, const uint8_t* bytes, ScaleBitOrder order) {
  uint32_t word = 0;
  for (int i = 0; i < scale_bytes_per_block(format); ++i) word |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  return format == Format::hif4 ? hif4_word_from_stored(word, order) : word;
}
inline void store_scale(Format format, uint32_t canonical, ScaleBitOrder order, uint8_t* bytes) {
  const uint32_t word = format == Format::hif4 ? hif4_word_to_stored(canonical, order) : canonical;
  for (int i = 0; i < scale_bytes_per_block(format); ++i) bytes[i] = static_cast<uint8_t>(word >> (8 * i));
}

// What a block operation reads beyond its block: NVFP4's per-tensor scale
// and, for 16x16 tiles, the tile's amax (null: the block's own amax,
// nvfp4_block_amax). HiF4 and MXFP4 read neither.
struct BlockContext {
  NvTensorScale tensor;
  const float* tile_amax = nullptr;
};

// The block operations of one format, with one signature for all formats, so
// that code handling every format (the tensor drivers, GEMM operands,
// diagnose) takes the format's row instead of switching on the format. Each
// entry is the format's function above; scales are canonical.
struct FormatOps {
  uint32_t (*quantize_block)(const Recipe& recipe, Rounding rounding, const BlockContext& context, const float* x,
                             uint8_t* codes, const uint8_t* rbits);
  void (*fake_quant_block)(const Recipe& recipe, Rounding rounding, const BlockContext& context, const float* x,
                           float* out, const uint8_t* rbits);
  void (*decode_block)(const Recipe& recipe, const NvTensorScale& tensor, uint32_t scale, const uint8_t* codes,
                       float* out);
  // The block scale alone: NVFP4 without its per-tensor scale
  // (nvfp4_decode_block_unscaled); the others as decode_block.
  void (*decode_block_unscaled)(const Recipe& recipe, uint32_t scale, const uint8_t* codes, float* out);
};
const FormatOps& format_ops(Format format);

}  // namespace fp4emu::reference
