#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11; the Random123 library's philox4x32 with 10 rounds): the counter-based
// generator of the stochastic-rounding bits. A pure function of (counter, key),
// so the bits of an element never depend on threads or scheduling.
// Checked against Random123's known-answer vectors (tests/philox_test.cpp).
#include <array>
#include <cstdint>

namespace fp4emu {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

namespace philox_detail {
inline constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
inline constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments

constexpr PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = uint64_t{kM0} * c[0];
  const uint64_t p1 = uint64_t{kM1} * c[2];
  return {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
}
}  // namespace philox_detail

// The four output words for one counter; `rounds` is 10 for Philox4x32-10.
constexpr PhiloxCounter philox4x32(PhiloxCounter counter, PhiloxKey key, int rounds = 10) {
  for (int i = 0; i < rounds; ++i) {
    if (i > 0) {
      key[0] += philox_detail::kW0;
      key[1] += philox_detail::kW1;
    }
    counter = philox_detail::round(counter, key);
  }
  return counter;
}

// Counter words from two 64-bit halves: low = words 0-1, high = words 2-3.
constexpr PhiloxCounter philox_counter(uint64_t low, uint64_t high) {
  return {static_cast<uint32_t>(low), static_cast<uint32_t>(low >> 32), static_cast<uint32_t>(high),
          static_cast<uint32_t>(high >> 32)};
}
constexpr PhiloxKey philox_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

// Draw `g` (0, 1, 2, ...: the words 4g..4g+3) of the stream that curanddx's
// philox4x32_native_state::init(seed, subsequence, offset) followed by
// generate4() calls yields (the generator of TransformerEngine's NVFP4
// stochastic rounding): key = seed, counter = (offset + g) in the low 64
// bits with its carry into the high 64 bits, which start at `subsequence`;
// generate4 returns the words x, y, z, w in that order. The offset counts
// generate4 calls (128-bit outputs), not words.
constexpr PhiloxCounter philox_stream_draw(uint64_t seed, uint64_t subsequence, uint64_t offset, uint64_t g) {
  const uint64_t low = offset + g;
  const uint64_t high = subsequence + (low < offset ? 1u : 0u);
  return philox4x32(philox_counter(low, high), philox_key(seed));
}
// Word `n` of that stream.
constexpr uint32_t philox_stream_word(uint64_t seed, uint64_t subsequence, uint64_t offset, uint64_t n) {
  return philox_stream_draw(seed, subsequence, offset, n / 4)[n % 4];
}

}  // namespace fp4emu
