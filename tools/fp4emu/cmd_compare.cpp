// `fp4emu compare FILE`: how much each format/recipe loses on each tensor of
// an activation dump (docs/analysis.md §5), with totals pooled over tensors.
// Tensors are read one at a time (memory-mapped), so the memory needed is
// that of the largest selected tensor, not of the file.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "distributed.hpp"
#include "report.hpp"
#include "report_pages.hpp"
#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/tensor_file.hpp"
#include "fp4emu/version.hpp"
#include "progress.hpp"
#include "study.hpp"
#include "fp4emu/io/tensor_set.hpp"

namespace fp4emu::cli {
namespace {

using nlohmann::ordered_json;

struct Args {
  StudyFlags study;  // inputs, --tensor, --round and its random bits, --threads, --progress
  std::vector<std::string> formats;  // compare's recipe rules (selected_recipes), not the studies'
  std::vector<std::string> recipes;
  int axis = -1;
  std::string tail;
  bool bf16_bits = false;
  std::string json_out;
  std::string csv_out;
  std::string report_out;
  uint64_t split_above = dist::kDefaultSplitAbove;
};

// ---- recipe selection --------------------------------------------------------

std::vector<const Recipe*> selected_recipes(const Args& a) {
  std::vector<Format> formats;
  for (const std::string& name : a.formats) {
    const auto f = parse_format(name);
    if (!f) throw InputError(fmt::format("--format '{}' is unknown; use hif4, mxfp4 or nvfp4", name));
    formats.push_back(*f);
  }
  const bool all_formats = formats.empty();
  if (all_formats) formats = {Format::hif4, Format::mxfp4, Format::nvfp4};
  auto in_formats = [&](Format f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };

  std::vector<const Recipe*> out;
  auto add = [&](const Recipe* r) {
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  };
  if (a.recipes.empty()) {
    for (Format f : formats) add(&default_recipe(f));
    return out;
  }
  for (const std::string& id : a.recipes) {
    if (id == "all") {
      for (const Recipe& r : all_recipes())
        if (in_formats(r.format)) add(&r);
      continue;
    }
    const Recipe* r = nullptr;
    if (const auto f = parse_format(id)) {
      r = &default_recipe(*f);
    } else if (id.find('.') != std::string::npos) {
      r = find_recipe(id);
    } else {
      // A short id ("rceil") names the recipe of that name in the selected formats.
      for (Format f : formats) {
        const Recipe* c = find_recipe(fmt::format("{}.{}", format_name(f), id));
        if (c && r) throw InputError(fmt::format("--recipe '{}' is ambiguous ({} and {}); give the full id", id, r->id, c->id));
        if (c) r = c;
      }
    }
    if (!r) throw InputError(fmt::format("--recipe '{}' is unknown; `fp4emu formats` lists the recipe ids", id));
    if (!all_formats && !in_formats(r->format))
      throw InputError(fmt::format("--recipe {} belongs to {}, which --format does not select", r->id, format_name(r->format)));
    add(r);
  }
  return out;
}

// ---- number formatting -------------------------------------------------------

std::string db(double v) {
  if (std::isnan(v)) return "-";
  return std::isinf(v) ? "inf" : fmt::format("{:.2f}", v);
}

std::string percent(double v) { return fmt::format("{:.2f}%", 100.0 * v); }

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// ---- per tensor ----------------------------------------------------------------

InputDType input_dtype(io::DType d) {
  return d == io::DType::bf16 ? InputDType::bf16 : d == io::DType::f16 ? InputDType::f16 : InputDType::f32;
}

// Checks everything that can be checked from the header, before any work.
io::DType check_tensor(const io::TensorSet& set, size_t index, const Args& a, std::span<const Recipe* const> recipes,
                       const CompareOptions& options) {
  const io::TensorInfo& t = set.tensors()[index].info;
  const std::string where = fmt::format("'{}': tensor '{}'", set.file_of(index).string(), t.name);
  io::DType dtype = t.dtype;
  if (a.bf16_bits && dtype == io::DType::u16) dtype = io::DType::bf16;
  if (dtype != io::DType::f32 && dtype != io::DType::f16 && dtype != io::DType::bf16)
    throw InputError(fmt::format("{} field 'dtype' is {}: compare reads f32, f16 and bf16 tensors{}; select float "
                                 "tensors with --tensor",
                                 where, io::dtype_name(t.dtype),
                                 t.dtype == io::DType::u16 ? " (u16 holding bf16 bit patterns: add --bf16-bits)" : ""));
  if (t.shape.empty())
    throw InputError(fmt::format("{} field 'shape' is [] (rank 0, a scalar): block quantization needs at least one "
                                 "axis; select other tensors with --tensor",
                                 where));
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.shape[d] == 0)
      throw InputError(fmt::format("{} field 'shape' is {}: dim {} has size 0, nothing to quantize; select other "
                                   "tensors with --tensor",
                                   where, shape_text(t.shape), d));
  try {
    check_compare(t.shape, recipes, options);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} (shape {}): {}", where, shape_text(t.shape), e.what()));
  }
  return dtype;
}

Tensor load(const io::TensorSet& set, size_t index, io::DType dtype) {
  const io::TensorInfo& t = set.tensors()[index].info;
  Tensor x;
  x.shape = t.shape;
  x.data.resize(t.nbytes / io::dtype_size(dtype));
  const io::TensorBytes bytes = set.bytes(index);  // unmapped when it goes out of scope
  io::widen_to_f32(dtype, bytes.bytes(), x.data, fmt::format("{}: tensor '{}'", set.file_of(index).string(), t.name));
  return x;
}

// ---- output --------------------------------------------------------------------

// `qsnr_title` and the width of its column differ between the per-tensor
// table and the pooled one (which adds the mean of the per-tensor dB).
void print_header_row(const char* qsnr_title, size_t qsnr_width) {
  fmt::print("  {:<18} {:>{}} {:>10} {:>9} {:>11} {:>9} {:>8} {:>10} {:>8} {:>21}\n", "recipe", qsnr_title,
             qsnr_width, "NMSE", "cosine", "max |err|", "underflow", "zeros", "saturated", "NaN/Inf", "bias (SE)");
}

void print_row(const Recipe& r, const ErrorStats& s, const std::string& qsnr, size_t qsnr_width) {
  const auto sat = s.saturation_ratio();
  fmt::print("  {:<18} {:>{}} {:>10.3e} {:>9.6f} {:>11.4g} {:>9} {:>8} {:>10} {:>8} {:>21}\n", r.id, qsnr,
             qsnr_width, s.nmse(), s.cosine(), s.max_abs_error, percent(s.underflow_ratio()), percent(s.zero_ratio()),
             sat ? percent(*sat) : std::string("n/a"), s.nonfinite(),
             fmt::format("{:+.2e} ({:.1e})", s.bias(), s.bias_se()));
}

ordered_json metrics_json(const ErrorStats& s, double bits) {
  const auto sat = s.saturation_ratio();
  return {{"n", s.count},
          {"n_nonzero", s.nonzero},
          {"n_underflow", s.flushed},
          {"underflow_ratio", s.underflow_ratio()},
          {"n_zero_after", s.zero_after},
          {"zero_ratio_after", s.zero_ratio()},
          {"n_saturated", s.saturated ? ordered_json(*s.saturated) : ordered_json(nullptr)},
          {"saturation_ratio", sat ? ordered_json(*sat) : ordered_json(nullptr)},
          {"nan_in", s.nan_in},
          {"inf_in", s.inf_in},
          {"nonfinite_out", s.nonfinite_out},
          {"qsnr_db", json_number(s.qsnr_db())},
          {"nmse", json_number(s.nmse())},
          {"rel_l2", json_number(s.rel_l2())},
          {"cosine", s.cosine()},
          {"max_abs_error", s.max_abs_error},
          {"signal_energy", s.signal_energy},
          {"error_energy", s.error_energy},
          {"bits_per_element", bits},
          {"bias", json_number(s.bias())},
          {"bias_se", json_number(s.bias_se())},
          {"error_sum", s.error_sum}};
}

const char* kCsvHeader =
    "scope,file,tensor,dtype,shape,format,recipe,skipped,n,n_nonzero,n_underflow,underflow_ratio,n_zero_after,"
    "zero_ratio_after,n_saturated,saturation_ratio,nan_in,inf_in,nonfinite_out,qsnr_db,mean_qsnr_db,nmse,rel_l2,"
    "cosine,max_abs_error,signal_energy,error_energy,bits_per_element,bias,bias_se,rounding,random_bits\n";

std::string csv_row(const std::string& scope, const std::string& file, const std::string& tensor,
                    const std::string& dtype, const std::string& shape, const Recipe& r, const std::string& skipped,
                    const ErrorStats& s, double mean_db, double bits, const CompareOptions& o) {
  const auto sat = s.saturation_ratio();
  const std::string rounding = rounding_csv(o.rounding, r, o.stochastic);
  if (!skipped.empty()) {
    return fmt::format("{},{},{},{},{},{},{},{}{},{}\n", scope, csv_text(file), csv_text(tensor), dtype, shape,
                       format_name(r.format), r.id, csv_text(skipped), std::string(22, ','), rounding);
  }
  return fmt::format("{},{},{},{},{},{},{},,{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                     scope,
                     csv_text(file), csv_text(tensor), dtype, shape, format_name(r.format), r.id, s.count,
                     s.nonzero, s.flushed, csv_number(s.underflow_ratio()), s.zero_after,
                     csv_number(s.zero_ratio()), s.saturated ? std::to_string(*s.saturated) : "",
                     sat ? csv_number(*sat) : "", s.nan_in, s.inf_in, s.nonfinite_out, csv_number(s.qsnr_db()),
                     csv_number(mean_db), csv_number(s.nmse()), csv_number(s.rel_l2()), csv_number(s.cosine()),
                     csv_number(s.max_abs_error), csv_number(s.signal_energy), csv_number(s.error_energy),
                     csv_number(bits), csv_number(s.bias()), csv_number(s.bias_se()), rounding);
}


// Fails before the work, not after it, when an output cannot be written there
// (by rank 0, which writes the reports).
void check_output(const std::string& path, const std::string& flag, const io::TensorSet& set) {
  if (path.empty() || !dist::is_root()) return;
  for (const std::filesystem::path& input : set.files()) check_not_an_input(path, flag, {input});
  io::check_output_path(path, flag);
}

std::string kind_name(io::TensorFile::Kind k) { return k == io::TensorFile::Kind::npy ? "npy" : "safetensors"; }

// The report's "input": the inputs as given, every file, the duplicates.
ordered_json input_json(const io::TensorSet& set, const std::vector<std::string>& aliases) {
  ordered_json files = ordered_json::array();
  uint64_t size = 0;
  for (size_t f = 0; f < set.files().size(); ++f) {
    files.push_back({{"file", set.files()[f].string()},
                     {"kind", kind_name(set.kind(f))},
                     {"size_bytes", set.file_size(f)},
                     {"metadata", set.metadata(f)}});
    size += set.file_size(f);
  }
  const bool one = set.files().size() == 1;
  return {{"file", one ? set.files()[0].string() : set.label()},
          {"kind", one ? kind_name(set.kind(0)) : "several files"},
          {"size_bytes", size},
          {"metadata", one ? ordered_json(set.metadata(0)) : ordered_json::object()},
          {"files", files},
          {"duplicates", "tensors bit-identical to an earlier one (same dtype, shape and bytes) are reported and "
                         "pooled once, under the first name; `aliases` lists them"},
          {"aliases", aliases}};
}

// ---- the steps of `run` ------------------------------------------------------

// The flags checked and resolved, before any input is read.
struct Setup {
  std::vector<const Recipe*> recipes;
  CompareOptions options;
};

Setup resolve_flags(const Args& a) {
  check_progress_mode(a.study.progress);
  Setup s;
  s.recipes = selected_recipes(a);
  s.options.axis = a.axis;
  s.options.threads = a.study.threads;
  if (!a.tail.empty()) {
    s.options.tail = parse_tail(a.tail);
    if (!s.options.tail) throw InputError(fmt::format("--tail '{}' is unknown; use pad or error", a.tail));
  }
  resolve_rounding(a.study, s.options.rounding, s.options.stochastic);
  if (!a.json_out.empty() && a.json_out == a.csv_out)
    throw InputError(fmt::format("--json and --csv both name '{}'; give two files", a.json_out));
  for (const std::string* other : {&a.json_out, &a.csv_out})
    if (!a.report_out.empty() && a.report_out == *other)
      throw InputError(fmt::format("--report and --{} both name '{}'; give two files",
                                   other == &a.json_out ? "json" : "csv", a.report_out));
  return s;
}

// The tensors to compare: selected, checked from their headers, duplicates
// reported once (docs/analysis.md "Inputs").
struct Selection {
  std::vector<size_t> tensors;  // indices into the set, duplicates left out
  std::vector<io::DType> dtypes;
  std::vector<std::string> aliases;
  int64_t elements = 0;
};

Selection select_inputs(const Args& a, const Setup& setup, const io::TensorSet& set) {
  check_output(a.json_out, "--json", set);
  check_output(a.csv_out, "--csv", set);
  html::check_report_path(a.report_out, set.files());
  const std::vector<size_t> chosen = io::select_tensors(set, a.study.tensors);
  if (chosen.empty()) throw InputError(fmt::format("'{}' holds no tensors; nothing to compare", set.label()));
  for (size_t i : chosen) check_tensor(set, i, a, setup.recipes, setup.options);
  const io::Deduplicated dedup = io::deduplicate(set, chosen);
  Selection sel;
  sel.tensors = dedup.kept;
  for (const auto& [dup, kept] : dedup.aliases)
    sel.aliases.push_back(set.tensors()[dup].info.name + " = " + set.tensors()[kept].info.name);
  for (size_t i : sel.tensors) {
    sel.dtypes.push_back(check_tensor(set, i, a, setup.recipes, setup.options));
    sel.elements += static_cast<int64_t>(set.tensors()[i].info.nbytes / io::dtype_size(sel.dtypes.back()));
  }
  return sel;
}

void print_intro(const Args& a, const io::TensorSet& set, const Selection& sel) {
  fmt::print("{}: {} of {} tensor{}{}, {} elements; blocks along axis {}; tail: {}\n", set.label(),
             sel.tensors.size(), set.tensors().size(), set.tensors().size() == 1 ? "" : "s",
             sel.aliases.empty()
                 ? ""
                 : fmt::format(" ({} duplicate(s) reported once under the first name)", sel.aliases.size()),
             sel.elements, a.axis, a.tail.empty() ? "each recipe's default" : a.tail);
  std::fflush(stdout);
}

// The row geometry of each selected tensor for dist::plan_rows: split only
// with blocks along the last axis (a row then holds whole blocks) and without
// stochastic rounding (its random bits follow the element index).
std::vector<dist::RowShape> row_shapes(const Args& a, const Setup& setup, const io::TensorSet& set,
                                       const Selection& sel) {
  std::vector<dist::RowShape> shapes;
  for (size_t s = 0; s < sel.tensors.size(); ++s) {
    const std::vector<int64_t>& shape = set.tensors()[sel.tensors[s]].info.shape;
    const int rank = static_cast<int>(shape.size());
    const bool last = a.axis == -1 || a.axis == rank - 1;
    shapes.push_back(dist::row_shape(shape, io::dtype_size(sel.dtypes[s]),
                                     last && setup.options.rounding != Rounding::stochastic));
  }
  return shapes;
}

// Rows [p.row_begin, p.row_end) of a selected tensor, widened to fp32, as a
// matrix; the whole tensor in its own shape when the piece is all of it.
Tensor load_piece(const io::TensorSet& set, const Selection& sel, const dist::RowShape& shape, const dist::Piece& p) {
  const size_t index = sel.tensors[p.tensor];
  if (p.whole(shape)) return load(set, index, sel.dtypes[p.tensor]);
  const io::TensorInfo& t = set.tensors()[index].info;
  Tensor x;
  x.shape = {p.row_end - p.row_begin, t.shape.back()};
  x.data.resize(size_t(x.shape[0] * x.shape[1]));
  const io::TensorBytes bytes = set.bytes(index);
  io::widen_to_f32(sel.dtypes[p.tensor], bytes.bytes().subspan(size_t(p.row_begin) * shape.row_bytes, p.bytes), x.data,
                   fmt::format("{}: tensor '{}'", set.file_of(index).string(), t.name));
  return x;
}

// NVFP4's per-tensor amax of every split tensor, per recipe: the first phase
// of a split tensor (dist::first_phase). A tensor whose amax the quantizer
// would refuse (NaN, Inf) is re-planned whole; `plan` changes then.
dist::TensorValues tensor_amaxes(const Args& a, const io::TensorSet& set, const Setup& setup, const Selection& sel,
                                 std::vector<dist::RowShape>& shapes, dist::RowPlan& plan) {
  bool nvfp4 = false;
  for (const Recipe* r : setup.recipes) nvfp4 = nvfp4 || r->format == Format::nvfp4;
  return dist::first_phase(
      nvfp4, setup.recipes.size(), shapes, plan, a.split_above,
      [&](const dist::Piece& p) {
        const Tensor x = load_piece(set, sel, shapes[p.tensor], p);
        std::vector<std::optional<float>> v;
        for (const Recipe* r : setup.recipes) v.push_back(piece_amax(*r, x.data));
        return v;
      },
      [&](size_t r, std::span<const float> amaxes) { return *piece_amax(*setup.recipes[r], amaxes); },
      [&](size_t r, float amax) { return usable_global_amax(*setup.recipes[r], amax); });
}

// Every selected tensor under every recipe, spread over the ranks of an MPI
// job (all here when alone), tensors above --split-rows-above as row pieces:
// on rank 0, in tensor order, whatever the ranks.
std::vector<std::vector<RecipeResult>> compare_tensors(const Args& a, const io::TensorSet& set, const Setup& setup,
                                                       const Selection& sel) {
  using Results = std::vector<RecipeResult>;
  const std::vector<const Recipe*>& recipes = setup.recipes;
  std::vector<dist::RowShape> shapes = row_shapes(a, setup, set, sel);
  dist::RowPlan plan = dist::plan_rows(shapes, a.split_above);
  const auto amaxes = tensor_amaxes(a, set, setup, sel, shapes, plan);
  fmt::print("{}", plan.note(a.split_above));
  std::fflush(stdout);
  const std::vector<uint64_t> costs = plan.costs();
  auto study = [&](const std::vector<size_t>& items) {
    double total = 0, done = 0;
    for (size_t k : items) total += static_cast<double>(costs[k] * recipes.size());
    Progress progress("compare", a.study.progress, total);
    std::vector<Results> out;
    for (size_t k : items) {
      const dist::Piece& p = plan.pieces[k];
      const std::string& name = set.tensors()[sel.tensors[p.tensor]].info.name;
      progress.update(done, name);
      const Tensor x = load_piece(set, sel, shapes[p.tensor], p);
      const InputDType dtype = input_dtype(sel.dtypes[p.tensor]);
      Results& res = out.emplace_back();
      for (size_t r = 0; r < recipes.size(); ++r) {
        if (plan.split(p.tensor)) {
          CompareOptions o = setup.options;
          o.axis = -1;  // the piece is a matrix; its rows end on the tensor's last axis
          const TensorPiece piece{set.tensors()[sel.tensors[p.tensor]].info.shape,
                                  p.row_begin * (x.shape.back()), amaxes[p.tensor][r]};
          res.push_back(compare_recipe(x, dtype, *recipes[r], o, &piece));
        } else {
          res.push_back(compare_recipe(x, dtype, *recipes[r], setup.options));
        }
        done += static_cast<double>(costs[k]);
        progress.update(done, name);
      }
    }
    return out;
  };
  auto encode = [](dist::Writer& w, const Results& res) {
    for (const RecipeResult& r : res) w.put(r.skipped), w.put(r.stats), w.put(r.bits_per_element);
  };
  auto decode = [&recipes](dist::Reader& rd, Results& res) {
    res.resize(recipes.size());
    for (size_t k = 0; k < recipes.size(); ++k) {
      res[k].recipe = recipes[k];
      rd.get(res[k].skipped), rd.get(res[k].stats), rd.get(res[k].bits_per_element);
    }
  };
  const std::vector<Results> pieces = dist::map_items<Results>(costs, study, encode, decode);
  // Each tensor's pieces merged in row order (on rank 0; elsewhere the slots are empty).
  std::vector<Results> out(sel.tensors.size());
  if (!dist::is_root()) return out;
  for (size_t t = 0; t < sel.tensors.size(); ++t) {
    for (size_t r = 0; r < recipes.size(); ++r) {
      std::vector<RecipeResult> parts;
      for (size_t k = plan.first[t]; k < plan.first[t + 1]; ++k) parts.push_back(pieces[k][r]);
      out[t].push_back(merge_pieces(parts));
    }
  }
  return out;
}

// Prints each tensor's table (and its NaN/Inf warning) and pools the results
// over tensors, in tensor order.
std::vector<PooledResult> print_tensors(const io::TensorSet& set, const Setup& setup, const Selection& sel,
                                        const std::vector<std::vector<RecipeResult>>& results) {
  std::vector<PooledResult> pooled(setup.recipes.size());
  for (size_t r = 0; r < setup.recipes.size(); ++r) pooled[r].recipe = setup.recipes[r];
  for (size_t s = 0; s < sel.tensors.size(); ++s) {
    const io::TensorInfo& t = set.tensors()[sel.tensors[s]].info;
    for (size_t r = 0; r < setup.recipes.size(); ++r)
      pooled[r].add(results[s][r], static_cast<int64_t>(t.nbytes / io::dtype_size(sel.dtypes[s])));
    fmt::print("\n{}  {} {}\n", t.name, io::dtype_name(t.dtype), shape_text(t.shape));
    print_header_row("QSNR dB", 8);
    for (const RecipeResult& res : results[s]) {
      if (!res.skipped.empty()) {
        fmt::print("  {:<18} skipped: {}\n", res.recipe->id, res.skipped);
      } else {
        print_row(*res.recipe, res.stats, db(res.stats.qsnr_db()), 8);
      }
    }
    std::fflush(stdout);
    for (const RecipeResult& res : results[s]) {
      const ErrorStats& st = res.stats;
      if (res.skipped.empty() && st.nan_in + st.inf_in > 0) {
        fmt::print(stderr,
                   "fp4emu: warning: '{}': tensor '{}' holds {} NaN and {} Inf values; they are counted under "
                   "NaN/Inf and left out of every other metric\n",
                   set.file_of(sel.tensors[s]).string(), t.name, st.nan_in, st.inf_in);
        break;
      }
    }
  }
  return pooled;
}

void print_pooled(const Selection& sel, const std::vector<PooledResult>& pooled) {
  if (sel.tensors.size() > 1) {
    fmt::print("\npooled over {} tensors (ratio of sums; QSNR dB [mean of the per-tensor dB])\n", sel.tensors.size());
    print_header_row("QSNR dB [mean]", 15);
    for (const PooledResult& p : pooled) {
      if (p.tensors == 0) {
        fmt::print("  {:<18} skipped on every tensor\n", p.recipe->id);
        continue;
      }
      print_row(*p.recipe, p.stats, fmt::format("{} [{}]", db(p.stats.qsnr_db()), db(p.mean_qsnr_db())), 15);
    }
  }
  fmt::print(
      "\nQSNR = 10 log10(sum x^2 / sum (x - Q(x))^2); NMSE = sum (x - Q(x))^2 / sum x^2; underflow = nonzero inputs "
      "quantized to 0;\nzeros = outputs equal to 0; saturated = inputs clipped to the largest code of their block; "
      "NaN/Inf = non-finite inputs and outputs;\nbias (SE) = mean of Q(x) - x over the valid pairs (its standard "
      "error, docs/analysis.md §5.1).\n");
}

ordered_json report_json(const Args& a, const io::TensorSet& set, const Setup& setup, const Selection& sel,
                         const std::vector<std::vector<RecipeResult>>& results,
                         const std::vector<PooledResult>& pooled) {
  ordered_json j;
  j["tool"] = "fp4emu compare";
  j["version"] = kVersion;
  j["input"] = input_json(set, sel.aliases);
  j["options"] = {{"tensor", a.study.tensors},
                  {"axis", a.axis},
                  {"tail", a.tail.empty() ? "recipe default" : a.tail},
                  {"bf16_bits", a.bf16_bits},
                  {"rounding", rounding_json(setup.options.rounding, setup.options.stochastic)}};
  ordered_json rj = ordered_json::array();
  for (const Recipe* r : setup.recipes)
    rj.push_back({{"id", r->id}, {"format", format_name(r->format)}, {"block", block_size(r->format)},
                  {"spec", r->spec_ref},
                  {"rounding", to_string(setup.options.rounding.value_or(r->element_rounding))}});
  j["recipes"] = rj;
  ordered_json tj = ordered_json::array();
  for (size_t s = 0; s < sel.tensors.size(); ++s) {
    const io::TensorSet::Entry& entry = set.tensors()[sel.tensors[s]];
    ordered_json rows = ordered_json::array();
    for (const RecipeResult& res : results[s]) {
      ordered_json e = {{"recipe", res.recipe->id}, {"format", format_name(res.recipe->format)}};
      if (!res.skipped.empty()) {
        e["skipped"] = res.skipped;
      } else {
        e.update(metrics_json(res.stats, res.bits_per_element));
      }
      rows.push_back(e);
    }
    tj.push_back({{"name", entry.info.name},
                  {"file", set.files()[entry.file].string()},
                  {"dtype", io::dtype_name(entry.info.dtype)},
                  {"shape", entry.info.shape},
                  {"results", rows}});
  }
  j["tensors"] = tj;
  ordered_json pj = ordered_json::array();
  for (const PooledResult& p : pooled) {
    ordered_json e = {{"recipe", p.recipe->id}, {"format", format_name(p.recipe->format)}, {"tensors", p.tensors}};
    if (p.tensors > 0) {
      e.update(metrics_json(p.stats, p.bits_per_element()));
      e["mean_qsnr_db"] = json_number(p.mean_qsnr_db());
    }
    pj.push_back(e);
  }
  j["pooled"] = pj;
  return j;
}

std::string report_csv(const io::TensorSet& set, const Setup& setup, const Selection& sel,
                       const std::vector<std::vector<RecipeResult>>& results,
                       const std::vector<PooledResult>& pooled) {
  std::string csv = kCsvHeader;
  const double nan = std::nan("");
  for (size_t s = 0; s < sel.tensors.size(); ++s) {
    const io::TensorSet::Entry& entry = set.tensors()[sel.tensors[s]];
    const io::TensorInfo& info = entry.info;
    for (const RecipeResult& res : results[s])
      csv += csv_row("tensor", set.files()[entry.file].string(), info.name, std::string(io::dtype_name(info.dtype)),
                     fmt::format("{}", fmt::join(info.shape, "x")), *res.recipe, res.skipped, res.stats, nan,
                     res.bits_per_element, setup.options);
  }
  for (const PooledResult& p : pooled)
    csv += csv_row("pooled", set.label(), "", "", "", *p.recipe, p.tensors == 0 ? "skipped on every tensor" : "",
                   p.stats, p.mean_qsnr_db(), p.bits_per_element(), setup.options);
  return csv;
}

void write_reports(const Args& a, const io::TensorSet& set, const Setup& setup, const Selection& sel,
                   const std::vector<std::vector<RecipeResult>>& results, const std::vector<PooledResult>& pooled) {
  if (!a.json_out.empty() || !a.report_out.empty()) {
    const ordered_json j = report_json(a, set, setup, sel, results, pooled);
    if (!a.json_out.empty()) write_text(a.json_out, j.dump(2) + "\n");
    if (!a.report_out.empty()) html::write_page(a.report_out, html::compare_page(j));
  }
  if (!a.csv_out.empty()) write_text(a.csv_out, report_csv(set, setup, sel, results, pooled));
}

int run(const Args& a) {
  const Setup setup = resolve_flags(a);
  const io::TensorSet set(a.study.inputs);
  const Selection sel = select_inputs(a, setup, set);
  print_intro(a, set, sel);
  const std::vector<std::vector<RecipeResult>> results = compare_tensors(a, set, setup, sel);
  if (!dist::is_root()) return 0;  // rank 0 prints and writes the reports
  const std::vector<PooledResult> pooled = print_tensors(set, setup, sel, results);
  print_pooled(sel, pooled);
  write_reports(a, set, setup, sel, results, pooled);
  return 0;
}

}  // namespace

void add_compare(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "compare", "Fake-quantize each tensor of a dump with several formats/recipes and tabulate what they lose");
  add_tensor_flags(cmd, args->study, "all");
  add_list_option(cmd, "--format,-f", args->formats, "Formats, comma-separated (default: hif4,mxfp4,nvfp4)", true);
  add_list_option(cmd, "--recipe,-r", args->recipes,
                  "Recipe ids, comma-separated; a format name is its default recipe; 'all' is every recipe of "
                  "the selected formats (default: each format's default)",
                  true);
  cmd->add_option("--axis", args->axis, "Block axis (negative counts from the end)")->default_val(-1)->check(axis_range());
  cmd->add_option("--tail", args->tail, "Axis length not a multiple of the block: pad | error (default: each recipe's)");
  add_rounding_flags(cmd, args->study, {.rbits_refusal = kRbitsManyTensors});
  cmd->add_flag("--bf16-bits", args->bf16_bits, "Read u16 tensors as bf16 bit patterns (numpy '<u2' dumps)");
  cmd->add_option("--json", args->json_out, "Also write every number as JSON to this file");
  cmd->add_option("--csv", args->csv_out, "Also write every number as CSV to this file (one row per tensor x recipe)");
  html::add_report_option(cmd, args->report_out);
  add_run_flags(cmd, args->study, "Threads of the fast quantizers inside each tensor; results do not depend on it");
  add_split_rows_option(cmd, args->split_above);
  cmd->footer(
      "Example: fp4emu compare data/sample_dump.safetensors --tensor 'model.layers.*.mlp.down_proj.input' "
      "--format mxfp4,nvfp4 --csv down.csv\n"
      "         fp4emu compare data/sample_dump.safetensors --format mxfp4 --round stochastic --seed 1 --json sr.json\n"
      "bias = mean of Q(x) - x, with its standard error (docs/analysis.md §5.1).");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
