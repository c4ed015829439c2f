// Exact summation and one fp32 rounding (exact_sum.hpp).
#include "exact_sum.hpp"

#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

namespace fp4emu::gemm_detail {
namespace {

using Limbs = std::array<uint64_t, ExactSum::kLimbs>;

// `count` (<= 64) bits of x starting at bit `pos`.
uint64_t get_bits(const Limbs& x, int pos, int count) {
  const int limb = pos >> 6, sh = pos & 63;
  uint64_t v = x[limb] >> sh;
  if (sh != 0 && limb + 1 < ExactSum::kLimbs) v |= x[limb + 1] << (64 - sh);
  return count == 64 ? v : v & ((uint64_t{1} << count) - 1);
}

// True if any bit below `pos` is set.
bool any_below(const Limbs& x, int pos) {
  const int limb = pos >> 6, sh = pos & 63;
  for (int i = 0; i < limb; ++i)
    if (x[i] != 0) return true;
  return sh != 0 && (x[limb] & ((uint64_t{1} << sh) - 1)) != 0;
}

}  // namespace

void ExactSum::add(int64_t m, int e) {
  zero_sign_ = ZeroSign::positive;
  if (m == 0) return;
  assert(e >= kLsb && e <= kMaxTermExponent);
  const uint64_t mag = m < 0 ? uint64_t{0} - static_cast<uint64_t>(m) : static_cast<uint64_t>(m);
  Limbs& acc = m < 0 ? neg_ : pos_;
  const int p = e - kLsb, limb = p >> 6, sh = p & 63;
  const uint64_t lo = mag << sh;
  const uint64_t hi = sh != 0 ? mag >> (64 - sh) : 0;
  uint64_t s = acc[limb] + lo;
  uint64_t carry = s < lo;
  acc[limb] = s;
  s = acc[limb + 1] + hi;
  uint64_t carry2 = s < hi;
  s += carry;
  carry2 |= s < carry;
  acc[limb + 1] = s;
  for (int i = limb + 2; carry2 != 0 && i < kLimbs; ++i) {
    acc[i] += 1;
    carry2 = acc[i] == 0;
  }
}

void ExactSum::clear() {
  pos_.fill(0);
  neg_.fill(0);
  nan_ = pos_inf_ = neg_inf_ = false;
  zero_sign_ = ZeroSign::no_addend;
}

float ExactSum::round_to_fp32() const {
  if (nan_ || (pos_inf_ && neg_inf_)) return std::numeric_limits<float>::quiet_NaN();
  if (pos_inf_) return std::numeric_limits<float>::infinity();
  if (neg_inf_) return -std::numeric_limits<float>::infinity();

  // |sum| and its sign: the larger magnitude minus the smaller.
  int cmp = 0;
  for (int i = kLimbs - 1; i >= 0 && cmp == 0; --i)
    if (pos_[i] != neg_[i]) cmp = pos_[i] > neg_[i] ? 1 : -1;
  if (cmp == 0) return zero_sign_ == ZeroSign::negative ? -0.0f : 0.0f;
  const bool negative = cmp < 0;
  const Limbs& big = negative ? neg_ : pos_;
  const Limbs& small = negative ? pos_ : neg_;
  Limbs mag{};
  uint64_t borrow = 0;
  for (int i = 0; i < kLimbs; ++i) {
    const uint64_t d = big[i] - small[i];
    const uint64_t b1 = big[i] < small[i];
    mag[i] = d - borrow;
    borrow = b1 | (d < borrow);
  }

  int top_limb = kLimbs - 1;
  while (mag[top_limb] == 0) --top_limb;
  const int top_bit = 64 * top_limb + 63 - std::countl_zero(mag[top_limb]);
  // fp32 keeps 24 bits below and including the top one, but nothing below
  // 2^-149 (subnormals). kLsb < -149 - 1, so there is always a rounding bit.
  const int exponent = top_bit + kLsb;
  const int lsb_exp = std::max(exponent - 23, -149);
  const int drop = lsb_exp - kLsb;
  uint64_t m = top_bit >= drop ? get_bits(mag, drop, top_bit - drop + 1) : 0;
  const bool round = get_bits(mag, drop - 1, 1) != 0;
  const bool sticky = any_below(mag, drop - 1);
  if (round && (sticky || (m & 1))) ++m;
  // m <= 2^24 times a power of two in double range: exact; the cast to float
  // is exact too, unless the rounded value reaches 2^128 (IEEE overflow -> Inf).
  const double v = std::ldexp(static_cast<double>(m), lsb_exp);
  return static_cast<float>(negative ? -v : v);
}

float round_scaled_to_fp32(int64_t m, int e) {
  constexpr int64_t kDoubleExact = int64_t{1} << 53;
  if (m > -kDoubleExact && m < kDoubleExact) {
    // m·2^e is exact in double (e >= -320 keeps it normal), so the cast to
    // float is the only rounding.
    return static_cast<float>(std::ldexp(static_cast<double>(m), e));
  }
  ExactSum s;
  s.add(m, e);
  return s.round_to_fp32();
}

float sum_terms_to_fp32(const Term* terms, int count) {
  int emin = std::numeric_limits<int>::max(), emax = std::numeric_limits<int>::min();
  for (int i = 0; i < count; ++i) {
    if (terms[i].t == 0) continue;
    emin = std::min(emin, terms[i].e);
    emax = std::max(emax, terms[i].e);
  }
  if (emin > emax) return 0.0f;
  // |t| < 2^31, so count terms shifted by at most `room` stay below 2^62.
  const int room = 31 - std::bit_width(static_cast<unsigned>(count));
  if (emax - emin <= room) {
    int64_t s = 0;
    for (int i = 0; i < count; ++i)
      if (terms[i].t != 0) s += terms[i].t * (int64_t{1} << (terms[i].e - emin));
    return round_scaled_to_fp32(s, emin);
  }
  ExactSum s;
  for (int i = 0; i < count; ++i) s.add(terms[i].t, terms[i].e);
  return s.round_to_fp32();
}

}  // namespace fp4emu::gemm_detail
