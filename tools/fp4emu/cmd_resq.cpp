// `fp4emu resq DUMP --out DIR`: Rollout-ResQ, the sparsified quantized
// residual, by sparsity pattern (docs/analysis.md §3, §3.4).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "distributed.hpp"
#include "pictures.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "report_pages.hpp"
#include "study.hpp"
#include "fp4emu/analysis/heatmap.hpp"
#include "fp4emu/analysis/resq.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/golden/sha256.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/png.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/version.hpp"

namespace fp4emu::cli {
namespace {

using nlohmann::ordered_json;
using namespace fp4emu::analysis;

constexpr const char* kDefaultPatterns = "none,dense,2:4,4:8,1:4,channel50,block32x64,unstructured50,random50,row50";

struct Args {
  StudyFlags study;
  std::string weights;
  std::vector<std::string> patterns;
  double density = 0.5;
  std::string order = "qs";
  std::string output_gemm = "fast";
  std::string transform = "none";
  int64_t n = 256;
  uint64_t seed = 0;
  std::string out;
  std::string report;
  uint64_t split_above = dist::kDefaultSplitAbove;
};

constexpr const char* kColumns =
    "tensor,format,recipe,transform,pattern,order,m,d,n,kept_density,act_mse,act_nmse,act_qsnr_db,"
    "out_nmse_vs_XQW,out_qsnr_db,out_nmse_vs_XW,cosine_out,max_abs_out,recovered_fraction,drop_res_mse,"
    "drop_res_rmse,drop_res_norm,drop_prim_mse,drop_prim_rmse,drop_prim_norm,sparse_speedup,"
    "cost_fp16eq_over_mdn,speedup_vs_fp16,tensors,mean_act_qsnr_db,mean_out_qsnr_db";

struct Shape {
  int64_t m = 0, d = 0, n = 0;
};

std::string csv_row(const ResqRow& r, const Recipe& recipe, const std::string& transform, const std::string& order,
                    const Shape& sh, const Study& study) {
  const bool pooled = r.tensors > 1 || r.tensor == "(pooled)";
  return fmt::format(
      "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
      csv_text(r.tensor), format_name(recipe.format), recipe.id, csv_text(transform), r.pattern.name, order,
      pooled ? "" : std::to_string(sh.m), pooled ? "" : std::to_string(sh.d), pooled ? "" : std::to_string(sh.n),
      csv_number(r.kept_density()), csv_number(r.act_mse()), csv_number(r.act_nmse()), csv_number(r.act_qsnr_db()), csv_number(r.out_nmse_vs_xqw()),
      csv_number(r.out_qsnr_db()), csv_number(r.out_nmse_vs_xw()), csv_number(r.cosine_out()), csv_number(r.sums.max_abs_out),
      csv_number(r.recovered_fraction()), csv_number(r.drop_res_mse()), csv_number(r.drop_res_rmse()), csv_number(r.drop_res_norm()),
      csv_number(r.drop_prim_mse()), csv_number(r.drop_prim_rmse()), csv_number(r.drop_prim_norm()), csv_number(sparse_speedup(r.pattern)),
      csv_number(cost_over_mdn(r.pattern)), csv_number(speedup_vs_fp16(r.pattern)), r.tensors, csv_number(r.mean_act_qsnr_db),
      csv_number(r.mean_out_qsnr_db), rounding_csv(study.rounding, recipe, study.stochastic));
}

ordered_json row_json(const ResqRow& r) {
  return {{"tensor", r.tensor},
          {"pattern", r.pattern.name},
          {"tensors", r.tensors},
          {"kept_density", r.kept_density()},
          {"act_mse", json_number(r.act_mse())},
          {"act_nmse", json_number(r.act_nmse())},
          {"act_qsnr_db", json_number(r.act_qsnr_db())},
          {"out_nmse_vs_XQW", json_number(r.out_nmse_vs_xqw())},
          {"out_qsnr_db", json_number(r.out_qsnr_db())},
          {"out_nmse_vs_XW", json_number(r.out_nmse_vs_xw())},
          {"cosine_out", json_number(r.cosine_out())},
          {"max_abs_out", json_number(r.sums.max_abs_out)},
          {"recovered_fraction", json_number(r.recovered_fraction())},
          {"drop_res_mse", json_number(r.drop_res_mse())},
          {"drop_res_rmse", json_number(r.drop_res_rmse())},
          {"drop_res_norm", json_number(r.drop_res_norm())},
          {"drop_prim_mse", json_number(r.drop_prim_mse())},
          {"drop_prim_rmse", json_number(r.drop_prim_rmse())},
          {"drop_prim_norm", json_number(r.drop_prim_norm())},
          {"sparse_speedup", sparse_speedup(r.pattern)},
          {"cost_fp16eq_over_mdn", cost_over_mdn(r.pattern)},
          {"speedup_vs_fp16", speedup_vs_fp16(r.pattern)},
          {"mean_act_qsnr_db", json_number(r.mean_act_qsnr_db)},
          {"mean_out_qsnr_db", json_number(r.mean_out_qsnr_db)}};
}

std::vector<SparsityPattern> plan_patterns(const Args& a) {
  std::vector<std::string> names = a.patterns;
  if (names.empty()) {
    std::string_view rest = kDefaultPatterns;
    while (!rest.empty()) {
      const size_t c = rest.find(',');
      names.emplace_back(rest.substr(0, c));
      rest = c == std::string_view::npos ? std::string_view{} : rest.substr(c + 1);
    }
  }
  std::vector<SparsityPattern> patterns;
  for (const std::string& p : names) {
    patterns.push_back(parse_pattern(p, a.density, a.seed));
    for (size_t k = 0; k + 1 < patterns.size(); ++k)
      if (patterns[k].name == patterns.back().name)
        throw InputError(fmt::format("--pattern names {} twice ('{}' and '{}'); name each pattern once",
                                     patterns.back().name, names[k], p));
  }
  return patterns;
}

ResqOptions plan_options(const Args& a) {
  ResqOptions opt;
  if (a.order == "qs") opt.order = ResqOrder::qs;
  else if (a.order == "sq") opt.order = ResqOrder::sq;
  else throw InputError(fmt::format("--order '{}' is unknown; use qs (S(Q(dX)), the paper's) or sq (Q(S(dX)))", a.order));
  if (a.output_gemm == "fast") opt.gemm = ResqGemm::fast;
  else if (a.output_gemm == "f64") opt.gemm = ResqGemm::f64;
  else
    throw InputError(fmt::format("--output-gemm '{}' is unknown; use fast (fp32 sgemm) or f64 (double, the same bits "
                                 "on every machine)",
                                 io::printable(a.output_gemm, 40)));
  return opt;
}

struct PerRecipe {
  std::vector<ResqRow> rows;    // per tensor, pattern-major within a tensor
  std::vector<ResqRow> pooled;  // one per pattern
  int64_t inexact = 0;
};

struct Results {
  std::vector<PerRecipe> per;  // one per recipe
  std::vector<Shape> shapes;   // one per tensor
};

// The weights that read tensor t: from --weights, else seeded synthetic ones.
Tensor weights_for(const Args& a, const std::optional<Dump>& weights, const DumpTensor& t, int64_t d) {
  if (!weights) return synthetic_weights(a.n, d, a.seed);
  std::optional<Tensor> w = find_weights(*weights, t.name, d);
  if (!w)
    throw InputError(fmt::format("--weights {}: no weight for tensor {} (expected '<name>.weight' tensors of "
                                 "the same layer and projection, n x {})",
                                 io::printable(a.weights), io::printable(t.name), d));
  return std::move(*w);
}

// The recipes' options for a tensor of `dtype`, with the study's threads.
std::vector<QuantOptions> recipe_options(const Study& study, InputDType dtype) {
  std::vector<QuantOptions> recipes;
  for (const Recipe* recipe : study.recipes) {
    recipes.push_back(study_quant_options(study, *recipe, dtype));
    recipes.back().threads = study.threads;
  }
  return recipes;
}

// One tensor under every recipe: its shape, and per recipe its rows and
// residual count.
struct TensorResq {
  Shape shape;
  std::vector<ResqTensorResult> per_recipe;
};

// Tensors one after another (read, studied under every recipe, released);
// the threads work inside each tensor (quantizers and GEMMs), so memory stays
// that of one tensor and its weights.
std::vector<TensorResq> study_tensors(const Args& a, const Study& study, const Dump& dump,
                                      const std::optional<Dump>& weights, const std::vector<SparsityPattern>& patterns,
                                      const TransformSpec& transform, const ResqOptions& opt,
                                      const std::vector<size_t>& items) {
  std::optional<Dump> calib;
  if (!transform.calib.empty()) calib.emplace(std::vector<std::string>{transform.calib}, std::vector<std::string>{}, false);
  std::vector<TensorResq> out;
  double total = 0, done = 0;
  for (size_t ti : items) total += double(dump.bytes(ti));
  Progress progress("resq", a.study.progress, total);
  for (size_t k = 0; k < items.size(); ++k) {
    const size_t ti = items[k];
    const DumpTensor t = dump.load(ti);
    const MatrixShape ms = as_matrix(t.x);
    const Tensor w = weights_for(a, weights, t, ms.cols);
    TensorResq& tr = out.emplace_back();
    tr.shape = {ms.rows, ms.cols, w.shape[0]};
    std::optional<Tensor> calib_x;
    if (calib) {
      const auto ci = calib->find(t.name);
      if (!ci) throw InputError(fmt::format("SmoothQuant calibration dump {} has no tensor {}", transform.calib, t.name));
      DumpTensor c = calib->load(*ci);
      const MatrixShape cs = as_matrix(c.x);
      calib_x = Tensor{{cs.rows, cs.cols}, std::move(c.x.data)};
    }
    tr.per_recipe = study_resq(t.name, t.x, w, recipe_options(study, t.dtype), transform,
                               calib_x ? &*calib_x : nullptr, patterns, opt);
    done += double(dump.bytes(ti));
    progress.line(done, fmt::format("tensor {}/{} {} ({} x {}, n = {})", k + 1, items.size(), t.name, ms.rows,
                                    ms.cols, w.shape[0]));
  }
  return out;
}

// Between MPI ranks (distributed.hpp): a row's pattern is patterns[k] by position.
void encode(dist::Writer& w, const TensorResq& t) {
  w.put(t.shape);
  for (const ResqTensorResult& r : t.per_recipe) {
    w.put(r.residual_inexact);
    for (const ResqRow& row : r.rows)
      w.put(row.tensor), w.put(row.sums), w.put(row.tensors), w.put(row.mean_act_qsnr_db), w.put(row.mean_out_qsnr_db);
  }
}

void decode(dist::Reader& r, TensorResq& t, size_t recipes, const std::vector<SparsityPattern>& patterns) {
  r.get(t.shape);
  t.per_recipe.resize(recipes);
  for (ResqTensorResult& res : t.per_recipe) {
    r.get(res.residual_inexact);
    res.rows.resize(patterns.size());
    for (size_t k = 0; k < patterns.size(); ++k) {
      ResqRow& row = res.rows[k];
      row.pattern = patterns[k];
      r.get(row.tensor), r.get(row.sums), r.get(row.tensors), r.get(row.mean_act_qsnr_db), r.get(row.mean_out_qsnr_db);
    }
  }
}

// Every tensor's rows for dist::plan_rows: split when the operand's rows
// depend on their own rows only (transform none or rht; SmoothQuant's scales
// are statistics of the whole X) and the rounding is not stochastic (its
// random bits follow the element index).
std::vector<dist::RowShape> row_shapes(const Study& study, const TransformSpec& transform, const Dump& dump) {
  const bool splittable = study.rounding != Rounding::stochastic && row_local(transform);
  std::vector<dist::RowShape> shapes;
  for (size_t i = 0; i < dump.size(); ++i) {
    const io::TensorInfo& t = dump.info(i);
    shapes.push_back(dist::row_shape(t.shape, io::dtype_size(t.dtype), splittable));
  }
  return shapes;
}

// A tensor above --split-rows-above: its row pieces spread over the ranks
// (dist::assign, as map_items does), every rank studying its own at the same
// time and exchanging what spans the tensor (study_resq_rows); rank 0 merges
// the pieces in row order. nullopt on every rank when the tensor must be
// studied whole (a residual amax the quantizer refuses as given).
std::optional<TensorResq> study_split(const Args& a, const Study& study, const Dump& dump,
                                      const std::optional<Dump>& weights, const std::vector<SparsityPattern>& patterns,
                                      const TransformSpec& transform, const ResqOptions& opt, size_t ti,
                                      std::span<const dist::Piece> pieces) {
  std::vector<uint64_t> costs;
  for (const dist::Piece& p : pieces) costs.push_back(p.bytes);
  const std::vector<int64_t>& shape = dump.info(ti).shape;
  const int64_t d = shape.back(), m = pieces.back().row_end;
  bool whole = false;
  const std::vector<TensorResq> parts = dist::map_items<TensorResq>(
      costs,
      [&](const std::vector<size_t>& items) {
        Progress progress("resq", a.study.progress, 0.0);
        ResqRows rows;
        for (const dist::Piece& p : pieces) rows.begin.push_back(p.row_begin);
        rows.begin.push_back(m);
        rows.mine = items;
        std::vector<DumpTensor> held;
        for (size_t k : items) {
          held.push_back(dump.load_rows(ti, pieces[k].row_begin, pieces[k].row_end));
          rows.x.emplace_back(held.back().x);
        }
        rows.share = [&](std::vector<std::string> local) { return dist::exchange(costs, std::move(local)); };
        const InputDType dtype = dump.load_rows(ti, 0, 0).dtype;  // no rows: the header's dtype
        const Tensor w = weights_for(a, weights, DumpTensor{dump.name(ti), {}, dtype}, d);
        std::optional<ResqPieceResults> got =
            study_resq_rows(dump.name(ti), d, rows, w, recipe_options(study, dtype), transform, patterns, opt);
        std::vector<TensorResq> out(items.size());
        if (!got) {
          whole = true;
          return out;
        }
        for (size_t k = 0; k < items.size(); ++k) {
          out[k].shape = {pieces[items[k]].row_end - pieces[items[k]].row_begin, d, w.shape[0]};
          out[k].per_recipe = std::move((*got)[k]);
        }
        progress.line(0.0, fmt::format("tensor {} ({} x {}, n = {}): {} of its {} row pieces", dump.name(ti), m, d,
                                       w.shape[0], items.size(), pieces.size()));
        return out;
      },
      [](dist::Writer& w, const TensorResq& t) { encode(w, t); },
      [&](dist::Reader& r, TensorResq& t) { decode(r, t, study.recipes.size(), patterns); });
  if (whole) return std::nullopt;
  TensorResq merged;
  if (!dist::is_root()) return merged;
  std::vector<std::vector<ResqTensorResult>> per_piece;  // in row order
  for (const TensorResq& p : parts) per_piece.push_back(p.per_recipe);
  merged.shape = {m, d, parts[0].shape.n};
  merged.per_recipe = merge_resq_pieces(per_piece);
  return merged;
}

// Every tensor, spread over the ranks of an MPI job (all here when alone),
// tensors above --split-rows-above as row pieces; on rank 0 in tensor order,
// per recipe, whatever the ranks.
Results study_all(const Args& a, const Study& study, const Dump& dump, const std::optional<Dump>& weights,
                  const std::vector<SparsityPattern>& patterns, const TransformSpec& transform, const ResqOptions& opt) {
  std::vector<dist::RowShape> shapes = row_shapes(study, transform, dump);
  dist::RowPlan plan = dist::plan_rows(shapes, a.split_above);
  std::vector<TensorResq> tensors(dump.size());
  for (size_t t = 0; t < dump.size(); ++t) {
    if (!plan.split(t)) continue;
    std::optional<TensorResq> r = study_split(a, study, dump, weights, patterns, transform, opt, t, plan.of(t));
    if (r) tensors[t] = std::move(*r);
    else shapes[t].splittable = false;  // alike on every rank
  }
  plan = dist::plan_rows(shapes, a.split_above);
  std::vector<size_t> whole;  // the tensors studied whole, in tensor order
  std::vector<uint64_t> costs;
  for (size_t t = 0; t < dump.size(); ++t)
    if (!plan.split(t)) whole.push_back(t), costs.push_back(dump.bytes(t));
  std::vector<TensorResq> studied = dist::map_items<TensorResq>(
      costs,
      [&](const std::vector<size_t>& items) {
        std::vector<size_t> indices;
        for (size_t k : items) indices.push_back(whole[k]);
        return study_tensors(a, study, dump, weights, patterns, transform, opt, indices);
      },
      [](dist::Writer& w, const TensorResq& t) { encode(w, t); },
      [&](dist::Reader& r, TensorResq& t) { decode(r, t, study.recipes.size(), patterns); });
  for (size_t k = 0; k < whole.size(); ++k) tensors[whole[k]] = std::move(studied[k]);
  fmt::print("{}", plan.note(a.split_above));
  Results res;
  res.per.resize(study.recipes.size());
  for (const TensorResq& t : tensors) {
    res.shapes.push_back(t.shape);
    for (size_t ri = 0; ri < t.per_recipe.size(); ++ri) {
      res.per[ri].inexact += t.per_recipe[ri].residual_inexact;
      for (const ResqRow& row : t.per_recipe[ri].rows) res.per[ri].rows.push_back(row);
    }
  }
  return res;
}

// Pooled rows: sums added over tensors in tensor order; the per-tensor dB averaged.
void pool(std::vector<PerRecipe>& per, const std::vector<SparsityPattern>& patterns) {
  for (PerRecipe& pr : per)
    for (size_t pi = 0; pi < patterns.size(); ++pi) {
      ResqRow pooled;
      pooled.tensor = "(pooled)";
      pooled.pattern = patterns[pi];
      pooled.tensors = 0;
      pooled.mean_act_qsnr_db = pooled.mean_out_qsnr_db = 0;
      for (size_t k = pi; k < pr.rows.size(); k += patterns.size()) {
        pooled.sums.add(pr.rows[k].sums);
        pooled.mean_act_qsnr_db += pr.rows[k].act_qsnr_db();
        pooled.mean_out_qsnr_db += pr.rows[k].out_qsnr_db();
        ++pooled.tensors;
      }
      pooled.mean_act_qsnr_db /= pooled.tensors;
      pooled.mean_out_qsnr_db /= pooled.tensors;
      pr.pooled.push_back(std::move(pooled));
    }
}

// A deletion measure on stdout: "-" where it does not apply (`none`).
std::string drop_text(double v) { return std::isnan(v) ? "-" : fmt::format("{:.4g}", v); }

void print_table(const Recipe& recipe, const std::string& ttext, const std::string& order, const PerRecipe& pr,
                 size_t tensors) {
  fmt::print("\n{} ({}), transform {}, order {}: pooled over {} tensor(s)\n", format_name(recipe.format), recipe.id,
             ttext, order, tensors);
  fmt::print("  {:<16} {:>6} {:>9} {:>9} {:>9} {:>12} {:>12} {:>8}\n", "pattern", "kept", "act dB", "out dB",
             "recovered", "D_res mse", "D_prim mse", "speedup");
  for (const ResqRow& r : pr.pooled)
    fmt::print("  {:<16} {:>6.3f} {:>9.2f} {:>9.2f} {:>9.4f} {:>12} {:>12} {:>7.2f}x\n", r.pattern.name,
               r.kept_density(), r.act_qsnr_db(), r.out_qsnr_db(), r.recovered_fraction(), drop_text(r.drop_res_mse()),
               drop_text(r.drop_prim_mse()), speedup_vs_fp16(r.pattern));
}

// A recipe's chart and the stem of its files (resq_<recipe id>).
struct Chart {
  std::string stem;
  Picture picture;
};

Chart chart(const Recipe& recipe, const std::string& ttext, const std::string& order, const PerRecipe& pr,
            const Dump& dump, ImageFormats images) {
  BarChart chart;
  chart.title = fmt::format("Rollout-ResQ residual by sparsity pattern: {} ({})", format_name(recipe.format), recipe.id);
  const auto& files = dump.set().files();
  chart.subtitle = fmt::format("{}: {} tensor(s), pooled; transform {}, order {}. Below each pattern: speed-up vs "
                               "FP16 (cost model)",
                               files.size() == 1 ? files[0].filename().string() : fmt::format("{} files", files.size()),
                               dump.size(), ttext, order);
  chart.y_label = "QSNR (dB), higher is better";
  BarSeries act{"activation QSNR: X^ vs X", {}}, out{"output QSNR: X^ Q(W)^T vs X Q(W)^T", {}};
  for (const ResqRow& r : pr.pooled) {
    chart.categories.push_back(r.pattern.name);
    chart.notes.push_back(fmt::format("{:.2f}x", speedup_vs_fp16(r.pattern)));
    act.values.push_back(r.act_qsnr_db());
    out.values.push_back(r.out_qsnr_db());
  }
  chart.series = {act, out};
  std::string stem = "resq_" + std::string(recipe.id);
  std::replace(stem.begin(), stem.end(), '.', '_');
  return {std::move(stem), draw_picture(chart, images)};
}

ordered_json report_header(const Args& a, const Study& study, const Dump& dump, const std::optional<Dump>& weights) {
  ordered_json root;
  root["tool"] = {{"name", "fp4emu resq"}, {"version", kVersion}};
  root["input"] = inputs_json(dump);
  root["weights"] = weights ? inputs_json(*weights)
                            : ordered_json({{"synthetic", "N(0, 1/d)"}, {"n", a.n}, {"seed", a.seed}});
  root["aliases"] = dump.aliases();
  root["options"] = {{"order", a.order}, {"output_gemm", a.output_gemm}, {"density", a.density}, {"seed", a.seed},
                     {"rounding", rounding_json(study.rounding, study.stochastic)},
                     {"residual_scales", "recompute"}, {"tie", "lowest-index"}};
  root["cost_model"] = {
      {"formula", "C / (m d n) = (2 / r4) (1 + rho / r_s), r4 = 4, rho = 1 with a residual GEMM (0 for none)"},
      {"r_s", "2 for 2:4 and 4:8; 1/density for channel, row and block; 1 otherwise"},
      {"not_modelled", "the quantize, residual and gather passes"}};
  root["not_applicable"] = "drop_* fields of the `none` pattern (nothing is pruned): null in JSON, empty in CSV";
  return root;
}

// --report: the page of resq.json with each recipe's chart inline, written last.
void write_report(const std::string& path, const ordered_json& root, const std::vector<Chart>& charts,
                  ImageFormats images) {
  std::vector<html::Figure> figures;
  for (const Chart& c : charts)
    figures.push_back(report_figure("Activation and output QSNR by sparsity pattern", c.stem, c.picture, images));
  html::write_page(path, html::resq_page(root, figures));
  fmt::print("wrote {}\n", path);
}

int run(const Args& a) {
  const Study study = resolve_study(a.study);
  const std::vector<SparsityPattern> patterns = plan_patterns(a);
  const ResqOptions opt = plan_options(a);
  const TransformSpec transform = parse_transform(a.transform);
  if (a.n < 1) throw InputError("--n must be at least 1");

  const Dump dump(a.study.inputs, a.study.tensors);
  std::optional<Dump> weights;  // every weight counts (stacked q/k/v): no deduplication
  if (!a.weights.empty()) weights.emplace(std::vector<std::string>{a.weights}, std::vector<std::string>{}, false);
  html::check_report_path(a.report, dump.set().files());
  if (weights) html::check_report_path(a.report, weights->set().files());
  Results res = study_all(a, study, dump, weights, patterns, transform, opt);
  if (!dist::is_root()) return 0;  // rank 0 prints and writes the reports
  pool(res.per, patterns);

  std::string csv_out = std::string(kColumns) + "\n";
  ordered_json root = report_header(a, study, dump, weights);
  ordered_json jr = ordered_json::array();
  std::vector<Chart> charts;
  fmt::print("{}; weights: {}\n", inputs_line(dump),
             a.weights.empty() ? fmt::format("synthetic N(0, 1/d) x {} rows, seed {}", a.n, a.seed) : a.weights);
  for (size_t ri = 0; ri < study.recipes.size(); ++ri) {
    const Recipe& recipe = *study.recipes[ri];
    const PerRecipe& pr = res.per[ri];
    const std::string ttext = transform.to_string(block_size(recipe.format));
    ordered_json tensors_json = ordered_json::array();
    for (size_t k = 0; k < pr.rows.size(); ++k) {
      const Shape& sh = res.shapes[k / patterns.size()];
      csv_out += csv_row(pr.rows[k], recipe, ttext, a.order, sh, study);
      ordered_json j = row_json(pr.rows[k]);
      j["m"] = sh.m, j["d"] = sh.d, j["n"] = sh.n;
      tensors_json.push_back(std::move(j));
    }
    ordered_json pooled_json = ordered_json::array();
    for (const ResqRow& r : pr.pooled) {
      csv_out += csv_row(r, recipe, ttext, a.order, {}, study);
      pooled_json.push_back(row_json(r));
    }
    print_table(recipe, ttext, a.order, pr, dump.size());
    charts.push_back(chart(recipe, ttext, a.order, pr, dump, study.images));
    jr.push_back({{"format", format_name(recipe.format)},
                  {"recipe", recipe.id},
                  {"block", block_size(recipe.format)},
                  {"transform", ttext},
                  {"chart", picture_file(charts.back().stem, study.images)},
                  {"residual_inexact_in_fp32", pr.inexact},
                  {"pooled", pooled_json},
                  {"tensors", tensors_json}});
  }
  root["results"] = jr;

  make_out_dir(a.out);
  const std::filesystem::path outdir(a.out);
  write_text(outdir / "resq.csv", csv_out);
  write_text(outdir / "resq.json", root.dump(1) + "\n");
  std::vector<std::string> written = {"resq.csv", "resq.json"};
  for (const Chart& c : charts) write_picture(outdir, c.stem, c.picture, study.images, written);
  fmt::print("\nwrote {}/{{{}}}\n", a.out, fmt::join(written, ", "));
  if (!a.report.empty()) write_report(a.report, root, charts, study.images);
  return 0;
}

}  // namespace

void add_resq(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("resq", "Rollout-ResQ study: Q(X) + S(Q(X - Q(X))) by sparsity pattern, activation "
                                          "and output errors, deletion measures, cost model (docs/analysis.md §3, §3.4)");
  add_study_flags(cmd, args->study);
  cmd->add_option("--weights,-w", args->weights,
                  "Weights dump ('<layer>.<proj>.weight', n x d): a file, directory, glob or sharded index; "
                  "default: seeded synthetic N(0, 1/d) weights");
  add_list_option(cmd, "--pattern,--patterns,-p", args->patterns,
                  fmt::format("Sparsity patterns (default: {}); also any N:M (N < M <= 16), channelP, rowP, "
                              "unstructuredP, randomP, blockRxC",
                              kDefaultPatterns),
                  true);
  cmd->add_option("--density", args->density, "Kept fraction of patterns without a percent (blockRxC, channel...)")
      ->default_val(0.5)
      ->check(real_in({0, 1, true, true}, "a kept fraction strictly between 0 and 1"));
  cmd->add_option("--order", args->order, "qs: S(Q(dX)) (the paper's) | sq: Q(S(dX))")->default_val("qs");
  cmd->add_option("--output-gemm", args->output_gemm,
                  "The output-error products E Q(W)^T: fast (fp32 operands, the build's sgemm; the last digits may "
                  "differ between machines) | f64 (double, one fixed order: the same bits everywhere, about twice "
                  "the time)")
      ->default_val("fast");
  cmd->add_option("--transform", args->transform,
                  "none | rht[:b=N,seed=S,signs=seeded|te] | smoothquant[:alpha=A,calib=DUMP], applied to X and W")
      ->default_val("none");
  cmd->add_option("--n", args->n, "Rows of the synthetic weights")
      ->default_val(256)
      ->check(integer_in(1, std::numeric_limits<int64_t>::max()));
  cmd->add_option("--seed", args->seed, "Seed of the synthetic weights and of random patterns")
      ->default_val(0)
      ->check(any_seed());
  cmd->add_option("--out,-o", args->out, "Output directory")->required();
  html::add_report_option(cmd, args->report);
  add_split_rows_option(cmd, args->split_above);
  cmd->footer("Example: fp4emu resq dump/ --weights model.safetensors.index.json --format hif4,mxfp4 "
              "--pattern dense,2:4,4:8,channel50 --progress always --out resq/");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
