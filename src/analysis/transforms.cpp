// Transforms applied before quantization (transforms.hpp, docs/analysis.md §4).
#include "fp4emu/analysis/transforms.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fp4emu/error.hpp"

namespace fp4emu::analysis {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double SplitMix64::gaussian() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  // 1 - uniform() is in (0, 1], so the logarithm is finite.
  const double r = std::sqrt(-2.0 * std::log(1.0 - uniform()));
  const double t = 2.0 * M_PI * uniform();
  spare_ = r * std::sin(t);
  have_spare_ = true;
  return r * std::cos(t);
}

// ---------------------------------------------------------------- RHT ------
namespace {

// docs/analysis.md §4.1: TransformerEngine's nvfp4_tensor.py sign vector.
constexpr double kTeSigns[16] = {+1, +1, +1, -1, +1, -1, -1, -1, -1, -1, -1, +1, -1, +1, -1, -1};

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Unnormalised fast Walsh-Hadamard transform of one tile (Sylvester order:
// H_2b = [[H_b, H_b], [H_b, -H_b]]).
void fwht(double* v, int b) {
  for (int h = 1; h < b; h *= 2)
    for (int i = 0; i < b; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const double a = v[j], c = v[j + h];
        v[j] = a + c;
        v[j + h] = a - c;
      }
}

void check_rht_shape(std::span<const double> x, int64_t cols, size_t b) {
  if (!is_power_of_two(int64_t(b)) || cols <= 0 || cols % int64_t(b) != 0 || x.size() % size_t(cols) != 0)
    throw std::invalid_argument("rht: the row length must be a multiple of the power-of-two size");
}

}  // namespace

std::span<const double> te_rht_signs() { return kTeSigns; }

std::vector<double> rht_signs(RhtSigns kind, int size, uint64_t seed) {
  if (kind == RhtSigns::te) {
    if (size != 16)
      throw InputError(fmt::format("RHT signs=te is TransformerEngine's 16-entry vector; it needs b=16, not b={}",
                                   size));
    return {kTeSigns, kTeSigns + 16};
  }
  std::vector<double> s(size);
  SplitMix64 rng(seed);
  uint64_t bits = 0;
  for (int i = 0; i < size; ++i) {
    if (i % 64 == 0) bits = rng.next();
    s[i] = ((bits >> (i % 64)) & 1) ? -1.0 : 1.0;
  }
  return s;
}

void rht_forward(std::span<double> x, int64_t cols, std::span<const double> signs) {
  const int b = int(signs.size());
  check_rht_shape(x, cols, signs.size());
  const double norm = 1.0 / std::sqrt(double(b));
  for (size_t t = 0; t < x.size(); t += b) {
    double* v = x.data() + t;
    // x H D: the row vector times H (symmetric, so H applied to the column
    // vector), then column j scaled by d_j.
    fwht(v, b);
    for (int j = 0; j < b; ++j) v[j] = v[j] * norm * signs[j];
  }
}

void rht_inverse(std::span<double> x, int64_t cols, std::span<const double> signs) {
  const int b = int(signs.size());
  check_rht_shape(x, cols, signs.size());
  const double norm = 1.0 / std::sqrt(double(b));
  for (size_t t = 0; t < x.size(); t += b) {
    double* v = x.data() + t;
    for (int j = 0; j < b; ++j) v[j] *= signs[j];  // D^-1 = D
    fwht(v, b);
    for (int j = 0; j < b; ++j) v[j] *= norm;
  }
}

// ---------------------------------------------------------- SmoothQuant ----
std::vector<double> smoothquant_scales(const TensorRef& x, const Tensor& w, double alpha) {
  const int64_t d = x.shape.back();
  std::vector<double> xmax(d, 0.0), wmax(d, 0.0);
  for (size_t i = 0; i < x.data.size(); ++i)
    xmax[i % d] = std::max(xmax[i % d], std::fabs(double(x.data[i])));
  for (size_t i = 0; i < w.data.size(); ++i)
    wmax[i % d] = std::max(wmax[i % d], std::fabs(double(w.data[i])));
  std::vector<double> s(d);
  for (int64_t j = 0; j < d; ++j) {
    const double v = std::pow(xmax[j], alpha) / std::pow(wmax[j], 1.0 - alpha);
    // NaN (0/0) and +inf (x/0) both fall to a bound: a dead channel needs no
    // migration, so 0/0 takes the floor.
    s[j] = std::isnan(v) ? 1e-5 : std::clamp(v, 1e-5, 1e5);
  }
  return s;
}

// --------------------------------------------------------------- OCC -------
double quantile_linear(std::span<const double> sorted, double q) {
  if (sorted.empty()) throw std::invalid_argument("quantile of an empty set");
  const double h = (double(sorted.size()) - 1.0) * q;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - double(lo)) * (sorted[lo + 1] - sorted[lo]);
}

// ------------------------------------------------------ transform choice ---
std::string TransformSpec::to_string(int format_block) const {
  switch (kind) {
    case Kind::none: return "none";
    case Kind::rht:
      return fmt::format("rht:b={},signs={}{}", rht_size ? rht_size : (rht_signs == RhtSigns::te ? 16 : format_block),
                         rht_signs == RhtSigns::te ? "te" : "seeded",
                         rht_signs == RhtSigns::te ? "" : fmt::format(",seed={}", seed));
    case Kind::smoothquant:
      return fmt::format("smoothquant:alpha={}{}", alpha, calib.empty() ? ",calib=oracle" : ",calib=" + calib);
    case Kind::occ: return fmt::format("occ:q={}", occ_quantile);
  }
  return "none";
}

namespace {

double parse_number(std::string_view field, std::string_view value, std::string_view text) {
  const std::string v(value);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(d))
    throw InputError(fmt::format("--transform {}: {}={} is not a number", text, field, value));
  return d;
}

}  // namespace

TransformSpec parse_transform(std::string_view text) {
  TransformSpec s;
  const size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  if (name == "none") s.kind = TransformSpec::Kind::none;
  else if (name == "rht") s.kind = TransformSpec::Kind::rht;
  else if (name == "smoothquant") s.kind = TransformSpec::Kind::smoothquant;
  else if (name == "occ") s.kind = TransformSpec::Kind::occ;
  else
    throw InputError(fmt::format("--transform '{}' is unknown; use none, rht[:b=64,seed=S,signs=seeded|te], "
                                 "smoothquant[:alpha=0.5,calib=FILE] or occ[:q=0.99]",
                                 text));
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (colon != std::string_view::npos && rest.empty())
    throw InputError(fmt::format("--transform {}: nothing after ':'; give key=value options or leave the ':' out", text));
  std::vector<std::string_view> seen;  // a key given twice would silently take the last value
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (comma != std::string_view::npos && rest.empty())
      throw InputError(fmt::format("--transform {}: ends with ','; remove it or add an option", text));
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw InputError(fmt::format("--transform {}: '{}' is not key=value", text, item));
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw InputError(fmt::format("--transform {}: '{}' is given twice; give each option once", text, key));
    seen.push_back(key);
    using K = TransformSpec::Kind;
    if (s.kind == K::rht && key == "b") {
      const double b = parse_number(key, value, text);
      if (b != std::floor(b) || b < 16 || b > 256 || !is_power_of_two(int64_t(b)))
        throw InputError(fmt::format("--transform {}: b={} must be 16, 32, 64, 128 or 256", text, value));
      s.rht_size = int(b);
    } else if (s.kind == K::rht && key == "seed") {
      const double v = parse_number(key, value, text);
      if (v < 0 || v != std::floor(v)) throw InputError(fmt::format("--transform {}: seed must be >= 0", text));
      s.seed = uint64_t(v);
    } else if (s.kind == K::rht && key == "signs") {
      if (value == "seeded") s.rht_signs = RhtSigns::seeded;
      else if (value == "te") s.rht_signs = RhtSigns::te;
      else throw InputError(fmt::format("--transform {}: signs={} is unknown; use seeded or te", text, value));
    } else if (s.kind == K::smoothquant && key == "alpha") {
      s.alpha = parse_number(key, value, text);
      if (!(s.alpha >= 0 && s.alpha <= 1))
        throw InputError(fmt::format("--transform {}: alpha must be in [0, 1]", text));
    } else if (s.kind == K::smoothquant && key == "calib") {
      if (value.empty()) throw InputError(fmt::format("--transform {}: calib= needs a dump file", text));
      s.calib = std::string(value);
    } else if (s.kind == K::occ && key == "q") {
      s.occ_quantile = parse_number(key, value, text);
      if (!(s.occ_quantile > 0.5 && s.occ_quantile < 1))
        throw InputError(fmt::format("--transform {}: q must be in (0.5, 1), e.g. 0.99", text));
    } else {
      throw InputError(fmt::format("--transform {}: option '{}' is unknown for {}", text, key, name));
    }
  }
  if (s.kind == TransformSpec::Kind::rht && s.rht_signs == RhtSigns::te && s.rht_size != 0 && s.rht_size != 16)
    throw InputError(fmt::format("--transform {}: signs=te is a 16-entry vector; use b=16", text));
  return s;
}

PreparedTransform::PreparedTransform(const TransformSpec& spec, int format_block, const TensorRef& x, const Tensor* w,
                                     const Tensor* calib_x)
    : spec_(spec) {
  if (x.shape.empty()) throw InputError("transform: the activation has rank 0");
  cols_ = x.shape.back();
  using K = TransformSpec::Kind;
  switch (spec.kind) {
    case K::none: break;
    case K::rht: {
      const int b = spec.rht_size ? spec.rht_size : (spec.rht_signs == RhtSigns::te ? 16 : format_block);
      if (cols_ % b != 0)
        throw InputError(fmt::format("RHT of size {} needs the row length to be a multiple of {}, but it is {}; "
                                     "choose --transform rht:b=N with N dividing {}",
                                     b, b, cols_, cols_));
      signs_ = rht_signs(spec.rht_signs, b, spec.seed);
      break;
    }
    case K::smoothquant: {
      if (!w) throw std::invalid_argument("smoothquant needs weights");
      const TensorRef cx = calib_x ? TensorRef(*calib_x) : x;
      if (w->shape.back() != cols_ || cx.shape.back() != cols_)
        throw InputError(fmt::format("SmoothQuant: activations have {} input features, but the {} has {}", cols_,
                                     w->shape.back() != cols_ ? "weight" : "calibration tensor",
                                     w->shape.back() != cols_ ? w->shape.back() : cx.shape.back()));
      scales_ = smoothquant_scales(cx, *w, spec.alpha);
      break;
    }
    case K::occ: {
      std::vector<double> sorted;
      sorted.reserve(x.data.size());
      for (float v : x.data)
        if (std::isfinite(v)) sorted.push_back(v);
      if (sorted.empty()) {
        // No finite value: nothing to clamp. X stays as it is, the residual is 0.
        occ_residual_.assign(x.data.size(), 0.0);
        break;
      }
      std::sort(sorted.begin(), sorted.end());
      // The bounds are rounded to fp32, the operand's type, so that clamping in
      // double gives the operand itself and X - clamp(X) is exact in double.
      const float lo = static_cast<float>(quantile_linear(sorted, 1.0 - spec.occ_quantile));
      const float hi = static_cast<float>(quantile_linear(sorted, spec.occ_quantile));
      occ_lo_ = lo;
      occ_hi_ = hi;
      occ_residual_.assign(x.data.size(), 0.0);
      for (size_t i = 0; i < x.data.size(); ++i) {
        const double v = x.data[i];
        const double c = std::clamp(v, occ_lo_, occ_hi_);
        occ_residual_[i] = v - c;
        occ_clamped_ += occ_residual_[i] != 0.0;
      }
      break;
    }
  }
}

Tensor PreparedTransform::operand(const TensorRef& x) const {
  Tensor out{x.shape, {x.data.begin(), x.data.end()}};
  using K = TransformSpec::Kind;
  switch (spec_.kind) {
    case K::none: break;
    case K::rht: {
      std::vector<double> v(x.data.begin(), x.data.end());
      rht_forward(v, cols_, signs_);
      for (size_t i = 0; i < v.size(); ++i) out.data[i] = float(v[i]);
      break;
    }
    case K::smoothquant:
      for (size_t i = 0; i < x.data.size(); ++i) out.data[i] = float(double(x.data[i]) / scales_[i % cols_]);
      break;
    case K::occ:
      for (float& v : out.data)
        if (std::isfinite(v)) v = float(std::clamp(double(v), occ_lo_, occ_hi_));
      break;
  }
  return out;
}

Tensor PreparedTransform::weights(const Tensor& w) const {
  Tensor out = w;
  using K = TransformSpec::Kind;
  if (spec_.kind == K::rht) {
    std::vector<double> v(w.data.begin(), w.data.end());
    rht_forward(v, cols_, signs_);
    for (size_t i = 0; i < v.size(); ++i) out.data[i] = float(v[i]);
  } else if (spec_.kind == K::smoothquant) {
    for (size_t i = 0; i < w.data.size(); ++i) out.data[i] = float(double(w.data[i]) * scales_[i % cols_]);
  }
  return out;
}

std::vector<double> PreparedTransform::to_original(std::span<const float> recon) const {
  std::vector<double> v(recon.begin(), recon.end());
  using K = TransformSpec::Kind;
  switch (spec_.kind) {
    case K::none: break;
    case K::rht: rht_inverse(v, cols_, signs_); break;
    case K::smoothquant:
      for (size_t i = 0; i < v.size(); ++i) v[i] *= scales_[i % cols_];
      break;
    case K::occ:
      if (occ_residual_.size() != v.size()) throw std::invalid_argument("occ: reconstruction of another tensor");
      for (size_t i = 0; i < v.size(); ++i) v[i] += occ_residual_[i];
      break;
  }
  return v;
}

}  // namespace fp4emu::analysis
