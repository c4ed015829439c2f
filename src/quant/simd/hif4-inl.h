// Per-target HiF4 block kernels for every recipe of docs/spec/hif4.md §6.0: the steps
// of v14_steps, a6_steps and v12_steps in src/quant/reference/hif4.cpp, one
// block of 64 at a time. Recipes are data: the per-element arithmetic is a
// template parameter (Hif4Elements), everything decided once per block (scale
// range, non-finite policy, sign rule, V12's power-of-two scale) is read from
// Hif4Rules, which kernels.cpp fills from the recipe's Hif4Params.
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

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "codec-inl.h"
#include "pack-inl.h"
#include "fp4emu/quant/hif4_params.hpp"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kHif4Block = 64;
constexpr int kHif4L3Groups = 16;  // one L3 bit per 4 adjacent elements
constexpr uint32_t kHif4NanScale = 0xFF;
constexpr float kHif4C7 = 0.142578125f;  // bf16(1/7), docs/spec/hif4.md notation c7
constexpr float kHif4ScaleMin = 0x1p-48f;
constexpr float kHif4ScaleMax = 49152.0f;
constexpr int32_t kFltMaxBits = 0x7F7FFFFF;
// V12 (docs/spec/hif4.md §6.6): byte B + 48, B in [-46, 16], fp32 guard 2^-45 in floor(log2(m4 + tiny)).
constexpr int kHif4V12Offset = 48;
constexpr int kHif4V12MinExponent = -46;
constexpr int kHif4V12MaxExponent = 16;
constexpr float kHif4V12Tiny = 0x1p-45f;

using Hif4ElementTag = hn::CappedTag<float, kHif4Block>;
using Hif4L3Tag = hn::CappedTag<float, kHif4L3Groups>;

// The arithmetic of the scale ratios and the element step.
enum class Hif4Elements : uint8_t {
  fp32,        // §6.1 (v14, noclip, special; V12 with r = 1): fp32 products
  bf16_ratio,  // §6.4 (amct): fp32 products, the element ratio t rounded to bf16
  exact,       // §6.2 (v14_f64): exact products, the float64 of To_HiFX
  a6,          // §6.5 (a6): every intermediate a bf16
};

// What a kernel reads once per block (hif4_params.hpp).
struct Hif4Rules {
  Hif4ScaleRange range = Hif4ScaleRange::clamp;
  NonFinitePolicy non_finite = NonFinitePolicy::torch;
  bool sign_less_than_zero = false;  // ZeroSign::less_than_zero (a6: applied to its product)
  bool pow2_scale = false;           // Hif4Arithmetic::pow2_v12
};

// What the scale steps leave for the element step.
struct Hif4Steps {
  alignas(64) float m4[kHif4L3Groups];              // max |x| of each L3 group
  alignas(64) float element_factor[kHif4Block];     // 2^-(b+c) (V12: 2^-(B+b+c)); a6: bf16(Ea_rec * 2^-(b+c))
  alignas(64) float value_factor[kHif4Block];       // S * 2^(b+c-2): value = q * factor
  float reciprocal = 0.0f;                          // r = bf16(1/S) (V12: 1)
  uint32_t word = 0;                                // canonical LSB-first scale word
};

// docs/spec/hif4.md §6.1 step 1 with the non-finite policy (hif4.cpp prepare_lanes):
// torch: NaN lanes count as 0 and make the block NaN, Inf stays; poison: NaN
// and Inf lanes count as 0 and make the block NaN; passthrough: NaN and Inf
// lanes count as 0. The exact kernel holds Inf as FLT_MAX: every product
// with it is then as far above its threshold as Inf's is.
// Returns true for a NaN block.
template <Hif4Elements K>
HWY_INLINE bool Hif4GroupMaxima(NonFinitePolicy policy, const float* HWY_RESTRICT x, float* HWY_RESTRICT m4) {
  const Hif4L3Tag d;
  const hn::RebindToSigned<Hif4L3Tag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const auto limit = hn::Set(di, policy == NonFinitePolicy::torch ? kInfBits : kInfBits - 1);
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
    auto m = hn::Max(hn::Max(lane_max(a0), lane_max(a1)), hn::Max(lane_max(a2), lane_max(a3)));
    if constexpr (K == Hif4Elements::exact) m = hn::Min(m, hn::Set(di, kFltMaxBits));
    hn::Store(hn::BitCast(d, m), d, m4 + k);
  }
  return policy != NonFinitePolicy::passthrough && !hn::AllFalse(di, hn::Ne(poisoned, hn::Zero(di)));
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

// ---- Exact products (hif4.v14_f64) --------------------------------------------
// m * k for a finite m >= 0 and a k of at most 8 significant bits (c7, r,
// r * 2^-(b+c)), exactly, as hi + err with hi = fp32(m * k): m splits into
// its top 16 significant bits and the rest, each product with k is exact in
// fp32, and Fast2Sum gives the rounding error of their sum. Products that
// underflow are far below every threshold they are compared with.
template <class D>
HWY_INLINE void ExactProduct(D d, hn::Vec<D> m, hn::Vec<D> k, hn::Vec<D>& hi, hn::Vec<D>& err) {
  const hn::RebindToSigned<D> di;
  const auto m_high = hn::BitCast(d, hn::And(hn::BitCast(di, m), hn::Set(di, ~0xFF)));
  const auto a = hn::Mul(m_high, k);
  const auto b = hn::Mul(hn::Sub(m, m_high), k);
  hi = hn::Add(a, b);
  err = hn::Sub(b, hn::Sub(hi, a));
}

// [m * k >= threshold], exactly (threshold a power of two, at least 2).
template <class D>
HWY_INLINE hn::Mask<D> ExactProductAtLeast(D d, hn::Vec<D> m, hn::Vec<D> k, hn::Vec<D> threshold) {
#if HWY_NATIVE_FMA
  // One rounding of m * k - threshold keeps its sign: where m * k is near the
  // threshold its granularity, ulp(m) ulp(k), is about 2^-30 threshold, far
  // above the smallest subnormal, so a nonzero difference stays nonzero.
  return hn::Ge(hn::MulSub(m, k, threshold), hn::Zero(d));
#else
  hn::Vec<D> hi, err;
  ExactProduct(d, m, k, hi, err);
  return hn::AndNot(hn::And(hn::Eq(hi, threshold), hn::Lt(err, hn::Zero(d))), hn::Ge(hi, threshold));
#endif
}

#if HWY_NATIVE_FMA
// q = s1p2_encode(a * k, R) * 4 (R not stochastic) from fused products, for
// a = |x| (at most FLT_MAX) and k4 = 4k: fp32(a * k4 + 2^23) is the exact
// 4ak rounded to an integer, ties to even (one rounding; the sum's ulp is 1
// while 4ak < 2^23, and anything larger saturates to 7 anyway), and the sign
// of the one-rounding difference a * k4 - (that integer ± 1/2) tells an exact
// tie (0) or the side of the exact value, as in ExactProductAtLeast. rha:
// floor(4t + 1/2) = the even rounding, plus one at a tie it rounded down;
// ties_to_zero: minus one at a tie it rounded up; rtz: minus one where the
// integer lies above 4ak.
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> S1p2QuarterOfExactFma(D d, hn::Vec<D> a, hn::Vec<D> k4) {
  const auto magic = hn::Set(d, 0x1p23f);
  const auto q = hn::Sub(hn::MulAdd(a, k4, magic), magic);
  const auto one = hn::Set(d, 1.0f);
  hn::Vec<D> rounded;
  if constexpr (R == Rounding::rne) {
    rounded = q;
  } else if constexpr (R == Rounding::rha) {
    const auto tie = hn::Eq(hn::MulSub(a, k4, hn::Add(q, hn::Set(d, 0.5f))), hn::Zero(d));
    rounded = hn::Add(q, hn::IfThenElseZero(tie, one));
  } else if constexpr (R == Rounding::ties_to_zero) {
    const auto tie = hn::Eq(hn::MulSub(a, k4, hn::Sub(q, hn::Set(d, 0.5f))), hn::Zero(d));
    rounded = hn::Sub(q, hn::IfThenElseZero(tie, one));
  } else {
    static_assert(R == Rounding::rtz);
    rounded = hn::Sub(q, hn::IfThenElseZero(hn::Lt(hn::MulSub(a, k4, q), hn::Zero(d)), one));
  }
  return hn::Min(rounded, hn::Set(d, 7.0f));
}
#endif

// bf16 RNE of the exact product m * k: a nonzero error only decides where hi
// is a bf16 tie (low 16 bits 0x8000), and moving hi there one fp32 ulp its
// way decides it the same. Anywhere else hi rounds as the exact value does.
template <class D>
HWY_INLINE hn::Vec<D> Bf16RneOfExactProduct(D d, hn::Vec<D> m, hn::Vec<D> k) {
  const hn::RebindToSigned<D> di;
  hn::Vec<D> hi, err;
  ExactProduct(d, m, k, hi, err);
  auto bits = hn::BitCast(di, hi);
  const auto tie = hn::Eq(hn::And(bits, hn::Set(di, 0xFFFF)), hn::Set(di, 0x8000));
  const auto one = hn::IfThenElseZero(tie, hn::Set(di, 1));
  bits = hn::Add(bits, hn::IfThenElseZero(hn::RebindMask(di, hn::Gt(err, hn::Zero(d))), one));
  bits = hn::Sub(bits, hn::IfThenElseZero(hn::RebindMask(di, hn::Lt(err, hn::Zero(d))), one));
  return Bf16Rne(d, hn::BitCast(d, bits));
}

// s1p2_encode(hi + err, R) decoded (hif4.cpp round_element<double>; rha is
// floor(4t + 1/2), exact in double): the rounding of hi is that of the exact
// value except where hi is a decision point (a tie, or for rtz a grid point)
// and err is not zero, where the exact value lies on err's side of it.
//
// Stochastic (r the random bytes): floor(frac * 2^8) counts steps of
// 0.25 / 2^8 = 2^-10; that of the exact value is hi's, except where hi lies
// on a step and err < 0 (|err| <= ulp(hi) / 2 reaches no other step). A value
// beyond 1.75 saturates; at hi = 1.75 the sign of err still matters.
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> S1p2GridOfExact(D d, hn::Vec<D> hi, hn::Vec<D> err,
                                      IntVec<D> r = hn::Zero(hn::RebindToSigned<D>())) {
  const auto magic = hn::Set(d, 0x1p21f);  // quantum 0.25
  const auto quantum = hn::Set(d, 0.25f);
  if constexpr (R == Rounding::stochastic) {
    const hn::RebindToSigned<D> di;
    const auto top = hn::Set(d, 1.75f);
    err = hn::IfThenZeroElse(hn::Gt(hi, top), err);
    hi = hn::Min(hi, top);
    auto down = RoundToQuantum<Rounding::rtz>(d, hi, magic);
    const auto scaled = hn::Mul(hn::Sub(hi, down), hn::Set(d, 1024.0f));  // exact, below 2^8
    auto steps = hn::ConvertTo(di, scaled);
    const auto on_step = hn::And(hn::Eq(hn::ConvertTo(d, steps), scaled), hn::Lt(err, hn::Zero(d)));
    steps = hn::Sub(steps, hn::IfThenElseZero(hn::RebindMask(di, on_step), hn::Set(di, 1)));
    // steps = -1: the exact value lies just below the grid point `down`.
    const auto below = hn::Lt(steps, hn::Zero(di));
    down = hn::IfThenElse(hn::RebindMask(d, below), hn::Sub(down, quantum), down);
    steps = hn::IfThenElse(below, hn::Add(steps, hn::Set(di, 1 << kStochasticBits)), steps);
    return hn::IfThenElse(StochasticRoundsUp(d, steps, r), hn::Add(down, quantum), down);
  }
  hi = hn::Min(hi, hn::Set(d, 4.0f));  // saturates whatever err is
  const auto down = RoundToQuantum<Rounding::rtz>(d, hi, magic);
  hn::Vec<D> q;
  if constexpr (R == Rounding::rtz) {
    q = hn::IfThenElse(hn::And(hn::Eq(hi, down), hn::Lt(err, hn::Zero(d))), hn::Sub(down, quantum), down);
  } else {
    const auto tie = hn::Eq(hn::Sub(hi, down), hn::Set(d, 0.125f));
    q = RoundToQuantum<R>(d, hi, magic);
    q = hn::IfThenElse(hn::And(tie, hn::Gt(err, hn::Zero(d))), hn::Add(down, quantum), q);
    q = hn::IfThenElse(hn::And(tie, hn::Lt(err, hn::Zero(d))), down, q);
  }
  return hn::Min(q, hn::Set(d, 1.75f));
}

// ---- Scale steps ----------------------------------------------------------------

// The per-group factors from the L2 bits (b_of_l3: b of each L3 group's L2
// group) and the L3 bits of lanes k.., with `exponent` added to b + c (V12's B).
// kValues: the decode factors too (fake-quant; quantize reads none).
template <Hif4Elements K, bool kValues = true>
HWY_INLINE void Hif4StoreFactors(Hif4Steps& s, int k, hn::Mask<Hif4L3Tag> b, hn::Mask<Hif4L3Tag> c,
                                 hn::Vec<Hif4L3Tag> r, hn::Vec<Hif4L3Tag> scale_value, int32_t exponent) {
  const Hif4L3Tag d;
  const hn::RebindToSigned<Hif4L3Tag> di;
  const auto one = hn::Set(di, 1);
  const auto shift = hn::Add(hn::Add(hn::IfThenElseZero(hn::RebindMask(di, b), one),
                                     hn::IfThenElseZero(hn::RebindMask(di, c), one)),
                             hn::Set(di, exponent));
  auto element_factor = Pow2FromBiased(d, hn::Sub(hn::Set(di, 127), shift));  // 2^-shift
  // a6 §6.5 step 6: bf16(Ea_rec * bf16(2^-b * 2^-c)), exact (no bf16 underflow: Ea_rec >= 2^-16).
  if constexpr (K == Hif4Elements::a6) element_factor = hn::Mul(r, element_factor);
  hn::StoreInterleaved4(element_factor, element_factor, element_factor, element_factor, d, s.element_factor + 4 * k);
  if constexpr (kValues) {
    const auto value_factor = hn::Mul(scale_value, Pow2FromBiased(d, hn::Add(shift, hn::Set(di, 125))));
    hn::StoreInterleaved4(value_factor, value_factor, value_factor, value_factor, d, s.value_factor + 4 * k);
  }
}

// docs/spec/hif4.md §6.6 steps 1-4 (hif4.cpp v12_steps): integer exponents of the group maxima.
template <bool kValues>
HWY_INLINE void Hif4ScaleV12(Hif4Steps& s) {
  const Hif4L3Tag d;
  const hn::RebindToSigned<Hif4L3Tag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  // e4[k] = floor(log2(fp32(m4[k] + 2^-45))) from the exponent field (a normal
  // value or +Inf, which gives 128 as floor_log2 does).
  auto e4_of = [&](int k) {
    const auto guarded = hn::Add(hn::Load(d, s.m4 + k), hn::Set(d, kHif4V12Tiny));
    return hn::Sub(hn::ShiftRight<23>(hn::BitCast(di, guarded)), hn::Set(di, 127));
  };
  auto e_max = hn::Set(di, -127);
  for (int k = 0; k < kHif4L3Groups; k += n) e_max = hn::Max(e_max, e4_of(k));
  const int32_t e = hn::GetLane(hn::MaxOfLanes(di, e_max));
  const int32_t block_exponent = std::clamp(e - 2, kHif4V12MinExponent, kHif4V12MaxExponent);
  uint32_t word = static_cast<uint32_t>(block_exponent + kHif4V12Offset);
  // b_j = clamp(e8[j] - B - 1, 0, 1) = [e8[j] > B + 1], e8 the max of two e4.
  uint32_t at_least = 0;
  for (int k = 0; k < kHif4L3Groups; k += n)
    at_least |= MaskBits(d, hn::RebindMask(d, hn::Gt(e4_of(k), hn::Set(di, block_exponent + 1)))) << k;
  const uint32_t b_even = (at_least | at_least >> 1) & 0x5555u;
  const uint32_t b_of_l3 = b_even | b_even << 1;
  word |= EvenBits(b_even) << 8;
  // c_k = clamp(e4[k] - B - b, 0, 1) = [e4[k] > B + b] (Highway has no integer >=).
  const auto one = hn::Set(di, 1);
  for (int k = 0; k < kHif4L3Groups; k += n) {
    const auto b = MaskFromBits(d, b_of_l3 >> k);
    const auto threshold = hn::Add(hn::Set(di, block_exponent), hn::IfThenElseZero(hn::RebindMask(di, b), one));
    const auto c = hn::RebindMask(d, hn::Gt(e4_of(k), threshold));
    word |= MaskBits(d, c) << (16 + k);
    Hif4StoreFactors<Hif4Elements::fp32, kValues>(s, k, b, c, hn::Set(d, 1.0f), hn::Set(d, 1.0f), block_exponent);
  }
  s.reciprocal = 1.0f;  // t = |x| * 2^-(B+b+c), one rounding as ldexp's
  s.word = word;
}

// docs/spec/hif4.md §6.1 steps 1-6 (§6.2, §6.3, §6.4; §6.5 steps 1-6; §6.6) from the
// group maxima in s.m4, lanes across the 16 L3 groups. Step 5 is taken per
// L3 group: the product is monotone in m, so [max(m4[2j], m4[2j+1]) r >= 4]
// is the OR of the two groups' [m4 r >= 4], combined on the bits. No vector
// leaves registers in another width than it is read back (no store-forwarding
// stalls). Returns false when the recipe has no scale for the block
// (unclamped ranges, hif4.cpp e6m2_encode_unclamped): a NaN block whose bits
// and codes are all 0.
template <Hif4Elements K, bool kValues = true>
HWY_INLINE bool Hif4Scale(const Hif4Rules& rules, Hif4Steps& s) {
  if constexpr (K == Hif4Elements::fp32) {
    if (rules.pow2_scale) {
      Hif4ScaleV12<kValues>(s);
      return true;
    }
  }
  const Hif4L3Tag d;
  const int n = static_cast<int>(hn::Lanes(d));

  // step 1: M = max m4 (= max m8).
  auto block_max = hn::Zero(d);
  for (int k = 0; k < kHif4L3Groups; k += n) block_max = hn::Max(block_max, hn::Load(d, s.m4 + k));
  block_max = hn::MaxOfLanes(d, block_max);

  // step 2: s0 = bf16(fp32(M * c7)) (a6: bf16(M * c7), the same for bf16 M;
  // v14_f64: bf16 of the exact product).
  const auto c7 = hn::Set(d, kHif4C7);
  const auto s0 = K == Hif4Elements::exact ? Bf16RneOfExactProduct(d, block_max, c7)
                                           : Bf16Rne(d, hn::Mul(block_max, c7));
  // step 3: range, then E6M2 RNE.
  hn::Vec<Hif4L3Tag> scale;
  if (rules.range == Hif4ScaleRange::clamp || rules.range == Hif4ScaleRange::saturate_e6m2) {
    // Clamped to [2^-48, 49152] (a6: the saturating conversion): both bounds
    // are E6M2 values, so this is the saturating E6M2 rounding.
    scale = E6m2RneSatGrid(d, s0);
  } else if (hn::GetLane(block_max) == 0.0f) {
    // §6.3: noclip has no scale for a zero block, special gives it 2^-48.
    if (rules.range == Hif4ScaleRange::unclamped) return false;
    scale = hn::Set(d, kHif4ScaleMin);
  } else {
    // E6M2 RNE with no exponent limit (the bit rounding holds for any normal
    // s0, +Inf stays +Inf, a subnormal stays below 2^-48), then the range check.
    scale = E6m2RneAnyExponent(d, s0);
    const float value = hn::GetLane(scale);
    if (!(value >= kHif4ScaleMin && value <= kHif4ScaleMax)) return false;
  }
  const auto scale_code = E6m2Code(d, scale);
  // step 4: r = bf16(1/S), the RCPE6M2 table.
  const auto r = E6m2ReciprocalBf16(d, scale_code);
  uint32_t word = static_cast<uint32_t>(hn::GetLane(scale_code));

  // [m4[k] * r >= threshold] in the recipe's arithmetic: fp32 (a6: the
  // product rounded to bf16; v14_f64: exact).
  auto at_least = [&](int k, hn::Vec<Hif4L3Tag> threshold) {
    const auto m = hn::Load(d, s.m4 + k);
    if constexpr (K == Hif4Elements::exact) {
      return ExactProductAtLeast(d, m, r, threshold);
    } else if constexpr (K == Hif4Elements::a6) {
      return hn::Ge(Bf16Rne(d, hn::Mul(m, r)), threshold);
    } else {
      return hn::Ge(hn::Mul(m, r), threshold);
    }
  };

  // step 5: b_j = [m8[j] * r >= 4].
  const auto four = hn::Set(d, 4.0f);
  uint32_t at_least_4 = 0;
  for (int k = 0; k < kHif4L3Groups; k += n) at_least_4 |= MaskBits(d, at_least(k, four)) << k;
  const uint32_t b_even = (at_least_4 | at_least_4 >> 1) & 0x5555u;  // b_j at bit 2j
  const uint32_t b_of_l3 = b_even | b_even << 1;                    // b of each L3 group's L2 group
  word |= EvenBits(b_even) << 8;

  // step 6: c_k = [m4[k] * r / 2^b >= 2] (the division by 2^b is exact
  // wherever the comparison can hold), then the per-group factors.
  const auto scale_value = hn::Set(d, hn::GetLane(scale));
  for (int k = 0; k < kHif4L3Groups; k += n) {
    const auto b = MaskFromBits(d, b_of_l3 >> k);
    const auto c = at_least(k, hn::IfThenElse(b, four, hn::Set(d, 2.0f)));
    word |= MaskBits(d, c) << (16 + k);
    Hif4StoreFactors<K, kValues>(s, k, b, c, r, scale_value, 0);
  }
  s.reciprocal = hn::GetLane(r);
  s.word = word;
  return true;
}

// ---- Element step -----------------------------------------------------------------

// a6 §6.5 step 7: y = bf16(x * scale). x and scale are bf16, so the fp32
// product is exact but for fp32 underflow, as in the pto-isa golden.
HWY_INLINE hn::Vec<Hif4ElementTag> Hif4A6Product(const Hif4Steps& s, hn::Vec<Hif4ElementTag> v, int i) {
  const Hif4ElementTag d;
  return Bf16Rne(d, hn::Mul(v, hn::Load(d, s.element_factor + i)));
}

// docs/spec/hif4.md §6.1 step 7 (§6.2, §6.4 step 4, §6.5 steps 6-7, §6.6 step 5): the
// magnitude code q of each lane, as a float 0..7.
// r: the lanes' random bytes (Rounding::stochastic).
template <Hif4Elements K, Rounding R>
HWY_INLINE hn::Vec<Hif4ElementTag> Hif4Q(const Hif4Steps& s, hn::Vec<Hif4ElementTag> v, int i,
                                         IntVec<Hif4ElementTag> r) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  const auto factor = hn::Load(d, s.element_factor + i);
  const auto four = hn::Set(d, 4.0f);
  if constexpr (K == Hif4Elements::a6) {
    return hn::Mul(S1p2Grid<R>(d, hn::Abs(Hif4A6Product(s, v, i)), r), four);
  } else if constexpr (K == Hif4Elements::exact) {
    // t = |x| * 2^-(b+c) * r exactly (+Inf as FLT_MAX: q = 7 either way).
    const auto a = hn::BitCast(d, hn::Min(AbsBits(d, v), hn::Set(di, kFltMaxBits)));
#if HWY_NATIVE_FMA
    if constexpr (R != Rounding::stochastic)
      return S1p2QuarterOfExactFma<R>(d, a, hn::Mul(factor, hn::Set(d, 4.0f * s.reciprocal)));
#endif
    hn::Vec<Hif4ElementTag> hi, err;
    ExactProduct(d, a, hn::Mul(factor, hn::Set(d, s.reciprocal)), hi, err);
    return hn::Mul(S1p2GridOfExact<R>(d, hi, err, r), four);
  } else {
    // t = fp32(fp32(|x| * 2^-(b+c)) * r), in this order (amct: then bf16).
    auto t = hn::Mul(hn::Mul(hn::Abs(v), factor), hn::Set(d, s.reciprocal));
    if constexpr (K == Hif4Elements::bf16_ratio) t = Bf16Rne(d, t);
    if constexpr (R == Rounding::rha) {
      // The literal q = floor(fp32(4t + 1/2)), q >= 8 -> 7 (hif4.cpp round_element).
      const auto u = hn::Add(hn::Mul(t, four), hn::Set(d, 0.5f));
      return hn::ConvertTo(d, hn::ConvertTo(di, hn::Min(u, hn::Set(d, 7.0f))));  // u >= 0.5: truncation is floor
    } else {
      return hn::Mul(S1p2Grid<R>(d, t, r), four);
    }
  }
}

// Sign of the code: from the sign bit of x (-0 -> 0x8), or from x < 0 (-0 ->
// 0x0); a6 from its product y < 0 (-0 and an underflowed product -> 0x0).
template <Hif4Elements K>
HWY_INLINE hn::Mask<Hif4ElementTag> Hif4Negative(const Hif4Rules& rules, const Hif4Steps& s,
                                                 hn::Vec<Hif4ElementTag> v, int i) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  if constexpr (K == Hif4Elements::a6) return hn::Lt(Hif4A6Product(s, v, i), hn::Zero(d));
  if (rules.sign_less_than_zero) return hn::Lt(v, hn::Zero(d));
  return hn::RebindMask(d, hn::Lt(hn::BitCast(di, v), hn::Zero(di)));
}

// passthrough (§6.3): the lanes that count as +0.
HWY_INLINE hn::Mask<Hif4ElementTag> Hif4NonFinite(hn::Vec<Hif4ElementTag> v) {
  const Hif4ElementTag d;
  return hn::RebindMask(d, hn::Gt(AbsBits(d, v), hn::Set(hn::RebindToSigned<Hif4ElementTag>(), kInfBits - 1)));
}

HWY_INLINE void Hif4StoreNan(float* HWY_RESTRICT y) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  for (int i = 0; i < kHif4Block; i += static_cast<int>(hn::Lanes(d)))
    hn::StoreU(hn::BitCast(d, hn::Set(di, kQuietNanBits)), d, y + i);
}

// hif4.cpp hif4_fake_quant_block: (q/4) 2^(b+c) S, exact, signed; a NaN
// block is NaN; passthrough copies the non-finite inputs.
// rbits: the block's random bytes (Rounding::stochastic), else unread.
template <Hif4Elements K, Rounding R>
HWY_INLINE void Hif4FakeQuantBlock(const Hif4Rules& rules, const float* HWY_RESTRICT x, float* HWY_RESTRICT y,
                                   const uint8_t* HWY_RESTRICT rbits) {
  const Hif4ElementTag d;
  const int n = static_cast<int>(hn::Lanes(d));
  Hif4Steps s;
  const bool passthrough = rules.non_finite == NonFinitePolicy::passthrough;
  if (HWY_UNLIKELY(Hif4GroupMaxima<K>(rules.non_finite, x, s.m4)) || HWY_UNLIKELY(!Hif4Scale<K>(rules, s))) {
    Hif4StoreNan(y);
  } else {
    for (int i = 0; i < kHif4Block; i += n) {
      auto v = hn::LoadU(d, x + i);
      if (passthrough) v = hn::IfThenZeroElse(Hif4NonFinite(v), v);
      const auto magnitude = hn::Mul(Hif4Q<K, R>(s, v, i, RandomBytes<R>(d, rbits, i)), hn::Load(d, s.value_factor + i));
      hn::StoreU(hn::IfThenElse(Hif4Negative<K>(rules, s, v, i), hn::Neg(magnitude), magnitude), d, y + i);
    }
  }
  if (passthrough) {
    for (int i = 0; i < kHif4Block; i += n) {
      const auto v = hn::LoadU(d, x + i);
      hn::StoreU(hn::IfThenElse(Hif4NonFinite(v), v, hn::LoadU(d, y + i)), d, y + i);
    }
  }
}

// Writes the block's 64 codes, nibble-packed in `order` (32 bytes at
// packed), from the group maxima in s.m4; returns the canonical scale word.
// kPassthrough: rules.non_finite is passthrough, decided once per run (a test
// per vector, and the input it rewrites, cost hif4.a6 registers and 1.7 AVX2
// instructions per value, 12.05 -> 13.75).
template <Hif4Elements K, Rounding R, bool kPassthrough>
HWY_INLINE uint32_t Hif4QuantizeNumericBlock(const Hif4Rules& rules, Hif4Steps& s, const float* HWY_RESTRICT x,
                                             NibbleOrder order, uint8_t* HWY_RESTRICT packed,
                                             const uint8_t* HWY_RESTRICT rbits) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  if (HWY_UNLIKELY(!(Hif4Scale<K, false>(rules, s)))) {  // hif4.cpp v14_steps: bits and codes 0
    std::fill(packed, packed + kHif4Block / 2, uint8_t{0});
    return kHif4NanScale;
  }
  hn::Vec<decltype(di)> codes[kHif4Block / hn::MaxLanes(d)];
  for (int i = 0; i < kHif4Block; i += static_cast<int>(hn::Lanes(d))) {
    auto v = hn::LoadU(d, x + i);
    if constexpr (kPassthrough) v = hn::IfThenZeroElse(Hif4NonFinite(v), v);
    const auto q = SmallIntOf(d, Hif4Q<K, R>(s, v, i, RandomBytes<R>(d, rbits, i)));  // 0..7
    const auto negative = hn::RebindMask(di, Hif4Negative<K>(rules, s, v, i));
    codes[i / hn::Lanes(d)] = hn::IfThenElse(negative, hn::Or(q, hn::Set(di, 8)), q);
  }
  PackCodeVectors<kHif4Block>(di, order, codes, packed);
  return s.word;
}

// hif4.cpp run_steps for a block with poisoning lanes (NaN, or Inf under
// poison): bits and codes of the block with those lanes as +0, scale 0xFF.
// Out of line: a second inlined copy of the element loop is code the common
// path pays for in registers.
template <Hif4Elements K, Rounding R, bool kPassthrough>
HWY_NOINLINE uint32_t Hif4QuantizePoisonedBlock(const Hif4Rules& rules, const float* HWY_RESTRICT x,
                                                NibbleOrder order, uint8_t* HWY_RESTRICT packed,
                                                const uint8_t* HWY_RESTRICT rbits) {
  Hif4Steps s;
  alignas(64) float cleaned[kHif4Block];
  for (int i = 0; i < kHif4Block; ++i) {
    const bool poison = std::isnan(x[i]) || (rules.non_finite == NonFinitePolicy::poison && std::isinf(x[i]));
    cleaned[i] = poison ? 0.0f : x[i];
  }
  Hif4GroupMaxima<K>(rules.non_finite, cleaned, s.m4);
  const uint32_t word = Hif4QuantizeNumericBlock<K, R, kPassthrough>(rules, s, cleaned, order, packed, rbits);
  return (word & ~0xFFu) | kHif4NanScale;
}

// `packed`: the block's 32 bytes in the packed row (nibble order `order`).
template <Hif4Elements K, Rounding R, bool kPassthrough>
HWY_INLINE uint32_t Hif4QuantizeBlock(const Hif4Rules& rules, const float* HWY_RESTRICT x, NibbleOrder order,
                                      uint8_t* HWY_RESTRICT packed, const uint8_t* HWY_RESTRICT rbits) {
  Hif4Steps s;
  if (HWY_LIKELY(!Hif4GroupMaxima<K>(rules.non_finite, x, s.m4)))
    return Hif4QuantizeNumericBlock<K, R, kPassthrough>(rules, s, x, order, packed, rbits);
  return Hif4QuantizePoisonedBlock<K, R, kPassthrough>(rules, x, order, packed, rbits);
}

// hif4_decode_block: (-1)^s (q/4) 2^(b+c) S, exact, S the E6M2 value (V12:
// 2^(byte-48)); scale byte 0xFF -> NaN block. `word` is canonical (LSB-first).
HWY_INLINE void Hif4DecodeBlock(bool pow2_scale, uint32_t word, const uint8_t* HWY_RESTRICT codes,
                                float* HWY_RESTRICT y) {
  const Hif4ElementTag d;
  const hn::RebindToSigned<Hif4ElementTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  if ((word & 0xFF) == kHif4NanScale) {
    Hif4StoreNan(y);
    return;
  }
  const Hif4L3Tag d16;
  const hn::RebindToSigned<Hif4L3Tag> di16;
  const int n16 = static_cast<int>(hn::Lanes(d16));
  // value = q * factor * factor_high. V12 bytes beyond the quantizer's 2..64
  // reach 2^206: the factor stops at 2^127 and factor_high carries the rest,
  // so that the result overflows to Inf exactly where the exact value does.
  alignas(64) float factor[kHif4Block];
  alignas(64) float factor_high[kHif4Block];
  const auto byte = hn::Set(di16, static_cast<int32_t>(word & 0xFF));
  const auto scale = E6m2Value(d16, byte);
  const auto words = hn::Set(di16, static_cast<int32_t>(word >> 8));  // bits 0..7 L2, 8..23 L3
  const auto one = hn::Set(di16, 1);
  for (int k = 0; k < kHif4L3Groups; k += n16) {
    const auto group = hn::Iota(di16, k);
    const auto b = hn::And(words >> hn::ShiftRight<1>(group), one);
    const auto c = hn::And(words >> hn::Add(group, hn::Set(di16, 8)), one);
    const auto bc = hn::Add(b, c);
    hn::Vec<Hif4L3Tag> f, high;
    if (pow2_scale) {
      const auto exponent = hn::Add(bc, hn::Sub(byte, hn::Set(di16, kHif4V12Offset + 2)));  // -50..208
      f = Pow2FromBiased(d16, hn::Add(hn::Min(exponent, hn::Set(di16, 127)), hn::Set(di16, 127)));
      high = Pow2FromBiased(d16, hn::Add(hn::Max(hn::Sub(exponent, hn::Set(di16, 127)), hn::Zero(di16)),
                                         hn::Set(di16, 127)));
    } else {
      f = hn::Mul(scale, Pow2FromBiased(d16, hn::Add(bc, hn::Set(di16, 125))));
      high = hn::Set(d16, 1.0f);
    }
    hn::StoreInterleaved4(f, f, f, f, d16, factor + 4 * k);
    hn::StoreInterleaved4(high, high, high, high, d16, factor_high + 4 * k);
  }
  for (int i = 0; i < kHif4Block; i += n) {
    const auto c = LoadCodeBytes(d, codes + i);
    const auto q = hn::ConvertTo(d, hn::And(c, hn::Set(di, 7)));
    const auto sign = hn::BitCast(d, hn::ShiftLeft<28>(hn::And(c, hn::Set(di, 8))));
    auto magnitude = hn::Mul(q, hn::Load(d, factor + i));
    if (pow2_scale) magnitude = hn::Mul(magnitude, hn::Load(d, factor_high + i));
    hn::StoreU(hn::Or(magnitude, sign), d, y + i);
  }
}

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_
