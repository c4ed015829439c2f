#include "fp4emu/analysis/metrics.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp4emu {

double ErrorStats::qsnr_db() const {
  if (error_energy == 0.0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal_energy / error_energy);
}

double ErrorStats::nmse() const {
  return signal_energy == 0.0 ? 0.0 : error_energy / signal_energy;
}

double ErrorStats::underflow_ratio() const {
  return nonzero == 0 ? 0.0 : static_cast<double>(flushed) / static_cast<double>(nonzero);
}

ErrorStats error_stats(std::span<const float> x, std::span<const float> quantized) {
  if (x.size() != quantized.size()) throw std::invalid_argument("error_stats: size mismatch");
  ErrorStats s;
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = x[i];
    const double q = quantized[i];
    if (!std::isfinite(a)) {
      ++s.nonfinite_in;
      continue;
    }
    ++s.count;
    if (!std::isfinite(q)) {
      ++s.nonfinite_out;
      continue;
    }
    if (a != 0.0) {
      ++s.nonzero;
      if (q == 0.0) ++s.flushed;
    }
    const double e = a - q;
    s.signal_energy += a * a;
    s.error_energy += e * e;
    s.max_abs_error = std::max(s.max_abs_error, std::fabs(e));
  }
  return s;
}

}  // namespace fp4emu
