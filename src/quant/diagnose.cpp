// Classification of the differences between two quantizations of one input
// (fp4emu/quant/diagnose.hpp describes the classes and their order).
#include "fp4emu/quant/diagnose.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "fp4emu/error.hpp"
#include "fp4emu/quant/nibbles.hpp"
#include "fp4emu/quant/reference.hpp"

namespace fp4emu::diagnose {
namespace {

constexpr int kMaxBlock = 64;
// A near-tie lies within this relative distance of a midpoint: far below the
// element spacing, above the few fp32 roundings by which two ways of
// computing x/X differ.
constexpr double kNearTie = 0x1p-20;

// Element magnitudes by the three magnitude bits of a code: E2M1 for MXFP4
// and NVFP4, S1P2 (q/4) for HiF4. Both grids grow with the code.
double grid(Format f, int magnitude) {
  static constexpr double kE2M1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return f == Format::hif4 ? magnitude / 4.0 : kE2M1[magnitude];
}
// The code of magnitude 1: decoding it gives the lane's element scale X.
uint8_t unit_code(Format f) { return f == Format::hif4 ? 4 : 2; }

struct Geometry {
  Format format;
  int block;
  int64_t rows, axis_len, padded_len, blocks_per_row, inner;
  int scale_bytes;
  int64_t numel;
  int64_t value_index(int64_t row, int64_t k) const {
    const int64_t o = row / inner, i = row % inner;
    return (o * axis_len + k) * inner + i;
  }
};

Geometry geometry_of(const PackedTensor& p) {
  const Recipe* r = find_recipe(p.recipe_id);
  if (!r) throw InputError(fmt::format("diagnosis: unknown recipe '{}'", p.recipe_id));
  Geometry g{};
  g.format = r->format;
  g.block = block_size(r->format);
  if (p.shape.empty() || p.axis < 0 || p.axis >= static_cast<int>(p.shape.size()))
    throw InputError(fmt::format("diagnosis: axis {} does not fit a tensor of rank {}", p.axis, p.shape.size()));
  g.inner = 1;
  g.numel = 1;
  for (size_t d = 0; d < p.shape.size(); ++d) {
    g.numel *= p.shape[d];
    if (static_cast<int>(d) > p.axis) g.inner *= p.shape[d];
  }
  g.axis_len = p.shape[p.axis];
  g.rows = g.numel / g.axis_len;
  g.padded_len = (g.axis_len + g.block - 1) / g.block * g.block;
  g.blocks_per_row = g.padded_len / g.block;
  g.scale_bytes = scale_bytes_per_block(r->format);
  return g;
}

void check_size(std::string_view what, std::string_view side, size_t have, int64_t want) {
  if (static_cast<int64_t>(have) != want)
    throw InputError(fmt::format("diagnosis: the {} {} hold {} entries; the tensor's blocks need {}", side, what,
                                 have, want));
}

// A side unpacked: one code per element, one canonical scale per block,
// values in blocked order (padding lanes absent).
struct Unpacked {
  std::vector<uint8_t> codes;
  std::vector<uint32_t> scales;
  std::vector<float> values;
  NibbleOrder nibble_order = NibbleOrder::low_first;
  ScaleBitOrder scale_bit_order = ScaleBitOrder::lsb_first;
};

Unpacked unpack(const Geometry& g, const Side& s, std::string_view name) {
  Unpacked u;
  u.nibble_order = s.nibble_order;
  u.scale_bit_order = s.scale_bit_order;
  if (!s.codes.empty()) {
    check_size("code bytes", name, s.codes.size(), g.rows * g.padded_len / 2);
    u.codes.resize(g.rows * g.padded_len);
    for (int64_t r = 0; r < g.rows; ++r)
      unpack_row(s.codes.data() + r * g.padded_len / 2, s.nibble_order, g.block, g.padded_len,
                 u.codes.data() + r * g.padded_len);
  }
  if (!s.scales.empty()) {
    check_size("scale bytes", name, s.scales.size(), g.rows * g.blocks_per_row * g.scale_bytes);
    u.scales.resize(g.rows * g.blocks_per_row);
    for (size_t b = 0; b < u.scales.size(); ++b)
      u.scales[b] = reference::load_scale(g.format, s.scales.data() + b * g.scale_bytes, s.scale_bit_order);
  }
  if (!s.values.empty()) {
    check_size("values", name, s.values.size(), g.numel);
    u.values.assign(g.rows * g.padded_len, 0.0f);
    for (int64_t r = 0; r < g.rows; ++r)
      for (int64_t k = 0; k < g.axis_len; ++k) u.values[r * g.padded_len + k] = s.values[g.value_index(r, k)];
  }
  return u;
}

// Element scale X of each lane for a canonical scale (NaN where the recipe
// has no decode: fake-quant-only recipes).
void lane_scales(const Recipe& r, const reference::NvTensorScale& ts, uint32_t scale, float* x) {
  uint8_t unit[kMaxBlock];
  std::fill(unit, unit + kMaxBlock, unit_code(r.format));
  if (r.fake_quant_only) {
    std::fill(x, x + block_size(r.format), std::numeric_limits<float>::quiet_NaN());
    return;
  }
  reference::format_ops(r.format).decode_block(r, ts, scale, unit, x);
}

bool same_value(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

bool is_subnormal(float x) { return x != 0.0f && std::fpclassify(x) == FP_SUBNORMAL; }

// The code whose decoded value v is (sign bit 3, magnitude bits 2..0), or -1
// when v is not on the grid of the lane scale X. The decode may round
// (NVFP4's S_dec), so "on the grid" allows a relative 2^-20.
int code_of_value(Format f, float v, float X) {
  if (std::isnan(v) || !std::isfinite(X) || X == 0.0f) return -1;
  const int sign = std::signbit(v) ? 8 : 0;
  if (v == 0.0f) return sign;
  const double g = std::fabs(static_cast<double>(v) / X);
  for (int m = 1; m < 8; ++m)
    if (std::fabs(g - grid(f, m)) <= grid(f, m) * kNearTie) return sign | m;
  return -1;
}

// Units in the last place between two finite floats of the same sign.
int64_t ulp_distance(float a, float b) {
  if (!std::isfinite(a) || !std::isfinite(b) || std::signbit(a) != std::signbit(b)) return -1;
  const int64_t ia = std::bit_cast<uint32_t>(std::fabs(a)), ib = std::bit_cast<uint32_t>(std::fabs(b));
  return ia > ib ? ia - ib : ib - ia;
}

std::string float_text(float v) { return fmt::format("0x{:08x} ({:.9g})", std::bit_cast<uint32_t>(v), v); }

std::string code_text(Format f, int code) {
  const double v = grid(f, code & 7);
  return fmt::format("0x{:x} ({}{:g})", code, (code & 8) ? "-" : "", v);
}

std::string scale_text(const Geometry& g, uint32_t s, float X) {
  return fmt::format("0x{:0{}x} (X = {:.9g})", s, 2 * g.scale_bytes, X);
}

// Significand of a positive finite value, in [1, 2).
double significand(float a) {
  int e = 0;
  return 2.0 * std::frexp(static_cast<double>(a), &e);
}

class Classifier {
 public:
  Classifier(Diagnosis& d, const Options& o) : d_(d), o_(o) {}

  void add(Kind k, Example e) {
    Count& c = d_.kinds[static_cast<int>(k)];
    ++c.n;
    if (static_cast<int>(c.first.size()) < o_.max_examples) c.first.push_back(std::move(e));
  }
  bool wants_example(Kind k) const {
    return static_cast<int>(d_.kinds[static_cast<int>(k)].first.size()) < o_.max_examples;
  }

 private:
  Diagnosis& d_;
  const Options& o_;
};

}  // namespace

std::string_view to_string(Kind k) {
  switch (k) {
    case Kind::nan_block: return "nan_block";
    case Kind::scale_bit_order: return "scale_bit_order";
    case Kind::inf_block: return "inf_block";
    case Kind::subnormal_amax: return "subnormal_amax";
    case Kind::scale_up: return "scale_up";
    case Kind::scale_down: return "scale_down";
    case Kind::nibble_order: return "nibble_order";
    case Kind::tail: return "tail";
    case Kind::saturation: return "saturation";
    case Kind::negative_zero: return "negative_zero";
    case Kind::tie: return "tie";
    case Kind::near_tie: return "near_tie";
    case Kind::subnormal_input: return "subnormal_input";
    case Kind::toward_zero: return "toward_zero";
    case Kind::away_from_zero: return "away_from_zero";
    case Kind::stochastic_step: return "stochastic_step";
    case Kind::dequantize: return "dequantize";
    case Kind::other: return "other";
  }
  return "?";
}

bool is_block_kind(Kind k) { return k <= Kind::nibble_order; }

Side side_of(const PackedTensor& p, std::span<const float> values) {
  Side s;
  s.codes = p.codes;
  s.nibble_order = p.nibble_order;
  s.scales = p.scales;
  s.scale_bit_order = p.scale_bit_order;
  s.values = values;
  return s;
}

Diagnosis diagnose(const TensorRef& input, const PackedTensor& reference, const Side& expected, const Side& actual,
                   const Options& options) {
  const Geometry g = geometry_of(reference);
  const Recipe& recipe = *find_recipe(reference.recipe_id);
  if (input.shape != reference.shape || static_cast<int64_t>(input.data.size()) != g.numel)
    throw InputError("diagnosis: the input's shape differs from the quantized tensor's");
  const Unpacked e = unpack(g, expected, "expected");
  const Unpacked a = unpack(g, actual, "actual");
  const reference::NvTensorScale ts{reference.global_amax, reference.global_encode_scale,
                                    reference.global_decode_scale};

  Diagnosis d;
  d.recipe_id = reference.recipe_id;
  d.format = g.format;
  Classifier cls(d, options);
  const bool cmp_scales = !e.scales.empty() && !a.scales.empty();
  const bool cmp_codes = !e.codes.empty() && !a.codes.empty();
  const bool cmp_values = !e.values.empty() && !a.values.empty();
  const double grid_max = grid(g.format, 7);
  const int B = g.block;
  std::vector<double> equal_scale_significands;

  float x[kMaxBlock], xe[kMaxBlock], xa[kMaxBlock];
  int ce[kMaxBlock], ca[kMaxBlock];
  for (int64_t row = 0; row < g.rows; ++row) {
    for (int64_t bi = 0; bi < g.blocks_per_row; ++bi) {
      const int64_t block = row * g.blocks_per_row + bi;
      const int64_t base = row * g.padded_len + bi * B;
      bool has_nan = false, has_inf = false;
      float amax = 0.0f;
      int amax_lane = 0;
      for (int j = 0; j < B; ++j) {
        const int64_t k = bi * B + j;
        x[j] = k < g.axis_len ? input.data[g.value_index(row, k)] : 0.0f;
        has_nan = has_nan || std::isnan(x[j]);
        has_inf = has_inf || std::isinf(x[j]);
        if (std::isfinite(x[j]) && std::fabs(x[j]) > amax) {
          amax = std::fabs(x[j]);
          amax_lane = j;
        }
      }
      const uint32_t se = e.scales.empty() ? 0 : e.scales[block];
      const uint32_t sa = a.scales.empty() ? 0 : a.scales[block];
      if (!e.scales.empty())
        lane_scales(recipe, ts, se, xe);
      else
        std::fill(xe, xe + B, std::numeric_limits<float>::quiet_NaN());

      // Agreement of every given part.
      bool block_equal = true;
      bool scale_differs = false;
      ++d.agreement.blocks;
      if (cmp_scales) {
        ++d.agreement.scales;
        if (se == sa)
          ++d.agreement.scales_equal;
        else
          block_equal = false, scale_differs = true;
      }
      bool codes_differ = false, values_differ = false;
      for (int j = 0; j < B; ++j) {
        const int64_t k = bi * B + j;
        if (cmp_codes) {
          ++d.agreement.codes;
          if (e.codes[base + j] == a.codes[base + j])
            ++d.agreement.codes_equal;
          else
            codes_differ = true;
        }
        if (cmp_values && k < g.axis_len) {
          ++d.agreement.values;
          if (same_value(e.values[base + j], a.values[base + j]))
            ++d.agreement.values_equal;
          else
            values_differ = true;
        }
      }
      block_equal = block_equal && !codes_differ && !values_differ;
      if (block_equal) {
        ++d.agreement.blocks_equal;
        if (cmp_scales && amax > 0.0f && std::isfinite(xe[0])) equal_scale_significands.push_back(significand(amax));
        continue;
      }
      if (cmp_scales && !scale_differs && amax > 0.0f && std::isfinite(xe[0]))
        equal_scale_significands.push_back(significand(amax));

      Example be;
      be.block = block;
      be.lane = amax_lane;
      be.input = amax;
      be.scaled = amax / static_cast<double>(xe[amax_lane]);
      if (cmp_scales) lane_scales(recipe, ts, sa, xa);

      // ---- block classes -------------------------------------------------
      const bool nan_scale = (!e.scales.empty() && std::isnan(xe[0])) || (cmp_scales && std::isnan(xa[0]));
      if (has_nan || nan_scale) {
        if (cmp_scales) {
          be.expected = scale_text(g, se, xe[0]);
          be.actual = scale_text(g, sa, xa[0]);
        }
        cls.add(Kind::nan_block, std::move(be));
        continue;
      }
      if (scale_differs) {
        be.expected = scale_text(g, se, xe[amax_lane]);
        be.actual = scale_text(g, sa, xa[amax_lane]);
        if (g.format == Format::hif4) {
          bool swapped = false;
          for (ScaleBitOrder other : {ScaleBitOrder::lsb_first, ScaleBitOrder::msb_first})
            if (other != a.scale_bit_order &&
                reference::hif4_word_from_stored(reference::hif4_word_to_stored(se, other), a.scale_bit_order) == sa)
              swapped = true;
          if (swapped) {
            cls.add(Kind::scale_bit_order, std::move(be));
            continue;
          }
        }
        if (has_inf) {
          cls.add(Kind::inf_block, std::move(be));
          continue;
        }
        if (is_subnormal(amax)) {
          cls.add(Kind::subnormal_amax, std::move(be));
          continue;
        }
        double sum_e = 0.0, sum_a = 0.0;
        for (int j = 0; j < B; ++j) sum_e += xe[j], sum_a += xa[j];
        // Code steps of the scale proper (HiF4: the E6M2 byte; NVFP4: the 7
        // UE4M3 bits).
        const uint32_t mask = g.format == Format::mxfp4 ? 0xFFu : g.format == Format::nvfp4 ? 0x7Fu : 0xFFu;
        // Decoded lanes that cannot be ordered (TE's dequantize overflows to
        // Inf for G > FLT_MAX/448) fall back to the scale codes.
        const bool ordered = std::isfinite(sum_a) && std::isfinite(sum_e) && sum_a != sum_e;
        const Kind k = (ordered ? sum_a > sum_e : (sa & mask) > (se & mask)) ? Kind::scale_up : Kind::scale_down;
        const int steps = std::abs(static_cast<int>(se & mask) - static_cast<int>(sa & mask));
        auto& sh = d.scale_shape;
        if (steps == 1) ++sh.one_step;
        sh.max_steps = std::max(sh.max_steps, steps);
        if (amax > 0.0f) {
          sh.min_significand = std::min(sh.min_significand, significand(amax));
          sh.max_significand = std::max(sh.max_significand, significand(amax));
        }
        if (g.format == Format::nvfp4) {
          const double ideal = amax / 6.0;  // the real block scale, in decoded units
          if (xa[0] <= ideal && ideal < xe[0]) ++sh.truncated;
        }
        cls.add(k, std::move(be));
        continue;
      }
      // Values only (no scales compared): a value off the expected grid, and
      // not a last-bit difference of the decode, means the scale differs.
      if (!cmp_scales && !cmp_codes && cmp_values) {
        double max_e = 0.0, max_a = 0.0;
        bool off_grid = false;
        for (int j = 0; j < B; ++j) {
          if (bi * B + j >= g.axis_len) continue;
          const float ve = e.values[base + j], va = a.values[base + j];
          max_e = std::max(max_e, std::fabs(static_cast<double>(ve)));
          max_a = std::max(max_a, std::fabs(static_cast<double>(va)));
          if (same_value(ve, va)) continue;
          const int64_t u = ulp_distance(ve, va);
          if (std::isfinite(xe[j]) && code_of_value(g.format, va, xe[j]) < 0 && (u < 0 || u > 2)) off_grid = true;
        }
        if (off_grid) {
          be.expected = fmt::format("max |value| {:.9g}", max_e);
          be.actual = fmt::format("max |value| {:.9g}", max_a);
          cls.add(max_a > max_e ? Kind::scale_up : Kind::scale_down, std::move(be));
          continue;
        }
      }
      if (cmp_codes && codes_differ) {
        const NibbleOrder read = a.nibble_order;
        bool permuted = false;
        for (NibbleOrder other : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::split_half}) {
          if (other == read) continue;
          uint8_t perm[kMaxBlock];
          for (int j = 0; j < B; ++j) {
            const NibbleSlot s = nibble_slot(other, B, 0, j);
            int64_t bb;
            int jj;
            nibble_element(read, B, s.byte, s.high, &bb, &jj);
            perm[jj] = e.codes[base + j];
          }
          if (std::equal(perm, perm + B, a.codes.begin() + base)) permuted = true;
        }
        if (permuted) {
          be.expected = fmt::format("codes {:x}", fmt::join(e.codes.begin() + base, e.codes.begin() + base + B, ""));
          be.actual = fmt::format("codes {:x}", fmt::join(a.codes.begin() + base, a.codes.begin() + base + B, ""));
          cls.add(Kind::nibble_order, std::move(be));
          continue;
        }
      }

      // ---- element classes -----------------------------------------------
      for (int j = 0; j < B; ++j) {
        const int64_t k = bi * B + j;
        const bool have_codes = cmp_codes;
        // Codes to compare: given, or read off the values on the expected grid.
        if (have_codes) {
          ce[j] = e.codes[base + j];
          ca[j] = a.codes[base + j];
        } else if (cmp_values && k < g.axis_len) {
          ce[j] = code_of_value(g.format, e.values[base + j], xe[j]);
          ca[j] = code_of_value(g.format, a.values[base + j], xe[j]);
        } else {
          continue;
        }
        const bool value_diff = cmp_values && k < g.axis_len && !same_value(e.values[base + j], a.values[base + j]);
        if (!value_diff && !(have_codes && ce[j] != ca[j])) continue;
        const bool code_diff = ce[j] != ca[j] || ce[j] < 0 || ca[j] < 0;

        Example ex;
        ex.block = block;
        ex.lane = j;
        ex.input = x[j];
        ex.scaled = x[j] / static_cast<double>(xe[j]);
        if (have_codes && code_diff) {
          ex.expected = code_text(g.format, ce[j]);
          ex.actual = code_text(g.format, ca[j]);
        } else {
          ex.expected = float_text(e.values[base + j]);
          ex.actual = float_text(a.values[base + j]);
        }
        Kind kind = Kind::other;
        if (k >= g.axis_len) {
          kind = Kind::tail;
        } else if (!code_diff && ce[j] >= 0) {
          kind = Kind::dequantize;  // same code, different decoded value
        } else if (std::isinf(x[j]) || (std::isfinite(ex.scaled) && std::fabs(ex.scaled) > grid_max)) {
          kind = Kind::saturation;
        } else if (ce[j] >= 0 && ca[j] >= 0 && (ce[j] & 7) == 0 && (ca[j] & 7) == 0) {
          kind = Kind::negative_zero;
        } else if (ce[j] >= 0 && ca[j] >= 0 && (ce[j] & 8) == (ca[j] & 8) && std::abs((ce[j] & 7) - (ca[j] & 7)) == 1 &&
                   std::isfinite(xe[j])) {
          const int lo = std::min(ce[j] & 7, ca[j] & 7), hi = lo + 1, chosen = ca[j] & 7;
          const double mid = (grid(g.format, lo) + grid(g.format, hi)) / 2.0 * xe[j];
          const double ax = std::fabs(static_cast<double>(x[j]));
          auto note = [&](Diagnosis::TieSides& t) {
            (chosen == hi ? t.away : t.toward_zero) += 1;
            ((chosen & 1) ? t.odd : t.even) += 1;
          };
          if (reference.rounding == Rounding::stochastic) {
            kind = Kind::stochastic_step;
          } else if (ax == mid) {
            kind = Kind::tie;
            note(d.ties);
          } else if (std::fabs(ax - mid) <= mid * kNearTie) {
            kind = Kind::near_tie;
            note(d.near_ties);
          } else if (is_subnormal(x[j])) {
            kind = Kind::subnormal_input;
          } else {
            kind = chosen == lo ? Kind::toward_zero : Kind::away_from_zero;
          }
        } else if (is_subnormal(x[j])) {
          kind = Kind::subnormal_input;
        }
        cls.add(kind, std::move(ex));
      }
    }
  }
  for (double s : equal_scale_significands)
    if (s >= d.scale_shape.min_significand) ++d.scale_shape.equal_at_or_above;
  return d;
}

// ---------------------------------------------------------------- report ----

int64_t Diagnosis::differing_elements() const {
  int64_t n = 0;
  for (int k = 0; k < kKinds; ++k)
    if (!is_block_kind(static_cast<Kind>(k))) n += kinds[k].n;
  return n;
}

int64_t Diagnosis::differing_blocks() const { return agreement.blocks - agreement.blocks_equal; }

bool Diagnosis::identical() const {
  for (const Count& c : kinds)
    if (c.n) return false;
  return true;
}

namespace {

std::string tie_phrase(const Diagnosis::TieSides& t, int64_t n, const char* what) {
  if (t.away == n) return fmt::format("{} rounded away from zero", what);
  if (t.toward_zero == n && t.even < n) return fmt::format("{} rounded toward zero", what);
  if (t.even == n) return fmt::format("{} rounded to even", what);
  if (t.odd == n) return fmt::format("{} rounded to odd", what);
  return fmt::format("{} rounded differently ({} away from zero, {} toward zero)", what, t.away, t.toward_zero);
}

std::string scale_phrase(const Diagnosis& d, Kind k) {
  const auto& sh = d.scale_shape;
  std::string s = k == Kind::scale_up ? "block scale larger than expected" : "block scale smaller than expected";
  const int64_t n = d.count(Kind::scale_up) + d.count(Kind::scale_down);
  if (sh.one_step == n) s += " by one code step";
  if (sh.truncated == n && k == Kind::scale_down) s += " (the real scale amax/6 rounded toward zero: truncated)";
  if (sh.equal_at_or_above == 0 && sh.min_significand < 2.0 && sh.min_significand > 1.0) {
    s += fmt::format(", exactly where the block amax's significand is >= {:.4g}", sh.min_significand);
    if (d.format == Format::mxfp4 && k == Kind::scale_up) {
      if (sh.min_significand >= 1.75)
        s += " (looks like EVEN: amax rounded to one mantissa bit, not the OCP floor)";
      else if (sh.min_significand > 1.5)
        s += " (looks like RCEIL/CEIL: the scale rounded up from amax/6, not the OCP floor)";
    }
  }
  return s;
}

std::string phrase(const Diagnosis& d, Kind k) {
  switch (k) {
    case Kind::nan_block: return "NaN blocks (a NaN input or NaN scale) differ";
    case Kind::scale_bit_order: return "HiF4 scale words in the other L2/L3 bit order";
    case Kind::inf_block: return "block scale differs where the block holds an Inf";
    case Kind::subnormal_amax: return "block scale differs where the block amax is subnormal (flush to zero?)";
    case Kind::scale_up:
    case Kind::scale_down: return scale_phrase(d, k);
    case Kind::nibble_order: return "codes in another nibble order";
    case Kind::tail: return "padding lanes past the end of the axis differ";
    case Kind::saturation: return "Inf or saturated inputs differ";
    case Kind::negative_zero: return "zero codes differ in sign (+0 / -0)";
    case Kind::tie: return tie_phrase(d.ties, d.count(k), "ties");
    case Kind::near_tie:
      return tie_phrase(d.near_ties, d.count(k), "near-ties") +
             " (x/X computed by other arithmetic: a reciprocal, another order)";
    case Kind::subnormal_input: return "subnormal inputs differ (flush to zero?)";
    case Kind::toward_zero: return "non-tie values rounded toward zero (truncation, not round to nearest)";
    case Kind::away_from_zero: return "non-tie values rounded away from zero (not round to nearest)";
    case Kind::stochastic_step:
      return "values rounded stochastically to the other neighbour (other random bits, or the bits used another way)";
    case Kind::dequantize: return "dequantized values differ where codes and scale agree (decode arithmetic)";
    case Kind::other: return "other differences";
  }
  return "?";
}

}  // namespace

std::string Diagnosis::summary() const {
  if (identical())
    return fmt::format("identical ({} blocks{}{}{})", agreement.blocks, agreement.scales ? ", scales" : "",
                       agreement.codes ? ", codes" : "", agreement.values ? ", values" : "");
  std::vector<int> order;
  for (int k = 0; k < kKinds; ++k)
    if (kinds[k].n) order.push_back(k);
  // Block classes first (they are the root causes), then by count.
  std::stable_sort(order.begin(), order.end(), [&](int l, int r) {
    const bool bl = is_block_kind(static_cast<Kind>(l)), br = is_block_kind(static_cast<Kind>(r));
    if (bl != br) return bl;
    return kinds[l].n > kinds[r].n;
  });
  const int64_t block_total = [&] {
    int64_t n = 0;
    for (int k = 0; k < kKinds; ++k)
      if (is_block_kind(static_cast<Kind>(k))) n += kinds[k].n;
    return n;
  }();
  const int64_t element_total = differing_elements();
  std::string s;
  for (int k : order) {
    const Kind kind = static_cast<Kind>(k);
    const bool blocks = is_block_kind(kind);
    if (!s.empty()) s += "; ";
    s += fmt::format("{} in {} of {} differing {}", phrase(*this, kind), kinds[k].n,
                     blocks ? block_total : element_total, blocks ? "blocks" : "elements");
  }
  return s;
}

std::vector<std::string> Diagnosis::details() const {
  std::vector<std::string> out;
  for (int k = 0; k < kKinds; ++k) {
    if (!kinds[k].n) continue;
    const Kind kind = static_cast<Kind>(k);
    out.push_back(fmt::format("{}: {} {}", to_string(kind), kinds[k].n, is_block_kind(kind) ? "blocks" : "elements"));
    for (const Example& e : kinds[k].first)
      out.push_back(fmt::format("  block {} lane {}: input {}, x/X {:.9g}; expected {}, actual {}", e.block, e.lane,
                                float_text(e.input), e.scaled, e.expected, e.actual));
  }
  return out;
}

}  // namespace fp4emu::diagnose
