// Per-target HiF4 block kernels for hif4.v14 (hif4.md §6.1, fp32 products)
// and hif4.a6 (§6.5, every intermediate a bf16): the steps of v14_steps and
// a6_steps in src/quant/reference/hif4.cpp, one block of 64 at a time.
//
// Layouts: the group maxima and the scale steps run with lanes across the 16
// L3 groups (LoadInterleaved4 puts element 4k+i of the block in lane k of
// vector i), the elements with lanes across the block after each group's
// factors are spread to its four elements (StoreInterleaved4 of one vector
// four times). Both are capped descriptors, so 1, 4, 8 or 16 lanes all run
// the same code.
#if defined(FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_
#endif

#include <cmath>
#include <cstdint>

#include "codec-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kHif4Block = 64;
constexpr int kHif4L3Groups = 16;  // one L3 bit per 4 adjacent elements
constexpr uint32_t kHif4NanScale = 0xFF;
constexpr float kHif4C7 = 0.142578125f;  // bf16(1/7), hif4.md notation c7
constexpr float kHif4ScaleMin = 0x1p-48f;
constexpr float kHif4ScaleMax = 49152.0f;

using Hif4ElementTag = hn::CappedTag<float, kHif4Block>;
using Hif4L3Tag = hn::CappedTag<float, kHif4L3Groups>;

// What the scale steps leave for the element step.
struct Hif4Steps {
  alignas(64) float m4[kHif4L3Groups];              // max |x| of each L3 group
  alignas(64) float element_factor[kHif4Block];     // v14: 2^-(b+c); a6: bf16(Ea_rec * 2^-(b+c))
  alignas(64) float value_factor[kHif4Block];       // E6M2(S) * 2^(b+c-2): value = q * factor
  float reciprocal = 0.0f;                          // r = bf16(1/S)
  uint32_t word = 0;                                // canonical LSB-first scale word
};

// hif4.md §6.1 step 1 with the non-finite policy (hif4.cpp prepare_lanes):
// v14 (torch) NaN lanes count as 0 and make the block NaN, Inf stays; a6
// (poison) NaN and Inf lanes count as 0 and make the block NaN.
// Returns true for a NaN block.
template <bool kA6>
HWY_INLINE bool Hif4GroupMaxima(const float* HWY_RESTRICT x, float* HWY_RESTRICT m4) {
  const Hif4L3Tag d;
  const hn::RebindToSigned<Hif4L3Tag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const auto limit = hn::Set(di, kA6 ? kInfBits - 1 : kInfBits);
  auto poisoned = hn::Zero(di);
  for (int k = 0; k < kHif4L3Groups; k += n) {
    hn::Vec<Hif4L3Tag> a0, a1, a2, a3;
    hn::LoadInterleaved4(d, x + 4 * k, a0, a1, a2, a3);
    auto lane_max = [&](hn::Vec<Hif4L3Tag> a) {
      const auto bits = AbsBits(d, a);
      const auto bad = hn::Gt(bits, limit);
      poisoned = hn::Or(poisoned, hn::VecFromMask(di, bad));
      return hn::IfThenZeroElse(bad, bits);
    };
    const auto m = hn::Max(hn::Max(lane_max(a0), lane_max(a1)), hn::Max(lane_max(a2), lane_max(a3)));
    hn::Store(hn::BitCast(d, m), d, m4 + k);
  }
  return !hn::AllFalse(di, hn::Ne(poisoned, hn::Zero(di)));
}

template <class D, class M>
HWY_INLINE uint32_t MaskBits(D d, M mask) {
  uint8_t bytes[8] = {};
  hn::StoreMaskBits(d, mask, bytes);
  return static_cast<uint32_t>(bytes[0]) | static_cast<uint32_t>(bytes[1]) << 8;
}

template <class D>
HWY_INLINE hn::Mask<D> MaskFromBits(D d, uint32_t bits) {
  const uint8_t bytes[8] = {static_cast<uint8_t>(bits), static_cast<uint8_t>(bits >> 8)};
  return hn::LoadMaskBits(d, bytes);
}

// Bits 0, 2, 4, ... 14 of x moved to bits 0..7.
constexpr uint32_t EvenBits(uint32_t x) {
  x &= 0x5555u;
  x = (x | x >> 1) & 0x3333u;
  x = (x | x >> 2) & 0x0F0Fu;
  return (x | x >> 4) & 0x00FFu;
}

// hif4.md §6.1 steps 1-6 (§6.5 steps 1-6) from the group maxima in s.m4,
// lanes across the 16 L3 groups. Step 5 is taken per L3 group: the fp32 (and
// bf16) product is monotone in m, so [max(m4[2j], m4[2j+1]) r >= 4] is the OR
// of the two groups' [m4 r >= 4], combined on the bits. No vector leaves
// registers in another width than it is read back (no store-forwarding stalls).
template <bool kA6>
HWY_INLINE void Hif4Scale(Hif4Steps& s) {
  const Hif4L3Tag d;
  const hn::RebindToSigned<Hif4L3Tag> di;
  const int n = static_cast<int>(hn::Lanes(d));

  // step 1: M = max m4 (= max m8).
  auto block_max = hn::Zero(d);
  for (int k = 0; k < kHif4L3Groups; k += n) block_max = hn::Max(block_max, hn::Load(d, s.m4 + k));
  block_max = hn::MaxOfLanes(d, block_max);

  // steps 2-3: s0 = bf16(fp32(M * c7)) (a6: bf16(M * c7), the same for bf16 M),
  // clamped to [2^-48, 49152] (a6: the saturating conversion, same codes), E6M2 RNE.
  auto s0 = Bf16Rne(d, hn::Mul(block_max, hn::Set(d, kHif4C7)));
  s0 = hn::Min(hn::Max(s0, hn::Set(d, kHif4ScaleMin)), hn::Set(d, kHif4ScaleMax));
  const auto scale = E6m2RneGrid(d, s0);
  const auto scale_code = E6m2Code(d, scale);
  // step 4: r = bf16(1/S), the RCPE6M2 table.
  const auto r = E6m2ReciprocalBf16(d, scale_code);
  uint32_t word = static_cast<uint32_t>(hn::GetLane(scale_code));

  // fp32(m4[k] * r) (a6: rounded to bf16).
  auto ratio_of = [&](int k) {
    auto ratio = hn::Mul(hn::Load(d, s.m4 + k), r);
    if constexpr (kA6) ratio = Bf16Rne(d, ratio);
    return ratio;
  };

  // step 5: b_j = [fp32(m8[j] * r) >= 4].
  uint32_t at_least_4 = 0;
  for (int k = 0; k < kHif4L3Groups; k += n) at_least_4 |= MaskBits(d, hn::Ge(ratio_of(k), hn::Set(d, 4.0f))) << k;
  const uint32_t b_even = (at_least_4 | at_least_4 >> 1) & 0x5555u;  // b_j at bit 2j
  const uint32_t b_of_l3 = b_even | b_even << 1;                    // b of each L3 group's L2 group
  word |= EvenBits(b_even) << 8;

  // step 6: c_k = [fp32(m4[k] * r) / 2^b >= 2] (the division by 2^b is exact
  // wherever the comparison can hold), then the per-group factors.
  const auto scale_value = hn::Set(d, hn::GetLane(scale));
  const auto one = hn::Set(di, 1);
  for (int k = 0; k < kHif4L3Groups; k += n) {
    const auto b = MaskFromBits(d, b_of_l3 >> k);
    const auto c = hn::Ge(ratio_of(k), hn::IfThenElse(b, hn::Set(d, 4.0f), hn::Set(d, 2.0f)));
    word |= MaskBits(d, c) << (16 + k);
    const auto bc = hn::Add(hn::IfThenElseZero(hn::RebindMask(di, b), one), hn::IfThenElseZero(hn::RebindMask(di, c), one));
    auto element_factor = Pow2FromBiased(d, hn::Sub(hn::Set(di, 127), bc));  // 2^-(b+c)
    // a6 §6.5 step 6: bf16(Ea_rec * bf16(2^-b * 2^-c)), exact (no bf16 underflow: Ea_rec >= 2^-16).
    if constexpr (kA6) element_factor = hn::Mul(r, element_factor);
    const auto value_factor = hn::Mul(scale_value, Pow2FromBiased(d, hn::Add(bc, hn::Set(di, 125))));
    hn::StoreInterleaved4(element_factor, element_factor, element_factor, element_factor, d,
                          s.element_factor + 4 * k);
    hn::StoreInterleaved4(value_factor, value_factor, value_factor, value_factor, d, s.value_factor + 4 * k);
  }
  s.reciprocal = hn::GetLane(r);
  s.word = word;
}

// a6 §6.5 step 7: y = bf16(x * scale). x and scale are bf16, so the fp32
// product is exact but for fp32 underflow, as in the pto-isa golden.
HWY_INLINE hn::Vec<Hif4ElementTag> Hif4A6Product(const Hif4Steps& s, hn::Vec<Hif4ElementTag> v, int i) {
  const Hif4ElementTag d;
  return Bf16Rne(d, hn::Mul(v, hn::Load(d, s.element_factor + i)));
}

// hif4.md §6.1 step 7 (§6.5 steps 6-7): the magnitude code q of each lane, as a float 0..7.
template <bool kA6, Rounding R>
HWY_INLINE hn::Vec<Hif4ElementTag> Hif4Q(const Hif4Steps& s, hn::Vec<Hif4ElementTag> v, int i) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  const auto factor = hn::Load(d, s.element_factor + i);
  if constexpr (kA6) {
    return hn::Mul(S1p2Grid<R>(d, hn::Abs(Hif4A6Product(s, v, i))), hn::Set(d, 4.0f));
  } else {
    // t = fp32(fp32(|x| * 2^-(b+c)) * r), in this order.
    const auto t = hn::Mul(hn::Mul(hn::Abs(v), factor), hn::Set(d, s.reciprocal));
    if constexpr (R == Rounding::rha) {
      // The literal q = floor(fp32(4t + 1/2)), q >= 8 -> 7 (hif4.cpp round_element).
      const auto u = hn::Add(hn::Mul(t, hn::Set(d, 4.0f)), hn::Set(d, 0.5f));
      return hn::ConvertTo(d, hn::ConvertTo(di, hn::Min(u, hn::Set(d, 7.0f))));  // u >= 0.5: truncation is floor
    } else {
      return hn::Mul(S1p2Grid<R>(d, t), hn::Set(d, 4.0f));
    }
  }
}

// Sign of the code: v14 from the sign bit of x (-0 -> 0x8), a6 from the
// product y < 0 (hif4.cpp a6_steps: -0 and an underflowed product -> 0x0).
template <bool kA6>
HWY_INLINE hn::Mask<Hif4ElementTag> Hif4Negative(const Hif4Steps& s, hn::Vec<Hif4ElementTag> v, int i) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  if constexpr (kA6) return hn::Lt(Hif4A6Product(s, v, i), hn::Zero(d));
  return hn::RebindMask(d, hn::Lt(hn::BitCast(di, v), hn::Zero(di)));
}

template <bool kA6, Rounding R>
HWY_INLINE void Hif4FakeQuantBlock(const float* HWY_RESTRICT x, float* HWY_RESTRICT y) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  Hif4Steps s;
  if (HWY_UNLIKELY(Hif4GroupMaxima<kA6>(x, s.m4))) {  // NaN block: every output NaN
    for (int i = 0; i < kHif4Block; i += n) hn::StoreU(hn::BitCast(d, hn::Set(di, kQuietNanBits)), d, y + i);
    return;
  }
  Hif4Scale<kA6>(s);
  for (int i = 0; i < kHif4Block; i += n) {
    const auto v = hn::LoadU(d, x + i);
    // hif4.cpp hif4_fake_quant_block: (q/4) 2^(b+c) S, exact, signed.
    const auto magnitude = hn::Mul(Hif4Q<kA6, R>(s, v, i), hn::Load(d, s.value_factor + i));
    hn::StoreU(hn::IfThenElse(Hif4Negative<kA6>(s, v, i), hn::Neg(magnitude), magnitude), d, y + i);
  }
}

// Writes 64 codes from the group maxima in s.m4; returns the canonical scale word.
template <bool kA6, Rounding R>
HWY_INLINE uint32_t Hif4QuantizeNumericBlock(Hif4Steps& s, const float* HWY_RESTRICT x, uint8_t* HWY_RESTRICT codes) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  Hif4Scale<kA6>(s);
  for (int i = 0; i < kHif4Block; i += static_cast<int>(hn::Lanes(d))) {
    const auto v = hn::LoadU(d, x + i);
    const auto q = hn::ConvertTo(di, Hif4Q<kA6, R>(s, v, i));
    const auto code = hn::IfThenElse(hn::RebindMask(di, Hif4Negative<kA6>(s, v, i)), hn::Or(q, hn::Set(di, 8)), q);
    StoreCodeBytes(d, code, codes + i);
  }
  return s.word;
}

template <bool kA6, Rounding R>
HWY_INLINE uint32_t Hif4QuantizeBlock(const float* HWY_RESTRICT x, uint8_t* HWY_RESTRICT codes) {
  Hif4Steps s;
  if (HWY_LIKELY(!Hif4GroupMaxima<kA6>(x, s.m4))) return Hif4QuantizeNumericBlock<kA6, R>(s, x, codes);
  // hif4.cpp run_steps: bits and codes of the block with the poisoning lanes as +0, scale 0xFF.
  alignas(64) float cleaned[kHif4Block];
  for (int i = 0; i < kHif4Block; ++i) {
    const bool poison = std::isnan(x[i]) || (kA6 && std::isinf(x[i]));
    cleaned[i] = poison ? 0.0f : x[i];
  }
  Hif4GroupMaxima<kA6>(cleaned, s.m4);
  const uint32_t word = Hif4QuantizeNumericBlock<kA6, R>(s, cleaned, codes);
  return (word & ~0xFFu) | kHif4NanScale;
}

// hif4_decode_block (every recipe but V12): (-1)^s (q/4) 2^(b+c) E6M2(S), exact;
// scale byte 0xFF -> NaN block. `word` is canonical (LSB-first).
HWY_INLINE void Hif4DecodeBlock(uint32_t word, const uint8_t* HWY_RESTRICT codes, float* HWY_RESTRICT y) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  if ((word & 0xFF) == kHif4NanScale) {
    for (int i = 0; i < kHif4Block; i += n) hn::StoreU(hn::BitCast(d, hn::Set(di, kQuietNanBits)), d, y + i);
    return;
  }
  const Hif4L3Tag d16;
  const hn::RebindToSigned<Hif4L3Tag> di16;
  const int n16 = static_cast<int>(hn::Lanes(d16));
  alignas(64) float value_factor[kHif4Block];
  const auto scale = E6m2Value(d16, hn::Set(di16, static_cast<int32_t>(word & 0xFF)));
  const auto words = hn::Set(di16, static_cast<int32_t>(word >> 8));  // bits 0..7 L2, 8..23 L3
  const auto one = hn::Set(di16, 1);
  for (int k = 0; k < kHif4L3Groups; k += n16) {
    const auto group = hn::Iota(di16, k);
    const auto b = hn::And(words >> hn::ShiftRight<1>(group), one);
    const auto c = hn::And(words >> hn::Add(group, hn::Set(di16, 8)), one);
    const auto factor = hn::Mul(scale, Pow2FromBiased(d16, hn::Add(hn::Add(b, c), hn::Set(di16, 125))));
    hn::StoreInterleaved4(factor, factor, factor, factor, d16, value_factor + 4 * k);
  }
  for (int i = 0; i < kHif4Block; i += n) {
    const auto c = LoadCodeBytes(d, codes + i);
    const auto q = hn::ConvertTo(d, hn::And(c, hn::Set(di, 7)));
    const auto sign = hn::BitCast(d, hn::ShiftLeft<28>(hn::And(c, hn::Set(di, 8))));
    hn::StoreU(hn::Or(hn::Mul(q, hn::Load(d, value_factor + i)), sign), d, y + i);
  }
}

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_
