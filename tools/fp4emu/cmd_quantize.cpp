// `fp4emu quantize IN.npy OUT.safetensors` and `fp4emu dequantize IN.safetensors OUT.npy`.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <span>

#include "cli.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/quant/packed_io.hpp"

namespace fp4emu::cli {
namespace {

struct QuantizeArgs {
  std::string in, out;
  QuantFlags flags;
  std::string scale_layout = "linear";
};

int run_quantize(const QuantizeArgs& a) {
  QuantOptions o = to_quant_options(a.flags);
  if (std::filesystem::path(a.out).extension() != ".safetensors")
    throw InputError(fmt::format("output {}: quantize writes a packed .safetensors file; name it *.safetensors",
                                 io::printable(a.out)));
  check_not_an_input(a.out, "output", {a.in, a.flags.sr.rbits});
  const InputTensor x = load_input(a.in);  // read in place, not widened
  RandomBits rbits;
  load_random_bits(a.flags, x.view.shape, o, rbits);
  const PackedTensor p = quantize(x.view, o);
  // The scales in the layout the kernel reads (scale_layout.hpp has the byte maps).
  const std::optional<StoredScaleLayout> layout = parse_stored_scale_layout(a.scale_layout);
  if (!layout || !layout_applies(*layout, p.format))
    throw InputError(fmt::format("--scale-layout '{}' {}; {} scales take linear or {}", a.scale_layout,
                                 layout ? "does not apply to " + std::string(format_name(p.format)) : "is unknown",
                                 format_name(p.format), p.format == Format::hif4 ? "hif4_cube" : "swizzled_128x4"));
  write_packed(a.out, p, *layout);
  return 0;
}

struct DequantizeArgs {
  std::string in, out;
  ExecFlags exec;
};

int run_dequantize(const DequantizeArgs& a) {
  if (std::filesystem::path(a.out).extension() != ".npy")
    throw InputError(
        fmt::format("output {}: dequantize writes .npy; name the output file *.npy", io::printable(a.out)));
  check_not_an_input(a.out, "output", {a.in});
  const PackedTensor p = read_packed(a.in);
  // Not zero-filled: dequantize writes every element; written from here.
  const size_t n = static_cast<size_t>(io::checked_byte_size(p.shape, io::DType::f32).value() / 4);
  const auto y = std::make_unique_for_overwrite<float[]>(n);
  const std::span<float> values(y.get(), n);
  dequantize(p, p.codes, p.scales, to_dequant_options(a.exec), output_view(values, p.shape));
  write_f32_npy(a.out, p.shape, values);
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
  cmd->add_option("--scale-layout", args->scale_layout,
                  "Layout of the stored scales: linear (row-major [rows, blocks], the default), swizzled_128x4 "
                  "(MXFP4/NVFP4: the Blackwell block-scaled GEMM layout) or hif4_cube (HiF4: the Ascend Cube "
                  "layout); dequantize reads every layout");
  cmd->footer("Example: fp4emu quantize w.npy w.safetensors --format hif4 --recipe amct\n"
              "         fp4emu quantize x.npy x.safetensors --format nvfp4 --axis 1 --scale-layout swizzled_128x4");
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
