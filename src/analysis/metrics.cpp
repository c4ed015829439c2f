#include "fp4emu/analysis/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp4emu {

double ErrorStats::qsnr_db() const {
  if (count == 0) return std::numeric_limits<double>::quiet_NaN();
  if (error_energy == 0.0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal_energy / error_energy);
}

double ErrorStats::nmse() const {
  if (error_energy == 0.0) return 0.0;
  if (signal_energy == 0.0) return std::numeric_limits<double>::infinity();
  return error_energy / signal_energy;
}

double ErrorStats::rel_l2() const { return std::sqrt(nmse()); }

double ErrorStats::cosine() const {
  if (signal_energy == 0.0 && output_energy == 0.0) return 1.0;
  if (signal_energy == 0.0 || output_energy == 0.0) return 0.0;
  return cross / std::sqrt(signal_energy * output_energy);
}

double ErrorStats::underflow_ratio() const {
  return nonzero == 0 ? 0.0 : static_cast<double>(flushed) / static_cast<double>(nonzero);
}

double ErrorStats::zero_ratio() const {
  return count == 0 ? 0.0 : static_cast<double>(zero_after) / static_cast<double>(count);
}

double ErrorStats::bias() const {
  if (count == 0) return std::numeric_limits<double>::quiet_NaN();
  return error_sum / static_cast<double>(count);
}

double ErrorStats::bias_se() const {
  if (count < 2) return std::numeric_limits<double>::quiet_NaN();
  const double n = static_cast<double>(count);
  // Rounding can leave the difference a hair below 0 when every error is equal.
  const double variance = std::max(0.0, (error_energy - error_sum * error_sum / n) / (n - 1.0));
  return std::sqrt(variance / n);
}

std::optional<double> ErrorStats::saturation_ratio() const {
  if (!saturated) return std::nullopt;
  return count == 0 ? 0.0 : static_cast<double>(*saturated) / static_cast<double>(count);
}

void ErrorStats::merge(const ErrorStats& o) {
  count += o.count;
  nonzero += o.nonzero;
  flushed += o.flushed;
  zero_after += o.zero_after;
  nan_in += o.nan_in;
  inf_in += o.inf_in;
  nonfinite_out += o.nonfinite_out;
  saturated = saturated && o.saturated ? std::optional<int64_t>(*saturated + *o.saturated)
                                       : std::nullopt;
  signal_energy += o.signal_energy;
  error_energy += o.error_energy;
  output_energy += o.output_energy;
  cross += o.cross;
  error_sum += o.error_sum;
  max_abs_error = std::max(max_abs_error, o.max_abs_error);
}

ErrorStats error_stats(std::span<const float> x, std::span<const float> quantized) {
  if (x.size() != quantized.size()) throw std::invalid_argument("error_stats: size mismatch");
  ErrorStats s;
  s.saturated = std::nullopt;
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = x[i];
    const double q = quantized[i];
    if (std::isnan(a)) {
      ++s.nan_in;
      continue;
    }
    if (std::isinf(a)) {
      ++s.inf_in;
      continue;
    }
    if (!std::isfinite(q)) {
      ++s.nonfinite_out;
      continue;
    }
    ++s.count;
    if (q == 0.0) ++s.zero_after;
    if (a != 0.0) {
      ++s.nonzero;
      if (q == 0.0) ++s.flushed;
    }
    const double e = a - q;
    s.signal_energy += a * a;
    s.error_energy += e * e;
    s.output_energy += q * q;
    s.cross += a * q;
    s.error_sum += q - a;
    s.max_abs_error = std::max(s.max_abs_error, std::fabs(e));
  }
  return s;
}

void ValueStats::add(std::span<const float> values) {
  for (const float f : values) {
    ++count;
    if (std::isnan(f)) {
      ++nan;
      continue;
    }
    if (std::isinf(f)) {
      ++inf;
      continue;
    }
    const double v = f;
    if (finite == 0) {
      min = max = v;
    } else {
      min = std::min(min, v);
      max = std::max(max, v);
    }
    ++finite;
    if (v == 0.0) ++zeros;
    amax = std::max(amax, std::fabs(v));
    sum_sq += v * v;
  }
}

void ValueStats::merge(const ValueStats& o) {
  if (o.finite > 0) {
    min = finite == 0 ? o.min : std::min(min, o.min);
    max = finite == 0 ? o.max : std::max(max, o.max);
  }
  count += o.count;
  finite += o.finite;
  nan += o.nan;
  inf += o.inf;
  zeros += o.zeros;
  amax = std::max(amax, o.amax);
  sum_sq += o.sum_sq;
}

double ValueStats::rms() const { return finite == 0 ? 0.0 : std::sqrt(sum_sq / static_cast<double>(finite)); }

}  // namespace fp4emu
