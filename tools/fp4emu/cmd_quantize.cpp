// `fp4emu quantize IN.npy OUT.safetensors` and `fp4emu dequantize IN.safetensors OUT.npy`.
#include <fmt/format.h>

#include "cli.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/packed_io.hpp"

namespace fp4emu::cli {
namespace {

struct QuantizeArgs {
  std::string in, out;
  QuantFlags flags;
};

int run_quantize(const QuantizeArgs& a) {
  QuantOptions o = to_quant_options(a.flags);
  if (std::filesystem::path(a.out).extension() != ".safetensors")
    throw InputError(fmt::format("output {}: quantize writes a packed .safetensors file; name it *.safetensors", a.out));
  check_not_an_input(a.out, "output", {a.in});
  const Tensor x = load_tensor(a.in, &o.input_dtype);
  write_packed(a.out, quantize(x, o));
  return 0;
}

struct DequantizeArgs {
  std::string in, out;
  ExecFlags exec;
};

int run_dequantize(const DequantizeArgs& a) {
  if (std::filesystem::path(a.out).extension() != ".npy")
    throw InputError(fmt::format("output {}: dequantize writes .npy; name the output file *.npy", a.out));
  check_not_an_input(a.out, "output", {a.in});
  const Tensor y = dequantize(read_packed(a.in), to_dequant_options(a.exec));
  io::write_npy(a.out, io::from_f32(y.shape, y.data));
  return 0;
}

}  // namespace

void add_quantize(CLI::App& app, Action& action) {
  auto args = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand("quantize", "Quantize a tensor to the packed form (codes, scales, metadata)");
  cmd->add_option("IN", args->in, "Input .npy (fp32, bf16 or fp16)")->required();
  cmd->add_option("OUT", args->out, "Output .safetensors with tensors codes, scales (and global_scale for NVFP4)")
      ->required();
  add_quant_flags(cmd, args->flags, true);
  cmd->footer("Example: fp4emu quantize w.npy w.safetensors --format hif4 --recipe amct");
  cmd->callback([&action, args] { action = [args] { return run_quantize(*args); }; });
}

void add_dequantize(CLI::App& app, Action& action) {
  auto args = std::make_shared<DequantizeArgs>();
  auto* cmd = app.add_subcommand("dequantize", "Decode a packed .safetensors file written by `fp4emu quantize`");
  cmd->add_option("IN", args->in, "Packed .safetensors")->required();
  cmd->add_option("OUT", args->out, "Output .npy (fp32, the original shape)")->required();
  add_exec_flags(cmd, args->exec);
  cmd->footer("Example: fp4emu dequantize w.safetensors w_dq.npy");
  cmd->callback([&action, args] { action = [args] { return run_dequantize(*args); }; });
}

}  // namespace fp4emu::cli
