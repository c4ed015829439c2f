#pragma once
// Outlier-handling transforms applied before quantization, as baselines for
// the studies (docs/analysis.md §4): the random Hadamard transform (RHT),
// SmoothQuant and OCC (outlier clamping and compensation). Activations are
// m x d (tokens x input features), weights n x d; d is the reduction axis.
//
// RHT and SmoothQuant are exact in real arithmetic: X' W'^T = X W^T and the
// inverse maps X' back to X. Here they run in double and the operand that is
// quantized is rounded to fp32 once, so a round trip through fp32 is exact to
// a rounding of the operand, and exact for RHT sizes 16, 64 and 256 on values
// whose sums are exact in double (1/sqrt(b) is then a power of two).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/quant/tensor.hpp"
#include "fp4emu/quant/tensor_ref.hpp"

namespace fp4emu::analysis {

// Seeded generator for everything random in the studies (RHT signs, random
// masks, synthetic weights): SplitMix64, so results are the same on every
// machine.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // N(0, 1) by Box-Muller in double (both outputs used in turn).
  double gaussian();

 private:
  uint64_t state_;
  bool have_spare_ = false;
  double spare_ = 0;
};

// ---------------------------------------------------------------- RHT ------
enum class RhtSigns : uint8_t {
  seeded,  // bit i of the i/64-th SplitMix64 output: 1 -> -1, 0 -> +1
  te,      // TransformerEngine's fixed 16-entry vector (size 16 only)
};

// The sign vector D of length `size` (docs/analysis.md §4.1).
std::vector<double> rht_signs(RhtSigns kind, int size, uint64_t seed);
// TransformerEngine's HADAMARD_DIMENSION = 16 sign vector.
std::span<const double> te_rht_signs();

// In place, each row of a rows x cols matrix, tile by tile along the row:
// x' = x (I ⊗ H_b D) with H_b the Sylvester Hadamard matrix scaled by
// 1/sqrt(b). cols must be a multiple of b = signs.size(), a power of two.
void rht_forward(std::span<double> x, int64_t cols, std::span<const double> signs);
// The inverse: x = x' (I ⊗ H_b D)^T = x' (I ⊗ D H_b).
void rht_inverse(std::span<double> x, int64_t cols, std::span<const double> signs);

// ---------------------------------------------------------- SmoothQuant ----
// s_j = max_t |X_tj|^alpha / max_i |W_ij|^(1-alpha), floored and capped to
// [1e-5, 1e5] so zero or denormal channels stay finite (docs/analysis.md §4.2).
// `x` is the calibration activation (the same tensor for the oracle mode, an
// earlier dump for the stale mode).
std::vector<double> smoothquant_scales(const TensorRef& x, const Tensor& w, double alpha);

// --------------------------------------------------------------- OCC -------
// Quantile of `sorted` (ascending) at q in [0, 1] with linear interpolation
// between order statistics (numpy's default method).
double quantile_linear(std::span<const double> sorted, double q);

// ------------------------------------------------------ transform choice ---
struct TransformSpec {
  enum class Kind : uint8_t { none, rht, smoothquant, occ } kind = Kind::none;
  int rht_size = 0;  // 0: the format's block size
  RhtSigns rht_signs = RhtSigns::seeded;
  uint64_t seed = 0;
  double alpha = 0.5;        // SmoothQuant migration strength
  std::string calib;         // SmoothQuant stale calibration dump (empty: oracle)
  double occ_quantile = 0.99;

  // Canonical text, e.g. "rht:b=64,signs=seeded,seed=0" (what outputs record).
  std::string to_string(int format_block) const;
};

// none | rht[:b=64,seed=S,signs=seeded|te] | smoothquant[:alpha=0.5,calib=FILE] |
// occ[:q=0.99]. InputError names the bad field and what is accepted.
TransformSpec parse_transform(std::string_view text);

// A transform prepared for one activation tensor (and its weights).
class PreparedTransform {
 public:
  // x: m x d activations; w: n x d weights (SmoothQuant needs them; the
  // others ignore them); calib_x: the stale calibration activations (m' x d)
  // or null for the oracle mode. InputError if the shapes do not fit (d not a
  // multiple of the RHT size, weights or calibration of another width).
  PreparedTransform(const TransformSpec& spec, int format_block, const TensorRef& x, const Tensor* w,
                    const Tensor* calib_x);

  // The activation operand that is quantized: X (I ⊗ H D), X diag(s)^-1 or
  // clamp(X, q_lo, q_hi), rounded once to fp32.
  Tensor operand(const TensorRef& x) const;
  // W (I ⊗ H D) or W diag(s); W itself for none and OCC.
  Tensor weights(const Tensor& w) const;
  // Maps a reconstruction of the operand back to the activation's domain, in
  // double: the inverse rotation or scaling, or for OCC the addition of the
  // kept high-precision compensation X - clamp(X).
  std::vector<double> to_original(std::span<const float> operand_recon) const;

  const TransformSpec& spec() const { return spec_; }
  std::span<const double> smooth_scales() const { return scales_; }
  double occ_low() const { return occ_lo_; }
  double occ_high() const { return occ_hi_; }
  int64_t occ_clamped() const { return occ_clamped_; }

 private:
  TransformSpec spec_;
  int64_t cols_ = 0;
  std::vector<double> signs_;        // RHT
  std::vector<double> scales_;       // SmoothQuant
  double occ_lo_ = 0, occ_hi_ = 0;   // OCC clamp bounds
  std::vector<double> occ_residual_; // OCC: X - clamp(X), exact in double
  int64_t occ_clamped_ = 0;
};

}  // namespace fp4emu::analysis
