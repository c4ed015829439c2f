// Rollout-ResQ residual study (resq.hpp, docs/analysis.md §3.1, §3.3, §3.4).
#include "fp4emu/analysis/resq.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <limits>

#if FP4EMU_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/analysis/gemm_f64.hpp"
#include "fp4emu/analysis/sizes.hpp"
#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/array.hpp"
#include "fp4emu/threads.hpp"
#include "src/analysis/chunks.hpp"
#include "src/io/byte_stream.hpp"
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
    gemm_detail::fast_gemm(buf.ef.data(), qw.data(), m, n, d, thread_count(threads), buf.c.data(), n);
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

namespace {

// ---- what the pieces share (ResqRows::share) ----

// A payload per held piece -> every piece's, decoded.
template <class T, class Put, class Get>
std::vector<T> share_each(const ResqRows& rows, const std::vector<T>& local, Put put, Get get) {
  std::vector<std::string> out;
  for (const T& v : local) {
    io::ByteWriter w;
    put(w, v);
    out.push_back(w.take());
  }
  const std::vector<std::string> all = rows.share(std::move(out));
  if (all.size() + 1 != rows.begin.size()) throw std::logic_error("resq: share() returned another number of pieces");
  std::vector<T> values(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    io::ByteReader r(all[i]);
    get(r, values[i]);
  }
  return values;
}

// NVFP4's per-tensor amax over every piece (`local`: the held pieces'):
// the recipe's own reduction, a max, exact in any order.
float shared_amax(const ResqRows& rows, const Recipe& recipe, const std::vector<float>& local) {
  const std::vector<float> all = share_each<float>(
      rows, local, [](io::ByteWriter& w, float v) { w.put(v); }, [](io::ByteReader& r, float& v) { r.get(v); });
  return *piece_amax(recipe, all);
}

// Mask statistics: norms as they are, histograms by their nonzero bins (a
// tensor's magnitudes fill few of the 65 536).
void put_stats(io::ByteWriter& w, const std::vector<MaskStats>& stats) {
  w.put<uint64_t>(stats.size());
  for (const MaskStats& s : stats) {
    w.put(s.norms);
    w.put<uint64_t>(s.counts.size());
    uint64_t nonzero = 0;
    for (int64_t c : s.counts) nonzero += c != 0;
    w.put(nonzero);
    for (size_t b = 0; b < s.counts.size(); ++b)
      if (s.counts[b] != 0) w.put<uint32_t>(uint32_t(b)), w.put(s.counts[b]);
  }
}

void get_stats(io::ByteReader& r, std::vector<MaskStats>& stats) {
  stats.resize(r.get<uint64_t>());
  for (MaskStats& s : stats) {
    r.get(s.norms);
    s.counts.assign(r.get<uint64_t>(), 0);
    for (uint64_t k = r.get<uint64_t>(); k > 0; --k) {
      const uint32_t b = r.get<uint32_t>();
      r.get(s.counts.at(b));
    }
  }
}

// The tensor the study of one piece reads and keeps from recipe to recipe.
struct Held {
  size_t piece = 0;
  RowRange range;
  TensorRef x{Tensor{}};
  std::vector<double> xd, y;  // X (operand) in double, Y = X W^T
  double x_sq = 0, y_sq = 0;
  Tensor qx, dx, rq;          // per recipe: Q(X), dX = X - Q(X), Q(dX)
  int64_t inexact = 0;
};

// The rankings of one pattern: on Q(dX), on Q(X), and (order sq) on dX.
enum Operand : size_t { kResidual = 0, kPrimary = 1, kDx = 2 };

std::optional<ResqPieceResults> study_pieces(const std::string& name, int64_t d, const ResqRows& rows,
                                             const Tensor& w_in, const std::vector<QuantOptions>& recipes,
                                             const TransformSpec& transform, const Tensor* calib,
                                             const std::vector<SparsityPattern>& patterns, const ResqOptions& opt) {
  if (transform.kind == TransformSpec::Kind::occ)
    throw InputError("resq: --transform occ is not combined with a residual (OCC is itself a compensation); "
                     "use none, rht or smoothquant");
  if (w_in.shape.size() != 2 || w_in.shape[1] != d)
    throw InputError(fmt::format("resq: tensor {} has {} input features but its weight has shape {}; the weight "
                                 "must be n x {}",
                                 name, d, io::shape_string(w_in.shape), d));
  if (rows.begin.size() < 2 || rows.mine.size() != rows.x.size())
    throw std::invalid_argument("study_resq_rows: pieces and held rows do not match");
  const size_t pieces = rows.begin.size() - 1;
  const bool split = pieces > 1;
  const int64_t m = rows.begin.back(), n = w_in.shape[0];
  std::vector<RowRange> ranges;
  for (size_t i = 0; i < pieces; ++i) ranges.push_back({m, d, rows.begin[i], rows.begin[i + 1]});
  std::vector<Held> held(rows.mine.size());
  int64_t held_rows = 0;
  for (size_t h = 0; h < held.size(); ++h) {
    held[h].piece = rows.mine[h];
    held[h].range = ranges.at(rows.mine[h]);
    held[h].x = TensorRef{{held[h].range.end - held[h].range.begin, d}, rows.x[h].data};
    held_rows += held[h].range.end - held[h].range.begin;
  }
  // Working set: the weights in fp32 (given, transformed, quantized); two
  // m x n products in double and one in fp32 (or a third in double for the
  // f64 output GEMM).
  checked_bytes({n, d, 3 * 4}, fmt::format("resq on tensor {}: weights of {} x {}", name, n, d),
                "choose fewer weight rows (--n)");
  checked_bytes({held_rows, n, 3 * 8}, fmt::format("resq on tensor {}: outputs of {} x {}", name, held_rows, n),
                "choose fewer weight rows (--n) or fewer tokens");
  const bool none = transform.kind == TransformSpec::Kind::none;
  const bool sq = opt.order == ResqOrder::sq;

  Buffers buf;
  // A random mask does not look at the values: one per pattern for the
  // residual, the primary and every recipe (the whole tensor's, cut per piece).
  std::vector<std::vector<std::vector<uint8_t>>> random_masks(patterns.size());
  auto random_mask_of = [&](size_t pi, size_t h) -> const std::vector<uint8_t>& {
    if (random_masks[pi].empty()) {
      const std::vector<uint8_t> all = random_mask(patterns[pi], m, d);
      for (const Held& p : held)
        random_masks[pi].emplace_back(all.begin() + p.range.begin * d, all.begin() + p.range.end * d);
    }
    return random_masks[pi][h];
  };
  // Without a transform X and W are the recipes' common operands, and Y =
  // X W^T one product for all of them.
  bool y_ready = false;

  ResqPieceResults results(held.size());
  for (const QuantOptions& options : recipes) {
    QuantOptions o = options;
    o.axis = -1;
    const int threads = options.threads;
    const Recipe& recipe = *resolve_options(o, {m, d}).recipe;
    const int block = block_size(recipe.format);
    const bool nvfp4 = recipe.format == Format::nvfp4;
    // The operands: X (or its transform; RHT works row by row) and W.
    std::vector<Tensor> transformed(held.size());
    Tensor transformed_w;
    for (size_t h = 0; h < held.size(); ++h) {
      const PreparedTransform t(transform, block, held[h].x, &w_in, calib);
      if (!none) transformed[h] = t.operand(held[h].x);
      if (!none && h == 0) transformed_w = t.weights(w_in);
    }
    auto operand = [&](size_t h) { return none ? held[h].x : TensorRef(transformed[h]); };
    const Tensor& w = none ? w_in : transformed_w;
    QuantOptions ow = o;
    ow.input_dtype = InputDType::f32;
    if (!none) o.input_dtype = InputDType::f32;

    if (!y_ready) {
      for (size_t h = 0; h < held.size(); ++h) {
        Held& p = held[h];
        const TensorRef x = operand(h);
        const int64_t mp = p.range.end - p.range.begin;
        for (float v : x.data)
          if (!std::isfinite(v))
            throw InputError(fmt::format("resq: tensor {} holds NaN or Inf; the residual study needs finite inputs "
                                         "(select other tensors with --tensor)",
                                         name));
        // References: Y = X W^T.
        p.xd = widen(x.data);
        p.y.resize(size_t(mp * n));
        gemm_abt_f64(p.xd, w.data, mp, d, n, threads, p.y);
        p.x_sq = energy<double>(p.xd, threads);
        p.y_sq = energy<double>(p.y, threads);
      }
      y_ready = none;
    }

    // Primary and residual (docs/analysis.md §3), NVFP4's per-tensor amaxes
    // over every piece when the tensor is split (one piece: its own).
    QuantOptions ox = o;
    if (split && nvfp4) {
      std::vector<float> local;
      for (size_t h = 0; h < held.size(); ++h) local.push_back(*piece_amax(recipe, operand(h).data));
      ox.global_amax = shared_amax(rows, recipe, local);
    }
    for (size_t h = 0; h < held.size(); ++h) {
      Held& p = held[h];
      const TensorRef x = operand(h);
      const int64_t md = x.numel();
      p.qx = fake_quant(x, ox);
      p.dx.shape = x.shape;
      p.dx.data.resize(size_t(md));
      p.inexact = 0;
      for (int64_t part : chunk_parts<int64_t>(md, threads, [&](int64_t b, int64_t e) {
             int64_t inexact = 0;
             for (int64_t i = b; i < e; ++i) {
               const double r = double(x.data[i]) - double(p.qx.data[i]);
               p.dx.data[i] = float(r);
               inexact += double(p.dx.data[i]) != r;
             }
             return inexact;
           }))
        p.inexact += part;
    }
    QuantOptions orr = o;
    orr.input_dtype = InputDType::f32;
    if (split && nvfp4) {
      std::vector<float> local;
      for (const Held& p : held) local.push_back(*piece_amax(recipe, p.dx.data));
      orr.global_amax = shared_amax(rows, recipe, local);
      if (!usable_global_amax(recipe, *orr.global_amax)) return std::nullopt;
    }
    for (Held& p : held) fake_quant(p.dx, orr, p.rq);  // fresh block scales (and NVFP4 tensor scale) from dX itself
    if (!held.empty()) fake_quant(w, ow, buf.qw);
    const std::vector<float>& qw = buf.qw.data;

    // The patterns' rankings, round by round over every piece (one piece:
    // the whole tensor's ranking).
    const std::vector<size_t> operands = sq ? std::vector<size_t>{kResidual, kPrimary, kDx}
                                            : std::vector<size_t>{kResidual, kPrimary};
    auto values_of = [&](const Held& p, size_t op) -> const std::vector<float>& {
      return op == kResidual ? p.rq.data : op == kPrimary ? p.qx.data : p.dx.data;
    };
    std::vector<std::array<MaskRanking, 3>> ranking(patterns.size());
    int rounds = 0;
    for (const SparsityPattern& p : patterns) rounds = std::max(rounds, ranking_rounds(p));
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::vector<MaskStats>> local(held.size());  // [held][pattern x operand of this round]
      for (size_t h = 0; h < held.size(); ++h)
        for (size_t pi = 0; pi < patterns.size(); ++pi)
          if (round < ranking_rounds(patterns[pi]))
            for (size_t op : operands)
              local[h].push_back(
                  mask_stats(patterns[pi], values_of(held[h], op), held[h].range, ranking[pi][op], round, threads));
      const std::vector<std::vector<MaskStats>> all =
          share_each<std::vector<MaskStats>>(rows, local, put_stats, get_stats);
      size_t at = 0;
      for (size_t pi = 0; pi < patterns.size(); ++pi)
        if (round < ranking_rounds(patterns[pi]))
          for (size_t op : operands) {
            std::vector<MaskStats> per_piece;
            for (const std::vector<MaskStats>& s : all) per_piece.push_back(s.at(at));
            merge_mask_stats(patterns[pi], per_piece, ranges, round, ranking[pi][op]);
            ++at;
          }
    }
    auto mask_of = [&](size_t pi, size_t h, size_t op) {
      if (patterns[pi].kind == SparsityPattern::Kind::random) return random_mask_of(pi, h);
      return piece_mask(patterns[pi], values_of(held[h], op), held[h].range, held[h].piece, ranking[pi][op], threads);
    };
    // Q(S(dX)) under sq: pruned dX quantized afresh, NVFP4's amax over every piece's.
    std::vector<Tensor> pruned_dx;
    auto prune = [&](size_t pi, size_t h) {
      const Held& p = held[h];
      const std::vector<uint8_t> mask = mask_of(pi, h, kDx);
      Tensor pruned{p.dx.shape, std::vector<float>(p.dx.data.size())};
      const int64_t md = int64_t(pruned.data.size());
#pragma omp parallel for schedule(static) num_threads(thread_count(threads))
      for (int64_t i = 0; i < md; ++i) pruned.data[i] = mask[i] ? p.dx.data[i] : 0.0f;
      return pruned;
    };
    std::vector<std::optional<float>> pruned_amax(patterns.size());
    if (sq && split && nvfp4)
      for (size_t pi = 0; pi < patterns.size(); ++pi) {
        if (patterns[pi].kind == SparsityPattern::Kind::none) continue;
        std::vector<float> local;
        for (size_t h = 0; h < held.size(); ++h) local.push_back(*piece_amax(recipe, prune(pi, h).data));
        pruned_amax[pi] = shared_amax(rows, recipe, local);
        if (!usable_global_amax(recipe, *pruned_amax[pi])) return std::nullopt;
      }

    for (size_t h = 0; h < held.size(); ++h) {
      const Held& p = held[h];
      const std::vector<float>& qx = p.qx.data;
      const std::vector<float>& rq = p.rq.data;
      const std::vector<double>& xd = p.xd;
      const int64_t mp = p.range.end - p.range.begin, md = mp * d, mn = mp * n;
      ResqTensorResult& result = results[h].emplace_back();
      result.residual_inexact = p.inexact;
      buf.e.resize(opt.gemm == ResqGemm::f64 ? size_t(md) : 0);
      buf.ef.resize(opt.gemm == ResqGemm::fast ? size_t(md) : 0);

      // Y_A = X Q(W)^T.
      buf.ya.resize(size_t(mn));
      gemm_abt_f64(xd, qw, mp, d, n, threads, buf.ya);
      const double ya_sq = energy<double>(buf.ya, threads);
      const double res_sq = energy<float>(rq, threads), prim_sq = energy<float>(qx, threads);
      const std::vector<double>&y = p.y, &ya = buf.ya;

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
        const SparsityPattern& pat = patterns[pi];
        ResqRow row;
        row.tensor = name;
        row.pattern = pat;
        ResqSums& s = row.sums;
        s.x_count = md, s.y_count = mn, s.mdn = double(mp) * double(d) * double(n);
        s.x_sq = p.x_sq, s.y_sq = p.y_sq, s.ya_sq = ya_sq, s.res_sq = res_sq, s.prim_sq = prim_sq;

        // S(Q(dX)) (qs) or Q(S(dX)) (sq); the Figure-4 measures always compare
        // Q(dX) and Q(X) with their own masks.
        const bool pruning = pat.kind != SparsityPattern::Kind::none;
        std::vector<uint8_t> mask_r, mask_p, mask_dx;
        if (pruning) {
          mask_r = mask_of(pi, h, kResidual);
          mask_p = mask_of(pi, h, kPrimary);
        }
        const std::vector<uint8_t>* kept_mask = &mask_r;  // the positions the residual keeps
        if (pruning && sq) {
          mask_dx = mask_of(pi, h, kDx);
          QuantOptions op = orr;
          op.global_amax = pruned_amax[pi];
          pruned_q = fake_quant(prune(pi, h), op).data;
          kept_mask = &mask_dx;
        }
        // E = X^ - X, and the pattern's element sums.
        for (const ElementPart& q : chunk_parts<ElementPart>(md, threads, [&](int64_t b, int64_t e) {
               ElementPart q;
               for (int64_t i = b; i < e; ++i) {
                 float kept = 0.0f;
                 if (pruning) {
                   kept = !sq ? (mask_r[i] ? rq[i] : 0.0f) : pruned_q[i];
                   q.kept += (*kept_mask)[i];
                   // + 0 where kept: the same sum as skipping the element.
                   q.drop_res += mask_r[i] ? 0.0 : double(rq[i]) * double(rq[i]);
                   q.drop_prim += mask_p[i] ? 0.0 : double(qx[i]) * double(qx[i]);
                 }
                 const double ei = (double(qx[i]) + double(kept)) - xd[i];
                 store_e(buf, opt.gemm, i, ei);
                 q.act_err_sq += ei * ei;
               }
               return q;
             })) {
          s.act_err_sq += q.act_err_sq, s.drop_res += q.drop_res, s.drop_prim += q.drop_prim;
          s.kept += q.kept;
        }
        output_error(buf, qw, mp, d, n, threads, opt.gemm);
        output_sums(s);
        if (!pruning) none_err = s.out_err_sq;
        result.rows.push_back(std::move(row));
      }
      // The no-residual baseline, for the recovered fraction (computed here if
      // `none` was not among the patterns).
      if (std::isnan(none_err)) {
#pragma omp parallel for schedule(static) num_threads(thread_count(threads))
        for (int64_t i = 0; i < md; ++i) store_e(buf, opt.gemm, i, double(qx[i]) - xd[i]);
        output_error(buf, qw, mp, d, n, threads, opt.gemm);
        ResqSums s;
        output_sums(s);
        none_err = s.out_err_sq;
      }
      for (ResqRow& r : result.rows) r.sums.none_out_err_sq = none_err;
    }
  }
  return results;
}

}  // namespace

std::vector<ResqTensorResult> merge_resq_pieces(std::span<const std::vector<ResqTensorResult>> pieces) {
  if (pieces.empty()) throw std::invalid_argument("merge_resq_pieces: no piece");
  std::vector<ResqTensorResult> merged(pieces[0].size());
  for (size_t ri = 0; ri < merged.size(); ++ri) {
    ResqTensorResult& out = merged[ri];
    for (const ResqRow& r : pieces[0][ri].rows) {
      ResqRow& row = out.rows.emplace_back();
      row.tensor = r.tensor, row.pattern = r.pattern;
    }
    for (const std::vector<ResqTensorResult>& piece : pieces) {  // in row order
      const ResqTensorResult& part = piece.at(ri);
      out.residual_inexact += part.residual_inexact;
      for (size_t k = 0; k < out.rows.size(); ++k) out.rows[k].sums.add(part.rows.at(k).sums);
    }
    for (ResqRow& row : out.rows) {
      row.mean_act_qsnr_db = row.act_qsnr_db();
      row.mean_out_qsnr_db = row.out_qsnr_db();
    }
  }
  return merged;
}

std::optional<ResqPieceResults> study_resq_rows(const std::string& name, int64_t d, const ResqRows& rows,
                                                const Tensor& w, const std::vector<QuantOptions>& recipes,
                                                const TransformSpec& transform,
                                                const std::vector<SparsityPattern>& patterns, const ResqOptions& opt) {
  if (transform.kind == TransformSpec::Kind::smoothquant)
    throw std::invalid_argument("study_resq_rows: SmoothQuant's scales span the whole tensor; study it whole");
  for (const QuantOptions& o : recipes)
    if (o.rounding == Rounding::stochastic)
      throw std::invalid_argument("study_resq_rows: stochastic rounding's bits follow the element index");
  return study_pieces(name, d, rows, w, recipes, transform, nullptr, patterns, opt);
}

std::vector<ResqTensorResult> study_resq(const std::string& name, const TensorRef& x_in, const Tensor& w_in,
                                         const std::vector<QuantOptions>& recipes, const TransformSpec& transform,
                                         const Tensor* calib, const std::vector<SparsityPattern>& patterns,
                                         const ResqOptions& opt) {
  const MatrixShape ms = as_matrix(x_in);
  ResqRows whole;
  whole.begin = {0, ms.rows};
  whole.mine = {0};
  whole.x = {TensorRef{{ms.rows, ms.cols}, x_in.data}};  // the same values, as a matrix
  whole.share = [](std::vector<std::string> local) { return local; };
  const ResqPieceResults parts = *study_pieces(name, ms.cols, whole, w_in, recipes, transform, calib, patterns, opt);
  return merge_resq_pieces(parts);
}

ResqTensorResult study_resq(const std::string& name, const TensorRef& x, const Tensor& w, const QuantOptions& options,
                            const TransformSpec& transform, const Tensor* calib,
                            const std::vector<SparsityPattern>& patterns, const ResqOptions& opt) {
  return std::move(study_resq(name, x, w, std::vector<QuantOptions>{options}, transform, calib, patterns, opt)[0]);
}

}  // namespace fp4emu::analysis
