#pragma once
// Shared pieces of the fp4emu command-line tool: one subcommand per file,
// registered from main.cpp.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fp4emu/io/array.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/threads.hpp"

namespace fp4emu::cli {

// A subcommand's work, run after parsing; returns the exit code.
using Action = std::function<int()>;

// The whole command line: every command and option, as main() runs it and as
// the tests enumerate it (tests/cli_hostile_test.cpp tries every option).
struct CliApp {
  CLI::App app{"fp4emu: bit-exact emulator and reference for HiF4, MXFP4 and NVFP4 block formats"};
  Action action;  // set by the parsed command's callback
};
std::unique_ptr<CliApp> build_app();
// Parses argv and runs the command: exit 0 success, 1 verification mismatch,
// 2 bad usage or input, 3 internal error.
int run_main(int argc, char** argv);

// ---- option values -------------------------------------------------------------
// Every numeric option goes through one of these checks: the whole text must
// be a number in range (no empty value, junk, NaN or Inf; no silent wrap of a
// negative value into an unsigned one). The message names the option (CLI11
// prefixes it) and the accepted range.
CLI::Validator integer_in(int64_t lo, int64_t hi, std::string hint = {});
CLI::Validator any_seed();  // 0..2^64-1
// A finite real in [lo, hi] (an open end excludes the bound); `fp32`: also
// finite once rounded to fp32, for options stored as float.
struct RealRange {
  double lo, hi;
  bool lo_open = false, hi_open = false;
  bool fp32 = false;
};
CLI::Validator real_in(RealRange range, std::string hint = {});
// --axis: a block axis, negative from the end (the input's rank is checked later).
CLI::Validator axis_range();

// --threads, one rule for every command: 0 (the default) is every hardware
// thread (OpenMP's default: OMP_NUM_THREADS when set), else 1..kMaxThreads.
// The library's rule (fp4emu/threads.hpp), checked here to name the option.
using fp4emu::kMaxThreads;
CLI::Option* add_threads_option(CLI::App* cmd, int& threads, const std::string& description);

// List options: comma-separated items (`split`) or one item per use of the
// option; every item non-empty and given once.
CLI::Option* add_list_option(CLI::App* cmd, const std::string& name, std::vector<std::string>& items,
                             const std::string& description, bool split);

// Refuses an output that is the same file as one of the inputs (same inode,
// after symlinks and hard links), so no command overwrites what it reads.
void check_not_an_input(const std::filesystem::path& output, const std::string& label,
                        std::initializer_list<std::filesystem::path> inputs);

// --impl / --threads: which implementation runs, on how many threads.
struct ExecFlags {
  std::string impl;  // auto | reference | fast (empty: auto)
  int threads = 0;   // see add_threads_option
};
void add_exec_flags(CLI::App* cmd, ExecFlags& flags);
DequantOptions to_dequant_options(const ExecFlags& flags);

// --round: a rounding name (codec/rounding.hpp), or InputError listing every rounding.
std::optional<Rounding> parse_round_flag(const std::string& text);

// --round stochastic's random bits: one option group for every command that
// quantizes (fake-quant, quantize, compare, underflow, resq, gemm).
struct SrFlags {
  std::optional<uint64_t> seed, offset;
  std::string rng, rbits, rbits_map;
  // Set when the group is added: the Philox seed's flag ("--seed", or
  // "--sr-seed" where the command has a --seed of its own), and why --rbits is
  // refused (commands that quantize several tensors; empty: --rbits is read).
  std::string seed_flag = "--seed";
  std::string rbits_refusal;
};
struct SrScope {
  bool own_seed = false;      // the command's --seed means something else: the Philox seed is --sr-seed only
  std::string rbits_refusal;  // non-empty: --rbits is refused with this reason and fix
};
void add_sr_flags(CLI::App* cmd, SrFlags& flags, const SrScope& scope = {});
// Checks the group against the element rounding (random bits only with
// --round stochastic, from exactly one source) and fills the seed, offset,
// stream and byte map of `bits`; the --rbits array is read by load_random_bits.
void apply_sr_flags(const SrFlags& flags, std::optional<Rounding> rounding, StochasticBits& bits);

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
  SrFlags sr;  // --round stochastic: its random bits (stochastic.hpp), generated or read
  ExecFlags exec;
};
void add_quant_flags(CLI::App* cmd, QuantFlags& flags, bool with_packing);
// The --rbits array, owned here while QuantOptions points at it.
struct RandomBits {
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> words;
};
// Reads --rbits (when given) for an input of `shape`: uint8 of the input's
// shape, or uint32 of its shape with the block axis length L replaced by
// ceil(L / 4); then points options.stochastic at `storage`.
void load_random_bits(const QuantFlags& flags, const std::vector<int64_t>& shape, QuantOptions& options,
                      RandomBits& storage);
// Turns the flags into QuantOptions; throws InputError on unknown names.
QuantOptions to_quant_options(const QuantFlags& flags);
// Resolves "--format F --recipe ID" (ID may omit the "F." prefix) to a recipe id.
std::string resolve_recipe_id(const std::string& format, const std::string& recipe);

// Reads a .npy tensor (f32, bf16 or f16) and widens it to fp32.
Tensor load_tensor(const std::filesystem::path& path, InputDType* dtype);
// The same file read once and viewed in place (its fp32, bf16 or fp16
// elements are not widened): fake-quant and quantize read it without a copy.
struct InputTensor {
  io::Array array;  // the file's elements, as read
  TensorView view;  // over array.bytes
};
InputTensor load_input(const std::filesystem::path& path);
// Writes fp32 values as an .npy straight from `values` (no copy).
void write_f32_npy(const std::filesystem::path& path, std::span<const int64_t> shape, std::span<const float> values);

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
void add_identify(CLI::App& app, Action& action);

}  // namespace fp4emu::cli
