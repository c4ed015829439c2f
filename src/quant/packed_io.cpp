#include "fp4emu/quant/packed_io.hpp"

#include <fmt/format.h>

#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <nlohmann/json.hpp>

#include "fp4emu/error.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/version.hpp"

namespace fp4emu {
namespace {


std::string hex_float(float v) { return fmt::format("{:a}", v); }

std::optional<int64_t> parse_integer(std::string_view s) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return n;
}

class MetadataReader {
 public:
  MetadataReader(const std::filesystem::path& path, const std::map<std::string, std::string>& m)
      : path_(path), m_(m) {}

  const std::string& get(const std::string& key) const {
    auto it = m_.find(key);
    if (it == m_.end())
      throw InputError(fmt::format("{}: metadata field '{}' is missing; this is not a packed tensor written by "
                                   "`fp4emu quantize`",
                                   path_.string(), key));
    return it->second;
  }
  [[noreturn]] void bad(const std::string& key, std::string_view expected) const {
    throw InputError(fmt::format("{}: metadata field '{}' = '{}' is invalid; expected {}", path_.string(), key,
                                 io::printable(get(key), 80), expected));
  }
  // Every integer field goes through here: the whole text is a decimal
  // integer (no '+', spaces, fraction or exponent) within [lo, hi], so that
  // "4294967297" or "3.9" cannot pass for a smaller number.
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const {
    const auto n = parse_integer(get(key));
    if (!n || *n < lo || *n > hi) bad(key, fmt::format("an integer from {} to {}", lo, hi));
    return *n;
  }
  // A list "[d0, d1, ...]" (the JSON the writer emits), each item as integer().
  std::vector<int64_t> integer_list(const std::string& key, int64_t lo, int64_t hi, std::string_view expected) const {
    std::string_view v = get(key);
    std::vector<int64_t> out;
    if (v.size() < 2 || v.front() != '[' || v.back() != ']') bad(key, expected);
    v = v.substr(1, v.size() - 2);
    const auto trim = [](std::string_view t) {
      while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
      while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
      return t;
    };
    if (trim(v).empty()) return out;
    for (;;) {
      const size_t comma = v.find(',');
      const auto n = parse_integer(trim(v.substr(0, comma)));
      if (!n || *n < lo || *n > hi) bad(key, expected);
      out.push_back(*n);
      if (comma == std::string_view::npos) return out;
      v.remove_prefix(comma + 1);
    }
  }
  float hex(const std::string& key) const {
    const std::string& v = get(key);
    char* end = nullptr;
    errno = 0;
    const float f = std::strtof(v.c_str(), &end);
    // ERANGE with an infinite result: a finite number too large for fp32.
    if (v.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(v[0])) ||
        (errno == ERANGE && std::isinf(f)))
      bad(key, "an fp32 value such as 0x1.8p+3, inf or nan");
    return f;
  }
  template <class T, class Parse>
  T parsed(const std::string& key, Parse parse, std::string_view expected) const {
    auto r = parse(get(key));
    if (!r) bad(key, expected);
    return *r;
  }

 private:
  const std::filesystem::path& path_;
  const std::map<std::string, std::string>& m_;
};

}  // namespace

std::map<std::string, std::string> packed_metadata(const PackedTensor& p) {
  std::map<std::string, std::string> m = {
      {"fp4emu_version", kVersion},
      {"format", std::string(format_name(p.format))},
      {"recipe", p.recipe_id},
      {"shape", nlohmann::json(p.shape).dump()},
      {"axis", std::to_string(p.axis)},
      {"block_size", std::to_string(p.block_size)},
      {"axis_len", std::to_string(p.axis_len)},
      {"padded_len", std::to_string(p.padded_len)},
      {"rounding", std::string(to_string(p.rounding))},
      {"tail", std::string(to_string(p.tail))},
      {"nibble_order", std::string(to_string(p.nibble_order))},
      {"scale_bit_order", std::string(to_string(p.scale_bit_order))},
      {"scale_layout", std::string(to_string(p.scale_layout))},
      {"global_amax", hex_float(p.global_amax)},
      {"global_encode_scale", hex_float(p.global_encode_scale)},
      {"global_decode_scale", hex_float(p.global_decode_scale)},
      {"layout", "codes: [input shape without axis, padded_len/2] bytes, element 2i of a row in the low nibble "
                 "unless nibble_order says otherwise; scales: [input shape without axis, blocks]"},
  };
  // Stochastic rounding: where its random bits came from (seed, offset, mapping).
  if (!p.stochastic.empty()) m["stochastic"] = p.stochastic;
  return m;
}

void write_packed(const std::filesystem::path& path, const PackedTensor& p, StoredScaleLayout scale_layout) {
  if (!layout_applies(scale_layout, p.format))
    throw InputError(fmt::format("{}: scale layout {} does not apply to {} (use linear{})", path.string(),
                                 to_string(scale_layout), format_name(p.format),
                                 p.format == Format::hif4 ? " or hif4_cube" : " or swizzled_128x4"));
  // Streamed from the packed tensor's own buffers: no copy of the codes is
  // made (docs/architecture.md §7.4).
  std::vector<io::SafetensorsEntry> layout;
  std::vector<std::span<const uint8_t>> data;
  auto add = [&](const char* name, io::DType dtype, std::vector<int64_t> shape, std::span<const uint8_t> bytes) {
    layout.push_back({name, dtype, std::move(shape), 0, bytes.size()});
    data.push_back(bytes);
  };
  add("codes", io::DType::u8, p.stored_shape(p.padded_len / 2), p.codes);
  std::vector<uint8_t> reordered;
  if (scale_layout != StoredScaleLayout::linear) {
    reordered = store_scales(p, scale_layout);
    add("scales", io::DType::u8, stored_scales_shape(p, scale_layout), reordered);
  } else {
    // A HiF4 scale word is its four bytes in order, little-endian: the u32
    // tensor's bytes are the scale bytes as they are.
    static_assert(std::endian::native == std::endian::little);
    add("scales", p.format == Format::hif4 ? io::DType::u32 : io::DType::u8, p.stored_shape(p.blocks_per_row()),
        p.scales);
  }
  const float g[3] = {p.global_amax, p.global_encode_scale, p.global_decode_scale};
  if (p.format == Format::nvfp4)
    add("global_scale", io::DType::f32, {3}, {reinterpret_cast<const uint8_t*>(g), sizeof g});
  std::map<std::string, std::string> metadata = packed_metadata(p);
  metadata["scale_layout"] = std::string(to_string(scale_layout));
  if (scale_layout == StoredScaleLayout::swizzled_128x4)
    metadata["layout"] += "; scales stored swizzled_128x4: the [rows, blocks] matrix zero-padded to 128-row x "
                          "4-block tiles of 512 bytes, byte ((r/128)*(C'/4) + c/4)*512 + (r%32)*16 + "
                          "((r%128)/32)*4 + c%4";
  if (scale_layout == StoredScaleLayout::hif4_cube)
    metadata["layout"] += "; scales stored hif4_cube: [rows/16 (zero-padded)][blocks][64-byte cell], a cell holding "
                          "(E6M2, L2) of its 16 rows in bytes 0..31 and (L3 low, L3 high) in bytes 32..63";
  io::SafetensorsWriter out(path, std::move(layout), metadata);
  for (std::span<const uint8_t> bytes : data) out.write_next(bytes);
  out.commit();
}

PackedTensor read_packed(const std::filesystem::path& path) {
  const io::SafetensorsFile file = io::read_safetensors(path);
  const MetadataReader m(path, file.metadata);
  PackedTensor p;
  p.format = m.parsed<Format>("format", parse_format, "hif4, mxfp4 or nvfp4");
  p.recipe_id = m.get("recipe");
  const Recipe* recipe = find_recipe(p.recipe_id);
  if (!recipe || recipe->format != p.format) m.bad("recipe", fmt::format("a {} recipe id", format_name(p.format)));
  constexpr int64_t kMaxElements = int64_t{1} << 50;
  const std::string shape_expected = "a list of positive dimensions such as [256, 1024], with a product below 2^50";
  p.shape = m.integer_list("shape", 1, kMaxElements, shape_expected);
  if (p.shape.empty()) m.bad("shape", shape_expected);
  int64_t rows = 1;
  for (int64_t d : p.shape) {
    if (rows > kMaxElements / d) m.bad("shape", shape_expected);
    rows *= d;
  }
  p.axis = static_cast<int>(m.integer("axis", 0, static_cast<int64_t>(p.shape.size()) - 1));
  if (m.integer("block_size", 1, INT32_MAX) != block_size(p.format))
    m.bad("block_size", std::to_string(block_size(p.format)));
  p.block_size = block_size(p.format);
  p.axis_len = p.shape[p.axis];
  p.rows = rows / p.axis_len;
  p.padded_len = (p.axis_len + p.block_size - 1) / p.block_size * p.block_size;
  if (m.integer("axis_len", 1, kMaxElements) != p.axis_len) m.bad("axis_len", std::to_string(p.axis_len));
  if (m.integer("padded_len", 1, INT64_MAX) != p.padded_len) m.bad("padded_len", std::to_string(p.padded_len));
  p.rounding = m.parsed<Rounding>("rounding", parse_rounding, "rne, rha, rtz, tiesToZero, rtp or stochastic");
  if (const auto it = file.metadata.find("stochastic"); it != file.metadata.end()) p.stochastic = it->second;
  p.tail = m.parsed<TailPolicy>("tail", parse_tail, "pad or error");
  p.nibble_order = m.parsed<NibbleOrder>("nibble_order", parse_nibble_order, "low_first, high_first or split_half");
  p.scale_bit_order = m.parsed<ScaleBitOrder>("scale_bit_order", parse_scale_bit_order, "lsb_first or msb_first");
  const StoredScaleLayout scale_layout = m.parsed<StoredScaleLayout>(
      "scale_layout", parse_stored_scale_layout,
      p.format == Format::hif4 ? "linear or hif4_cube" : "linear or swizzled_128x4");
  if (!layout_applies(scale_layout, p.format))
    m.bad("scale_layout", p.format == Format::hif4 ? "linear or hif4_cube" : "linear or swizzled_128x4");
  p.global_amax = m.hex("global_amax");
  p.global_encode_scale = m.hex("global_encode_scale");
  p.global_decode_scale = m.hex("global_decode_scale");

  auto tensor = [&](const char* name, io::DType dtype, const std::vector<int64_t>& shape) -> const io::Array& {
    const io::SafetensorsTensor* t = file.find(name);
    if (!t) throw InputError(fmt::format("{}: tensor '{}' is missing from the packed file", path.string(), name));
    if (t->array.dtype != dtype || t->array.shape != shape)
      throw InputError(fmt::format("{}: tensor '{}' is {} {}, expected {} {} for shape {} blocked along axis {}",
                                   path.string(), name, io::dtype_name(t->array.dtype),
                                   io::shape_string(t->array.shape), io::dtype_name(dtype),
                                   io::shape_string(shape), io::shape_string(p.shape), p.axis));
    return t->array;
  };
  p.codes = tensor("codes", io::DType::u8, p.stored_shape(p.padded_len / 2)).bytes;
  if (scale_layout == StoredScaleLayout::linear)
    p.scales = tensor("scales", p.format == Format::hif4 ? io::DType::u32 : io::DType::u8,
                      p.stored_shape(p.blocks_per_row()))
                   .bytes;  // little-endian bytes either way
  else  // the in-memory scales are always linear
    p.scales = load_scales(tensor("scales", io::DType::u8, stored_scales_shape(p, scale_layout)).bytes, p,
                           scale_layout);
  if (p.format == Format::nvfp4) {
    const std::vector<float> g = io::to_f32(tensor("global_scale", io::DType::f32, {3}), path.string());
    // The tensor holds the exact bits. The metadata's "%a" text holds every
    // bit of a number but not a NaN's payload, so any two NaNs of the same
    // sign agree (a NaN input makes these NaN in nvfp4.torchao and others).
    const char* fields[3] = {"global_amax", "global_encode_scale", "global_decode_scale"};
    float* values[3] = {&p.global_amax, &p.global_encode_scale, &p.global_decode_scale};
    for (int i = 0; i < 3; ++i) {
      const bool agree = std::bit_cast<uint32_t>(g[i]) == std::bit_cast<uint32_t>(*values[i]) ||
                         (std::isnan(g[i]) && std::isnan(*values[i]) && std::signbit(g[i]) == std::signbit(*values[i]));
      if (!agree)
        throw InputError(fmt::format("{}: tensor 'global_scale' element {} is {:a} (bits 0x{:08x}) but metadata field "
                                     "'{}' is '{}'; the file was edited or damaged: write it again with `fp4emu "
                                     "quantize`",
                                     path.string(), i, g[i], std::bit_cast<uint32_t>(g[i]), fields[i],
                                     io::printable(m.get(fields[i]), 80)));
      *values[i] = g[i];
    }
  }
  return p;
}

}  // namespace fp4emu
