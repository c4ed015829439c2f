// `fp4emu fake-quant IN.npy OUT.npy`: quantize and dequantize in one step.
#include <fmt/format.h>

#include <memory>
#include <span>

#include "cli.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/printable.hpp"

namespace fp4emu::cli {
namespace {

struct Args {
  std::string in, out;
  QuantFlags flags;
};

int run(const Args& a) {
  const QuantOptions options = to_quant_options(a.flags);
  if (std::filesystem::path(a.out).extension() != ".npy")
    throw InputError(
        fmt::format("output {}: fake-quant writes .npy; name the output file *.npy", io::printable(a.out)));
  check_not_an_input(a.out, "output", {a.in, a.flags.sr.rbits});
  QuantOptions o = options;
  const InputTensor x = load_input(a.in);
  RandomBits rbits;
  load_random_bits(a.flags, x.view.shape, o, rbits);
  // The input is read in place and the output written from where the kernel
  // leaves it: peak memory is the input plus the output (docs/architecture.md §7.4).
  // Not zero-filled: the kernel writes every element.
  const size_t n = static_cast<size_t>(x.array.numel());
  const auto y = std::make_unique_for_overwrite<float[]>(n);
  const std::span<float> values(y.get(), n);
  fake_quant(x.view, o, output_view(values, x.view.shape));
  write_f32_npy(a.out, x.view.shape, values);
  return 0;
}

}  // namespace

void add_fake_quant(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("fake-quant", "Quantize and dequantize a tensor (fp32/bf16/fp16 .npy in, fp32 .npy out)");
  cmd->add_option("IN", args->in, "Input .npy")->required();
  cmd->add_option("OUT", args->out, "Output .npy (fp32, same shape)")->required();
  add_quant_flags(cmd, args->flags, false);
  cmd->footer("Example: fp4emu fake-quant x.npy xq.npy --format nvfp4 --recipe nvfp4.torchao --axis -1\n"
              "         fp4emu fake-quant g.npy gq.npy --format nvfp4 --round stochastic --seed 42 --offset 0\n"
              "         fp4emu fake-quant g.npy gq.npy --format mxfp4 --round stochastic --rbits r.npy");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
