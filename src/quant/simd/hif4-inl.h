// Per-target HiF4 block kernels for every recipe of docs/spec/hif4.md §6.0: the steps
// of v14_steps, a6_steps and v12_steps in src/quant/reference/hif4.cpp, one
// block of 64 at a time. Recipes are data: the arithmetic is a template
// parameter (Hif4Elements), everything else decided once per block (scale
// range, non-finite policy, sign rule) is read from Hif4Rules, which
// kernels.cpp fills from the recipe's Hif4Params.
//
// Layout: the element steps run with lanes in element order, the block in
// kHif4Vectors vectors. The 16 L3 group maxima are gathered into group
// vectors, one group per lane (Hif4GroupMax4), where steps 5-6 run once per
// group; each element vector then takes its lanes' factors with one lane
// broadcast (Hif4Spread), as an L3 group lies in 4 adjacent lanes of one
// 128-bit block. quantize/hif4.v14, AVX2 instructions per value: 8.2 with
// per-group factors spread through memory, 5.6 with steps 5-6 run on every
// element vector (each lane its own group's), 4.0 with group vectors
// (docs/performance.md).
#if defined(FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_HIF4_INL_H_
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "codec-inl.h"
#include "pack-inl.h"
#include "fp4emu/quant/hif4_params.hpp"
#include "fp4emu/quant/reference.hpp"
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
using Hif4IntTag = hn::RebindToSigned<Hif4ElementTag>;
using Hif4Vec = hn::Vec<Hif4ElementTag>;
using Hif4IntVec = hn::Vec<Hif4IntTag>;
using Hif4Mask = hn::Mask<Hif4ElementTag>;
constexpr int kHif4Vectors = kHif4Block / static_cast<int>(hn::MaxLanes(Hif4ElementTag()));
using Hif4L3Tag = hn::CappedTag<float, kHif4L3Groups>;  // the decoder's per-group factors

// The arithmetic of the scale steps and the element step.
enum class Hif4Elements : uint8_t {
  fp32,        // §6.1 (v14, noclip, special): fp32 products
  bf16_ratio,  // §6.4 (amct): fp32 products, the element ratio t rounded to bf16
  exact,       // §6.2 (v14_f64): exact products, the float64 of To_HiFX
  a6,          // §6.5 (a6): every intermediate a bf16
  pow2,        // §6.6 (v12_pow2): integer exponents of the maxima, t = |x| 2^-(B+b+c)
};

// What a kernel reads once per block (hif4_params.hpp).
struct Hif4Rules {
  Hif4ScaleRange range = Hif4ScaleRange::clamp;
  NonFinitePolicy non_finite = NonFinitePolicy::torch;
  bool sign_less_than_zero = false;  // ZeroSign::less_than_zero (a6: applied to its product)
  const Recipe* recipe = nullptr;    // a6: for the blocks left to the reference (Hif4GroupMaxima)
};

constexpr int kHif4Lanes = static_cast<int>(hn::MaxLanes(Hif4ElementTag()));
static_assert(kHif4Lanes == 1 || (kHif4Lanes >= 4 && kHif4Lanes <= kHif4L3Groups));

// The block's 16 L3 group maxima, one per lane, in kHif4GroupVectors "group
// vectors": element vector i's groups lie in group vector i / 4, at lane
// i % 4 of the 128-bit block that holds them in element vector i
// (Hif4GroupOfLane), so that Broadcast<i % 4> spreads a value per group over
// the lanes of element vector i. With 1 lane, group vector k is group k.
constexpr int kHif4GroupVectors = kHif4L3Groups / kHif4Lanes;  // AVX3 1, AVX2 2, 128-bit 4, scalar 16

// The L3 group of lane l of group vector k.
constexpr int Hif4GroupOfLane(int k, int l) {
  if (kHif4Lanes == 1) return k;
  const int element_vector = 4 * k + l % 4;
  return element_vector * (kHif4Lanes / 4) + l / 4;
}

// A group vector's value for each lane of element vector i. The callers'
// loops are unrolled, so the switch folds to one broadcast.
template <class V>
HWY_INLINE V Hif4Spread(V group_vector, int i) {
#if HWY_TARGET == HWY_SCALAR
  (void)i;
  return group_vector;
#else
  switch (i % 4) {
    case 0: return hn::Broadcast<0>(group_vector);
    case 1: return hn::Broadcast<1>(group_vector);
    case 2: return hn::Broadcast<2>(group_vector);
    default: return hn::Broadcast<3>(group_vector);
  }
#endif
}

// The group maxima of a block, as fp32 bits (ordered as the values).
struct Hif4Maxima {
  Hif4IntVec m4[kHif4GroupVectors];  // exact: +Inf as FLT_MAX
  Hif4Vec block;                     // M, in every lane
};

// hif4.cpp block_maxima, m4: group vector k from the |x| bits of element
// vectors 4k..4k+3: within each 128-bit block, pairs of lanes by
// interleaving two vectors, then by interleaving 64-bit halves (9 operations
// for 4 vectors, where each vector's own 4-lane maximum took 4).
HWY_INLINE Hif4IntVec Hif4GroupMax4(Hif4IntVec a, Hif4IntVec b, Hif4IntVec c, Hif4IntVec e) {
  const Hif4IntTag di;
#if HWY_TARGET == HWY_SCALAR
  (void)di;
  return hn::Max(hn::Max(a, b), hn::Max(c, e));
#else
  const auto ab = hn::Max(hn::InterleaveLower(di, a, b), hn::InterleaveUpper(di, a, b));  // a02 b02 a13 b13
  const auto ce = hn::Max(hn::InterleaveLower(di, c, e), hn::InterleaveUpper(di, c, e));
  const hn::Repartition<int64_t, Hif4IntTag> d64;
  const auto ab64 = hn::BitCast(d64, ab), ce64 = hn::BitCast(d64, ce);
  return hn::Max(hn::BitCast(di, hn::InterleaveLower(d64, ab64, ce64)),
                 hn::BitCast(di, hn::InterleaveUpper(d64, ab64, ce64)));
#endif
}

// hif4.cpp block_maxima, m8: the max of f(m4) over the L2 group of each lane
// of group vector k, f monotone. The two L3 groups of an L2 group sit in the
// same lane of adjacent 128-bit blocks, in adjacent lanes with 4 lanes, in
// adjacent group vectors with 1.
template <class F>
HWY_INLINE auto Hif4L2Max(const Hif4Maxima& mx, int k, F f) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Max(f(mx.m4[k]), f(mx.m4[k ^ 1]));
#else
  const auto v = f(mx.m4[k]);
  if constexpr (kHif4Lanes >= 8) {
    return hn::Max(v, hn::SwapAdjacentBlocks(v));
  } else {
    return hn::Max(v, hn::Shuffle2301(v));
  }
#endif
}

// docs/spec/hif4.md §6.1 step 1 (hif4.cpp prepare_lanes). Returns false, mx
// unfinished, for a block with lanes that count as +0 first (Hif4CleanLanes:
// NaN; Inf too unless the policy is torch, where it stays): a NaN block does
// not depend on its maxima, and a lane above +Inf's bits is the one test per
// block that finds them. The exact kernel holds Inf as FLT_MAX: every
// product with it is then as far above its threshold as Inf's is. a6 also
// returns false for a block with a value that is not exact in bf16 (nonzero
// low 16 bits): its element step holds only for bf16 inputs, and such a
// block (declared bf16, holding other values) is left to the reference.
template <Hif4Elements K>
HWY_INLINE bool Hif4GroupMaxima(NonFinitePolicy policy, const float* HWY_RESTRICT x, Hif4Maxima& mx) {
  const Hif4ElementTag d;
  const Hif4IntTag di;
  const int n = static_cast<int>(hn::Lanes(d));
  auto low_bits = hn::Zero(di);
  auto abs_bits = [&](int i) {
    const auto v = hn::LoadU(d, x + i * n);
    if constexpr (K == Hif4Elements::a6) low_bits = hn::Or(low_bits, hn::BitCast(di, v));
    return AbsBits(d, v);
  };
  for (int k = 0; k < kHif4GroupVectors; ++k)
    mx.m4[k] = Hif4GroupMax4(abs_bits(4 * k), abs_bits(4 * k + 1), abs_bits(4 * k + 2), abs_bits(4 * k + 3));
  auto top = mx.m4[0];
  for (int k = 1; k < kHif4GroupVectors; ++k) top = hn::Max(top, mx.m4[k]);
  if constexpr (K == Hif4Elements::a6) {  // a lane above every finite and NaN bits: one test for both
    const auto inexact = hn::Ne(hn::And(low_bits, hn::Set(di, 0xFFFF)), hn::Zero(di));
    top = hn::IfThenElse(inexact, hn::Set(di, 0x7FFFFFFF), top);
  }
  if constexpr (kHif4Lanes > 1) top = hn::MaxOfLanes(di, top);
  const int32_t top_bits = hn::GetLane(top);
  mx.block = hn::BitCast(d, top);  // set on every path, so that GCC sees it set where the result is unread
  if (HWY_UNLIKELY(top_bits > (policy == NonFinitePolicy::torch ? kInfBits : kInfBits - 1))) return false;
  if constexpr (K == Hif4Elements::exact) {
    if (HWY_UNLIKELY(top_bits == kInfBits)) {
      const auto cap = hn::Set(di, kFltMaxBits);
      for (int k = 0; k < kHif4GroupVectors; ++k) mx.m4[k] = hn::Min(mx.m4[k], cap);
      mx.block = hn::BitCast(d, cap);
    }
  }
  return true;
}

// hif4.cpp prepare_lanes: the lanes of x that count as +0 (NaN; Inf unless
// the policy is torch) as +0.
HWY_INLINE void Hif4CleanLanes(NonFinitePolicy policy, const float* HWY_RESTRICT x, float* HWY_RESTRICT cleaned) {
  for (int i = 0; i < kHif4Block; ++i)
    cleaned[i] = std::isnan(x[i]) || (policy != NonFinitePolicy::torch && std::isinf(x[i])) ? 0.0f : x[i];
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
// a = |x| and k4 = 4k: fp32(a * k4 + 2^23) is the exact
// 4ak rounded to an integer, ties to even (one rounding; the sum's ulp is 1
// while 4ak < 2^23, and anything larger saturates to 7 anyway), and the sign
// of the one-rounding difference a * k4 - (that integer ± 1/2) tells an exact
// tie (0) or the side of the exact value, as in ExactProductAtLeast. rha:
// floor(4t + 1/2) = the even rounding, plus one at a tie it rounded down;
// ties_to_zero: minus one at a tie it rounded up; rtz: minus one where the
// integer lies above 4ak. a = +Inf: the sums are +Inf and the differences
// NaN (never a tie, never below), so q = 7, as for FLT_MAX.
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> S1p2QuarterOfExactFma(D d, hn::Vec<D> a, hn::Vec<D> k4) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (R == Rounding::rha && hn::MaxLanes(d) == 16) {
    // floor(4ak + 1/2) from the fused sum rounded toward -Inf (AVX-512's
    // embedded rounding), then floored: that rounding never passes below
    // floor(4ak + 1/2), an fp32 integer wherever it is below 2^24, so the
    // floor of the rounded sum is that of the exact one (past 2^24, and
    // for +Inf, q = 7 either way). Three operations, not seven.
    const hn::Vec<D> down{_mm512_fmadd_round_ps(a.raw, k4.raw, _mm512_set1_ps(0.5f),
                                                _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)};
    return hn::Min(hn::Floor(down), hn::Set(d, 7.0f));
  }
#endif
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

// Steps 2-4 of the block: what the per-vector steps read. Steps 5-6 compare
// a group maximum m with `high` or `low` in the recipe's arithmetic (v14:
// fp32(m r) with 4 and 2; a6: the same product with 4 (1 - 2^-9) and 2 (1 -
// 2^-9), the least fp32 values that bf16 rounds to 4 and 2 (the midpoints
// below them, whose ties go to the even 4 and 2), so bf16(m r) >= 4 is
// fp32(m r) >= 4 (1 - 2^-9); V12: fp32(m + 2^-45) with 2^(B+2) and
// 2^(B+1), which is e = floor(log2(fp32(m + 2^-45))) > B + 1 and > B).
struct Hif4ScaleState {
  Hif4Vec r;          // r = bf16(1/S) (V12: unread)
  Hif4Vec high, low;  // the thresholds
  Hif4Vec element;    // the element factor at b = c = 0: 4r (a6: r; V12: 4 * 2^-B)
  Hif4Vec value;      // the decode factor at b = c = 0: S/4 (V12: 2^(B-2))
  uint32_t byte = 0;  // the scale byte
};

// The scale steps run on one value per block, as scalars: fp32 bit
// arithmetic on it takes a third of the instructions of the codec-inl.h
// vector helpers, whose integer constants GCC builds in a general register
// and broadcasts. Each mirrors the vector helper it names.

// RneToMantissaBits<kMan> (bf16: kMan 7; E6M2 with no exponent limit: 2).
template <int kMan>
HWY_INLINE float RneToMantissaBits(float v) {
  constexpr int kShift = 23 - kMan;
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t rounded = bits + ((1u << (kShift - 1)) - 1u) + ((bits >> kShift) & 1u);
  return std::bit_cast<float>(rounded & ~((1u << kShift) - 1u));
}

// bf16 RNE of the exact product m * k (finite m >= 0, k of at most 8
// significant bits): a nonzero error only decides where hi = fp32(m * k) is a
// bf16 tie (low 16 bits 0x8000), and moving hi there one fp32 ulp its way
// decides it the same. Anywhere else hi rounds as the exact value does.
HWY_INLINE float Bf16RneOfExactProduct(float m, float k) {
  const double exact = static_cast<double>(m) * static_cast<double>(k);  // exact: 24 + 8 bits
  const float hi = static_cast<float>(exact);
  uint32_t bits = std::bit_cast<uint32_t>(hi);
  if ((bits & 0xFFFFu) == 0x8000u && exact != static_cast<double>(hi)) bits += exact > hi ? 1u : ~0u;
  return RneToMantissaBits<7>(std::bit_cast<float>(bits));
}

// E6m2ReciprocalBf16: 2^-(E-48) * {1, 205/256, 171/256, 146/256}[M] (normal, exact).
HWY_INLINE float E6m2ReciprocalBf16(uint32_t code) {
  static constexpr float kMantissa[4] = {1.0f, 205.0f / 256.0f, 171.0f / 256.0f, 146.0f / 256.0f};
  return std::bit_cast<float>(std::bit_cast<uint32_t>(kMantissa[code & 3u]) + ((48u - (code >> 2)) << 23));
}

// 2^e for e in [-126, 127].
HWY_INLINE float Hif4Pow2(int32_t e) { return std::bit_cast<float>(static_cast<uint32_t>(e + 127) << 23); }

// hif4.cpp v14_steps, a6_steps, v12_steps: docs/spec/hif4.md §6.1 steps 2-4
// (§6.2, §6.3, §6.4; §6.5 steps 2-4; §6.6 steps 1-3) from the block maximum. Returns false when the recipe has no
// scale for the block (unclamped ranges, hif4.cpp e6m2_encode_unclamped): a
// NaN block whose bits and codes are all 0.
template <Hif4Elements K>
HWY_INLINE bool Hif4Scale(const Hif4Rules& rules, const Hif4Maxima& mx, Hif4ScaleState& s) {
  const Hif4ElementTag d;
  const float block_max = hn::GetLane(mx.block);
  if constexpr (K == Hif4Elements::pow2) {
    // B = clamp(e - 2, -46, 16), e = floor(log2(fp32(M + 2^-45))) from the
    // exponent field (a normal value, or +Inf, which gives 128 as floor_log2 does).
    const int32_t e = static_cast<int32_t>(std::bit_cast<uint32_t>(block_max + kHif4V12Tiny) >> 23) - 127;
    const int32_t exponent = std::clamp(e - 2, kHif4V12MinExponent, kHif4V12MaxExponent);
    s.high = hn::Set(d, Hif4Pow2(exponent + 2));
    s.low = hn::Set(d, Hif4Pow2(exponent + 1));
    s.element = hn::Set(d, Hif4Pow2(2 - exponent));  // t = |x| 2^-(B+b+c), one rounding as ldexp's
    s.value = hn::Set(d, Hif4Pow2(exponent - 2));
    s.byte = static_cast<uint32_t>(exponent + kHif4V12Offset);
    return true;
  } else {
    // step 2: s0 = bf16(fp32(M * c7)) (a6: bf16(M * c7), the same for bf16 M;
    // v14_f64: bf16 of the exact product).
    const float s0 = K == Hif4Elements::exact ? Bf16RneOfExactProduct(block_max, kHif4C7)
                                              : RneToMantissaBits<7>(block_max * kHif4C7);
    // step 3: range, then E6M2 RNE.
    float scale;
    if (rules.range == Hif4ScaleRange::clamp || rules.range == Hif4ScaleRange::saturate_e6m2) {
      // Clamped to [2^-48, 49152] (a6: the saturating conversion): both bounds
      // are E6M2 values, so this is the saturating E6M2 rounding (E6m2RneSatGrid).
      scale = RneToMantissaBits<2>(std::clamp(s0, kHif4ScaleMin, kHif4ScaleMax));
    } else if (block_max == 0.0f) {
      // §6.3: noclip has no scale for a zero block, special gives it 2^-48.
      if (rules.range == Hif4ScaleRange::unclamped) return false;
      scale = kHif4ScaleMin;
    } else {
      // E6M2 RNE with no exponent limit (the bit rounding holds for any normal
      // s0, +Inf stays +Inf, a subnormal stays below 2^-48), then the range check.
      scale = RneToMantissaBits<2>(s0);
      if (!(scale >= kHif4ScaleMin && scale <= kHif4ScaleMax)) return false;
    }
    // E6m2Code: the fp32 exponent field re-biased, then the 2 mantissa bits.
    const uint32_t code = (std::bit_cast<uint32_t>(scale) >> 21) - ((127u - 48u) << 2);
    // step 4: r = bf16(1/S), the RCPE6M2 table.
    const float r = E6m2ReciprocalBf16(code);
    const float below = K == Hif4Elements::a6 ? 1.0f - 0x1p-9f : 1.0f;
    s.r = hn::Set(d, r);
    s.high = hn::Set(d, 4.0f * below);
    s.low = hn::Set(d, 2.0f * below);
    s.element = hn::Set(d, K == Hif4Elements::a6 ? r : 4.0f * r);
    s.value = hn::Set(d, 0.25f * scale);  // exact: S >= 2^-48
    s.byte = code;
    return true;
  }
}

// hif4.cpp v14_steps (a6_steps, v12_steps): docs/spec/hif4.md §6.1 steps 5-6
// (§6.6 step 4) for the groups of group vector k: b of each lane's L2 group,
// c of its L3 group. Step 5 reads m8 = Hif4L2Max: the products are monotone
// in m, so [m8[j] r >= 4] is [max(m4[2j], m4[2j+1]) r >= 4]; step 6's c_k =
// [m4[k] r / 2^b >= 2] is [m4[k] r >= 2^(b+1)] (the division by 2^b is exact
// wherever the comparison can hold).
template <Hif4Elements K>
HWY_INLINE void Hif4GroupBits(const Hif4Maxima& mx, const Hif4ScaleState& s, int k, Hif4Mask& b, Hif4Mask& c) {
  const Hif4ElementTag d;
  if constexpr (K == Hif4Elements::exact) {
    const auto m8 = hn::BitCast(d, Hif4L2Max(mx, k, [](Hif4IntVec m) { return m; }));
    b = ExactProductAtLeast(d, m8, s.r, s.high);
    c = ExactProductAtLeast(d, hn::BitCast(d, mx.m4[k]), s.r, hn::IfThenElse(b, s.high, s.low));
  } else {
    // What the thresholds are compared with, monotone in m: fp32(m r) (a6:
    // its bf16 rounding is in the thresholds; V12: fp32(m + 2^-45)); that of
    // m8 is the max of those of the L2 group's m4.
    auto ratio = [&](Hif4IntVec bits) {
      const auto m = hn::BitCast(d, bits);
      if constexpr (K == Hif4Elements::pow2) {
        return hn::Add(m, hn::Set(d, kHif4V12Tiny));
      } else {
        return hn::Mul(m, s.r);
      }
    };
    b = hn::Ge(Hif4L2Max(mx, k, ratio), s.high);
    c = hn::Ge(ratio(mx.m4[k]), hn::IfThenElse(b, s.high, s.low));
  }
}

// The word's L2 and L3 bits by lane of the group vectors: c of L3 group g at
// bit 16 + g, b of L2 group j at bit 8 + j in the lane of its even L3 group
// 2j, 0 in the other. Each bit lies in one lane, so the sum of the masked
// lanes is the word's bits 8..31.
struct Hif4WordWeights {
  alignas(64) int32_t b[kHif4L3Groups];
  alignas(64) int32_t c[kHif4L3Groups];
};
constexpr Hif4WordWeights kHif4WordWeights = [] {
  Hif4WordWeights w{};
  for (int k = 0; k < kHif4GroupVectors; ++k)
    for (int l = 0; l < kHif4Lanes; ++l) {
      const int g = Hif4GroupOfLane(k, l);
      w.c[k * kHif4Lanes + l] = static_cast<int32_t>(1u << (16 + g));
      w.b[k * kHif4Lanes + l] = g % 2 == 0 ? static_cast<int32_t>(1u << (8 + g / 2)) : 0;
    }
  return w;
}();

// ---- Element step -----------------------------------------------------------------

// a6 §6.5 step 7: y = bf16(x * scale), scale = bf16(Ea_rec * 2^-(b+c)). x and
// scale are bf16, so the fp32 product is exact but for fp32 underflow, as in
// the pto-isa golden.
HWY_INLINE Hif4Vec Hif4A6Product(Hif4Vec v, Hif4Vec factor) {
  return Bf16Rne(Hif4ElementTag(), hn::Mul(v, factor));
}

// docs/spec/hif4.md §6.1 step 7 (§6.2, §6.4 step 4, §6.5 steps 6-7, §6.6 step 5): the
// magnitude code q of each lane, as a float 0..7, from the lane's element
// factor 4 r 2^-(b+c) (a6: r 2^-(b+c)). r: the lanes' random bytes (Rounding::stochastic).
//
// One product: fp32(|x| * 4 r 2^-(b+c)) = 4 fp32(fp32(|x| 2^-(b+c)) r) = 4t
// wherever the two fp32 intermediates of the reference are normal (scaling
// by a power of two is then exact), and an overflow is q = 7 either way. If
// either is subnormal, |x| 2^-(b+c) < 2^-126 and r <= 2^48 (S >= 2^-48) give
// t < 2^-76, and so does the one product: q = 0 under every rounding (4t +
// 1/2 rounds to 1/2; stochastic: floor(4t 2^8) = 0 steps never round up).
// V12 (r = 1, B in the factor) alike. amct's bf16 rounding of t commutes
// with the scaling by 4 the same way.
template <Hif4Elements K, Rounding R>
HWY_INLINE Hif4Vec Hif4Q(Hif4Vec v, Hif4Vec factor, Hif4IntVec r) {
  const Hif4ElementTag d;
  const Hif4IntTag di;
  const auto seven = hn::Set(d, 7.0f);
  // 4 s1p2_encode(t, R) decoded, from 4t: the S1P2 grid of t, quantum 1/4
  // up to 1.75, scaled by 4 (exactly, as RoundToQuantum is).
  auto quarter_grid = [&](Hif4Vec t4) { return RoundToQuantum<R>(d, hn::Min(t4, seven), hn::Set(d, 0x1p23f), r); };
  if constexpr (K == Hif4Elements::a6) {
    return quarter_grid(hn::Mul(hn::Abs(Hif4A6Product(v, factor)), hn::Set(d, 4.0f)));
  } else if constexpr (K == Hif4Elements::exact) {
    // t = |x| * 2^-(b+c) * r exactly.
#if HWY_NATIVE_FMA
    if constexpr (R != Rounding::stochastic) return S1p2QuarterOfExactFma<R>(d, hn::Abs(v), factor);
#endif
    // The split product takes +Inf as FLT_MAX (q = 7 either way).
    const auto a = hn::BitCast(d, hn::Min(AbsBits(d, v), hn::Set(di, kFltMaxBits)));
    Hif4Vec hi, err;
    ExactProduct(d, a, hn::Mul(factor, hn::Set(d, 0.25f)), hi, err);
    return hn::Mul(S1p2GridOfExact<R>(d, hi, err, r), hn::Set(d, 4.0f));
  } else {
    // t4 = 4t, t = fp32(fp32(|x| * 2^-(b+c)) * r) (amct: then bf16).
    auto t4 = hn::Mul(hn::Abs(v), factor);
    if constexpr (K == Hif4Elements::bf16_ratio) t4 = Bf16Rne(d, t4);
    if constexpr (R == Rounding::rha) {
      // The literal q = floor(fp32(4t + 1/2)), q >= 8 -> 7 (hif4.cpp round_element).
      return hn::Floor(hn::Min(hn::Add(t4, hn::Set(d, 0.5f)), seven));
    } else {
      return quarter_grid(t4);
    }
  }
}

// hif4.cpp code_is_negative. Sign of the code: from the sign bit of x (-0 ->
// 0x8), or from x < 0 (-0 -> 0x0); a6 from its product y < 0 (-0 and an
// underflowed product -> 0x0).
// kLessThanZero: Hif4Rules::sign_less_than_zero.
template <Hif4Elements K, bool kLessThanZero>
HWY_INLINE Hif4Mask Hif4Negative(Hif4Vec v, Hif4Vec factor) {
  const Hif4ElementTag d;
  const Hif4IntTag di;
  if constexpr (K == Hif4Elements::a6) return hn::Lt(Hif4A6Product(v, factor), hn::Zero(d));
  if constexpr (kLessThanZero) return hn::Lt(v, hn::Zero(d));
  return hn::RebindMask(d, hn::Lt(hn::BitCast(di, v), hn::Zero(di)));
}

// Steps 5-7 of a block with a scale, vector by vector: f(i, value, q,
// negative) with value the decode factor (q/4) -> (q/4) 2^(b+c) S of the
// lanes of vector i (s.value 2^(b+c)), q Hif4Q's and negative Hif4Negative's.
// Steps 5-6 run once per group vector, and each element vector takes its
// lanes' factors with one Hif4Spread (AVX2: 22 -> 10-12 instructions per
// vector of 8). Also the word's bits (word_bits, to be summed over its
// lanes; left for the compiler to drop where unread, as value is).
template <Hif4Elements K, Rounding R, class F>
HWY_INLINE void Hif4ForEachVector(const Hif4Rules& rules, const Hif4Maxima& mx, const Hif4ScaleState& s,
                                  const float* HWY_RESTRICT x, const uint8_t* HWY_RESTRICT rbits,
                                  Hif4IntVec& word_bits, F&& f) {
  const Hif4ElementTag d;
  const Hif4IntTag di;
  const int n = static_cast<int>(hn::Lanes(d));
  word_bits = hn::Zero(di);
  Hif4IntVec element[kHif4GroupVectors], value[kHif4GroupVectors];  // factor bits per group
  for (int k = 0; k < kHif4GroupVectors; ++k) {
    Hif4Mask b, c;
    Hif4GroupBits<K>(mx, s, k, b, c);
    const auto bv = hn::VecFromMask(di, hn::RebindMask(di, b)), cv = hn::VecFromMask(di, hn::RebindMask(di, c));
    word_bits = hn::Add(word_bits, hn::Or(hn::And(bv, hn::Load(di, kHif4WordWeights.b + k * kHif4Lanes)),
                                          hn::And(cv, hn::Load(di, kHif4WordWeights.c + k * kHif4Lanes))));
    // -(b + c) in the exponent field: added to a normal factor's bits it is
    // the factor times 2^-(b+c) (every factor here stays normal).
    const auto step = hn::ShiftLeft<23>(hn::Add(bv, cv));
    element[k] = hn::Add(hn::BitCast(di, s.element), step);
    value[k] = hn::Sub(hn::BitCast(di, s.value), step);
  }
  // The sign rule as a template argument: GCC otherwise tests it in each
  // vector's step (AVX2: 2 instructions per vector).
  WithFlag(rules.sign_less_than_zero, [&](auto less_than_zero) {
#pragma GCC unroll 64
    for (int i = 0; i < kHif4Vectors; ++i) {
      const auto factor = hn::BitCast(d, Hif4Spread(element[i / 4], i));
      const auto v = hn::LoadU(d, x + i * n);
      f(i, hn::BitCast(d, Hif4Spread(value[i / 4], i)), Hif4Q<K, R>(v, factor, RandomBytes<R>(d, rbits, i * n)),
        Hif4Negative<K, decltype(less_than_zero)::value>(v, factor));
    }
  });
}

HWY_INLINE void Hif4StoreNan(float* HWY_RESTRICT y) {
  const Hif4ElementTag d;
  const Hif4IntTag di;
  for (int i = 0; i < kHif4Block; i += static_cast<int>(hn::Lanes(d)))
    hn::StoreU(hn::BitCast(d, hn::Set(di, kQuietNanBits)), d, y + i);
}

// hif4.cpp hif4_fake_quant_block for a block with its maxima in mx: (q/4)
// 2^(b+c) S, exact, signed; a block with no scale is NaN.
template <Hif4Elements K, Rounding R>
HWY_INLINE void Hif4FakeQuantNumericBlock(const Hif4Rules& rules, const Hif4Maxima& mx, const float* HWY_RESTRICT x,
                                          float* HWY_RESTRICT y, const uint8_t* HWY_RESTRICT rbits) {
  const Hif4ElementTag d;
  const int n = static_cast<int>(hn::Lanes(d));
  Hif4ScaleState s;
  if (HWY_UNLIKELY(!Hif4Scale<K>(rules, mx, s))) return Hif4StoreNan(y);
  Hif4IntVec word_bits;
  Hif4ForEachVector<K, R>(rules, mx, s, x, rbits, word_bits, [&](int i, Hif4Vec value, Hif4Vec q, Hif4Mask negative) {
    const auto magnitude = hn::Mul(q, value);
    hn::StoreU(hn::IfThenElse(negative, hn::Neg(magnitude), magnitude), d, y + i * n);
  });
}

// A block with lanes that count as +0 (Hif4GroupMaxima): NaN, but under
// passthrough the block of those lanes as +0, with the non-finite inputs
// copied through; a6's (which also has the blocks not exact in bf16) is the
// reference's. Out of line: the common path pays for a second inlined copy
// of the steps in registers.
template <Hif4Elements K, Rounding R>
HWY_NOINLINE void Hif4FakeQuantCleanedBlock(const Hif4Rules& rules, const float* HWY_RESTRICT x, float* HWY_RESTRICT y,
                                            const uint8_t* HWY_RESTRICT rbits) {
  if constexpr (K == Hif4Elements::a6) return reference::hif4_fake_quant_block(*rules.recipe, R, x, y, rbits);
  if (rules.non_finite != NonFinitePolicy::passthrough) return Hif4StoreNan(y);
  alignas(64) float cleaned[kHif4Block];
  alignas(64) float out[kHif4Block];
  Hif4CleanLanes(rules.non_finite, x, cleaned);
  Hif4Maxima mx;
  Hif4GroupMaxima<K>(rules.non_finite, cleaned, mx);  // no lane left to clean
  Hif4FakeQuantNumericBlock<K, R>(rules, mx, cleaned, out, rbits);
  for (int i = 0; i < kHif4Block; ++i) y[i] = std::isfinite(x[i]) ? out[i] : x[i];
}

// hif4.cpp hif4_fake_quant_block: (q/4) 2^(b+c) S, exact, signed; a NaN
// block is NaN; passthrough copies the non-finite inputs.
// rbits: the block's random bytes (Rounding::stochastic), else unread.
template <Hif4Elements K, Rounding R>
HWY_INLINE void Hif4FakeQuantBlock(const Hif4Rules& rules, const float* HWY_RESTRICT x, float* HWY_RESTRICT y,
                                   const uint8_t* HWY_RESTRICT rbits) {
  Hif4Maxima mx;
  if (HWY_LIKELY(Hif4GroupMaxima<K>(rules.non_finite, x, mx))) return Hif4FakeQuantNumericBlock<K, R>(rules, mx, x, y, rbits);
  Hif4FakeQuantCleanedBlock<K, R>(rules, x, y, rbits);
}

// Writes the block's 64 codes, nibble-packed in `order` (32 bytes at
// packed), from its maxima in mx; returns the canonical scale word.
template <Hif4Elements K, Rounding R>
HWY_INLINE uint32_t Hif4QuantizeNumericBlock(const Hif4Rules& rules, const Hif4Maxima& mx, const float* HWY_RESTRICT x,
                                             NibbleOrder order, uint8_t* HWY_RESTRICT packed,
                                             const uint8_t* HWY_RESTRICT rbits) {
  const Hif4ElementTag d;
  const Hif4IntTag di;
  Hif4ScaleState s;
  if (HWY_UNLIKELY(!Hif4Scale<K>(rules, mx, s))) {  // hif4.cpp v14_steps: bits and codes 0
    std::fill(packed, packed + kHif4Block / 2, uint8_t{0});
    return kHif4NanScale;
  }
  Hif4IntVec codes[kHif4Vectors];
  Hif4IntVec word_bits;
  // The block's values are loaded again by Hif4ForEachVector rather than
  // kept from Hif4GroupMaxima: GCC otherwise holds them (and their |x|)
  // beside mx's and the codes' vectors and spills on AVX2's 16 registers
  // (hif4.v12_pow2 quantize 6.5 -> 5.4 AVX2 instructions per value, the
  // others 0.3 less; fake-quant, with no codes to hold, gains nothing). An
  // empty asm with a memory clobber says so; it emits no instruction.
  asm volatile("" ::: "memory");
  Hif4ForEachVector<K, R>(rules, mx, s, x, rbits, word_bits, [&](int i, Hif4Vec, Hif4Vec q, Hif4Mask negative) {
    // code = q | 8 negative: the bits of q + 2^23 (+ 8) less those of 2^23 (SmallIntOf).
    const auto magic = hn::IfThenElse(negative, hn::Set(d, 0x1p23f + 8.0f), hn::Set(d, 0x1p23f));
    codes[i] = hn::Sub(hn::BitCast(di, hn::Add(q, magic)), hn::Set(di, 0x4B000000));
  });
  PackCodeVectors<kHif4Block>(di, order, codes, packed);
  return s.byte | static_cast<uint32_t>(hn::GetLane(hn::SumOfLanes(di, word_bits)));
}

// hif4.cpp run_steps for a block with lanes that count as +0
// (Hif4GroupMaxima): bits and codes of the block with those lanes as +0,
// scale 0xFF but under passthrough; a6's is the reference's. Out of line as
// Hif4FakeQuantCleanedBlock.
template <Hif4Elements K, Rounding R>
HWY_NOINLINE uint32_t Hif4QuantizeCleanedBlock(const Hif4Rules& rules, const float* HWY_RESTRICT x, NibbleOrder order,
                                               uint8_t* HWY_RESTRICT packed, const uint8_t* HWY_RESTRICT rbits) {
  if constexpr (K == Hif4Elements::a6) {
    const Hif4ElementTag d;
    const Hif4IntTag di;
    const int n = static_cast<int>(hn::Lanes(d));
    alignas(64) uint8_t codes[kHif4Block];
    const uint32_t word = reference::hif4_quantize_block(*rules.recipe, R, x, codes, rbits);
    Hif4IntVec code_vectors[kHif4Vectors];
    for (int i = 0; i < kHif4Vectors; ++i) code_vectors[i] = LoadCodeBytes(d, codes + i * n);
    PackCodeVectors<kHif4Block>(di, order, code_vectors, packed);
    return word;
  }
  alignas(64) float cleaned[kHif4Block];
  Hif4CleanLanes(rules.non_finite, x, cleaned);
  Hif4Maxima mx;
  Hif4GroupMaxima<K>(rules.non_finite, cleaned, mx);  // no lane left to clean
  const uint32_t word = Hif4QuantizeNumericBlock<K, R>(rules, mx, cleaned, order, packed, rbits);
  return rules.non_finite == NonFinitePolicy::passthrough ? word : (word & ~0xFFu) | kHif4NanScale;
}

// hif4.cpp hif4_quantize_block. `packed`: the block's 32 bytes in the packed
// row (nibble order `order`).
template <Hif4Elements K, Rounding R>
HWY_INLINE uint32_t Hif4QuantizeBlock(const Hif4Rules& rules, const float* HWY_RESTRICT x, NibbleOrder order,
                                      uint8_t* HWY_RESTRICT packed, const uint8_t* HWY_RESTRICT rbits) {
  Hif4Maxima mx;
  if (HWY_LIKELY(Hif4GroupMaxima<K>(rules.non_finite, x, mx)))
    return Hif4QuantizeNumericBlock<K, R>(rules, mx, x, order, packed, rbits);
  return Hif4QuantizeCleanedBlock<K, R>(rules, x, order, packed, rbits);
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
