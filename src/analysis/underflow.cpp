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

UnderflowParts underflow_parts(std::span<const float> x, std::span<const float> q, int64_t rows, int64_t cols,
                               int block, std::span<const float> original, std::span<const double> recon,
                               const std::optional<std::vector<uint8_t>>& saturated) {
  const size_t total = size_t(rows * cols);
  if (x.size() != total || q.size() != total || original.size() != total || recon.size() != total ||
      (saturated && saturated->size() != total) || block <= 0)
    throw std::invalid_argument("underflow_stats: sizes do not match rows x cols");
  UnderflowParts s;
  s.rows = rows, s.cols = cols, s.block = block;
  s.has_saturation = saturated.has_value();
  const int64_t blocks = (cols + block - 1) / block;
  const size_t n_blocks = size_t(rows * blocks);
  s.block_nonzero.assign(n_blocks, 0);
  s.block_flushed.assign(n_blocks, 0);
  s.tok_nz.assign(size_t(rows), 0), s.tok_fl.assign(size_t(rows), 0);
  s.ch_nz.assign(size_t(cols), 0), s.ch_fl.assign(size_t(cols), 0);
  s.block_amax.assign(n_blocks, 0.0);
  std::vector<double> block_sq(n_blocks, 0.0);
  std::vector<int32_t> block_len(n_blocks, 0);

  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = size_t(r * cols + c);
      const size_t b = size_t(r * blocks + c / block);
      // Error of the reconstruction in the input's domain.
      if (std::isfinite(original[i]) && std::isfinite(recon[i])) {
        const double a = original[i], e = a - recon[i];
        s.orig_sq += a * a, s.err_sq += e * e, s.rec_sq += recon[i] * recon[i], s.dot += a * recon[i];
      }
      const double v = x[i];
      if (!std::isfinite(v)) {
        ++s.n_nonfinite;
        continue;
      }
      ++s.n;
      const double a = std::fabs(v);
      s.sum_sq += v * v;
      s.max_abs = std::max(s.max_abs, a);
      s.block_amax[b] = std::max(s.block_amax[b], a);
      block_sq[b] += v * v;
      ++block_len[b];
      if (q[i] == 0.0f) ++s.n_zero_after;
      if (saturated && (*saturated)[i]) ++s.n_sat;
      if (v == 0.0) continue;
      ++s.n_nonzero, ++s.tok_nz[size_t(r)], ++s.ch_nz[size_t(c)], ++s.block_nonzero[b];
      int e2 = 0;
      std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1): floor(log2 a) = e2 - 1
      ++s.log2_hist_all[e2 - 1];
      if (q[i] == 0.0f) {
        ++s.n_underflow, ++s.tok_fl[size_t(r)], ++s.ch_fl[size_t(c)], ++s.block_flushed[b];
        ++s.log2_hist_underflow[e2 - 1];
      }
    }
  // A block's crest factor needs only the block: computed here, so that a
  // row range sends one number per block.
  s.block_crest.assign(n_blocks, std::numeric_limits<double>::quiet_NaN());
  for (size_t b = 0; b < n_blocks; ++b)
    if (block_len[b] > 0 && block_sq[b] > 0) s.block_crest[b] = s.block_amax[b] / std::sqrt(block_sq[b] / block_len[b]);
  return s;
}

void UnderflowParts::merge(const UnderflowParts& o) {
  if (o.cols != cols || o.block != block || o.has_saturation != has_saturation)
    throw std::invalid_argument("UnderflowParts::merge: parts of different tensors or runs");
  auto append = [](auto& a, const auto& b) { a.insert(a.end(), b.begin(), b.end()); };
  rows += o.rows;
  n += o.n, n_nonfinite += o.n_nonfinite, n_nonzero += o.n_nonzero, n_underflow += o.n_underflow;
  n_zero_after += o.n_zero_after, n_sat += o.n_sat;
  sum_sq += o.sum_sq, err_sq += o.err_sq, orig_sq += o.orig_sq, rec_sq += o.rec_sq, dot += o.dot;
  max_abs = std::max(max_abs, o.max_abs);
  append(tok_nz, o.tok_nz), append(tok_fl, o.tok_fl);
  for (size_t c = 0; c < ch_nz.size(); ++c) ch_nz[c] += o.ch_nz[c], ch_fl[c] += o.ch_fl[c];
  append(block_amax, o.block_amax), append(block_crest, o.block_crest);
  append(block_nonzero, o.block_nonzero), append(block_flushed, o.block_flushed);
  for (const auto& [k, v] : o.log2_hist_all) log2_hist_all[k] += v;
  for (const auto& [k, v] : o.log2_hist_underflow) log2_hist_underflow[k] += v;
}

UnderflowStats finish_underflow(const UnderflowParts& p, const UnderflowOptions& opt) {
  UnderflowStats s;
  s.rows = p.rows, s.cols = p.cols, s.block = p.block;
  s.n = p.n, s.n_nonfinite = p.n_nonfinite, s.n_nonzero = p.n_nonzero, s.n_underflow = p.n_underflow;
  s.n_zero_after = p.n_zero_after, s.max_abs = p.max_abs;
  s.n_blocks = int64_t(p.block_amax.size());
  s.block_nonzero = p.block_nonzero, s.block_flushed = p.block_flushed;
  s.log2_hist_all = p.log2_hist_all, s.log2_hist_underflow = p.log2_hist_underflow;

  s.underflow_ratio = ratio(s.n_underflow, s.n_nonzero);
  s.zero_ratio_after = ratio(s.n_zero_after, s.n);
  if (p.has_saturation) {
    s.n_saturated = p.n_sat;
    s.saturation_ratio = ratio(p.n_sat, s.n);
  }
  s.rms = s.n ? std::sqrt(p.sum_sq / double(s.n)) : 0.0;
  s.qsnr_db = p.err_sq == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(p.orig_sq / p.err_sq);
  s.rel_l2 = p.orig_sq == 0 ? 0.0 : std::sqrt(p.err_sq / p.orig_sq);
  s.cosine = (p.orig_sq == 0 || p.rec_sq == 0) ? 0.0 : p.dot / std::sqrt(p.orig_sq * p.rec_sq);

  // Per block: UR_B distribution, outlier rules, crest factors.
  std::vector<double> block_ur, amax_sorted(p.block_amax), crest;
  int64_t with_uf = 0, out_abs = 0, out_rel = 0, out_uf = 0;
  std::sort(amax_sorted.begin(), amax_sorted.end());
  const double median_amax = s.n_blocks ? quantile_linear(amax_sorted, 0.5) : 0.0;
  for (size_t b = 0; b < size_t(s.n_blocks); ++b) {
    const double amax = p.block_amax[b];
    // A block of zeros is never an outlier block, even when the median amax
    // is 0 (rule b as written would then flag it).
    if (amax > 0 && amax >= opt.tau_abs) ++out_abs;
    if (amax > 0 && amax >= opt.tau_rel * median_amax) ++out_rel;
    if (!std::isnan(p.block_crest[b])) crest.push_back(p.block_crest[b]);
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
  s.token_ur.resize(size_t(p.rows));
  for (size_t r = 0; r < size_t(p.rows); ++r) s.token_ur[r] = p.tok_nz[r] ? double(p.tok_fl[r]) / p.tok_nz[r] : nan;
  s.channel_ur.resize(size_t(p.cols));
  for (size_t c = 0; c < size_t(p.cols); ++c) s.channel_ur[c] = p.ch_nz[c] ? double(p.ch_fl[c]) / p.ch_nz[c] : nan;
  s.top_tokens = top_by_ur(s.token_ur, p.tok_nz, opt.top_k);
  s.top_channels = top_by_ur(s.channel_ur, p.ch_nz, opt.top_k);
  return s;
}

UnderflowStats underflow_stats(std::span<const float> x, std::span<const float> q, int64_t rows, int64_t cols,
                               int block, std::span<const float> original, std::span<const double> recon,
                               const std::optional<std::vector<uint8_t>>& saturated, const UnderflowOptions& opt) {
  return finish_underflow(underflow_parts(x, q, rows, cols, block, original, recon, saturated), opt);
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

namespace {

// The operand of one run, ready: its matrix shape, options (axis -1) and transform.
struct Prepared {
  MatrixShape ms;
  QuantOptions o;
  int block = 0;
  std::optional<PreparedTransform> t;
};

Prepared prepare(const TensorRef& x, const QuantOptions& options, const TransformSpec& transform, const Tensor* w,
                 const Tensor* calib) {
  Prepared p;
  p.ms = as_matrix(x);
  const TensorRef x2{{p.ms.rows, p.ms.cols}, x.data};
  p.o = options;
  p.o.axis = -1;
  const ResolvedOptions resolved = resolve_options(p.o, x2.shape);
  p.block = block_size(resolved.recipe->format);
  p.t.emplace(transform, p.block, x2, w, calib);
  if (transform.kind != TransformSpec::Kind::none) p.o.input_dtype = InputDType::f32;  // a transformed operand is fp32
  return p;
}

}  // namespace

bool row_local(const TransformSpec& transform) {
  using K = TransformSpec::Kind;
  return transform.kind == K::none || transform.kind == K::rht;
}

Tensor underflow_operand(const TensorRef& x, const QuantOptions& options, const TransformSpec& transform,
                         const Tensor* w, const Tensor* calib) {
  const Prepared p = prepare(x, options, transform, w, calib);
  const TensorRef x2{{p.ms.rows, p.ms.cols}, x.data};
  if (transform.kind != TransformSpec::Kind::none) return p.t->operand(x2);
  return Tensor{{p.ms.rows, p.ms.cols}, std::vector<float>(x.data.begin(), x.data.end())};
}

UnderflowParts study_underflow_parts(const TensorRef& x, const QuantOptions& options, const TransformSpec& transform,
                                     const Tensor* w, const Tensor* calib) {
  const Prepared p = prepare(x, options, transform, w, calib);
  const TensorRef x2{{p.ms.rows, p.ms.cols}, x.data};  // the same values, as a matrix
  const bool none = transform.kind == TransformSpec::Kind::none;
  const Tensor transformed = none ? Tensor{} : p.t->operand(x2);
  const TensorRef operand = none ? x2 : TensorRef(transformed);  // x itself is not copied
  const Tensor q = fake_quant(operand, p.o);
  const auto sat = saturated_elements(operand, q, p.o);
  const std::vector<double> recon = p.t->to_original(q.data);
  return underflow_parts(operand.data, q.data, p.ms.rows, p.ms.cols, p.block, x2.data, recon, sat);
}

UnderflowStats study_underflow(const TensorRef& x, const QuantOptions& options, const TransformSpec& transform,
                               const Tensor* w, const Tensor* calib, const UnderflowOptions& opt) {
  return finish_underflow(study_underflow_parts(x, options, transform, w, calib), opt);
}

}  // namespace fp4emu::analysis
