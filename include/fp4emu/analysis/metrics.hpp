#pragma once
// Error metrics of a fake-quantized tensor against its input (analysis.md §1-2).
// Everything is accumulated in double over the finite input values.
#include <cstdint>
#include <span>

namespace fp4emu {

struct ErrorStats {
  int64_t count = 0;          // finite inputs considered
  int64_t nonzero = 0;        // finite nonzero inputs
  int64_t flushed = 0;        // nonzero inputs whose quantized value is 0 (underflow)
  int64_t nonfinite_in = 0;   // NaN/Inf inputs (excluded from the sums)
  int64_t nonfinite_out = 0;  // finite inputs that quantized to NaN/Inf
  double signal_energy = 0;   // sum x^2
  double error_energy = 0;    // sum (x - q)^2
  double max_abs_error = 0;

  // 10 log10(sum x^2 / sum (x-q)^2); +inf when the error is 0.
  double qsnr_db() const;
  // sum (x-q)^2 / sum x^2.
  double nmse() const;
  // flushed / nonzero (0 when there are no nonzero inputs).
  double underflow_ratio() const;
};

ErrorStats error_stats(std::span<const float> x, std::span<const float> quantized);

}  // namespace fp4emu
