// `fp4emu underflow DUMP --out DIR`: how many nonzero activations each format
// flushes to zero, per tensor, block, token and channel (docs/analysis.md §2),
// with summary and detail heatmaps.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "distributed.hpp"
#include "pictures.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "report_pages.hpp"
#include "study.hpp"
#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/analysis/heatmap.hpp"
#include "fp4emu/analysis/resq.hpp"
#include "fp4emu/analysis/underflow.hpp"
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

struct Args {
  StudyFlags study;
  std::vector<std::string> transforms;
  std::string weights;
  int64_t n = 256;
  uint64_t seed = 0;
  UnderflowOptions uf;
  std::string detail = "auto";
  int detail_rows = 256;
  std::string color_range = "auto", color_scale = "linear";
  std::string out;
  std::string report;
  uint64_t split_above = dist::kDefaultSplitAbove;
};

struct Run {  // one recipe x transform
  const Recipe* recipe;
  TransformSpec transform;
  std::string transform_text;
};

struct Result {
  size_t run, tensor;
  TensorRole role;
  UnderflowStats s;
};

constexpr const char* kColumns =
    "file,tensor,layer,kind,proj,phase,step,m,d,format,recipe,transform,block,n,n_nonzero,n_underflow,"
    "underflow_ratio,zero_ratio_after,n_blocks,blocks_with_underflow_ratio,mean_block_ur,p99_block_ur,max_block_ur,"
    "outlier_block_ratio_abs,outlier_block_ratio_rel,outlier_block_ratio_uf,saturation_ratio,crest_mean,max_abs,rms,"
    "qsnr_db,rel_l2,cosine,rounding,random_bits";

std::string meta(const Dump& d, size_t tensor, const char* key) {
  const auto& m = d.metadata(tensor);
  const auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

ordered_json hist_json(const std::map<int, int64_t>& h) {
  ordered_json a = ordered_json::array();
  for (auto [e, c] : h) a.push_back({e, c});
  return a;
}

ordered_json ranked_json(const std::vector<RankedIndex>& v) {
  ordered_json a = ordered_json::array();
  for (const RankedIndex& r : v) a.push_back({{"index", r.index}, {"ur", r.ur}, {"nonzero", r.nonzero}});
  return a;
}

ordered_json vec_json(const std::vector<double>& v) {
  ordered_json a = ordered_json::array();
  for (double x : v) a.push_back(json_number(x));
  return a;
}

std::string panel_title(const Run& r) {
  return fmt::format("{} ({}), transform {}", format_name(r.recipe->format), r.recipe->id, r.transform_text);
}

// The detail map of one tensor: token bins x channel-block bins, UR_B pooled
// over each bin (flushed / nonzero).
HeatmapPanel detail_panel(const UnderflowStats& s, const Run& r, int max_rows) {
  const int64_t blocks = (s.cols + s.block - 1) / s.block;
  const int64_t rbin = (s.rows + max_rows - 1) / max_rows, cbin = (blocks + 511) / 512;
  HeatmapPanel p;
  p.title = panel_title(r) + fmt::format(": UR per block of {}", s.block);
  p.rows = int((s.rows + rbin - 1) / rbin);
  p.cols = int((blocks + cbin - 1) / cbin);
  p.row_step = double(rbin), p.col_step = double(cbin);
  p.x_label = cbin == 1 ? fmt::format("channel block (d / {})", s.block)
                        : fmt::format("channel block (d / {}, {} per cell)", s.block, cbin);
  p.y_label = rbin == 1 ? "token" : fmt::format("token ({} per row)", rbin);
  std::vector<int64_t> nz(size_t(p.rows) * p.cols, 0), fl(nz.size(), 0);
  for (int64_t t = 0; t < s.rows; ++t)
    for (int64_t b = 0; b < blocks; ++b) {
      const size_t cell = size_t(t / rbin) * p.cols + size_t(b / cbin);
      nz[cell] += s.block_nonzero[t * blocks + b];
      fl[cell] += s.block_flushed[t * blocks + b];
    }
  p.values.resize(nz.size());
  for (size_t i = 0; i < nz.size(); ++i) p.values[i] = nz[i] ? double(fl[i]) / nz[i] : std::nan("");
  return p;
}

// What a run writes, gathered before anything is written (a failed run
// leaves no partial report).
struct Outputs {
  std::string csv = std::string(kColumns) + "\n";
  ordered_json json;
  ImageFormats images;
  ColorScale color;
  std::optional<io::RgbImage> summary_png, detail_png;  // drawn whatever --image-format (--report shows them)
  std::string summary_svg, detail_svg;                  // drawn when --image-format asks for SVG
  std::string summary_csv = "format,recipe,transform,kind,layer,n_nonzero,n_underflow,underflow_ratio\n";
  std::string detail_csv = "recipe,transform,token_start,token_end,block_start,block_end,underflow_ratio\n";
};

ordered_json stats_json(const UnderflowStats& s) {
  ordered_json j;
  j["m"] = s.rows, j["d"] = s.cols;
  j["block"] = s.block, j["n"] = s.n, j["n_nonfinite"] = s.n_nonfinite, j["n_nonzero"] = s.n_nonzero;
  j["n_underflow"] = s.n_underflow, j["underflow_ratio"] = s.underflow_ratio;
  j["n_zero_after"] = s.n_zero_after, j["zero_ratio_after"] = s.zero_ratio_after;
  j["n_blocks"] = s.n_blocks, j["n_blocks_nonzero"] = s.n_blocks_nonzero;
  j["blocks_with_underflow_ratio"] = s.blocks_with_underflow_ratio;
  j["mean_block_ur"] = s.mean_block_ur, j["p99_block_ur"] = s.p99_block_ur, j["max_block_ur"] = s.max_block_ur;
  j["outlier_block_ratio_abs"] = s.outlier_block_ratio_abs;
  j["outlier_block_ratio_rel"] = s.outlier_block_ratio_rel;
  j["outlier_block_ratio_uf"] = s.outlier_block_ratio_uf;
  j["n_saturated"] = s.n_saturated ? ordered_json(*s.n_saturated) : ordered_json(nullptr);
  j["saturation_ratio"] = s.saturation_ratio ? json_number(*s.saturation_ratio) : ordered_json(nullptr);
  j["crest"] = {{"mean", s.crest_mean}, {"median", s.crest_median}, {"q3", s.crest_q3}, {"max", s.crest_max}};
  j["max_abs"] = s.max_abs, j["rms"] = s.rms, j["qsnr_db"] = json_number(s.qsnr_db), j["rel_l2"] = s.rel_l2;
  j["cosine"] = s.cosine;
  j["top_tokens"] = ranked_json(s.top_tokens), j["top_channels"] = ranked_json(s.top_channels);
  j["token_ur"] = vec_json(s.token_ur), j["channel_ur"] = vec_json(s.channel_ur);
  j["log2_hist_all"] = hist_json(s.log2_hist_all), j["log2_hist_underflow"] = hist_json(s.log2_hist_underflow);
  return j;
}

// summary.csv and the report's "tensors": one row per tensor x run.
void write_tables(const Study& study, const std::vector<Run>& runs, const Dump& dump, const std::vector<Result>& results,
                  const std::vector<std::string>& weight_sources, Outputs& out) {
  ordered_json jt = ordered_json::array();
  for (const Result& res : results) {
    const Run& r = runs[res.run];
    const UnderflowStats& s = res.s;
    const std::string& name = dump.name(res.tensor);
    out.csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
        csv_text(dump.file(res.tensor).filename().string()), csv_text(name),
        res.role.layer < 0 ? "" : std::to_string(res.role.layer), res.role.kind, res.role.proj,
        csv_text(meta(dump, res.tensor, "phase")), csv_text(meta(dump, res.tensor, "step")), s.rows, s.cols,
        format_name(r.recipe->format), r.recipe->id, csv_text(r.transform_text), s.block, s.n, s.n_nonzero,
        s.n_underflow, csv_number(s.underflow_ratio), csv_number(s.zero_ratio_after), s.n_blocks,
        csv_number(s.blocks_with_underflow_ratio), csv_number(s.mean_block_ur), csv_number(s.p99_block_ur),
        csv_number(s.max_block_ur), csv_number(s.outlier_block_ratio_abs), csv_number(s.outlier_block_ratio_rel),
        csv_number(s.outlier_block_ratio_uf), s.saturation_ratio ? csv_number(*s.saturation_ratio) : "",
        csv_number(s.crest_mean), csv_number(s.max_abs), csv_number(s.rms), csv_number(s.qsnr_db),
        csv_number(s.rel_l2), csv_number(s.cosine), rounding_csv(study.rounding, *r.recipe, study.stochastic));
    ordered_json j;
    j["tensor"] = name;
    j["file"] = dump.file(res.tensor).string();
    j["shape"] = dump.info(res.tensor).shape;  // rank >= 3: studied as m = product of all axes but the last
    j["layer"] = res.role.layer < 0 ? ordered_json(nullptr) : ordered_json(res.role.layer);
    j["kind"] = res.role.kind;
    j["proj"] = res.role.proj;
    j["format"] = format_name(r.recipe->format), j["recipe"] = r.recipe->id, j["transform"] = r.transform_text;
    j.update(stats_json(s));
    if (!weight_sources[res.tensor].empty() && r.transform.kind == TransformSpec::Kind::smoothquant)
      j["smoothquant_weights"] = weight_sources[res.tensor];
    jt.push_back(std::move(j));
  }
  out.json["tensors"] = std::move(jt);
}

// The table on stdout, and the report's "pooled": counts summed over the
// tensors of a run, then the ratio.
void print_and_pool(const std::vector<Run>& runs, const Dump& dump, const std::vector<Result>& results,
                    Outputs& out) {
  ordered_json pooled = ordered_json::array();
  fmt::print("{}\n", inputs_line(dump));
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    int64_t nz = 0, fl = 0, n = 0, z = 0, blocks = 0, bw = 0;
    fmt::print("\n{}\n  {:<48} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8}\n", panel_title(runs[ri]), "tensor", "UR %",
               "ZR %", "blk>0 %", "out.abs", "out.rel", "out.uf", "QSNR dB");
    for (const Result& res : results) {
      if (res.run != ri) continue;
      const UnderflowStats& s = res.s;
      nz += s.n_nonzero, fl += s.n_underflow, n += s.n, z += s.n_zero_after, blocks += s.n_blocks;
      bw += std::llround(s.blocks_with_underflow_ratio * double(s.n_blocks));
      std::string name = dump.name(res.tensor);
      if (name.size() > 48) name = "..." + name.substr(name.size() - 45);
      fmt::print("  {:<48} {:>8.2f} {:>8.2f} {:>9.2f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.2f}\n", name,
                 100 * s.underflow_ratio, 100 * s.zero_ratio_after, 100 * s.blocks_with_underflow_ratio,
                 s.outlier_block_ratio_abs, s.outlier_block_ratio_rel, s.outlier_block_ratio_uf, s.qsnr_db);
    }
    const double ur = nz ? double(fl) / nz : 0.0, zr = n ? double(z) / n : 0.0;
    fmt::print("  {:<48} {:>8.2f} {:>8.2f}\n", "(pooled)", 100 * ur, 100 * zr);
    pooled.push_back({{"format", format_name(runs[ri].recipe->format)},
                      {"recipe", runs[ri].recipe->id},
                      {"transform", runs[ri].transform_text},
                      {"n", n},
                      {"n_nonzero", nz},
                      {"n_underflow", fl},
                      {"underflow_ratio", ur},
                      {"zero_ratio_after", zr},
                      {"n_blocks", blocks},
                      {"blocks_with_underflow_ratio", blocks ? double(bw) / blocks : 0.0}});
  }
  out.json["pooled"] = std::move(pooled);
}

std::string inputs_title(const Dump& dump) {
  const auto& files = dump.set().files();
  return files.size() == 1 ? files[0].filename().string() : fmt::format("{} files", files.size());
}

// UR by layer and tensor kind, one panel per run: every tensor with a layer
// index and kind, whatever its rank (rows = all axes but the last).
void summary_heatmap(const std::vector<Run>& runs, const Dump& dump, const std::vector<Result>& results,
                     Outputs& out) {
  int max_layer = -1;
  for (const Result& res : results)
    if (!res.role.kind.empty()) max_layer = std::max(max_layer, res.role.layer);
  ordered_json summary_json = ordered_json::array();
  if (max_layer < 0) {
    fmt::print("\nno tensor name carries a layer index and kind (e.g. model.layers.3.mlp.down_proj.input): "
               "no summary heatmap\n");
    out.json["heatmaps"]["summary"] = std::move(summary_json);
    return;
  }
  const std::span<const std::string_view> kinds = tensor_kinds();
  HeatmapFigure fig;
  fig.title = "Underflow ratio by layer and tensor";
  fig.subtitle = fmt::format("{} | UR = nonzero inputs flushed to zero; grey = no tensor", inputs_title(dump));
  fig.colorbar_label = "underflow ratio (UR)";
  fig.color = out.color;
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    HeatmapPanel p;
    p.title = panel_title(runs[ri]);
    p.rows = int(kinds.size()), p.cols = max_layer + 1;
    for (std::string_view k : kinds) p.row_labels.emplace_back(k);
    p.x_label = "layer", p.y_label = "tensor";
    std::vector<int64_t> nz(size_t(p.rows) * p.cols, 0), fl(nz.size(), 0);
    std::vector<uint8_t> seen(nz.size(), 0);
    for (const Result& res : results) {
      if (res.run != ri || res.role.kind.empty() || res.role.layer < 0) continue;
      const size_t k = std::find(kinds.begin(), kinds.end(), res.role.kind) - kinds.begin();
      const size_t cell = k * p.cols + res.role.layer;
      nz[cell] += res.s.n_nonzero, fl[cell] += res.s.n_underflow, seen[cell] = 1;
    }
    ordered_json matrix = ordered_json::array();
    for (int k = 0; k < p.rows; ++k) {
      ordered_json row = ordered_json::array();
      for (int l = 0; l < p.cols; ++l) {
        const size_t cell = size_t(k) * p.cols + l;
        const double v = !seen[cell] ? std::nan("") : nz[cell] ? double(fl[cell]) / nz[cell] : 0.0;
        p.values.push_back(v);
        row.push_back(json_number(v));
        if (seen[cell])
          out.summary_csv += fmt::format("{},{},{},{},{},{},{},{}\n", format_name(runs[ri].recipe->format),
                                         runs[ri].recipe->id, csv_text(runs[ri].transform_text), kinds[k], l,
                                         nz[cell], fl[cell], csv_number(v));
      }
      matrix.push_back(std::move(row));
    }
    summary_json.push_back({{"recipe", runs[ri].recipe->id},
                            {"transform", runs[ri].transform_text},
                            {"rows", kinds},
                            {"layers", p.cols},
                            {"ur", std::move(matrix)}});
    fig.panels.push_back(std::move(p));
  }
  Picture picture = draw_picture(fig, out.images);
  out.summary_png = std::move(picture.png), out.summary_svg = std::move(picture.svg);
  out.json["heatmaps"]["summary"] = std::move(summary_json);
}

// UR_B of one tensor (--detail, or the highest UR under the first run).
void detail_heatmap(const Args& a, const std::vector<Run>& runs, const Dump& dump, const std::vector<Result>& results,
                    std::optional<size_t> detail_index, Outputs& out) {
  if (a.detail == "auto" && !results.empty()) {
    const Result* best = nullptr;
    for (const Result& res : results)
      if (res.run == 0 && (!best || res.s.underflow_ratio > best->s.underflow_ratio)) best = &res;
    detail_index = best->tensor;
  }
  out.json["heatmaps"]["detail_tensor"] = detail_index ? ordered_json(dump.name(*detail_index)) : ordered_json(nullptr);
  if (!detail_index) return;
  HeatmapFigure fig;
  fig.title = "Underflow per block: " + dump.name(*detail_index);
  fig.subtitle = dump.file(*detail_index).filename().string() +
                 " | UR_B = nonzero inputs of the block flushed to zero; grey = no nonzero input";
  fig.colorbar_label = "block underflow ratio (UR_B)";
  fig.color = out.color;
  for (const Result& res : results) {
    if (res.tensor != *detail_index) continue;
    HeatmapPanel p = detail_panel(res.s, runs[res.run], a.detail_rows);
    for (int r = 0; r < p.rows; ++r)
      for (int c = 0; c < p.cols; ++c) {
        const int64_t t0 = int64_t(r * p.row_step), b0 = int64_t(c * p.col_step);
        const int64_t blocks = (res.s.cols + res.s.block - 1) / res.s.block;
        out.detail_csv += fmt::format("{},{},{},{},{},{},{}\n", runs[res.run].recipe->id,
                                      csv_text(runs[res.run].transform_text), t0,
                                      std::min<int64_t>(res.s.rows, t0 + int64_t(p.row_step)), b0,
                                      std::min<int64_t>(blocks, b0 + int64_t(p.col_step)),
                                      csv_number(p.values[size_t(r) * p.cols + c]));
      }
    fig.panels.push_back(std::move(p));
  }
  Picture picture = draw_picture(fig, out.images);
  out.detail_png = std::move(picture.png), out.detail_svg = std::move(picture.svg);
}

// The report's header: tool, inputs, runs, options, definitions.
ordered_json report_json(const Args& a, const Study& study, const std::vector<Run>& runs, const Dump& dump) {
  ordered_json root;
  root["tool"] = {{"name", "fp4emu underflow"}, {"version", kVersion}};
  root["input"] = inputs_json(dump);
  root["aliases"] = dump.aliases();
  ordered_json rj = ordered_json::array();
  for (const Run& r : runs)
    rj.push_back({{"format", format_name(r.recipe->format)},
                  {"recipe", r.recipe->id},
                  {"block", block_size(r.recipe->format)},
                  {"rounding", std::string(to_string(study.rounding.value_or(r.recipe->element_rounding)))},
                  {"transform", r.transform_text}});
  root["runs"] = rj;
  root["options"] = {{"tau_abs", a.uf.tau_abs}, {"tau_rel", a.uf.tau_rel}, {"tau_uf", a.uf.tau_uf},
                     {"seed", a.seed},          {"synthetic_n", a.n},
                     {"rounding", rounding_json(study.rounding, study.stochastic)}};
  root["definitions"] = {
      {"underflow_ratio", "nonzero finite inputs x with Q(x) = 0, over nonzero finite inputs (of the quantized "
                          "operand, after any transform)"},
      {"zero_ratio_after", "Q(x) = 0 over finite inputs"},
      {"block_ur", "UR inside one block along d; mean/p99/max over blocks with a nonzero input"},
      {"outlier_rules", "abs: block holds |x| >= tau_abs; rel: amax_B >= tau_rel * median amax_B (over every block, "
                        "all-zero ones included); uf: UR_B >= tau_uf (over blocks with a nonzero input)"},
      {"crest", "amax_B / rms_B over blocks with rms_B > 0 (all-zero blocks have no crest)"},
      {"saturation_ratio", "inputs quantized to the largest element code with |x| above its value"},
      {"qsnr_db", "10 log10(sum x^2 / sum (x - x^)^2), x^ the reconstruction mapped back to the input's domain"},
      {"rows", "a tensor of rank >= 3 is studied as rows x d, rows the product of all axes but the last"},
      {"duplicates", "a tensor bit-identical to an earlier one is studied once; `aliases` names the copies"}};
  return root;
}

void write_outputs(const std::string& dir, const Outputs& o) {
  make_out_dir(dir);
  const std::filesystem::path out(dir);
  write_text(out / "summary.csv", o.csv);
  write_text(out / "summary.json", o.json.dump(1) + "\n");
  std::vector<std::string> written = {"summary.csv", "summary.json"};
  if (o.summary_png) {
    write_picture(out, "summary_heatmap", {*o.summary_png, o.summary_svg}, o.images, written);
    write_text(out / "summary_heatmap.csv", o.summary_csv);
    written.push_back("summary_heatmap.csv");
  }
  if (o.detail_png) {
    write_picture(out, "detail_heatmap", {*o.detail_png, o.detail_svg}, o.images, written);
    write_text(out / "detail_heatmap.csv", o.detail_csv);
    written.push_back("detail_heatmap.csv");
  }
  fmt::print("\nwrote {}/{{{}}}\n", dir, fmt::join(written, ", "));
}

// --report: the page of summary.json with the heatmaps inline, written last.
void write_report(const std::string& path, const Outputs& o) {
  std::vector<html::Figure> figures;
  if (o.summary_png)
    figures.push_back(report_figure("Underflow ratio by layer and tensor kind", "summary_heatmap",
                                    {*o.summary_png, o.summary_svg}, o.images));
  if (o.detail_png)
    figures.push_back(report_figure("Underflow per block of " +
                                        o.json.at("heatmaps").at("detail_tensor").get<std::string>(),
                                    "detail_heatmap", {*o.detail_png, o.detail_svg}, o.images));
  html::write_page(path, html::underflow_page(o.json, figures));
  fmt::print("wrote {}\n", path);
}

std::vector<Run> plan_runs(const Study& study, const std::vector<std::string>& transforms) {
  std::vector<Run> runs;
  const std::vector<std::string> ts = transforms.empty() ? std::vector<std::string>{"none"} : transforms;
  for (const Recipe* r : study.recipes)
    for (const std::string& t : ts) {
      const TransformSpec spec = parse_transform(t);
      runs.push_back({r, spec, spec.to_string(block_size(r->format))});
    }
  return runs;
}

// The dumps a study reads besides the activations: SmoothQuant weights and
// calibration dumps (never deduplicated: every weight is stacked).
struct Sources {
  std::optional<Dump> weights;
  std::map<std::string, std::unique_ptr<Dump>> calib;
};

Sources open_sources(const Args& a, const std::vector<Run>& runs) {
  Sources s;
  if (!a.weights.empty()) s.weights.emplace(std::vector<std::string>{a.weights}, std::vector<std::string>{}, false);
  for (const Run& r : runs)
    if (!r.transform.calib.empty() && !s.calib.count(r.transform.calib))
      s.calib[r.transform.calib] =
          std::make_unique<Dump>(std::vector<std::string>{r.transform.calib}, std::vector<std::string>{}, false);
  return s;
}

// Every run on one tensor: read, analysed, released.
std::vector<Result> study_tensor(const Args& a, const Study& study, const std::vector<Run>& runs, const Dump& dump,
                                 const Sources& src, size_t ti, std::string& weight_source) {
  const DumpTensor t = dump.load(ti);
  const MatrixShape ms = as_matrix(t.x);
  std::optional<Tensor> w;
  for (const Run& r : runs) {
    if (r.transform.kind != TransformSpec::Kind::smoothquant || w) continue;
    if (src.weights) {
      w = find_weights(*src.weights, t.name, ms.cols);
      if (!w)
        throw InputError(fmt::format("--weights {}: no weight for tensor {} (expected '<name>.weight' tensors "
                                     "of the same layer and projection)",
                                     io::printable(a.weights), io::printable(t.name)));
      weight_source = a.weights;
    } else {
      weight_source = fmt::format("synthetic N(0,1/d) {}x{} seed {}", a.n, ms.cols, a.seed);
      w = synthetic_weights(a.n, ms.cols, a.seed);
    }
  }
  std::vector<Result> out;
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    const Run& r = runs[ri];
    QuantOptions o = study_quant_options(study, *r.recipe, t.dtype);
    o.threads = 1;  // the tensors are the parallel loop
    std::optional<Tensor> calib;
    if (!r.transform.calib.empty()) {
      const Dump& cd = *src.calib.at(r.transform.calib);
      const auto ci = cd.find(t.name);
      if (!ci)
        throw InputError(fmt::format("SmoothQuant calibration dump {} has no tensor {}", r.transform.calib, t.name));
      DumpTensor c = cd.load(*ci);
      const MatrixShape cs = as_matrix(c.x);
      calib = Tensor{{cs.rows, cs.cols}, std::move(c.x.data)};
    }
    out.push_back({ri, ti, parse_tensor_role(t.name),
                   study_underflow(t.x, o, r.transform, w ? &*w : nullptr, calib ? &*calib : nullptr, a.uf)});
  }
  return out;
}

// One tensor's results and the weights its SmoothQuant runs used.
struct TensorResults {
  std::vector<Result> results;
  std::string weight_source;
};

// Between MPI ranks, field by field (distributed.hpp): one list of the
// fields, visited by encode and by decode.
template <class Stats, class Visit>
void visit_fields(Stats& s, Visit v) {
  v(s.rows), v(s.cols), v(s.block), v(s.n), v(s.n_nonfinite), v(s.n_nonzero), v(s.n_underflow), v(s.n_zero_after);
  v(s.underflow_ratio), v(s.zero_ratio_after), v(s.n_blocks), v(s.n_blocks_nonzero), v(s.blocks_with_underflow_ratio);
  v(s.mean_block_ur), v(s.p99_block_ur), v(s.max_block_ur), v(s.outlier_block_ratio_abs);
  v(s.outlier_block_ratio_rel), v(s.outlier_block_ratio_uf), v(s.n_saturated), v(s.saturation_ratio);
  v(s.crest_mean), v(s.crest_median), v(s.crest_q3), v(s.crest_max), v(s.max_abs), v(s.rms), v(s.qsnr_db);
  v(s.rel_l2), v(s.cosine), v(s.token_ur), v(s.channel_ur), v(s.top_tokens), v(s.top_channels);
  v(s.block_nonzero), v(s.block_flushed), v(s.log2_hist_all), v(s.log2_hist_underflow);
}

void encode(dist::Writer& w, const UnderflowStats& s) {
  visit_fields(s, [&w](const auto& field) { w.put(field); });
}

void decode(dist::Reader& r, UnderflowStats& s) {
  visit_fields(s, [&r](auto& field) { r.get(field); });
}

void encode(dist::Writer& w, const TensorResults& t) {
  w.put(t.weight_source), w.put<uint64_t>(t.results.size());
  for (const Result& res : t.results) {
    w.put(res.run), w.put(res.tensor), w.put(res.role.layer), w.put(res.role.kind), w.put(res.role.proj);
    encode(w, res.s);
  }
}

void decode(dist::Reader& r, TensorResults& t) {
  r.get(t.weight_source);
  t.results.resize(r.get<uint64_t>());
  for (Result& res : t.results) {
    r.get(res.run), r.get(res.tensor), r.get(res.role.layer), r.get(res.role.kind), r.get(res.role.proj);
    decode(r, res.s);
  }
}

template <class Parts, class Visit>
void visit_parts(Parts& p, Visit v) {
  v(p.rows), v(p.cols), v(p.block), v(p.n), v(p.n_nonfinite), v(p.n_nonzero), v(p.n_underflow), v(p.n_zero_after);
  v(p.n_sat), v(p.has_saturation), v(p.sum_sq), v(p.err_sq), v(p.orig_sq), v(p.rec_sq), v(p.dot), v(p.max_abs);
  v(p.tok_nz), v(p.tok_fl), v(p.ch_nz), v(p.ch_fl), v(p.block_amax), v(p.block_crest), v(p.block_nonzero);
  v(p.block_flushed), v(p.log2_hist_all), v(p.log2_hist_underflow);
}

// One item of the row plan: a whole tensor's results, or the per-run parts of
// a row piece of a split tensor (merged and finished on rank 0).
struct PieceResults {
  TensorResults whole;
  std::vector<UnderflowParts> parts;
};

void encode(dist::Writer& w, const PieceResults& p) {
  encode(w, p.whole);
  w.put<uint64_t>(p.parts.size());
  for (const UnderflowParts& part : p.parts) visit_parts(part, [&w](const auto& field) { w.put(field); });
}

void decode(dist::Reader& r, PieceResults& p) {
  decode(r, p.whole);
  p.parts.resize(r.get<uint64_t>());
  for (UnderflowParts& part : p.parts) visit_parts(part, [&r](auto& field) { r.get(field); });
}

// Every tensor's rows for dist::plan_rows: split when every run's operand row
// depends on its own row only (transform none or rht) and the rounding is
// not stochastic (its random bits follow the element index).
std::vector<dist::RowShape> row_shapes(const Study& study, const std::vector<Run>& runs, const Dump& dump) {
  bool splittable = study.rounding != Rounding::stochastic;
  for (const Run& r : runs) splittable = splittable && row_local(r.transform);
  std::vector<dist::RowShape> shapes;
  for (size_t i = 0; i < dump.size(); ++i) {
    const io::TensorInfo& t = dump.info(i);
    shapes.push_back(dist::row_shape(t.shape, io::dtype_size(t.dtype), splittable));
  }
  return shapes;
}

// The NVFP4 runs' per-tensor amax of each split tensor's operand: the first
// phase of a split tensor (dist::first_phase). A tensor whose amax the
// quantizer refuses is re-planned whole.
dist::TensorValues operand_amaxes(const Args& a, const Study& study, const std::vector<Run>& runs, const Dump& dump,
                                  std::vector<dist::RowShape>& shapes, dist::RowPlan& plan) {
  bool nvfp4 = false;
  for (const Run& r : runs) nvfp4 = nvfp4 || r.recipe->format == Format::nvfp4;
  return dist::first_phase(
      nvfp4, runs.size(), shapes, plan, a.split_above,
      [&](const dist::Piece& p) {
        const DumpTensor t = dump.load_rows(p.tensor, p.row_begin, p.row_end);
        std::vector<std::optional<float>> v;
        for (const Run& r : runs) {
          QuantOptions o = study_quant_options(study, *r.recipe, t.dtype);
          o.threads = study.threads;
          v.push_back(r.recipe->format == Format::nvfp4
                          ? piece_amax(*r.recipe, underflow_operand(t.x, o, r.transform, nullptr, nullptr).data)
                          : std::nullopt);
        }
        return v;
      },
      [&](size_t ri, std::span<const float> amaxes) { return *piece_amax(*runs[ri].recipe, amaxes); },
      [&](size_t ri, float amax) { return usable_global_amax(*runs[ri].recipe, amax); });
}

// Every run on rows of a split tensor, up to the parts.
std::vector<UnderflowParts> study_piece(const Study& study, const std::vector<Run>& runs, const Dump& dump,
                                        const dist::Piece& p, const std::vector<std::optional<float>>& amaxes) {
  const DumpTensor t = dump.load_rows(p.tensor, p.row_begin, p.row_end);
  std::vector<UnderflowParts> parts;
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    QuantOptions o = study_quant_options(study, *runs[ri].recipe, t.dtype);
    o.threads = 1;  // the pieces are the parallel loop
    if (runs[ri].recipe->format == Format::nvfp4) o.global_amax = amaxes[ri];
    parts.push_back(study_underflow_parts(t.x, o, runs[ri].transform, nullptr, nullptr));
  }
  return parts;
}

// The given items of the plan (whole tensors and row pieces), in parallel;
// each has its own slot, so nothing depends on the thread count.
std::vector<PieceResults> study_pieces(const Args& a, const Study& study, const std::vector<Run>& runs,
                                       const Dump& dump, const Sources& src, const dist::RowPlan& plan,
                                       const std::vector<std::vector<std::optional<float>>>& amaxes,
                                       const std::vector<size_t>& items) {
  std::vector<PieceResults> per(items.size());
  double total = 0;
  for (size_t k : items) total += double(plan.pieces[k].bytes);
  Progress progress("underflow", a.study.progress, total);
  double done = 0;
  size_t finished = 0;
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(study.threads)
  for (size_t k = 0; k < items.size(); ++k) {
    const dist::Piece& p = plan.pieces[items[k]];
    try {
      const bool split = plan.split(p.tensor);
      if (split) {
        per[k].parts = study_piece(study, runs, dump, p, amaxes[p.tensor]);
      } else {
        per[k].whole.results = study_tensor(a, study, runs, dump, src, p.tensor, per[k].whole.weight_source);
      }
#pragma omp critical(fp4emu_underflow_progress)
      {
        done += double(p.bytes);
        progress.line(done, fmt::format("{} {}/{} {}{} ({} runs)", split ? "piece" : "tensor", ++finished,
                                        items.size(), dump.name(p.tensor),
                                        split ? fmt::format(" rows {}..{}", p.row_begin, p.row_end) : "",
                                        runs.size()));
      }
    } catch (...) {
#pragma omp critical(fp4emu_underflow_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return per;
}

// All tensors, spread over the ranks of an MPI job (all here when alone),
// tensors above --split-rows-above as row pieces; on rank 0 in tensor-major,
// run-minor order whatever the ranks and threads.
std::vector<Result> study_all(const Args& a, const Study& study, const std::vector<Run>& runs, const Dump& dump,
                              const Sources& src, std::vector<std::string>& weight_sources) {
  std::vector<dist::RowShape> shapes = row_shapes(study, runs, dump);
  dist::RowPlan plan = dist::plan_rows(shapes, a.split_above);
  const auto amaxes = operand_amaxes(a, study, runs, dump, shapes, plan);
  fmt::print("{}", plan.note(a.split_above));
  std::fflush(stdout);
  std::vector<PieceResults> per = dist::map_items<PieceResults>(
      plan.costs(),
      [&](const std::vector<size_t>& items) { return study_pieces(a, study, runs, dump, src, plan, amaxes, items); },
      [](dist::Writer& w, const PieceResults& p) { encode(w, p); },
      [](dist::Reader& r, PieceResults& p) { decode(r, p); });
  std::vector<Result> results;
  if (!dist::is_root()) return results;
  for (size_t t = 0; t < dump.size(); ++t) {
    if (!plan.split(t)) {
      TensorResults& whole = per[plan.first[t]].whole;
      weight_sources.push_back(std::move(whole.weight_source));
      for (Result& x : whole.results) results.push_back(std::move(x));
      continue;
    }
    weight_sources.emplace_back();  // no SmoothQuant run: a split tensor has no weights
    for (size_t ri = 0; ri < runs.size(); ++ri) {
      UnderflowParts merged = per[plan.first[t]].parts[ri];
      for (size_t k = plan.first[t] + 1; k < plan.first[t + 1]; ++k) merged.merge(per[k].parts[ri]);
      results.push_back({ri, t, parse_tensor_role(dump.name(t)), finish_underflow(merged, a.uf)});
    }
  }
  return results;
}

int run(const Args& a) {
  const Study study = resolve_study(a.study);
  const std::vector<Run> runs = plan_runs(study, a.transforms);
  if (a.n < 1) throw InputError("--n must be at least 1");
  if (a.detail_rows < 1) throw InputError("--detail-rows must be at least 1");
  const ColorScale color = parse_color_scale(a.color_range, a.color_scale);  // checked before any work

  const Dump dump(a.study.inputs, a.study.tensors);
  const Sources sources = open_sources(a, runs);
  html::check_report_path(a.report, dump.set().files());
  std::optional<size_t> detail_index;
  if (a.detail != "auto" && a.detail != "none") {
    detail_index = dump.find(a.detail);
    if (!detail_index)
      throw InputError(fmt::format("--detail {}: no such tensor among the selected ones of {} (use a full tensor "
                                   "name, auto or none)",
                                   io::printable(a.detail), io::printable(dump.label())));
  }
  std::vector<std::string> weight_sources;
  const std::vector<Result> results = study_all(a, study, runs, dump, sources, weight_sources);
  if (!dist::is_root()) return 0;  // rank 0 prints and writes the reports

  Outputs out;
  out.images = study.images, out.color = color;
  out.json = report_json(a, study, runs, dump);
  write_tables(study, runs, dump, results, weight_sources, out);
  print_and_pool(runs, dump, results, out);
  summary_heatmap(runs, dump, results, out);
  detail_heatmap(a, runs, dump, results, detail_index, out);
  write_outputs(a.out, out);
  if (!a.report.empty()) write_report(a.report, out);
  return 0;
}

}  // namespace

void add_underflow(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("underflow", "Underflow study: nonzero activations flushed to zero, per tensor, "
                                               "block, token and channel, with heatmaps (docs/analysis.md §2)");
  add_study_flags(cmd, args->study);
  add_list_option(cmd, "--transform", args->transforms,
                  "none | rht[:b=N,seed=S,signs=seeded|te] | smoothquant[:alpha=A,calib=DUMP] | occ[:q=Q] "
                  "(repeatable: one panel per format x transform)",
                  false);
  cmd->add_option("--weights", args->weights, "Weights dump for SmoothQuant (default: seeded synthetic weights)");
  cmd->add_option("--n", args->n, "Rows of the synthetic weights")
      ->default_val(256)
      ->check(integer_in(1, std::numeric_limits<int64_t>::max()));
  cmd->add_option("--seed", args->seed, "Seed of the synthetic weights")->default_val(0)->check(any_seed());
  // A threshold on |x| or on a ratio of amaxes: any finite value >= 0; UR_B is a
  // fraction, so its threshold lies in [0, 1].
  const double max = std::numeric_limits<double>::max();
  cmd->add_option("--tau-abs", args->uf.tau_abs, "Outlier rule (a): block holds |x| >= this")
      ->default_val(6.0)
      ->check(real_in({0, max}));
  cmd->add_option("--tau-rel", args->uf.tau_rel, "Outlier rule (b): amax_B >= this x median amax_B")
      ->default_val(8.0)
      ->check(real_in({0, max}));
  cmd->add_option("--tau-uf", args->uf.tau_uf, "Outlier rule (c): UR_B >= this (a fraction, 0..1)")
      ->default_val(0.5)
      ->check(real_in({0, 1}));
  cmd->add_option("--detail", args->detail, "Tensor for the detail heatmap; auto (highest UR) or none")
      ->default_val("auto");
  cmd->add_option("--detail-rows", args->detail_rows, "Token bins of the detail heatmap at most")
      ->default_val(256)
      ->check(integer_in(1, 1 << 16));
  add_color_options(cmd, args->color_range, args->color_scale);
  cmd->add_option("--out,-o", args->out, "Output directory")->required();
  html::add_report_option(cmd, args->report);
  add_split_rows_option(cmd, args->split_above);
  cmd->footer("Example: fp4emu underflow dump/ --tensor 'model.layers.*.mlp.down_proj.input' --progress always "
              "--format mxfp4,nvfp4 --transform none --transform rht --out uf/");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
