// Scalar reference quantizer of OCP MXFP4, every recipe of docs/spec/mxfp4.md §4.0.
//
// This file is the specification in code (docs/architecture.md §1): it follows docs/spec/mxfp4.md
// step by step and writes every rounding as a named call. Fast paths and
// golden vectors are checked against it bit for bit.
//
// Block (docs/spec/mxfp4.md §0, §3): 32 fp32 values V_0..V_31 share one E8M0 scale code
// c, X = 2^(c-127) = 2^s; element i is the E2M1 code P_i, v_i = X * e2m1(P_i).
//
// Decisions where the spec is open (docs/spec/mxfp4.md §10, §11):
// - amax reduction: NaN-propagating (torch.amax) for every recipe but ggml,
//   whose `if (amax < fabsf(v))` loop never takes a NaN (§4 intro, §10 "NaN in block").
// - Non-finite amax (§4.0 "amax Inf / NaN"): NaN or Inf amax -> scale 0xFF (a
//   NaN block) for ocp, ceil, even and microxcaling. RCEIL follows NVIDIA's
//   cvt.rp.satfinite: Inf amax -> 0xFE and the elements convert normally
//   (Inf -> +-6); NaN amax -> 0xFF. ggml: see MxScaleRange::x86_uint8_wrap.
//   EVEN also gives 0xFF when its rounded amax overflows to +Inf (§4.4).
// - Codes of a NaN block: MxNanBlockCodes. The torchao recipes take torchao's
//   CUDA bits (code 0x4 in every lane); where the library has no codes
//   (microxcaling computes floats only) fp4emu writes the codes the block
//   would have if its NaN lanes (and poisoning Inf lanes) were +0.
// - Element NaN, where a code is needed: 0x7 (+6), the CUDA oracle (§1.3
//   proposal), done by e2m1_encode. No shipped recipe reaches it: NaN poisons
//   the block first, and ggml's argmin gives NaN code 0.
// - Decode (§0): v = fp32(2^(c-127) * e2m1(P)), computed exactly in double and
//   rounded once to fp32. The product has at most 2 significant bits and is at
//   least 2^-128, so the only rounding is overflow to +-Inf: c = 253 with |P|
//   >= 4, c = 254 with |P| >= 2 (e.g. 6 * 2^127 -> Inf). Scale 0xFF decodes the
//   whole block to NaN, except in mxfp4.ggml, which decodes as ggml's own
//   dequantizer does (0xFF = 2^128 per E2M1 unit, code 8 = +0).
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/reference.hpp"
#include "src/quant/library_ops.hpp"

namespace fp4emu::reference {
namespace {

static_assert(std::numeric_limits<float>::is_iec559, "fp32 must be IEEE binary32");
static_assert(FLT_EVAL_METHOD == 0, "each fp32 operation must round to fp32 (no excess precision)");

constexpr uint8_t kNanScale = 0xFF;     // E8M0 NaN (§2)
constexpr int kE8m0Bias = 127;
constexpr int kE2m1Emax = 2;            // emax_elem: largest power of two of E2M1 is 4 (§1.1)
constexpr float kFp32MinNormal = 0x1p-126f;

// ---------------------------------------------------------------------------
// fp32 arithmetic as the libraries perform it.
// One native fp32 operation rounds once, RNE: IEEE 754 binary32, no excess
// precision (FLT_EVAL_METHOD 0) and no FMA contraction (-ffp-contract=off).
float fp32_mul(float a, float b) { return a * b; }

// Round an exact double to fp32, RNE. Overflow to +-Inf is written out: a C++
// conversion of an out-of-range double is undefined. Magnitudes at or above
// FLT_MAX + half an ulp = 2^128 - 2^103 round to Inf (the tie goes to the even
// neighbour, 2^128).
float fp32_rne(double exact) {
  if (std::fabs(exact) >= 0x1.ffffffp127) {
    const float inf = std::numeric_limits<float>::infinity();
    return exact > 0 ? inf : -inf;
  }
  return static_cast<float>(exact);
}

uint32_t fp32_bits(float a) { return std::bit_cast<uint32_t>(a); }

// The unbiased exponent field of an fp32: flog2(a) for a normal a; -127 for
// zero and subnormals (docs/spec/mxfp4.md §4.1 step 1; every rule clamps those to 0x00).
// 128 for Inf/NaN bit patterns.
int exponent_field_unbiased(uint32_t bits) { return static_cast<int>((bits >> 23) & 0xFFu) - kE8m0Bias; }

// ---------------------------------------------------------------------------
// floor(RN_binary32(log2(a))): the floor a correctly rounded binary32 log2
// gives (docs/spec/mxfp4.md §4.2, MX_SCALE_LOG2F_FLOOR). Computed exactly from the bits,
// never through the platform's log2f, so every machine gets the same code.
//
// Derivation. Write a = m * 2^e with m = M / 2^23 in [1, 2) and M the 24-bit
// integer significand (subnormals normalised). Then t = log2(a) = e + log2(m)
// lies in [e, e+1), so floor(t) = e. RN is monotone and e, e+1 are fp32
// integers, so RN(t) is in [e, e+1]: floor(RN(t)) is e, or n = e+1 exactly
// when RN(t) = n. Let delta(n) be half the fp32 spacing between n and its
// neighbour on t's side (below n):
//   n >= 1: the spacing below n is 2^(k-23) with k = bit_width(n-1) - 1
//           (k = -1 for n = 1), so delta = 2^(k-24);
//   n <= -1: |t| > |n|, the spacing above |n| is 2^(k-23) with
//           k = bit_width(|n|) - 1, so delta = 2^(k-24);
//   n = 0:  delta = 2^-150 (half the smallest subnormal).
// RN(t) = n iff n - t < delta (n - t = delta would be a tie to even n, but
// log2 of a rational m != 1 is irrational, so no tie and no exact hit occurs).
// n - t = 1 - log2(m), so the condition is m > 2^(1 - delta), i.e. with
// J = (2 - m) * 2^23 = 2^24 - M (a positive integer):
//   J < 2^24 * (1 - 2^-delta)  <=>  J <= floor(2^24 * (1 - 2^-delta)) = Jmax(k).
// 2^24 * (1 - 2^-delta) = 2^k ln2 (1 - O(2^(k-24))), never within 0.09 of an
// integer for the k that occur (computed to 60 digits; the test recomputes it):
//   k    -1      0      1      2      3      4       5       6       7
//   val  0.347   0.693  1.386  2.773  5.545  11.090  22.181  44.361  88.723
//   Jmax 0       0      1      2      5      11      22      44      88
// k ranges over [-1, 6] for n in [1, 128] and [0, 7] for n in [-148, -1].
// Examples: a = 2^10 - 2^-13 (0x447FFFFF): e = 9, J = 1 <= Jmax(3) = 5 -> 10
// (EX-M5); a = 2^3 - 2^-21: e = 2, J = 1 <= Jmax(1) = 1 -> 3; a = 2^2 - 2^-22:
// e = 1, Jmax(0) = 0 -> 1 (correct floor).
// glibc 2.36's floorf(log2f(x)) agrees on +-300 ulps around every power of
// two and on a random sample (Mxfp4Log2fFloor tests).
constexpr std::array<uint32_t, 9> kLog2fRoundUpJmax = {0, 0, 1, 2, 5, 11, 22, 44, 88};  // k = -1..7

uint32_t log2f_round_up_jmax(int n) {
  if (n == 0) return 0;  // delta = 2^-150
  const uint32_t magnitude = n >= 1 ? static_cast<uint32_t>(n - 1) : static_cast<uint32_t>(-n);
  const int k = static_cast<int>(std::bit_width(magnitude)) - 1;
  return kLog2fRoundUpJmax[static_cast<size_t>(k + 1)];
}

// a: positive finite fp32 (normal or subnormal).
// SIMD twin: src/quant/simd/mxfp4-inl.h MxLog2fFloor.
int log2f_floor(float a) {
  const uint32_t bits = fp32_bits(a);
  const uint32_t exp_field = (bits >> 23) & 0xFFu;
  const uint32_t fraction = bits & 0x7FFFFFu;
  int e;
  uint32_t significand;  // M in [2^23, 2^24)
  if (exp_field == 0) {
    const int top = 31 - std::countl_zero(fraction);  // a = fraction * 2^-149
    significand = fraction << (23 - top);
    e = -149 + top;
  } else {
    significand = fraction | (1u << 23);
    e = static_cast<int>(exp_field) - kE8m0Bias;
  }
  const int n = e + 1;
  const uint32_t j = (1u << 24) - significand;
  return j <= log2f_round_up_jmax(n) ? n : e;
}

// ---------------------------------------------------------------------------
// Shared exponent s -> E8M0 code, for the recipes that clamp (MxScaleRange::clamp).
// Lower clamp at -127 (code 0x00, 2^-127). s above 127 would be NaN (0xFF;
// microxcaling flushes it to NaN, torchao clamps it to 128 = 0xFF); no finite
// fp32 amax reaches it for E2M1 (s <= 126).
uint8_t e8m0_from_shared_exponent(int s) {
  if (s > 127) return kNanScale;
  if (s < -127) s = -127;
  return static_cast<uint8_t>(s + kE8m0Bias);
}

// ggml's `(uint8_t)(float)` as gcc and clang compile it for x86-64: cvttss2si
// truncates toward zero to int32, giving 0x80000000 ("integer indefinite") for
// NaN, +-Inf and values outside int32; the low byte is kept. The C cast of a
// negative value is undefined; this is what the machine does (§4.2, EX-M4).
uint8_t x86_float_to_uint8(float v) {
  int32_t i = std::numeric_limits<int32_t>::min();
  if (!std::isnan(v) && v >= -0x1p31f && v < 0x1p31f) i = static_cast<int32_t>(v);
  return static_cast<uint8_t>(static_cast<uint32_t>(i) & 0xFFu);
}

// ---------------------------------------------------------------------------
// docs/spec/mxfp4.md §4: amax over the block, reduced as the recipe's library does it.
// SIMD twin: src/quant/simd/mxfp4-inl.h MxAmaxBits.
float block_amax(const MxParams& p, const float* x) {
  return p.nan_propagating_amax ? library::amax_nan_wins(x, kMxBlock) : library::amax_nan_ignored(x, kMxBlock);
}

// True when this amax makes a NaN block under the recipe (decisions above).
// SIMD twin: src/quant/simd/mxfp4-inl.h MxIsNanBlock.
bool is_nan_block(const MxParams& p, float amax) {
  if (std::isnan(amax)) return true;
  return std::isinf(amax) && p.inf_amax == MxInfAmax::nan_block;
}
// Lanes that are set to +0 to compute the codes of a NaN block.
bool is_poisoning_lane(const MxParams& p, float v) {
  if (std::isnan(v)) return true;
  return std::isinf(v) && p.inf_amax == MxInfAmax::nan_block;
}

// ---------------------------------------------------------------------------
// Scale code from a block amax that is not a NaN block (docs/spec/mxfp4.md §4.1-§4.5).

// §4.1 MX_SCALE_OCP_FLOOR.
uint8_t scale_ocp_floor(float amax) {
  // step 1: e = flog2(amax) from the exponent bits; zero and subnormals give -127.
  const int e = exponent_field_unbiased(fp32_bits(amax));
  // step 2: s = e - emax_elem, lower clamp at -127.
  // step 3: c = s + 127.
  return e8m0_from_shared_exponent(e - kE2m1Emax);
}

// §4.2 MX_SCALE_LOG2F_FLOOR.
// SIMD twin: src/quant/simd/mxfp4-inl.h MxScaleCode; with x86_uint8_wrap, MxGgmlScaleCode.
uint8_t scale_log2f_floor(const MxParams& p, float amax) {
  if (p.scale_range == MxScaleRange::x86_uint8_wrap) {
    // ggml: e = amax > 0 ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0, no clamp.
    // The float sum is exact (small integers); log2f(+Inf) = +Inf.
    if (!(amax > 0.0f)) return 0x00;
    const float biased = std::isinf(amax)
                             ? amax
                             : static_cast<float>(log2f_floor(amax) - kE2m1Emax + kE8m0Bias);
    return x86_float_to_uint8(biased);
  }
  // microxcaling _shared_exponents: floor(log2(amax + FP32_MIN_NORMAL * [amax == 0]))
  // in fp32, minus emax_elem; NaN above 127, clamp at -127. amax = 0 -> -128 -> 0x00.
  const float a = amax == 0.0f ? kFp32MinNormal : amax;
  return e8m0_from_shared_exponent(log2f_floor(a) - kE2m1Emax);
}

// §4.3 MX_SCALE_CEIL (torchao): flog2(amax) + [mantissa bits != 0] - 2.
uint8_t scale_ceil(float amax) {
  const uint32_t bits = fp32_bits(amax);
  const int mantissa_nonzero = (bits & 0x7FFFFFu) != 0 ? 1 : 0;
  return e8m0_from_shared_exponent(exponent_field_unbiased(bits) + mantissa_nonzero - kE2m1Emax);
}

// §4.4 MX_SCALE_EVEN (torchao): round amax half-up to E2M1's 1 mantissa bit on
// the integer bits, amax' = (bits + 2^21) & 0xFF800000, then the floor rule on
// the exponent field of amax'. For amax >= 1.75 * 2^127 amax' is +Inf, and
// torchao's torch.isfinite test, made on amax', writes the NaN scale
// (pytorch/ao 36027d82d torchao/prototype/mx_formats/mx_tensor.py:311-321
// rounds max_abs in place, :351-356 tests it).
uint8_t scale_even(float amax) {
  const uint32_t rounded = (fp32_bits(amax) + (1u << 21)) & 0xFF800000u;
  if (rounded == 0x7F800000u) return kNanScale;
  return e8m0_from_shared_exponent(exponent_field_unbiased(rounded) - kE2m1Emax);
}

// §4.5 MX_SCALE_RCEIL: descale = fp32(amax * RN16), then
// cvt.rp.satfinite.ue8m0x2.f32: round up to a power of two, Inf -> 0xFE.
uint8_t scale_rceil(float amax) {
  const float descale = fp32_mul(amax, library::kRn16);
  return e8m0_encode(descale, Rounding::rtp, Overflow::saturate);
}

// SIMD twin: src/quant/simd/mxfp4-inl.h MxScaleCode and MxBlockScale.
uint8_t scale_code(const MxParams& p, float amax) {
  switch (p.scale_rule) {
    case MxScaleRule::ocp_floor: return scale_ocp_floor(amax);
    case MxScaleRule::log2f_floor: return scale_log2f_floor(p, amax);
    case MxScaleRule::ceil: return scale_ceil(amax);
    case MxScaleRule::even: return scale_even(amax);
    case MxScaleRule::rceil: return scale_rceil(amax);
  }
  return kNanScale;
}

// ---------------------------------------------------------------------------
// Element codes (docs/spec/mxfp4.md §4.1 step 4, §5).

// §4.1 step 4 / §5.1-§5.3: y = V * 2^-s, exact in double (V is fp32, |s| <= 128),
// then one E2M1 rounding with saturation at +-6. The libraries compute y in
// fp32 (V / X, V * (1/X), V * fp32(2^(127-c))); that rounds only when |y| <
// 2^-126, where every element rounding gives the same signed zero (§5.1).
// SIMD twin: src/quant/simd/mxfp4-inl.h MxScaled, then the E2M1 grid of MxFakeQuantBlock / MxQuantizeNumericBlock.
uint8_t element_convert(const MxParams& p, Rounding rounding, uint8_t c, float v, uint8_t r) {
  const double y = std::ldexp(static_cast<double>(v), kE8m0Bias - static_cast<int>(c));
  // microxcaling (7bc4195 mx/mx_ops.py:285, mx/elemwise_ops.py:63): the quotient
  // A / 2^shared_exp is an fp32 division, and "nearest" is torch.sign(A) *
  // floor(|A| + 0.5); torch.sign of +-0 is +0, so a zero quotient gives +0.
  if (p.zero_sign == MxZeroSign::torch_sign && fp32_rne(y) == 0.0f) return 0x0;
  // §5.5: stochastic rounding is the integer rule of cvt.rs on the exact y.
  if (rounding == Rounding::stochastic) return e2m1_encode_sr(y, r);
  return e2m1_encode(y, rounding);
}

}  // namespace

float ggml_e8m0_to_fp32_half(uint8_t c) { return std::ldexp(1.0f, static_cast<int>(c) - 128); }

namespace {

// §5.4 ggml best_index_mxfp4 with d = GGML_E8M0_TO_FP32_HALF(c). When
// |x| >> 6X (only after an Inf amax wrapped the scale to 0x00) several errors
// round to the same value and the first index wins (library_ops.hpp).
// SIMD twin: src/quant/simd/ggml-inl.h GgmlArgmin, GgmlArgminLiteral (mxfp4-inl.h MxGgmlCodes).
uint8_t element_ggml_argmin(uint8_t c, float v) { return library::ggml_best_index(ggml_e8m0_to_fp32_half(c), v); }

uint8_t element_code(const MxParams& p, Rounding rounding, uint8_t c, float v, uint8_t r) {
  switch (p.element_select) {
    case MxElementSelect::convert: return element_convert(p, rounding, c, v, r);
    case MxElementSelect::ggml_argmin: return element_ggml_argmin(c, v);
  }
  return 0;
}

// ---------------------------------------------------------------------------
void check_recipe(const Recipe& recipe, const char* what) {
  if (recipe.format != Format::mxfp4)
    throw InputError(std::string(what) + ": recipe '" + std::string(recipe.id) + "' is " +
                     std::string(format_name(recipe.format)) + ", not mxfp4");
}

// The codes of a NaN block (MxNanBlockCodes).
// SIMD twin: the NaN-block branch of src/quant/simd/mxfp4-inl.h MxQuantizeBlock.
void nan_block_codes(const MxParams& p, Rounding rounding, const float* x, uint8_t* codes, const uint8_t* rbits) {
  switch (p.nan_block_codes) {
    case MxNanBlockCodes::torchao_cuda:
      // pytorch/ao 36027d82d mx_tensor.py:359 data_lp = data_hp * inv_scale with
      // a NaN inv_scale: 0x7FFFFFFF on CUDA. custom_fp_utils.py:93-123 takes it
      // through the "normal" branch: (0x7FFFFFFF + (-126 << 23) + 2^21 - 1 + 1) >> 22
      // = 260, kept as uint8 -> 4; sign bit 0.
      for (int i = 0; i < kMxBlock; ++i) codes[i] = 0x4;
      return;
    case MxNanBlockCodes::zero_lanes: {
      std::array<float, kMxBlock> cleaned;
      for (int i = 0; i < kMxBlock; ++i) cleaned[i] = is_poisoning_lane(p, x[i]) ? 0.0f : x[i];
      const uint8_t c = scale_code(p, block_amax(p, cleaned.data()));
      for (int i = 0; i < kMxBlock; ++i) codes[i] = element_code(p, rounding, c, cleaned[i], rbits ? rbits[i] : 0);
      return;
    }
  }
}

}  // namespace

// SIMD twin: src/quant/simd/mxfp4-inl.h MxQuantizeBlock (mxfp4.ggml: MxGgmlQuantize).
uint8_t mxfp4_quantize_block(const Recipe& recipe, Rounding rounding, const float* x, uint8_t* codes,
                             const uint8_t* rbits) {
  check_recipe(recipe, "mxfp4_quantize_block");
  check_rounding(recipe, rounding);
  if (rounding == Rounding::stochastic && rbits == nullptr)
    throw InputError("mxfp4_quantize_block: stochastic rounding needs one random byte per element");
  const MxParams& p = recipe.mx;

  // §4: amax = max_i |V_i|, as the recipe's library reduces it.
  const float amax = block_amax(p, x);

  // §4.1-§4.5 steps 1-3: the scale code. A NaN block (§4.0 "amax Inf / NaN")
  // has scale 0xFF, from a non-finite amax or from the rule itself (EVEN's
  // rounded amax overflowing); ggml's 0xFF is an ordinary exponent.
  const uint8_t c = is_nan_block(p, amax) ? kNanScale : scale_code(p, amax);
  if (c == kNanScale && p.element_select == MxElementSelect::convert) {
    nan_block_codes(p, rounding, x, codes, rbits);
    return kNanScale;
  }

  // §4.1 step 4: the element codes.
  for (int i = 0; i < kMxBlock; ++i) codes[i] = element_code(p, rounding, c, x[i], rbits ? rbits[i] : 0);
  return c;
}

// SIMD twin: src/quant/simd/mxfp4-inl.h MxDecodeBlock (mxfp4.ggml: MxGgmlDecodeBlock).
void mxfp4_decode_block(const Recipe& recipe, uint8_t scale, const uint8_t* codes, float* out) {
  check_recipe(recipe, "mxfp4_decode_block");
  // ggml decodes with its own table (GGML_E8M0_TO_FP32_HALF and doubled
  // kvalues): 0xFF is an ordinary exponent (2^128) and code 8 is +0. Its
  // quantizer can emit 0xFF for amax in [2^-126, 2^-125), so the recipe's own
  // decoder must be used to reproduce its dequantized values.
  if (recipe.mx.element_select == MxElementSelect::ggml_argmin) {
    for (int i = 0; i < kMxBlock; ++i) {
      const double value = (codes[i] & 0x7) == 0 ? 0.0 : static_cast<double>(e2m1_decode(codes[i]));
      out[i] = fp32_rne(std::ldexp(value, scale - kE8m0Bias));
    }
    return;
  }
  // §0 decode: a NaN scale makes the whole block NaN.
  if (scale == kNanScale) {
    for (int i = 0; i < kMxBlock; ++i) out[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  // v_i = fp32(2^(c-127) * e2m1(P_i)): exact in double, one rounding (overflow only).
  for (int i = 0; i < kMxBlock; ++i) {
    const double exact = std::ldexp(static_cast<double>(e2m1_decode(codes[i])), scale - kE8m0Bias);
    out[i] = fp32_rne(exact);
  }
}

// The reference fake quantization is, by definition, decode(quantize(x)).
// SIMD twin: src/quant/simd/mxfp4-inl.h MxFakeQuantBlock (mxfp4.ggml: MxGgmlFakeQuantBlock).
void mxfp4_fake_quant_block(const Recipe& recipe, Rounding rounding, const float* x, float* out,
                            const uint8_t* rbits) {
  std::array<uint8_t, kMxBlock> codes;
  const uint8_t scale = mxfp4_quantize_block(recipe, rounding, x, codes.data(), rbits);
  mxfp4_decode_block(recipe, scale, codes.data(), out);
}

}  // namespace fp4emu::reference
