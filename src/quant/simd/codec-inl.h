// Per-target SIMD forms of the roundings the fast recipes use: E2M1 and S1P2
// elements, UE4M3, E8M0 and E6M2 scales, bf16. Each helper mirrors one codec
// call of the scalar reference (src/codec/minifloat.cpp) on the inputs the
// recipes can give it; the differential tests prove them equal bit for bit.
//
// The one trick used throughout: for a >= 0 and a magic M = quantum * 2^23
// with a < M, the fp32 sum a + M lands in [M, 2M), whose spacing is the
// quantum, so (a + M) - M is a rounded to a multiple of the quantum, ties to
// even (one IEEE addition, no rounding-mode state). Other element roundings
// correct that result by one quantum where it went the wrong way.
//
// Only add, multiply, compare and integer bit operations are used: Highway's
// Round/Floor are emulated differently per target (the HWY_SCALAR Round of
// Highway 1.0.3 rounds 0.49999997 to 1), and these must be identical on all.
#if defined(FP4EMU_SRC_QUANT_SIMD_CODEC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_CODEC_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_CODEC_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_CODEC_INL_H_
#endif

#include <cstdint>
#include <type_traits>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/codec/rounding.hpp"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int32_t kAbsMask = 0x7FFFFFFF;
constexpr int32_t kExponentMask = 0x7F800000;
constexpr int32_t kInfBits = 0x7F800000;
constexpr int32_t kQuietNanBits = 0x7FC00000;  // std::nanf(""), quiet_NaN(): what the reference writes

template <class D>
using IntVec = hn::Vec<hn::RebindToSigned<D>>;

// v, its value hidden from the compiler. A kernel makes its constants once,
// before a loop of blocks, through this: GCC otherwise re-creates each where
// it is used (a move to a general register and a broadcast, each use), which
// made nvfp4.ggml quantize 7 % slower (AVX-512, one thread, in cache).
template <class V>
HWY_INLINE V Opaque(V v) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128 && (defined(__GNUC__) || defined(__clang__))
  asm("" : "+v"(v.raw));
#endif
  return v;
}

// |x| as int32 bits: a NaN sorts above +Inf, every number by magnitude.
template <class D>
HWY_INLINE IntVec<D> AbsBits(D /*d*/, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  return hn::And(hn::BitCast(di, v), hn::Set(di, kAbsMask));
}

// 2^(E-127) from a biased exponent E in [0, 254]; E = 0 gives the subnormal 2^-127.
template <class D>
HWY_INLINE hn::Vec<D> Pow2FromBiased(D d, IntVec<D> biased) {
  const hn::RebindToSigned<D> di;
  const auto normal = hn::ShiftLeft<23>(biased);
  return hn::BitCast(d, hn::IfThenElse(hn::Eq(biased, hn::Zero(di)), hn::Set(di, 0x00400000), normal));
}

// Stochastic rounding's decision (rounding.hpp, the integer rule of PTX
// cvt.rs, as encode_stochastic applies it): `steps` = floor(frac * 2^8), frac
// the position of the value between its two grid neighbours, and r its
// random byte 0..255; round away from zero iff steps + r >= 2^8.
template <class D>
HWY_INLINE hn::Mask<D> StochasticRoundsUp(D /*d*/, IntVec<D> steps, IntVec<D> r) {
  const hn::RebindToSigned<D> di;
  return hn::RebindMask(D(), hn::Gt(hn::Add(steps, r), hn::Set(di, (1 << kStochasticBits) - 1)));
}

// a rounded to a multiple of quantum = magic * 2^-23 (0 <= a < magic, a not
// NaN). `r` (the lanes' random bytes 0..255) is read by Rounding::stochastic only.
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> RoundToQuantum(D d, hn::Vec<D> a, hn::Vec<D> magic,
                                     IntVec<D> r = hn::Zero(hn::RebindToSigned<D>())) {
  const hn::Vec<D> nearest_even = hn::Sub(hn::Add(a, magic), magic);
  if constexpr (R == Rounding::rne) {
    return nearest_even;
  } else {
    const hn::Vec<D> quantum = hn::Mul(magic, hn::Set(d, 0x1p-23f));  // exact: powers of two
    const hn::Vec<D> half = hn::Mul(magic, hn::Set(d, 0x1p-24f));
    // a - r and r - a are exact: both are multiples of ulp(a), less than a quantum apart.
    if constexpr (R == Rounding::rtz) {
      return hn::IfThenElse(hn::Gt(nearest_even, a), hn::Sub(nearest_even, quantum), nearest_even);
    } else if constexpr (R == Rounding::stochastic) {
      const hn::RebindToSigned<D> di;
      const auto down = hn::IfThenElse(hn::Gt(nearest_even, a), hn::Sub(nearest_even, quantum), nearest_even);
      // floor((a - down) / quantum * 2^8): a - down is exact, 2^8 / quantum =
      // 2^31 / magic is a power of two (its exponent field 285 - magic's, in
      // range for the element grids) whose product with it is exact and below
      // 2^8, and the conversion to int truncates, which is floor here.
      const auto inverse = hn::BitCast(d, hn::Sub(hn::Set(di, (127 + 31 + 127) << 23), hn::BitCast(di, magic)));
      const auto steps = hn::ConvertTo(di, hn::Mul(hn::Sub(a, down), inverse));
      return hn::IfThenElse(StochasticRoundsUp(d, steps, r), hn::Add(down, quantum), down);
    } else if constexpr (R == Rounding::rha) {
      return hn::IfThenElse(hn::Eq(hn::Sub(a, nearest_even), half), hn::Add(nearest_even, quantum),
                            nearest_even);
    } else {
      static_assert(R == Rounding::ties_to_zero, "rtp is a scale rounding, not an element one");
      return hn::IfThenElse(hn::Eq(hn::Sub(nearest_even, a), half), hn::Sub(nearest_even, quantum),
                            nearest_even);
    }
  }
}

// ---- Formats from their traits ------------------------------------------------
// Every constant below comes from the MinifloatTraits of the scalar codec
// (fp4emu/codec/minifloat.hpp), as ml_dtypes derives each float8 conversion
// from its traits: one rounding, one code and one value function for all
// formats. Only magnitudes: the callers carry the sign.

constexpr float Pow2f(int e) {
  float v = 1.0f;
  for (; e > 0; --e) v *= 2.0f;
  for (; e < 0; ++e) v *= 0.5f;
  return v;
}

template <const MinifloatTraits& T>
struct GridOf {
  static constexpr int kMan = T.man_bits;
  // Exponent of the lowest binade: subnormals share 1 - bias; without
  // subnormals exponent field 0 is an ordinary binade (E6M2: 2^-48).
  static constexpr int kEmin = (T.has_subnormals ? 1 : 0) - T.bias;
  // The largest finite value: the all-ones code is NaN (fn, top_code), the
  // all-ones exponent is Inf/NaN (ieee), or every code is a number (none).
  static constexpr int kTopField = (1 << T.exp_bits) - 1;
  static constexpr bool kTopCodeIsNan = T.specials == SpecialCodes::fn || T.specials == SpecialCodes::top_code;
  static constexpr int kMaxField = T.specials == SpecialCodes::ieee || (kTopCodeIsNan && kMan == 0) ? kTopField - 1
                                                                                                      : kTopField;
  static constexpr int kMaxMantissa = (1 << kMan) - (kTopCodeIsNan && kMan > 0 ? 2 : 1);
  static constexpr int kEmax = kMaxField - T.bias;
  static constexpr float kMax = Pow2f(kEmax) * (1.0f + static_cast<float>(kMaxMantissa) / static_cast<float>(1 << kMan));
  static constexpr float kMin = Pow2f(kEmin);  // smallest value of a format without zero
  // The fp32 exponent field of 2^kEmin minus the format's: code = (fp32 bits >> (23 - kMan)) - kFieldOffset << kMan.
  static constexpr int32_t kFieldOffset = 127 - T.bias;
  // The magic of RoundToQuantum is the quantum times 2^23: it stays finite
  // only for formats narrower than fp32's exponent range.
  static constexpr bool kMagicFits = kEmax + 23 - kMan < 128 && kEmin > -127;
};

// RNE of a non-NaN fp32 to kMan mantissa bits in fp32's own exponent range
// (IEEE overflow to Inf): bf16, and E6M2 where it is asked with no exponent limit.
template <int kMan, class D>
HWY_INLINE hn::Vec<D> RneToMantissaBits(D d, hn::Vec<D> v) {
  constexpr int kShift = 23 - kMan;
  const hn::RebindToSigned<D> di;
  const auto bits = hn::BitCast(di, v);
  const auto lsb = hn::And(hn::ShiftRight<kShift>(bits), hn::Set(di, 1));
  const auto rounded = hn::Add(hn::Add(bits, hn::Set(di, (1 << (kShift - 1)) - 1)), lsb);
  return hn::BitCast(d, hn::And(rounded, hn::Set(di, static_cast<int32_t>(~((1u << kShift) - 1u)))));
}

// decode(T, encode(T, a, R, saturate)) for a >= 0 (Inf allowed, not NaN):
// a on the grid of T, saturating at its largest finite value; formats
// without zero give their smallest value for anything below it. Formats as
// wide as fp32 (bf16) round RNE with IEEE overflow, as bf16_encode does.
// Stochastic rounding (its random bytes in r) rounds the saturated value,
// which is what encode_stochastic's saturation gives: beyond the largest
// value both neighbours saturate to it.
template <const MinifloatTraits& T, Rounding R, class D>
HWY_INLINE hn::Vec<D> RoundToGrid(D d, hn::Vec<D> a, IntVec<D> r = hn::Zero(hn::RebindToSigned<D>())) {
  using G = GridOf<T>;
  if constexpr (!G::kMagicFits) {
    static_assert(R == Rounding::rne, "formats as wide as fp32 round to nearest even here");
    return RneToMantissaBits<G::kMan>(d, a);
  } else {
    const hn::RebindToSigned<D> di;
    a = hn::Min(a, hn::Set(d, G::kMax));  // the saturated maximum is on the grid
    // quantum 2^(max(floor(log2 a), kEmin) - kMan)
    const auto exponent = hn::And(hn::BitCast(di, a), hn::Set(di, kExponentMask));
    const auto magic = hn::Add(hn::Max(exponent, hn::Set(di, (G::kEmin + 127) << 23)), hn::Set(di, (23 - G::kMan) << 23));
    auto grid = RoundToQuantum<R>(d, a, hn::BitCast(d, magic), r);
    if constexpr (!T.has_subnormals) grid = hn::Max(grid, hn::Set(d, G::kMin));
    return grid;
  }
}

// An integer-valued v, 0 <= v < 2^23, as int32: the fp32 bits of v + 2^23
// (exact) less those of 2^23. Cheaper than a float-to-int conversion, which
// Highway follows with a saturation fix-up on x86 (4 more instructions per
// vector on AVX2).
template <class D>
HWY_INLINE IntVec<D> SmallIntOf(D d, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  return hn::Sub(hn::BitCast(di, hn::Add(v, hn::Set(d, 0x1p23f))), hn::Set(di, 0x4B000000));
}

// Magnitude code of a value on T's grid (the inverse of ValueOf).
template <const MinifloatTraits& T, class D>
HWY_INLINE IntVec<D> CodeOf(D d, hn::Vec<D> grid) {
  using G = GridOf<T>;
  const hn::RebindToSigned<D> di;
  // Normal: the fp32 exponent field re-biased, then the kMan mantissa bits.
  const auto normal = hn::Sub(hn::ShiftRight<23 - G::kMan>(hn::BitCast(di, grid)), hn::Set(di, G::kFieldOffset << G::kMan));
  if constexpr (!T.has_subnormals) {
    return normal;
  } else if constexpr (G::kMan == 1) {
    // One subnormal, 2^(kEmin-1) (E2M1's 0.5): its re-biased field is the
    // normal path's 0, where its code is 1; +0's field is 0. So the code is
    // max(normal, min(field, 1)): four instructions where the general path
    // below takes seven.
    const auto field = hn::ShiftRight<23 - G::kMan>(hn::BitCast(di, grid));
    return hn::Max(normal, hn::Min(field, hn::Set(di, 1)));
  } else {
    // The integer grid * 2^(kMan - kEmin), below 2^kMan where it is used.
    const auto subnormal = SmallIntOf(d, hn::Mul(grid, hn::Set(d, Pow2f(G::kMan - G::kEmin))));
    return hn::IfThenElse(hn::RebindMask(di, hn::Lt(grid, hn::Set(d, Pow2f(G::kEmin)))), subnormal, normal);
  }
}

// Value of a magnitude code of T that is not a NaN code.
template <const MinifloatTraits& T, class D>
HWY_INLINE hn::Vec<D> ValueOf(D d, IntVec<D> code) {
  using G = GridOf<T>;
  const hn::RebindToSigned<D> di;
  const auto normal = hn::BitCast(d, hn::ShiftLeft<23 - G::kMan>(hn::Add(code, hn::Set(di, G::kFieldOffset << G::kMan))));
  if constexpr (!T.has_subnormals) {
    return normal;
  } else {
    const auto subnormal = hn::Mul(hn::ConvertTo(d, code), hn::Set(d, Pow2f(G::kEmin - G::kMan)));
    return hn::IfThenElse(hn::RebindMask(d, hn::Lt(code, hn::Set(di, 1 << G::kMan))), subnormal, normal);
  }
}

static_assert(GridOf<kE2M1>::kMax == 6.0f && GridOf<kS1P2>::kMax == 1.75f && GridOf<kUE4M3>::kMax == 448.0f &&
              GridOf<kE6M2>::kMax == 49152.0f && GridOf<kE6M2>::kMin == 0x1p-48f && !GridOf<kBF16>::kMagicFits);

// ---- Names in the field's words (the recipes' conversions) ---------------------

// E2M1 (MXFP4 / NVFP4 elements): e2m1_encode(a, R) decoded, saturating at 6
// (stochastic: e2m1_encode_sr(a, r)).
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> E2m1Grid(D d, hn::Vec<D> a, IntVec<D> r = hn::Zero(hn::RebindToSigned<D>())) {
  return RoundToGrid<kE2M1, R>(d, a, r);
}
template <class D>
HWY_INLINE IntVec<D> E2m1Code(D d, hn::Vec<D> grid) { return CodeOf<kE2M1>(d, grid); }
template <class D>
HWY_INLINE hn::Vec<D> E2m1Value(D d, IntVec<D> magnitude) { return ValueOf<kE2M1>(d, magnitude); }

// S1P2 (HiF4 elements, q/4): s1p2_encode(a, R) decoded, saturating at 1.75
// (stochastic: s1p2_encode_sr(a, r)).
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> S1p2Grid(D d, hn::Vec<D> a, IntVec<D> r = hn::Zero(hn::RebindToSigned<D>())) {
  return RoundToGrid<kS1P2, R>(d, a, r);
}

// UE4M3 (NVFP4 block scale): ue4m3_encode(p, rne, saturate) decoded, p >= 0 not NaN.
template <class D>
HWY_INLINE hn::Vec<D> Ue4m3RneSatGrid(D d, hn::Vec<D> p) { return RoundToGrid<kUE4M3, Rounding::rne>(d, p); }
template <class D>
HWY_INLINE IntVec<D> Ue4m3Code(D d, hn::Vec<D> grid) { return CodeOf<kUE4M3>(d, grid); }
template <class D>
HWY_INLINE hn::Vec<D> Ue4m3Value(D d, IntVec<D> code) { return ValueOf<kUE4M3>(d, code); }

// bf16_rne(v) for a non-NaN fp32 v: IEEE overflow to +-Inf, like the codec.
template <class D>
HWY_INLINE hn::Vec<D> Bf16Rne(D d, hn::Vec<D> v) { return RoundToGrid<kBF16, Rounding::rne>(d, v); }

// E6M2 (HiF4 level-1 scale). e6m2_encode(s, rne, saturate) decoded.
template <class D>
HWY_INLINE hn::Vec<D> E6m2RneSatGrid(D d, hn::Vec<D> s) { return RoundToGrid<kE6M2, Rounding::rne>(d, s); }
// RNE to E6M2's mantissa with no exponent limit (hif4.cpp kE6M2AnyExponent):
// the value the unclamped HiF4 recipes check against the E6M2 range.
template <class D>
HWY_INLINE hn::Vec<D> E6m2RneAnyExponent(D d, hn::Vec<D> s) { return RneToMantissaBits<kE6M2.man_bits>(d, s); }
template <class D>
HWY_INLINE IntVec<D> E6m2Code(D d, hn::Vec<D> grid) { return CodeOf<kE6M2>(d, grid); }
// e6m2_decode(code) for a code that is not NaN (0xFF).
template <class D>
HWY_INLINE hn::Vec<D> E6m2Value(D d, IntVec<D> code) { return ValueOf<kE6M2>(d, code); }

// e6m2_reciprocal_bf16(code): 2^-(E-48) * {1, 205/256, 171/256, 146/256}[M].
template <class D>
HWY_INLINE hn::Vec<D> E6m2ReciprocalBf16(D d, IntVec<D> code) {
  const hn::RebindToSigned<D> di;
  const auto mantissa = hn::And(code, hn::Set(di, 3));
  const auto power = hn::BitCast(d, hn::ShiftLeft<23>(hn::Sub(hn::Set(di, 127 + 48), hn::ShiftRight<2>(code))));
  auto table = hn::Set(d, 146.0f / 256.0f);
  table = hn::IfThenElse(hn::RebindMask(d, hn::Eq(mantissa, hn::Set(di, 2))), hn::Set(d, 171.0f / 256.0f), table);
  table = hn::IfThenElse(hn::RebindMask(d, hn::Eq(mantissa, hn::Set(di, 1))), hn::Set(d, 205.0f / 256.0f), table);
  table = hn::IfThenElse(hn::RebindMask(d, hn::Eq(mantissa, hn::Zero(di))), hn::Set(d, 1.0f), table);
  return hn::Mul(power, table);  // exact
}

// ---- Bytes ------------------------------------------------------------------

// Writes n (a multiple of Lanes(d)) int32 codes 0..15 as bytes.
template <class D>
HWY_INLINE void StoreCodeBytes(D /*d*/, IntVec<D> codes, uint8_t* out) {
  const hn::Rebind<uint8_t, D> du8;
  hn::StoreU(hn::DemoteTo(du8, codes), du8, out);
}

template <class D>
HWY_INLINE IntVec<D> LoadCodeBytes(D /*d*/, const uint8_t* in) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, D> du8;
  return hn::PromoteTo(di, hn::LoadU(du8, in));
}

// The random bytes of lanes i.. (one per element, 0..255) where the element
// rounding is stochastic; the other roundings read none (rbits may be null).
template <Rounding R, class D>
HWY_INLINE IntVec<D> RandomBytes(D d, const uint8_t* HWY_RESTRICT rbits, int64_t i) {
  if constexpr (R == Rounding::stochastic) {
    return LoadCodeBytes(d, rbits + i);
  } else {
    (void)rbits;
    (void)i;
    return hn::Zero(hn::RebindToSigned<D>());
  }
}

// f(std::true_type()) or f(std::false_type()): a run-time flag as a
// constant for a loop whose every step would test it (GCC keeps such a test,
// a load and a branch, in each step).
template <class F>
HWY_INLINE void WithFlag(bool flag, F&& f) {
  if (flag) {
    f(std::true_type());
  } else {
    f(std::false_type());
  }
}

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_CODEC_INL_H_
