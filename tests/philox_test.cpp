// Philox4x32 against the Random123 known-answer vectors (tests/kat_vectors of
// DEShawResearch/random123, the philox4x32 lines: 7 and 10 rounds), and the
// TransformerEngine stream layout (curanddx philox4x32_native_state) built
// from explicit counters. No second implementation is available here:
// numpy's Philox is the 4x64 variant and cuRAND is not installed.
#include <gtest/gtest.h>

#include "fp4emu/codec/philox.hpp"

namespace fp4emu {
namespace {

struct Kat {
  int rounds;
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

constexpr Kat kKat[] = {
    {7, {0, 0, 0, 0}, {0, 0}, {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
    {7, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
    {7, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
    {10, {0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {10, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {10, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, Random123KnownAnswers) {
  for (const Kat& k : kKat) EXPECT_EQ(philox4x32(k.counter, k.key, k.rounds), k.expected) << k.rounds;
}

// constexpr: the generator can be evaluated at compile time.
static_assert(philox4x32({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);

TEST(Philox, CounterAndKeyWords) {
  EXPECT_EQ(philox_counter(0x0123456789abcdefull, 0xfedcba9876543210ull),
            (PhiloxCounter{0x89abcdef, 0x01234567, 0x76543210, 0xfedcba98}));
  EXPECT_EQ(philox_key(0xa4093822299f31d0ull), (PhiloxKey{0x299f31d0, 0xa4093822}));
}

// curanddx init(seed, subsequence, offset): counter = (offset, subsequence) as
// two 64-bit halves, +1 per generate4 with a carry into the high half.
TEST(Philox, TransformerEngineStream) {
  const uint64_t seed = 0x0123456789abcdefull, sub = 77, offset = 5;
  for (uint64_t n = 0; n < 16; ++n) {
    const PhiloxCounter c = philox_counter(offset + n / 4, sub);
    EXPECT_EQ(philox_stream_word(seed, sub, offset, n), philox4x32(c, philox_key(seed))[n % 4]) << n;
  }
  // The low half wraps into the subsequence half.
  const uint64_t last = ~uint64_t{0};
  EXPECT_EQ(philox_stream_word(seed, sub, last, 4), philox4x32(philox_counter(0, sub + 1), philox_key(seed))[0]);
  EXPECT_EQ(philox_stream_word(seed, sub, last, 3), philox4x32(philox_counter(last, sub), philox_key(seed))[3]);
}

}  // namespace
}  // namespace fp4emu
