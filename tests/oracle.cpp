// Independent oracles for the tests. See oracle.hpp.
//
// Nothing here calls into src/codec: the decoders below are written from the
// spec tables, one per format, and rounding is a table search.
#include "oracle.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace oracle {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double pow2(int e) { return std::ldexp(1.0, e); }

// ---- Decoders, one per format, from the spec tables ------------------------

// docs/spec/mxfp4.md §1.1: literal table.
double decode_e2m1(uint32_t c) {
  static constexpr double kMag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  const double m = kMag[c & 7];
  return (c & 8) ? -m : m;
}

// docs/spec/hif4.md §1: magnitude q/4.
double decode_s1p2(uint32_t c) {
  const double m = static_cast<double>(c & 7) / 4.0;
  return (c & 8) ? -m : m;
}

// docs/spec/nvfp4.md §2.1: E==0: m*2^-9; else (1+m/8)*2^(E-7); 0x7F/0xFF NaN.
double decode_e4m3(uint32_t c) {
  if ((c & 0x7F) == 0x7F) return kNaN;
  const uint32_t e = (c >> 3) & 0xF;
  const uint32_t m = c & 7;
  const double mag = e == 0 ? m * pow2(-9) : (1.0 + m / 8.0) * pow2(static_cast<int>(e) - 7);
  return (c & 0x80) ? -mag : mag;
}

double decode_ue4m3(uint32_t c) { return decode_e4m3(c & 0x7F); }

// docs/spec/mxfp4.md §2: 2^(c-127), 0xFF NaN.
double decode_e8m0(uint32_t c) { return c == 0xFF ? kNaN : pow2(static_cast<int>(c) - 127); }

// docs/spec/hif4.md §2: 2^(E-50)*(4+M), 0xFF NaN.
double decode_e6m2(uint32_t c) {
  if (c == 0xFF) return kNaN;
  return (4.0 + (c & 3)) * pow2(static_cast<int>(c >> 2) - 50);
}

// bf16 is the top half of an fp32: widen with the hardware.
double decode_bf16(uint32_t c) { return std::bit_cast<float>(c << 16); }

// IEEE binary16: E==0: m*2^-24; E==31: Inf/NaN; else (1024+m)*2^(E-25).
double decode_fp16(uint32_t c) {
  const uint32_t e = (c >> 10) & 0x1F;
  const uint32_t m = c & 0x3FF;
  double mag;
  if (e == 31) {
    mag = m == 0 ? kInf : kNaN;
  } else if (e == 0) {
    mag = m * pow2(-24);
  } else {
    mag = (1024.0 + m) * pow2(static_cast<int>(e) - 25);
  }
  return (c & 0x8000) ? -mag : mag;
}

// nan_code: the canonical NaN the encoder returns (the quiet NaN with only the
// top mantissa bit set for IEEE formats, the single NaN code otherwise).
OracleFormat make(std::string name, int bits, bool is_signed, bool has_zero, double (*dec)(uint32_t),
                  double next_above_max, bool ties_by_code_parity, uint32_t nan_code) {
  OracleFormat f;
  f.name = std::move(name);
  f.code_bits = bits;
  f.is_signed = is_signed;
  f.has_zero = has_zero;
  f.next_above_max = next_above_max;
  f.ties_by_code_parity = ties_by_code_parity;
  f.value_of_code.resize(f.num_codes());
  f.nan_code = nan_code;
  bool have_nan = false;
  for (uint32_t c = 0; c < f.num_codes(); ++c) {
    const double v = dec(c);
    f.value_of_code[c] = v;
    const bool negative_code = f.is_signed && (c & f.sign_bit());
    if (std::isnan(v)) {
      have_nan = true;
      continue;
    }
    if (std::isinf(v)) {
      if (v > 0) {
        f.has_inf = true;
        f.inf_code = c;
      }
      continue;
    }
    if (negative_code) continue;  // the grid holds magnitudes; -0 excluded
    f.grid.push_back(v);
    f.grid_code.push_back(c);
  }
  f.has_nan = have_nan;
  if (have_nan && !std::isnan(dec(nan_code))) throw std::logic_error("oracle: nan_code wrong for " + f.name);
  // Sort by value; codes travel with their values.
  std::vector<size_t> order(f.grid.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f.grid[a] < f.grid[b]; });
  std::vector<double> g;
  std::vector<uint32_t> gc;
  for (size_t i : order) {
    g.push_back(f.grid[i]);
    gc.push_back(f.grid_code[i]);
  }
  f.grid = std::move(g);
  f.grid_code = std::move(gc);
  for (size_t i = 1; i < f.grid.size(); ++i) {
    if (!(f.grid[i - 1] < f.grid[i])) throw std::logic_error("oracle: duplicate grid value in " + f.name);
  }
  if (f.has_zero != (f.grid.front() == 0.0)) throw std::logic_error("oracle: zero flag wrong for " + f.name);
  f.max_value = f.grid.back();
  f.max_code = f.grid_code.back();
  if (!(next_above_max > f.max_value)) throw std::logic_error("oracle: next_above_max wrong for " + f.name);
  return f;
}

// Which neighbour RNE picks for a tie between grid[i] and the value above it
// (grid[i+1], or next_above_max when i is the last index).
bool rne_tie_goes_up(const OracleFormat& f, size_t i) {
  if (!f.ties_by_code_parity) return true;  // E8M0 (see oracle.hpp)
  return (f.grid_code[i] & 1u) != 0;        // lower neighbour odd -> upper is even
}

uint32_t overflow_result(const OracleFormat& f, bool negative, Rounding r, OnOverflow o) {
  const uint32_t sign = negative ? f.sign_bit() : 0u;
  if (o == OnOverflow::saturate || (!f.has_inf && !f.has_nan)) return sign | f.max_code;
  if (f.has_inf) {
    // IEEE 754 §7.4: directed roundings toward zero overflow to the largest finite.
    const bool toward_zero = r == Rounding::rtz || (r == Rounding::rtp && negative);
    return sign | (toward_zero ? f.max_code : f.inf_code);
  }
  return sign | f.nan_code;  // E4M3 fn (signed NaN 0xFF for negatives), E8M0, E6M2
}

}  // namespace

const OracleFormat& e2m1() {
  static const OracleFormat f = make("e2m1", 4, true, true, decode_e2m1, 8.0, true, 0);
  return f;
}
const OracleFormat& s1p2() {
  static const OracleFormat f = make("s1p2", 4, true, true, decode_s1p2, 2.0, true, 0);
  return f;
}
const OracleFormat& e4m3() {
  static const OracleFormat f = make("e4m3", 8, true, true, decode_e4m3, 480.0, true, 0x7F);
  return f;
}
const OracleFormat& ue4m3() {
  static const OracleFormat f = make("ue4m3", 7, false, true, decode_ue4m3, 480.0, true, 0x7F);
  return f;
}
const OracleFormat& e8m0() {
  static const OracleFormat f = make("e8m0", 8, false, false, decode_e8m0, pow2(128), false, 0xFF);
  return f;
}
const OracleFormat& e6m2() {
  static const OracleFormat f = make("e6m2", 8, false, false, decode_e6m2, 1.75 * pow2(15), true, 0xFF);
  return f;
}
const OracleFormat& bf16() {
  static const OracleFormat f = make("bf16", 16, true, true, decode_bf16, pow2(128), true, 0x7FC0);
  return f;
}
const OracleFormat& fp16() {
  static const OracleFormat f = make("fp16", 16, true, true, decode_fp16, 65536.0, true, 0x7E00);
  return f;
}

const std::vector<const OracleFormat*>& all_formats() {
  static const std::vector<const OracleFormat*> v = {&e2m1(), &s1p2(), &e4m3(), &ue4m3(),
                                                     &e8m0(), &e6m2(), &bf16(), &fp16()};
  return v;
}

double oracle_decode(const OracleFormat& f, uint32_t code) {
  return f.value_of_code.at(code & (f.num_codes() - 1));
}

bool oracle_is_nan_code(const OracleFormat& f, uint32_t code) { return std::isnan(oracle_decode(f, code)); }

uint32_t oracle_encode(const OracleFormat& f, double x, Rounding r, OnOverflow o) {
  if (std::isnan(x)) return f.has_nan ? f.nan_code : f.max_code;

  const bool negative = f.is_signed && std::signbit(x);
  const uint32_t sign = negative ? f.sign_bit() : 0u;
  const double a = std::fabs(x);

  if (std::isinf(a)) return f.has_inf ? (sign | f.inf_code) : overflow_result(f, negative, r, o);

  // Below the smallest value of a format without zero: code 0 (header contract).
  if (!f.has_zero && a < f.grid.front()) return f.grid_code.front();

  // Beyond the grid's continuation: an overflow in every rounding mode.
  if (a >= f.next_above_max) return overflow_result(f, negative, r, o);

  // Neighbours: lo = grid[i] <= a < hi.
  const auto it = std::upper_bound(f.grid.begin(), f.grid.end(), a);
  const size_t i = static_cast<size_t>(it - f.grid.begin()) - 1;
  const double lo = f.grid[i];
  const bool hi_is_overflow = i + 1 == f.grid.size();
  const double hi = hi_is_overflow ? f.next_above_max : f.grid[i + 1];

  bool up;
  if (a == lo) {
    up = false;
  } else {
    const double mid = (lo + hi) / 2;  // exact (few significant bits)
    switch (r) {
      case Rounding::rtz: up = false; break;
      case Rounding::rtp: up = !negative; break;
      case Rounding::rne: up = a > mid || (a == mid && rne_tie_goes_up(f, i)); break;
      case Rounding::rha: up = a >= mid; break;
      case Rounding::ties_to_zero: up = a > mid; break;
      default: throw std::logic_error("oracle: unknown rounding");
    }
  }
  if (!up) return sign | f.grid_code[i];
  if (hi_is_overflow) return overflow_result(f, negative, r, o);
  return sign | f.grid_code[i + 1];
}

std::vector<double> oracle_boundaries(const OracleFormat& f) {
  std::vector<double> out;
  for (size_t i = 0; i < f.grid.size(); ++i) {
    const double lo = f.grid[i];
    const double hi = i + 1 < f.grid.size() ? f.grid[i + 1] : f.next_above_max;
    out.push_back(lo);
    out.push_back((lo + hi) / 2);
  }
  out.push_back(f.next_above_max);
  if (!f.has_zero) {  // below the smallest value: half of it and its "midpoint with zero"
    out.push_back(f.grid.front() / 2);
    out.push_back(f.grid.front() / 4);
  }
  return out;
}

uint8_t oracle_ggml_ue4m3(float xf) {
  // NaN and x <= 0 -> 0; x clamped to 448.
  if (!(xf > 0.0f)) return 0;
  const double x = std::min(static_cast<double>(xf), 448.0);
  if (x < 0x1p-6) {
    // Subnormal: trunc(fp32(x*512 + 0.5)), clamped to [1, 7]. x*512 + 0.5 is
    // exact in double; one rounding to fp32 is the fp32 sum of ggml's float
    // operands.
    const double sum = static_cast<double>(static_cast<float>(x * 512.0 + 0.5));
    const int man = std::min(static_cast<int>(std::floor(sum)), 7);
    return man < 1 ? 0 : static_cast<uint8_t>(man);
  }
  if (x >= 256.0) return 0x7E;  // saturation by exponent
  // Normal: half up on the E4M3 grid (3 fraction bits), 0x7E if that reaches 256.
  int e = 0;
  std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, e - 4);
  const double q = std::floor(x / ulp + 0.5) * ulp;
  if (q >= 256.0) return 0x7E;
  return static_cast<uint8_t>(oracle_encode(ue4m3(), q, Rounding::rne, OnOverflow::saturate));
}

}  // namespace oracle
