#pragma once
// Shared pieces of the fp4emu command-line tool: one subcommand per file,
// registered from main.cpp.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "fp4emu/quant/quantize.hpp"

namespace fp4emu::cli {

// A subcommand's work, run after parsing; returns the exit code.
using Action = std::function<int()>;

// --format / --recipe / --axis / --tail / --round / packing options.
struct QuantFlags {
  std::string format;
  std::string recipe;
  int axis = -1;
  std::string tail;
  std::string round;
  std::string nibble_order;
  std::string scale_bit_order;
  std::optional<float> global_amax;
};
void add_quant_flags(CLI::App* cmd, QuantFlags& flags, bool with_packing);
// Turns the flags into QuantOptions; throws InputError on unknown names.
QuantOptions to_quant_options(const QuantFlags& flags);
// Resolves "--format F --recipe ID" (ID may omit the "F." prefix) to a recipe id.
std::string resolve_recipe_id(const std::string& format, const std::string& recipe);

// Reads a .npy tensor (f32, bf16 or f16) and widens it to fp32.
Tensor load_tensor(const std::filesystem::path& path, InputDType* dtype);

void add_formats(CLI::App& app, Action& action);
void add_fake_quant(CLI::App& app, Action& action);
void add_quantize(CLI::App& app, Action& action);
void add_dequantize(CLI::App& app, Action& action);
void add_compare(CLI::App& app, Action& action);

}  // namespace fp4emu::cli
