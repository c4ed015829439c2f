// `fp4emu identify`: which recipe does a kernel implement?
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "cli.hpp"
#include "fp4emu/analysis/identify.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "report.hpp"

namespace fp4emu::cli {
namespace {

struct Args {
  std::string input, output, packed, codes, scales, format, json_out;
  int axis = -1;
  bool axis_given = false;
  std::optional<float> global_amax;
  int top = 3;
  int examples = 5;
  int threads = 0;
};

std::string shape_text(const std::vector<int64_t>& s) { return io::shape_string(s); }

// Runs a file read; its error names the option the file came from.
template <class F>
auto from_option(const char* option, F&& read) {
  try {
    return read();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", option, e.what()));
  }
}

// The geometry every recipe of the format shares (shape, axis, blocks).
PackedTensor geometry(const Tensor& x, Format f, int axis) {
  QuantOptions q;
  q.recipe = std::string(format_name(f));
  q.axis = axis;
  const ResolvedOptions o = resolve_options(q, x.shape);
  PackedTensor p;
  p.format = f;
  p.shape = x.shape;
  p.axis = o.axis;
  p.block_size = block_size(f);
  p.axis_len = x.shape[o.axis];
  p.padded_len = (p.axis_len + p.block_size - 1) / p.block_size * p.block_size;
  p.rows = x.numel() / p.axis_len;
  return p;
}

std::vector<uint8_t> read_codes(const std::string& path, const PackedTensor& g) {
  const io::Array a = io::read_npy(path);
  const std::vector<int64_t> want = g.stored_shape(g.padded_len / 2);
  if (a.dtype != io::DType::u8 || a.numel() != g.rows * g.padded_len / 2)
    throw InputError(fmt::format(
        "{}: codes must be uint8 of shape {} (the input's shape without axis {}, then {} padded values / 2 codes "
        "per byte), got {} {}; write the packed bytes with numpy as np.uint8",
        path, shape_text(want), g.axis, g.padded_len, io::dtype_name(a.dtype), shape_text(a.shape)));
  return a.bytes;
}

std::vector<uint8_t> read_scales(const std::string& path, const PackedTensor& g) {
  const io::Array a = io::read_npy(path);
  const int64_t blocks = g.num_blocks();
  const std::vector<int64_t> want = g.stored_shape(g.blocks_per_row());
  if (g.format == Format::hif4) {
    // HiF4 scale words: uint32 per block, or their four little-endian bytes.
    if ((a.dtype == io::DType::u32 && a.numel() == blocks) || (a.dtype == io::DType::u8 && a.numel() == 4 * blocks))
      return a.bytes;
    throw InputError(fmt::format("{}: HiF4 scales must be uint32 words of shape {} (or uint8 with 4 bytes per "
                                 "block, little-endian), got {} {}",
                                 path, shape_text(want), io::dtype_name(a.dtype), shape_text(a.shape)));
  }
  if (a.dtype != io::DType::u8 || a.numel() != blocks)
    throw InputError(fmt::format("{}: {} scales must be uint8 of shape {} (one {} byte per block of {}, linear "
                                 "row-major layout), got {} {}",
                                 path, format_name(g.format), shape_text(want),
                                 g.format == Format::mxfp4 ? "E8M0" : "UE4M3", g.block_size,
                                 io::dtype_name(a.dtype), shape_text(a.shape)));
  return a.bytes;
}

std::vector<float> read_values(const std::string& path, const Tensor& x) {
  InputDType dtype;
  Tensor y = load_tensor(path, &dtype);
  if (y.shape != x.shape)
    throw InputError(fmt::format("{}: the dequantized output has shape {}, the input {}; they must be equal", path,
                                 shape_text(y.shape), shape_text(x.shape)));
  return std::move(y.data);
}

int run(const Args& a) {
  const std::optional<Format> format = parse_format(a.format);
  if (!format) throw InputError(fmt::format("--format '{}' is unknown; use hif4, mxfp4 or nvfp4", a.format));
  const bool split = !a.codes.empty() || !a.scales.empty();
  if (a.output.empty() && a.packed.empty() && !split)
    throw InputError("no kernel output given: use --output Y.npy, --packed P.safetensors, or --codes C.npy "
                     "and/or --scales S.npy");
  if (!a.packed.empty() && split)
    throw InputError("--packed holds codes and scales already; give either --packed or --codes/--scales");
  if (!a.json_out.empty()) {
    io::check_output_path(a.json_out, "--json");
    check_not_an_input(a.json_out, "--json", {a.input, a.output, a.packed, a.codes, a.scales});
  }
  if (a.global_amax) {  // the shared --global-amax rules (S_enc must stay finite)
    QuantFlags flags;
    flags.format = a.format;
    flags.global_amax = a.global_amax;
    to_quant_options(flags);
  }

  analysis::IdentifyOptions o;
  o.format = *format;
  o.axis = a.axis;
  o.global_amax = a.global_amax;
  o.threads = a.threads;
  o.diagnosis.max_examples = a.examples;
  const Tensor x = from_option("--input", [&] { return load_tensor(a.input, &o.input_dtype); });

  analysis::KernelOutput k;
  if (!a.packed.empty()) {
    const PackedTensor p = from_option("--packed", [&] { return read_packed(a.packed); });
    if (p.format != *format)
      throw InputError(fmt::format("{}: field format is {}, but --format is {}", a.packed, format_name(p.format),
                                   a.format));
    if (p.shape != x.shape)
      throw InputError(fmt::format("{}: field shape is {}, but the input {} has shape {}", a.packed,
                                   shape_text(p.shape), a.input, shape_text(x.shape)));
    if (!a.axis_given) o.axis = p.axis;
    const PackedTensor g = geometry(x, *format, o.axis);
    if (p.axis != g.axis)
      throw InputError(fmt::format("{}: field axis is {}, but --axis {} is axis {}; drop --axis or pass --axis {}",
                                   a.packed, p.axis, a.axis, g.axis, p.axis));
    // The per-tensor amax the kernel recorded is the one it used.
    if (!o.global_amax && *format == Format::nvfp4 && std::isfinite(p.global_amax) && p.global_amax > 0.0f)
      o.global_amax = p.global_amax;
    k.codes = p.codes;
    k.scales = p.scales;
  }
  const PackedTensor g = geometry(x, *format, o.axis);
  if (!a.codes.empty()) k.codes = from_option("--codes", [&] { return read_codes(a.codes, g); });
  if (!a.scales.empty()) k.scales = from_option("--scales", [&] { return read_scales(a.scales, g); });
  if (!a.output.empty()) k.values = from_option("--output", [&] { return read_values(a.output, x); });

  const analysis::IdentifyResult r = analysis::identify(x, k, o);
  fmt::print("{}", analysis::identify_text(r, a.top));
  if (!a.json_out.empty()) write_text(a.json_out, analysis::identify_json(r));
  return 0;  // a question answered; the report and --json ("exact") say whether anything matched
}

}  // namespace

void add_identify(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "identify",
      "Which recipe does a kernel implement? Runs every recipe of the format with every rounding it allows (and "
      "every nibble order / HiF4 scale bit order) on the kernel's input, ranks them by agreement with the "
      "kernel's output, and explains the differences of the closest ones. Exit 0 whenever the report is written, "
      "match or not (its first line and --json's \"exact\" say which)");
  cmd->add_option("--input", args->input, "The kernel's input .npy (fp32, bf16 or fp16)")->required();
  cmd->add_option("--output", args->output, "The kernel's dequantized output .npy (the input's shape)");
  cmd->add_option("--packed", args->packed,
                  "The kernel's packed .safetensors (codes, scales; the layout of `fp4emu quantize`)");
  cmd->add_option("--codes", args->codes, "The kernel's codes .npy: uint8 [..., padded_len/2], block axis last");
  cmd->add_option("--scales", args->scales,
                  "The kernel's block scales .npy: uint8 [..., blocks] (HiF4: uint32 words, or uint8 [..., blocks, 4])");
  cmd->add_option("--format,-f", args->format, "hif4, mxfp4 or nvfp4")->required();
  cmd->add_option("--axis", args->axis, "Block axis (negative counts from the end; default -1, or the packed file's)")
      ->check(axis_range())
      ->each([args](const std::string&) { args->axis_given = true; });
  cmd->add_option("--global-amax", args->global_amax,
                  "NVFP4: the per-tensor amax the kernel used (default: the packed file's, else the input's)")
      ->check(real_in({0, std::numeric_limits<float>::max(), false, false, true}));
  cmd->add_option("--json", args->json_out, "Write every candidate, ranked, with its classes of difference");
  cmd->add_option("--top", args->top, "Candidates to print (default 3)")->check(integer_in(1, 10000));
  cmd->add_option("--examples", args->examples, "First cases shown per class of difference (default 5)")
      ->check(integer_in(1, 10000));
  add_threads_option(cmd, args->threads, "Threads for the fast path");
  cmd->footer(
      "Candidates that agree equally are listed in recipe-table order (`fp4emu formats`, the default recipe "
      "first), the recipe's own rounding and packing first.\n"
      "Example: fp4emu identify --input x.npy --codes codes.npy --scales scales.npy --format mxfp4\n"
      "         fp4emu identify --input x.npy --output y.npy --format nvfp4 --global-amax 2688 --json id.json");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
