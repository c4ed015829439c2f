#pragma once
// Error metrics of a fake-quantized tensor against its input (docs/analysis.md
// §1.2, §8.3). Sums are accumulated in double, element by element in index
// order, so the same input gives the same numbers on every machine.
//
// The sums and ratios run over the valid pairs: finite input and finite
// quantized value. NaN/Inf inputs, and finite inputs whose block became
// NaN/Inf, are counted separately and left out.
#include <cstdint>
#include <optional>
#include <span>

namespace fp4emu {

struct ErrorStats {
  int64_t count = 0;          // valid pairs (finite x, finite Q(x))
  int64_t nonzero = 0;        // valid pairs with x != 0
  int64_t flushed = 0;        // ... of which Q(x) == 0: underflow
  int64_t zero_after = 0;     // valid pairs with Q(x) == 0 (zero inputs included)
  int64_t nan_in = 0;         // NaN inputs
  int64_t inf_in = 0;         // +-Inf inputs
  int64_t nonfinite_out = 0;  // finite inputs whose Q(x) is NaN or Inf
  // Valid pairs clipped to the largest element code of their block (|x| >
  // |Q(x)| and Q(x) is that code); unknown for recipes with no packed form.
  std::optional<int64_t> saturated;
  double signal_energy = 0;   // sum x^2
  double error_energy = 0;    // sum (x - Q(x))^2
  double output_energy = 0;   // sum Q(x)^2
  double cross = 0;           // sum x Q(x)
  double max_abs_error = 0;   // max |x - Q(x)|
  double error_sum = 0;       // sum (Q(x) - x): the signed error (docs/analysis.md §5.1)

  // 10 log10(sum x^2 / sum (x - Q(x))^2); +inf when the error is 0 (and for
  // an all-zero input), NaN when there are no valid pairs.
  double qsnr_db() const;
  // sum (x - Q(x))^2 / sum x^2; 0 when both are 0, +inf for a zero signal
  // with a nonzero error.
  double nmse() const;
  // Relative Frobenius error: sqrt(nmse).
  double rel_l2() const;
  // sum x Q(x) / sqrt(sum x^2 sum Q(x)^2); 1 when both are all zero, 0 when
  // exactly one is.
  double cosine() const;
  // flushed / nonzero (0 when there are no nonzero inputs).
  double underflow_ratio() const;
  // zero_after / count (0 when count is 0).
  double zero_ratio() const;
  // saturated / count; nullopt when saturation is unknown.
  std::optional<double> saturation_ratio() const;
  // Mean signed error (the bias) sum (Q(x) - x) / count: positive when Q
  // rounds up on average. NaN when there are no valid pairs.
  double bias() const;
  // Its standard error, sqrt(s^2 / count) with s^2 the sample variance of
  // the signed error, (sum e^2 - (sum e)^2 / count) / (count - 1), from the
  // pooled sums; NaN below 2 valid pairs (docs/analysis.md §5.1).
  double bias_se() const;
  // NaN and Inf inputs plus non-finite outputs.
  int64_t nonfinite() const { return nan_in + inf_in + nonfinite_out; }

  // Pools another tensor's statistics into these (sums of numerators and
  // denominators: the "ratio of sums" aggregate of docs/analysis.md §3.3).
  void merge(const ErrorStats& other);
};

// What a tensor holds (`fp4emu inspect`): counts of NaN, Inf and zeros, and
// the range and rms of its finite values. Fed in chunks, in index order.
struct ValueStats {
  int64_t count = 0;   // all elements
  int64_t finite = 0;
  int64_t nan = 0;
  int64_t inf = 0;
  int64_t zeros = 0;   // +-0
  double min = 0;      // over finite values (0 when there are none)
  double max = 0;
  double amax = 0;
  double sum_sq = 0;   // over finite values

  void add(std::span<const float> values);
  void merge(const ValueStats& other);
  // sqrt(sum_sq / finite); 0 when there are no finite values.
  double rms() const;
};

// Statistics of `quantized` = Q(x) against `x` (same length; saturation is
// left unknown: see count_saturated in compare.hpp).
ErrorStats error_stats(std::span<const float> x, std::span<const float> quantized);

}  // namespace fp4emu
