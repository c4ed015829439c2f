// Rollout-ResQ residual study (resq.hpp, docs/analysis.md §3.1, §3.3, §3.4).
#include "fp4emu/analysis/resq.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fp4emu/analysis/gemm_f64.hpp"
#include "fp4emu/analysis/sizes.hpp"
#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/array.hpp"
#include "fp4emu/threads.hpp"
#include "src/gemm/models.hpp"

namespace fp4emu::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kFp4OverFp16 = 4.0;  // r4: FP4 tensor-core throughput over FP16 (docs/analysis.md §3.4)

double qsnr(double nmse) {
  return nmse == 0 ? std::numeric_limits<double>::infinity() : -10.0 * std::log10(nmse);
}
double div0(double a, double b) { return b == 0 ? 0.0 : a / b; }

// C = A B^T (gemm_f64.hpp: the same bits for any thread count and target).
std::vector<double> gemm_abt(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t d,
                             int64_t n, int threads) {
  return gemm_abt_f64(a, b, m, d, n, threads);
}

std::vector<double> widen(std::span<const float> v) { return {v.begin(), v.end()}; }

// The output-error products E Q(W)^T (e: m x d, Q(W): n x d) into `ey`,
// m x n. The fp32 buffers are kept by the caller from one pattern to the
// next: a gate/up tensor's m x n products are tens of megabytes.
class OutputError {
 public:
  OutputError(const std::vector<double>& qwd, const std::vector<float>& qw, int64_t m, int64_t d, int64_t n,
              int threads, ResqGemm gemm)
      : qwd_(qwd), qw_(qw), m_(m), d_(d), n_(n), threads_(threads), gemm_(gemm) {}

  const std::vector<double>& operator()(const std::vector<double>& e) {
    if (gemm_ == ResqGemm::f64) {
      ey_ = gemm_abt(e, qwd_, m_, d_, n_, threads_);
      return ey_;
    }
    // Q(W) is an fp32 tensor; E rounds to fp32 (it is a difference of fp32
    // values, exact in fp32 unless its operands' exponents are far apart).
    ef_.assign(e.begin(), e.end());
    c_.resize(size_t(m_ * n_));
    gemm_detail::fast_gemm(ef_.data(), qw_.data(), m_, n_, d_, thread_count(threads_), c_.data());
    ey_.assign(c_.begin(), c_.end());
    return ey_;
  }

 private:
  const std::vector<double>& qwd_;
  const std::vector<float>& qw_;
  int64_t m_, d_, n_;
  int threads_;
  ResqGemm gemm_;
  std::vector<float> ef_, c_;
  std::vector<double> ey_;
};

// ||v - mask v||^2: what pruning deletes from v.
double deleted_energy(const std::vector<float>& v, const std::vector<uint8_t>& mask) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (!mask[i]) s += double(v[i]) * double(v[i]);
  return s;
}

double energy(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * double(x);
  return s;
}

}  // namespace

void ResqSums::add(const ResqSums& o) {
  x_count += o.x_count, y_count += o.y_count;
  x_sq += o.x_sq, act_err_sq += o.act_err_sq;
  ya_sq += o.ya_sq, out_err_sq += o.out_err_sq;
  y_sq += o.y_sq, out_err_y_sq += o.out_err_y_sq;
  yhat_sq += o.yhat_sq, yhat_dot_ya += o.yhat_dot_ya;
  max_abs_out = std::max(max_abs_out, o.max_abs_out);
  drop_res += o.drop_res, res_sq += o.res_sq;
  drop_prim += o.drop_prim, prim_sq += o.prim_sq;
  none_out_err_sq += o.none_out_err_sq;
  kept += o.kept;
  mdn += o.mdn;
}

double cost_over_mdn(const SparsityPattern& p) {
  const double rho = p.kind == SparsityPattern::Kind::none ? 0.0 : 1.0;
  return 2.0 / kFp4OverFp16 * (1.0 + rho / sparse_speedup(p));
}

double ResqRow::act_mse() const { return div0(sums.act_err_sq, double(sums.x_count)); }
double ResqRow::act_nmse() const { return div0(sums.act_err_sq, sums.x_sq); }
double ResqRow::act_qsnr_db() const { return qsnr(act_nmse()); }
double ResqRow::out_nmse_vs_xqw() const { return div0(sums.out_err_sq, sums.ya_sq); }
double ResqRow::out_qsnr_db() const { return qsnr(out_nmse_vs_xqw()); }
double ResqRow::out_nmse_vs_xw() const { return div0(sums.out_err_y_sq, sums.y_sq); }
double ResqRow::cosine_out() const {
  return sums.yhat_sq == 0 || sums.ya_sq == 0 ? 0.0 : sums.yhat_dot_ya / std::sqrt(sums.yhat_sq * sums.ya_sq);
}
double ResqRow::recovered_fraction() const {
  return sums.none_out_err_sq == 0 ? kNaN : 1.0 - sums.out_err_sq / sums.none_out_err_sq;
}
double ResqRow::kept_density() const { return div0(double(sums.kept), double(sums.x_count)); }
bool has_drops(const ResqRow& r) { return r.pattern.kind != SparsityPattern::Kind::none; }
double ResqRow::drop_res_mse() const { return has_drops(*this) ? div0(sums.drop_res, double(sums.x_count)) : kNaN; }
double ResqRow::drop_res_rmse() const { return std::sqrt(drop_res_mse()); }
double ResqRow::drop_res_norm() const { return has_drops(*this) ? div0(sums.drop_res, sums.res_sq) : kNaN; }
double ResqRow::drop_prim_mse() const { return has_drops(*this) ? div0(sums.drop_prim, double(sums.x_count)) : kNaN; }
double ResqRow::drop_prim_rmse() const { return std::sqrt(drop_prim_mse()); }
double ResqRow::drop_prim_norm() const { return has_drops(*this) ? div0(sums.drop_prim, sums.prim_sq) : kNaN; }

std::optional<Tensor> find_weights(const Dump& weights, std::string_view activation_name, int64_t d) {
  const TensorRole role = parse_tensor_role(activation_name);
  std::vector<size_t> picked;
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::string& wn = weights.name(i);
    if (role.kind.empty()) {
      std::string base(activation_name);
      if (base.size() > 6 && base.substr(base.size() - 6) == ".input") base.resize(base.size() - 6);
      if (wn == base + ".weight") picked.push_back(i);
    } else if (wn.size() > 7 && wn.substr(wn.size() - 7) == ".weight") {
      const TensorRole wr = parse_tensor_role(wn);
      if (wr.layer == role.layer && wr.kind == role.kind) picked.push_back(i);
    }
  }
  if (picked.empty()) return std::nullopt;
  Tensor w{{0, d}, {}};
  for (size_t i : picked) {
    const DumpTensor t = weights.load(i);
    if (t.x.shape.size() != 2 || t.x.shape[1] != d)
      throw InputError(fmt::format("{}: weight {} has shape {}, but activation {} has {} input features; a weight "
                                   "is n x {}",
                                   weights.file(i).string(), t.name, io::shape_string(t.x.shape), activation_name, d,
                                   d));
    w.shape[0] += t.x.shape[0];
    w.data.insert(w.data.end(), t.x.data.begin(), t.x.data.end());
  }
  return w;
}

Tensor synthetic_weights(int64_t n, int64_t d, uint64_t seed) {
  checked_bytes({n, d, int64_t(sizeof(float))}, fmt::format("synthetic weights of {} x {} fp32 values", n, d),
                "choose fewer rows (--n)");
  Tensor w{{n, d}, std::vector<float>(size_t(n * d))};
  SplitMix64 rng(seed);
  const double sd = 1.0 / std::sqrt(double(d));
  for (float& v : w.data) v = float(rng.gaussian() * sd);
  return w;
}

ResqTensorResult study_resq(const std::string& name, const TensorRef& x_in, const Tensor& w_in,
                            const QuantOptions& options, const TransformSpec& transform, const Tensor* calib,
                            const std::vector<SparsityPattern>& patterns, const ResqOptions& opt) {
  if (transform.kind == TransformSpec::Kind::occ)
    throw InputError("resq: --transform occ is not combined with a residual (OCC is itself a compensation); "
                     "use none, rht or smoothquant");
  const MatrixShape ms = as_matrix(x_in);
  const int64_t m = ms.rows, d = ms.cols;
  if (w_in.shape.size() != 2 || w_in.shape[1] != d)
    throw InputError(fmt::format("resq: tensor {} has {} input features but its weight has shape {}; the weight "
                                 "must be n x {}",
                                 name, d, io::shape_string(w_in.shape), d));
  const int64_t n = w_in.shape[0];
  // Working set: the weights in fp32 (given, transformed, quantized) and in
  // double (two widened copies); three m x n products in double and, for
  // the fast output GEMM, one in fp32.
  checked_bytes({n, d, 3 * 4 + 2 * 8}, fmt::format("resq on tensor {}: weights of {} x {}", name, n, d),
                "choose fewer weight rows (--n)");
  checked_bytes({m, n, 3 * 8 + 4}, fmt::format("resq on tensor {}: outputs of {} x {}", name, m, n),
                "choose fewer weight rows (--n) or fewer tokens");
  QuantOptions o = options;
  o.axis = -1;
  const int threads = options.threads;
  const TensorRef x2{{m, d}, x_in.data};  // the same values, as a matrix
  const int block = block_size(resolve_options(o, x2.shape).recipe->format);
  const PreparedTransform t(transform, block, x2, &w_in, calib);
  const bool none = transform.kind == TransformSpec::Kind::none;
  const Tensor transformed = none ? Tensor{} : t.operand(x2);
  const TensorRef x = none ? x2 : TensorRef(transformed);  // x_in itself is not copied
  const Tensor w = t.weights(w_in);
  QuantOptions ow = o;
  ow.input_dtype = InputDType::f32;
  if (!none) o.input_dtype = InputDType::f32;

  for (float v : x.data)
    if (!std::isfinite(v))
      throw InputError(fmt::format("resq: tensor {} holds NaN or Inf; the residual study needs finite inputs "
                                   "(select other tensors with --tensor)",
                                   name));

  // Primary and residual (docs/analysis.md §3).
  const Tensor qx = fake_quant(x, o);
  ResqTensorResult result;
  Tensor dx{x.shape, std::vector<float>(x.data.size())};
  for (size_t i = 0; i < x.data.size(); ++i) {
    const double r = double(x.data[i]) - double(qx.data[i]);
    dx.data[i] = float(r);
    result.residual_inexact += double(dx.data[i]) != r;
  }
  QuantOptions orr = o;
  orr.input_dtype = InputDType::f32;
  const Tensor rq = fake_quant(dx, orr);  // fresh block scales (and NVFP4 tensor scale) from dX itself
  const Tensor qw = fake_quant(w, ow);

  // References: Y = X W^T, Y_A = X Q(W)^T.
  const std::vector<double> xd = widen(x.data), qwd = widen(qw.data);
  const std::vector<double> y = gemm_abt(xd, widen(w.data), m, d, n, threads);
  const std::vector<double> ya = gemm_abt(xd, qwd, m, d, n, threads);
  double x_sq = 0, y_sq = 0, ya_sq = 0;
  for (double v : xd) x_sq += v * v;
  for (double v : y) y_sq += v * v;
  for (double v : ya) ya_sq += v * v;
  const double res_sq = energy(rq.data), prim_sq = energy(qx.data);

  double none_err = kNaN;
  OutputError output_error(qwd, qw.data, m, d, n, threads, opt.gemm);
  std::vector<double> e(x.data.size());
  for (const SparsityPattern& p : patterns) {
    ResqRow row;
    row.tensor = name;
    row.pattern = p;
    ResqSums& s = row.sums;
    s.x_count = m * d, s.y_count = m * n, s.mdn = double(m) * double(d) * double(n);
    s.x_sq = x_sq, s.y_sq = y_sq, s.ya_sq = ya_sq, s.res_sq = res_sq, s.prim_sq = prim_sq;

    // S(Q(dX)) (qs) or Q(S(dX)) (sq); the Figure-4 measures always compare
    // Q(dX) and Q(X) with their own masks.
    std::vector<float> kept_res(x.data.size(), 0.0f);
    if (p.kind != SparsityPattern::Kind::none) {
      const std::vector<uint8_t> mask_r = sparsity_mask(p, rq.data, m, d);
      const std::vector<uint8_t> mask_p = sparsity_mask(p, qx.data, m, d);
      s.drop_res = deleted_energy(rq.data, mask_r);
      s.drop_prim = deleted_energy(qx.data, mask_p);
      if (opt.order == ResqOrder::qs) {
        for (size_t i = 0; i < kept_res.size(); ++i) kept_res[i] = mask_r[i] ? rq.data[i] : 0.0f;
        for (uint8_t k : mask_r) s.kept += k;
      } else {
        const std::vector<uint8_t> mask_dx = sparsity_mask(p, dx.data, m, d);
        Tensor pruned{dx.shape, std::vector<float>(dx.data.size())};
        for (size_t i = 0; i < pruned.data.size(); ++i) pruned.data[i] = mask_dx[i] ? dx.data[i] : 0.0f;
        kept_res = fake_quant(pruned, orr).data;
        for (uint8_t k : mask_dx) s.kept += k;
      }
    }
    // E = X^ - X; Y^ - Y_A = E Q(W)^T.
    for (size_t i = 0; i < e.size(); ++i) {
      e[i] = (double(qx.data[i]) + double(kept_res[i])) - xd[i];
      s.act_err_sq += e[i] * e[i];
    }
    const std::vector<double>& ey = output_error(e);
    for (size_t i = 0; i < ey.size(); ++i) {
      const double yhat = ya[i] + ey[i];
      s.out_err_sq += ey[i] * ey[i];
      s.out_err_y_sq += (yhat - y[i]) * (yhat - y[i]);
      s.yhat_sq += yhat * yhat;
      s.yhat_dot_ya += yhat * ya[i];
      s.max_abs_out = std::max(s.max_abs_out, std::fabs(ey[i]));
    }
    if (p.kind == SparsityPattern::Kind::none) none_err = s.out_err_sq;
    row.mean_act_qsnr_db = row.act_qsnr_db();
    row.mean_out_qsnr_db = row.out_qsnr_db();
    result.rows.push_back(std::move(row));
  }
  // The no-residual baseline, for the recovered fraction (computed here if
  // `none` was not among the patterns).
  if (std::isnan(none_err)) {
    none_err = 0;
    for (size_t i = 0; i < e.size(); ++i) e[i] = double(qx.data[i]) - xd[i];
    for (double v : output_error(e)) none_err += v * v;
  }
  for (ResqRow& r : result.rows) r.sums.none_out_err_sq = none_err;
  return result;
}

}  // namespace fp4emu::analysis
