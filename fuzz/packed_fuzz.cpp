// The packed-file reader (a safetensors file plus fp4emu metadata) on
// arbitrary bytes, followed by what `fp4emu dequantize` does with an accepted
// file. Rejections must be InputError; an accepted file must state its
// geometry as plain integers equal to what was read (no "4294967297" read as
// 1), dequantize to its logical shape, and survive write + read with the
// same bits.
#include <charconv>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/error.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fuzz_util.hpp"

namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The whole text as a decimal integer, written independently of the reader.
std::optional<int64_t> decimal(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return n;
}

// "[d0, d1, ...]" as integers; nullopt if any item is not one.
std::optional<std::vector<int64_t>> decimal_list(std::string_view s) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  s = s.substr(1, s.size() - 2);
  std::vector<int64_t> out;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    const auto d = decimal(s.substr(0, comma));
    if (!d) return std::nullopt;
    out.push_back(*d);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

// The metadata integers the reader accepted, as the file states them.
void check_stated_geometry(const std::map<std::string, std::string>& m, const fp4emu::PackedTensor& p) {
  const auto field = [&](const char* key) { return m.count(key) ? decimal(m.at(key)) : std::nullopt; };
  FUZZ_CHECK(m.count("shape") && decimal_list(m.at("shape")) == p.shape);
  FUZZ_CHECK(field("axis") == p.axis);
  FUZZ_CHECK(field("block_size") == p.block_size);
  FUZZ_CHECK(field("axis_len") == p.axis_len);
  FUZZ_CHECK(field("padded_len") == p.padded_len);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fp4emu;
  PackedTensor p;
  try {
    p = read_packed(fuzz::scratch_file("input.safetensors", {data, size}));
  } catch (const InputError& e) {
    fuzz::rejected("read_packed", e);
    return 0;
  }
  fuzz::accepted("read_packed");
  check_stated_geometry(io::read_safetensors(fuzz::scratch_path("input.safetensors")).metadata, p);
  FUZZ_CHECK(p.block_size > 0 && p.padded_len % p.block_size == 0 && p.axis_len <= p.padded_len);
  FUZZ_CHECK(p.codes.size() == static_cast<size_t>(p.rows * p.padded_len / 2));
  const Tensor y = dequantize(p);
  FUZZ_CHECK(y.shape == p.shape && y.data.size() == static_cast<size_t>(y.numel()));

  const auto path = fuzz::scratch_path("again.safetensors");
  write_packed(path, p);
  const PackedTensor q = read_packed(path);
  FUZZ_CHECK(q.format == p.format && q.recipe_id == p.recipe_id && q.shape == p.shape && q.axis == p.axis);
  FUZZ_CHECK(q.codes == p.codes && q.scales == p.scales);
  FUZZ_CHECK(same_bits(q.global_amax, p.global_amax) && same_bits(q.global_encode_scale, p.global_encode_scale) &&
             same_bits(q.global_decode_scale, p.global_decode_scale));
  return 0;
}
