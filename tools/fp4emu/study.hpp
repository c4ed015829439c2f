#pragma once
// What the dump studies (underflow, resq; compare for the inputs, --tensor,
// rounding, threads and progress) share: the dump inputs, the options that
// select tensors, recipes, rounding, threads and progress, and the input
// section of their reports. One declaration of each option, one rule.
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "pictures.hpp"
#include "fp4emu/analysis/underflow.hpp"

namespace fp4emu::cli {

struct StudyFlags {
  std::vector<std::string> inputs;  // DUMP...: files, directories, globs, sharded indexes
  std::vector<std::string> tensors;
  std::vector<std::string> formats;
  std::vector<std::string> recipes;
  std::string scale_rule;
  std::string round;
  SrFlags sr;  // --round stochastic's random bits
  int threads = 0;
  std::string progress = "auto";
  std::string image_format = "png";
};

// The DUMP... positional (one or more inputs), described once for every command.
CLI::Option* add_dump_inputs(CLI::App* cmd, std::vector<std::string>& inputs);
// The DUMP... positional, --tensor, --format, --recipe, --scale-rule, --round
// (with the SR group: --sr-seed, since the studies' --seed is their own),
// --threads, --progress and --image-format.
void add_study_flags(CLI::App* cmd, StudyFlags& flags);
// Its parts, for a command that takes some of them (compare, whose recipes
// follow rules of their own: `all`, short ids): DUMP... and --tensor,-t
// (`default_text`: what no --tensor selects); --round and the SR group;
// --threads (`threads_help`) and --progress.
void add_tensor_flags(CLI::App* cmd, StudyFlags& flags, const std::string& default_text);
void add_rounding_flags(CLI::App* cmd, StudyFlags& flags, const SrScope& scope);
void add_run_flags(CLI::App* cmd, StudyFlags& flags, const std::string& threads_help);

// --split-rows-above BYTES (suffixes KiB, MiB, GiB; default 256 MiB): tensors
// larger than that are studied as row ranges (distributed.hpp "row ranges").
void add_split_rows_option(CLI::App* cmd, uint64_t& split_above);

// Why --rbits is refused by the commands that quantize many tensors: one
// array of bits cannot fit them all.
extern const char* const kRbitsManyTensors;

// The flags checked and resolved, before any input is read.
struct Study {
  std::vector<const Recipe*> recipes;
  std::optional<Rounding> rounding;
  ImageFormats images;
  StochasticBits stochastic;  // --round stochastic: the Philox key (every tensor takes the same)
  int threads = 1;            // resolved: at least 1
};
Study resolve_study(const StudyFlags& flags);
// resolve_study's part for the rounding flags: --round and the SR group.
void resolve_rounding(const StudyFlags& flags, std::optional<Rounding>& rounding, StochasticBits& stochastic);

// The QuantOptions of one recipe of the study for a tensor of `dtype`.
QuantOptions study_quant_options(const Study& study, const Recipe& recipe, InputDType dtype);

// A report's "rounding" field: the element rounding (the recipe's own when
// `rounding` is unset) and, under stochastic rounding, where the random bits
// come from: {"source": "philox-te", "seed", "offset", "map"}, {"source":
// "philox-index", "seed", "offset"}, or {"source": "given bytes" | "given
// words", "map"}; null otherwise.
nlohmann::ordered_json rounding_json(std::optional<Rounding> rounding, const StochasticBits& bits);
// The same in the two CSV columns `rounding,random_bits` (describe() of the
// bits; empty without stochastic rounding).
std::string rounding_csv(std::optional<Rounding> rounding, const Recipe& recipe, const StochasticBits& bits);

// The report's "input": every file (size, sha256, safetensors metadata), the
// tensors studied and the duplicates reported once (docs/analysis.md "Inputs").
nlohmann::ordered_json inputs_json(const analysis::Dump& dump);
// "3 file(s), 32 tensor(s), 16 duplicate(s) reported once": the first line of
// a study's table.
std::string inputs_line(const analysis::Dump& dump);

// Creates the output directory (InputError naming --out when it cannot).
void make_out_dir(const std::string& out);

}  // namespace fp4emu::cli
