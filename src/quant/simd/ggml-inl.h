// Per-target form of ggml's element rule, best_index_mxfp4 (ggml-quants.c:337-348
// at d99724f2; library_ops.hpp ggml_best_index): the first index of the
// smallest fp32 |kv*d - x| over kvalues_fp4 (ggml-common.h:1126-1129), strict
// '<'. Shared by nvfp4.ggml (d = ggml_ue4m3_to_fp32(s)) and mxfp4.ggml (d =
// GGML_E8M0_TO_FP32_HALF(c)); each reads the thresholds of its unit d from a
// row built once per process (driver.cpp ggml_argmin_row).
//
// The argmin over {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, ..., -12} (times d) runs
// over the magnitudes of |x|: fp32(kv*d - x) is the negation of fp32(-kv*d +
// x) (round to nearest is symmetric), the candidates of the other sign and
// index 8 never beat index 0 (|x| <= their error, and index 0 comes first),
// and indices 9..15 are 1..7 with the sign. So a nonzero magnitude k of a
// negative x is code 8 + k.
#if defined(FP4EMU_SRC_QUANT_SIMD_GGML_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_GGML_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_GGML_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_GGML_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "codec-inl.h"
#include "hwy/highway.h"
#include "kernels.hpp"
#include "src/quant/library_ops.hpp"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// kvalues_fp4[0..7] (library::kGgmlValues) as fp32, padded to 16 for a
// lookup in a 16-lane vector.
struct alignas(64) GgmlMagnitudes {
  float v[16] = {};
};
constexpr GgmlMagnitudes kGgmlMagnitudes = [] {
  GgmlMagnitudes m;
  for (int k = 0; k < 8; ++k) m.v[k] = library::kGgmlValues[static_cast<size_t>(k)];
  return m;
}();

// Whether D's vectors hold a row's lookup table (GgmlArgminRow::threshold,
// 16 entries, 8 used): one TableLookupLanes then picks an entry per lane.
template <class D>
constexpr bool GgmlLookupFits(D d) {
  return hn::MaxLanes(d) >= 8 && hn::MaxLanes(d) <= 16;
}

// best_index_mxfp4 literally: the first index of the smallest
// fp32(|m*unit - |x||), strict '<'; NaN and Inf -> 0; a candidate m*unit
// that overflows to Inf never wins. The blocks the thresholds do not cover
// (GgmlArgminRow::limit_bits) take this.
template <class D>
HWY_INLINE IntVec<D> GgmlArgminLiteral(D d, float unit, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  const auto a = hn::Abs(v);
  auto best_err = a;  // m = 0: |0 - |x||
  auto best = hn::Zero(di);
  for (int k = 1; k < 8; ++k) {
    const auto err = hn::Abs(hn::Sub(hn::Set(d, kGgmlMagnitudes.v[k] * unit), a));
    const auto better = hn::Lt(err, best_err);
    best_err = hn::IfThenElse(better, err, best_err);
    best = hn::IfThenElse(hn::RebindMask(di, better), hn::Set(di, k), best);
  }
  const auto negative = hn::RebindMask(di, hn::Lt(v, hn::Zero(d)));
  return hn::IfThenElse(hn::And(negative, hn::Gt(best, hn::Zero(di))), hn::Or(best, hn::Set(di, 8)), best);
}

// GgmlArgmin's constants, made once before a loop of vectors (Opaque).
template <class D>
struct GgmlArgminConstants {
  explicit GgmlArgminConstants(D d)
      : three_quarters(Opaque(hn::Set(d, 0.75f))),
        eight(Opaque(hn::Set(d, 8.0f))),
        index_bias(Opaque(hn::Set(hn::RebindToSigned<D>(), 253))),
        negative_code(Opaque(hn::Set(hn::RebindToSigned<D>(), 8))),
        one(Opaque(hn::Set(hn::RebindToSigned<D>(), 1))) {}
  hn::Vec<D> three_quarters, eight;
  IntVec<D> index_bias, negative_code, one;
};

// The same codes from the row's thresholds (driver.cpp ggml_argmin_row), for
// a block whose largest |x| is below row.limit_bits (no NaN, no Inf). The
// magnitude is the number of thresholds at or below |x|. Where the row fits
// a vector (8 or 16 lanes) one threshold is compared: z = min(|x| * 0.79/d +
// 0.75, 8) puts |x| / d between two neighbouring magnitudes (z's exponent
// and first mantissa bit, 2 * exponent + bit - 253, step at |x| / d = 0.32,
// 0.95, 1.58, 2.85, 4.11, 6.65 and 9.18, each at least 5 % inside the gap
// between two thresholds, which sit at 0.5, 1.5, 2.5, 3.5, 5, 7 and 10 d to
// within 2^-20), and that index's threshold decides between them.
template <class D>
HWY_INLINE IntVec<D> GgmlArgmin(D d, const GgmlArgminConstants<D>& c, const GgmlArgminRow& row, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  const auto a = hn::Abs(v);
  IntVec<D> best;
  if constexpr (GgmlLookupFits(d)) {
    const auto z = hn::Min(hn::MulAdd(a, hn::Set(d, row.ratio), c.three_quarters), c.eight);
    const auto index = hn::Sub(hn::ShiftRight<22>(hn::BitCast(di, z)), c.index_bias);  // 0..7
    const auto threshold = hn::TableLookupLanes(hn::Load(d, row.threshold), hn::IndicesFromVec(d, index));
    best = hn::IfThenElse(hn::RebindMask(di, hn::Lt(a, threshold)), hn::Sub(index, c.one), index);
  } else {
    best = hn::Zero(di);
    for (int k = 1; k < 8; ++k)
      best = hn::Sub(best, hn::VecFromMask(di, hn::RebindMask(di, hn::Ge(a, hn::Set(d, row.threshold[k])))));
  }
  // Code 8 + k for x <= -threshold[1] (a nonzero magnitude of a negative x).
  const auto negative = hn::RebindMask(di, hn::Le(v, hn::Set(d, row.minus_threshold1)));
  return hn::IfThenElse(negative, hn::Or(best, c.negative_code), best);
}

// The value of an argmin code (never 0x8): ±fp32(kv * unit), the candidate
// it won with. That is ggml's decode of the code, e2m1 * 2d, rounded once:
// exact but where it overflows (mxfp4.ggml's scale 0xFF, whose decoder's
// (e2m1 * 2^127) * 2 overflows alike).
template <class D>
HWY_INLINE hn::Vec<D> GgmlCodeValue(D d, IntVec<D> code, hn::Vec<D> unit) {
  const hn::RebindToSigned<D> di;
  const auto m = hn::And(code, hn::Set(di, 7));
  hn::Vec<D> kv;
  if constexpr (GgmlLookupFits(d)) {
    kv = hn::TableLookupLanes(hn::Load(d, kGgmlMagnitudes.v), hn::IndicesFromVec(d, m));
  } else {
    const auto e2m1 = E2m1Value(d, m);
    kv = hn::Add(e2m1, e2m1);  // exact
  }
  const auto sign = hn::BitCast(d, hn::ShiftLeft<28>(hn::And(code, hn::Set(di, 8))));
  return hn::Or(hn::Mul(kv, unit), sign);
}

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_GGML_INL_H_
