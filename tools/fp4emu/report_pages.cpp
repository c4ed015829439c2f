#include "report_pages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>

namespace fp4emu::cli::html {
namespace {

using nlohmann::ordered_json;
using Style = JsonColumn::Style;

// A JSON value as one line of text: strings as they are, the rest as JSON.
std::string value_text(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  return v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string str(const ordered_json& obj, const char* key) {
  return obj.contains(key) ? value_text(obj.at(key)) : std::string("-");
}

// Every member of a JSON object as name/value facts.
std::vector<std::pair<std::string, std::string>> object_facts(const ordered_json& obj) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!obj.is_object()) return out;
  for (const auto& [key, value] : obj.items()) out.emplace_back(key, value_text(value));
  return out;
}

// The "Inputs" section: one row per file (its safetensors metadata as
// key=value), then the duplicates rule and the aliases.
void inputs_section(Page& page, const ordered_json& input, const std::string& heading) {
  page.section(heading);
  const ordered_json files = input.value("files", ordered_json::array());
  const bool hashed = std::any_of(files.begin(), files.end(), [](const ordered_json& f) { return f.contains("sha256"); });
  Table t;
  t.columns = {"file", "kind", "size (bytes)"};
  if (hashed) t.columns.push_back("sha256");
  for (const ordered_json& f : files) {
    std::vector<Cell> row = {text(str(f, "file")), text(str(f, "kind")), integer(f.value("size_bytes", int64_t(0)))};
    if (hashed) row.push_back(text(str(f, "sha256")));
    t.rows.push_back(std::move(row));
  }
  page.table(t);
  // Each file's safetensors metadata as name/value lines (long values wrap).
  for (const ordered_json& f : files) {
    const ordered_json metadata = f.value("metadata", ordered_json::object());
    if (metadata.empty()) continue;
    page.paragraph("Metadata of " + str(f, "file") + ":");
    page.facts(object_facts(metadata));
  }
  if (input.contains("duplicates")) page.paragraph("Duplicates: " + value_text(input["duplicates"]) + ".");
  const ordered_json aliases = input.value("aliases", ordered_json::array());
  if (aliases.empty()) {
    page.paragraph("No tensor duplicates another.");
  } else {
    std::vector<std::string> items;
    for (const ordered_json& a : aliases) items.push_back(value_text(a));
    page.paragraph(fmt::format("{} duplicate(s), reported once under the first name:", items.size()));
    page.bullets(items);
  }
}

std::string joined(const ordered_json& list, const char* none) {
  if (!list.is_array() || list.empty()) return none;
  std::string s;
  for (const ordered_json& v : list) s += (s.empty() ? "" : ", ") + value_text(v);
  return s;
}

// ---- compare -------------------------------------------------------------------

// The metric columns of compare's per-tensor and pooled rows.
std::vector<JsonColumn> compare_metric_columns() {
  return {
      {Style::fixed2, "/qsnr_db", "QSNR dB", "10 log10(sum x^2 / sum (x - Q(x))^2)"},
      {Style::sci, "/nmse", "NMSE", "sum (x - Q(x))^2 / sum x^2"},
      {Style::fixed4, "/cosine", "cosine", "cosine similarity of x and Q(x)"},
      {Style::general, "/max_abs_error", "max |err|"},
      {Style::percent, "/underflow_ratio", "underflow", "nonzero inputs quantized to 0"},
      {Style::percent, "/zero_ratio_after", "zeros", "outputs equal to 0"},
      {Style::percent, "/saturation_ratio", "saturated", "inputs clipped to the largest code of their block"},
      {Style::integer, "/nan_in", "NaN in"},
      {Style::integer, "/inf_in", "Inf in"},
      {Style::integer, "/nonfinite_out", "non-finite out"},
      {Style::fixed2, "/bits_per_element", "bits/elem", "storage per element, scales included"},
  };
}

}  // namespace

Page compare_page(const ordered_json& r) {
  const ordered_json& input = r.at("input");
  const ordered_json& tensors = r.at("tensors");
  Page page(fmt::format("fp4emu compare: {}", str(input, "file")),
            fmt::format("{} tensor(s) x {} recipe(s): what each format/recipe loses on each tensor", tensors.size(),
                        r.at("recipes").size()));

  page.section("Run");
  const ordered_json& o = r.at("options");
  std::string recipes;
  for (const ordered_json& rc : r.at("recipes"))
    recipes += fmt::format("{}{} ({}, block {})", recipes.empty() ? "" : ", ", str(rc, "id"), str(rc, "format"),
                           str(rc, "block"));
  page.facts({{"input", str(input, "file")},
              {"tensor selection", joined(o.value("tensor", ordered_json::array()), "every tensor")},
              {"recipes", recipes},
              {"block axis", str(o, "axis")},
              {"tail", str(o, "tail")},
              {"u16 read as bf16", str(o, "bf16_bits")},
              {"fp4emu", str(r, "version")}});

  std::vector<JsonColumn> cols = {{Style::text, "/recipe", "recipe"}, {Style::text, "/format", "format"},
                                  {Style::integer, "/tensors", "tensors"}};
  for (const JsonColumn& c : compare_metric_columns()) {
    cols.push_back(c);
    if (c.pointer == "/qsnr_db")
      cols.push_back({Style::fixed2, "/mean_qsnr_db", "mean QSNR dB", "mean of the per-tensor QSNR in dB"});
  }
  cols[3].note = "ratio of the sums over every tensor";
  page.section("Pooled over tensors");
  page.paragraph("Sums over every tensor, then the ratio (duplicates counted once); the mean QSNR is the mean of "
                 "the per-tensor dB.");
  page.table(json_table("", r.at("pooled"), cols));

  // One row per tensor x recipe.
  ordered_json rows = ordered_json::array();
  for (const ordered_json& t : tensors)
    for (const ordered_json& res : t.at("results")) {
      ordered_json row = res;
      row["tensor"] = t.at("name");
      row["dtype"] = t.at("dtype");
      row["shape"] = t.at("shape");
      rows.push_back(std::move(row));
    }
  std::vector<JsonColumn> tcols = {{Style::text, "/tensor", "tensor"}, {Style::text, "/dtype", "dtype"},
                                   {Style::text, "/shape", "shape"}, {Style::text, "/recipe", "recipe"}};
  for (const JsonColumn& c : compare_metric_columns()) tcols.push_back(c);
  tcols.push_back({Style::text, "/skipped", "skipped", "why the recipe could not quantize this tensor"});
  page.section("Per tensor");
  page.table(json_table("", rows, tcols));

  inputs_section(page, input, "Inputs");
  page.section("Definitions");
  page.bullets({"QSNR = 10 log10(sum x^2 / sum (x - Q(x))^2); NMSE = sum (x - Q(x))^2 / sum x^2.",
                "underflow: nonzero inputs quantized to 0; zeros: outputs equal to 0.",
                "saturated: inputs clipped to the largest code of their block; n/a where the recipe cannot saturate.",
                "NaN/Inf: non-finite inputs and outputs, counted apart and left out of every other metric.",
                "docs/analysis.md §5 describes the study."});
  return page;
}

// ---- underflow -----------------------------------------------------------------

Page underflow_page(const ordered_json& r, const std::vector<Figure>& figures) {
  const ordered_json& input = r.at("input");
  const ordered_json& runs = r.at("runs");
  Page page(fmt::format("fp4emu underflow: {}", str(input, "inputs")),
            fmt::format("{} tensor(s) x {} run(s) (recipe x transform): nonzero activations flushed to zero",
                        str(input, "tensors"), runs.size()));

  page.section("Run");
  std::vector<std::pair<std::string, std::string>> facts = {{"inputs", str(input, "inputs")},
                                                            {"tensors studied", str(input, "tensors")}};
  for (const ordered_json& run : runs)
    facts.emplace_back("run", fmt::format("{} ({}, block {}), rounding {}, transform {}", str(run, "format"),
                                          str(run, "recipe"), str(run, "block"), str(run, "rounding"),
                                          str(run, "transform")));
  for (auto& f : object_facts(r.value("options", ordered_json::object()))) facts.push_back(std::move(f));
  facts.emplace_back("fp4emu", str(r.value("tool", ordered_json::object()), "version"));
  page.facts(facts);

  if (!figures.empty()) {
    page.section("Pictures");
    for (const Figure& f : figures) page.figure(f);
  }

  page.section("Pooled over tensors");
  page.paragraph("Counts summed over the tensors of each run, then the ratio.");
  const JsonColumn pooled_cols[] = {
      {Style::text, "/format", "format"},
      {Style::text, "/recipe", "recipe"},
      {Style::text, "/transform", "transform"},
      {Style::integer, "/n", "n"},
      {Style::integer, "/n_nonzero", "nonzero"},
      {Style::integer, "/n_underflow", "flushed"},
      {Style::percent, "/underflow_ratio", "UR", "flushed / nonzero"},
      {Style::percent, "/zero_ratio_after", "zeros after"},
      {Style::integer, "/n_blocks", "blocks"},
      {Style::percent, "/blocks_with_underflow_ratio", "blocks with underflow"},
  };
  page.table(json_table("", r.at("pooled"), pooled_cols));

  page.section("Per tensor");
  const JsonColumn tensor_cols[] = {
      {Style::text, "/tensor", "tensor"},
      {Style::integer, "/layer", "layer"},
      {Style::text, "/kind", "kind"},
      {Style::text, "/recipe", "recipe"},
      {Style::text, "/transform", "transform"},
      {Style::integer, "/m", "rows"},
      {Style::integer, "/d", "d"},
      {Style::percent, "/underflow_ratio", "UR", "nonzero inputs flushed to zero"},
      {Style::percent, "/zero_ratio_after", "zeros after"},
      {Style::percent, "/blocks_with_underflow_ratio", "blocks with UR > 0"},
      {Style::percent, "/p99_block_ur", "p99 block UR"},
      {Style::fixed4, "/outlier_block_ratio_abs", "outl. abs", "blocks holding |x| >= tau_abs"},
      {Style::fixed4, "/outlier_block_ratio_rel", "outl. rel", "blocks with amax_B >= tau_rel x median amax_B"},
      {Style::fixed4, "/outlier_block_ratio_uf", "outl. uf", "blocks with UR_B >= tau_uf"},
      {Style::percent, "/saturation_ratio", "saturated"},
      {Style::fixed2, "/crest/mean", "crest", "mean amax_B / rms_B"},
      {Style::general, "/max_abs", "max |x|"},
      {Style::fixed2, "/qsnr_db", "QSNR dB"},
  };
  page.table(json_table("", r.at("tensors"), tensor_cols));

  inputs_section(page, input, "Inputs");
  page.section("Definitions");
  page.facts(object_facts(r.value("definitions", ordered_json::object())));
  page.paragraph("docs/analysis.md §2 describes the study.");
  return page;
}

// ---- resq ------------------------------------------------------------------------

Page resq_page(const ordered_json& r, const std::vector<Figure>& figures) {
  const ordered_json& input = r.at("input");
  const ordered_json& results = r.at("results");
  Page page(fmt::format("fp4emu resq: {}", str(input, "inputs")),
            fmt::format("Rollout-ResQ: Q(X) + S(Q(X - Q(X))) by sparsity pattern; {} tensor(s) x {} recipe(s)",
                        str(input, "tensors"), results.size()));

  page.section("Run");
  std::vector<std::pair<std::string, std::string>> facts = {{"inputs", str(input, "inputs")},
                                                            {"tensors studied", str(input, "tensors")}};
  const ordered_json& w = r.value("weights", ordered_json::object());
  facts.emplace_back("weights", w.contains("inputs") ? str(w, "inputs")
                                                     : fmt::format("synthetic {} x d, {} rows, seed {}",
                                                                   str(w, "synthetic"), str(w, "n"), str(w, "seed")));
  for (auto& f : object_facts(r.value("options", ordered_json::object()))) facts.push_back(std::move(f));
  facts.emplace_back("fp4emu", str(r.value("tool", ordered_json::object()), "version"));
  page.facts(facts);

  const JsonColumn cols[] = {
      {Style::text, "/pattern", "pattern"},
      {Style::fixed4, "/kept_density", "kept", "fraction of the residual kept"},
      {Style::fixed2, "/act_qsnr_db", "act QSNR dB", "X^ vs X"},
      {Style::fixed2, "/out_qsnr_db", "out QSNR dB", "X^ Q(W)^T vs X Q(W)^T"},
      {Style::fixed4, "/cosine_out", "cosine out"},
      {Style::fixed4, "/recovered_fraction", "recovered", "share of Q(X)'s error the residual recovers"},
      {Style::sci, "/drop_res_mse", "D_res mse", "deletion measure of the residual (none: not applicable)"},
      {Style::sci, "/drop_prim_mse", "D_prim mse", "deletion measure of the primary (none: not applicable)"},
      {Style::fixed2, "/speedup_vs_fp16", "speed-up vs FP16", "cost model"},
  };
  std::vector<JsonColumn> tensor_cols = {{Style::text, "/tensor", "tensor"},
                                         {Style::integer, "/m", "m"},
                                         {Style::integer, "/d", "d"},
                                         {Style::integer, "/n", "n"}};
  tensor_cols.insert(tensor_cols.end(), std::begin(cols), std::end(cols));
  for (size_t i = 0; i < results.size(); ++i) {
    const ordered_json& res = results[i];
    page.section(fmt::format("{} ({}), transform {}", str(res, "format"), str(res, "recipe"), str(res, "transform")));
    if (i < figures.size()) page.figure(figures[i]);
    page.table(json_table(fmt::format("pooled over {} tensor(s)", str(input, "tensors")), res.at("pooled"), cols));
    page.details(fmt::format("per tensor ({} rows)", res.at("tensors").size()));
    page.table(json_table("", res.at("tensors"), tensor_cols));
    page.end_details();
  }

  inputs_section(page, input, "Inputs");
  if (w.contains("files")) inputs_section(page, w, "Weights");
  page.section("Definitions");
  std::vector<std::pair<std::string, std::string>> defs;
  for (auto& f : object_facts(r.value("cost_model", ordered_json::object())))
    defs.emplace_back("cost model: " + f.first, f.second);
  if (r.contains("not_applicable")) defs.emplace_back("not applicable", str(r, "not_applicable"));
  page.facts(defs);
  page.paragraph("docs/analysis.md §3 describes the study and its metrics.");
  return page;
}

// ---- golden verify -------------------------------------------------------------

namespace {

Cell::Tone status_tone(golden::CaseStatus s) {
  switch (s) {
    case golden::CaseStatus::pass: return Cell::Tone::good;
    case golden::CaseStatus::fail:
    case golden::CaseStatus::error:
    case golden::CaseStatus::stale: return Cell::Tone::bad;
    case golden::CaseStatus::partial:
    case golden::CaseStatus::not_run: break;
  }
  return Cell::Tone::warn;
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = c == '_' ? ' ' : char(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

std::vector<Cell> case_row(const golden::CaseResult& c) {
  std::string notes;
  for (const std::string& n : c.notes) notes += (notes.empty() ? "" : "; ") + n;
  return {text(c.id),
          text(upper(golden::to_string(c.status)), status_tone(c.status)),
          text(c.recipe),
          text(c.family),
          number(c.compared, fmt::format("{} of {}", c.compared, c.outputs)),
          integer(c.mismatches),
          text(c.classification.empty() ? "-" : c.classification),
          text(notes.empty() ? "-" : notes)};
}

}  // namespace

Page verify_page(const golden::VerifyReport& r, const golden::VerifyOptions& o) {
  using golden::CaseStatus;
  const int failing = r.count(CaseStatus::fail) + r.count(CaseStatus::error) + r.count(CaseStatus::stale);
  Page page(fmt::format("fp4emu golden verify: {}", r.candidate.string()),
            fmt::format("{}: {} of {} case(s) pass, {} fail, {} error, {} stale; exit code {}",
                        failing == 0 ? "PASS" : "FAIL", r.count(CaseStatus::pass), r.cases.size(),
                        r.count(CaseStatus::fail), r.count(CaseStatus::error), r.count(CaseStatus::stale),
                        r.exit_code()));

  page.section("Run");
  page.facts({{"suite", fmt::format("{} ({} files, sha256 ok)", r.suite.string(), r.files_hashed)},
              {"candidate", r.candidate.string()},
              {"families", o.filter.families.empty() ? "every family" : fmt::format("{}", fmt::join(o.filter.families, ", "))},
              {"cases", o.filter.cases.empty() ? "every case" : fmt::format("{}", fmt::join(o.filter.cases, ", "))},
              {"recipes", o.filter.recipes.empty() ? "every recipe" : fmt::format("{}", fmt::join(o.filter.recipes, ", "))},
              {"strict (NaN-scale blocks compared)", o.strict ? "yes" : "no"},
              {"skip missing", o.skip_missing ? "yes" : "no"},
              {"mismatches listed", std::to_string(o.max_report)}});
  Table counts;
  counts.columns = {"status", "cases"};
  for (CaseStatus s : {CaseStatus::pass, CaseStatus::fail, CaseStatus::partial, CaseStatus::not_run, CaseStatus::error,
                       CaseStatus::stale})
    counts.rows.push_back({text(upper(golden::to_string(s)), status_tone(s)), integer(r.count(s))});
  page.table(counts);

  const std::vector<std::string> case_cols = {"case", "status", "recipe", "family", "files compared",
                                              "mismatches", "why", "notes"};
  page.section("Failing cases");
  Table bad;
  bad.columns = case_cols;
  for (const golden::CaseResult& c : r.cases)
    if (c.status == CaseStatus::fail || c.status == CaseStatus::error || c.status == CaseStatus::stale ||
        c.status == CaseStatus::partial)
      bad.rows.push_back(case_row(c));
  if (bad.rows.empty()) {
    page.paragraph("Every selected case passes.");
  } else {
    page.paragraph("FAIL: a mismatch (`why` classifies it); ERROR: a bad or missing candidate file; STALE: the "
                   "suite was made with another bits version of the recipe (regenerate it); PARTIAL: the files "
                   "present are equal, some are missing.");
    page.table(bad);
  }

  if (!r.first.empty()) {
    page.section("First mismatches");
    page.paragraph(fmt::format("The first {} of {} mismatch(es), block by block, root cause first (the scale, then "
                               "the codes, then the dequantized values of a block).",
                               r.first.size(), r.total_mismatches));
    Table m;
    m.columns = {"case",     "file",           "kind",         "cause", "block", "row", "block in row", "element",
                 "column",   "input",          "expected",     "actual", "expected scale", "actual scale",
                 "x/X",      "block amax",     "S_enc",        "before rounding"};
    auto idx = [](int64_t v) { return v < 0 ? number(std::nan("")) : integer(v); };
    auto txt = [](const std::string& s) { return text(s.empty() ? "-" : s); };
    for (const golden::Mismatch& x : r.first)
      m.rows.push_back({text(x.case_id), text(x.file), text(x.kind), txt(x.cause), idx(x.block), idx(x.row),
                        idx(x.block_in_row), idx(x.element), idx(x.column), txt(x.input), txt(x.expected),
                        txt(x.actual), txt(x.expected_scale), txt(x.actual_scale), txt(x.scaled), txt(x.block_amax),
                        txt(x.s_enc), txt(x.before_rounding)});
    page.table(m);
  }
  if (!r.errors.empty()) {
    page.section("Errors");
    page.bullets(r.errors);
  }

  page.section("Every case");
  Table all;
  all.columns = case_cols;
  for (const golden::CaseResult& c : r.cases) all.rows.push_back(case_row(c));
  page.table(all);
  page.paragraph("golden/README.md describes the suite, the statuses and the exit codes.");
  return page;
}

}  // namespace fp4emu::cli::html
