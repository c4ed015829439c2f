#pragma once
// Exact summation of dyadic rationals and one final fp32 rounding (internal
// to src/gemm). The `exact` model and the exact steps of `block_fp32` use it.
//
// ExactSum is a Kulisch accumulator: a fixed-point number of 768 bits whose
// bit 0 weighs 2^-320, kept as two magnitudes (positive and negative terms)
// so that carries stop early. Every GEMM term fits: the smallest is a dense
// fp32 subnormal times an MXFP4 unit (2^-149 · 2^-128), the largest an MXFP4
// block product near 2^278, and 2^100 of those still fit below the top.
#include <array>
#include <cstdint>

namespace fp4emu::gemm_detail {

class ExactSum {
 public:
  static constexpr int kLsb = -320;   // weight of bit 0
  static constexpr int kLimbs = 12;   // 768 bits
  static constexpr int kMaxTermExponent = kLsb + 64 * (kLimbs - 2);  // e of a term m·2^e, m < 2^63

  // Adds m·2^e exactly (m = 0 is a +0 addend). Requires |m| < 2^63 and
  // kLsb <= e <= kMaxTermExponent.
  void add(int64_t m, int e);
  // A signed zero addend: it matters only to the sign of an exact zero sum.
  void add_zero(bool negative) {
    if (!negative) zero_sign_ = ZeroSign::positive;
    else if (zero_sign_ == ZeroSign::no_addend) zero_sign_ = ZeroSign::negative;
  }
  // IEEE specials: a NaN term, or an infinite one (Inf·0 is the caller's NaN).
  void add_nan() { nan_ = true; }
  void add_inf(bool negative) { (negative ? neg_inf_ : pos_inf_) = true; }
  void clear();

  // The sum rounded once to fp32, RNE, with subnormals and overflow to ±Inf.
  // NaN if a term was NaN or both infinities occurred. An exact zero is +0,
  // or −0 when every addend was −0: IEEE 754 §6.3 (x + y = +0 under RNE
  // unless both are −0) over all the addends. The sum of no addend is +0.
  float round_to_fp32() const;

 private:
  std::array<uint64_t, kLimbs> pos_{}, neg_{};
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false;
  enum class ZeroSign : uint8_t { no_addend, negative, positive } zero_sign_ = ZeroSign::no_addend;
};

// m·2^e rounded once to fp32 (RNE, subnormals, overflow). Any int64 m,
// kLsb <= e <= ExactSum::kMaxTermExponent.
float round_scaled_to_fp32(int64_t m, int e);

// A block (or step) product term: t·2^e, |t| < 2^31.
struct Term {
  int64_t t;
  int e;
};
// Σ terms rounded once to fp32: one int64 when the exponents are close (the
// common case), ExactSum otherwise. Same result as adding every term to an
// ExactSum (tests prove it on spread and clustered exponents).
float sum_terms_to_fp32(const Term* terms, int count);

}  // namespace fp4emu::gemm_detail
