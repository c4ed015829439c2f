// Per-target MXFP4 block kernels for the recipes whose elements are an E2M1
// conversion (mxfp4.ocp, mxfp4.rceil, mxfp4.ceil, mxfp4.even): the same steps
// as src/quant/reference/mxfp4.cpp, one block of 32 at a time, lanes across
// the block. The scale steps run on the block amax broadcast to all lanes.
#if defined(FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_MXFP4_INL_H_
#endif

#include <cmath>
#include <cstdint>

#include "codec-inl.h"
#include "fp4emu/quant/recipe.hpp"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kMxBlock = 32;
constexpr uint8_t kMxNanScale = 0xFF;
using MxTag = hn::CappedTag<float, kMxBlock>;

// mxfp4.md §4: amax = max |V_i| as torch.amax reduces it. Integer max of the
// magnitude bits: a NaN lane wins (its bits are above +Inf), as in the reference.
HWY_INLINE IntVec<MxTag> MxAmaxBits(MxTag d, const float* HWY_RESTRICT x) {
  const hn::RebindToSigned<MxTag> di;
  auto acc = hn::Zero(di);
  for (int i = 0; i < kMxBlock; i += static_cast<int>(hn::Lanes(d))) acc = hn::Max(acc, AbsBits(d, hn::LoadU(d, x + i)));
  return hn::MaxOfLanes(di, acc);
}

// mxfp4.cpp mxfp4_quantize_block: NaN amax, Inf amax where the recipe poisons
// on it, or (EVEN) an amax whose rounding bits + 2^21 reach the Inf exponent.
HWY_INLINE bool MxIsNanBlock(MxTag /*d*/, const MxParams& p, IntVec<MxTag> amax_bits) {
  const hn::RebindToSigned<MxTag> di;
  int32_t limit = p.inf_amax == MxInfAmax::nan_block ? kInfBits - 1 : kInfBits;
  if (p.scale_rule == MxScaleRule::even) limit = kInfBits - (1 << 21) - 1;
  return !hn::AllFalse(di, hn::Gt(amax_bits, hn::Set(di, limit)));
}

// mxfp4.md §4.1, §4.3-§4.5 steps 1-3: the E8M0 code from the amax bits of a
// block that is not a NaN block. Every rule clamps the shared exponent at
// -127 (code 0); none reaches 0xFF from a finite amax.
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
    case MxScaleRule::log2f_floor: break;  // no fast path (see driver.cpp)
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

template <Rounding R>
HWY_INLINE void MxFakeQuantBlock(const MxParams& p, const float* HWY_RESTRICT x, float* HWY_RESTRICT y) {
  const MxTag d;
  const hn::RebindToSigned<MxTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const auto amax_bits = MxAmaxBits(d, x);
  if (HWY_UNLIKELY(MxIsNanBlock(d, p, amax_bits))) {  // §0: a NaN scale decodes to NaN
    for (int i = 0; i < kMxBlock; i += n) hn::StoreU(hn::BitCast(d, hn::Set(di, kQuietNanBits)), d, y + i);
    return;
  }
  const MxBlock b = MxBlockScale(d, p.scale_rule, amax_bits);
  for (int i = 0; i < kMxBlock; i += n) {
    const auto v = hn::LoadU(d, x + i);
    const auto grid = E2m1Grid<R>(d, hn::Abs(hn::Mul(v, b.to_unit)));
    // Decode: fp32(±e2m1 * 2^(c-127)), one rounding (overflow to Inf only).
    hn::StoreU(hn::Mul(hn::CopySignToAbs(grid, v), b.unit), d, y + i);
  }
}

// Writes 32 codes (sign in bit 3) of a block that is not a NaN block; returns the E8M0 code.
template <Rounding R>
HWY_INLINE uint8_t MxQuantizeNumericBlock(const MxParams& p, IntVec<MxTag> amax_bits, const float* HWY_RESTRICT x,
                                          uint8_t* HWY_RESTRICT codes) {
  const MxTag d;
  const hn::RebindToSigned<MxTag> di;
  const MxBlock b = MxBlockScale(d, p.scale_rule, amax_bits);
  for (int i = 0; i < kMxBlock; i += static_cast<int>(hn::Lanes(d))) {
    const auto v = hn::LoadU(d, x + i);
    const auto grid = E2m1Grid<R>(d, hn::Abs(hn::Mul(v, b.to_unit)));
    const auto sign = hn::And(hn::ShiftRight<28>(hn::BitCast(di, v)), hn::Set(di, 8));
    StoreCodeBytes(d, hn::Or(E2m1Code(d, grid), sign), codes + i);
  }
  return static_cast<uint8_t>(hn::GetLane(b.code));
}

template <Rounding R>
HWY_INLINE uint8_t MxQuantizeBlock(const MxParams& p, const float* HWY_RESTRICT x, uint8_t* HWY_RESTRICT codes) {
  const MxTag d;
  const auto amax_bits = MxAmaxBits(d, x);
  if (HWY_LIKELY(!MxIsNanBlock(d, p, amax_bits))) return MxQuantizeNumericBlock<R>(p, amax_bits, x, codes);
  if (p.nan_block_codes == MxNanBlockCodes::torchao_cuda) {  // mxfp4.cpp nan_block_codes
    for (int i = 0; i < kMxBlock; ++i) codes[i] = 0x4;
    return kMxNanScale;
  }
  // mxfp4.cpp convention: the codes of the block with its poisoning lanes as +0.
  alignas(64) float cleaned[kMxBlock];
  for (int i = 0; i < kMxBlock; ++i) {
    const bool poison = std::isnan(x[i]) || (std::isinf(x[i]) && p.inf_amax == MxInfAmax::nan_block);
    cleaned[i] = poison ? 0.0f : x[i];
  }
  MxQuantizeNumericBlock<R>(p, MxAmaxBits(d, cleaned), cleaned, codes);
  return kMxNanScale;
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
