// `fp4emu compare IN.npy`: how much each format/recipe loses on a tensor.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "fp4emu/analysis/metrics.hpp"
#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/atomic_file.hpp"

namespace fp4emu::cli {
namespace {

struct Args {
  std::string in;
  std::vector<std::string> formats;
  std::vector<std::string> recipes;
  int axis = -1;
  std::string tail;
  std::string json_out;
};

std::vector<const Recipe*> selected_recipes(const Args& a) {
  std::vector<const Recipe*> out;
  if (!a.recipes.empty()) {
    for (const std::string& id : a.recipes) {
      if (id == "all") {
        for (const Recipe& r : all_recipes()) out.push_back(&r);
        continue;
      }
      const Recipe* r = find_recipe(id);
      if (!r) {
        if (auto f = parse_format(id)) r = &default_recipe(*f);
      }
      if (!r) throw InputError(fmt::format("--recipe '{}' is unknown; see `fp4emu formats`", id));
      out.push_back(r);
    }
    return out;
  }
  std::vector<std::string> formats = a.formats;
  if (formats.empty()) formats = {"hif4", "mxfp4", "nvfp4"};
  for (const std::string& name : formats) {
    auto f = parse_format(name);
    if (!f) throw InputError(fmt::format("--format '{}' is unknown; use hif4, mxfp4 or nvfp4", name));
    out.push_back(&default_recipe(*f));
  }
  return out;
}

std::string db(double v) { return std::isinf(v) ? "inf" : fmt::format("{:.2f}", v); }

int run(const Args& a) {
  const std::vector<const Recipe*> recipes = selected_recipes(a);
  InputDType dtype;
  const Tensor x = load_tensor(a.in, &dtype);
  nlohmann::json rows = nlohmann::json::array();
  fmt::print("{}: shape [", a.in);
  for (size_t i = 0; i < x.shape.size(); ++i) fmt::print("{}{}", i ? ", " : "", x.shape[i]);
  fmt::print("], blocks along axis {}\n", a.axis);
  Format current = recipes.front()->format;
  bool first = true;
  for (const Recipe* r : recipes) {
    if (first || r->format != current) {
      current = r->format;
      fmt::print("\n{} (block {})\n", format_name(current), block_size(current));
      fmt::print("  {:<20} {:>9} {:>11} {:>14} {:>9}\n", "recipe", "QSNR dB", "underflow", "max abs err", "non-fin");
      first = false;
    }
    QuantOptions o;
    o.recipe = std::string(r->id);
    o.axis = a.axis;
    o.input_dtype = dtype;
    if (!a.tail.empty()) {
      o.tail = parse_tail(a.tail);
      if (!o.tail) throw InputError(fmt::format("--tail '{}' is unknown; use pad or error", a.tail));
    }
    if (r->bf16_input_only && dtype == InputDType::f32) {
      bool exact = true;
      for (float v : x.data) exact = exact && is_bf16_exact(v);
      if (!exact) {
        fmt::print("  {:<20} skipped: defined on bf16 inputs and this fp32 tensor is not bf16-exact\n", r->id);
        continue;
      }
    }
    const Tensor q = fake_quant(x, o);
    const ErrorStats s = error_stats(x.data, q.data);
    fmt::print("  {:<20} {:>9} {:>10.4f}% {:>14.6g} {:>9}\n", r->id, db(s.qsnr_db()), 100.0 * s.underflow_ratio(),
               s.max_abs_error, s.nonfinite_out);
    rows.push_back({{"format", format_name(r->format)},
                    {"recipe", r->id},
                    {"qsnr_db", std::isinf(s.qsnr_db()) ? nlohmann::json(nullptr) : nlohmann::json(s.qsnr_db())},
                    {"nmse", s.nmse()},
                    {"underflow_ratio", s.underflow_ratio()},
                    {"max_abs_error", s.max_abs_error},
                    {"count", s.count},
                    {"nonzero", s.nonzero},
                    {"flushed", s.flushed},
                    {"nonfinite_in", s.nonfinite_in},
                    {"nonfinite_out", s.nonfinite_out}});
  }
  fmt::print("\nQSNR = 10 log10(sum x^2 / sum (x - Q(x))^2); underflow = nonzero inputs quantized to 0.\n");
  if (!a.json_out.empty()) {
    const std::string text = nlohmann::json{{"input", a.in}, {"axis", a.axis}, {"results", rows}}.dump(2) + "\n";
    io::write_file_atomic(a.json_out, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  }
  return 0;
}

}  // namespace

void add_compare(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("compare", "Fake-quantize a tensor with several formats/recipes and tabulate the error");
  cmd->add_option("IN", args->in, "Input .npy (fp32, bf16 or fp16)")->required();
  cmd->add_option("--format,-f", args->formats, "Formats to compare with their default recipes (default: all three)")
      ->delimiter(',');
  cmd->add_option("--recipe,-r", args->recipes, "Recipe ids to compare, or 'all'")->delimiter(',');
  cmd->add_option("--axis", args->axis, "Block axis (negative counts from the end)")->default_val(-1);
  cmd->add_option("--tail", args->tail, "pad | error (default: each recipe's)");
  cmd->add_option("--json", args->json_out, "Also write the results as JSON to this file");
  cmd->footer("Example: fp4emu compare data/sample_activations.npy --recipe all");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
