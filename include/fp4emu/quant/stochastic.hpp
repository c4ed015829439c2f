#pragma once
// Stochastic rounding's random bits (docs/formats.md, "Stochastic rounding").
// Rounding::stochastic rounds an element with one random byte r (the integer
// rule of PTX cvt.rs, codec/rounding.hpp). The bytes are never implicit: the
// caller gives them, or names a Philox4x32-10 stream by (seed, offset) and a
// mapping from elements to its words. Either way the byte of an element
// depends only on these and on the element's position, never on threads.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4emu {

// Which byte of a 32-bit cvt.rs...e2m1x4 word feeds element j (0..3) of a
// group of 4 consecutive elements along the block axis. The two published
// readings disagree for elements 1 and 2; only sm_100a hardware can settle it.
enum class RbitsMap : uint8_t {
  te,   // TransformerEngine's software fallback: element j <- bits [8j+7 : 8j]
  ptx,  // the PTX ISA text: elements 0, 1, 2, 3 <- bytes 0, 2, 1, 3
};
std::string_view to_string(RbitsMap m);
std::optional<RbitsMap> parse_rbits_map(std::string_view name);
// Byte of the word that feeds element j (0..3) of its group of 4.
int rbits_byte(RbitsMap m, int j);

// Element-to-stream mappings of the generated bits.
enum class SrRng : uint8_t {
  // TransformerEngine's stream (curanddx philox4x32_native_state): key =
  // seed, subsequence = the thread id, offset in 128-bit draws, words x, y,
  // z, w in order, one word per 4 elements (RbitsMap applies). Assumed
  // launch shape: thread t quantizes the t-th block of the tensor (blocks
  // numbered row by row along the block axis) and draws its words in element
  // order.
  philox_te,
  // Layout-free: the element at row-major index i of the input takes byte
  // i % 16 (little-endian over words x, y, z, w) of Philox4x32-10 at counter
  // (low 64 bits = i / 16, high 64 bits = offset), key = seed.
  philox_index,
};
std::string_view to_string(SrRng r);
std::optional<SrRng> parse_sr_rng(std::string_view name);  // "philox-te", "philox-index"

// The random-bit source of QuantOptions (one of bytes, words or seed).
struct StochasticBits {
  // Given bits, not owned (the caller keeps them alive during the call):
  std::span<const uint8_t> bytes;   // one per element, the input's shape, row-major
  std::span<const uint32_t> words;  // cvt.rs e2m1x4 words: the input's shape with the block
                                    // axis length L replaced by ceil(L / 4), row-major
  RbitsMap map = RbitsMap::te;      // words and philox_te
  // Generated bits:
  std::optional<uint64_t> seed;
  uint64_t offset = 0;
  SrRng rng = SrRng::philox_te;

  bool any() const { return !bytes.empty() || !words.empty() || seed.has_value(); }
};

// InputError unless `bits` is exactly one valid source for a tensor of
// `shape` blocked along `axis` (or no source at all when !stochastic).
void check_stochastic_bits(const StochasticBits& bits, bool stochastic, const std::vector<int64_t>& shape,
                           int axis);

// The random bytes of row `row` of the tensor seen as rows along `axis`
// (packed_tensor.hpp), padded_len of them (bytes past the axis length are 0:
// the zero padding rounds to 0 whatever its byte).
void stochastic_row_bits(const StochasticBits& bits, const std::vector<int64_t>& shape, int axis, int block,
                         int64_t row, int64_t padded_len, uint8_t* out);
// The same bytes for positions k0 .. k0 + n - 1 of the row (the fast path
// draws a run of blocks at a time): Philox is evaluated once per 128-bit
// draw, not per element.
void stochastic_run_bits(const StochasticBits& bits, const std::vector<int64_t>& shape, int axis, int block,
                         int64_t row, int64_t k0, int64_t n, uint8_t* out);

// One line for packed metadata and reports: "philox-te seed=S offset=O map=te",
// "philox-index seed=S offset=O", "given bytes" or "given words map=te".
std::string describe(const StochasticBits& bits);

}  // namespace fp4emu
