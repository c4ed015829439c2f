#include "study.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "cli.hpp"
#include "distributed.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/golden/sha256.hpp"
#include "fp4emu/io/printable.hpp"

namespace fp4emu::cli {

using nlohmann::ordered_json;

CLI::Option* add_dump_inputs(CLI::App* cmd, std::vector<std::string>& inputs) {
  return cmd
      ->add_option("DUMP", inputs,
                   "Activation dump(s): .safetensors or .npy files, directories (every *.safetensors and *.npy in "
                   "them, sorted), globs ('dump/step_*.safetensors') or a sharded index "
                   "(model.safetensors.index.json); tensor names unique across them")
      ->required();
}

void add_tensor_flags(CLI::App* cmd, StudyFlags& f, const std::string& default_text) {
  add_dump_inputs(cmd, f.inputs);
  add_list_option(cmd, "--tensor,-t", f.tensors,
                  fmt::format("Tensor name, glob, or re:REGEX matching the whole name, e.g. "
                              "'model.layers.*.mlp.down_proj.input' (repeatable; default: {})",
                              default_text),
                  false);
}

void add_rounding_flags(CLI::App* cmd, StudyFlags& f, const SrScope& scope) {
  cmd->add_option("--round", f.round,
                  fmt::format("Element rounding override where the recipe allows it: rne | rha | rtz | tiesToZero | "
                              "stochastic (stochastic needs {}; default: each recipe's own)",
                              scope.own_seed ? "--sr-seed" : "--seed"));
  add_sr_flags(cmd, f.sr, scope);
}

void add_run_flags(CLI::App* cmd, StudyFlags& f, const std::string& threads_help) {
  add_threads_option(cmd, f.threads, threads_help);
  cmd->add_option("--progress", f.progress,
                  "Progress on stderr (tensors done, elapsed time, ETA): auto (when a terminal) | always | never")
      ->default_val("auto");
}

void add_study_flags(CLI::App* cmd, StudyFlags& f) {
  add_tensor_flags(cmd, f, "every float tensor");
  add_list_option(cmd, "--format,-f", f.formats, "Formats, default recipe each (default: hif4,mxfp4,nvfp4)", true);
  add_list_option(cmd, "--recipe,-r", f.recipes,
                  "Recipe ids, comma-separated, instead of the formats' defaults (see `fp4emu formats`)", true);
  cmd->add_option("--scale-rule", f.scale_rule,
                  "MXFP4 scale rule: ocp (mxfp4.ocp, default) or ceil (2^ceil(log2(amax/6)): mxfp4.rceil)");
  add_rounding_flags(cmd, f, {.own_seed = true, .rbits_refusal = kRbitsManyTensors});
  add_run_flags(cmd, f, "Threads over tensors and inside each tensor's work; results do not depend on it");
  add_image_format_option(cmd, f.image_format);
}

void add_split_rows_option(CLI::App* cmd, uint64_t& split_above) {
  split_above = dist::kDefaultSplitAbove;
  cmd->add_option("--split-rows-above", split_above,
                  "Study a tensor larger than this (bytes as stored; KiB, MiB, GiB suffixes) as row ranges, shared "
                  "among MPI ranks like whole tensors; a split tensor's sums are merged range by range (its last "
                  "digits may differ from a whole-tensor run), the same for any number of ranks (default: 256MiB; "
                  "docs/analysis.md §1.6)")
      ->transform(CLI::AsSizeValue(false))
      // transform() puts a validator in front, so this runs before the size
      // conversion, which would read "-1" as 2^64 - 1 bytes.
      ->transform(CLI::Validator(
          [](std::string& text) {
            return text.find('-') == std::string::npos
                       ? std::string()
                       : "'" + text + "' is negative; give a size in bytes of 1 or more (e.g. 512MiB)";
          },
          "SIZE"))
      ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));
}

const char* const kRbitsManyTensors =
    "this command quantizes many tensors and one bits array fits one of them; give a Philox seed instead (every "
    "tensor keyed by the same seed and offset), or quantize one tensor with `fp4emu fake-quant --rbits`";

Study resolve_study(const StudyFlags& f) {
  check_progress_mode(f.progress);
  Study s;
  s.recipes = analysis::study_recipes(f.formats, f.recipes, f.scale_rule);
  resolve_rounding(f, s.rounding, s.stochastic);
  s.images = parse_image_format(f.image_format);
  s.threads = thread_count(f.threads);  // the library's rule, a count to show and pass on
  return s;
}

void resolve_rounding(const StudyFlags& f, std::optional<Rounding>& rounding, StochasticBits& stochastic) {
  rounding = parse_round_flag(f.round);
  apply_sr_flags(f.sr, rounding, stochastic);
}

QuantOptions study_quant_options(const Study& study, const Recipe& recipe, InputDType dtype) {
  QuantOptions o;
  o.recipe = std::string(recipe.id);
  o.rounding = study.rounding;
  o.stochastic = study.stochastic;
  o.input_dtype = dtype;
  return o;
}

ordered_json rounding_json(std::optional<Rounding> rounding, const StochasticBits& bits) {
  ordered_json j;
  j["round"] = rounding ? ordered_json(to_string(*rounding)) : ordered_json("recipe default");
  if (rounding != Rounding::stochastic) {
    j["random_bits"] = nullptr;
    return j;
  }
  ordered_json b;
  if (bits.seed) {
    b["source"] = to_string(bits.rng);
    b["seed"] = *bits.seed;
    b["offset"] = bits.offset;
    if (bits.rng == SrRng::philox_te) b["map"] = to_string(bits.map);
  } else {
    b["source"] = bits.words.empty() ? "given bytes" : "given words";
    if (!bits.words.empty()) b["map"] = to_string(bits.map);
  }
  b["text"] = describe(bits);
  j["random_bits"] = b;
  return j;
}

std::string rounding_csv(std::optional<Rounding> rounding, const Recipe& recipe, const StochasticBits& bits) {
  const Rounding r = rounding.value_or(recipe.element_rounding);
  return fmt::format("{},{}", to_string(r), r == Rounding::stochastic ? csv_text(describe(bits)) : "");
}

ordered_json inputs_json(const analysis::Dump& dump) {
  const io::TensorSet& set = dump.set();
  ordered_json files = ordered_json::array();
  for (size_t f = 0; f < set.files().size(); ++f)
    files.push_back({{"file", set.files()[f].string()},
                     {"kind", set.kind(f) == io::TensorFile::Kind::npy ? "npy" : "safetensors"},
                     {"size_bytes", set.file_size(f)},
                     {"sha256", golden::sha256_file_hex(set.files()[f])},
                     {"metadata", set.metadata(f)}});
  return {{"inputs", set.label()},
          {"files", files},
          {"tensors", dump.size()},
          {"duplicates", "tensors bit-identical to an earlier one (same dtype, shape and bytes) are studied and pooled "
                         "once, under the first name; `aliases` lists them"},
          {"aliases", dump.aliases()}};
}

std::string inputs_line(const analysis::Dump& dump) {
  const size_t files = dump.set().files().size();
  return fmt::format("{}: {} file{}, {} tensor(s){}", dump.label(), files, files == 1 ? "" : "s", dump.size(),
                     dump.aliases().empty()
                         ? ""
                         : fmt::format(", {} duplicate(s) reported once under the first name", dump.aliases().size()));
}

void make_out_dir(const std::string& out) {
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || !std::filesystem::is_directory(out))
    throw InputError(fmt::format("--out {}: cannot create the output directory ({})", io::printable(out),
                                 ec ? ec.message() : "not a directory"));
}

}  // namespace fp4emu::cli
