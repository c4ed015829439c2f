// `fp4emu formats`: the formats and every recipe, with one-line descriptions.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace fp4emu::cli {
namespace {

struct FormatLine {
  Format format;
  std::string_view description;
};
constexpr FormatLine kFormats[] = {
    {Format::hif4, "HiFloat4: 64 S1P2 elements + E6M2 scale + 8 L2 + 16 L3 micro-exponent bits (4.5 bits/value)"},
    {Format::mxfp4, "OCP MXFP4: 32 E2M1 elements + one E8M0 power-of-two scale (4.25 bits/value)"},
    {Format::nvfp4, "NVIDIA NVFP4: 16 E2M1 elements + one UE4M3 scale, plus an fp32 per-tensor scale (4.5 bits/value)"},
};

std::string roundings(uint8_t mask) {
  std::string s;
  for (Rounding r : kAllRoundings)
    if (mask & rounding_bit(r)) s += (s.empty() ? "" : ",") + std::string(to_string(r));
  return s;
}

int run(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const FormatLine& f : kFormats) {
      nlohmann::json recipes = nlohmann::json::array();
      for (const Recipe& r : all_recipes()) {
        if (r.format != f.format) continue;
        recipes.push_back({{"id", r.id},
                           {"default", r.is_default},
                           {"bits_version", r.bits_version},
                           {"summary", r.summary},
                           {"spec", r.spec_ref},
                           {"element_rounding", to_string(r.element_rounding)},
                           {"allowed_roundings", roundings(r.allowed_roundings)},
                           {"tail", to_string(r.default_tail)},
                           {"nibble_order", to_string(r.nibble_order)},
                           {"fake_quant_only", r.fake_quant_only},
                           {"bf16_input_only", r.bf16_input_only}});
      }
      out.push_back({{"format", format_name(f.format)},
                     {"block_size", block_size(f.format)},
                     {"description", f.description},
                     {"recipes", recipes}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  for (const FormatLine& f : kFormats) {
    fmt::print("{} (block {}): {}\n", format_name(f.format), block_size(f.format), f.description);
    for (const Recipe& r : all_recipes()) {
      if (r.format != f.format) continue;
      fmt::print("  {:<20} {:<9} bits v{:<3} {}\n", r.id, r.is_default ? "[default]" : "", r.bits_version, r.summary);
    }
    fmt::print("\n");
  }
  fmt::print("Details of each recipe: docs/formats.md; \"bits vN\" changes whenever any output bit of the recipe "
             "changes (CHANGELOG.md). Machine-readable: fp4emu formats --json\n");
  return 0;
}

}  // namespace

void add_formats(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("formats", "List formats and recipes");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->footer("Example: fp4emu formats");
  cmd->callback([&action, json] { action = [json] { return run(*json); }; });
}

}  // namespace fp4emu::cli
