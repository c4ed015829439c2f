#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "cli.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/quant/sr_options.hpp"

namespace fp4emu::cli {

// ---- option values -------------------------------------------------------------

namespace {

// The value as it may be echoed: escaped, and short.
std::string shown(const std::string& text) { return "'" + io::printable(text, 40) + "'"; }

std::string with_hint(const std::string& message, const std::string& hint) {
  return hint.empty() ? message : message + " (" + hint + ")";
}

template <class T>
bool parse_whole(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi, std::string hint) {
  return CLI::Validator(
      [lo, hi, hint](std::string& text) -> std::string {
        const std::string range = fmt::format("use an integer in {}..{}", lo, hi);
        if (text.empty()) return with_hint("the value is empty; " + range, hint);
        int64_t v = 0;
        if (!parse_whole(text, v)) {
          // Digits only, but beyond int64: out of range rather than junk.
          const bool digits = text.find_first_not_of("-0123456789") == std::string::npos &&
                              text.find_first_of("0123456789") != std::string::npos;
          return with_hint(fmt::format("{} is {}; {}", shown(text), digits ? "out of range" : "not an integer", range),
                           hint);
        }
        if (v < lo || v > hi) return with_hint(fmt::format("{} is out of range; {}", v, range), hint);
        return {};
      },
      fmt::format("INT in [{} - {}]", lo, hi));
}

CLI::Validator any_seed() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string range = "use an integer in 0..18446744073709551615 (2^64 - 1)";
        if (text.empty()) return "the value is empty; " + range;
        uint64_t v = 0;
        if (text[0] == '-' || !parse_whole(text, v))
          return fmt::format("{} is not a seed; {}", shown(text), range);
        return {};
      },
      "UINT64");
}

CLI::Validator real_in(RealRange r, std::string hint) {
  return CLI::Validator(
      [r, hint](std::string& text) -> std::string {
        const std::string range = fmt::format("use a finite number in {}{:g}, {:g}{}", r.lo_open ? "(" : "[", r.lo,
                                              r.hi, r.hi_open ? ")" : "]");
        if (text.empty()) return with_hint("the value is empty; " + range, hint);
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])))
          return with_hint(fmt::format("{} is not a number; {}", shown(text), range), hint);
        if (!std::isfinite(v) || (r.fp32 && !std::isfinite(static_cast<float>(v))))
          return with_hint(fmt::format("{} is not finite{}; {}", shown(text), r.fp32 ? " in fp32" : "", range),
                           hint);
        if (v < r.lo || v > r.hi || (r.lo_open && v == r.lo) || (r.hi_open && v == r.hi))
          return with_hint(fmt::format("{} is out of range; {}", shown(text), range), hint);
        return {};
      },
      "FLOAT");
}

CLI::Validator axis_range() {
  return integer_in(-64, 63, "negative counts from the end; the input's rank bounds it further");
}

CLI::Option* add_threads_option(CLI::App* cmd, int& threads, const std::string& description) {
  return cmd
      ->add_option("--threads", threads,
                   fmt::format("{} (0, the default: every hardware thread, or OMP_NUM_THREADS; at most {})",
                               description, kMaxThreads))
      ->default_val(0)
      ->check(integer_in(0, kMaxThreads, "0 is every hardware thread"));
}

CLI::Option* add_list_option(CLI::App* cmd, const std::string& name, std::vector<std::string>& items,
                             const std::string& description, bool split) {
  // CLI11's own splitting drops empty items and reads "[a,b]" as a list; the
  // items are split here instead, so that `--format hif4,,mxfp4` is refused
  // and a glob such as '[]' stays one value.
  const std::string flag = name.substr(0, name.find(','));
  auto store = [&items, flag, split](const std::vector<std::string>& values) {
    items.clear();
    for (const std::string& value : values) {
      size_t start = 0;
      while (true) {
        const size_t comma = split ? value.find(',', start) : std::string::npos;
        std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (item.empty())
          throw CLI::ValidationError(flag, fmt::format("{} has an empty item; name each item once, separated by commas",
                                                       shown(value)));
        if (std::find(items.begin(), items.end(), item) != items.end())
          throw CLI::ValidationError(flag, fmt::format("{} is given twice; name each item once", shown(item)));
        items.push_back(std::move(item));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
  };
  return cmd->add_option_function<std::vector<std::string>>(name, store, description)->allow_extra_args(false);
}

void check_not_an_input(const std::filesystem::path& output, const std::string& label,
                        std::initializer_list<std::filesystem::path> inputs) {
  for (const std::filesystem::path& input : inputs) {
    if (input.empty()) continue;
    std::error_code ec;  // an output that does not exist yet is no input
    if (std::filesystem::equivalent(output, input, ec))
      throw InputError(fmt::format("{} '{}' is the same file as the input '{}'; give another output path", label,
                                   io::printable(output.string()), io::printable(input.string())));
  }
}

void add_exec_flags(CLI::App* cmd, ExecFlags& f) {
  cmd->add_option("--impl", f.impl,
                  "Implementation: auto (fast SIMD path where it covers the recipe, else the reference), "
                  "reference, or fast (error where it does not cover the recipe)");
  add_threads_option(cmd, f.threads, "Threads for the fast path");
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

std::optional<Rounding> parse_round_flag(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const std::optional<Rounding> r = parse_rounding(text);
  if (!r) {
    std::vector<std::string_view> names;
    for (Rounding k : kAllRoundings) names.push_back(to_string(k));
    throw InputError(fmt::format("--round '{}' is unknown; use {}", io::printable(text, 40), fmt::join(names, ", ")));
  }
  return r;
}

void add_sr_flags(CLI::App* cmd, SrFlags& f, const SrScope& scope) {
  // A command whose --seed seeds something else (synthetic weights, random
  // patterns) takes the Philox seed as --sr-seed only; elsewhere both names work.
  f.seed_flag = scope.own_seed ? "--sr-seed" : "--seed";
  f.rbits_refusal = scope.rbits_refusal;
  cmd->add_option(scope.own_seed ? "--sr-seed" : "--seed,--sr-seed", f.seed,
                  "--round stochastic: Philox4x32-10 key of the random bits")
      ->check(any_seed());
  cmd->add_option("--offset", f.offset, "--round stochastic with " + f.seed_flag + ": Philox offset (default 0)")
      ->check(any_seed());
  cmd->add_option("--rng", f.rng,
                  "--round stochastic with " + f.seed_flag +
                      ": element-to-stream mapping, philox-te (TransformerEngine's stream, one thread per block; the "
                      "default) or philox-index (counter = element index)");
  cmd->add_option("--rbits", f.rbits,
                  scope.rbits_refusal.empty()
                      ? "--round stochastic: the random bits as a .npy, uint8 of the input's shape (one byte per "
                        "element) or uint32 (one cvt.rs e2m1x4 word per 4 elements along the block axis)"
                      : "--round stochastic: refused here (" + scope.rbits_refusal + ")");
  cmd->add_option("--rbits-map", f.rbits_map,
                  "Byte of a 32-bit random word that feeds each of its 4 elements: te (byte i -> element i, "
                  "TransformerEngine's fallback; the default) or ptx (the PTX ISA text's reading)");
}

void apply_sr_flags(const SrFlags& f, std::optional<Rounding> rounding, StochasticBits& bits) {
  // The rule and its messages are the library's (the Python module's too);
  // the spelling is this command's.
  SrSpelling spelling;
  spelling.seed = f.seed_flag;
  if (!f.rbits_refusal.empty()) {
    spelling.rbits_value = "";  // not offered here
    if (!f.rbits.empty() && rounding == Rounding::stochastic)
      throw InputError(fmt::format("--rbits is refused here: {}", f.rbits_refusal));
  }
  apply_sr_request({rounding, f.seed, f.offset, f.rng, f.rbits_map, !f.rbits.empty()}, spelling, bits);
}

void add_quant_flags(CLI::App* cmd, QuantFlags& f, bool with_packing) {
  cmd->add_option("--format,-f", f.format, "Format: hif4, mxfp4 or nvfp4 (default recipe unless --recipe)");
  cmd->add_option("--recipe,-r", f.recipe, "Recipe id, e.g. hif4.a6 or a6 with --format hif4 (see `fp4emu formats`)");
  cmd->add_option("--axis", f.axis, "Block axis (negative counts from the end)")->default_val(-1)->check(axis_range());
  cmd->add_option("--tail", f.tail, "Axis length not a multiple of the block: pad | error (default: the recipe's)");
  cmd->add_option("--round", f.round,
                  "Element rounding override where the recipe allows it: rne | rha | rtz | tiesToZero | stochastic "
                  "(stochastic needs --seed or --rbits)");
  add_sr_flags(cmd, f.sr);
  cmd->add_option("--global-amax", f.global_amax,
                  "NVFP4: per-tensor amax to use instead of the input's (0, or at least 2688/FLT_MAX ~ 7.9e-36)")
      ->check(real_in({0, std::numeric_limits<float>::max(), false, false, true}));
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
  o.rounding = parse_round_flag(f.round);
  apply_sr_flags(f.sr, o.rounding, o.stochastic);
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

void load_random_bits(const QuantFlags& flags, const std::vector<int64_t>& shape, QuantOptions& o,
                      RandomBits& storage) {
  const SrFlags& f = flags.sr;
  if (f.rbits.empty()) return;
  const std::string name = io::printable(f.rbits);
  if (std::filesystem::path(f.rbits).extension() != ".npy")
    throw InputError(fmt::format("--rbits {}: expected a .npy file (uint8 or uint32)", name));
  const io::Array a = io::read_npy(f.rbits);
  const int rank = static_cast<int>(shape.size());
  const int axis = o.axis < 0 ? o.axis + rank : o.axis;
  if (axis < 0 || axis >= rank) return;  // resolve_options names the bad axis
  const std::string what = fmt::format("--rbits {}", name);
  if (check_rbits_array(io::dtype_name(a.dtype), a.shape, shape, axis, !f.rbits_map.empty(), what, SrSpelling{})) {
    storage.words.resize(a.bytes.size() / 4);
    for (size_t i = 0; i < storage.words.size(); ++i)
      for (int b = 0; b < 4; ++b) storage.words[i] |= static_cast<uint32_t>(a.bytes[4 * i + b]) << (8 * b);
    o.stochastic.words = storage.words;
  } else {
    storage.bytes = a.bytes;
    o.stochastic.bytes = storage.bytes;
  }
}

InputTensor load_input(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext != ".npy")
    throw InputError(fmt::format("{}: expected a .npy file (fp32, bf16 or fp16); to analyse the tensors of a "
                                 ".safetensors dump use `fp4emu compare` or `fp4emu inspect`",
                                 io::printable(path.string())));
  InputTensor in;
  in.array = io::read_npy(path);
  const io::Array& a = in.array;
  in.view.shape = a.shape;
  in.view.data = a.bytes.data();
  switch (a.dtype) {
    case io::DType::f32: in.view.dtype = InputDType::f32; break;
    case io::DType::bf16: in.view.dtype = InputDType::bf16; break;
    case io::DType::f16: in.view.dtype = InputDType::f16; break;
    default:
      throw InputError(fmt::format("{}: dtype {} is not a float input; fp4emu quantizes f32, bf16 or f16 arrays "
                                   "(convert with numpy: a.astype(np.float32))",
                                   io::printable(path.string()), io::dtype_name(a.dtype)));
  }
  return in;
}

Tensor load_tensor(const std::filesystem::path& path, InputDType* dtype) {
  const InputTensor in = load_input(path);
  *dtype = in.view.dtype;
  Tensor t;
  t.shape = in.array.shape;
  t.data = io::to_f32(in.array, path.string());
  return t;
}

void write_f32_npy(const std::filesystem::path& path, std::span<const int64_t> shape, std::span<const float> values) {
  io::write_npy(path, io::DType::f32, shape, {reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()});
}

}  // namespace fp4emu::cli
