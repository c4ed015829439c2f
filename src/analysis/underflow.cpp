// Underflow statistics (underflow.hpp, docs/analysis.md §2.1).
#include "fp4emu/analysis/underflow.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "fp4emu/error.hpp"

namespace fp4emu::analysis {
namespace {

double ratio(int64_t num, int64_t den) { return den == 0 ? 0.0 : double(num) / double(den); }

// Rows with a defined UR, highest first, ties to the lower index.
std::vector<RankedIndex> top_by_ur(const std::vector<double>& ur, const std::vector<int64_t>& nonzero, int k) {
  std::vector<RankedIndex> all;
  for (size_t i = 0; i < ur.size(); ++i)
    if (nonzero[i] > 0) all.push_back({int64_t(i), ur[i], nonzero[i]});
  std::stable_sort(all.begin(), all.end(), [](const RankedIndex& a, const RankedIndex& b) { return a.ur > b.ur; });
  if (int64_t(all.size()) > k) all.resize(k);
  return all;
}

}  // namespace

UnderflowStats underflow_stats(std::span<const float> x, std::span<const float> q, int64_t rows, int64_t cols,
                               int block, std::span<const float> original, std::span<const double> recon,
                               const std::optional<std::vector<uint8_t>>& saturated, const UnderflowOptions& opt) {
  const size_t total = size_t(rows * cols);
  if (x.size() != total || q.size() != total || original.size() != total || recon.size() != total ||
      (saturated && saturated->size() != total) || block <= 0)
    throw std::invalid_argument("underflow_stats: sizes do not match rows x cols");
  UnderflowStats s;
  s.rows = rows, s.cols = cols, s.block = block;
  const int64_t blocks = (cols + block - 1) / block;
  s.n_blocks = rows * blocks;
  s.block_nonzero.assign(s.n_blocks, 0);
  s.block_flushed.assign(s.n_blocks, 0);
  std::vector<int64_t> tok_nz(rows, 0), tok_fl(rows, 0), ch_nz(cols, 0), ch_fl(cols, 0);
  std::vector<double> block_amax(s.n_blocks, 0.0), block_sq(s.n_blocks, 0.0);
  std::vector<int32_t> block_len(s.n_blocks, 0);
  int64_t n_sat = 0;
  double sum_sq = 0, err_sq = 0, orig_sq = 0, rec_sq = 0, dot = 0;

  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = size_t(r * cols + c);
      const int64_t b = r * blocks + c / block;
      // Error of the reconstruction in the input's domain.
      if (std::isfinite(original[i]) && std::isfinite(recon[i])) {
        const double a = original[i], e = a - recon[i];
        orig_sq += a * a, err_sq += e * e, rec_sq += recon[i] * recon[i], dot += a * recon[i];
      }
      const double v = x[i];
      if (!std::isfinite(v)) {
        ++s.n_nonfinite;
        continue;
      }
      ++s.n;
      const double a = std::fabs(v);
      sum_sq += v * v;
      s.max_abs = std::max(s.max_abs, a);
      block_amax[b] = std::max(block_amax[b], a);
      block_sq[b] += v * v;
      ++block_len[b];
      if (q[i] == 0.0f) ++s.n_zero_after;
      if (saturated && (*saturated)[i]) ++n_sat;
      if (v == 0.0) continue;
      ++s.n_nonzero, ++tok_nz[r], ++ch_nz[c], ++s.block_nonzero[b];
      int e2 = 0;
      std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1): floor(log2 a) = e2 - 1
      ++s.log2_hist_all[e2 - 1];
      if (q[i] == 0.0f) {
        ++s.n_underflow, ++tok_fl[r], ++ch_fl[c], ++s.block_flushed[b];
        ++s.log2_hist_underflow[e2 - 1];
      }
    }

  s.underflow_ratio = ratio(s.n_underflow, s.n_nonzero);
  s.zero_ratio_after = ratio(s.n_zero_after, s.n);
  if (saturated) {
    s.n_saturated = n_sat;
    s.saturation_ratio = ratio(n_sat, s.n);
  }
  s.rms = s.n ? std::sqrt(sum_sq / double(s.n)) : 0.0;
  s.qsnr_db = err_sq == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(orig_sq / err_sq);
  s.rel_l2 = orig_sq == 0 ? 0.0 : std::sqrt(err_sq / orig_sq);
  s.cosine = (orig_sq == 0 || rec_sq == 0) ? 0.0 : dot / std::sqrt(orig_sq * rec_sq);

  // Per block: UR_B distribution, outlier rules, crest factors.
  std::vector<double> block_ur, amax_sorted(block_amax), crest;
  int64_t with_uf = 0, out_abs = 0, out_rel = 0, out_uf = 0;
  std::sort(amax_sorted.begin(), amax_sorted.end());
  const double median_amax = s.n_blocks ? quantile_linear(amax_sorted, 0.5) : 0.0;
  for (int64_t b = 0; b < s.n_blocks; ++b) {
    // A block of zeros is never an outlier block, even when the median amax
    // is 0 (rule b as written would then flag it).
    if (block_amax[b] > 0 && block_amax[b] >= opt.tau_abs) ++out_abs;
    if (block_amax[b] > 0 && block_amax[b] >= opt.tau_rel * median_amax) ++out_rel;
    if (block_len[b] > 0 && block_sq[b] > 0)
      crest.push_back(block_amax[b] / std::sqrt(block_sq[b] / block_len[b]));
    if (s.block_nonzero[b] == 0) continue;
    const double ur = double(s.block_flushed[b]) / s.block_nonzero[b];
    block_ur.push_back(ur);
    with_uf += ur > 0;
    out_uf += ur >= opt.tau_uf;
  }
  s.n_blocks_nonzero = int64_t(block_ur.size());
  s.blocks_with_underflow_ratio = ratio(with_uf, s.n_blocks);
  s.outlier_block_ratio_abs = ratio(out_abs, s.n_blocks);
  s.outlier_block_ratio_rel = ratio(out_rel, s.n_blocks);
  s.outlier_block_ratio_uf = ratio(out_uf, s.n_blocks);
  if (!block_ur.empty()) {
    double sum = 0;
    for (double u : block_ur) sum += u;
    s.mean_block_ur = sum / double(block_ur.size());
    std::sort(block_ur.begin(), block_ur.end());
    s.p99_block_ur = quantile_linear(block_ur, 0.99);
    s.max_block_ur = block_ur.back();
  }
  if (!crest.empty()) {
    double sum = 0;
    for (double k : crest) sum += k;
    s.crest_mean = sum / double(crest.size());
    std::sort(crest.begin(), crest.end());
    s.crest_median = quantile_linear(crest, 0.5);
    s.crest_q3 = quantile_linear(crest, 0.75);
    s.crest_max = crest.back();
  } else {
    // No block with rms_B > 0 (an all-zero tensor): no crest factor exists.
    s.crest_mean = s.crest_median = s.crest_q3 = s.crest_max = std::numeric_limits<double>::quiet_NaN();
  }

  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.token_ur.resize(rows);
  for (int64_t r = 0; r < rows; ++r) s.token_ur[r] = tok_nz[r] ? double(tok_fl[r]) / tok_nz[r] : nan;
  s.channel_ur.resize(cols);
  for (int64_t c = 0; c < cols; ++c) s.channel_ur[c] = ch_nz[c] ? double(ch_fl[c]) / ch_nz[c] : nan;
  s.top_tokens = top_by_ur(s.token_ur, tok_nz, opt.top_k);
  s.top_channels = top_by_ur(s.channel_ur, ch_nz, opt.top_k);
  return s;
}

std::optional<std::vector<uint8_t>> saturated_elements(const TensorRef& x, const Tensor& q,
                                                      const QuantOptions& options) {
  const ResolvedOptions r = resolve_options(options, x.shape);
  if (r.recipe->fake_quant_only) return std::nullopt;
  QuantOptions o = options;
  o.axis = -1;
  o.nibble_order = NibbleOrder::low_first;  // element k of a row in byte k/2, odd k high
  const PackedTensor p = quantize(x, o);
  const MatrixShape ms = as_matrix(x);
  std::vector<uint8_t> sat(x.data.size(), 0);
  for (int64_t row = 0; row < ms.rows; ++row) {
    const uint8_t* codes = p.codes.data() + row * (p.padded_len / 2);
    for (int64_t k = 0; k < ms.cols; ++k) {
      const uint8_t code = (codes[k / 2] >> ((k & 1) ? 4 : 0)) & 0xF;
      const size_t i = size_t(row * ms.cols + k);
      sat[i] = (code & 0x7) == 0x7 && std::fabs(x.data[i]) > std::fabs(q.data[i]);
    }
  }
  return sat;
}

UnderflowStats study_underflow(const TensorRef& x, const QuantOptions& options, const TransformSpec& transform,
                               const Tensor* w, const Tensor* calib, const UnderflowOptions& opt) {
  const MatrixShape ms = as_matrix(x);
  const TensorRef x2{{ms.rows, ms.cols}, x.data};  // the same values, as a matrix
  QuantOptions o = options;
  o.axis = -1;
  const ResolvedOptions resolved = resolve_options(o, x2.shape);
  const int block = block_size(resolved.recipe->format);
  const PreparedTransform t(transform, block, x2, w, calib);
  const bool none = transform.kind == TransformSpec::Kind::none;
  const Tensor transformed = none ? Tensor{} : t.operand(x2);
  const TensorRef operand = none ? x2 : TensorRef(transformed);  // x itself is not copied
  if (!none) o.input_dtype = InputDType::f32;  // a transformed operand is fp32
  const Tensor q = fake_quant(operand, o);
  const auto sat = saturated_elements(operand, q, o);
  const std::vector<double> recon = t.to_original(q.data);
  return underflow_stats(operand.data, q.data, ms.rows, ms.cols, block, x2.data, recon, sat, opt);
}

}  // namespace fp4emu::analysis
