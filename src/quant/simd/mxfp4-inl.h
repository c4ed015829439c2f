// Per-target MXFP4 block kernels: the same steps as
// src/quant/reference/mxfp4.cpp, one block of 32 at a time, lanes across the
// block. The scale steps run on the block amax broadcast to all lanes. Two
// families: the recipes whose elements are an E2M1 conversion (ocp, rceil,
// ceil, even, microxcaling; the scale rule and zero sign are parameters) and
// ggml's argmin (mxfp4.ggml).
#if defined(FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "codec-inl.h"
#include "ggml-inl.h"
#include "pack-inl.h"
#include "fp4emu/quant/recipe.hpp"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kMxBlock = 32;
constexpr uint8_t kMxNanScale = 0xFF;
using MxTag = hn::CappedTag<float, kMxBlock>;

// mxfp4.cpp block_amax (docs/spec/mxfp4.md §4): amax = max |V_i| as
// torch.amax reduces it. Integer max of the magnitude bits: a NaN lane wins
// (its bits are above +Inf), as in the reference. ggml's `if (amax <
// fabsf(v))` loop (kNanPropagating false) never takes a NaN: NaN lanes count
// as 0.
template <bool kNanPropagating = true>
HWY_INLINE IntVec<MxTag> MxAmaxBits(MxTag d, const float* HWY_RESTRICT x) {
  const hn::RebindToSigned<MxTag> di;
  auto acc = hn::Zero(di);
  for (int i = 0; i < kMxBlock; i += static_cast<int>(hn::Lanes(d))) {
    auto bits = AbsBits(d, hn::LoadU(d, x + i));
    if constexpr (!kNanPropagating) bits = hn::IfThenZeroElse(hn::Gt(bits, hn::Set(di, kInfBits)), bits);
    acc = hn::Max(acc, bits);
  }
  return hn::MaxOfLanes(di, acc);
}

// mxfp4.cpp log2f_floor: floor(RN_binary32(log2(a))) for the bits of a
// positive finite fp32 a, from the exponent and the distance J of the
// significand below the next power of two (the derivation and the Jmax table
// are in mxfp4.cpp). Once per block, on a scalar.
inline int MxLog2fFloor(uint32_t bits) {
  // static: a local constexpr array indexed at run time is built on the stack at every call.
  static constexpr std::array<uint32_t, 9> kJmax = {0, 0, 1, 2, 5, 11, 22, 44, 88};  // k = -1..7
  const uint32_t exp_field = (bits >> 23) & 0xFFu;
  const uint32_t fraction = bits & 0x7FFFFFu;
  int e;
  uint32_t significand;
  if (exp_field == 0) {
    const int top = 31 - std::countl_zero(fraction);
    significand = fraction << (23 - top);
    e = -149 + top;
  } else {
    significand = fraction | (1u << 23);
    e = static_cast<int>(exp_field) - 127;
  }
  const int n = e + 1;
  if (n == 0) return (1u << 24) - significand == 0 ? n : e;  // Jmax 0 for delta = 2^-150
  const uint32_t magnitude = n >= 1 ? static_cast<uint32_t>(n - 1) : static_cast<uint32_t>(-n);
  const int k = static_cast<int>(std::bit_width(magnitude)) - 1;
  return (1u << 24) - significand <= kJmax[static_cast<size_t>(k + 1)] ? n : e;
}

// mxfp4.cpp mxfp4_quantize_block: NaN amax, Inf amax where the recipe poisons
// on it, or (EVEN) an amax whose rounding bits + 2^21 reach the Inf exponent.
HWY_INLINE bool MxIsNanBlock(MxTag /*d*/, const MxParams& p, IntVec<MxTag> amax_bits) {
  const hn::RebindToSigned<MxTag> di;
  int32_t limit = p.inf_amax == MxInfAmax::nan_block ? kInfBits - 1 : kInfBits;
  if (p.scale_rule == MxScaleRule::even) limit = kInfBits - (1 << 21) - 1;
  return !hn::AllFalse(di, hn::Gt(amax_bits, hn::Set(di, limit)));
}

// mxfp4.cpp scale_code (docs/spec/mxfp4.md §4.1, §4.3-§4.5 steps 1-3): the
// E8M0 code from the amax bits of a block that is not a NaN block. Every
// rule clamps the shared exponent at -127 (code 0); none reaches 0xFF from a
// finite amax.
HWY_INLINE IntVec<MxTag> MxScaleCode(MxTag d, MxScaleRule rule, IntVec<MxTag> amax_bits) {
  const hn::RebindToSigned<MxTag> di;
  const auto zero = hn::Zero(di);
  const auto two = hn::Set(di, 2);
  switch (rule) {
    case MxScaleRule::ocp_floor:  // §4.1: c = (exponent field - 127) - 2 + 127
      return hn::Max(hn::Sub(hn::ShiftRight<23>(amax_bits), two), zero);
    case MxScaleRule::ceil: {  // §4.3: + [mantissa bits != 0]
      const auto fraction = hn::And(amax_bits, hn::Set(di, 0x7FFFFF));
      const auto up = hn::IfThenElseZero(hn::Ne(fraction, zero), hn::Set(di, 1));
      return hn::Max(hn::Sub(hn::Add(hn::ShiftRight<23>(amax_bits), up), two), zero);
    }
    case MxScaleRule::even: {  // §4.4: bits rounded half-up to one mantissa bit, then the floor rule
      const auto rounded = hn::Add(amax_bits, hn::Set(di, 1 << 21));
      return hn::Max(hn::Sub(hn::ShiftRight<23>(rounded), two), zero);
    }
    case MxScaleRule::rceil: {  // §4.5: cvt.rp.satfinite.ue8m0(fp32(amax * fp32(1/6)))
      const auto descale = hn::Mul(hn::BitCast(d, amax_bits), hn::Set(d, 0x1.555556p-3f));
      const auto bits = hn::BitCast(di, descale);
      // Round up to a power of two: the exponent field, + 1 if any fraction
      // bit is set; Inf and the top binade saturate to 0xFE. At or below
      // 2^-127 (bits 0x00400000, the smallest E8M0 value) the code is 0.
      const auto up = hn::Min(hn::ShiftRight<23>(hn::Add(bits, hn::Set(di, 0x7FFFFF))), hn::Set(di, 254));
      return hn::IfThenElseZero(hn::Gt(bits, hn::Set(di, 0x00400000)), up);
    }
    case MxScaleRule::log2f_floor: {  // §4.2 (microxcaling): floor(log2f(amax or 2^-126 for 0)) - 2, clamped
      const uint32_t bits = static_cast<uint32_t>(hn::GetLane(amax_bits));
      const int s = MxLog2fFloor(bits == 0 ? 0x00800000u : bits) - 2;
      return hn::Set(di, std::max(s, -127) + 127);  // s <= 126 for a finite amax
    }
  }
  return zero;
}

// One block: y = V * 2^(127-c) (exact: a power-of-two scaling whose result is
// either exact or below 2^-126, where every element rounding gives a signed
// zero), then the E2M1 grid. Returns the scale code in every lane.
struct MxBlock {
  IntVec<MxTag> code;
  hn::Vec<MxTag> to_unit;  // 2^(127-c)
  hn::Vec<MxTag> unit;     // 2^(c-127)
};
HWY_INLINE MxBlock MxBlockScale(MxTag d, MxScaleRule rule, IntVec<MxTag> amax_bits) {
  const hn::RebindToSigned<MxTag> di;
  MxBlock b;
  b.code = MxScaleCode(d, rule, amax_bits);
  b.to_unit = Pow2FromBiased(d, hn::Sub(hn::Set(di, 254), b.code));
  b.unit = Pow2FromBiased(d, b.code);
  return b;
}

// y = V * 2^(127-c), whose sign is the code's (an underflow to -0 keeps it);
// microxcaling's torch.sign (kTorchSign) makes a zero quotient +0
// (mxfp4.cpp element_convert).
template <bool kTorchSign>
HWY_INLINE hn::Vec<MxTag> MxScaled(MxTag d, const MxBlock& b, hn::Vec<MxTag> v) {
  const auto y = hn::Mul(v, b.to_unit);
  if constexpr (kTorchSign) return hn::IfThenZeroElse(hn::Eq(y, hn::Zero(d)), y);
  return y;
}

// mxfp4.cpp mxfp4_fake_quant_block for the convert recipes.
// rbits: the block's random bytes (Rounding::stochastic), else unread.
template <Rounding R>
HWY_INLINE void MxFakeQuantBlock(const MxParams& p, const float* HWY_RESTRICT x, float* HWY_RESTRICT y,
                                 const uint8_t* HWY_RESTRICT rbits) {
  const MxTag d;
  const hn::RebindToSigned<MxTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const auto amax_bits = MxAmaxBits(d, x);
  if (HWY_UNLIKELY(MxIsNanBlock(d, p, amax_bits))) {  // §0: a NaN scale decodes to NaN
    for (int i = 0; i < kMxBlock; i += n) hn::StoreU(hn::BitCast(d, hn::Set(di, kQuietNanBits)), d, y + i);
    return;
  }
  const MxBlock b = MxBlockScale(d, p.scale_rule, amax_bits);
  WithFlag(p.zero_sign == MxZeroSign::torch_sign, [&](auto torch_sign) {
    for (int i = 0; i < kMxBlock; i += n) {
      const auto scaled = MxScaled<decltype(torch_sign)::value>(d, b, hn::LoadU(d, x + i));
      const auto grid = E2m1Grid<R>(d, hn::Abs(scaled), RandomBytes<R>(d, rbits, i));
      // Decode: fp32(±e2m1 * 2^(c-127)), one rounding (overflow to Inf only).
      hn::StoreU(hn::Mul(hn::CopySignToAbs(grid, scaled), b.unit), d, y + i);
    }
  });
}

// Writes the block's 32 codes (sign in bit 3) of a block that is not a NaN
// block, nibble-packed in `order` (16 bytes at packed) from registers
// (PackCodeVectors: no byte store read back wider); returns the E8M0 code.
template <Rounding R>
HWY_INLINE uint8_t MxQuantizeNumericBlock(const MxParams& p, IntVec<MxTag> amax_bits, const float* HWY_RESTRICT x,
                                          NibbleOrder order, uint8_t* HWY_RESTRICT packed,
                                          const uint8_t* HWY_RESTRICT rbits) {
  const MxTag d;
  const hn::RebindToSigned<MxTag> di;
  const MxBlock b = MxBlockScale(d, p.scale_rule, amax_bits);
  IntVec<MxTag> codes[kMxBlock / hn::MaxLanes(d)];
  // The zero-sign rule tested per vector: hoisted as in MxFakeQuantBlock, the
  // two loops held the codes less well (mxfp4.ocp 5.5 -> 5.8 AVX2
  // instructions per value).
  for (int i = 0; i < kMxBlock; i += static_cast<int>(hn::Lanes(d))) {
    const auto v = hn::LoadU(d, x + i);
    const auto scaled = p.zero_sign == MxZeroSign::torch_sign ? MxScaled<true>(d, b, v) : MxScaled<false>(d, b, v);
    const auto grid = E2m1Grid<R>(d, hn::Abs(scaled), RandomBytes<R>(d, rbits, i));
    const auto sign = hn::And(hn::ShiftRight<28>(hn::BitCast(di, scaled)), hn::Set(di, 8));
    codes[i / hn::Lanes(d)] = hn::Or(E2m1Code(d, grid), sign);
  }
  PackCodeVectors<kMxBlock>(di, order, codes, packed);
  return static_cast<uint8_t>(hn::GetLane(b.code));
}

// mxfp4.cpp mxfp4_quantize_block for the convert recipes. `packed`: the
// block's 16 bytes in the packed row (nibble order `order`).
template <Rounding R>
HWY_INLINE uint8_t MxQuantizeBlock(const MxParams& p, const float* HWY_RESTRICT x, NibbleOrder order,
                                   uint8_t* HWY_RESTRICT packed, const uint8_t* HWY_RESTRICT rbits) {
  const MxTag d;
  const auto amax_bits = MxAmaxBits(d, x);
  if (HWY_LIKELY(!MxIsNanBlock(d, p, amax_bits)))
    return MxQuantizeNumericBlock<R>(p, amax_bits, x, order, packed, rbits);
  if (p.nan_block_codes == MxNanBlockCodes::torchao_cuda) {  // mxfp4.cpp nan_block_codes: every code 0x4
    std::fill(packed, packed + kMxBlock / 2, uint8_t{0x44});  // in any nibble order
    return kMxNanScale;
  }
  // mxfp4.cpp convention: the codes of the block with its poisoning lanes as +0.
  alignas(64) float cleaned[kMxBlock];
  for (int i = 0; i < kMxBlock; ++i) {
    const bool poison = std::isnan(x[i]) || (std::isinf(x[i]) && p.inf_amax == MxInfAmax::nan_block);
    cleaned[i] = poison ? 0.0f : x[i];
  }
  MxQuantizeNumericBlock<R>(p, MxAmaxBits(d, cleaned), cleaned, order, packed, rbits);
  return kMxNanScale;
}

// ---- mxfp4.ggml -----------------------------------------------------------------

// mxfp4.cpp scale_log2f_floor with MxScaleRange::x86_uint8_wrap: amax > 0 ?
// (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0, the cast as x86-64 does it
// (+Inf -> INT32_MIN -> 0x00; the finite values -24..252 keep their low byte).
HWY_INLINE uint8_t MxGgmlScaleCode(uint32_t amax_bits) {
  if (amax_bits == 0 || amax_bits >= static_cast<uint32_t>(kInfBits)) return 0x00;
  return static_cast<uint8_t>(static_cast<uint32_t>(MxLog2fFloor(amax_bits) - 2 + 127) & 0xFFu);
}

// mxfp4.cpp mxfp4_quantize_block for mxfp4.ggml: the scale code, and the
// block's codes (sign in bit 3) in registers, by ggml's argmin
// (element_ggml_argmin) with unit d = GGML_E8M0_TO_FP32_HALF(c) = rows[c].d.
// The row is chosen from the largest |x| bits with NaN above +Inf, which give
// scale code 0x00 (as +Inf does), whose row's limit is below them: a block
// with NaN or Inf, or beyond its row's thresholds, takes the literal argmin
// with the scale code of ggml's NaN-skipping amax.
HWY_INLINE uint8_t MxGgmlCodes(const GgmlArgminRow* HWY_RESTRICT rows, const float* HWY_RESTRICT x,
                               IntVec<MxTag>* HWY_RESTRICT codes) {
  const MxTag d;
  const int n = static_cast<int>(hn::Lanes(d));
  const auto max_bits = static_cast<uint32_t>(hn::GetLane(MxAmaxBits(d, x)));
  uint8_t c = MxGgmlScaleCode(max_bits);
  if (HWY_LIKELY(max_bits < rows[c].limit_bits)) {
    const GgmlArgminConstants<MxTag> argmin(d);
    for (int i = 0; i < kMxBlock; i += n) codes[i / n] = GgmlArgmin(d, argmin, rows[c], hn::LoadU(d, x + i));
    return c;
  }
  c = MxGgmlScaleCode(static_cast<uint32_t>(hn::GetLane(MxAmaxBits<false>(d, x))));
  for (int i = 0; i < kMxBlock; i += n) codes[i / n] = GgmlArgminLiteral(d, rows[c].d, hn::LoadU(d, x + i));
  return c;
}

// The codes packed in `order` (16 bytes at packed); returns the scale code.
HWY_INLINE uint8_t MxGgmlQuantize(const GgmlArgminRow* HWY_RESTRICT rows, const float* HWY_RESTRICT x,
                                  NibbleOrder order, uint8_t* HWY_RESTRICT packed) {
  const MxTag d;
  IntVec<MxTag> codes[kMxBlock / hn::MaxLanes(d)];
  const uint8_t c = MxGgmlCodes(rows, x, codes);
  PackCodeVectors<kMxBlock>(hn::RebindToSigned<MxTag>(), order, codes, packed);
  return c;
}

// mxfp4.cpp mxfp4_fake_quant_block for mxfp4.ggml: each code's value as
// MxGgmlDecodeBlock gives it (GgmlCodeValue: the argmin gives no code 0x8).
HWY_INLINE void MxGgmlFakeQuantBlock(const GgmlArgminRow* HWY_RESTRICT rows, const float* HWY_RESTRICT x,
                                     float* HWY_RESTRICT y) {
  const MxTag d;
  const int n = static_cast<int>(hn::Lanes(d));
  IntVec<MxTag> codes[kMxBlock / hn::MaxLanes(d)];
  const auto unit = hn::Set(d, rows[MxGgmlCodes(rows, x, codes)].d);
  for (int i = 0; i < kMxBlock; i += n) hn::StoreU(GgmlCodeValue(d, codes[i / n], unit), d, y + i);
}

// mxfp4_decode_block for mxfp4.ggml, ggml's own decoder: code & 7 == 0 is +0,
// else fp32(±e2m1 * 2^(c-127)) with 0xFF an ordinary exponent (2^128: the
// product is formed as (e2m1 * 2^127) * 2, which overflows exactly where the
// exact value does).
HWY_INLINE void MxGgmlDecodeBlock(uint8_t scale, const uint8_t* HWY_RESTRICT codes, float* HWY_RESTRICT y) {
  const MxTag d;
  const hn::RebindToSigned<MxTag> di;
  const auto unit = Pow2FromBiased(d, hn::Set(di, std::min<int>(scale, 254)));
  const auto high = hn::Set(d, scale == 255 ? 2.0f : 1.0f);
  for (int i = 0; i < kMxBlock; i += static_cast<int>(hn::Lanes(d))) {
    const auto c = LoadCodeBytes(d, codes + i);
    const auto m = hn::And(c, hn::Set(di, 7));
    const auto magnitude = E2m1Value(d, m);
    const auto sign = hn::BitCast(d, hn::ShiftLeft<28>(hn::IfThenZeroElse(hn::Eq(m, hn::Zero(di)),
                                                                          hn::And(c, hn::Set(di, 8)))));
    hn::StoreU(hn::Mul(hn::Mul(hn::Or(magnitude, sign), unit), high), d, y + i);
  }
}

// mxfp4_decode_block for the convert recipes: 0xFF -> NaN block, else
// fp32(±e2m1(P) * 2^(c-127)).
HWY_INLINE void MxDecodeBlock(uint8_t scale, const uint8_t* HWY_RESTRICT codes, float* HWY_RESTRICT y) {
  const MxTag d;
  const hn::RebindToSigned<MxTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  if (scale == kMxNanScale) {
    for (int i = 0; i < kMxBlock; i += n) hn::StoreU(hn::BitCast(d, hn::Set(di, kQuietNanBits)), d, y + i);
    return;
  }
  const auto unit = Pow2FromBiased(d, hn::Set(di, scale));
  for (int i = 0; i < kMxBlock; i += n) {
    const auto c = LoadCodeBytes(d, codes + i);
    const auto magnitude = E2m1Value(d, hn::And(c, hn::Set(di, 7)));
    const auto sign = hn::BitCast(d, hn::ShiftLeft<28>(hn::And(c, hn::Set(di, 8))));
    hn::StoreU(hn::Mul(hn::Or(magnitude, sign), unit), d, y + i);
  }
}

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_
