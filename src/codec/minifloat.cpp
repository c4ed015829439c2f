// Generic minifloat codec. See include/fp4emu/codec/minifloat.hpp.
#include "fp4emu/codec/minifloat.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp4emu {
namespace {

constexpr int magnitude_bits(const MinifloatTraits& t) { return t.exp_bits + t.man_bits; }
constexpr uint32_t magnitude_mask(const MinifloatTraits& t) {
  return (1u << magnitude_bits(t)) - 1u;
}
constexpr uint32_t exponent_all_ones(const MinifloatTraits& t) { return (1u << t.exp_bits) - 1u; }

uint32_t ieee_inf_code(const MinifloatTraits& t) { return exponent_all_ones(t) << t.man_bits; }

}  // namespace

uint32_t max_finite_code(const MinifloatTraits& t) {
  const uint32_t all = magnitude_mask(t);
  switch (t.specials) {
    case SpecialCodes::none: return all;
    case SpecialCodes::ieee: return all - (1u << t.man_bits);
    case SpecialCodes::fn:
    case SpecialCodes::top_code: return all - 1u;
  }
  return all;
}

uint32_t nan_code(const MinifloatTraits& t) {
  switch (t.specials) {
    case SpecialCodes::ieee: return ieee_inf_code(t) | (1u << (t.man_bits - 1));  // quiet NaN
    case SpecialCodes::fn:
    case SpecialCodes::top_code: return magnitude_mask(t);
    case SpecialCodes::none: break;
  }
  return max_finite_code(t);  // formats without NaN: never called by the codec itself
}

bool is_nan_code(const MinifloatTraits& t, uint32_t code) {
  const uint32_t mag = code & magnitude_mask(t);
  switch (t.specials) {
    case SpecialCodes::none: return false;
    case SpecialCodes::ieee:
      return (mag >> t.man_bits) == exponent_all_ones(t) && (mag & ((1u << t.man_bits) - 1u)) != 0;
    case SpecialCodes::fn:
    case SpecialCodes::top_code: return mag == magnitude_mask(t);
  }
  return false;
}

double decode(const MinifloatTraits& t, uint32_t code) {
  const bool negative = t.is_signed && ((code >> magnitude_bits(t)) & 1u);
  const uint32_t mag = code & magnitude_mask(t);
  if (is_nan_code(t, code)) return std::numeric_limits<double>::quiet_NaN();
  const uint32_t exp_field = mag >> t.man_bits;
  const uint32_t man_field = mag & ((1u << t.man_bits) - 1u);
  double value;
  if (t.specials == SpecialCodes::ieee && exp_field == exponent_all_ones(t)) {
    value = std::numeric_limits<double>::infinity();
  } else if (t.has_subnormals && exp_field == 0) {
    value = std::ldexp(static_cast<double>(man_field), 1 - t.bias - t.man_bits);
  } else {
    value = std::ldexp(static_cast<double>((1u << t.man_bits) + man_field),
                       static_cast<int>(exp_field) - t.bias - t.man_bits);
  }
  return negative ? -value : value;
}

namespace {

// The one encoder behind encode() and encode_stochastic(); `rbits` is read
// only for Rounding::stochastic.
uint32_t encode_impl(const MinifloatTraits& t, double x, Rounding r, uint32_t rbits, Overflow overflow) {
  const bool negative = t.is_signed && std::signbit(x);
  const uint32_t sign_bit = negative ? (1u << magnitude_bits(t)) : 0u;
  const uint32_t max_code = max_finite_code(t);

  // ---- NaN ----
  if (std::isnan(x)) {
    if (t.specials == SpecialCodes::none) return max_code;  // CUDA: NaN -> +MAXNORM
    // The canonical (positive) NaN whatever the input's sign: the header
    // contract, and CUDA's float->fp8 E4M3 conversion (docs/spec/nvfp4.md §2.1), which
    // gives 0x7F for -NaN, not 0xFF.
    return nan_code(t);
  }

  // Result for magnitudes beyond the largest finite value.
  auto overflowed = [&]() -> uint32_t {
    if (t.specials == SpecialCodes::none || overflow == Overflow::saturate) return sign_bit | max_code;
    if (t.specials == SpecialCodes::ieee) {
      const bool toward_zero = r == Rounding::rtz || (r == Rounding::rtp && negative);
      return sign_bit | (toward_zero ? max_code : ieee_inf_code(t));
    }
    return sign_bit | nan_code(t);
  };

  const double a = std::fabs(x);

  // ---- Infinity (exact; IEEE formats keep it) ----
  if (std::isinf(a)) {
    if (t.specials == SpecialCodes::ieee) return sign_bit | ieee_inf_code(t);
    return overflowed();
  }

  // ---- Zero ----
  if (a == 0.0) return t.has_subnormals ? sign_bit : 0u;

  // ---- Finite nonzero: round on the grid of the binade that holds a ----
  // Lowest binade exponent: with subnormals the grid below 2^emin keeps the
  // spacing of the binade [2^emin, 2^(emin+1)).
  const int emin = t.has_subnormals ? 1 - t.bias : -t.bias;
  const int e = std::ilogb(a);
  int quantum_exp = std::max(e, emin) - t.man_bits;
  const double scaled = std::ldexp(a, -quantum_exp);  // exact: power-of-two shift
  double n = std::floor(scaled);
  const double frac = scaled - n;                      // exact
  const bool n_odd = (static_cast<uint64_t>(n) & 1u) != 0;  // n < 2^(man_bits+1): exact
  bool round_up = false;
  switch (r) {
    case Rounding::rne: round_up = frac > 0.5 || (frac == 0.5 && n_odd); break;
    case Rounding::rha: round_up = frac >= 0.5; break;
    case Rounding::rtz: round_up = false; break;
    case Rounding::ties_to_zero: round_up = frac > 0.5; break;
    case Rounding::rtp: round_up = frac > 0.0 && !negative; break;
    case Rounding::stochastic:
      // PTX cvt.rs: the random bits are added below the kept precision and the
      // sum truncated, i.e. a carry out of floor(frac * 2^8) + r (exact).
      round_up = std::floor(std::ldexp(frac, kStochasticBits)) + static_cast<double>(rbits) >=
                 std::ldexp(1.0, kStochasticBits);
      break;
  }
  if (round_up) n += 1.0;
  uint64_t significand = static_cast<uint64_t>(n);
  const uint64_t hidden = uint64_t{1} << t.man_bits;

  if (!t.has_subnormals && significand < hidden) significand = hidden;  // clamp to the smallest value
  if (significand == 0) return sign_bit;                                 // rounded to a signed zero
  if (significand == 2 * hidden) {                                       // carry into the next binade
    significand = hidden;
    quantum_exp += 1;
  }

  uint32_t mag;
  if (significand < hidden) {
    mag = static_cast<uint32_t>(significand);  // subnormal: exponent field 0
  } else {
    const int exp_field = quantum_exp + t.man_bits + t.bias;
    if (exp_field > static_cast<int>(exponent_all_ones(t))) return overflowed();
    mag = (static_cast<uint32_t>(exp_field) << t.man_bits) | static_cast<uint32_t>(significand - hidden);
  }
  if (mag > max_code) return overflowed();
  return sign_bit | mag;
}

}  // namespace

uint32_t encode(const MinifloatTraits& t, double x, Rounding r, Overflow overflow) {
  if (r == Rounding::stochastic)
    throw std::invalid_argument("encode: stochastic rounding needs random bits; call encode_stochastic");
  return encode_impl(t, x, r, 0, overflow);
}

uint32_t encode_stochastic(const MinifloatTraits& t, double x, uint8_t rbits, Overflow overflow) {
  return encode_impl(t, x, Rounding::stochastic, rbits, overflow);
}

float e6m2_reciprocal_bf16(uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  // docs/spec/hif4.md §2: exact reciprocal rounded once to bf16. 1/(1+M/4) rounds to
  // these four bf16 significands; the exponent part is exact.
  static constexpr float kMantissaReciprocal[4] = {1.0f, 205.0f / 256.0f, 171.0f / 256.0f,
                                                   146.0f / 256.0f};
  const int exponent = (code >> 2) - 48;
  return std::ldexp(kMantissaReciprocal[code & 3], -exponent);
}

uint16_t bf16_encode(double x, Rounding r) {
  return static_cast<uint16_t>(encode(kBF16, x, r, Overflow::to_special));
}

float bf16_decode(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t fp16_encode(double x, Rounding r) {
  return static_cast<uint16_t>(encode(kFP16, x, r, Overflow::to_special));
}

float fp16_decode(uint16_t bits) { return static_cast<float>(decode(kFP16, bits)); }

bool is_bf16_exact(float x) {
  if (!std::isfinite(x)) return true;
  return (std::bit_cast<uint32_t>(x) & 0xFFFFu) == 0;
}

}  // namespace fp4emu
