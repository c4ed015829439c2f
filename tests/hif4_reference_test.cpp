// Tests of the HiF4 scalar reference (src/quant/reference/hif4.cpp) and its
// recipe table, at block level.
//
// - Every worked example of docs/spec/hif4.md §8 with its exact scale word, codes, data
//   bytes (packed low-nibble-first here) and decoded values, for each variant
//   the example mentions.
// - Properties per recipe: sign symmetry, zero / -0 / NaN / Inf / subnormal
//   blocks, decode(quantize) == fake_quant, scale-word bit orders.
// - Independent oracles written here (no call into src/codec for the checked
//   quantity): E6M2 rounding by table search over the 255 finite codes, bf16
//   rounding by bit manipulation, the E6M2 reciprocal by integer long
//   division, element rounding by argmin over the 8 magnitudes.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "fp4emu/quant/reference.hpp"

namespace {

using fp4emu::Recipe;
using fp4emu::Rounding;
using fp4emu::ScaleBitOrder;
namespace ref = fp4emu::reference;

constexpr int kN = ref::kHif4Block;
using Block = std::array<float, kN>;
using Codes = std::array<uint8_t, kN>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

const char* const kAllIds[] = {"hif4.v14",  "hif4.v14_f64", "hif4.v14_noclip", "hif4.v14_special",
                               "hif4.amct", "hif4.a6",      "hif4.v12_pow2"};

const Recipe& recipe(const std::string& id) {
  const Recipe* r = fp4emu::find_recipe(id);
  if (r == nullptr) throw std::runtime_error("recipe not registered: " + id);
  return *r;
}

struct Quantized {
  uint32_t word = 0;
  Codes codes{};
  Block decoded{};
  Block fake{};
};

Quantized run(const Recipe& r, const Block& x, std::optional<Rounding> rounding = std::nullopt) {
  const Rounding mode = rounding.value_or(r.element_rounding);
  Quantized q;
  q.word = ref::hif4_quantize_block(r, mode, x.data(), q.codes.data());
  ref::hif4_decode_block(r, q.word, q.codes.data(), q.decoded.data());
  ref::hif4_fake_quant_block(r, mode, x.data(), q.fake.data());
  return q;
}

Quantized run(const std::string& id, const Block& x, std::optional<Rounding> rounding = std::nullopt) {
  return run(recipe(id), x, rounding);
}

Block block_of(std::initializer_list<float> head) {
  Block b{};
  int i = 0;
  for (float v : head) b[i++] = v;
  return b;
}

// Data plane, docs/spec/hif4.md §5.1: element 2i in bits 3..0, element 2i+1 in bits 7..4.
std::array<uint8_t, kN / 2> pack_low_first(const Codes& c) {
  std::array<uint8_t, kN / 2> bytes{};
  for (int i = 0; i < kN / 2; ++i) bytes[i] = static_cast<uint8_t>((c[2 * i] & 0xF) | ((c[2 * i + 1] & 0xF) << 4));
  return bytes;
}

void expect_data_bytes(const Codes& c, std::initializer_list<int> head) {
  const auto bytes = pack_low_first(c);
  int i = 0;
  for (int b : head) {
    EXPECT_EQ(static_cast<int>(bytes[i]), b) << "data byte " << i;
    ++i;
  }
  for (; i < kN / 2; ++i) EXPECT_EQ(static_cast<int>(bytes[i]), 0) << "data byte " << i;
}

void expect_codes(const Codes& c, std::initializer_list<int> head) {
  int i = 0;
  for (int v : head) {
    EXPECT_EQ(static_cast<int>(c[i]), v) << "code " << i;
    ++i;
  }
}

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// Bit-for-bit equality; every NaN equals every NaN.
bool same_value(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return bits_of(a) == bits_of(b);
}

// Decoded values equal `head` (then +0) bit for bit, for both decode and fake-quant.
void expect_values(const Quantized& q, std::initializer_list<float> head) {
  Block want{};
  int i = 0;
  for (float v : head) want[i++] = v;
  for (int k = 0; k < kN; ++k) {
    EXPECT_TRUE(same_value(q.decoded[k], want[k])) << "decode " << k << ": " << q.decoded[k] << " want " << want[k];
    EXPECT_TRUE(same_value(q.fake[k], want[k])) << "fake_quant " << k << ": " << q.fake[k] << " want " << want[k];
  }
}

void expect_nan_block(const Quantized& q) {
  EXPECT_EQ(q.word & 0xFFu, 0xFFu);
  for (int k = 0; k < kN; ++k) {
    EXPECT_TRUE(std::isnan(q.decoded[k])) << k;
    EXPECT_TRUE(std::isnan(q.fake[k])) << k;
  }
}

// ---- Independent oracles ------------------------------------------------------

// bf16 RNE of a finite fp32 value, by the bit trick (carry into the exponent).
float bf16_oracle(float f) {
  uint32_t u = bits_of(f);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

// docs/spec/hif4.md §2: 2^(E-50) * (4 + M).
double e6m2_value(int code) { return (4.0 + (code & 3)) * std::ldexp(1.0, (code >> 2) - 50); }

// Nearest of the 255 finite E6M2 values, ties to the even code (RNE).
int e6m2_nearest(double s) {
  int best = -1;
  double best_d = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 255; ++c) {
    const double d = std::fabs(s - e6m2_value(c));
    if (d < best_d || (d == best_d && c % 2 == 0)) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

// bf16(1/s) by integer long division: 1/s = (1024 / (4+M)) * 2^(40-E); the
// quotient 1024/(4+M) lies in [146, 256], so rounding it to an integer (RNE)
// is rounding to bf16's 8 significant bits.
double e6m2_reciprocal_oracle(int code) {
  const int d = 4 + (code & 3);
  int k = 1024 / d;
  const int rem = 1024 % d;
  if (2 * rem > d || (2 * rem == d && (k & 1))) ++k;
  return std::ldexp(static_cast<double>(k), 40 - (code >> 2));
}

// fp32 product, one rounding (the double product of two floats is exact).
float fp32_mul(double a, double b) { return static_cast<float>(a * b); }

int l2_bit(uint32_t word, int i) { return (word >> (8 + i / 8)) & 1; }
int l3_bit(uint32_t word, int i) { return (word >> (16 + i / 4)) & 1; }

// Magnitude q in 0..7 nearest to 4t (exact double), ties up (half away).
int nearest_q_half_up(double four_t) {
  if (four_t >= 7.0) return 7;  // saturation (and keeps huge values out of the distance test)
  int best = 0;
  for (int q = 1; q < 8; ++q)
    if (std::fabs(four_t - q) <= std::fabs(four_t - best)) best = q;
  return best;
}
// Same on the q/4 grid for a bf16 y, ties to the even q.
int nearest_q_even(double y) {
  if (y >= 1.75) return 7;  // saturating conversion
  int best = 0;
  for (int q = 1; q < 8; ++q) {
    const double d = std::fabs(y - q / 4.0), bd = std::fabs(y - best / 4.0);
    if (d < bd || (d == bd && q % 2 == 0)) best = q;
  }
  return best;
}

// ---- Random blocks -------------------------------------------------------------

class BlockGen {
 public:
  explicit BlockGen(uint64_t seed) : rng_(seed) {}
  uint64_t bits() { return rng_(); }
  int uniform(int lo, int hi) { return lo + static_cast<int>(rng_() % static_cast<uint64_t>(hi - lo + 1)); }

  // A block whose values span `spread` binades around a random base exponent;
  // `mantissa_bits` < 23 makes values with few significant bits (ties), and
  // some lanes are 0 or tiny.
  Block block(int base_lo, int base_hi, int spread, int mantissa_bits, bool with_zeros) {
    Block b{};
    const int base = uniform(base_lo, base_hi);
    for (int i = 0; i < kN; ++i) {
      const uint64_t r = bits();
      if (with_zeros && r % 16 == 0) {
        b[i] = (r >> 8) & 1 ? -0.0f : 0.0f;
        continue;
      }
      const int e = base - uniform(0, spread);
      const uint32_t man = static_cast<uint32_t>(r >> 20) & ((1u << mantissa_bits) - 1u);
      const float m = 1.0f + std::ldexp(static_cast<float>(man), -mantissa_bits);
      const float v = std::ldexp(m, e);
      b[i] = (r >> 4) & 1 ? -v : v;
    }
    return b;
  }
  Block any_block() {
    switch (uniform(0, 3)) {
      case 0: return block(-60, 60, 40, 23, true);   // fp32, ~40 binades
      case 1: return block(-20, 20, 6, 3, true);     // few mantissa bits: many ties
      case 2: return block(-5, 5, 12, 7, false);     // bf16 values
      default: return block(-100, 127, 40, 23, true);  // extremes: subnormal, near FLT_MAX
    }
  }

 private:
  std::mt19937_64 rng_;
};

// Round a block to bf16 values (A6 inputs); values that would round to Inf
// become the largest bf16 instead.
Block to_bf16(Block b) {
  for (float& v : b) {
    if (!std::isfinite(v)) continue;
    const float r = bf16_oracle(v);
    v = std::isinf(r) ? std::copysign(std::bit_cast<float>(0x7F7F0000u), v) : r;
  }
  return b;
}

// ================================================================================
// Recipe table
// ================================================================================

TEST(Hif4Recipes, AllSevenRegisteredWithTheirFields) {
  const auto table = fp4emu::hif4_recipes();
  ASSERT_EQ(table.size(), 7u);
  int defaults = 0;
  for (const Recipe& r : table) {
    EXPECT_EQ(r.format, fp4emu::Format::hif4) << r.id;
    EXPECT_FALSE(r.summary.empty()) << r.id;
    EXPECT_TRUE(r.spec_ref.starts_with("docs/spec/hif4.md §6.")) << r.id;
    EXPECT_NE(r.allowed_roundings & fp4emu::rounding_bit(r.element_rounding), 0) << r.id;
    EXPECT_EQ(r.nibble_order, fp4emu::NibbleOrder::low_first) << r.id;
    EXPECT_FALSE(r.fake_quant_only) << r.id;
    defaults += r.is_default ? 1 : 0;
  }
  EXPECT_EQ(defaults, 1);
  EXPECT_EQ(fp4emu::default_recipe(fp4emu::Format::hif4).id, "hif4.v14");
  for (const char* id : kAllIds) EXPECT_NE(fp4emu::find_recipe(id), nullptr) << id;

  const std::pair<const char*, const char*> refs[] = {
      {"hif4.v14", "docs/spec/hif4.md §6.1"},         {"hif4.v14_f64", "docs/spec/hif4.md §6.2"},
      {"hif4.v14_noclip", "docs/spec/hif4.md §6.3"},  {"hif4.v14_special", "docs/spec/hif4.md §6.3"},
      {"hif4.amct", "docs/spec/hif4.md §6.4"},        {"hif4.a6", "docs/spec/hif4.md §6.5"},
      {"hif4.v12_pow2", "docs/spec/hif4.md §6.6"}};
  for (const auto& [id, spec] : refs) EXPECT_EQ(recipe(id).spec_ref, spec) << id;
  EXPECT_EQ(recipe("hif4.v14").element_rounding, Rounding::rha);
  EXPECT_EQ(recipe("hif4.a6").element_rounding, Rounding::rne);
  EXPECT_TRUE(recipe("hif4.a6").bf16_input_only);
  EXPECT_EQ(recipe("hif4.amct").scale_bit_order, ScaleBitOrder::msb_first);
  EXPECT_EQ(recipe("hif4.v14").scale_bit_order, ScaleBitOrder::lsb_first);
  EXPECT_EQ(recipe("hif4.amct").default_tail, fp4emu::TailPolicy::error);
  EXPECT_EQ(recipe("hif4.a6").default_tail, fp4emu::TailPolicy::error);
  EXPECT_EQ(recipe("hif4.v14").default_tail, fp4emu::TailPolicy::pad);
  EXPECT_EQ(recipe("hif4.v12_pow2").default_tail, fp4emu::TailPolicy::pad);
  EXPECT_EQ(recipe("hif4.a6").allowed_roundings,
            fp4emu::rounding_bit(Rounding::rne) | fp4emu::rounding_bit(Rounding::rha));
}

// docs/spec/hif4.md §5.2: msb_first puts group 0 of each of bytes 1..3 in
// that byte's bit 7. Oracle: each L2 bit b_j and L3 bit c_k moved one by one
// (canonical bit 8 + j -> stored bit 15 - j, bit 16 + k -> bit 23 - k for
// k < 8 and bit 31 - (k - 8) for k >= 8), for every value of the 24 bits and
// several E6M2 bytes; lsb_first is the identity; the mapping is its own inverse.
TEST(Hif4ScaleWord, MsbFirstMovesEveryGroupBitToItsStoredPosition) {
  auto oracle = [](uint32_t canonical) {
    uint32_t stored = canonical & 0xFFu;
    for (int j = 0; j < 8; ++j) stored |= ((canonical >> (8 + j)) & 1u) << (15 - j);
    for (int k = 0; k < 16; ++k) stored |= ((canonical >> (16 + k)) & 1u) << (k < 8 ? 23 - k : 31 - (k - 8));
    return stored;
  };
  int mismatches = 0;
  for (uint32_t high = 0; high < (1u << 24); ++high) {
    const uint32_t canonical = high << 8 | ((high * 0x9Du) & 0xFFu);
    const uint32_t stored = ref::hif4_word_to_stored(canonical, ScaleBitOrder::msb_first);
    mismatches += stored != oracle(canonical);
    mismatches += ref::hif4_word_from_stored(stored, ScaleBitOrder::msb_first) != canonical;
    mismatches += ref::hif4_word_to_stored(canonical, ScaleBitOrder::lsb_first) != canonical;
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(ref::hif4_word_to_stored(0x00010100u, ScaleBitOrder::msb_first), 0x00808000u);  // b_0, c_0
}

TEST(Hif4Recipes, DisallowedRoundingIsRejected) {
  const Block x = block_of({1.0f});
  Codes c{};
  EXPECT_THROW(ref::hif4_quantize_block(recipe("hif4.v14"), Rounding::rtp, x.data(), c.data()), fp4emu::InputError);
  EXPECT_THROW(ref::hif4_quantize_block(recipe("hif4.a6"), Rounding::rtz, x.data(), c.data()), fp4emu::InputError);
  EXPECT_NO_THROW(ref::hif4_quantize_block(recipe("hif4.a6"), Rounding::rha, x.data(), c.data()));
  EXPECT_NO_THROW(ref::hif4_quantize_block(recipe("hif4.v14"), Rounding::rne, x.data(), c.data()));
}

// ================================================================================
// docs/spec/hif4.md §8 worked examples
// ================================================================================

const Block kEx1 = block_of({7.0f, -3.0f, 0.625f, 0.09375f, 0.875f, 0.3125f, -0.5625f, 0.0f, 1.5f, -2.5f, 0.25f,
                             3.0f, 0.125f, 0.375f, -1.0f, 0.625f});

TEST(Hif4WorkedExamples, Ex1V14) {
  const Quantized q = run("hif4.v14", kEx1);
  EXPECT_EQ(q.word, 0x000501C0u);
  expect_codes(q.codes, {0x7, 0xB, 0x1, 0x0, 0x2, 0x1, 0x9, 0x0, 0x3, 0xD, 0x1, 0x6, 0x1, 0x2, 0xC, 0x3});
  expect_data_bytes(q.codes, {0xB7, 0x01, 0x12, 0x09, 0xD3, 0x61, 0x21, 0x3C});
  expect_values(q, {7.0f, -3.0f, 1.0f, 0.0f, 1.0f, 0.5f, -0.5f, 0.0f, 1.5f, -2.5f, 0.5f, 3.0f, 0.25f, 0.5f, -1.0f,
                    0.75f});
}

TEST(Hif4WorkedExamples, Ex1A6) {
  const Quantized q = run("hif4.a6", kEx1);
  EXPECT_EQ(q.word, 0x000501C0u);
  expect_data_bytes(q.codes, {0xB7, 0x01, 0x12, 0x09, 0xD3, 0x60, 0x20, 0x2C});
  EXPECT_EQ(q.codes[10], 0x0);
  EXPECT_EQ(q.codes[12], 0x0);
  EXPECT_EQ(q.codes[15], 0x2);
  EXPECT_EQ(q.decoded[10], 0.0f);
  EXPECT_EQ(q.decoded[12], 0.0f);
  EXPECT_EQ(q.decoded[15], 0.5f);
}

TEST(Hif4WorkedExamples, Ex1AmctSameCodesMsbFirstWord) {
  const Quantized v14 = run("hif4.v14", kEx1);
  const Quantized q = run("hif4.amct", kEx1);
  EXPECT_EQ(q.word, 0x000501C0u);
  EXPECT_EQ(q.codes, v14.codes);
  // AMCT stores the bit bytes MSB-first: L2 0x01 -> 0x80, L3 0x0005 -> 0xA0 0x00.
  EXPECT_EQ(ref::hif4_word_to_stored(q.word, recipe("hif4.amct").scale_bit_order), 0x00A080C0u);
}

TEST(Hif4WorkedExamples, Ex1V14WithRneOverrideMatchesA6) {
  // With exact products and RNE ties the V14 path gives A6's codes here.
  const Quantized q = run("hif4.v14", kEx1, Rounding::rne);
  EXPECT_EQ(q.word, 0x000501C0u);
  expect_data_bytes(q.codes, {0xB7, 0x01, 0x12, 0x09, 0xD3, 0x60, 0x20, 0x2C});
}

const Block kEx2 = block_of({10.0f, 3.734375f, 9.0f, -6.75f});

TEST(Hif4WorkedExamples, Ex2ThreeVariantsDisagree) {
  {
    const Quantized q = run("hif4.v14", kEx2);
    EXPECT_EQ(q.word, 0x000101C2u);
    expect_codes(q.codes, {0x7, 0x2, 0x6, 0xD});
    expect_data_bytes(q.codes, {0x27, 0xD6});
    expect_values(q, {10.5f, 3.0f, 9.0f, -7.5f});
  }
  {
    const Quantized q = run("hif4.amct", kEx2);
    EXPECT_EQ(q.word, 0x000101C2u);
    expect_codes(q.codes, {0x7, 0x3, 0x6, 0xD});
    expect_values(q, {10.5f, 4.5f, 9.0f, -7.5f});
  }
  {
    const Quantized q = run("hif4.a6", kEx2);
    EXPECT_EQ(q.word, 0x000101C2u);
    expect_codes(q.codes, {0x7, 0x2, 0x6, 0xC});
    expect_values(q, {10.5f, 3.0f, 9.0f, -6.0f});
  }
  {
    // V12: B = 1, b0 = c0 = 1, scale 8; scale byte B + 48 = 0x31.
    const Quantized q = run("hif4.v12_pow2", kEx2);
    EXPECT_EQ(q.word, 0x00010131u);
    expect_codes(q.codes, {0x5, 0x2, 0x5, 0xB});
    expect_values(q, {10.0f, 4.0f, 10.0f, -6.0f});
  }
}

TEST(Hif4WorkedExamples, Ex2PrimeBf16ReciprocalEffect) {
  Block x = kEx2;
  x[1] = 3.74609375f;  // fp32, not a bf16 value
  ASSERT_FALSE(fp4emu::is_bf16_exact(x[1]));
  const Quantized q = run("hif4.v14", x);
  EXPECT_EQ(q.word, 0x000101C2u);
  EXPECT_EQ(q.codes[1], 0x3);
  EXPECT_EQ(q.decoded[1], 4.5f);
  EXPECT_EQ(q.fake[1], 4.5f);
  // With the exact reciprocal 1/1.5 the element would round to q = 2.
  EXPECT_EQ(std::floor(3.74609375 / 1.5 + 0.5), 2.0);
  EXPECT_EQ(std::floor(3.74609375 * 0.66796875 + 0.5), 3.0);
}

const Block kEx3 = block_of({1.0e6f, -3.0e5f, 1000.0f, 7.0f});

TEST(Hif4WorkedExamples, Ex3ScaleSaturation) {
  for (const char* id : {"hif4.v14", "hif4.v14_f64", "hif4.amct"}) {
    SCOPED_TRACE(id);
    const Quantized q = run(id, kEx3);
    EXPECT_EQ(q.word, 0x000101FEu);
    expect_codes(q.codes, {0x7, 0xE, 0x0, 0x0});
    expect_values(q, {344064.0f, -294912.0f, 0.0f, 0.0f});
  }
  // r = bf16(1/49152) = 1.3359375 * 2^-16.
  EXPECT_EQ(fp4emu::e6m2_reciprocal_bf16(0xFE), 1.3359375f * 0x1p-16f);
  // V14-noclip would need E6M2(142336) = 2^17, beyond the format: NaN block.
  expect_nan_block(run("hif4.v14_noclip", kEx3));
}

TEST(Hif4WorkedExamples, Ex4ScaleRoundsDownElementSaturates) {
  const Quantized q = run("hif4.v14", block_of({7.875f, 1.0f}));
  EXPECT_EQ(q.word, 0x000101C0u);
  expect_codes(q.codes, {0x7, 0x1});
  expect_data_bytes(q.codes, {0x17});
  expect_values(q, {7.0f, 1.0f});
}

const Block kEx5 = [] {
  Block b{};
  b[0] = 12.0f;
  b[8] = 7.0f;
  b[9] = 1.0f;
  return b;
}();

TEST(Hif4WorkedExamples, Ex5A6ProductRoundingFlipsL2Bit) {
  {
    const Quantized q = run("hif4.v14", kEx5);
    EXPECT_EQ(q.word, 0x000501C3u);
    EXPECT_EQ(q.codes[0], 0x7);
    EXPECT_EQ(q.codes[8], 0x7);
    EXPECT_EQ(q.codes[9], 0x1);
    expect_data_bytes(q.codes, {0x07, 0x00, 0x00, 0x00, 0x17});
    Block want{};
    want[0] = 12.25f;
    want[8] = 6.125f;
    want[9] = 0.875f;
    for (int i = 0; i < kN; ++i) {
      EXPECT_TRUE(same_value(q.decoded[i], want[i])) << i;
      EXPECT_TRUE(same_value(q.fake[i], want[i])) << i;
    }
  }
  {
    const Quantized q = run("hif4.a6", kEx5);
    EXPECT_EQ(q.word, 0x000503C3u);
    EXPECT_EQ(q.codes[0], 0x7);
    EXPECT_EQ(q.codes[8], 0x4);
    EXPECT_EQ(q.codes[9], 0x1);
    expect_data_bytes(q.codes, {0x07, 0x00, 0x00, 0x00, 0x14});
    Block want{};
    want[0] = 12.25f;
    want[8] = 7.0f;
    want[9] = 1.75f;
    for (int i = 0; i < kN; ++i) {
      EXPECT_TRUE(same_value(q.decoded[i], want[i])) << i;
      EXPECT_TRUE(same_value(q.fake[i], want[i])) << i;
    }
  }
}

TEST(Hif4WorkedExamples, Ex6AllZeroBlock) {
  const Block zero{};
  for (const char* id : {"hif4.v14", "hif4.amct", "hif4.a6"}) {
    SCOPED_TRACE(id);
    const Quantized q = run(id, zero);
    EXPECT_EQ(q.word, 0x00000000u);
    for (int i = 0; i < kN; ++i) EXPECT_EQ(q.codes[i], 0x0) << i;
    expect_values(q, {});
  }
  expect_nan_block(run("hif4.v14_noclip", zero));
}

TEST(Hif4WorkedExamples, Ex7ScaleDoubleRounding) {
  const float x0 = std::bit_cast<float>(0x40B6CB66u);
  ASSERT_EQ(x0, 5.712328910827637f);
  const Block x = block_of({x0});
  // V14: fp32(M*c7) lands on the bf16 tie 0.814453125, RNE -> 0.8125 -> s = 0.75.
  ASSERT_EQ(x0 * 0.142578125f, 0.814453125f);
  for (const char* id : {"hif4.v14", "hif4.amct"}) {
    SCOPED_TRACE(id);
    const Quantized q = run(id, x);
    EXPECT_EQ(q.word, 0x000101BEu);
    EXPECT_EQ(q.codes[0], 0x7);
    expect_values(q, {5.25f});
  }
  // V14-numpy: the exact product is above the tie -> 0.81640625 -> s = 0.875.
  const Quantized q = run("hif4.v14_f64", x);
  EXPECT_EQ(q.word, 0x000101BFu);
  EXPECT_EQ(q.codes[0], 0x7);
  expect_values(q, {6.125f});
}

// ================================================================================
// E6M2 reciprocal (docs/spec/hif4.md §2) against integer long division
// ================================================================================

TEST(Hif4Reciprocal, TableEqualsBf16OfExactReciprocalForAll255Codes) {
  for (int code = 0; code < 255; ++code) {
    const float r = fp4emu::e6m2_reciprocal_bf16(static_cast<uint8_t>(code));
    const double want = e6m2_reciprocal_oracle(code);
    EXPECT_EQ(static_cast<double>(r), want) << "code " << code;
    EXPECT_TRUE(fp4emu::is_bf16_exact(r)) << "code " << code;
    // docs/spec/hif4.md §6.1 step 4: bf16(fp32(1/s)) gives the same (no double-rounding case).
    const float s = static_cast<float>(e6m2_value(code));
    EXPECT_EQ(bf16_oracle(1.0f / s), r) << "code " << code;
  }
  EXPECT_TRUE(std::isnan(fp4emu::e6m2_reciprocal_bf16(0xFF)));
  // The §2 table at E = 48.
  EXPECT_EQ(bits_of(fp4emu::e6m2_reciprocal_bf16(0xC0)) >> 16, 0x3F80u);
  EXPECT_EQ(bits_of(fp4emu::e6m2_reciprocal_bf16(0xC1)) >> 16, 0x3F4Du);
  EXPECT_EQ(bits_of(fp4emu::e6m2_reciprocal_bf16(0xC2)) >> 16, 0x3F2Bu);
  EXPECT_EQ(bits_of(fp4emu::e6m2_reciprocal_bf16(0xC3)) >> 16, 0x3F12u);
}

// ================================================================================
// Scale word bit order (docs/spec/hif4.md §5.2)
// ================================================================================

TEST(Hif4ScaleWord, BitOrderRoundTripAndMapping) {
  BlockGen g(7);
  for (int n = 0; n < 10000; ++n) {
    const auto w = static_cast<uint32_t>(g.bits());
    for (ScaleBitOrder o : {ScaleBitOrder::lsb_first, ScaleBitOrder::msb_first}) {
      EXPECT_EQ(ref::hif4_word_from_stored(ref::hif4_word_to_stored(w, o), o), w);
      EXPECT_EQ(ref::hif4_word_to_stored(ref::hif4_word_from_stored(w, o), o), w);
    }
    EXPECT_EQ(ref::hif4_word_to_stored(w, ScaleBitOrder::lsb_first), w);
    EXPECT_EQ(ref::hif4_word_to_stored(w, ScaleBitOrder::msb_first) & 0xFFu, w & 0xFFu);
  }
  const auto msb = [](uint32_t w) { return ref::hif4_word_to_stored(w, ScaleBitOrder::msb_first); };
  for (int j = 0; j < 8; ++j) EXPECT_EQ(msb(1u << (8 + j)), 1u << (8 + 7 - j)) << "b_" << j;
  for (int k = 0; k < 8; ++k) EXPECT_EQ(msb(1u << (16 + k)), 1u << (16 + 7 - k)) << "c_" << k;
  for (int k = 8; k < 16; ++k) EXPECT_EQ(msb(1u << (16 + k)), 1u << (24 + 15 - k)) << "c_" << k;
}

// ================================================================================
// Properties per recipe
// ================================================================================

class Hif4RecipeProperties : public ::testing::TestWithParam<const char*> {
 protected:
  const Recipe& r() const { return recipe(GetParam()); }
  bool a6() const { return r().bf16_input_only; }
  bool sign_bit_rule() const { return r().hif4.zero_sign == fp4emu::ZeroSign::sign_bit; }
  Block input(Block b) const { return a6() ? to_bf16(b) : b; }
};

INSTANTIATE_TEST_SUITE_P(Hif4, Hif4RecipeProperties, ::testing::ValuesIn(kAllIds),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '.') ch = '_';
                           return name;
                         });

TEST_P(Hif4RecipeProperties, SignSymmetry) {
  BlockGen g(11);
  for (int n = 0; n < 2000; ++n) {
    const bool with_zeros = n % 2 == 0;
    const Block x = input(g.block(-20, 12, 20, n % 3 == 0 ? 3 : 23, with_zeros));
    Block neg;
    for (int i = 0; i < kN; ++i) neg[i] = -x[i];
    const Quantized p = run(r(), x), m = run(r(), neg);
    ASSERT_EQ(p.word, m.word) << "block " << n;
    for (int i = 0; i < kN; ++i) {
      const bool zero = x[i] == 0.0f;
      if (zero && !sign_bit_rule()) {
        // x < 0 recipes: +-0.0 both give code 0x0 and +0.
        EXPECT_EQ(p.codes[i], 0x0) << i;
        EXPECT_EQ(m.codes[i], 0x0) << i;
        continue;
      }
      EXPECT_EQ(p.codes[i] ^ m.codes[i], 0x8) << "block " << n << " lane " << i;
      if (!std::isnan(p.fake[i])) {
        EXPECT_EQ(bits_of(p.fake[i]) ^ bits_of(m.fake[i]), 0x80000000u) << "block " << n << " lane " << i;
        EXPECT_EQ(bits_of(p.decoded[i]) ^ bits_of(m.decoded[i]), 0x80000000u) << "block " << n << " lane " << i;
      }
    }
  }
}

TEST_P(Hif4RecipeProperties, AllZeroBlock) {
  const Quantized q = run(r(), Block{});
  const std::string id(GetParam());
  if (id == "hif4.v14_noclip") {
    // docs/spec/hif4.md §6.3: log2(0) -> NaN block.
    EXPECT_EQ(q.word, 0x000000FFu);
    expect_nan_block(q);
    return;
  }
  if (id == "hif4.v12_pow2") {
    // docs/spec/hif4.md §6.6 with tiny = 2^-45: e4 = -45, B = -47 clamped to -46 (byte 2),
    // b = clamp(-45 + 46 - 1) = 0, c = clamp(-45 + 46 - 0) = 1 for every group.
    EXPECT_EQ(q.word, 0xFFFF0002u);
  } else {
    // Scale 2^-48 (code 0x00), no bits (A6: saturating conversion of 0 -> 0x00).
    EXPECT_EQ(q.word, 0x00000000u);
  }
  for (int i = 0; i < kN; ++i) EXPECT_EQ(q.codes[i], 0x0) << i;
  expect_values(q, {});
}

TEST_P(Hif4RecipeProperties, NegativeZeroBlock) {
  Block x;
  x.fill(-0.0f);
  const Quantized q = run(r(), x);
  const std::string id(GetParam());
  if (id == "hif4.v14_noclip") {
    expect_nan_block(q);
    return;
  }
  EXPECT_EQ(q.word, run(r(), Block{}).word);
  const int want_code = sign_bit_rule() ? 0x8 : 0x0;  // docs/spec/hif4.md §10.6
  const float want_value = sign_bit_rule() ? -0.0f : 0.0f;
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(q.codes[i], want_code) << i;
    EXPECT_EQ(bits_of(q.decoded[i]), bits_of(want_value)) << i;
    EXPECT_EQ(bits_of(q.fake[i]), bits_of(want_value)) << i;
  }
}

TEST_P(Hif4RecipeProperties, NegativeValueRoundingToZeroKeepsSignBit) {
  // docs/spec/hif4.md §6.1 step 8, §6.4 step 5: -0.01 next to 7.0 gives code 0x8 and -0.0.
  const Quantized q = run(r(), block_of({7.0f, -0.01f}));
  EXPECT_EQ(q.codes[1], 0x8);
  EXPECT_EQ(bits_of(q.decoded[1]), bits_of(-0.0f));
  EXPECT_EQ(bits_of(q.fake[1]), bits_of(-0.0f));
}

TEST_P(Hif4RecipeProperties, NanInput) {
  BlockGen g(23);
  const std::string id(GetParam());
  const auto policy = r().hif4.non_finite;
  for (int n = 0; n < 200; ++n) {
    Block x = input(g.block(-10, 10, 8, 23, n % 2 == 0));
    const int lane = g.uniform(0, kN - 1);
    Block zeroed = x;
    zeroed[lane] = 0.0f;
    x[lane] = n % 3 == 0 ? -kNaN : kNaN;
    const Quantized q = run(r(), x), z = run(r(), zeroed);
    // Bits and codes are those of the block with the NaN lane as +0.
    EXPECT_EQ(q.word & 0xFFFFFF00u, z.word & 0xFFFFFF00u);
    EXPECT_EQ(q.codes, z.codes);
    EXPECT_EQ(q.codes[lane], 0x0);
    if (policy == fp4emu::NonFinitePolicy::passthrough) {
      // V14-special: the scale ignores the NaN; fake-quant copies it through.
      EXPECT_EQ(q.word, z.word);
      for (int i = 0; i < kN; ++i) {
        if (i == lane) {
          EXPECT_TRUE(std::isnan(q.fake[i]));
          EXPECT_EQ(q.decoded[i], 0.0f);
        } else {
          EXPECT_TRUE(same_value(q.fake[i], z.fake[i])) << i;
        }
      }
    } else {
      // torch (V14, V14-numpy, noclip, V12) and poison (AMCT, A6): NaN block.
      expect_nan_block(q);
    }
  }
}

TEST_P(Hif4RecipeProperties, InfInput) {
  const std::string id(GetParam());
  Block x{};
  for (int i = 0; i < kN; ++i) x[i] = input(block_of({static_cast<float>((i % 7) - 3) * 13.5f}))[0];
  Block zeroed = x;
  zeroed[5] = 0.0f;
  zeroed[40] = 0.0f;
  x[5] = kInf;
  x[40] = -kInf;
  const Quantized q = run(r(), x), z = run(r(), zeroed);
  const auto policy = r().hif4.non_finite;
  if (id == "hif4.v14" || id == "hif4.v14_f64") {
    // docs/spec/hif4.md §6.1 Special inputs: the scale clamps to 49152, the Inf lanes get
    // b = c = 1 and saturate to +-344064; the others become +-0 at this scale.
    EXPECT_EQ(q.word & 0xFFu, 0xFEu);
    EXPECT_EQ(l2_bit(q.word, 5), 1);
    EXPECT_EQ(l3_bit(q.word, 5), 1);
    EXPECT_EQ(l2_bit(q.word, 40), 1);
    EXPECT_EQ(l3_bit(q.word, 40), 1);
    EXPECT_EQ(q.codes[5], 0x7);
    EXPECT_EQ(q.codes[40], 0xF);
    EXPECT_EQ(q.decoded[5], 344064.0f);
    EXPECT_EQ(q.decoded[40], -344064.0f);
    EXPECT_EQ(q.fake[5], 344064.0f);
    EXPECT_EQ(q.fake[40], -344064.0f);
    for (int i = 0; i < kN; ++i) {
      if (i != 5 && i != 40) {
        EXPECT_EQ(q.decoded[i], 0.0f) << i;
      }
    }
  } else if (id == "hif4.v12_pow2") {
    // Inf has exponent "128": B clamps to 16 (byte 0x40), b = c = 1, q = 7.
    EXPECT_EQ(q.word & 0xFFu, 0x40u);
    EXPECT_EQ(q.codes[5], 0x7);
    EXPECT_EQ(q.codes[40], 0xF);
    EXPECT_EQ(q.fake[5], 458752.0f);
    EXPECT_EQ(q.fake[40], -458752.0f);
    EXPECT_EQ(q.decoded[40], -458752.0f);
  } else if (id == "hif4.v14_noclip") {
    // No clamp: s0 = Inf has no E6M2 code -> NaN block.
    expect_nan_block(q);
  } else if (policy == fp4emu::NonFinitePolicy::poison) {
    // AMCT, A6: NaN block; bits and codes of the block with the Inf lanes as 0.
    expect_nan_block(q);
    EXPECT_EQ(q.word & 0xFFFFFF00u, z.word & 0xFFFFFF00u);
    EXPECT_EQ(q.codes, z.codes);
  } else {
    ASSERT_EQ(policy, fp4emu::NonFinitePolicy::passthrough);
    EXPECT_EQ(q.word, z.word);
    EXPECT_EQ(q.codes, z.codes);
    for (int i = 0; i < kN; ++i) {
      if (i == 5 || i == 40) {
        EXPECT_EQ(q.fake[i], x[i]);
      } else {
        EXPECT_TRUE(same_value(q.fake[i], z.fake[i])) << i;
      }
    }
  }
}

TEST_P(Hif4RecipeProperties, SubnormalInputs) {
  const std::string id(GetParam());
  BlockGen g(31);
  // A block of subnormals only (A6: bf16 subnormals).
  Block x{};
  for (int i = 0; i < kN; ++i) {
    const uint32_t man = static_cast<uint32_t>(g.bits()) & (a6() ? 0x007F0000u : 0x007FFFFFu);
    x[i] = std::bit_cast<float>(man | (i % 2 ? 0x80000000u : 0u));
  }
  x[3] = std::bit_cast<float>(a6() ? 0x00010000u : 0x00000001u);  // at least one nonzero
  const Quantized q = run(r(), x);
  if (id == "hif4.v14_noclip" || id == "hif4.v14_special") {
    // Unclamped: the scale would be far below 2^-48 -> NaN block.
    expect_nan_block(q);
  } else {
    EXPECT_EQ(q.word, run(r(), Block{}).word);  // the zero block's word
    for (int i = 0; i < kN; ++i) {
      const bool neg = sign_bit_rule() ? std::signbit(x[i]) : x[i] < 0.0f;
      EXPECT_EQ(q.codes[i], neg ? 0x8 : 0x0) << i;
      EXPECT_EQ(q.fake[i], 0.0f) << i;
    }
  }
  // Subnormals next to a normal maximum always give q = 0.
  Block y = x;
  y[0] = 7.0f;
  const Quantized w = run(r(), y);
  EXPECT_NE(w.word & 0xFFu, 0xFFu);
  for (int i = 1; i < kN; ++i) EXPECT_EQ(w.codes[i] & 0x7, 0) << i;
  EXPECT_EQ(w.decoded[0], 7.0f);
}

TEST_P(Hif4RecipeProperties, DecodeOfQuantizeEqualsFakeQuant) {
  BlockGen g(101);
  const bool passthrough = r().hif4.non_finite == fp4emu::NonFinitePolicy::passthrough;
  std::vector<Rounding> modes;
  for (Rounding m : {Rounding::rne, Rounding::rha, Rounding::rtz, Rounding::ties_to_zero})
    if (r().allowed_roundings & fp4emu::rounding_bit(m)) modes.push_back(m);
  for (int n = 0; n < 3000; ++n) {
    Block x = input(g.any_block());
    if (n % 10 == 0) x[g.uniform(0, kN - 1)] = (n % 20 == 0) ? kNaN : -kInf;
    const Rounding mode = modes[n % modes.size()];
    const Quantized q = run(r(), x, mode);
    for (int i = 0; i < kN; ++i) {
      if (passthrough && !std::isfinite(x[i])) {
        EXPECT_TRUE(same_value(q.fake[i], x[i]));
        continue;
      }
      ASSERT_TRUE(same_value(q.decoded[i], q.fake[i]))
          << "block " << n << " lane " << i << " x " << x[i] << " decode " << q.decoded[i] << " fake " << q.fake[i];
    }
    // Every decoded value is exact in bf16 (docs/spec/hif4.md §4).
    for (int i = 0; i < kN; ++i) EXPECT_TRUE(fp4emu::is_bf16_exact(q.decoded[i]));
  }
}

TEST_P(Hif4RecipeProperties, ScaleNeverNanForFiniteBlocksUnderClamp) {
  const std::string id(GetParam());
  const bool clamps = r().hif4.scale_range == fp4emu::Hif4ScaleRange::clamp ||
                      r().hif4.scale_range == fp4emu::Hif4ScaleRange::saturate_e6m2;
  BlockGen g(202);
  const float huge = a6() ? std::bit_cast<float>(0x7F7F0000u) : std::numeric_limits<float>::max();
  for (int n = 0; n < 3000; ++n) {
    Block x = input(g.any_block());
    if (n % 7 == 0) x[g.uniform(0, kN - 1)] = n % 14 == 0 ? huge : -huge;
    if (n % 11 == 0) x.fill(std::bit_cast<float>(a6() ? 0x00010000u : 0x00000001u));
    const Quantized q = run(r(), x);
    if (clamps) {
      ASSERT_NE(q.word & 0xFFu, 0xFFu) << "block " << n;
      for (int i = 0; i < kN; ++i) ASSERT_TRUE(std::isfinite(q.fake[i])) << "block " << n << " lane " << i;
    }
  }
  if (!clamps) {
    // noclip / special: in-range finite blocks still get a scale.
    for (int n = 0; n < 500; ++n) {
      const Quantized q = run(r(), g.block(-30, 15, 10, 23, true));
      ASSERT_NE(q.word & 0xFFu, 0xFFu) << "block " << n;
    }
  }
}

TEST(Hif4Families, V14ScaleFamilyAgreesWithV14OnExactBlocks) {
  // On bf16 blocks of moderate range with no zero lanes, V14, V14-numpy, noclip,
  // special and AMCT share the scale word (exact products). A6 and V12 use
  // other scale rules and are pinned by their own examples.
  for (const char* id : {"hif4.v14_f64", "hif4.v14_noclip", "hif4.v14_special", "hif4.amct"}) {
    BlockGen g(303);
    for (int n = 0; n < 1000; ++n) {
      const Block x = to_bf16(g.block(-20, 12, 10, 7, false));
      ASSERT_EQ(run(id, x).word, run("hif4.v14", x).word) << id << " block " << n;
    }
  }
}

// ================================================================================
// Targeted cases
// ================================================================================

TEST(Hif4V14, LiteralHalfUpQuirkAtHalfMinusUlp) {
  // docs/spec/hif4.md §6.1 step 7: 4t = 0.5 - 2^-25 makes fp32(4t + 0.5) round to 1.0,
  // so V14 gives q = 1. Exact arithmetic (V14-numpy) and RNE give q = 0.
  Block x{};
  x[0] = 7.0f;                    // s = 1, r = 1 (EX1)
  x[12] = 0.125f - 0x1p-27f;      // group 3: b = c = 0, so 4t = 0.5 - 2^-25
  ASSERT_EQ(bits_of(x[12]), 0x3DFFFFFFu);
  EXPECT_EQ(run("hif4.v14", x).codes[12], 0x1);
  EXPECT_EQ(run("hif4.v14", x).fake[12], 0.25f);
  EXPECT_EQ(run("hif4.v14", x, Rounding::rne).codes[12], 0x0);
  EXPECT_EQ(run("hif4.v14_f64", x).codes[12], 0x0);
  EXPECT_EQ(run("hif4.v14_f64", x).word, run("hif4.v14", x).word);
}

TEST(Hif4V14, RoundingOverridesOnTies) {
  // Group 3 of EX1 (scale 1): 0.125, 0.375, -1.0, 0.625 -> 4t = 0.5, 1.5, 4, 2.5.
  const auto codes = [](Rounding m) {
    const Quantized q = run("hif4.v14", kEx1, m);
    return std::array<int, 4>{q.codes[12], q.codes[13], q.codes[14], q.codes[15]};
  };
  EXPECT_EQ(codes(Rounding::rha), (std::array<int, 4>{0x1, 0x2, 0xC, 0x3}));
  EXPECT_EQ(codes(Rounding::rne), (std::array<int, 4>{0x0, 0x2, 0xC, 0x2}));
  EXPECT_EQ(codes(Rounding::ties_to_zero), (std::array<int, 4>{0x0, 0x1, 0xC, 0x2}));
  EXPECT_EQ(codes(Rounding::rtz), (std::array<int, 4>{0x0, 0x1, 0xC, 0x2}));
}

TEST(Hif4A6, RhaOverrideOnTies) {
  // EX1 under A6 with the document's ROUND_A: the three ties go back up.
  const Quantized q = run("hif4.a6", kEx1, Rounding::rha);
  expect_data_bytes(q.codes, {0xB7, 0x01, 0x12, 0x09, 0xD3, 0x61, 0x21, 0x3C});
}

// The pto-isa golden takes the code's sign from y = bf16(x * scale) (y < 0),
// not from x: a negative x whose product underflows to -0 gets code 0x0.
TEST(Hif4A6, SignComesFromTheBf16Product) {
  const float bf16_max = std::bit_cast<float>(0x7F7F0000u);
  const float tiniest = std::bit_cast<float>(0x80010000u);  // -2^-133, the smallest bf16 subnormal
  // Group 0 holds the maximum (E6M2 saturates to 0xFE, Ea_rec = bf16(1/49152)
  // ~ 1.34 * 2^-16). Lane 8 (L2 group 1, b = c = 0): y = bf16(-2^-133 * Ea_rec)
  // ~ -1.34 * 2^-149 -> -0. Lane 12: -1 * Ea_rec is a nonzero negative y that
  // rounds to magnitude 0 -> 0x8. Lane 16: -0.0 -> 0x0.
  Block x{};
  x[0] = bf16_max;
  x[8] = tiniest;
  x[12] = -1.0f;
  x[16] = -0.0f;
  const Quantized q = run("hif4.a6", x);
  EXPECT_EQ(q.word & 0xFFu, 0xFEu);
  EXPECT_EQ(q.codes[8], 0x0);  // fp4emu gave 0x8 (sign of x) before
  EXPECT_EQ(bits_of(q.fake[8]), 0u);
  EXPECT_EQ(bits_of(q.decoded[8]), 0u);
  EXPECT_EQ(q.codes[12], 0x8);
  EXPECT_EQ(bits_of(q.fake[12]), 0x80000000u);
  EXPECT_EQ(q.codes[16], 0x0);
  // The V14 CUDA rule keeps the sign bit of x in both cases.
  const Quantized v = run("hif4.v14", x);
  EXPECT_EQ(v.codes[8], 0x8);
  EXPECT_EQ(v.codes[16], 0x8);
}

TEST(Hif4A6, ZeroScaleCodeIsTwoToMinus48) {
  // Decision (docs/spec/hif4.md §6.5 step 9): E6M2 0x00 means 2^-48, reciprocal 2^48.
  // Ma = 7 * 2^-48: Ma*c7 = (511/512) * 2^-48, bf16 tie -> 2^-48 -> 0x00,
  // b0 = c0 = 1, y = 1.75 -> code 7. The golden (0x00 as 0) would quantize
  // this block to all zeros.
  const Quantized q = run("hif4.a6", block_of({7.0f * 0x1p-48f}));
  EXPECT_EQ(q.word, 0x00010100u);
  EXPECT_EQ(q.codes[0], 0x7);
  EXPECT_EQ(q.fake[0], 7.0f * 0x1p-48f);
  EXPECT_EQ(q.decoded[0], 7.0f * 0x1p-48f);
}

TEST(Hif4V14Noclip, OutOfRangeScales) {
  // Largest representable: s0 = 53248 (6.5 * 2^13) rounds to 6 * 2^13 = 49152.
  // M = 53248 / c7 is not exact; use M such that bf16(fp32(M c7)) = 53248.
  const float m_ok = 53248.0f / 0.142578125f;
  const Quantized ok = run("hif4.v14_noclip", block_of({m_ok}));
  ASSERT_EQ(bf16_oracle(m_ok * 0.142578125f), 53248.0f);
  EXPECT_EQ(ok.word & 0xFFu, 0xFEu);
  // One bf16 step up: 53504 rounds to 7 * 2^13 = 57344, the NaN slot.
  const float m_bad = 53504.0f / 0.142578125f;
  ASSERT_EQ(bf16_oracle(m_bad * 0.142578125f), 53504.0f);
  expect_nan_block(run("hif4.v14_noclip", block_of({m_bad})));
  expect_nan_block(run("hif4.v14_special", block_of({m_bad})));
  EXPECT_EQ(run("hif4.v14", block_of({m_bad})).word & 0xFFu, 0xFEu);
  // Smallest: s0 = 0.9375 * 2^-48 (7.5 * 2^-51) rounds up to 2^-48; one bf16 step below does not.
  const float lo_ok = 0.9375f * 0x1p-48f / 0.142578125f;
  ASSERT_EQ(bf16_oracle(lo_ok * 0.142578125f), 0.9375f * 0x1p-48f);
  EXPECT_EQ(run("hif4.v14_noclip", block_of({lo_ok})).word & 0xFFu, 0x00u);
  const float lo_bad = 0.93359375f * 0x1p-48f / 0.142578125f;
  ASSERT_EQ(bf16_oracle(lo_bad * 0.142578125f), 0.93359375f * 0x1p-48f);
  expect_nan_block(run("hif4.v14_noclip", block_of({lo_bad})));
  expect_nan_block(run("hif4.v14_special", block_of({lo_bad})));
  EXPECT_EQ(run("hif4.v14", block_of({lo_bad})).word & 0xFFu, 0x00u);
}

TEST(Hif4V12, ExactFloorLog2JustBelowAPowerOfTwo) {
  // m4 = 2^10 (1 - 2^-24): exact floor(log2) = 9 (fp32 log2f would round to 10).
  // E = 9, B = 7 (byte 0x37), b0 = c0 = 1, 4a / 2^9 = 8 - 2^-21 -> q = 8 -> 7.
  const float x0 = 1024.0f * (1.0f - 0x1p-24f);
  const Quantized q = run("hif4.v12_pow2", block_of({x0}));
  EXPECT_EQ(q.word, 0x00010137u);
  EXPECT_EQ(q.codes[0], 0x7);
  expect_values(q, {896.0f});
}

// ================================================================================
// Independent oracles on random blocks
// ================================================================================

TEST(Hif4Oracle, V14ScaleBitsAndElements) {
  BlockGen g(404);
  const Recipe& v14 = recipe("hif4.v14");
  for (int n = 0; n < 4000; ++n) {
    const Block x = g.any_block();
    const Quantized q = run(v14, x);
    // Scale: E6M2 RNE (table search) of clamp(bf16(fp32(M c7)), 2^-48, 49152).
    double M = 0;
    for (float v : x) M = std::max(M, std::fabs(static_cast<double>(v)));
    double s0 = bf16_oracle(fp32_mul(M, 0.142578125));
    s0 = std::min(std::max(s0, std::ldexp(1.0, -48)), 49152.0);
    const int code = e6m2_nearest(s0);
    ASSERT_EQ(static_cast<int>(q.word & 0xFF), code) << "block " << n << " M " << M;
    const double r = e6m2_reciprocal_oracle(code);
    // Bits: b_j = [fp32(m8 r) >= 4], c_k = [fp32(m4 r) / 2^b >= 2].
    for (int k = 0; k < 16; ++k) {
      double m4 = 0, m8 = 0;
      for (int i = 4 * k; i < 4 * k + 4; ++i) m4 = std::max(m4, std::fabs(static_cast<double>(x[i])));
      for (int i = 8 * (k / 2); i < 8 * (k / 2) + 8; ++i) m8 = std::max(m8, std::fabs(static_cast<double>(x[i])));
      const int b = fp32_mul(m8, r) >= 4.0f ? 1 : 0;
      const int c = fp32_mul(m4, r) / std::ldexp(1.0, b) >= 2.0 ? 1 : 0;
      ASSERT_EQ(l2_bit(q.word, 4 * k), b) << "block " << n << " group " << k;
      ASSERT_EQ(l3_bit(q.word, 4 * k), c) << "block " << n << " group " << k;
    }
    // Elements: q minimises |4t - q| (ties up), t = fp32(a 2^-(b+c) r); the
    // one fp32 quirk 4t = 0.5 - 2^-25 gives 1.
    for (int i = 0; i < kN; ++i) {
      const int bc = l2_bit(q.word, i) + l3_bit(q.word, i);
      const float t = fp32_mul(std::fabs(static_cast<double>(x[i])) * std::ldexp(1.0, -bc), r);
      const double four_t = 4.0 * t;
      const int want = four_t == 0.5 - 0x1p-25 ? 1 : nearest_q_half_up(four_t);
      ASSERT_EQ(q.codes[i] & 7, want) << "block " << n << " lane " << i << " x " << x[i];
      ASSERT_EQ((q.codes[i] >> 3) & 1, std::signbit(x[i]) ? 1 : 0) << "block " << n << " lane " << i;
    }
  }
}

TEST(Hif4Oracle, V14F64ScaleAndElementsExact) {
  BlockGen g(405);
  const Recipe& f64 = recipe("hif4.v14_f64");
  for (int n = 0; n < 2000; ++n) {
    const Block x = g.any_block();
    const Quantized q = run(f64, x);
    double M = 0;
    for (float v : x) M = std::max(M, std::fabs(static_cast<double>(v)));
    // bf16 RNE of the exact product (at most 32 significant bits, exact in
    // double): split into an integer significand on bf16's 8-bit grid.
    const double p = M * 0.142578125;
    double s0 = 0;
    if (p > 0) {
      const int e = std::ilogb(p);
      const int qe = std::max(e, -126) - 7;  // bf16 quantum (subnormals below 2^-126)
      const double scaled = std::ldexp(p, -qe);
      double k = std::floor(scaled);
      const double frac = scaled - k;
      if (frac > 0.5 || (frac == 0.5 && std::fmod(k, 2.0) == 1.0)) k += 1;
      s0 = std::ldexp(k, qe);
    }
    s0 = std::min(std::max(s0, std::ldexp(1.0, -48)), 49152.0);
    const int code = e6m2_nearest(s0);
    ASSERT_EQ(static_cast<int>(q.word & 0xFF), code) << "block " << n;
    const double r = e6m2_reciprocal_oracle(code);
    for (int i = 0; i < kN; ++i) {
      const int bc = l2_bit(q.word, i) + l3_bit(q.word, i);
      const double four_t = 4.0 * std::fabs(static_cast<double>(x[i])) * r * std::ldexp(1.0, -bc);
      ASSERT_EQ(q.codes[i] & 7, nearest_q_half_up(four_t)) << "block " << n << " lane " << i;
      ASSERT_EQ((q.codes[i] >> 3) & 1, x[i] < 0 ? 1 : 0) << "block " << n << " lane " << i;
    }
  }
}

TEST(Hif4Oracle, AmctElementsOnBf16Ratio) {
  BlockGen g(406);
  for (int n = 0; n < 2000; ++n) {
    const Block x = g.any_block();
    const Quantized q = run("hif4.amct", x);
    const Quantized v = run("hif4.v14", x);
    ASSERT_EQ(q.word, v.word) << "block " << n;  // same scale and bits as V14
    const double r = e6m2_reciprocal_oracle(static_cast<int>(q.word & 0xFF));
    for (int i = 0; i < kN; ++i) {
      const int bc = l2_bit(q.word, i) + l3_bit(q.word, i);
      const float t = bf16_oracle(fp32_mul(std::fabs(static_cast<double>(x[i])), r * std::ldexp(1.0, -bc)));
      ASSERT_EQ(q.codes[i] & 7, nearest_q_half_up(4.0 * t)) << "block " << n << " lane " << i;
      ASSERT_EQ((q.codes[i] >> 3) & 1, x[i] < 0 ? 1 : 0) << "block " << n << " lane " << i;
    }
  }
}

TEST(Hif4Oracle, A6ScaleBitsAndElements) {
  BlockGen g(407);
  for (int n = 0; n < 3000; ++n) {
    const Block x = to_bf16(g.any_block());
    const Quantized q = run("hif4.a6", x);
    double M = 0;
    for (float v : x) M = std::max(M, std::fabs(static_cast<double>(v)));
    // bf16 x bf16 is exact in fp32, so bf16(fp32(.)) is one rounding here.
    const float t = bf16_oracle(fp32_mul(M, 0.142578125));
    const int code = e6m2_nearest(t);  // saturating: nearest finite code; below 2^-48 -> 0x00
    ASSERT_EQ(static_cast<int>(q.word & 0xFF), code) << "block " << n;
    const double rec = e6m2_reciprocal_oracle(code);
    for (int k = 0; k < 16; ++k) {
      double m4 = 0, m8 = 0;
      for (int i = 4 * k; i < 4 * k + 4; ++i) m4 = std::max(m4, std::fabs(static_cast<double>(x[i])));
      for (int i = 8 * (k / 2); i < 8 * (k / 2) + 8; ++i) m8 = std::max(m8, std::fabs(static_cast<double>(x[i])));
      const int b = bf16_oracle(fp32_mul(m8, rec)) >= 4.0f ? 1 : 0;
      const int c = bf16_oracle(static_cast<float>(bf16_oracle(fp32_mul(m4, rec)) * std::ldexp(1.0, -b))) >= 2.0f;
      ASSERT_EQ(l2_bit(q.word, 4 * k), b) << "block " << n << " group " << k;
      ASSERT_EQ(l3_bit(q.word, 4 * k), c) << "block " << n << " group " << k;
    }
    for (int i = 0; i < kN; ++i) {
      const int bc = l2_bit(q.word, i) + l3_bit(q.word, i);
      const float scale = bf16_oracle(static_cast<float>(rec * std::ldexp(1.0, -bc)));
      const float y = bf16_oracle(fp32_mul(x[i], scale));
      ASSERT_EQ(q.codes[i] & 7, nearest_q_even(std::fabs(static_cast<double>(y))))
          << "block " << n << " lane " << i << " x " << x[i] << " y " << y << " word " << std::hex << q.word;
      ASSERT_EQ((q.codes[i] >> 3) & 1, y < 0 ? 1 : 0) << "block " << n << " lane " << i;  // golden: (y < 0)
    }
  }
}

}  // namespace
