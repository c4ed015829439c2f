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

// --impl / --threads: which implementation runs, on how many threads.
struct ExecFlags {
  std::string impl;  // auto | reference | fast (empty: auto)
  int threads = 0;   // 0: OMP_NUM_THREADS, else every core
};
void add_exec_flags(CLI::App* cmd, ExecFlags& flags);
DequantOptions to_dequant_options(const ExecFlags& flags);

// --format / --recipe / --axis / --tail / --round / packing options (and the exec flags).
struct QuantFlags {
  std::string format;
  std::string recipe;
  int axis = -1;
  std::string tail;
  std::string round;
  std::string nibble_order;
  std::string scale_bit_order;
  std::optional<float> global_amax;
  ExecFlags exec;
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
void add_inspect(CLI::App& app, Action& action);
void add_sample(CLI::App& app, Action& action);
void add_gemm(CLI::App& app, Action& action);
void add_golden(CLI::App& app, Action& action);
void add_underflow(CLI::App& app, Action& action);
void add_resq(CLI::App& app, Action& action);

}  // namespace fp4emu::cli
