#include <fmt/format.h>

#include "cli.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"

namespace fp4emu::cli {

void add_exec_flags(CLI::App* cmd, ExecFlags& f) {
  cmd->add_option("--impl", f.impl,
                  "Implementation: auto (fast SIMD path where it covers the recipe, else the reference), "
                  "reference, or fast (error where it does not cover the recipe)");
  cmd->add_option("--threads", f.threads, "Threads for the fast path (0: OMP_NUM_THREADS, else every core)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
}

namespace {
Impl parse_impl_flag(const std::string& name) {
  if (name.empty()) return Impl::automatic;
  const std::optional<Impl> impl = parse_impl(name);
  if (!impl) throw InputError(fmt::format("--impl '{}' is unknown; use auto, reference or fast", name));
  return *impl;
}
}  // namespace

DequantOptions to_dequant_options(const ExecFlags& f) {
  DequantOptions o;
  o.impl = parse_impl_flag(f.impl);
  o.threads = f.threads;
  return o;
}

void add_quant_flags(CLI::App* cmd, QuantFlags& f, bool with_packing) {
  cmd->add_option("--format,-f", f.format, "Format: hif4, mxfp4 or nvfp4 (default recipe unless --recipe)");
  cmd->add_option("--recipe,-r", f.recipe, "Recipe id, e.g. hif4.a6 or a6 with --format hif4 (see `fp4emu formats`)");
  cmd->add_option("--axis", f.axis, "Block axis (negative counts from the end)")->default_val(-1);
  cmd->add_option("--tail", f.tail, "Axis length not a multiple of the block: pad | error (default: the recipe's)");
  cmd->add_option("--round", f.round, "Element rounding override where the recipe allows it: rne | rha | rtz | tiesToZero");
  cmd->add_option("--global-amax", f.global_amax, "NVFP4: per-tensor amax to use instead of the input's");
  if (with_packing) {
    cmd->add_option("--nibble-order", f.nibble_order, "low_first | high_first | split_half (default: the recipe's)");
    cmd->add_option("--scale-bit-order", f.scale_bit_order, "HiF4 L2/L3 bits: lsb_first | msb_first (default: the recipe's)");
  }
  add_exec_flags(cmd, f.exec);
}

std::string resolve_recipe_id(const std::string& format, const std::string& recipe) {
  if (recipe.empty()) {
    if (format.empty()) throw InputError("no format given: use --format hif4|mxfp4|nvfp4 or --recipe ID");
    if (!parse_format(format))
      throw InputError(fmt::format("unknown format '{}'; use hif4, mxfp4 or nvfp4", format));
    return format;
  }
  std::string id = recipe;
  if (recipe.find('.') == std::string::npos && !format.empty()) id = format + "." + recipe;
  const Recipe* r = find_recipe(id);
  if (r && !format.empty() && format_name(r->format) != format)
    throw InputError(fmt::format("recipe {} belongs to {}, not to --format {}", id, format_name(r->format), format));
  return id;  // unknown ids are reported by resolve_options with the list of recipes
}

QuantOptions to_quant_options(const QuantFlags& f) {
  QuantOptions o;
  o.recipe = resolve_recipe_id(f.format, f.recipe);
  o.axis = f.axis;
  if (!f.tail.empty()) {
    o.tail = parse_tail(f.tail);
    if (!o.tail) throw InputError(fmt::format("--tail '{}' is unknown; use pad or error", f.tail));
  }
  if (!f.round.empty()) {
    o.rounding = parse_rounding(f.round);
    if (!o.rounding) throw InputError(fmt::format("--round '{}' is unknown; use rne, rha, rtz or tiesToZero", f.round));
  }
  if (!f.nibble_order.empty()) {
    o.nibble_order = parse_nibble_order(f.nibble_order);
    if (!o.nibble_order)
      throw InputError(fmt::format("--nibble-order '{}' is unknown; use low_first, high_first or split_half",
                                   f.nibble_order));
  }
  if (!f.scale_bit_order.empty()) {
    o.scale_bit_order = parse_scale_bit_order(f.scale_bit_order);
    if (!o.scale_bit_order)
      throw InputError(fmt::format("--scale-bit-order '{}' is unknown; use lsb_first or msb_first",
                                   f.scale_bit_order));
  }
  o.global_amax = f.global_amax;
  const DequantOptions exec = to_dequant_options(f.exec);
  o.impl = exec.impl;
  o.threads = exec.threads;
  return o;
}

Tensor load_tensor(const std::filesystem::path& path, InputDType* dtype) {
  const std::string ext = path.extension().string();
  if (ext != ".npy")
    throw InputError(fmt::format("{}: expected a .npy file (fp32, bf16 or fp16); safetensors dumps are read by "
                                 "`fp4emu compare` in a later release",
                                 path.string()));
  const io::Array a = io::read_npy(path);
  switch (a.dtype) {
    case io::DType::f32: *dtype = InputDType::f32; break;
    case io::DType::bf16: *dtype = InputDType::bf16; break;
    case io::DType::f16: *dtype = InputDType::f16; break;
    default:
      throw InputError(fmt::format("{}: dtype {} is not a float input; fp4emu quantizes f32, bf16 or f16 arrays "
                                   "(convert with numpy: a.astype(np.float32))",
                                   path.string(), io::dtype_name(a.dtype)));
  }
  Tensor t;
  t.shape = a.shape;
  t.data = io::to_f32(a, path.string());
  return t;
}

}  // namespace fp4emu::cli
