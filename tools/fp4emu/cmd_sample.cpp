// `fp4emu sample OUT.safetensors`: a seeded synthetic activation dump (the
// model is described in fp4emu/analysis/sample.hpp). Tensors are generated
// --threads at a time (each from its own random stream, so the bytes do not
// depend on the count) and written in file order: memory holds that many
// tensors, and the dump may be larger than memory.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <limits>

#include "cli.hpp"
#include "fp4emu/analysis/sample.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "progress.hpp"

namespace fp4emu::cli {
namespace {

struct Args {
  std::string out;
  SampleOptions options;
  std::string progress = "auto";
  int threads = 0;
};

int run(const Args& a) {
  check_progress_mode(a.progress);
  const int threads = thread_count(a.threads);
  if (std::filesystem::path(a.out).extension() != ".safetensors")
    throw InputError(fmt::format("output '{}': sample writes safetensors; name the file *.safetensors",
                                 io::printable(a.out)));
  io::check_output_path(a.out, "output");
  const std::vector<SampleTensor> layout = sample_layout(a.options);
  std::vector<io::SafetensorsEntry> entries;
  double total = 0;
  for (const SampleTensor& t : layout) {
    entries.push_back({t.name, io::DType::bf16, t.shape, 0, 0});
    total += static_cast<double>(t.shape[0] * t.shape[1]);
  }
  Progress progress("sample", a.progress, total);
  io::SafetensorsWriter writer(a.out, entries, sample_metadata(a.options));
  double done = 0;
  std::vector<std::vector<uint16_t>> batch(static_cast<size_t>(threads));
  for (size_t first = 0; first < layout.size(); first += batch.size()) {
    const size_t count = std::min(batch.size(), layout.size() - first);
    progress.update(done, layout[first].name);
    std::vector<std::exception_ptr> errors(count);  // the first in file order is reported
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t k = 0; k < count; ++k) {
      try {
        batch[k] = generate_sample_tensor(a.options, layout[first + k]);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    for (size_t k = 0; k < count; ++k) {
      writer.write_next(std::span(reinterpret_cast<const uint8_t*>(batch[k].data()), batch[k].size() * 2));
      done += static_cast<double>(batch[k].size());
      batch[k] = {};
    }
  }
  writer.commit();
  progress.clear();
  fmt::print("{}: {} tensors ({} layers x qkv_in, o_in, gateup_in, down_in), {} tokens, hidden {}, intermediate {}, "
             "{} hot channels, seed {}, bf16\n",
             a.out, layout.size(), a.options.layers, a.options.tokens, a.options.hidden,
             sample_intermediate(a.options), a.options.outliers, a.options.seed);
  return 0;
}

}  // namespace

void add_sample(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  const SampleOptions d;
  auto* cmd = app.add_subcommand(
      "sample", "Write a seeded synthetic dump of LLM-like linear-layer inputs (bf16 .safetensors)");
  cmd->add_option("OUT", args->out, "Output .safetensors file")->required();
  cmd->add_option("--seed", args->options.seed, "Random seed; the same options give the same bytes")
      ->default_val(d.seed)
      ->check(any_seed());
  // The integers' ranges are checked by check_sample_options (sample.hpp).
  const CLI::Validator integer = integer_in(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  cmd->add_option("--layers", args->options.layers, "Transformer layers (4 tensors each)")
      ->default_val(d.layers)
      ->check(integer);
  cmd->add_option("--tokens", args->options.tokens, "Rows of every tensor (tokens)")->default_val(d.tokens)->check(integer);
  cmd->add_option("--hidden", args->options.hidden, "Width of qkv_in, o_in, gateup_in")
      ->default_val(d.hidden)
      ->check(integer);
  cmd->add_option("--intermediate", args->options.intermediate,
                  "Width of down_in (default: 8/3 hidden rounded up to a multiple of 64)")
      ->check(integer);
  cmd->add_option("--outliers", args->options.outliers,
                  "Persistent hot channels in the hidden dims (and as many in the intermediate dims)")
      ->default_val(d.outliers)
      ->check(integer);
  cmd->add_option("--progress", args->progress, "Progress bar on stderr: auto (when a terminal) | always | never")
      ->default_val("auto");
  add_threads_option(cmd, args->threads, "Tensors generated at once (each held in memory); the bytes do not depend on it");
  cmd->footer(
      "The bundled data/sample_dump.safetensors is `fp4emu sample data/sample_dump.safetensors` (the defaults).\n"
      "Example: fp4emu sample big.safetensors --layers 28 --tokens 2048 --hidden 3584 --intermediate 18944 --seed 7");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
