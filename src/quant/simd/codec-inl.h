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

// a rounded to a multiple of quantum = magic * 2^-23 (0 <= a < magic, a not NaN).
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> RoundToQuantum(D d, hn::Vec<D> a, hn::Vec<D> magic) {
  const hn::Vec<D> nearest_even = hn::Sub(hn::Add(a, magic), magic);
  if constexpr (R == Rounding::rne) {
    return nearest_even;
  } else {
    const hn::Vec<D> quantum = hn::Mul(magic, hn::Set(d, 0x1p-23f));  // exact: powers of two
    const hn::Vec<D> half = hn::Mul(magic, hn::Set(d, 0x1p-24f));
    // a - r and r - a are exact: both are multiples of ulp(a), less than a quantum apart.
    if constexpr (R == Rounding::rtz) {
      return hn::IfThenElse(hn::Gt(nearest_even, a), hn::Sub(nearest_even, quantum), nearest_even);
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

// ---- E2M1 (MXFP4 / NVFP4 elements) -----------------------------------------

// e2m1_encode(a, R) decoded, for a >= 0 (Inf allowed, not NaN): a on the grid
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}, saturating at 6 (every rounding gives 6 above 6).
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> E2m1Grid(D d, hn::Vec<D> a) {
  const hn::RebindToSigned<D> di;
  a = hn::Min(a, hn::Set(d, 6.0f));
  // quantum 2^(max(floor(log2 a), 0) - 1): 0.5 below 2, 1 in [2, 4), 2 in [4, 6].
  const auto exponent = hn::And(hn::BitCast(di, a), hn::Set(di, kExponentMask));
  const auto magic = hn::Add(hn::Max(exponent, hn::Set(di, 127 << 23)), hn::Set(di, 22 << 23));
  return RoundToQuantum<R>(d, a, hn::BitCast(d, magic));
}

// Magnitude code 0..7 of a value on the E2M1 grid.
template <class D>
HWY_INLINE IntVec<D> E2m1Code(D d, hn::Vec<D> grid) {
  const hn::RebindToSigned<D> di;
  const auto below_one = hn::ConvertTo(di, hn::Add(grid, grid));  // 0, 0.5 -> 0, 1
  // 1, 1.5, 2, 3, 4, 6: exponent and the one mantissa bit, 1.0 = (127 << 1) -> code 2.
  const auto normal = hn::Sub(hn::ShiftRight<22>(hn::BitCast(di, grid)), hn::Set(di, 252));
  return hn::IfThenElse(hn::RebindMask(di, hn::Lt(grid, hn::Set(d, 1.0f))), below_one, normal);
}

// Value of an E2M1 magnitude code 0..7 (the inverse of E2m1Code).
template <class D>
HWY_INLINE hn::Vec<D> E2m1Value(D d, IntVec<D> magnitude) {
  const hn::RebindToSigned<D> di;
  const auto small = hn::Mul(hn::ConvertTo(d, magnitude), hn::Set(d, 0.5f));
  const auto normal = hn::BitCast(d, hn::ShiftLeft<22>(hn::Add(magnitude, hn::Set(di, 252))));
  return hn::IfThenElse(hn::RebindMask(d, hn::Lt(magnitude, hn::Set(di, 2))), small, normal);
}

// ---- S1P2 (HiF4 elements, q/4 for q = 0..7) --------------------------------

// s1p2_encode(a, R) decoded: a >= 0 (Inf allowed, not NaN) on the q/4 grid,
// saturating at 1.75.
template <Rounding R, class D>
HWY_INLINE hn::Vec<D> S1p2Grid(D d, hn::Vec<D> a) {
  a = hn::Min(a, hn::Set(d, 1.75f));
  return RoundToQuantum<R>(d, a, hn::Set(d, 0x1p21f));  // quantum 0.25
}

// ---- UE4M3 (NVFP4 block scale) ---------------------------------------------

// ue4m3_encode(p, rne, saturate) decoded, for p >= 0, not NaN.
template <class D>
HWY_INLINE hn::Vec<D> Ue4m3RneSatGrid(D d, hn::Vec<D> p) {
  const hn::RebindToSigned<D> di;
  p = hn::Min(p, hn::Set(d, 448.0f));  // the satfinite maximum is on the grid
  // quantum 2^(max(floor(log2 p), -6) - 3): subnormals below 2^-6 step by 2^-9.
  const auto exponent = hn::And(hn::BitCast(di, p), hn::Set(di, kExponentMask));
  const auto magic = hn::Add(hn::Max(exponent, hn::Set(di, 121 << 23)), hn::Set(di, 20 << 23));
  return RoundToQuantum<Rounding::rne>(d, p, hn::BitCast(d, magic));
}

// UE4M3 code of a value on its grid (0..448).
template <class D>
HWY_INLINE IntVec<D> Ue4m3Code(D d, hn::Vec<D> grid) {
  const hn::RebindToSigned<D> di;
  const auto subnormal = hn::ConvertTo(di, hn::Mul(grid, hn::Set(d, 512.0f)));
  // Normal: fp32 exponent field E -> E4M3 field E - 120, three mantissa bits.
  const auto normal = hn::Sub(hn::ShiftRight<20>(hn::BitCast(di, grid)), hn::Set(di, 120 << 3));
  return hn::IfThenElse(hn::RebindMask(di, hn::Lt(grid, hn::Set(d, 0x1p-6f))), subnormal, normal);
}

// ue4m3_decode(code & 0x7F) for codes that are not NaN (0x7F).
template <class D>
HWY_INLINE hn::Vec<D> Ue4m3Value(D d, IntVec<D> code) {
  const hn::RebindToSigned<D> di;
  const auto subnormal = hn::Mul(hn::ConvertTo(d, code), hn::Set(d, 0x1p-9f));
  const auto normal = hn::BitCast(d, hn::ShiftLeft<20>(hn::Add(code, hn::Set(di, 120 << 3))));
  return hn::IfThenElse(hn::RebindMask(d, hn::Lt(code, hn::Set(di, 8))), subnormal, normal);
}

// ---- bf16 and E6M2 (HiF4) ---------------------------------------------------

// bf16_rne(v) for a non-NaN fp32 v: IEEE overflow to +-Inf, like the codec.
template <class D>
HWY_INLINE hn::Vec<D> Bf16Rne(D d, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  const auto bits = hn::BitCast(di, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 1));
  const auto rounded = hn::Add(hn::Add(bits, hn::Set(di, 0x7FFF)), lsb);
  return hn::BitCast(d, hn::And(rounded, hn::Set(di, static_cast<int32_t>(0xFFFF0000u))));
}

// e6m2_encode(s, rne, saturate) decoded, for s already in [2^-48, 49152]:
// every value there is a normal fp32 and E6M2 has no subnormals, so this is
// RNE to two mantissa bits.
template <class D>
HWY_INLINE hn::Vec<D> E6m2RneGrid(D d, hn::Vec<D> s) {
  const hn::RebindToSigned<D> di;
  const auto bits = hn::BitCast(di, s);
  const auto lsb = hn::And(hn::ShiftRight<21>(bits), hn::Set(di, 1));
  const auto rounded = hn::Add(hn::Add(bits, hn::Set(di, 0xFFFFF)), lsb);
  return hn::BitCast(d, hn::And(rounded, hn::Set(di, static_cast<int32_t>(0xFFE00000u))));
}

// E6M2 code of a value on its grid: fp32 exponent field E -> E - 79 (bias 48), two mantissa bits.
template <class D>
HWY_INLINE IntVec<D> E6m2Code(D /*d*/, hn::Vec<D> grid) {
  const hn::RebindToSigned<D> di;
  return hn::Sub(hn::ShiftRight<21>(hn::BitCast(di, grid)), hn::Set(di, 79 << 2));
}

// e6m2_decode(code) for a code that is not NaN (0xFF).
template <class D>
HWY_INLINE hn::Vec<D> E6m2Value(D d, IntVec<D> code) {
  const hn::RebindToSigned<D> di;
  return hn::BitCast(d, hn::ShiftLeft<21>(hn::Add(code, hn::Set(di, 79 << 2))));
}

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

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_CODEC_INL_H_
