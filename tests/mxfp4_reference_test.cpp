// Tests of the MXFP4 scalar reference (src/quant/reference/mxfp4.cpp) at block
// level, against docs/spec/mxfp4.md: the worked examples of §8, the oracle tables of
// §1.2, §2.1 and §8.0, and properties of every recipe checked against
// independent oracles written here (frexp on double, exact rational
// comparisons, table search over the E2M1 values).
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "fp4emu/quant/reference.hpp"

namespace {

using namespace fp4emu;
namespace ref = fp4emu::reference;

using Block = std::array<float, 32>;
using Codes = std::array<uint8_t, 32>;
using Packed = std::array<uint8_t, 16>;

constexpr const char* kAllIds[] = {"mxfp4.ocp",  "mxfp4.rceil",        "mxfp4.ceil",
                                   "mxfp4.even", "mxfp4.microxcaling", "mxfp4.ggml"};
constexpr Rounding kConvertRoundings[] = {Rounding::rne, Rounding::rha, Rounding::rtz,
                                          Rounding::ties_to_zero};

const Recipe& mx(std::string_view id) {
  const Recipe* r = find_recipe(id);
  if (r == nullptr) throw std::runtime_error("missing recipe " + std::string(id));
  return *r;
}
bool is_ggml(const Recipe& r) { return r.id == "mxfp4.ggml"; }

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Quantized {
  uint8_t scale = 0;
  Codes codes{};
  Block decoded{};
  Block fake{};
};

Quantized run(const Recipe& r, const Block& x, std::optional<Rounding> rounding = std::nullopt) {
  const Rounding rd = rounding.value_or(r.element_rounding);
  Quantized q;
  q.scale = ref::mxfp4_quantize_block(r, rd, x.data(), q.codes.data());
  ref::mxfp4_decode_block(r, q.scale, q.codes.data(), q.decoded.data());
  ref::mxfp4_fake_quant_block(r, rd, x.data(), q.fake.data());
  return q;
}

Block block_of(std::initializer_list<float> head) {
  Block b{};
  int i = 0;
  for (float v : head) b[i++] = v;
  return b;
}

// Packing, written here independently of the library (docs/spec/mxfp4.md §6.1).
Packed pack_low_first(const Codes& c) {  // element 2i in bits 3..0
  Packed p{};
  for (int i = 0; i < 16; ++i) p[i] = static_cast<uint8_t>(c[2 * i] | (c[2 * i + 1] << 4));
  return p;
}
Packed pack_split_half(const Codes& c) {  // ggml: qs[j] = code[j] | code[j+16] << 4
  Packed p{};
  for (int j = 0; j < 16; ++j) p[j] = static_cast<uint8_t>(c[j] | (c[j + 16] << 4));
  return p;
}
Packed pack(const Recipe& r, const Codes& c) {
  return r.nibble_order == NibbleOrder::split_half ? pack_split_half(c) : pack_low_first(c);
}

// ---------------------------------------------------------------------------
// Independent oracles.

// E2M1 magnitudes in code order (docs/spec/mxfp4.md §1.1).
constexpr double kE2m1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

// Nearest E2M1 code by table search, with the tie rule of `r` (index parity is
// the mantissa bit, so "even" is an even index), saturation at 6, sign kept.
uint8_t oracle_e2m1(double y, Rounding r) {
  if (std::isnan(y)) return 0x7;  // CUDA: NaN -> +MAXNORM
  const uint8_t sign = std::signbit(y) ? 0x8 : 0x0;
  const double a = std::fabs(y);
  int idx;
  if (a >= 6.0) {
    idx = 7;
  } else {
    int lo = 0;
    while (kE2m1[lo + 1] <= a) ++lo;  // kE2m1[lo] <= a < kE2m1[lo+1]
    const double mid = (kE2m1[lo] + kE2m1[lo + 1]) / 2;  // exact
    if (r == Rounding::rtz) idx = lo;
    else if (a < mid) idx = lo;
    else if (a > mid) idx = lo + 1;
    else if (r == Rounding::rne) idx = (lo % 2 == 0) ? lo : lo + 1;
    else if (r == Rounding::rha) idx = lo + 1;
    else idx = lo;  // ties_to_zero
  }
  return static_cast<uint8_t>(sign | idx);
}

// ggml: ties toward zero, and a zero result is always code 0 (+0); NaN/Inf -> 0.
// Valid when |x| / X stays moderate (every finite block: |y| < 8).
uint8_t oracle_ggml(double y) {
  if (!std::isfinite(y)) return 0;
  const uint8_t c = oracle_e2m1(y, Rounding::ties_to_zero);
  return (c & 7) == 0 ? 0 : c;
}

int frexp_flog2(double a) {  // exact floor(log2 a) of a positive finite a
  int e;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return e - 1;
}

uint8_t clamp_code(int s) { return static_cast<uint8_t>(std::max(s, -127) + 127); }

// floor(RN_binary32(log2 a)) through double log2; the double rounding is far
// from every integer boundary (see the Jmax derivation test).
int oracle_log2f_floor(float a) { return static_cast<int>(std::floor(static_cast<float>(std::log2(static_cast<double>(a))))); }

// Scale code of a block without NaN/Inf (finite amax), per recipe, computed
// differently from the reference.
uint8_t oracle_scale(const Recipe& r, const Block& x) {
  double amax = 0;
  for (float v : x)
    if (!std::isnan(v)) amax = std::max(amax, std::fabs(static_cast<double>(v)));
  const std::string_view id = r.id;
  if (id == "mxfp4.ocp") {
    if (amax == 0) return 0;
    return clamp_code(frexp_flog2(amax) - 2);
  }
  if (id == "mxfp4.ceil") {
    if (amax == 0) return 0;
    int e;
    const double m = std::frexp(amax, &e);
    const int ceil_log2 = (m == 0.5) ? e - 1 : e;
    return clamp_code(ceil_log2 - 2);
  }
  if (id == "mxfp4.even") {
    if (amax == 0) return 0;
    // torchao rounds amax first; from 1.75 * 2^127 up the rounded value is
    // +Inf and its isfinite test writes the NaN scale.
    if (amax >= 1.75 * std::ldexp(1.0, 127)) return 0xFF;
    int e;
    const double m = std::frexp(amax, &e);  // amax = (2m) 2^(e-1), 2m in [1, 2)
    const int rounded_flog2 = (2 * m >= 1.75) ? e : e - 1;
    return clamp_code(rounded_flog2 - 2);
  }
  if (id == "mxfp4.rceil") {
    // descale by a native fp32 multiply, then the smallest power of two >= it
    // by exact comparison (RP), saturating at 0xFE.
    const float descale = static_cast<float>(amax) * (1.0f / 6.0f);
    for (int c = 0; c <= 254; ++c)
      if (std::ldexp(1.0, c - 127) >= static_cast<double>(descale)) return static_cast<uint8_t>(c);
    return 0xFE;
  }
  if (id == "mxfp4.microxcaling") {
    const float a = amax == 0 ? 0x1p-126f : static_cast<float>(amax);
    return clamp_code(oracle_log2f_floor(a) - 2);
  }
  // ggml: no clamp, the low byte of the int32 biased exponent.
  if (amax == 0) return 0;
  if (std::isinf(amax)) return 0;
  const int biased = oracle_log2f_floor(static_cast<float>(amax)) - 2 + 127;
  return static_cast<uint8_t>(((biased % 256) + 256) % 256);
}

// torchao's f32_to_f4_unpacked on an fp32 bit pattern that takes its "normal"
// branch (custom_fp_utils.py: rebias, add 2^21 - 1 and the odd bit, shift by
// 22, keep the low byte), then the sign. NaN patterns take that branch.
uint8_t torchao_f4_normal_branch(uint32_t b) {
  const int64_t magnitude = b & 0x7FFFFFFF;
  const int64_t sum = magnitude + (int64_t{1 - 127} << 23) + ((1 << 21) - 1) + ((magnitude >> 22) & 1);
  return static_cast<uint8_t>(((sum >> 22) & 0xFF) | ((b >> 28) & 0x8));
}

// The code every lane of a NaN block gets, per recipe (docs/formats.md MXFP4).
bool torchao_nan_codes(const Recipe& r) {
  return r.id == "mxfp4.ocp" || r.id == "mxfp4.ceil" || r.id == "mxfp4.even";
}

uint8_t oracle_code(const Recipe& r, Rounding rd, uint8_t scale, float v) {
  // torchao on CUDA: data * NaN is the canonical NaN 0x7FFFFFFF.
  if (scale == 0xFF && torchao_nan_codes(r)) return torchao_f4_normal_branch(0x7FFFFFFFu);
  const double y = static_cast<double>(v) / std::ldexp(1.0, scale - 127);  // exact
  // microxcaling divides in fp32 and takes the sign from torch.sign, +0 for a zero quotient.
  if (r.id == "mxfp4.microxcaling" && static_cast<float>(y) == 0.0f) return 0x0;
  return is_ggml(r) ? oracle_ggml(y) : oracle_e2m1(y, rd);
}

float oracle_decode(uint8_t scale, uint8_t code) {
  if (scale == 0xFF) return kNaN;
  const float v = static_cast<float>(kE2m1[code & 7]) * ((code & 8) ? -1.0f : 1.0f);
  return std::ldexp(v, scale - 127);  // fp32 ldexp: exact, or overflow to Inf
}

// ggml's dequantizer: doubled kvalues (code 8 is +0) times GGML_E8M0_TO_FP32_HALF,
// which treats 0xFF as the exponent 2^127 (so 2^128 per E2M1 unit), not NaN.
float oracle_decode_ggml(uint8_t scale, uint8_t code) {
  static constexpr float kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return static_cast<float>(static_cast<double>(kValues[code & 15]) * std::ldexp(1.0, scale - 128));
}

float oracle_decode(const Recipe& r, uint8_t scale, uint8_t code) {
  if (is_ggml(r)) return oracle_decode_ggml(scale, code);
  if (scale == 0xFF) return kNaN;
  const float v = static_cast<float>(kE2m1[code & 7]) * ((code & 8) ? -1.0f : 1.0f);
  return std::ldexp(v, scale - 127);  // fp32 ldexp: exact, or overflow to Inf
}

// ---------------------------------------------------------------------------
// Random blocks.

float random_float(std::mt19937_64& rng, int exponent) {
  // (1 + f/2^23) * 2^exponent rounded to fp32 (subnormal or 0 below 2^-126).
  const uint32_t f = static_cast<uint32_t>(rng() & 0x7FFFFFu);
  const double m = 1.0 + std::ldexp(static_cast<double>(f), -23);
  const float v = static_cast<float>(std::ldexp(m, exponent));
  return (rng() & 1) ? -v : v;
}

// kind 0: values over ~40 binades below a random top exponent (subnormals included);
// kind 1: multiples of 2^(B-3) (many exact ties); kind 2: amax near a power of two
// or near 1.75 * 2^k (scale boundaries).
Block random_block(std::mt19937_64& rng, int kind) {
  Block b{};
  std::uniform_int_distribution<int> top_dist(-150, 127);
  const int top = top_dist(rng);
  for (float& v : b) {
    const uint64_t u = rng() % 100;
    if (u < 8) {
      v = (rng() & 1) ? -0.0f : 0.0f;
      continue;
    }
    if (kind == 1) {
      const int k = static_cast<int>(rng() % 65);
      const int base = std::clamp(top, -146, 124);
      v = static_cast<float>(std::ldexp(static_cast<double>(k), base - 3)) * ((rng() & 1) ? -1.0f : 1.0f);
    } else {
      v = random_float(rng, top - static_cast<int>(rng() % 41));
    }
  }
  if (kind == 2) {
    const int k = std::clamp(top, -149, 127);
    const float p = (rng() & 1) ? std::ldexp(1.0f, k) : std::ldexp(1.75f, std::min(k, 126));
    const int delta = static_cast<int>(rng() % 201) - 100;
    int64_t pb = static_cast<int64_t>(bits(p)) + delta;
    pb = std::clamp<int64_t>(pb, 1, 0x7F7FFFFF);
    b[rng() % 32] = from_bits(static_cast<uint32_t>(pb)) * ((rng() & 1) ? -1.0f : 1.0f);
  }
  return b;
}

std::string block_text(const Block& x) {
  std::string s;
  char buf[40];
  for (float v : x) {
    std::snprintf(buf, sizeof buf, "%a ", static_cast<double>(v));
    s += buf;
  }
  return s;
}

// ===========================================================================
// Recipe table.

TEST(Mxfp4Recipes, TableHasTheSixCanonicalIdsWithOneDefault) {
  const auto table = mxfp4_recipes();
  ASSERT_EQ(table.size(), 6u);
  int defaults = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    const Recipe& r = table[i];
    EXPECT_EQ(r.id, kAllIds[i]);
    EXPECT_EQ(r.format, Format::mxfp4);
    EXPECT_FALSE(r.summary.empty());
    EXPECT_NE(r.spec_ref.find("docs/spec/mxfp4.md"), std::string_view::npos) << r.id;
    EXPECT_EQ(r.default_tail, TailPolicy::pad);
    EXPECT_FALSE(r.fake_quant_only);
    EXPECT_FALSE(r.bf16_input_only);
    EXPECT_TRUE(r.allowed_roundings & rounding_bit(r.element_rounding)) << r.id;
    EXPECT_FALSE(r.allowed_roundings & rounding_bit(Rounding::rtp)) << r.id;
    defaults += r.is_default ? 1 : 0;
    ASSERT_NE(find_recipe(r.id), nullptr) << r.id;
    EXPECT_EQ(find_recipe(r.id)->mx.scale_rule, r.mx.scale_rule) << r.id;
  }
  EXPECT_EQ(defaults, 1);
  EXPECT_EQ(default_recipe(Format::mxfp4).id, "mxfp4.ocp");
}

TEST(Mxfp4Recipes, KeyFields) {
  struct Row {
    const char* id;
    MxScaleRule rule;
    Rounding rounding;
    NibbleOrder nibbles;
  };
  const Row rows[] = {
      {"mxfp4.ocp", MxScaleRule::ocp_floor, Rounding::rne, NibbleOrder::low_first},
      {"mxfp4.rceil", MxScaleRule::rceil, Rounding::rne, NibbleOrder::low_first},
      {"mxfp4.ceil", MxScaleRule::ceil, Rounding::rne, NibbleOrder::low_first},
      {"mxfp4.even", MxScaleRule::even, Rounding::rne, NibbleOrder::low_first},
      {"mxfp4.microxcaling", MxScaleRule::log2f_floor, Rounding::rha, NibbleOrder::low_first},
      {"mxfp4.ggml", MxScaleRule::log2f_floor, Rounding::ties_to_zero, NibbleOrder::split_half},
  };
  for (const Row& row : rows) {
    const Recipe& r = mx(row.id);
    EXPECT_EQ(r.mx.scale_rule, row.rule) << row.id;
    EXPECT_EQ(r.element_rounding, row.rounding) << row.id;
    EXPECT_EQ(r.nibble_order, row.nibbles) << row.id;
    const bool ggml = std::string_view(row.id) == "mxfp4.ggml";
    EXPECT_EQ(r.mx.scale_range, ggml ? MxScaleRange::x86_uint8_wrap : MxScaleRange::clamp);
    EXPECT_EQ(r.mx.nan_propagating_amax, !ggml);
    EXPECT_EQ(r.mx.element_select, ggml ? MxElementSelect::ggml_argmin : MxElementSelect::convert);
    const bool inf_is_value = ggml || std::string_view(row.id) == "mxfp4.rceil";
    EXPECT_EQ(r.mx.inf_amax, inf_is_value ? MxInfAmax::scale_rule : MxInfAmax::nan_block);
    for (Rounding rd : kConvertRoundings) {
      const bool allowed = ggml ? rd == Rounding::ties_to_zero : true;
      EXPECT_EQ(static_cast<bool>(r.allowed_roundings & rounding_bit(rd)), allowed) << row.id;
    }
  }
}

TEST(Mxfp4Recipes, RejectsRoundingsAndFormatsItDoesNotAccept) {
  Block x = block_of({1.0f});
  Codes codes{};
  EXPECT_THROW(ref::mxfp4_quantize_block(mx("mxfp4.ocp"), Rounding::rtp, x.data(), codes.data()), InputError);
  EXPECT_THROW(ref::mxfp4_quantize_block(mx("mxfp4.ggml"), Rounding::rne, x.data(), codes.data()), InputError);
  Recipe other = mx("mxfp4.ocp");
  other.format = Format::nvfp4;
  EXPECT_THROW(ref::mxfp4_quantize_block(other, Rounding::rne, x.data(), codes.data()), InputError);
  try {
    ref::mxfp4_quantize_block(mx("mxfp4.ggml"), Rounding::rha, x.data(), codes.data());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tiesToZero"), std::string::npos) << e.what();
  }
}

// ===========================================================================
// Oracle tables: §1.2, §8.0 (E2M1 via e2m1_encode) and §2.1 (E8M0 via e8m0_encode).

TEST(Mxfp4Codec, E2m1RneThresholdTable) {  // docs/spec/mxfp4.md §1.2
  struct Row {
    float y;
    uint8_t code;
  };
  const Row rows[] = {
      {0.0f, 0x0},   {0.25f, 0x0},  {std::nextafter(0.25f, 1.0f), 0x1}, {0.5f, 0x1},
      {std::nextafter(0.75f, 0.0f), 0x1}, {0.75f, 0x2}, {1.0f, 0x2},      {1.25f, 0x2},
      {std::nextafter(1.25f, 2.0f), 0x3}, {1.5f, 0x3},  {std::nextafter(1.75f, 0.0f), 0x3},
      {1.75f, 0x4},  {2.0f, 0x4},   {2.5f, 0x4},   {std::nextafter(2.5f, 3.0f), 0x5},
      {3.0f, 0x5},   {std::nextafter(3.5f, 0.0f), 0x5}, {3.5f, 0x6}, {4.0f, 0x6}, {5.0f, 0x6},
      {std::nextafter(5.0f, 6.0f), 0x7}, {6.0f, 0x7}, {1e30f, 0x7},  {kInf, 0x7},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(e2m1_encode(row.y, Rounding::rne), row.code) << row.y;
    EXPECT_EQ(e2m1_encode(-row.y, Rounding::rne), row.code | 0x8) << -row.y;
    EXPECT_EQ(oracle_e2m1(row.y, Rounding::rne), row.code) << "test oracle " << row.y;
  }
}

TEST(Mxfp4Codec, E2m1OracleChecks) {  // docs/spec/mxfp4.md §8.0 and §1.3
  const struct {
    float x;
    uint8_t rn, rz;
  } rows[] = {
      {0.25f, 0x0, 0x0}, {0.75f, 0x2, 0x1}, {1.25f, 0x2, 0x2}, {1.75f, 0x4, 0x3},
      {2.5f, 0x4, 0x4},  {3.5f, 0x6, 0x5},  {5.0f, 0x6, 0x6},  {5.0001f, 0x7, 0x6},
      {7.0f, 0x7, 0x7},  {1e30f, 0x7, 0x7}, {-0.0f, 0x8, 0x8}, {0.0f, 0x0, 0x0},
      {-0.1f, 0x8, 0x8}, {-0.25f, 0x8, 0x8}, {0.2500001f, 0x1, 0x0}, {kInf, 0x7, 0x7},
      {-kInf, 0xF, 0xF}, {kNaN, 0x7, 0x7}, {-kNaN, 0x7, 0x7},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(e2m1_encode(row.x, Rounding::rne), row.rn) << row.x;
    EXPECT_EQ(e2m1_encode(row.x, Rounding::rtz), row.rz) << row.x;
  }
  // §1.3: a pair {1.0, -6.0} packs to 0xF2 (x.x in the low nibble).
  Codes c{};
  c[0] = e2m1_encode(1.0, Rounding::rne);
  c[1] = e2m1_encode(-6.0, Rounding::rne);
  EXPECT_EQ(pack_low_first(c)[0], 0xF2);
}

TEST(Mxfp4Codec, E8m0ConversionTable) {  // docs/spec/mxfp4.md §2.1 (CUDA __nv_cvt_float_to_e8m0)
  const struct {
    float x;
    uint8_t rz, rp;
  } rows[] = {
      {0.0f, 0x00, 0x00},   {1.0f, 0x7F, 0x7F},       {1.5f, 0x7F, 0x80},  {0.75f, 0x7E, 0x7F},
      {1.0f / 6.0f, 0x7C, 0x7D}, {5.9e-39f, 0x00, 0x01}, {3e38f, 0xFE, 0xFE}, {kInf, 0xFE, 0xFE},
      {kNaN, 0xFF, 0xFF},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(e8m0_encode(row.x, Rounding::rtz, Overflow::saturate), row.rz) << row.x;
    EXPECT_EQ(e8m0_encode(row.x, Rounding::rtp, Overflow::saturate), row.rp) << row.x;
    // The sign is ignored.
    EXPECT_EQ(e8m0_encode(-row.x, Rounding::rtz, Overflow::saturate), row.rz) << -row.x;
    EXPECT_EQ(e8m0_encode(-row.x, Rounding::rtp, Overflow::saturate), row.rp) << -row.x;
  }
  // NOSAT: above 2^127 and Inf -> 0xFF.
  EXPECT_EQ(e8m0_encode(3e38f, Rounding::rtp, Overflow::to_special), 0xFF);
  EXPECT_EQ(e8m0_encode(3e38f, Rounding::rtz, Overflow::to_special), 0xFE);  // 2^127 is in range
  EXPECT_EQ(e8m0_encode(kInf, Rounding::rtz, Overflow::to_special), 0xFF);
  EXPECT_EQ(e8m0_encode(kInf, Rounding::rtp, Overflow::to_special), 0xFF);
  EXPECT_EQ(e8m0_encode(kNaN, Rounding::rtp, Overflow::to_special), 0xFF);
  // §2.1: fp32 subnormals <= 2^-127 -> 0x00; RP in (2^-127, 2^-126) -> 0x01.
  EXPECT_EQ(e8m0_encode(0x1p-127f, Rounding::rtp, Overflow::saturate), 0x00);
  EXPECT_EQ(e8m0_encode(0x1p-149f, Rounding::rtp, Overflow::saturate), 0x00);
  EXPECT_EQ(e8m0_encode(std::nextafter(0x1p-127f, 1.0f), Rounding::rtp, Overflow::saturate), 0x01);
  // Decoding (§2): 0 -> 0x00400000, 0xFF -> NaN.
  EXPECT_EQ(bits(e8m0_decode(0x00)), 0x00400000u);
  EXPECT_EQ(bits(e8m0_decode(0x7F)), 0x3F800000u);
  EXPECT_TRUE(std::isnan(e8m0_decode(0xFF)));
}

// ===========================================================================
// §8 worked examples, every recipe each example names. Rows marked "derived"
// are recipes an example does not list; their values were worked out by hand
// from §4 and §5 (and agree with the independent oracle test below).

struct Example {
  const char* name;
  const char* recipe;
  std::vector<float> head;        // V[0..n); the rest of the block is 0
  uint8_t scale;
  std::vector<uint8_t> codes;     // codes of elements 0..n-1; the rest must be 0x0
  std::vector<uint8_t> packed;    // leading bytes in the recipe's nibble order; the rest 0x00
  std::vector<float> decoded;     // elements 0..n-1, compared bit for bit (-0 matters)
};

const float kExM4a = 0x1p-130f;
const float kExM4b = -0x1p-131f;
const float kExM5 = from_bits(0x447FFFFF);  // 1023.99994

const std::vector<Example>& examples() {
  static const std::vector<Example> ex = {
      // EX-M1: RNE ties and the disagreement between rounding rules.
      {"EX-M1", "mxfp4.ocp", {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0.0f, -3.0f, 0.2f}, 0x7E,
       {0x7, 0x4, 0x2, 0x8, 0x6, 0x0, 0xF, 0x1}, {0x47, 0x82, 0x06, 0x1F},
       {3.0f, 1.0f, 0.5f, -0.0f, 2.0f, 0.0f, -3.0f, 0.25f}},
      {"EX-M1", "mxfp4.microxcaling", {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0.0f, -3.0f, 0.2f}, 0x7E,
       {0x7, 0x5, 0x2, 0x9, 0x6, 0x0, 0xF, 0x1}, {0x57, 0x92, 0x06, 0x1F},
       {3.0f, 1.5f, 0.5f, -0.25f, 2.0f, 0.0f, -3.0f, 0.25f}},
      {"EX-M1", "mxfp4.ggml", {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0.0f, -3.0f, 0.2f}, 0x7E,
       {0x7, 0x4, 0x1, 0x0, 0x6, 0x0, 0xF, 0x1}, {0x07, 0x04, 0x01, 0x00, 0x06, 0x00, 0x0F, 0x01},
       {3.0f, 1.0f, 0.25f, 0.0f, 2.0f, 0.0f, -3.0f, 0.25f}},
      {"EX-M1", "mxfp4.rceil", {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0.0f, -3.0f, 0.2f}, 0x7E,
       {0x7, 0x4, 0x2, 0x8, 0x6, 0x0, 0xF, 0x1}, {0x47, 0x82, 0x06, 0x1F},
       {3.0f, 1.0f, 0.5f, -0.0f, 2.0f, 0.0f, -3.0f, 0.25f}},
      {"EX-M1", "mxfp4.even", {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0.0f, -3.0f, 0.2f}, 0x7E,
       {0x7, 0x4, 0x2, 0x8, 0x6, 0x0, 0xF, 0x1}, {0x47, 0x82, 0x06, 0x1F},
       {3.0f, 1.0f, 0.5f, -0.0f, 2.0f, 0.0f, -3.0f, 0.25f}},
      {"EX-M1", "mxfp4.ceil", {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0.0f, -3.0f, 0.2f}, 0x7F,
       {0x5, 0x2, 0x1, 0x8, 0x4, 0x0, 0xD, 0x0}, {0x25, 0x81, 0x04, 0x0D},
       {3.0f, 1.0f, 0.5f, -0.0f, 2.0f, 0.0f, -3.0f, 0.0f}},
      // EX-M2: saturation under OCP versus RCEIL / EVEN / CEIL.
      {"EX-M2", "mxfp4.ocp", {7.0f, -5.5f, 1.0f, 0.2f}, 0x7F, {0x7, 0xF, 0x2, 0x0}, {0xF7, 0x02},
       {6.0f, -6.0f, 1.0f, 0.0f}},
      {"EX-M2", "mxfp4.rceil", {7.0f, -5.5f, 1.0f, 0.2f}, 0x80, {0x6, 0xD, 0x1, 0x0}, {0xD6, 0x01},
       {8.0f, -6.0f, 1.0f, 0.0f}},
      {"EX-M2", "mxfp4.even", {7.0f, -5.5f, 1.0f, 0.2f}, 0x80, {0x6, 0xD, 0x1, 0x0}, {0xD6, 0x01},
       {8.0f, -6.0f, 1.0f, 0.0f}},
      {"EX-M2", "mxfp4.ceil", {7.0f, -5.5f, 1.0f, 0.2f}, 0x80, {0x6, 0xD, 0x1, 0x0}, {0xD6, 0x01},
       {8.0f, -6.0f, 1.0f, 0.0f}},
      {"EX-M2", "mxfp4.ggml", {7.0f, -5.5f, 1.0f, 0.2f}, 0x7F, {0x7, 0xF, 0x2, 0x0},
       {0x07, 0x0F, 0x02, 0x00}, {6.0f, -6.0f, 1.0f, 0.0f}},
      // derived: microxcaling has the OCP scale here; half-away agrees with RNE.
      {"EX-M2", "mxfp4.microxcaling", {7.0f, -5.5f, 1.0f, 0.2f}, 0x7F, {0x7, 0xF, 0x2, 0x0},
       {0xF7, 0x02}, {6.0f, -6.0f, 1.0f, 0.0f}},
      // EX-M3: all-zero block: every recipe gives 0x00 and +0 codes.
      {"EX-M3", "mxfp4.ocp", {}, 0x00, {}, {}, {}},
      {"EX-M3", "mxfp4.rceil", {}, 0x00, {}, {}, {}},
      {"EX-M3", "mxfp4.ceil", {}, 0x00, {}, {}, {}},
      {"EX-M3", "mxfp4.even", {}, 0x00, {}, {}, {}},
      {"EX-M3", "mxfp4.microxcaling", {}, 0x00, {}, {}, {}},
      {"EX-M3", "mxfp4.ggml", {}, 0x00, {}, {}, {}},
      // EX-M4: tiny block and the lower clamp (fp32 subnormal inputs).
      {"EX-M4", "mxfp4.ocp", {kExM4a, kExM4b}, 0x00, {0x0, 0x8}, {0x80}, {0.0f, -0.0f}},
      {"EX-M4", "mxfp4.ceil", {kExM4a, kExM4b}, 0x00, {0x0, 0x8}, {0x80}, {0.0f, -0.0f}},
      {"EX-M4", "mxfp4.even", {kExM4a, kExM4b}, 0x00, {0x0, 0x8}, {0x80}, {0.0f, -0.0f}},
      {"EX-M4", "mxfp4.rceil", {kExM4a, kExM4b}, 0x00, {0x0, 0x8}, {0x80}, {0.0f, -0.0f}},
      {"EX-M4", "mxfp4.ggml", {kExM4a, kExM4b}, 0xFB, {0x0, 0x0}, {0x00}, {0.0f, 0.0f}},
      // derived: microxcaling clamps at -127 like OCP (no subnormal flush by default).
      {"EX-M4", "mxfp4.microxcaling", {kExM4a, kExM4b}, 0x00, {0x0, 0x8}, {0x80}, {0.0f, -0.0f}},
      // EX-M5: the log2f floor quirk.
      {"EX-M5", "mxfp4.ocp", {kExM5}, 0x86, {0x7}, {0x07}, {768.0f}},
      {"EX-M5", "mxfp4.microxcaling", {kExM5}, 0x87, {0x6}, {0x06}, {1024.0f}},
      {"EX-M5", "mxfp4.ggml", {kExM5}, 0x87, {0x6}, {0x06}, {1024.0f}},
      {"EX-M5", "mxfp4.rceil", {kExM5}, 0x87, {0x6}, {0x06}, {1024.0f}},
      // derived: CEIL and EVEN round the scale up here too.
      {"EX-M5", "mxfp4.ceil", {kExM5}, 0x87, {0x6}, {0x06}, {1024.0f}},
      {"EX-M5", "mxfp4.even", {kExM5}, 0x87, {0x6}, {0x06}, {1024.0f}},
      // EX-M6 (stochastic rounding) is out of scope: stochastic rounding is a later issue.
  };
  return ex;
}

TEST(Mxfp4WorkedExamples, ScaleCodesPackingAndDecodedValues) {
  for (const Example& ex : examples()) {
    SCOPED_TRACE(std::string(ex.name) + " " + ex.recipe);
    const Recipe& r = mx(ex.recipe);
    Block x{};
    for (size_t i = 0; i < ex.head.size(); ++i) x[i] = ex.head[i];
    const Quantized q = run(r, x);
    EXPECT_EQ(q.scale, ex.scale);
    for (int i = 0; i < 32; ++i) {
      const uint8_t want = i < static_cast<int>(ex.codes.size()) ? ex.codes[i] : 0x0;
      EXPECT_EQ(q.codes[i], want) << "element " << i;
    }
    const Packed p = pack(r, q.codes);
    for (int i = 0; i < 16; ++i) {
      const uint8_t want = i < static_cast<int>(ex.packed.size()) ? ex.packed[i] : 0x00;
      EXPECT_EQ(p[i], want) << "byte " << i;
    }
    for (int i = 0; i < 32; ++i) {
      const float want = i < static_cast<int>(ex.decoded.size()) ? ex.decoded[i] : 0.0f;
      EXPECT_EQ(bits(q.decoded[i]), bits(want)) << "element " << i << ": " << q.decoded[i] << " vs " << want;
      EXPECT_EQ(bits(q.fake[i]), bits(want)) << "fake quant, element " << i;
    }
  }
}

TEST(Mxfp4WorkedExamples, ExM1SameScaleUnderOtherRoundings) {
  // "The same scale with microxcaling default nearest (half away)": the OCP
  // recipe with an rha override gives microxcaling's codes.
  const Block x = block_of({3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0.0f, -3.0f, 0.2f});
  const Quantized q = run(mx("mxfp4.ocp"), x, Rounding::rha);
  EXPECT_EQ(q.scale, 0x7E);
  const uint8_t want[8] = {0x7, 0x5, 0x2, 0x9, 0x6, 0x0, 0xF, 0x1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.codes[i], want[i]) << i;
  // Ties toward zero via the OCP recipe: like ggml, except -0.25 -> -0 (code 8).
  const Quantized t = run(mx("mxfp4.ocp"), x, Rounding::ties_to_zero);
  const uint8_t want_tz[8] = {0x7, 0x4, 0x1, 0x8, 0x6, 0x0, 0xF, 0x1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t.codes[i], want_tz[i]) << i;
}

TEST(Mxfp4WorkedExamples, GgmlBlockBytes) {
  // EX-M1: the ggml block is the 0x7E byte followed by qs[16].
  const Block x = block_of({3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0.0f, -3.0f, 0.2f});
  const Quantized q = run(mx("mxfp4.ggml"), x);
  std::vector<uint8_t> block_mxfp4 = {q.scale};
  for (uint8_t b : pack_split_half(q.codes)) block_mxfp4.push_back(b);
  const std::vector<uint8_t> want = {0x7E, 0x07, 0x04, 0x01, 0x00, 0x06, 0x00, 0x0F, 0x01,
                                     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(block_mxfp4, want);
  // Split halves: element 16 + j goes to the high nibble of byte j.
  Block y{};
  y[0] = 1.0f;   // code 2 at X = 1 (amax 6 -> X = 1)
  y[16] = 6.0f;  // code 7
  y[17] = -3.0f; // code 0xD
  const Quantized qy = run(mx("mxfp4.ggml"), y);
  EXPECT_EQ(qy.scale, 0x7F);
  const Packed p = pack_split_half(qy.codes);
  EXPECT_EQ(p[0], 0x72);
  EXPECT_EQ(p[1], 0xD0);
}

TEST(Mxfp4WorkedExamples, ExM5Arithmetic) {
  // §4.1: the OCP code is the RZ E8M0 conversion of amax/4.
  EXPECT_EQ(e8m0_encode(kExM5 * 0.25f, Rounding::rtz, Overflow::saturate), 0x86);
  // §4.5: fp32(V * RN16) = 170.66666, which rounds up to 256.
  const float descale = kExM5 * (1.0f / 6.0f);
  EXPECT_NEAR(descale, 170.66666f, 1e-4f);
  EXPECT_EQ(e8m0_encode(descale, Rounding::rtp, Overflow::saturate), 0x87);
  // §4.2: glibc's floorf(log2f) is one too high here.
  EXPECT_EQ(std::floor(std::log2(kExM5)), 10.0f);
  // §8 EX-M1: fp32(3 * RN16) = 0.5 exactly.
  EXPECT_EQ(3.0f * (1.0f / 6.0f), 0.5f);
}

// ===========================================================================
// floor(RN_binary32(log2 a)) (MX_SCALE_LOG2F_FLOOR), observed through the ggml
// recipe: its scale byte is (n + 125) mod 256 for amax = a > 0, with n in
// {flog2(a), flog2(a) + 1}, so n is recovered for every positive finite a.

int log2f_floor_via_ggml(float a) {
  Codes codes{};
  const Block x = block_of({a});
  const uint8_t c = ref::mxfp4_quantize_block(mx("mxfp4.ggml"), Rounding::ties_to_zero, x.data(), codes.data());
  const int e = frexp_flog2(a);
  const int step = ((static_cast<int>(c) - (e + 125)) % 256 + 256) % 256;
  EXPECT_LE(step, 1) << "a = " << a;
  return e + step;
}

TEST(Mxfp4Log2fFloor, JmaxTableDerivation) {
  // floor(2^24 (1 - 2^-delta)), delta = 2^(k-24): the round-up limits of the
  // derivation in mxfp4.cpp, with their distance to the nearest integer.
  const uint32_t jmax[9] = {0, 0, 1, 2, 5, 11, 22, 44, 88};
  for (int k = -1; k <= 7; ++k) {
    const long double delta = std::ldexp(1.0L, k - 24);
    const long double v = -std::ldexp(1.0L, 24) * std::expm1(-delta * std::log(2.0L));
    EXPECT_EQ(static_cast<uint32_t>(std::floor(v)), jmax[k + 1]) << "k = " << k;
    const long double frac = v - std::floor(v);
    EXPECT_GT(frac, 0.05L) << "k = " << k;
    EXPECT_LT(frac, 0.95L) << "k = " << k;
  }
}

TEST(Mxfp4Log2fFloor, SpecQuirkPoints) {  // docs/spec/mxfp4.md §4.2
  auto below = [](int k) { return std::nextafter(std::ldexp(1.0f, k), 0.0f); };
  for (int k : {10, 20, 100, 126}) EXPECT_EQ(log2f_floor_via_ggml(below(k)), k) << k;
  EXPECT_EQ(log2f_floor_via_ggml(below(-100)), -100);
  EXPECT_EQ(log2f_floor_via_ggml(below(-126)), -126);
  for (int k : {0, 1, 2}) EXPECT_EQ(log2f_floor_via_ggml(below(k)), k - 1) << k;
  // The first binade with the quirk: only 8 - 2^-21 rounds up to 3.
  EXPECT_EQ(log2f_floor_via_ggml(below(3)), 3);
  EXPECT_EQ(log2f_floor_via_ggml(std::nextafter(below(3), 0.0f)), 2);
  // Exact powers of two and the extremes.
  for (int k = -149; k <= 127; ++k) EXPECT_EQ(log2f_floor_via_ggml(std::ldexp(1.0f, k)), k) << k;
  EXPECT_EQ(log2f_floor_via_ggml(std::numeric_limits<float>::max()), 128);
  EXPECT_EQ(log2f_floor_via_ggml(0x1p-149f), -149);
}

// Every neighbour within +-300 ulps of every power of two (the largest
// round-up window is 88 ulps), against glibc's floorf(log2f(x)) and against
// a long double log2 rounded to fp32. The microxcaling recipe (which clamps
// at s = -127) must agree wherever its code is not clamped.
TEST(Mxfp4Log2fFloor, PowerOfTwoNeighboursAgreeWithLibm) {
  int glibc_mismatches = 0;
  for (int k = -149; k <= 128; ++k) {
    const uint32_t pb = k == 128 ? 0x7F800000u : bits(std::ldexp(1.0f, k));
    for (int d = -300; d <= 300; ++d) {
      const int64_t b = static_cast<int64_t>(pb) + d;
      if (b <= 0 || b >= 0x7F800000) continue;
      const float a = from_bits(static_cast<uint32_t>(b));
      const int mine = log2f_floor_via_ggml(a);
      const int glibc = static_cast<int>(std::floor(std::log2(a)));  // float overloads: floorf(log2f)
      const int wide = static_cast<int>(std::floor(static_cast<float>(std::log2(static_cast<long double>(a)))));
      EXPECT_EQ(mine, wide) << "a = " << a << " bits " << std::hex << b;
      if (mine != glibc && ++glibc_mismatches <= 20)
        ADD_FAILURE() << "libm floorf(log2f) disagrees with the correctly rounded floor: a = " << a
                      << " bits 0x" << std::hex << b << std::dec << " libm " << glibc << " exact " << mine;
      if (mine - 2 >= -127) {
        Codes codes{};
        const Block x = block_of({a});
        EXPECT_EQ(ref::mxfp4_quantize_block(mx("mxfp4.microxcaling"), Rounding::rha, x.data(), codes.data()),
                  mine - 2 + 127)
            << "a = " << a;
      }
    }
  }
  EXPECT_EQ(glibc_mismatches, 0);
}

TEST(Mxfp4Log2fFloor, RandomSampleAgreesWithLibm) {
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 400000; ++i) {
    const uint32_t b = 1 + static_cast<uint32_t>(rng() % 0x7F7FFFFFu);
    const float a = from_bits(b);
    ASSERT_EQ(log2f_floor_via_ggml(a), static_cast<int>(std::floor(std::log2(a)))) << "bits 0x" << std::hex << b;
  }
}

// ===========================================================================
// Independent oracle: scale code by the spec formula computed another way,
// each element code by table search with the recipe's tie rule, decoded values
// by fp32 ldexp. Random finite blocks over ~40 binades (subnormals included),
// tie-heavy blocks and scale-boundary blocks.

void check_against_oracle(const Recipe& r, Rounding rd, const Block& x) {
  const Quantized q = run(r, x, rd);
  const uint8_t want_scale = oracle_scale(r, x);
  ASSERT_EQ(q.scale, want_scale) << r.id << " block " << block_text(x);
  for (int i = 0; i < 32; ++i) {
    ASSERT_EQ(q.codes[i], oracle_code(r, rd, q.scale, x[i]))
        << r.id << " " << to_string(rd) << " element " << i << " x = " << x[i] << " scale " << int(q.scale);
    ASSERT_EQ(bits(q.decoded[i]), bits(oracle_decode(r, q.scale, q.codes[i]))) << r.id << " element " << i;
    ASSERT_EQ(bits(q.fake[i]), bits(q.decoded[i])) << r.id << " fake quant element " << i;
  }
}

TEST(Mxfp4Oracle, RandomBlocksEveryRecipe) {
  std::mt19937_64 rng(7);
  for (const char* id : kAllIds) {
    const Recipe& r = mx(id);
    for (int n = 0; n < 6000; ++n) check_against_oracle(r, r.element_rounding, random_block(rng, n % 3));
  }
}

TEST(Mxfp4Oracle, RandomBlocksEveryRoundingOverride) {
  std::mt19937_64 rng(8);
  for (const char* id : kAllIds) {
    const Recipe& r = mx(id);
    if (is_ggml(r)) continue;
    for (Rounding rd : kConvertRoundings)
      for (int n = 0; n < 1500; ++n) check_against_oracle(r, rd, random_block(rng, n % 3));
  }
}

TEST(Mxfp4Oracle, OcpScaleIsRzOfAmaxOverFour) {  // §4.1 "Equivalently"
  std::mt19937_64 rng(9);
  for (int n = 0; n < 20000; ++n) {
    const float amax = std::fabs(random_float(rng, static_cast<int>(rng() % 254) - 126));
    if (!(amax >= 0x1p-126f)) continue;  // normal amax
    const Block x = block_of({amax});
    Codes codes{};
    ASSERT_EQ(ref::mxfp4_quantize_block(mx("mxfp4.ocp"), Rounding::rne, x.data(), codes.data()),
              e8m0_encode(amax * 0.25f, Rounding::rtz, Overflow::saturate))
        << amax;
  }
}

TEST(Mxfp4Oracle, RceilSixTimesPowerOfTwoHasNoSaturation) {  // §4.5
  for (int k = -127; k <= 125; ++k) {
    const Block x = block_of({std::ldexp(6.0f, k), -std::ldexp(6.0f, k)});
    const Quantized q = run(mx("mxfp4.rceil"), x);
    EXPECT_EQ(q.scale, k + 127) << k;
    EXPECT_EQ(q.codes[0], 0x7) << k;
    EXPECT_EQ(q.codes[1], 0xF) << k;
    EXPECT_EQ(q.decoded[0], x[0]) << k;
  }
}

TEST(Mxfp4Oracle, ScaleRulesAtTheTopOfTheFp32Range) {
  const float fmax = std::numeric_limits<float>::max();
  const Block x = block_of({fmax});
  // OCP: flog2 = 127 -> s = 125 (the largest reachable code, 0xFC); saturates.
  EXPECT_EQ(run(mx("mxfp4.ocp"), x).scale, 0xFC);
  EXPECT_EQ(run(mx("mxfp4.ocp"), x).codes[0], 0x7);
  // CEIL: 127 + 1 - 2 = 126 -> 0xFD.
  EXPECT_EQ(run(mx("mxfp4.ceil"), x).scale, 0xFD);
  // EVEN: amax' = +Inf -> torchao's isfinite test gives a NaN block (see
  // Mxfp4Conformance.EvenRoundedAmaxOverflowIsANanBlock).
  EXPECT_EQ(run(mx("mxfp4.even"), x).scale, 0xFF);
  EXPECT_EQ(run(mx("mxfp4.even"), block_of({from_bits(0x7F5FFFFF)})).scale, 0xFC);
  // RCEIL: fmax/6 ~ 2^125.4 -> RP -> 2^126 -> 0xFD.
  EXPECT_EQ(run(mx("mxfp4.rceil"), x).scale, 0xFD);
  // log2f floor: RN(log2(fmax)) = 128 -> 126 -> 0xFD (microxcaling and ggml).
  EXPECT_EQ(run(mx("mxfp4.microxcaling"), x).scale, 0xFD);
  EXPECT_EQ(run(mx("mxfp4.ggml"), x).scale, 0xFD);
}

// ===========================================================================
// Properties per recipe.

TEST(Mxfp4Properties, SignSymmetry) {
  std::mt19937_64 rng(11);
  for (const char* id : kAllIds) {
    const Recipe& r = mx(id);
    for (int n = 0; n < 2000; ++n) {
      const Block x = random_block(rng, n % 3);
      Block neg;
      for (int i = 0; i < 32; ++i) neg[i] = -x[i];
      const Quantized a = run(r, x);
      const Quantized b = run(r, neg);
      ASSERT_EQ(a.scale, b.scale) << id;
      if (a.scale == 0xFF && torchao_nan_codes(r)) {  // EVEN's overflowed amax: code 0x4 either sign
        ASSERT_EQ(a.codes, b.codes) << id;
        continue;
      }
      for (int i = 0; i < 32; ++i) {
        const bool zero_quotient = static_cast<float>(std::ldexp(static_cast<double>(x[i]), 127 - a.scale)) == 0.0f;
        if ((is_ggml(r) && (a.codes[i] & 7) == 0) || (r.id == "mxfp4.microxcaling" && zero_quotient)) {
          // ggml's zero is always code 0 (+0), whatever the sign; so is
          // microxcaling's when the fp32 quotient V / X is zero.
          ASSERT_EQ(a.codes[i], 0) << id;
          ASSERT_EQ(b.codes[i], 0) << id;
          continue;
        }
        ASSERT_EQ(b.codes[i], a.codes[i] ^ 0x8) << id << " element " << i << " x = " << x[i];
        ASSERT_EQ(bits(b.decoded[i]), bits(-a.decoded[i])) << id;
      }
    }
  }
}

TEST(Mxfp4Properties, AllZeroAndNegativeZeroBlocks) {
  Block neg_zero;
  neg_zero.fill(-0.0f);
  for (const char* id : kAllIds) {
    const Recipe& r = mx(id);
    const Quantized z = run(r, Block{});
    EXPECT_EQ(z.scale, 0x00) << id;
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(z.codes[i], 0x0) << id;
      EXPECT_EQ(bits(z.decoded[i]), 0u) << id;
    }
    const Quantized nz = run(r, neg_zero);
    EXPECT_EQ(nz.scale, 0x00) << id;
    // Convert recipes keep the sign of zero (code 8, -0); ggml and
    // microxcaling (torch.sign(-0.0) = +0) give +0.
    const bool positive = is_ggml(r) || r.id == "mxfp4.microxcaling";
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(nz.codes[i], positive ? 0x0 : 0x8) << id;
      EXPECT_EQ(bits(nz.decoded[i]), positive ? 0u : 0x80000000u) << id;
    }
  }
}

TEST(Mxfp4Properties, SubnormalInputs) {
  // EX-M4 is in the worked examples; here, blocks of fp32 subnormals only.
  std::mt19937_64 rng(12);
  for (const char* id : kAllIds) {
    const Recipe& r = mx(id);
    for (int n = 0; n < 2000; ++n) {
      Block x{};
      for (float& v : x) {
        const uint32_t sign = (rng() & 1) ? 0x80000000u : 0u;  // one draw per statement: operand order is the compiler's
        v = from_bits(static_cast<uint32_t>(rng() % 0x800000u) | sign);
      }
      check_against_oracle(r, r.element_rounding, x);
      // Every clamping recipe gives 0x00 (X = 2^-127), so |y| < 2.
      const Quantized q = run(r, x);
      if (!is_ggml(r)) {
        EXPECT_EQ(q.scale, 0x00) << id;
      }
    }
  }
  // The largest subnormal: y = (2^-126 - 2^-149) / 2^-127 = 2 - 2^-22 -> 2 (code 4) under RNE.
  const Block x = block_of({from_bits(0x007FFFFF)});
  EXPECT_EQ(run(mx("mxfp4.ocp"), x).codes[0], 0x4);
  // ggml: floor(RN(log2)) = -126 -> biased -1 -> wraps to 0xFF.
  EXPECT_EQ(run(mx("mxfp4.ggml"), x).scale, 0xFF);
}

// NaN and Inf: the decisions in mxfp4.cpp.
TEST(Mxfp4Properties, NanPoisonsTheBlockExceptInGgml) {
  std::mt19937_64 rng(13);
  for (const char* id : kAllIds) {
    const Recipe& r = mx(id);
    for (int n = 0; n < 300; ++n) {
      const Block x = random_block(rng, n % 3);
      Block with_nan = x;
      const int lane = static_cast<int>(rng() % 32);
      with_nan[lane] = (n % 2) ? kNaN : -kNaN;
      Block cleaned = x;
      cleaned[lane] = 0.0f;
      const Quantized q = run(r, with_nan);
      const Quantized c = run(r, cleaned);
      if (is_ggml(r)) {
        // NaN is skipped by the amax loop; its code is 0; the block stays finite.
        EXPECT_EQ(q.scale, c.scale) << id;
        EXPECT_EQ(q.codes, c.codes) << id;
        for (int i = 0; i < 32; ++i) EXPECT_EQ(bits(q.decoded[i]), bits(c.decoded[i])) << id;
      } else {
        EXPECT_EQ(q.scale, 0xFF) << id;
        if (torchao_nan_codes(r)) {
          for (int i = 0; i < 32; ++i) EXPECT_EQ(q.codes[i], 0x4) << id << ": torchao's CUDA codes";
        } else {
          EXPECT_EQ(q.codes, c.codes) << id << ": codes of a NaN block are those with NaN lanes = +0";
        }
        for (int i = 0; i < 32; ++i) {
          EXPECT_TRUE(std::isnan(q.decoded[i])) << id;
          EXPECT_TRUE(std::isnan(q.fake[i])) << id;
        }
      }
    }
  }
}

TEST(Mxfp4Properties, InfBlocks) {
  const Block x = block_of({kInf, 3.0f, 1.25f, -0.125f, -kInf, 3e38f});
  const Block cleaned = block_of({0.0f, 3.0f, 1.25f, -0.125f, 0.0f, 3e38f});
  // ocp, ceil, even, microxcaling: Inf amax -> NaN block; torchao's codes
  // (0x4) for the first three, microxcaling's as if Inf lanes were +0.
  for (const char* id : {"mxfp4.ocp", "mxfp4.ceil", "mxfp4.even", "mxfp4.microxcaling"}) {
    const Quantized q = run(mx(id), x);
    EXPECT_EQ(q.scale, 0xFF) << id;
    if (torchao_nan_codes(mx(id))) {
      for (int i = 0; i < 32; ++i) EXPECT_EQ(q.codes[i], 0x4) << id;
    } else {
      EXPECT_EQ(q.codes, run(mx(id), cleaned).codes) << id;
    }
    for (float v : q.decoded) EXPECT_TRUE(std::isnan(v)) << id;
  }
  // rceil: satfinite -> 0xFE (X = 2^127); Inf -> +-6; fp32 arithmetic for the rest.
  {
    const Quantized q = run(mx("mxfp4.rceil"), x);
    EXPECT_EQ(q.scale, 0xFE);
    EXPECT_EQ(q.codes[0], 0x7);
    EXPECT_EQ(q.codes[4], 0xF);
    EXPECT_EQ(q.codes[1], 0x0);   // 3 * 2^-127 -> +0
    EXPECT_EQ(q.codes[3], 0x8);   // -0
    EXPECT_EQ(q.codes[5], 0x4);   // 3e38 / 2^127 = 1.76 -> 2
    // Decode overflows at the top: 6 * 2^127 and 2 * 2^127 -> +-Inf.
    EXPECT_EQ(q.decoded[0], kInf);
    EXPECT_EQ(q.decoded[4], -kInf);
    EXPECT_EQ(q.decoded[5], kInf);
    EXPECT_EQ(bits(q.decoded[1]), 0u);
  }
  // rceil with NaN and Inf: NaN wins (0xFF); codes as if the NaN lane were +0.
  {
    Block y = x;
    y[7] = kNaN;
    const Quantized q = run(mx("mxfp4.rceil"), y);
    EXPECT_EQ(q.scale, 0xFF);
    EXPECT_EQ(q.codes, run(mx("mxfp4.rceil"), x).codes);
  }
  // ggml: Inf amax -> floorf(log2f(Inf)) - 2 + 127 = Inf -> (uint8_t) on x86-64 = 0x00.
  // Inf lanes get code 0. Finite lanes: the fp32 errors |kv*d - x| with
  // d = 2^-128 all round to |x| for x = 3 (no strict improvement: code 0),
  // while 3e38 is beyond every candidate too: code 0.
  {
    const Quantized q = run(mx("mxfp4.ggml"), x);
    EXPECT_EQ(q.scale, 0x00);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(q.codes[i], 0x0) << i;
    // A small finite lane is still resolved: -2^-120 -> errors differ -> -6X (code 0xF).
    const Quantized s = run(mx("mxfp4.ggml"), block_of({kInf, -0x1p-120f, 0x1p-128f, 0x1p-127f}));
    EXPECT_EQ(s.scale, 0x00);
    EXPECT_EQ(s.codes[1], 0xF);
    EXPECT_EQ(s.codes[2], 0x1);  // 2^-128 = 0.5 X
    EXPECT_EQ(s.codes[3], 0x2);  // 2^-127 = 1.0 X
  }
}

TEST(Mxfp4Properties, AllNanBlocks) {
  Block x;
  x.fill(kNaN);
  for (const char* id : kAllIds) {
    const Quantized q = run(mx(id), x);
    EXPECT_EQ(q.scale, is_ggml(mx(id)) ? 0x00 : 0xFF) << id;  // ggml: amax stays 0
    for (int i = 0; i < 32; ++i) EXPECT_EQ(q.codes[i], torchao_nan_codes(mx(id)) ? 0x4 : 0x0) << id;
  }
}

TEST(Mxfp4Properties, GgmlWrapCodes) {
  // No lower clamp: the biased exponent wraps modulo 256 (x86-64 cvttss2si, low byte).
  const struct {
    float amax;
    uint8_t scale;
  } rows[] = {
      {0x1p-124f, 0x01}, {0x1p-125f, 0x00}, {0x1p-126f, 0xFF}, {0x1p-127f, 0xFE},
      {0x1p-130f, 0xFB}, {0x1p-149f, 0xE8},
  };
  for (const auto& row : rows) {
    const Quantized q = run(mx("mxfp4.ggml"), block_of({row.amax, -row.amax}));
    EXPECT_EQ(q.scale, row.scale) << row.amax;
    if (row.scale >= 0xE8) {  // wrapped: X is huge, every code is 0
      EXPECT_EQ(q.codes[0], 0x0);
      EXPECT_EQ(q.codes[1], 0x0);
    }
  }
  // ggml emits 0xFF for amax in [2^-126, 2^-125); its own dequantizer reads
  // 0xFF as an ordinary exponent (2^128 per E2M1 unit), so the block, whose
  // codes are all 0, decodes to +0 rather than NaN.
  const Quantized q = run(mx("mxfp4.ggml"), block_of({0x1p-126f}));
  EXPECT_EQ(q.scale, 0xFF);
  EXPECT_EQ(bits(q.decoded[0]), 0u);
}

TEST(Mxfp4Properties, FakeQuantEqualsDecodeOfQuantize) {
  std::mt19937_64 rng(14);
  const float specials[] = {kNaN, -kNaN, kInf, -kInf, 0.0f, -0.0f, std::numeric_limits<float>::max(),
                            0x1p-149f};
  for (const char* id : kAllIds) {
    const Recipe& r = mx(id);
    for (Rounding rd : kConvertRoundings) {
      if (!(r.allowed_roundings & rounding_bit(rd))) continue;
      for (int n = 0; n < 2000; ++n) {
        Block x = random_block(rng, n % 3);
        if (n % 7 == 0) x[rng() % 32] = specials[rng() % 8];
        Codes codes{};
        Block decoded{}, fake{};
        const uint8_t s = ref::mxfp4_quantize_block(r, rd, x.data(), codes.data());
        ref::mxfp4_decode_block(r, s, codes.data(), decoded.data());
        ref::mxfp4_fake_quant_block(r, rd, x.data(), fake.data());
        for (int i = 0; i < 32; ++i) ASSERT_EQ(bits(fake[i]), bits(decoded[i])) << id << " " << i;
      }
    }
  }
}

TEST(Mxfp4Decode, EveryScaleAndCode) {
  const Recipe& r = mx("mxfp4.ocp");
  Codes codes;
  for (int i = 0; i < 32; ++i) codes[i] = static_cast<uint8_t>(i % 16);
  for (int c = 0; c < 256; ++c) {
    Block out{};
    ref::mxfp4_decode_block(r, static_cast<uint8_t>(c), codes.data(), out.data());
    for (int i = 0; i < 32; ++i) {
      const float want = oracle_decode(static_cast<uint8_t>(c), codes[i]);
      if (c == 0xFF) {
        EXPECT_TRUE(std::isnan(out[i]));
      } else {
        ASSERT_EQ(bits(out[i]), bits(want)) << "scale " << c << " code " << int(codes[i]);
      }
    }
  }
  // The very top overflows: c = 254, |P| >= 2 and c = 253, |P| >= 4 -> Inf.
  Block out{};
  ref::mxfp4_decode_block(r, 0xFE, codes.data(), out.data());
  EXPECT_EQ(out[3], 0x1.8p127f);  // 1.5 * 2^127
  EXPECT_EQ(out[4], kInf);
  EXPECT_EQ(out[15], -kInf);
  ref::mxfp4_decode_block(r, 0xFD, codes.data(), out.data());
  EXPECT_EQ(out[5], 0x1.8p127f);  // 3 * 2^126
  EXPECT_EQ(out[6], kInf);
  // The bottom is exact: c = 0, code 1 -> 2^-128 (an fp32 subnormal).
  ref::mxfp4_decode_block(r, 0x00, codes.data(), out.data());
  EXPECT_EQ(out[1], 0x1p-128f);
  EXPECT_EQ(bits(out[8]), 0x80000000u);  // code 8 -> -0
}

// ===========================================================================
// Conformance with the libraries the recipes name (docs/formats.md, MXFP4):
// the pinned cases where fp4emu once differed from them.

// torchao EVEN rounds amax to one mantissa bit on its integer bits before the
// floor rule; at 1.75 * 2^127 that carries into the exponent field 255 (+Inf)
// and its torch.isfinite test on the rounded value writes 0xFF.
TEST(Mxfp4Conformance, EvenRoundedAmaxOverflowIsANanBlock) {
  const Recipe& even = mx("mxfp4.even");
  for (uint32_t amax_bits : {0x7F600000u, 0x7F600001u, 0x7F7FFFFFu}) {
    const Quantized q = run(even, block_of({1.0f, -from_bits(amax_bits), -2.0f}));
    EXPECT_EQ(q.scale, 0xFF) << std::hex << amax_bits;  // fp4emu gave 0xFD before
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(q.codes[i], 0x4) << i;
      EXPECT_TRUE(std::isnan(q.decoded[i]));
      EXPECT_TRUE(std::isnan(q.fake[i]));
    }
  }
  // One ulp below still rounds to 1.5 * 2^127: 127 - 2 -> 0xFC, an ordinary block.
  const Quantized below = run(even, block_of({from_bits(0x7F5FFFFF), -1.0f}));
  EXPECT_EQ(below.scale, 0xFC);
  EXPECT_EQ(below.codes[0], 0x7);
  EXPECT_EQ(below.codes[1], 0x8);
}

// torchao (FLOOR, CEIL, EVEN) multiplies the block by the NaN reciprocal of
// scale 0xFF; CUDA returns the canonical NaN 0x7FFFFFFF, which its
// f32_to_f4_unpacked bit arithmetic maps to code 0x4 in every lane. (A CPU run
// keeps NaN payloads: the default quiet NaN 0x7FC00000 would give 0x3.)
TEST(Mxfp4Conformance, TorchaoNanBlockCodesAreThoseOfCudasCanonicalNan) {
  EXPECT_EQ(torchao_f4_normal_branch(0x7FFFFFFFu), 0x4);
  EXPECT_EQ(torchao_f4_normal_branch(0x7FC00000u), 0x3);
  EXPECT_EQ(torchao_f4_normal_branch(0xFFC00000u), 0xB);
  // The same arithmetic on ordinary values is E2M1 RNE (a check of the oracle).
  EXPECT_EQ(torchao_f4_normal_branch(bits(1.25f)), 0x2);
  EXPECT_EQ(torchao_f4_normal_branch(bits(1.75f)), 0x4);
  EXPECT_EQ(torchao_f4_normal_branch(bits(-3.0f)), 0xD);
  for (const char* id : {"mxfp4.ocp", "mxfp4.ceil", "mxfp4.even"}) {
    for (const Block& x : {block_of({kNaN, -1.0f, 2.5f}), block_of({-kInf, 0.25f}), block_of({1.0f, -kNaN})}) {
      const Quantized q = run(mx(id), x);
      EXPECT_EQ(q.scale, 0xFF) << id;
      for (int i = 0; i < 32; ++i) EXPECT_EQ(q.codes[i], 0x4) << id << " lane " << i;
    }
  }
  // microxcaling computes floats only (no codes): the convention stays, the
  // codes of the block with its NaN/Inf lanes as +0.
  const Quantized m = run(mx("mxfp4.microxcaling"), block_of({kNaN, -1.0f, 2.5f}));
  EXPECT_EQ(m.scale, 0xFF);
  EXPECT_EQ(m.codes[1], 0xC);  // -1 with amax 2.5: X = 2^-1, y = -2
  EXPECT_EQ(m.codes[2], 0x7);  // 2.5 / 0.5 = 5, a tie, half away -> 6
}

// microxcaling's "nearest" is torch.sign(A) * floor(|A| + 0.5) on the fp32
// quotient A = V / 2^shared_exp; torch.sign(+-0) is +0 (checked with PyTorch
// 1.13.1 on the CPU; current PyTorch's CPU and CUDA kernels compute
// (0 < a) - c10::is_negative(a), and is_negative(a) is a < 0). So
// -0.0 and a negative V whose quotient underflows to -0 give +0, code 0x0.
TEST(Mxfp4Conformance, MicroxcalingZeroQuotientIsPositiveZero) {
  const Recipe& mxc = mx("mxfp4.microxcaling");
  const Recipe& ocp = mx("mxfp4.ocp");
  {
    const Quantized q = run(mxc, block_of({-0.0f, 3.0f, -0.1f}));
    EXPECT_EQ(q.codes[0], 0x0);  // fp4emu gave 0x8 before
    EXPECT_EQ(bits(q.decoded[0]), 0u);
    EXPECT_EQ(bits(q.fake[0]), 0u);
    EXPECT_EQ(q.codes[2], 0x8);  // -0.1 / 2^-1 = -0.2: a nonzero quotient keeps its sign
    EXPECT_EQ(bits(q.decoded[2]), 0x80000000u);
    EXPECT_EQ(run(ocp, block_of({-0.0f, 3.0f})).codes[0], 0x8);  // OCP/torchao keep -0
  }
  // amax 2^127: s = 125. V = -2^-25 gives V / X = -2^-150, which fp32 rounds to
  // -0 (the tie goes to the even 0): +0. V = -1.5 * 2^-25 gives -2^-149: -0 code.
  {
    const Quantized q = run(mxc, block_of({0x1p127f, -0x1p-25f, -0x1.8p-25f, -0x1p-149f}));
    EXPECT_EQ(q.scale, 125 + 127);
    EXPECT_EQ(q.codes[1], 0x0);
    EXPECT_EQ(q.codes[2], 0x8);
    EXPECT_EQ(q.codes[3], 0x0);
    EXPECT_EQ(bits(q.fake[1]), 0u);
    EXPECT_EQ(bits(q.fake[2]), 0x80000000u);
  }
  // The case microxcaling itself was run on (PyTorch 1.13.1 CPU, 7bc4195
  // _quantize_mx): amax 1e30 -> s = 97; -2^-149 / 2^97 underflows -> +0,
  // -5 / 2^97 does not -> -0.
  {
    const Quantized q = run(mxc, block_of({1e30f, -0x1p-149f, -5.0f}));
    EXPECT_EQ(q.scale, 97 + 127);
    EXPECT_EQ(q.codes[1], 0x0);
    EXPECT_EQ(q.codes[2], 0x8);
  }
}

}  // namespace
