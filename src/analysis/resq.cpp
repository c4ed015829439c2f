// Rollout-ResQ residual study (resq.hpp, docs/analysis.md §3.1, §3.3, §3.4).
#include "fp4emu/analysis/resq.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#if FP4EMU_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "fp4emu/analysis/gemm_f64.hpp"
#include "fp4emu/analysis/sizes.hpp"
#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/array.hpp"
#include "fp4emu/threads.hpp"
#include "src/analysis/chunks.hpp"
#include "src/gemm/models.hpp"

namespace fp4emu::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kFp4OverFp16 = 4.0;  // r4: FP4 tensor-core throughput over FP16 (docs/analysis.md §3.4)

double qsnr(double nmse) {
  return nmse == 0 ? std::numeric_limits<double>::infinity() : -10.0 * std::log10(nmse);
}
double div0(double a, double b) { return b == 0 ? 0.0 : a / b; }

std::vector<double> widen(std::span<const float> v) { return {v.begin(), v.end()}; }

// sum of v[i]^2.
template <class T>
double energy(std::span<const T> v, int threads) {
  double s = 0;
  for (double p : chunk_parts<double>(int64_t(v.size()), threads, [&](int64_t b, int64_t e) {
         double t = 0;
         for (int64_t i = b; i < e; ++i) t += double(v[i]) * double(v[i]);
         return t;
       }))
    s += p;
  return s;
}

// The buffers of one tensor's study, kept from pattern to pattern and recipe
// to recipe: a gate/up tensor's m x n products are tens of megabytes, and a
// fresh allocation is paid again in page faults and zeroing.
struct Buffers {
  std::vector<double> y, ya;  // X W^T, X Q(W)^T (m x n)
  std::vector<double> e;      // E = X^ - X (m x d), for the f64 output GEMM
  std::vector<float> ef, c;   // E in fp32 and E Q(W)^T in fp32, for the fast one
  std::vector<double> ey;     // E Q(W)^T in double (f64)
  Tensor qw, dx, rq, qx;
};

// The output-error product E Q(W)^T of the E last written into the buffers.
// Returns the product's element i as a double.
void output_error(Buffers& buf, const std::vector<float>& qw, int64_t m, int64_t d, int64_t n, int threads,
                  ResqGemm gemm) {
  if (gemm == ResqGemm::f64) {
    buf.ey.resize(size_t(m * n));
    gemm_abt_f64(buf.e, qw, m, d, n, threads, buf.ey);
  } else {
    // Q(W) is an fp32 tensor; E rounds to fp32 (it is a difference of fp32
    // values, exact in fp32 unless its operands' exponents are far apart).
    buf.c.resize(size_t(m * n));
#if FP4EMU_HAVE_OPENBLAS
    if (m <= INT_MAX && n <= INT_MAX && d <= INT_MAX) {
      // The columns of C in fixed slices, one single-threaded sgemm each on
      // OpenMP's threads: OpenBLAS's own pool and OpenMP's busy-wait after
      // their work (src/gemm/gemm.cpp), and here, where the two alternate
      // per pattern, both pools would be awake on the same cores. OpenBLAS
      // divides C among its threads the same way, never the sums over d, so
      // the slices give the same bits as one call (the reports of the study
      // dump are byte-identical either way).
      constexpr int64_t kSlice = 512;
      const int before = openblas_get_num_threads();
      openblas_set_num_threads(1);  // process-wide: set once around the slices
#pragma omp parallel for schedule(dynamic, 1) num_threads(thread_count(threads))
      for (int64_t j0 = 0; j0 < n; j0 += kSlice)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(std::min(kSlice, n - j0)), int(d), 1.0f,
                    buf.ef.data(), int(d), qw.data() + j0 * d, int(d), 0.0f, buf.c.data() + j0, int(n));
      openblas_set_num_threads(before);
      return;
    }
#endif
    gemm_detail::fast_gemm(buf.ef.data(), qw.data(), m, n, d, thread_count(threads), buf.c.data());
  }
}

// Stores E's element i where the output GEMM reads it.
inline void store_e(Buffers& buf, ResqGemm gemm, int64_t i, double e) {
  if (gemm == ResqGemm::f64) buf.e[size_t(i)] = e;
  else buf.ef[size_t(i)] = float(e);
}

// Partial sums over one chunk of the m x n outputs.
struct OutputPart {
  double out_err_sq = 0, out_err_y_sq = 0, yhat_sq = 0, yhat_dot_ya = 0, max_abs_out = 0;
};

// Partial sums over one chunk of the m x d elements of a pattern.
struct ElementPart {
  double act_err_sq = 0, drop_res = 0, drop_prim = 0;
  int64_t kept = 0;
};

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
  // One allocation for the stack (a gate/up weight is hundreds of megabytes).
  int64_t stacked = 0;
  for (size_t i : picked) {
    const std::vector<int64_t>& shape = weights.info(i).shape;
    if (shape.size() == 2 && shape[1] == d) stacked += shape[0] * d;
  }
  w.data.reserve(size_t(stacked));
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

std::vector<ResqTensorResult> study_resq(const std::string& name, const TensorRef& x_in, const Tensor& w_in,
                                         const std::vector<QuantOptions>& recipes, const TransformSpec& transform,
                                         const Tensor* calib, const std::vector<SparsityPattern>& patterns,
                                         const ResqOptions& opt) {
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
  // Working set: the weights in fp32 (given, transformed, quantized); two
  // m x n products in double and one in fp32 (or a third in double for the
  // f64 output GEMM).
  checked_bytes({n, d, 3 * 4}, fmt::format("resq on tensor {}: weights of {} x {}", name, n, d),
                "choose fewer weight rows (--n)");
  checked_bytes({m, n, 3 * 8}, fmt::format("resq on tensor {}: outputs of {} x {}", name, m, n),
                "choose fewer weight rows (--n) or fewer tokens");
  const TensorRef x2{{m, d}, x_in.data};  // the same values, as a matrix
  const bool none = transform.kind == TransformSpec::Kind::none;
  const int64_t md = m * d, mn = m * n;

  Buffers buf;
  buf.e.resize(opt.gemm == ResqGemm::f64 ? size_t(md) : 0);
  buf.ef.resize(opt.gemm == ResqGemm::fast ? size_t(md) : 0);
  // A random mask does not look at the values: one per pattern for the
  // residual, the primary and every recipe.
  std::vector<std::vector<uint8_t>> random_masks(patterns.size());
  auto random_mask = [&](size_t pi) -> const std::vector<uint8_t>& {
    if (random_masks[pi].empty()) random_masks[pi] = sparsity_mask(patterns[pi], x_in.data, m, d);
    return random_masks[pi];
  };
  // Without a transform X and W are the recipes' common operands, and Y =
  // X W^T one product for all of them.
  bool y_ready = false;
  double x_sq = 0, y_sq = 0;
  std::vector<double> xd;

  std::vector<ResqTensorResult> results;
  for (const QuantOptions& options : recipes) {
    QuantOptions o = options;
    o.axis = -1;
    const int threads = options.threads;
    const int block = block_size(resolve_options(o, x2.shape).recipe->format);
    const PreparedTransform t(transform, block, x2, &w_in, calib);
    const Tensor transformed = none ? Tensor{} : t.operand(x2);
    const TensorRef x = none ? x2 : TensorRef(transformed);  // x_in itself is not copied
    const Tensor transformed_w = none ? Tensor{} : t.weights(w_in);
    const Tensor& w = none ? w_in : transformed_w;
    QuantOptions ow = o;
    ow.input_dtype = InputDType::f32;
    if (!none) o.input_dtype = InputDType::f32;

    if (!y_ready) {
      for (float v : x.data)
        if (!std::isfinite(v))
          throw InputError(fmt::format("resq: tensor {} holds NaN or Inf; the residual study needs finite inputs "
                                       "(select other tensors with --tensor)",
                                       name));
      // References: Y = X W^T.
      xd = widen(x.data);
      buf.y.resize(size_t(mn));
      gemm_abt_f64(xd, w.data, m, d, n, threads, buf.y);
      x_sq = energy<double>(xd, threads);
      y_sq = energy<double>(buf.y, threads);
      y_ready = none;
    }

    // Primary and residual (docs/analysis.md §3).
    ResqTensorResult& result = results.emplace_back();
    const Tensor qx = fake_quant(x, o);
    buf.dx.shape = x.shape;
    buf.dx.data.resize(size_t(md));
    for (int64_t part : chunk_parts<int64_t>(md, threads, [&](int64_t b, int64_t e) {
           int64_t inexact = 0;
           for (int64_t i = b; i < e; ++i) {
             const double r = double(x.data[i]) - double(qx.data[i]);
             buf.dx.data[i] = float(r);
             inexact += double(buf.dx.data[i]) != r;
           }
           return inexact;
         }))
      result.residual_inexact += part;
    const Tensor& dx = buf.dx;
    QuantOptions orr = o;
    orr.input_dtype = InputDType::f32;
    fake_quant(dx, orr, buf.rq);  // fresh block scales (and NVFP4 tensor scale) from dX itself
    const std::vector<float>& rq = buf.rq.data;
    fake_quant(w, ow, buf.qw);
    const std::vector<float>& qw = buf.qw.data;

    // Y_A = X Q(W)^T.
    buf.ya.resize(size_t(mn));
    gemm_abt_f64(xd, qw, m, d, n, threads, buf.ya);
    const double ya_sq = energy<double>(buf.ya, threads);
    const double res_sq = energy<float>(rq, threads), prim_sq = energy<float>(qx.data, threads);
    const std::vector<double>&y = buf.y, &ya = buf.ya;

    // The output sums of the E last multiplied (Y^ - Y_A = E Q(W)^T).
    auto output_sums = [&](ResqSums& s) {
      for (const OutputPart& q : chunk_parts<OutputPart>(mn, threads, [&](int64_t b, int64_t e) {
             OutputPart q;
             for (int64_t i = b; i < e; ++i) {
               const double ey = opt.gemm == ResqGemm::f64 ? buf.ey[i] : double(buf.c[i]);
               const double yhat = ya[i] + ey;
               q.out_err_sq += ey * ey;
               q.out_err_y_sq += (yhat - y[i]) * (yhat - y[i]);
               q.yhat_sq += yhat * yhat;
               q.yhat_dot_ya += yhat * ya[i];
               q.max_abs_out = std::max(q.max_abs_out, std::fabs(ey));
             }
             return q;
           })) {
        s.out_err_sq += q.out_err_sq, s.out_err_y_sq += q.out_err_y_sq;
        s.yhat_sq += q.yhat_sq, s.yhat_dot_ya += q.yhat_dot_ya;
        s.max_abs_out = std::max(s.max_abs_out, q.max_abs_out);
      }
    };

    double none_err = kNaN;
    std::vector<float> pruned_q;  // Q(S(dX)) under sq
    for (size_t pi = 0; pi < patterns.size(); ++pi) {
      const SparsityPattern& p = patterns[pi];
      ResqRow row;
      row.tensor = name;
      row.pattern = p;
      ResqSums& s = row.sums;
      s.x_count = md, s.y_count = mn, s.mdn = double(m) * double(d) * double(n);
      s.x_sq = x_sq, s.y_sq = y_sq, s.ya_sq = ya_sq, s.res_sq = res_sq, s.prim_sq = prim_sq;

      // S(Q(dX)) (qs) or Q(S(dX)) (sq); the Figure-4 measures always compare
      // Q(dX) and Q(X) with their own masks.
      const bool pruning = p.kind != SparsityPattern::Kind::none;
      const bool random = p.kind == SparsityPattern::Kind::random;
      std::vector<uint8_t> own_r, own_p, own_dx;
      if (pruning && !random) {
        own_r = sparsity_mask(p, rq, m, d, threads);
        own_p = sparsity_mask(p, qx.data, m, d, threads);
      }
      const std::vector<uint8_t>& mask_r = random ? random_mask(pi) : own_r;
      const std::vector<uint8_t>& mask_p = random ? random_mask(pi) : own_p;
      const std::vector<uint8_t>* kept_mask = &mask_r;  // the positions the residual keeps
      if (pruning && opt.order == ResqOrder::sq) {
        if (!random) own_dx = sparsity_mask(p, dx.data, m, d, threads);
        const std::vector<uint8_t>& mask_dx = random ? random_mask(pi) : own_dx;
        Tensor pruned{dx.shape, std::vector<float>(size_t(md))};
#pragma omp parallel for schedule(static) num_threads(thread_count(threads))
        for (int64_t i = 0; i < md; ++i) pruned.data[i] = mask_dx[i] ? dx.data[i] : 0.0f;
        pruned_q = fake_quant(pruned, orr).data;
        kept_mask = &mask_dx;
      }
      // E = X^ - X, and the pattern's element sums.
      for (const ElementPart& q : chunk_parts<ElementPart>(md, threads, [&](int64_t b, int64_t e) {
             ElementPart q;
             for (int64_t i = b; i < e; ++i) {
               float kept = 0.0f;
               if (pruning) {
                 kept = opt.order == ResqOrder::qs ? (mask_r[i] ? rq[i] : 0.0f) : pruned_q[i];
                 q.kept += (*kept_mask)[i];
                 // + 0 where kept: the same sum as skipping the element.
                 q.drop_res += mask_r[i] ? 0.0 : double(rq[i]) * double(rq[i]);
                 q.drop_prim += mask_p[i] ? 0.0 : double(qx.data[i]) * double(qx.data[i]);
               }
               const double ei = (double(qx.data[i]) + double(kept)) - xd[i];
               store_e(buf, opt.gemm, i, ei);
               q.act_err_sq += ei * ei;
             }
             return q;
           })) {
        s.act_err_sq += q.act_err_sq, s.drop_res += q.drop_res, s.drop_prim += q.drop_prim;
        s.kept += q.kept;
      }
      output_error(buf, qw, m, d, n, threads, opt.gemm);
      output_sums(s);
      if (!pruning) none_err = s.out_err_sq;
      row.mean_act_qsnr_db = row.act_qsnr_db();
      row.mean_out_qsnr_db = row.out_qsnr_db();
      result.rows.push_back(std::move(row));
    }
    // The no-residual baseline, for the recovered fraction (computed here if
    // `none` was not among the patterns).
    if (std::isnan(none_err)) {
#pragma omp parallel for schedule(static) num_threads(thread_count(threads))
      for (int64_t i = 0; i < md; ++i) store_e(buf, opt.gemm, i, double(qx.data[i]) - xd[i]);
      output_error(buf, qw, m, d, n, threads, opt.gemm);
      ResqSums s;
      output_sums(s);
      none_err = s.out_err_sq;
    }
    for (ResqRow& r : result.rows) r.sums.none_out_err_sq = none_err;
  }
  return results;
}

ResqTensorResult study_resq(const std::string& name, const TensorRef& x, const Tensor& w, const QuantOptions& options,
                            const TransformSpec& transform, const Tensor* calib,
                            const std::vector<SparsityPattern>& patterns, const ResqOptions& opt) {
  return std::move(study_resq(name, x, w, std::vector<QuantOptions>{options}, transform, calib, patterns, opt)[0]);
}

}  // namespace fp4emu::analysis
