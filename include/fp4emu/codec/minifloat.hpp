#pragma once
// One generic codec for every small binary float format fp4emu uses: element
// types (E2M1, S1P2), scale types (E8M0, UE4M3, E4M3, E6M2) and the 16-bit
// formats (BF16, FP16). Formats differ only by their traits, never by code
// (the ml_dtypes / SoftFloat idea).
//
// Encoding is exact: the input double is split into integer significand and
// exponent, rounded on the target grid with integer arithmetic, then checked
// for overflow. Doubles hold every fp32/bf16/fp16 value exactly, so encoding
// an fp32 value through this API is a single rounding.
#include <cstdint>
#include <string_view>

#include "fp4emu/codec/rounding.hpp"

namespace fp4emu {

// How a format spends its top codes.
enum class SpecialCodes : uint8_t {
  none,      // every code is a number (E2M1, S1P2): no Inf, no NaN
  ieee,      // exponent all ones = Inf (mantissa 0) or NaN (BF16, FP16)
  fn,        // only exponent and mantissa all ones = NaN, no Inf (OCP E4M3 "fn")
  top_code,  // only the all-ones code is NaN, no Inf (E8M0, E6M2)
};

struct MinifloatTraits {
  std::string_view name;
  int exp_bits;
  int man_bits;
  int bias;
  bool is_signed;
  // true: exponent field 0 holds zero and subnormals m*2^(1-bias-man_bits).
  // false: exponent field 0 is an ordinary binade; the format has no zero
  // (E8M0: code 0 = 2^-127, E6M2: code 0 = 2^-48).
  bool has_subnormals;
  SpecialCodes specials;
};

// What to do with a finite result beyond the largest finite value (and with
// infinite inputs in formats without Inf).
enum class Overflow : uint8_t {
  saturate,    // clamp to the largest finite magnitude, sign kept ("satfinite")
  to_special,  // IEEE: Inf (or max finite under rtz); fn/top_code: NaN
};

inline constexpr MinifloatTraits kE2M1{"e2m1", 2, 1, 1, true, true, SpecialCodes::none};
// HiF4 element: sign + 3-bit fixed point q/4, numerically E1M2 with bias 1.
inline constexpr MinifloatTraits kS1P2{"s1p2", 1, 2, 1, true, true, SpecialCodes::none};
inline constexpr MinifloatTraits kE4M3{"e4m3", 4, 3, 7, true, true, SpecialCodes::fn};
inline constexpr MinifloatTraits kUE4M3{"ue4m3", 4, 3, 7, false, true, SpecialCodes::fn};
inline constexpr MinifloatTraits kE8M0{"e8m0", 8, 0, 127, false, false, SpecialCodes::top_code};
inline constexpr MinifloatTraits kE6M2{"e6m2", 6, 2, 48, false, false, SpecialCodes::top_code};
inline constexpr MinifloatTraits kBF16{"bf16", 8, 7, 127, true, true, SpecialCodes::ieee};
inline constexpr MinifloatTraits kFP16{"fp16", 5, 10, 15, true, true, SpecialCodes::ieee};

// Number of bits in a code (sign included when the format is signed).
constexpr int code_bits(const MinifloatTraits& t) {
  return (t.is_signed ? 1 : 0) + t.exp_bits + t.man_bits;
}
// Largest finite magnitude code (sign bit clear).
uint32_t max_finite_code(const MinifloatTraits& t);
// Canonical NaN code (positive); only for formats that have NaN.
uint32_t nan_code(const MinifloatTraits& t);
bool is_nan_code(const MinifloatTraits& t, uint32_t code);

// Exact value of a code (NaN for NaN codes, +-Inf for IEEE Inf).
double decode(const MinifloatTraits& t, uint32_t code);

// Round x onto the format's grid.
// - Unsigned formats ignore the sign of x (as CUDA's E8M0/UE4M3 conversions do).
// - Formats without zero (E8M0, E6M2) map every magnitude below the smallest
//   value after rounding, including 0, to code 0 (the smallest value).
// - NaN of either sign gives the format's canonical positive NaN code (CUDA's
//   float->E4M3 gives 0x7F for -NaN); in formats without NaN it gives the
//   positive largest finite code (the CUDA __nv_cvt_float_to_fp4 rule);
//   recipes with another NaN rule handle NaN before calling.
// - Signed zero keeps its sign; values that round to zero keep their sign.
// - Overflow is IEEE's: the result rounded with an unbounded exponent range
//   exceeds the largest finite value (E4M3: 464 is a tie that rounds to 448,
//   anything above rounds to 480 and overflows).
// - RNE ties go to the even mantissa (zero counts as even). E8M0 has no
//   mantissa bit: its tie 1.5*2^k goes up to 2^(k+1) (the implicit bit counts
//   as odd, as in ml_dtypes float8_e8m0fnu).
// Rounding::stochastic is refused here (std::invalid_argument): it needs bits.
uint32_t encode(const MinifloatTraits& t, double x, Rounding r, Overflow overflow);
// Stochastic rounding (Rounding::stochastic) with the random byte `rbits`;
// NaN, Inf, zero and overflow as encode().
uint32_t encode_stochastic(const MinifloatTraits& t, double x, uint8_t rbits, Overflow overflow);

// ---- Named conversions, in the field's words --------------------------------

// E2M1 (MXFP4/NVFP4 element). Always saturating at +-6 (no Inf/NaN codes).
inline uint8_t e2m1_encode(double y, Rounding r) {
  return static_cast<uint8_t>(encode(kE2M1, y, r, Overflow::saturate));
}
// Stochastic rounding with random byte r; saturating (cvt.rs.satfinite).
inline uint8_t e2m1_encode_sr(double y, uint8_t r) {
  return static_cast<uint8_t>(encode_stochastic(kE2M1, y, r, Overflow::saturate));
}
inline float e2m1_decode(uint8_t code) { return static_cast<float>(decode(kE2M1, code & 0xF)); }

// S1P2 (HiF4 element, magnitude q/4, q = 0..7). Saturating at +-1.75.
inline uint8_t s1p2_encode(double y, Rounding r) {
  return static_cast<uint8_t>(encode(kS1P2, y, r, Overflow::saturate));
}
inline uint8_t s1p2_encode_sr(double y, uint8_t r) {
  return static_cast<uint8_t>(encode_stochastic(kS1P2, y, r, Overflow::saturate));
}
inline float s1p2_decode(uint8_t code) { return static_cast<float>(decode(kS1P2, code & 0xF)); }

// E8M0 (MX block scale): value 2^(c-127), 0xFF = NaN.
inline uint8_t e8m0_encode(double x, Rounding r, Overflow o) {
  return static_cast<uint8_t>(encode(kE8M0, x, r, o));
}
// fp32 value of an E8M0 code (code 0 is the fp32 subnormal 2^-127; 0xFF is NaN).
inline float e8m0_decode(uint8_t code) { return static_cast<float>(decode(kE8M0, code)); }

// UE4M3 / E4M3 (NVFP4 block scale).
inline uint8_t e4m3_encode(double x, Rounding r, Overflow o) {
  return static_cast<uint8_t>(encode(kE4M3, x, r, o));
}
inline float e4m3_decode(uint8_t code) { return static_cast<float>(decode(kE4M3, code)); }
inline uint8_t ue4m3_encode(double x, Rounding r, Overflow o) {
  return static_cast<uint8_t>(encode(kUE4M3, x, r, o));
}
inline float ue4m3_decode(uint8_t code) { return static_cast<float>(decode(kUE4M3, code & 0x7F)); }

// E6M2 (HiF4 level-1 scale): value 2^(E-48)*(1+M/4), 0xFF = NaN, no zero.
inline uint8_t e6m2_encode(double x, Rounding r, Overflow o) {
  return static_cast<uint8_t>(encode(kE6M2, x, r, o));
}
inline float e6m2_decode(uint8_t code) { return static_cast<float>(decode(kE6M2, code)); }
// bf16 reciprocal of an E6M2 code (the RCPE6M2 conversion of the PTO ISA and
// the E6M2_REC table): 2^-(E-48) * {1, 205/256, 171/256, 146/256}[M].
// NaN for 0xFF.
float e6m2_reciprocal_bf16(uint8_t code);

// ---- 16-bit formats ---------------------------------------------------------
uint16_t bf16_encode(double x, Rounding r = Rounding::rne);  // IEEE overflow (Inf)
float bf16_decode(uint16_t bits);
uint16_t fp16_encode(double x, Rounding r = Rounding::rne);
float fp16_decode(uint16_t bits);

// Intermediate roundings the recipes write out: round to bf16 / fp16 and widen
// back to fp32 (exact).
inline float bf16_rne(double x) { return bf16_decode(bf16_encode(x, Rounding::rne)); }
inline float fp16_rne(double x) { return fp16_decode(fp16_encode(x, Rounding::rne)); }
// True when x is exactly representable in bf16 (NaN and Inf count as representable).
bool is_bf16_exact(float x);

}  // namespace fp4emu
