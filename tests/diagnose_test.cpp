// The difference diagnosis (fp4emu/quant/diagnose.hpp): the reference output
// of a recipe against the same output with one planted deviation of each
// class. The expected side always comes from the library's quantizers; the
// planted side is built here by hand, and every assertion counts the planted
// differences from the arrays themselves.
#include "fp4emu/quant/diagnose.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/quantize.hpp"

namespace fp4emu {
namespace {

using diagnose::Kind;

// E2M1 magnitudes by code (bits 2..0), written out independently of the codec.
constexpr double kE2M1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

PackedTensor quant(const Tensor& x, const std::string& recipe, std::optional<float> global_amax = {}) {
  QuantOptions o;
  o.recipe = recipe;
  o.global_amax = global_amax;
  o.tail = TailPolicy::pad;
  return quantize(x, o);
}

// Code of element k of a row in a low_first packed row.
int get_code(const std::vector<uint8_t>& bytes, int64_t row_bytes, int64_t row, int64_t k) {
  const uint8_t b = bytes[row * row_bytes + k / 2];
  return (k & 1) ? b >> 4 : b & 0xF;
}
void set_code(std::vector<uint8_t>& bytes, int64_t row_bytes, int64_t row, int64_t k, int code) {
  uint8_t& b = bytes[row * row_bytes + k / 2];
  b = (k & 1) ? static_cast<uint8_t>((b & 0x0F) | (code << 4)) : static_cast<uint8_t>((b & 0xF0) | code);
}

// How many codes of two [rows, cols] low_first packed tensors differ.
int64_t differing_codes(const PackedTensor& a, const PackedTensor& b, int64_t rows, int64_t cols) {
  int64_t n = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) n += get_code(a.codes, cols / 2, r, j) != get_code(b.codes, cols / 2, r, j);
  return n;
}

diagnose::Diagnosis run(const Tensor& x, const PackedTensor& ref, const diagnose::Side& actual,
                        std::span<const float> ref_values = {}) {
  return diagnose::diagnose(x, ref, diagnose::side_of(ref, ref_values), actual);
}

// Only class k is present, with n items.
void expect_only(const diagnose::Diagnosis& d, Kind k, int64_t n) {
  for (int i = 0; i < diagnose::kKinds; ++i) {
    const Kind ki = static_cast<Kind>(i);
    EXPECT_EQ(d.count(ki), ki == k ? n : 0) << "class " << diagnose::to_string(ki) << "; " << d.summary();
  }
}

// MXFP4 rows whose block amax is 6 (lane 0), so the OCP scale is 2^0 and
// x/X = x: ties of the E2M1 grid sit at the midpoints below.
Tensor mx_tie_rows(int rows) {
  const float lanes[] = {6.0f,   0.25f,  0.75f,  1.25f, 1.75f, 2.5f,  3.5f,  5.0f, -0.25f, -0.75f, -1.25f,
                         -1.75f, -2.5f,  -3.5f,  -5.0f, 0.3f,  1.1f,  2.2f,  4.4f, -0.6f,  0.0f,   -0.0f,
                         0.125f, 0.875f, 2.75f, 3.25f, 4.5f,  5.5f,  -3.0f, 1.0f, 0.5f,   -6.0f};
  Tensor x;
  x.shape = {rows, 32};
  for (int r = 0; r < rows; ++r)
    for (float v : lanes) x.data.push_back(v * static_cast<float>(1 << (r % 3)) * (r % 2 ? -1.0f : 1.0f));
  return x;
}

// Round |y| to the E2M1 grid, ties away from zero (an independent table search).
int e2m1_half_away(double y) {
  const double a = std::fabs(y);
  int best = 0;
  for (int m = 1; m < 8; ++m) {
    const double d = std::fabs(a - kE2M1[m]), db = std::fabs(a - kE2M1[best]);
    if (d < db || (d == db && kE2M1[m] > kE2M1[best])) best = m;
  }
  return best | (std::signbit(y) ? 8 : 0);
}

TEST(Diagnose, IdenticalSidesSayIdentical) {
  const Tensor x = mx_tie_rows(4);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  const Tensor v = dequantize(p);
  const diagnose::Diagnosis d = run(x, p, diagnose::side_of(p, v.data), v.data);
  EXPECT_TRUE(d.identical());
  EXPECT_EQ(d.agreement.blocks_equal, 4);
  EXPECT_EQ(d.agreement.codes_equal, 4 * 32);
  EXPECT_EQ(d.agreement.values_equal, 4 * 32);
  EXPECT_EQ(d.summary().rfind("identical", 0), 0u) << d.summary();
}

TEST(Diagnose, TiesRoundedAwayFromZeroInCodesAndInValues) {
  const Tensor x = mx_tie_rows(6);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  PackedTensor k = p;
  int64_t planted = 0;
  for (int64_t r = 0; r < 6; ++r) {
    const double X = std::ldexp(1.0, p.scales[r] - 127);
    for (int j = 0; j < 32; ++j) {
      const int c = e2m1_half_away(x.data[r * 32 + j] / X);
      if (c != get_code(p.codes, 16, r, j)) ++planted;
      set_code(k.codes, 16, r, j, c);
    }
  }
  ASSERT_GT(planted, 0);
  const diagnose::Diagnosis d = run(x, p, diagnose::side_of(k));
  expect_only(d, Kind::tie, planted);
  EXPECT_EQ(d.ties.away, planted);
  EXPECT_EQ(d.summary(), fmt::format("ties rounded away from zero in {} of {} differing elements", planted, planted));
  ASSERT_FALSE(d.kinds[static_cast<int>(Kind::tie)].first.empty());

  // The same kernel seen only through its dequantized values.
  Tensor kv = dequantize(k);
  diagnose::Side values_only;
  values_only.values = kv.data;
  const Tensor pv = dequantize(p);
  const diagnose::Diagnosis dv = run(x, p, values_only, pv.data);
  expect_only(dv, Kind::tie, planted);
  EXPECT_EQ(dv.ties.away, planted);
}

TEST(Diagnose, TiesToEvenAgainstAHalfAwayRecipe) {
  // microxcaling rounds half away; a kernel rounding to nearest even differs
  // on the ties whose away neighbour is odd.
  const Tensor x = mx_tie_rows(3);
  const PackedTensor p = quant(x, "mxfp4.microxcaling");
  QuantOptions o;
  o.recipe = "mxfp4.microxcaling";
  o.rounding = Rounding::rne;
  const PackedTensor k = quantize(x, o);
  const int64_t differ = differing_codes(p, k, 3, 32);
  ASSERT_GT(differ, 0);
  const diagnose::Diagnosis d = run(x, p, diagnose::side_of(k));
  expect_only(d, Kind::tie, differ);
  EXPECT_EQ(d.ties.even, differ);
  EXPECT_NE(d.summary().find("ties rounded to even"), std::string::npos) << d.summary();
}

// One planted code in row 0 of an X = 1 block: (lane, input, planted code, class).
struct PlantedCode {
  const char* name;
  float input;
  int code;  // -1: flip the sign bit of the reference's code
  Kind kind;
};

TEST(Diagnose, OnePlantedCodePerElementClass) {
  const PlantedCode cases[] = {
      {"near tie", static_cast<float>(1.25 * (1 + 0x1p-22)), 0x2, Kind::near_tie},  // reference: 1.5
      {"toward zero", 1.4f, 0x2, Kind::toward_zero},                                    // reference: 1.5
      {"away from zero", 1.1f, 0x3, Kind::away_from_zero},                              // reference: 1.0
      {"negative zero", -0.1f, -1, Kind::negative_zero},                                // reference: -0
      {"saturation", 7.0f, 0x6, Kind::saturation},                                      // reference: 6
      {"other", 0.9f, 0x5, Kind::other},                                                // reference: 1.0
  };
  for (const PlantedCode& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor x = mx_tie_rows(1);
    x.data[16] = c.input;
    const PackedTensor p = quant(x, "mxfp4.ocp");
    ASSERT_EQ(p.scales[0], 127);  // X = 1
    PackedTensor k = p;
    const int ref = get_code(p.codes, 16, 0, 16);
    const int planted = c.code < 0 ? ref ^ 8 : c.code;
    ASSERT_NE(planted, ref);
    set_code(k.codes, 16, 0, 16, planted);
    const diagnose::Diagnosis d = run(x, p, diagnose::side_of(k));
    expect_only(d, c.kind, 1);
    const auto& first = d.kinds[static_cast<int>(c.kind)].first;
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].block, 0);
    EXPECT_EQ(first[0].lane, 16);
    EXPECT_EQ(std::bit_cast<uint32_t>(first[0].input), std::bit_cast<uint32_t>(c.input));
  }
}

// Under stochastic rounding neither ties nor round-to-nearest mean anything:
// a kernel that rounds to nearest where the reference rounds stochastically
// differs by one step in every lane whose random byte chose the other side.
TEST(Diagnose, OtherNeighbourUnderStochasticRoundingIsOneClass) {
  Tensor x;
  x.shape = {4, 64};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 4 * 64; ++i) x.data.push_back(normal(rng));
  std::vector<uint8_t> bytes(x.data.size());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  QuantOptions o;
  o.recipe = "mxfp4.ocp";
  o.rounding = Rounding::stochastic;
  o.stochastic.bytes = bytes;
  const PackedTensor p = quantize(x, o);
  const PackedTensor k = quant(x, "mxfp4.ocp");
  ASSERT_EQ(p.scales, k.scales);
  const int64_t differ = differing_codes(p, k, 4, 64);
  ASSERT_GT(differ, 0);
  const diagnose::Diagnosis d = run(x, p, diagnose::side_of(k));
  expect_only(d, Kind::stochastic_step, differ);
  EXPECT_NE(d.summary().find("rounded stochastically to the other neighbour"), std::string::npos) << d.summary();
}

TEST(Diagnose, PaddingLanesAreTails) {
  Tensor x;
  x.shape = {2, 40};
  for (int i = 0; i < 80; ++i) x.data.push_back(0.1f * static_cast<float>(i % 17) - 0.7f);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  PackedTensor k = p;
  set_code(k.codes, 32, 1, 45, get_code(p.codes, 32, 1, 45) ^ 1);
  set_code(k.codes, 32, 0, 63, get_code(p.codes, 32, 0, 63) ^ 1);
  expect_only(run(x, p, diagnose::side_of(k)), Kind::tail, 2);
}

TEST(Diagnose, NanBlocksAreOneClassAndCountedInBlocks) {
  Tensor x = mx_tie_rows(3);
  x.data[32 + 5] = std::numeric_limits<float>::quiet_NaN();
  const PackedTensor p = quant(x, "mxfp4.ocp");
  PackedTensor k = p;
  for (int j = 0; j < 32; ++j) set_code(k.codes, 16, 1, j, 0x7);
  const diagnose::Diagnosis d = run(x, p, diagnose::side_of(k));
  expect_only(d, Kind::nan_block, 1);
  EXPECT_EQ(d.kinds[static_cast<int>(Kind::nan_block)].first[0].block, 1);
}

TEST(Diagnose, ScaleFirstCodesOfThatBlockNotCounted) {
  const Tensor x = mx_tie_rows(8);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  PackedTensor k = p;
  for (int r : {1, 4, 6}) {
    k.scales[r] = static_cast<uint8_t>(p.scales[r] + 1);
    for (int j = 0; j < 32; ++j) set_code(k.codes, 16, r, j, get_code(p.codes, 16, r, j) ^ 0x1);  // follows the scale
  }
  const diagnose::Diagnosis d = run(x, p, diagnose::side_of(k));
  expect_only(d, Kind::scale_up, 3);
  EXPECT_EQ(d.scale_shape.one_step, 3);
  EXPECT_NE(d.summary().find("block scale larger than expected by one code step in 3 of 3 differing blocks"),
            std::string::npos)
      << d.summary();
  EXPECT_EQ(d.agreement.scales_equal, 5);
}

// Random MXFP4 blocks over a spread of amax significands.
Tensor mx_random_blocks(int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), sig(1.0, 2.0);
  Tensor x;
  x.shape = {rows, 32};
  for (int r = 0; r < rows; ++r) {
    const double amax = std::ldexp(sig(rng), (r % 9) - 4);
    for (int j = 0; j < 32; ++j) x.data.push_back(static_cast<float>(j == r % 32 ? amax : amax * u(rng)));
  }
  return x;
}

// The scale rule of another recipe shows as scale differences exactly above
// an amax significand threshold, and the report says which rule it looks like.
TEST(Diagnose, EvenAndRceilScaleRulesAgainstOcpFloor) {
  const Tensor x = mx_random_blocks(256, 11);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  for (auto [recipe, hint] : {std::pair{"mxfp4.even", "looks like EVEN"}, {"mxfp4.rceil", "looks like RCEIL"}}) {
    SCOPED_TRACE(recipe);
    const PackedTensor k = quant(x, recipe);
    int64_t up = 0, down = 0;
    for (int64_t b = 0; b < 256; ++b) up += k.scales[b] > p.scales[b], down += k.scales[b] < p.scales[b];
    ASSERT_GT(up, 0);
    ASSERT_EQ(down, 0);
    const diagnose::Diagnosis d = run(x, p, diagnose::side_of(k));
    EXPECT_EQ(d.count(Kind::scale_up), up);
    EXPECT_EQ(d.scale_shape.equal_at_or_above, 0);
    EXPECT_NE(d.summary().find(hint), std::string::npos) << d.summary();
  }
}

TEST(Diagnose, TruncatedNvfp4ScaleIsNamed) {
  // G = 2688 makes S_enc = 1, so X = UE4M3(s): amax 6.6 wants s = 1.1, which
  // rounds to 1.125; a kernel truncating the scale writes 1.0.
  Tensor x;
  x.shape = {4, 16};
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 16; ++j) x.data.push_back(j == 0 ? 6.6f : 0.37f * static_cast<float>(j - 8));
  const PackedTensor p = quant(x, "nvfp4.te", 2688.0f);
  PackedTensor k = p;
  for (int r = 0; r < 4; ++r) {
    ASSERT_GT(ue4m3_decode(p.scales[r]), 1.1f);
    k.scales[r] = static_cast<uint8_t>(p.scales[r] - 1);
    ASSERT_LE(ue4m3_decode(k.scales[r]), 1.1f);
  }
  const diagnose::Diagnosis d = run(x, p, diagnose::side_of(k));
  expect_only(d, Kind::scale_down, 4);
  EXPECT_EQ(d.scale_shape.truncated, 4);
  EXPECT_NE(d.summary().find("truncated"), std::string::npos) << d.summary();
}

TEST(Diagnose, NibbleOrderSwapped) {
  const Tensor x = mx_random_blocks(16, 5);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  PackedTensor k = p;
  for (uint8_t& b : k.codes) b = static_cast<uint8_t>((b >> 4) | (b << 4));
  int64_t blocks = 0;
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t i = 0; i < 16; ++i)
      if (k.codes[r * 16 + i] != p.codes[r * 16 + i]) {
        ++blocks;
        break;
      }
  ASSERT_GT(blocks, 0);
  expect_only(run(x, p, diagnose::side_of(k)), Kind::nibble_order, blocks);
}

TEST(Diagnose, Hif4ScaleBitOrderSwapped) {
  Tensor x;
  x.shape = {8, 64};
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int i = 0; i < 8 * 64; ++i) x.data.push_back(static_cast<float>(u(rng) * std::ldexp(1.0, (i / 7) % 5)));
  const PackedTensor p = quant(x, "hif4.amct");  // msb_first
  PackedTensor k = p;
  int64_t blocks = 0;
  for (int64_t b = 0; b < 8; ++b) {
    bool changed = false;
    for (int i = 1; i < 4; ++i) {  // reverse the bits of the L2/L3 bytes by hand
      uint8_t v = p.scales[b * 4 + i], rev = 0;
      for (int t = 0; t < 8; ++t) rev = static_cast<uint8_t>(rev | (((v >> t) & 1) << (7 - t)));
      k.scales[b * 4 + i] = rev;
      changed = changed || rev != v;
    }
    blocks += changed;
  }
  ASSERT_GT(blocks, 0);
  expect_only(run(x, p, diagnose::side_of(k)), Kind::scale_bit_order, blocks);
}

TEST(Diagnose, DequantizeArithmeticWithEqualCodes) {
  const Tensor x = mx_tie_rows(2);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  const Tensor v = dequantize(p);
  std::vector<float> kv = v.data;
  kv[3] = std::nextafter(kv[3], 100.0f);
  kv[40] = std::nextafter(kv[40], -100.0f);
  expect_only(run(x, p, diagnose::side_of(p, kv), v.data), Kind::dequantize, 2);
}

TEST(Diagnose, ValuesOnlyScaleDifference) {
  const Tensor x = mx_tie_rows(4);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  const Tensor v = dequantize(p);
  std::vector<float> kv = v.data;
  for (int j = 0; j < 32; ++j) kv[64 + j] *= 2.0f;  // block 2 decoded with twice the scale
  diagnose::Side s;
  s.values = kv;
  expect_only(run(x, p, s, v.data), Kind::scale_up, 1);
}

TEST(Diagnose, SubnormalInputsAndAmax) {
  // Block 0: amax 2^-125 (normal), X = 2^-127, lane 1 holds the subnormal
  // 1.5 * 2^-127; a kernel flushing it writes 0. Block 1: every input
  // subnormal; a kernel flushing the amax gets another scale.
  Tensor x;
  x.shape = {2, 32};
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 32; ++j) x.data.push_back(static_cast<float>(std::ldexp(j % 4 + 1.0, -130)));
  x.data[0] = std::ldexp(1.0f, -125);
  x.data[1] = static_cast<float>(std::ldexp(1.5, -127));
  const PackedTensor p = quant(x, "mxfp4.ocp");
  ASSERT_EQ(p.scales[0], 0);
  ASSERT_EQ(get_code(p.codes, 16, 0, 1), 0x3);
  PackedTensor k = p;
  set_code(k.codes, 16, 0, 1, 0x0);
  expect_only(run(x, p, diagnose::side_of(k)), Kind::subnormal_input, 1);
  PackedTensor k2 = p;
  k2.scales[1] = static_cast<uint8_t>(p.scales[1] + 1);
  expect_only(run(x, p, diagnose::side_of(k2)), Kind::subnormal_amax, 1);
}

TEST(Diagnose, InfBlockScale) {
  Tensor x = mx_tie_rows(2);
  x.data[32 + 7] = std::numeric_limits<float>::infinity();
  const PackedTensor p = quant(x, "mxfp4.rceil");  // Inf is an ordinary scale input there
  PackedTensor k = p;
  k.scales[1] = static_cast<uint8_t>(p.scales[1] - 1);
  expect_only(run(x, p, diagnose::side_of(k)), Kind::inf_block, 1);
}

TEST(Diagnose, SizesThatDoNotFitAreInputErrors) {
  const Tensor x = mx_tie_rows(2);
  const PackedTensor p = quant(x, "mxfp4.ocp");
  std::vector<uint8_t> short_codes(p.codes.begin(), p.codes.end() - 1);
  diagnose::Side s = diagnose::side_of(p);
  s.codes = short_codes;
  EXPECT_THROW(run(x, p, s), InputError);
  std::vector<float> few(5, 0.0f);
  diagnose::Side v;
  v.values = few;
  EXPECT_THROW(run(x, p, v), InputError);
}

}  // namespace
}  // namespace fp4emu
