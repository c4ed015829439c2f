// Stochastic rounding's random bytes, per row of the blocked tensor
// (fp4emu/quant/stochastic.hpp).
#include "fp4emu/quant/stochastic.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "fp4emu/codec/philox.hpp"
#include "fp4emu/error.hpp"

namespace fp4emu {
namespace {

struct Rows {
  int64_t outer = 1, axis_len = 0, inner = 1;
};

Rows rows_of(const std::vector<int64_t>& shape, int axis) {
  Rows r;
  for (int d = 0; d < axis; ++d) r.outer *= shape[d];
  r.axis_len = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) r.inner *= shape[d];
  return r;
}

}  // namespace

std::string_view to_string(RbitsMap m) { return m == RbitsMap::te ? "te" : "ptx"; }

std::optional<RbitsMap> parse_rbits_map(std::string_view name) {
  if (name == "te") return RbitsMap::te;
  if (name == "ptx") return RbitsMap::ptx;
  return std::nullopt;
}

int rbits_byte(RbitsMap m, int j) {
  // PTX: "lower 8 bits from both 16-bit halves of rbits are used for operands
  // e, f and upper 8 bits for operands a, b"; element j is operand f, e, b, a
  // (TE passes {a, b, e, f} = elements {3, 2, 1, 0}), so f <- byte 0,
  // e <- byte 2, b <- byte 1, a <- byte 3.
  static constexpr int kPtx[4] = {0, 2, 1, 3};
  return m == RbitsMap::te ? j : kPtx[j];
}

std::string_view to_string(SrRng r) { return r == SrRng::philox_te ? "philox-te" : "philox-index"; }

std::optional<SrRng> parse_sr_rng(std::string_view name) {
  if (name == "philox-te") return SrRng::philox_te;
  if (name == "philox-index") return SrRng::philox_index;
  return std::nullopt;
}

void check_stochastic_bits(const StochasticBits& bits, bool stochastic, const std::vector<int64_t>& shape,
                           int axis) {
  const int sources = (!bits.bytes.empty()) + (!bits.words.empty()) + bits.seed.has_value();
  if (!stochastic) {
    if (sources != 0)
      throw InputError("random bits (a seed or an rbits array) were given, but the element rounding is not "
                       "stochastic; add --round stochastic, or drop the random bits");
    return;
  }
  if (sources == 0)
    throw InputError("stochastic rounding needs its random bits: give a seed (--seed S, Philox4x32-10) or "
                     "an array (--rbits FILE.npy, uint8 per element or uint32 per 4 elements)");
  if (sources > 1)
    throw InputError("stochastic rounding takes one source of random bits: a seed, a uint8 array or a "
                     "uint32 array, not several");
  const Rows r = rows_of(shape, axis);
  const int64_t numel = r.outer * r.axis_len * r.inner;
  if (!bits.bytes.empty() && static_cast<int64_t>(bits.bytes.size()) != numel)
    throw InputError(fmt::format("the uint8 random-bit array holds {} bytes; the input has {} elements "
                                 "(one byte per element, the input's shape)",
                                 bits.bytes.size(), numel));
  const int64_t words = r.outer * ((r.axis_len + 3) / 4) * r.inner;
  if (!bits.words.empty() && static_cast<int64_t>(bits.words.size()) != words)
    throw InputError(fmt::format("the uint32 random-bit array holds {} words; the input needs {} (one word "
                                 "per 4 elements along axis {}: the input's shape with that axis of length "
                                 "{} replaced by {})",
                                 bits.words.size(), words, axis, r.axis_len, (r.axis_len + 3) / 4));
}

void stochastic_row_bits(const StochasticBits& bits, const std::vector<int64_t>& shape, int axis, int block,
                         int64_t row, int64_t padded_len, uint8_t* out) {
  stochastic_run_bits(bits, shape, axis, block, row, 0, padded_len, out);
}

void stochastic_run_bits(const StochasticBits& bits, const std::vector<int64_t>& shape, int axis, int block,
                         int64_t row, int64_t k0, int64_t n, uint8_t* out) {
  const Rows r = rows_of(shape, axis);
  const int64_t o = row / r.inner, i = row % r.inner;
  const int64_t valid = std::clamp<int64_t>(r.axis_len - k0, 0, n);
  std::fill(out + valid, out + n, uint8_t{0});
  // Philox words of the last draw, and which draw they are (none yet).
  PhiloxCounter draw{};
  uint64_t drawn_stream = 0, drawn_counter = 0;
  bool have = false;
  auto words_of = [&](uint64_t stream, uint64_t counter, auto&& generate) -> const PhiloxCounter& {
    if (!have || stream != drawn_stream || counter != drawn_counter) {
      draw = generate();
      drawn_stream = stream;
      drawn_counter = counter;
      have = true;
    }
    return draw;
  };
  const int64_t blocks_per_row = (r.axis_len + block - 1) / block;
  const int64_t word_len = (r.axis_len + 3) / 4;
  if (bits.seed && r.inner == 1) {
    // Along a contiguous axis one draw feeds 16 consecutive elements (blocks
    // are multiples of 16): the same bytes as the loop below, a draw at a time.
    for (int64_t k = k0; k < k0 + valid;) {
      PhiloxCounter w;
      int64_t first;  // the position of the draw's first element
      if (bits.rng == SrRng::philox_te) {
        const int64_t in_block = k % block;
        first = k - in_block % 16;
        w = philox_stream_draw(*bits.seed, static_cast<uint64_t>(row * blocks_per_row + k / block), bits.offset,
                               static_cast<uint64_t>(in_block / 16));
      } else {
        const uint64_t flat = static_cast<uint64_t>(o * r.axis_len + k);
        first = k - static_cast<int64_t>(flat % 16);
        w = philox4x32(philox_counter(flat / 16, bits.offset), philox_key(*bits.seed));
      }
      const int64_t end = std::min(first + 16, k0 + valid);
      for (; k < end; ++k) {
        const int j = static_cast<int>(k - first);
        const int byte = bits.rng == SrRng::philox_te ? rbits_byte(bits.map, j % 4) : j % 4;
        out[k - k0] = static_cast<uint8_t>(w[j / 4] >> (8 * byte));
      }
    }
    return;
  }
  for (int64_t k = k0; k < k0 + valid; ++k) {
    const int lane = static_cast<int>(k % 4);
    uint8_t byte = 0;
    if (!bits.bytes.empty()) {
      byte = bits.bytes[(o * r.axis_len + k) * r.inner + i];
    } else if (!bits.words.empty()) {
      byte = static_cast<uint8_t>(bits.words[(o * word_len + k / 4) * r.inner + i] >> (8 * rbits_byte(bits.map, lane)));
    } else if (bits.rng == SrRng::philox_te) {
      // Thread row * blocks_per_row + k / block draws its words in element
      // order, word (k % block) / 4 of its stream.
      const uint64_t thread = static_cast<uint64_t>(row * blocks_per_row + k / block);
      const uint64_t word = static_cast<uint64_t>((k % block) / 4);
      const PhiloxCounter& w = words_of(thread, word / 4, [&] {
        return philox_stream_draw(*bits.seed, thread, bits.offset, word / 4);
      });
      byte = static_cast<uint8_t>(w[word % 4] >> (8 * rbits_byte(bits.map, lane)));
    } else {
      // Byte flat % 16 of the draw at counter (flat / 16, offset), little-endian over x, y, z, w.
      const uint64_t flat = static_cast<uint64_t>((o * r.axis_len + k) * r.inner + i);
      const PhiloxCounter& w = words_of(0, flat / 16, [&] {
        return philox4x32(philox_counter(flat / 16, bits.offset), philox_key(*bits.seed));
      });
      byte = static_cast<uint8_t>(w[(flat % 16) / 4] >> (8 * (flat % 4)));
    }
    out[k - k0] = byte;
  }
}

std::string describe(const StochasticBits& bits) {
  if (!bits.bytes.empty()) return "given bytes";
  if (!bits.words.empty()) return fmt::format("given words map={}", to_string(bits.map));
  if (!bits.seed) return "";
  if (bits.rng == SrRng::philox_te)
    return fmt::format("philox-te seed={} offset={} map={}", *bits.seed, bits.offset, to_string(bits.map));
  return fmt::format("philox-index seed={} offset={}", *bits.seed, bits.offset);
}

}  // namespace fp4emu
