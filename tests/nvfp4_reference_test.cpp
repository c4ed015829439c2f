// NVFP4 scalar reference (src/quant/reference/nvfp4.cpp) against
// docs/spec/nvfp4.md: every worked example of §8 (EX-N8, stochastic
// rounding, is a later issue), the §2.1 E4M3 table, per-recipe properties and
// an independent table-search oracle for nvfp4.te.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "fp4emu/quant/reference.hpp"
#include "oracle.hpp"

namespace fp4emu {
namespace {

namespace ref = reference;

using Block = std::array<float, 16>;
using Codes = std::array<uint8_t, 16>;
using Packed = std::array<uint8_t, 8>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFltMax = std::numeric_limits<float>::max();
const float kRN16 = std::bit_cast<float>(0x3E2AAAABu);  // docs/spec/nvfp4.md notation

const Recipe& recipe(std::string_view id) {
  for (const Recipe& r : nvfp4_recipes())
    if (r.id == id) return r;
  ADD_FAILURE() << "no recipe " << id;
  return nvfp4_recipes()[0];
}

Block block_of(std::initializer_list<float> values) {
  Block b{};
  int i = 0;
  for (float v : values) b[i++] = v;
  return b;
}

Codes codes_of(std::initializer_list<int> values) {
  Codes c{};
  int i = 0;
  for (int v : values) c[i++] = static_cast<uint8_t>(v);
  return c;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// Bit-identical, except that any NaN equals any NaN.
bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits(a) == bits(b); }

struct Quantized {
  ref::NvTensorScale ts;
  float block_amax = 0;
  uint8_t scale = 0;
  Codes codes{};
  Block decoded{};
};

// One block, with the per-tensor scale from G and the recipe's own block amax
// (rounding: the recipe's own unless given).
Quantized quantize(const Recipe& r, float global_amax, const Block& x, std::optional<Rounding> given = {}) {
  const Rounding rounding = given.value_or(r.element_rounding);
  Quantized q;
  q.ts = ref::nvfp4_tensor_scale(r, global_amax);
  q.block_amax = ref::nvfp4_block_amax(r, x.data(), ref::kNvBlock);
  q.scale = ref::nvfp4_quantize_block(r, rounding, q.ts, q.block_amax, x.data(), q.codes.data());
  ref::nvfp4_decode_block(r, q.ts, q.scale, q.codes.data(), q.decoded.data());
  return q;
}

Block fake_quant(const Recipe& r, float global_amax, const Block& x, std::optional<Rounding> given = {}) {
  const Rounding rounding = given.value_or(r.element_rounding);
  const ref::NvTensorScale ts = ref::nvfp4_tensor_scale(r, global_amax);
  Block out{};
  ref::nvfp4_fake_quant_block(r, rounding, ts, ref::nvfp4_block_amax(r, x.data(), ref::kNvBlock), x.data(),
                              out.data());
  return out;
}

// docs/spec/nvfp4.md §6.1: two codes per byte; low_first puts element 2i in bits 3..0,
// ggml's split_half puts elements j and j+8 in byte j.
Packed pack(const Codes& c, NibbleOrder order) {
  Packed p{};
  for (int j = 0; j < 8; ++j) {
    if (order == NibbleOrder::split_half)
      p[j] = static_cast<uint8_t>(c[j] | (c[j + 8] << 4));
    else
      p[j] = static_cast<uint8_t>(c[2 * j] | (c[2 * j + 1] << 4));
  }
  return p;
}

#define EXPECT_FLOAT_BITS(actual, expected)                                                 \
  EXPECT_TRUE(same_float((actual), (expected)))                                             \
      << #actual " = " << (actual) << " (0x" << std::hex << bits(actual) << "), expected " \
      << (expected) << " (0x" << bits(expected) << ")" << std::dec

void expect_block(const Quantized& q, uint8_t scale, const Codes& codes, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(q.scale, scale) << std::hex << "scale 0x" << int(q.scale);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(q.codes[i], codes[i]) << "element " << i;
}

void expect_decoded(const Quantized& q, std::initializer_list<float> values, const char* what) {
  SCOPED_TRACE(what);
  int i = 0;
  for (float v : values) {
    EXPECT_FLOAT_BITS(q.decoded[i], v);
    ++i;
  }
  for (; i < 16; ++i) EXPECT_FLOAT_BITS(q.decoded[i], q.codes[i] & 8 ? -0.0f : 0.0f);
}

// ============================================================ recipe table ==

TEST(Nvfp4Recipes, CanonicalRecipes) {
  const std::vector<std::string_view> ids = {
      "nvfp4.te",          "nvfp4.te_2d",        "nvfp4.te_4over6",   "nvfp4.torchao",      "nvfp4.torchao_cpu",
      "nvfp4.torchao_1l",  "nvfp4.torchao_1l_cpu", "nvfp4.modelopt",  "nvfp4.modelopt_cpu", "nvfp4.modelopt_fq",
      "nvfp4.ct",          "nvfp4.ct_cuda",      "nvfp4.ct_legacy",   "nvfp4.ct_legacy_cpu", "nvfp4.cutlass_epi",
      "nvfp4.cudnn",       "nvfp4.ggml"};
  const auto table = nvfp4_recipes();
  ASSERT_EQ(table.size(), ids.size());
  int defaults = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const Recipe& r = table[i];
    SCOPED_TRACE(std::string(r.id));
    EXPECT_EQ(r.id, ids[i]);
    EXPECT_EQ(r.format, Format::nvfp4);
    EXPECT_FALSE(r.summary.empty());
    EXPECT_TRUE(r.spec_ref.starts_with("docs/spec/nvfp4.md §")) << r.id;
    EXPECT_EQ(r.default_tail, TailPolicy::pad);
    EXPECT_FALSE(r.bf16_input_only);
    EXPECT_EQ(r.fake_quant_only, r.id == "nvfp4.modelopt_fq");
    EXPECT_TRUE(r.allowed_roundings & rounding_bit(r.element_rounding));
    if (r.id == "nvfp4.ggml") {
      EXPECT_EQ(r.element_rounding, Rounding::ties_to_zero);
      EXPECT_EQ(r.allowed_roundings, rounding_bit(Rounding::ties_to_zero));
      EXPECT_EQ(r.nibble_order, NibbleOrder::split_half);
    } else {
      EXPECT_EQ(r.element_rounding, Rounding::rne);
      // Stochastic rounding: TransformerEngine's recipes only (cvt.rs in its kernels).
      const bool te = r.id == "nvfp4.te" || r.id == "nvfp4.te_2d";
      EXPECT_EQ(r.allowed_roundings, rounding_bit(Rounding::rne) | rounding_bit(Rounding::rtz) |
                                         (te ? rounding_bit(Rounding::stochastic) : 0));
      EXPECT_EQ(r.nibble_order, NibbleOrder::low_first);
    }
    EXPECT_EQ(r.nv.tile_2d, r.id == "nvfp4.te_2d");
    EXPECT_EQ(r.nv.tensor_scale_e4m3_max, r.id == "nvfp4.te_4over6" ? 256.0f : 448.0f);
    // The *_cpu ids are the PyTorch CPU variants of a CUDA default.
    const bool cpu = r.id.ends_with("_cpu") || r.id == "nvfp4.ct";
    EXPECT_EQ(r.nv.device, cpu ? NvDevice::cpu : NvDevice::cuda);
    defaults += r.is_default;
  }
  EXPECT_EQ(defaults, 1);
  EXPECT_TRUE(table[0].is_default);
  EXPECT_NE(recipe("nvfp4.cudnn").summary.find("documented formula only, unverified against a binary"),
            std::string_view::npos);
  // NaN in the amax reductions: torch.amax and the CUTLASS host reference
  // propagate (docs/spec/nvfp4.md §4.6); fmaxf kernels and ggml drop; triton's tl.max
  // is maxnum (NaN only for an all-NaN block).
  for (auto id : {"nvfp4.torchao", "nvfp4.torchao_cpu", "nvfp4.torchao_1l", "nvfp4.torchao_1l_cpu", "nvfp4.modelopt",
                  "nvfp4.modelopt_cpu", "nvfp4.ct", "nvfp4.ct_cuda", "nvfp4.ct_legacy", "nvfp4.ct_legacy_cpu",
                  "nvfp4.cutlass_epi"})
    EXPECT_EQ(recipe(id).nv.amax_nan, NvAmaxNan::propagate) << id;
  for (auto id : {"nvfp4.te", "nvfp4.te_2d", "nvfp4.te_4over6", "nvfp4.cudnn", "nvfp4.ggml"})
    EXPECT_EQ(recipe(id).nv.amax_nan, NvAmaxNan::drop) << id;
  EXPECT_EQ(recipe("nvfp4.modelopt_fq").nv.amax_nan, NvAmaxNan::maxnum);
  EXPECT_EQ(recipe("nvfp4.modelopt_fq").nv.tensor_amax_nan, NvAmaxNan::propagate);
  // Bits versions (CHANGELOG.md): the recipes whose library conformance
  // changed their bits are at 2, new ids start at 1.
  for (auto id : {"nvfp4.te", "nvfp4.te_2d", "nvfp4.te_4over6", "nvfp4.torchao", "nvfp4.torchao_1l", "nvfp4.modelopt",
                  "nvfp4.modelopt_fq", "nvfp4.ct", "nvfp4.cutlass_epi", "nvfp4.ggml"})
    EXPECT_EQ(recipe(id).bits_version, 2) << id;
  for (auto id : {"nvfp4.torchao_cpu", "nvfp4.torchao_1l_cpu", "nvfp4.modelopt_cpu", "nvfp4.ct_cuda",
                  "nvfp4.ct_legacy", "nvfp4.ct_legacy_cpu", "nvfp4.cudnn"})
    EXPECT_EQ(recipe(id).bits_version, 1) << id;
}

// =============================================================== codecs ====

TEST(Nvfp4Codec, RN16) {
  EXPECT_EQ(bits(1.0f / 6.0f), 0x3E2AAAABu);
  EXPECT_FLOAT_BITS(kRN16, 0.16666667163f);
}

TEST(Nvfp4Codec, E2M1TableAndTies) {
  // docs/spec/nvfp4.md §1.
  const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    EXPECT_FLOAT_BITS(e2m1_decode(static_cast<uint8_t>(c)), values[c]);
    EXPECT_FLOAT_BITS(e2m1_decode(static_cast<uint8_t>(c | 8)), -values[c]);
  }
  struct Case {
    float y;
    uint8_t code;
  };
  const Case cases[] = {{0.25f, 0x0}, {0.2500001f, 0x1}, {0.75f, 0x2},  {1.25f, 0x2}, {1.2500001f, 0x3},
                        {1.75f, 0x4}, {2.5f, 0x4},       {2.5000002f, 0x5}, {3.5f, 0x6}, {5.0f, 0x6},
                        {5.0000005f, 0x7}, {7.0f, 0x7},  {kInf, 0x7},  {-kInf, 0xF}, {kNaN, 0x7},
                        {-0.0f, 0x8}, {-0.1f, 0x8},      {-0.75f, 0xA}, {-5.0f, 0xE}, {-6.5f, 0xF}};
  for (const Case& c : cases) EXPECT_EQ(e2m1_encode(c.y, Rounding::rne), c.code) << c.y;
}

TEST(Nvfp4Codec, E4M3ReferenceCodes) {
  // docs/spec/nvfp4.md §2.1 "Reference codes".
  struct Case {
    uint8_t code;
    float value;
  };
  const Case table[] = {{0x01, 0x1p-9f}, {0x05, 0.009765625f}, {0x07, 0.013671875f}, {0x08, 0.015625f},
                        {0x20, 0.125f},  {0x38, 1.0f},         {0x3D, 1.625f},       {0x40, 2.0f},
                        {0x4B, 5.5f},    {0x78, 256.0f},       {0x7E, 448.0f}};
  for (const Case& c : table) {
    EXPECT_FLOAT_BITS(ue4m3_decode(c.code), c.value);
    EXPECT_FLOAT_BITS(e4m3_decode(c.code), c.value);
    EXPECT_EQ(ue4m3_encode(c.value, Rounding::rne, Overflow::saturate), c.code);
    EXPECT_EQ(e4m3_encode(-c.value, Rounding::rne, Overflow::saturate), c.code | 0x80);
  }
  EXPECT_TRUE(std::isnan(ue4m3_decode(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_decode(0xFF)));
  // UE4M3 ignores the sign bit (cuBLAS, docs/spec/nvfp4.md §2.1).
  EXPECT_FLOAT_BITS(ue4m3_decode(0xB8), 1.0f);
}

TEST(Nvfp4Codec, CudaE4M3ConversionEdges) {
  // __nv_cvt_float_to_fp8(x, sat, __NV_E4M3), docs/spec/nvfp4.md §2.1.
  auto sat = [](float x) { return e4m3_encode(x, Rounding::rne, Overflow::saturate); };
  auto nosat = [](float x) { return e4m3_encode(x, Rounding::rne, Overflow::to_special); };
  EXPECT_EQ(sat(0x1p-10f), 0x00);  // tie 0 / 2^-9 -> 0
  EXPECT_EQ(sat(-0x1p-10f), 0x80);
  EXPECT_EQ(sat(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(sat(0x1p-11f), 0x00);
  EXPECT_EQ(sat(448.0f), 0x7E);
  EXPECT_EQ(sat(464.0f), 0x7E);  // tie 448 / (480) -> even
  EXPECT_EQ(nosat(464.0f), 0x7E);
  EXPECT_EQ(sat(std::nextafter(464.0f, 1000.0f)), 0x7E);
  EXPECT_EQ(nosat(std::nextafter(464.0f, 1000.0f)), 0x7F);
  EXPECT_EQ(sat(1e30f), 0x7E);
  EXPECT_EQ(sat(kInf), 0x7E);
  EXPECT_EQ(sat(-kInf), 0xFE);
  EXPECT_EQ(nosat(kInf), 0x7F);
  EXPECT_EQ(nosat(-kInf), 0xFF);
  EXPECT_EQ(sat(kNaN), 0x7F);
  // The float version canonicalizes NaN to positive; the unsigned (UE4M3)
  // conversion the recipes use always gives 0x7F.
  EXPECT_EQ(ue4m3_encode(-kNaN, Rounding::rne, Overflow::saturate), 0x7F);
  // Subnormal ties go to even: 2.5 * 2^-9 -> 2 * 2^-9, 3.5 * 2^-9 -> 4 * 2^-9.
  EXPECT_EQ(sat(2.5f * 0x1p-9f), 0x02);
  EXPECT_EQ(sat(3.5f * 0x1p-9f), 0x04);
  // 1.6666667 lies between 1.625 and 1.75: RNE -> 1.625 (EX-N2); round up -> 1.75.
  EXPECT_EQ(sat(1.66666675f), 0x3D);
  EXPECT_EQ(ue4m3_encode(1.66666675f, Rounding::rtp, Overflow::saturate), 0x3E);
}

// ============================================================ tensor scale ==

TEST(Nvfp4TensorScale, TeFormulaAndGuards) {
  // docs/spec/nvfp4.md §2.2 / §4.1 step 1.
  for (auto id : {"nvfp4.te", "nvfp4.te_2d", "nvfp4.cutlass_epi", "nvfp4.cudnn"}) {
    SCOPED_TRACE(id);
    const Recipe& r = recipe(id);
    auto ts = ref::nvfp4_tensor_scale(r, 2688.0f);
    EXPECT_FLOAT_BITS(ts.encode, 1.0f);
    EXPECT_FLOAT_BITS(ts.decode, 1.0f);
    ts = ref::nvfp4_tensor_scale(r, 1000.0f);
    EXPECT_FLOAT_BITS(ts.encode, 2.68799996f);
    EXPECT_FLOAT_BITS(ts.decode, 0.372023821f);
    EXPECT_FLOAT_BITS(ts.global_amax, 1000.0f);
    ts = ref::nvfp4_tensor_scale(r, 10.0f);
    EXPECT_FLOAT_BITS(ts.encode, 268.799988f);
    ts = ref::nvfp4_tensor_scale(r, 0.0f);  // G == 0 -> 1
    EXPECT_FLOAT_BITS(ts.encode, 1.0f);
    EXPECT_FLOAT_BITS(ts.decode, 1.0f);
    ts = ref::nvfp4_tensor_scale(r, kInf);  // S_enc == 0 -> 1
    EXPECT_FLOAT_BITS(ts.encode, 1.0f);
    ts = ref::nvfp4_tensor_scale(r, 0x1p-149f);  // Inf -> FLT_MAX
    EXPECT_FLOAT_BITS(ts.encode, kFltMax);
    EXPECT_FLOAT_BITS(ts.decode, 1.0f / kFltMax);
    ts = ref::nvfp4_tensor_scale(r, kNaN);  // fminf drops the NaN [inference]
    EXPECT_FLOAT_BITS(ts.encode, kFltMax);
  }
  // 4over6: S_enc = 6*256/G.
  const Recipe& r46 = recipe("nvfp4.te_4over6");
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(r46, 1536.0f).encode, 1.0f);
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(r46, 1000.0f).encode, 1536.0f / 1000.0f);
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(r46, 0.0f).encode, 1.0f);
}

TEST(Nvfp4TensorScale, OtherConventions) {
  // Decode convention, G / (448*6): a true division on the CPU, times
  // fp32(1/2688) on CUDA (PyTorch's tensor / Python scalar).
  const float g = 1000.0f;
  const float s_dec = g / 2688.0f;
  for (auto id : {"nvfp4.torchao", "nvfp4.torchao_cpu", "nvfp4.modelopt", "nvfp4.modelopt_cpu", "nvfp4.modelopt_fq"}) {
    SCOPED_TRACE(id);
    const auto ts = ref::nvfp4_tensor_scale(recipe(id), g);
    EXPECT_FLOAT_BITS(ts.decode, s_dec);  // here G * fp32(1/2688) rounds to the same value
    EXPECT_FLOAT_BITS(ts.encode, 1.0f / s_dec);
  }
  // No guard in torchao / ModelOpt (the fake quant guards inside its kernel).
  for (auto id : {"nvfp4.torchao", "nvfp4.modelopt", "nvfp4.modelopt_fq"})
    EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(recipe(id), 0.0f).decode, 0.0f) << id;
  // Single level.
  for (auto id : {"nvfp4.torchao_1l", "nvfp4.torchao_1l_cpu", "nvfp4.ggml"}) {
    const auto ts = ref::nvfp4_tensor_scale(recipe(id), g);
    EXPECT_FLOAT_BITS(ts.encode, 1.0f) << id;
    EXPECT_FLOAT_BITS(ts.decode, 1.0f) << id;
  }
}

// Device semantics: G = 37 is one of the values where G * fp32(1/2688)
// (CUDA) and G / 2688 (CPU) differ in the last bit.
TEST(Nvfp4TensorScale, CudaDividesByAPythonScalarAsAReciprocalMultiply) {
  const float g = 37.0f;
  const float cpu = std::bit_cast<float>(0x3c618618u);
  const float cuda = std::bit_cast<float>(0x3c618619u);
  ASSERT_EQ(bits(g / 2688.0f), 0x3c618618u);
  ASSERT_EQ(bits(g * (1.0f / 2688.0f)), 0x3c618619u);
  for (auto id : {"nvfp4.torchao", "nvfp4.modelopt", "nvfp4.modelopt_fq"})
    EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(recipe(id), g).decode, cuda) << id;
  for (auto id : {"nvfp4.torchao_cpu", "nvfp4.modelopt_cpu"})
    EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(recipe(id), g).decode, cpu) << id;
  // The block pre-scale amax / 6 likewise: for amax 0x3f63ffff, a/6 =
  // 0.14843749 lies just below the E4M3 tie 0.1484375 between 0x21 and 0x22
  // (RNE: 0x21); a * fp32(1/6) rounds onto the tie (to even: 0x22).
  const float a = std::bit_cast<float>(0x3f63ffffu);
  const Block x = block_of({a});
  EXPECT_EQ(quantize(recipe("nvfp4.torchao_1l"), 0, x).scale, 0x22);
  EXPECT_EQ(quantize(recipe("nvfp4.torchao_1l_cpu"), 0, x).scale, 0x21);
  EXPECT_EQ(quantize(recipe("nvfp4.ct_legacy"), 2688, x).scale, 0x22);
  EXPECT_EQ(quantize(recipe("nvfp4.ct_legacy_cpu"), 2688, x).scale, 0x21);
  EXPECT_EQ(quantize(recipe("nvfp4.ct_cuda"), 2688, x).scale, 0x22);
  EXPECT_EQ(quantize(recipe("nvfp4.ct"), 2688, x).scale, 0x21);
}

// compressed-tensors' generate_gparam: 2688.0 / G is reciprocal(G) * 2688;
// the current release clamps G to FLT_MIN and replaces NaN/Inf by 1.0.
TEST(Nvfp4TensorScale, CompressedTensorsGlobalScale) {
  const Recipe& legacy = recipe("nvfp4.ct_legacy");
  const Recipe& current = recipe("nvfp4.ct");
  // Pinned: G = 1e-30 gives 0x77048755 (a true division gives 0x77048754).
  ASSERT_EQ(bits(2688.0f / 1e-30f), 0x77048754u);
  for (const Recipe* r : {&legacy, &current, &recipe("nvfp4.ct_legacy_cpu"), &recipe("nvfp4.ct_cuda")})
    EXPECT_EQ(bits(ref::nvfp4_tensor_scale(*r, 1e-30f).encode), 0x77048755u) << r->id;
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(current, 1000.0f).encode, (1.0f / 1000.0f) * 2688.0f);
  // G = 0: legacy 1/0 * 2688 = Inf; current: clamp to FLT_MIN, 2688/FLT_MIN
  // overflows to Inf, replaced by 1.
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(legacy, 0.0f).encode, kInf);
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(current, 0.0f).encode, 1.0f);
  // G = 1e-37 (>= FLT_MIN, but the scale overflows): Inf -> 1 in current.
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(legacy, 1e-37f).encode, kInf);
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(current, 1e-37f).encode, 1.0f);
  // NaN: legacy NaN, current 1.
  EXPECT_TRUE(std::isnan(ref::nvfp4_tensor_scale(legacy, kNaN).encode));
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(current, kNaN).encode, 1.0f);
  // G = Inf: 2688 * 0 = 0 in both (nan_to_num leaves 0).
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(legacy, kInf).encode, 0.0f);
  EXPECT_FLOAT_BITS(ref::nvfp4_tensor_scale(current, kInf).encode, 0.0f);
}

// ======================================================= worked examples ==

// EX-N1: exact scale, every tie (G = 2688, so S_enc = S_dec = 1).
TEST(Nvfp4Examples, EXN1_ExactScaleEveryTie) {
  const Block x = block_of({12, 5, -1.5f, 0.5f, 7, 10, -0.25f, 3});
  const Codes expected = codes_of({0x7, 0x4, 0xA, 0x0, 0x6, 0x6, 0x8, 0x3});
  const Packed packed = {0x47, 0x0A, 0x66, 0x38, 0x00, 0x00, 0x00, 0x00};
  // TE: p = fp32(12 * fp32(1 * RN16)) = 2.0, enc_b = 0.5.
  EXPECT_FLOAT_BITS(12.0f * (1.0f * kRN16), 2.0f);
  for (auto id : {"nvfp4.te", "nvfp4.te_2d", "nvfp4.torchao", "nvfp4.torchao_1l", "nvfp4.modelopt", "nvfp4.ct",
                  "nvfp4.cutlass_epi", "nvfp4.cudnn"}) {
    const Recipe& r = recipe(id);
    const Quantized q = quantize(r, 2688.0f, x);
    expect_block(q, 0x40, expected, id);
    // ModelOpt's value table decodes 0x8 as +0.
    const float neg_zero = r.nv.rule == NvScaleRule::modelopt ? 0.0f : -0.0f;
    SCOPED_TRACE(id);
    for (int i = 0; i < 8; ++i)
      EXPECT_FLOAT_BITS(q.decoded[i], (std::array<float, 8>{12, 4, -2, 0, 8, 8, neg_zero, 3}[i]));
    EXPECT_EQ(pack(q.codes, r.nibble_order), packed) << id;
  }
  // ModelOpt's fake quant gives the same values.
  const Block fq = fake_quant(recipe("nvfp4.modelopt_fq"), 2688.0f, x);
  const float fq_expected[8] = {12, 4, -2, 0, 8, 8, -0.0f, 3};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_BITS(fq[i], fq_expected[i]);
  // ggml (not in the spec's example; derived from its argmin rule): the ties
  // 2.5, 0.75, 0.25, 3.5 and the -0.125 underflow go toward zero.
  const Quantized g = quantize(recipe("nvfp4.ggml"), 2688.0f, x);
  expect_block(g, 0x40, codes_of({0x7, 0x4, 0x9, 0x0, 0x5, 0x6, 0x0, 0x3}), "ggml");
  expect_decoded(g, {12, 4, -1, 0, 6, 8, 0, 3}, "ggml");
  EXPECT_EQ(pack(g.codes, NibbleOrder::split_half), (Packed{0x07, 0x04, 0x09, 0x00, 0x05, 0x06, 0x00, 0x03}));
}

// The CUDA API's round-toward-zero override on EX-N1's scaled values
// y = {6, 2.5, -0.75, 0.25, 3.5, 5, -0.125, 1.5}.
TEST(Nvfp4Examples, EXN1_RoundTowardZeroOverride) {
  const Block x = block_of({12, 5, -1.5f, 0.5f, 7, 10, -0.25f, 3});
  const Quantized q = quantize(recipe("nvfp4.te"), 2688.0f, x, Rounding::rtz);
  expect_block(q, 0x40, codes_of({0x7, 0x4, 0x9, 0x0, 0x5, 0x6, 0x8, 0x3}), "te rtz");
}

// EX-N2: the scale rounds down, so the block max saturates.
TEST(Nvfp4Examples, EXN2_ScaleRoundsDownMaxSaturates) {
  const Block x = block_of({10, -4, 2, 1});
  EXPECT_FLOAT_BITS(10.0f * kRN16, 1.66666675f);
  EXPECT_FLOAT_BITS(1.0f / (1.625f * 1.0f), 0.615384638f);  // TE enc_b
  const Codes expected = codes_of({0x7, 0xC, 0x2, 0x1});
  for (auto id : {"nvfp4.te", "nvfp4.te_2d", "nvfp4.torchao", "nvfp4.torchao_1l", "nvfp4.modelopt", "nvfp4.ct",
                  "nvfp4.cutlass_epi", "nvfp4.ggml"}) {
    const Recipe& r = recipe(id);
    const Quantized q = quantize(r, 2688.0f, x);
    expect_block(q, 0x3D, expected, id);
    expect_decoded(q, {9.75f, -3.25f, 1.625f, 0.8125f}, id);
    EXPECT_EQ(pack(q.codes, r.nibble_order)[0], r.nibble_order == NibbleOrder::split_half ? 0x07 : 0xC7);
  }
  // cuDNN's documented round-up picks 1.75 (0x3E) and avoids the saturation.
  const Quantized c = quantize(recipe("nvfp4.cudnn"), 2688.0f, x);
  expect_block(c, 0x3E, expected, "cudnn");
  expect_decoded(c, {10.5f, -3.5f, 1.75f, 0.875f}, "cudnn");
}

// EX-N3 / §4.8: all-zero block; the scale byte differs by library.
TEST(Nvfp4Examples, EXN3_AllZeroBlock) {
  const Block x{};
  struct Case {
    const char* id;
    uint8_t scale;
  };
  const Case cases[] = {{"nvfp4.te", 0x00},      {"nvfp4.te_2d", 0x00},      {"nvfp4.te_4over6", 0x00},
                        {"nvfp4.torchao", 0x08}, {"nvfp4.torchao_1l", 0x08}, {"nvfp4.modelopt", 0x38},
                        {"nvfp4.ct", 0x20},      {"nvfp4.cutlass_epi", 0x00}, {"nvfp4.cudnn", 0x00},
                        {"nvfp4.ggml", 0x00}};
  for (const Case& c : cases) {
    const Quantized q = quantize(recipe(c.id), 2688.0f, x);
    expect_block(q, c.scale, Codes{}, c.id);
    expect_decoded(q, {}, c.id);
    EXPECT_EQ(pack(q.codes, recipe(c.id).nibble_order), Packed{}) << c.id;
  }
  const Block fq = fake_quant(recipe("nvfp4.modelopt_fq"), 2688.0f, x);
  for (float v : fq) EXPECT_FLOAT_BITS(v, 0.0f);
}

// EX-N4: the scale underflows to zero (p = 0.0005 < 2^-10).
TEST(Nvfp4Examples, EXN4_ScaleUnderflowsToZero) {
  const Block x = block_of({0.003f, -0.001f});
  // TE and CUTLASS: s = 0 -> enc = FLT_MAX -> nonzero x saturate, decode to 0.
  for (auto id : {"nvfp4.te", "nvfp4.cutlass_epi"}) {
    const Quantized q = quantize(recipe(id), 2688.0f, x);
    expect_block(q, 0x00, codes_of({0x7, 0xF}), id);
    expect_decoded(q, {0.0f, -0.0f}, id);
    EXPECT_EQ(pack(q.codes, NibbleOrder::low_first), (Packed{0xF7, 0, 0, 0, 0, 0, 0, 0})) << id;
  }
  // torchao: the 2^-6 floor.
  {
    const Quantized q = quantize(recipe("nvfp4.torchao"), 2688.0f, x);
    expect_block(q, 0x08, codes_of({0x0, 0x8}), "torchao");
    expect_decoded(q, {0.0f, -0.0f}, "torchao");
    EXPECT_EQ(pack(q.codes, NibbleOrder::low_first), (Packed{0x80, 0, 0, 0, 0, 0, 0, 0}));
  }
  // ModelOpt export: s = 0, x/0 -> +-6, 0/0 -> NaN -> code 7 for the zeros.
  {
    Codes expected;
    expected.fill(0x7);
    expected[1] = 0xF;
    const Quantized q = quantize(recipe("nvfp4.modelopt"), 2688.0f, x);
    expect_block(q, 0x00, expected, "modelopt");
    expect_decoded(q, {0.0f, -0.0f}, "modelopt");
    Packed packed;
    packed.fill(0x77);
    packed[0] = 0xF7;
    EXPECT_EQ(pack(q.codes, NibbleOrder::low_first), packed);
  }
  // compressed-tensors: 0 -> 0.125.
  {
    const Quantized q = quantize(recipe("nvfp4.ct"), 2688.0f, x);
    expect_block(q, 0x20, codes_of({0x0, 0x8}), "ct");
    expect_decoded(q, {0.0f, -0.0f}, "ct");
  }
  // ggml (§4.8): scale 0, all codes 0.
  {
    const Quantized q = quantize(recipe("nvfp4.ggml"), 2688.0f, x);
    expect_block(q, 0x00, Codes{}, "ggml");
    expect_decoded(q, {0.0f, 0.0f}, "ggml");
  }
}

// EX-N4b: subnormal block scale versus torchao's 2^-6 floor.
TEST(Nvfp4Examples, EXN4b_SubnormalScale) {
  const Block x = block_of({0.06f, -0.02f, 0.01f});
  EXPECT_FLOAT_BITS(1.0f / (0.009765625f * 1.0f), 102.400002f);  // TE enc
  for (auto id : {"nvfp4.te", "nvfp4.cutlass_epi"}) {
    const Quantized q = quantize(recipe(id), 2688.0f, x);
    expect_block(q, 0x05, codes_of({0x7, 0xC, 0x2}), id);
    expect_decoded(q, {0.05859375f, -0.01953125f, 0.009765625f}, id);
  }
  const Quantized t = quantize(recipe("nvfp4.torchao"), 2688.0f, x);
  expect_block(t, 0x08, codes_of({0x6, 0xB, 0x1}), "torchao");
  expect_decoded(t, {0.0625f, -0.0234375f, 0.0078125f}, "torchao");
}

// EX-N5: non-trivial global scale (G = 1000), same data as EX-N1.
TEST(Nvfp4Examples, EXN5_GlobalScale) {
  const Block x = block_of({12, 5, -1.5f, 0.5f, 7, 10, -0.25f, 3});
  const float g = 1000.0f;
  const auto te = ref::nvfp4_tensor_scale(recipe("nvfp4.te"), g);
  EXPECT_FLOAT_BITS(te.encode, 2.68799996f);
  EXPECT_FLOAT_BITS(te.decode, 0.372023821f);
  EXPECT_FLOAT_BITS(12.0f * (te.encode * kRN16), 5.3760004f);  // p
  // enc_b: TE 1/(s*S_dec); torchao (1/S_dec)/s; CUTLASS host st*(1/s).
  EXPECT_FLOAT_BITS(std::fmin(1.0f / (5.5f * te.decode), kFltMax), 0.488727242f);
  const auto ao = ref::nvfp4_tensor_scale(recipe("nvfp4.torchao"), g);
  EXPECT_FLOAT_BITS((1.0f / ao.decode) / 5.5f, 0.488727272f);
  EXPECT_FLOAT_BITS(te.encode * (1.0f / 5.5f), 0.488727272f);

  const Codes expected = codes_of({0x7, 0x4, 0x9, 0x0, 0x5, 0x6, 0x8, 0x3});
  for (auto id : {"nvfp4.te", "nvfp4.te_2d", "nvfp4.torchao", "nvfp4.modelopt", "nvfp4.ct", "nvfp4.cutlass_epi",
                  "nvfp4.cudnn"}) {
    const Quantized q = quantize(recipe(id), g, x);
    expect_block(q, 0x4B, expected, id);
    // Decode in each library's order (docs/formats.md, dequantize table).
    const NvDecode order = recipe(id).nv.decode;
    for (int i = 0; i < 16; ++i) {
      const float e = e2m1_decode(expected[i]);
      float want = 0;
      switch (order) {
        case NvDecode::te: want = e * ((5.5f * g) * (1.0f / 2688.0f)); break;
        case NvDecode::torchao: want = e * (q.ts.decode * 5.5f); break;
        case NvDecode::modelopt: want = (expected[i] == 0x8 ? 0.0f : e) * (5.5f * q.ts.decode); break;
        case NvDecode::ct: want = e * (5.5f / q.ts.encode); break;
        default: want = (e * 5.5f) * q.ts.decode; break;
      }
      EXPECT_FLOAT_BITS(q.decoded[i], want) << id << " " << i;
    }
  }
  // TE's dequantize: q * fp32(fp32(5.5 * 1000) * fp32(1/2688)) (the spec's
  // EX-N5 values, 12.2767859 ..., are the fp32(fp32(q * s) * S_dec) order).
  expect_decoded(quantize(recipe("nvfp4.te"), g, x),
                 {12.276785f, 4.092262f, -1.0230654f, 0.0f, 6.1383924f, 8.184524f, -0.0f, 3.0691962f}, "te");
}

// EX-N6: the block that holds the tensor max uses 448 (G = a_b = 10).
TEST(Nvfp4Examples, EXN6_TensorMaxBlockUses448) {
  const Block x = block_of({10, -4, 2, 1});
  const auto te = ref::nvfp4_tensor_scale(recipe("nvfp4.te"), 10.0f);
  EXPECT_FLOAT_BITS(te.encode, 268.799988f);
  EXPECT_FLOAT_BITS(10.0f * (te.encode * kRN16), 448.0f);
  EXPECT_FLOAT_BITS(std::fmin(1.0f / (448.0f * te.decode), kFltMax), 0.599999964f);
  EXPECT_FLOAT_BITS(10.0f * 0.599999964f, 5.99999964f);
  // compressed-tensors: p = fp32(S_enc * fp32(10/6)) = 447.999969, same code.
  EXPECT_FLOAT_BITS(te.encode * (10.0f / 6.0f), 447.999969f);

  const Codes expected = codes_of({0x7, 0xC, 0x2, 0x1});
  for (auto id : {"nvfp4.te", "nvfp4.te_2d", "nvfp4.torchao", "nvfp4.modelopt", "nvfp4.ct", "nvfp4.cutlass_epi",
                  "nvfp4.cudnn"}) {
    const Quantized q = quantize(recipe(id), 10.0f, x);
    expect_block(q, 0x7E, expected, id);
    EXPECT_NEAR(q.decoded[0], 10.0, 1e-6) << id;
    EXPECT_NEAR(q.decoded[1], -10.0 / 3.0, 1e-6) << id;
    EXPECT_NEAR(q.decoded[2], 5.0 / 3.0, 1e-6) << id;
    EXPECT_NEAR(q.decoded[3], 5.0 / 6.0, 1e-6) << id;
  }
  // TE's dequantize goes through G: 6 * fp32(fp32(448 * 10) * fp32(1/2688))
  // = 10 (through S_dec = fp32(1/268.799988) it would be 10.000001, as
  // cutlass_epi's convention gives); the decode-convention libraries give 10.
  EXPECT_FLOAT_BITS(quantize(recipe("nvfp4.te"), 10.0f, x).decoded[0], 10.0f);
  EXPECT_FLOAT_BITS(quantize(recipe("nvfp4.cutlass_epi"), 10.0f, x).decoded[0], 10.000001f);
  EXPECT_FLOAT_BITS(quantize(recipe("nvfp4.torchao"), 10.0f, x).decoded[0], 10.0f);
  EXPECT_FLOAT_BITS(quantize(recipe("nvfp4.modelopt"), 10.0f, x).decoded[0], 10.0f);
}

// EX-N7: libraries disagree on an element code.
TEST(Nvfp4Examples, EXN7_LibrariesDisagree) {
  const float g = 0x1.2ecb6cp-6f;
  const float a_b = 0x1.67ca28p-7f;
  const float x0 = 0x1.206036p-7f;
  EXPECT_FLOAT_BITS(g, 0.0184811167f);
  EXPECT_FLOAT_BITS(a_b, 0.0109799094f);
  EXPECT_FLOAT_BITS(x0, 0.00880053174f);
  const Block x = block_of({a_b, x0});

  const auto te = ref::nvfp4_tensor_scale(recipe("nvfp4.te"), g);
  EXPECT_FLOAT_BITS(te.encode, 145445.75f);
  EXPECT_FLOAT_BITS(a_b * (te.encode * kRN16), 266.163544f);
  // The scaled element in each library's order.
  const float enc_te = std::fmin(1.0f / (256.0f * te.decode), kFltMax);
  EXPECT_FLOAT_BITS(enc_te, 568.147461f);
  EXPECT_FLOAT_BITS(x0 * enc_te, 4.99999952f);
  EXPECT_FLOAT_BITS(x0 * std::fmin(te.encode * (1.0f / 256.0f), kFltMax), 4.99999952f);  // CUTLASS host
  // torchao on the CPU (the spec's example): S_dec = G/2688.
  const auto ao = ref::nvfp4_tensor_scale(recipe("nvfp4.torchao_cpu"), g);
  const float r_ao = (1.0f / ao.decode) / 256.0f;
  EXPECT_FLOAT_BITS(r_ao, 568.147522f);
  EXPECT_FLOAT_BITS(x0 * r_ao, 5.00000048f);
  // torchao on CUDA: S_dec = G * fp32(1/2688) is one ulp higher, and the
  // element lands below the tie again.
  const auto ao_cuda = ref::nvfp4_tensor_scale(recipe("nvfp4.torchao"), g);
  EXPECT_EQ(bits(ao_cuda.decode), bits(ao.decode) + 1);
  const float r_ao_cuda = (1.0f / ao_cuda.decode) / 256.0f;
  EXPECT_FLOAT_BITS(r_ao_cuda, 568.147461f);
  EXPECT_FLOAT_BITS(x0 * r_ao_cuda, 4.99999952f);
  const auto mo = ref::nvfp4_tensor_scale(recipe("nvfp4.modelopt"), g);
  EXPECT_FLOAT_BITS(x0 / (256.0f * mo.decode), 5.0f);
  const auto ct = ref::nvfp4_tensor_scale(recipe("nvfp4.ct"), g);
  EXPECT_FLOAT_BITS(x0 / (256.0f / ct.encode), 5.0f);
  // The exact real value is 4.99999997 -> 4.
  const double exact = static_cast<double>(x0) * 2688.0 / (256.0 * static_cast<double>(g));
  EXPECT_NEAR(exact, 4.99999997, 1e-8);

  struct Case {
    const char* id;
    uint8_t code;
  };
  const Case cases[] = {{"nvfp4.te", 0x6}, {"nvfp4.te_2d", 0x6}, {"nvfp4.cutlass_epi", 0x6},
                        {"nvfp4.torchao_cpu", 0x7}, {"nvfp4.torchao", 0x6}, {"nvfp4.modelopt", 0x6},
                        {"nvfp4.ct", 0x6}};
  for (const Case& c : cases) {
    const Quantized q = quantize(recipe(c.id), g, x);
    expect_block(q, 0x78, codes_of({0x7, c.code}), c.id);
  }
}

// EX-N9: scale array [256, 8] for M = 256, K = 128; row-major index.
TEST(Nvfp4Examples, EXN9_RowMajorScaleIndex) {
  const int64_t m = 256, k = 128;
  const int64_t blocks_per_row = k / ref::kNvBlock;
  EXPECT_EQ(blocks_per_row, 8);
  EXPECT_EQ(m * blocks_per_row, 2048);
  const int64_t row = 130, block = 5;  // elements 80..95 of row 130
  EXPECT_EQ(block * ref::kNvBlock, 80);
  EXPECT_EQ(row * blocks_per_row + block, 1045);
}

// ==================================================== recipe specifics ==

TEST(Nvfp4Te2d, TileAmaxDrivesTheScale) {
  // The driver passes the 16x16 tile amax; the row itself is quantized as TE.
  const Block x = block_of({1, -0.5f, 0.25f, 0.125f});
  const Recipe& r2d = recipe("nvfp4.te_2d");
  const Recipe& te = recipe("nvfp4.te");
  const auto ts = ref::nvfp4_tensor_scale(r2d, 100.0f);
  for (float tile_amax : {1.0f, 3.0f, 17.0f, 100.0f}) {
    Codes c2d{}, cte{};
    const uint8_t s2d = ref::nvfp4_quantize_block(r2d, Rounding::rne, ts, tile_amax, x.data(), c2d.data());
    const uint8_t ste = ref::nvfp4_quantize_block(te, Rounding::rne, ts, tile_amax, x.data(), cte.data());
    EXPECT_EQ(s2d, ste);
    EXPECT_EQ(c2d, cte);
  }
  // Combining row amaxes into the tile amax is an fmaxf reduction.
  const float rows[16] = {1, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  EXPECT_FLOAT_BITS(ref::nvfp4_block_amax(r2d, rows, 16), 7.0f);
}

TEST(Nvfp4FourOverSix, PicksScaleFourWhenStrictlyBetter) {
  const Recipe& r = recipe("nvfp4.te_4over6");
  // G = 1536 makes S_enc = S_dec = 1 with M = 256.
  // {4, 3, 2, 1.5}: s6 = e4m3(4/6) = 0.6875 loses; s4 = 1.0 is exact.
  Quantized q = quantize(r, 1536.0f, block_of({4, 3, 2, 1.5f}));
  expect_block(q, 0x38, codes_of({0x6, 0x5, 0x4, 0x3}), "s4 wins");
  expect_decoded(q, {4, 3, 2, 1.5f}, "s4 wins");
  // {3}: both candidates are exact (s6 = 0.5 -> code 6.0; s4 = 0.75 -> 4.0);
  // the tie keeps s6.
  q = quantize(r, 1536.0f, block_of({3}));
  expect_block(q, 0x30, codes_of({0x7}), "tie keeps s6");
  // The block with the tensor max: s6 = 256, s4 = 384 (both within E4M3).
  q = quantize(r, 1536.0f, block_of({1536, 1152, 768, 576}));
  expect_block(q, 0x7C, codes_of({0x6, 0x5, 0x4, 0x3}), "max block s4 = 384");
}

TEST(Nvfp4FourOverSix, MaeAndMseCanDisagree) {
  // Hand-checked with exact arithmetic (S_enc = S_dec = 1, s6 = 1, s4 = 1.5):
  // MAE6 = 4 < MAE4 = 4.75, MSE6 = 2.5 > MSE4 = 1.9375.
  const Block x = block_of({-1, -0.5f, 0.5f, -1, -4.5f, 5.5f, -4, 3.5f, 4, 2.5f, 6, 4, -2.5f, -5, 2.5f, 0});
  const Recipe& mae = recipe("nvfp4.te_4over6");
  Recipe mse = mae;
  mse.nv.select_metric = NvSelectMetric::mse;
  EXPECT_EQ(quantize(mae, 1536.0f, x).scale, 0x38);
  EXPECT_EQ(quantize(mse, 1536.0f, x).scale, 0x3C);
}

TEST(Nvfp4Ggml, HalfUpScaleAndArgmin) {
  const Recipe& gg = recipe("nvfp4.ggml");
  // a/6 = 1.0625, the tie between 1.0 and 1.125: ggml rounds half up (0x39),
  // torchao's RNE cast keeps 1.0 (0x38).
  EXPECT_EQ(quantize(gg, 0.0f, block_of({6.375f})).scale, 0x39);
  EXPECT_EQ(quantize(recipe("nvfp4.torchao_1l"), 0.0f, block_of({6.375f})).scale, 0x38);
  // a/6 = 2.5 * 2^-9, a subnormal tie: ggml 0x03, ModelOpt's RNE cast 0x02.
  EXPECT_EQ(quantize(gg, 0.0f, block_of({15 * 0x1p-9f})).scale, 0x03);
  EXPECT_EQ(quantize(recipe("nvfp4.modelopt"), 2688.0f, block_of({15 * 0x1p-9f})).scale, 0x02);
  // a/6 = 1.9375 ties 1.875 / 2.0: half up carries into the next binade.
  EXPECT_EQ(quantize(gg, 0.0f, block_of({11.625f})).scale, 0x40);
  // Clamp at 448, no NaN code.
  EXPECT_EQ(quantize(gg, 0.0f, block_of({6000.0f})).scale, 0x7E);
  EXPECT_EQ(quantize(gg, 0.0f, block_of({1e30f})).scale, 0x7E);
  // Argmin: -0.0 and negative values that round to zero give code 0.
  const Quantized q = quantize(gg, 0.0f, block_of({12, -0.0f, -0.5f, -1.0f, -1.5f}));
  expect_block(q, 0x40, codes_of({0x7, 0x0, 0x0, 0x9, 0x9}), "argmin");
  // ggml's decoder maps scale 0x7F to 0.
  Block out{};
  const Codes c = codes_of({0x7, 0xF, 0x1});
  ref::nvfp4_decode_block(gg, ref::nvfp4_tensor_scale(gg, 0.0f), 0x7F, c.data(), out.data());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], 0.0f);
}

TEST(Nvfp4ModeloptFq, FakeQuantOnly) {
  const Recipe& r = recipe("nvfp4.modelopt_fq");
  const auto ts = ref::nvfp4_tensor_scale(r, 2688.0f);
  Block x = block_of({1});
  Codes c{};
  EXPECT_THROW(ref::nvfp4_quantize_block(r, Rounding::rne, ts, 1.0f, x.data(), c.data()), InputError);
  EXPECT_THROW(ref::nvfp4_decode_block(r, ts, 0x38, c.data(), x.data()), InputError);
  // d < 1e-5 -> 1.0: with G = 2688 * 2^-20 (S_dec = 2^-20) a block of amax
  // 6 * 2^-20 has e4m3 scale 1.0 and d = 2^-20 < 1e-5, so it is quantized at
  // d = 1.0 (to zeros), where the export path keeps d = 2^-20.
  const float g_small = 2688.0f * 0x1p-20f;
  const Block small = block_of({6 * 0x1p-20f, -3 * 0x1p-20f});
  const Block fq_small = fake_quant(r, g_small, small);
  EXPECT_FLOAT_BITS(fq_small[0], 0.0f);
  EXPECT_FLOAT_BITS(fq_small[1], -0.0f);
  const Quantized export_small = quantize(recipe("nvfp4.modelopt"), g_small, small);
  expect_block(export_small, 0x38, codes_of({0x7, 0xD}), "modelopt export keeps d");
  EXPECT_FLOAT_BITS(export_small.decoded[0], small[0]);
  // A scale that rounds to 0 (amax 6e-5, S_dec = 1: e4m3(1e-5) = 0) -> d = 1.0.
  const Block tiny = fake_quant(r, 2688.0f, block_of({6e-5f, -3e-5f}));
  EXPECT_FLOAT_BITS(tiny[0], 0.0f);
  EXPECT_FLOAT_BITS(tiny[1], -0.0f);
  // d is rounded once: fp32(e4m3 * S_dec), then x^ = q * d.
  const Block x5 = block_of({12, 5, -1.5f, 0.5f, 7, 10, -0.25f, 3});
  const Block y5 = fake_quant(r, 1000.0f, x5);
  const float d = 5.5f * (1000.0f / 2688.0f);
  const float q5[8] = {6, 2, -0.5f, 0, 3, 4, -0.0f, 1.5f};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_BITS(y5[i], q5[i] * d);
}

// =========================================================== nvfp4.ggml ==

// Every fp32 in [2^-12, 512] plus NaN, zeros, negatives and the subnormals'
// edges; tests/long sweeps all 2^32 bit patterns.
TEST(Nvfp4Ggml, Fp32ToUe4m3MatchesOracleOnEveryFp32In2pm12To512) {
  int64_t mismatches = 0;
  for (uint32_t b = 0x39800000u; b <= 0x44000000u; ++b) {
    const float x = std::bit_cast<float>(b);
    const uint8_t got = ref::ggml_fp32_to_ue4m3(x);
    const uint8_t want = oracle::oracle_ggml_ue4m3(x);
    if (got != want && ++mismatches <= 5) ADD_FAILURE() << std::hex << "x 0x" << b << ": 0x" << int(got) << " vs 0x" << int(want);
  }
  EXPECT_EQ(mismatches, 0);
  for (float x : {0.0f, -0.0f, -1.0f, -kInf, kNaN, -kNaN, 0x1p-149f, 0x1p-126f, 1e30f, kInf})
    EXPECT_EQ(ref::ggml_fp32_to_ue4m3(x), oracle::oracle_ggml_ue4m3(x)) << x;
}

TEST(Nvfp4Ggml, Fp32ToUe4m3PinnedCases) {
  // Saturation by exponent: every x >= 256 gives 0x7E (RNE would give 0x78 for 268.4).
  EXPECT_EQ(ref::ggml_fp32_to_ue4m3(256.0f), 0x7E);
  EXPECT_EQ(ref::ggml_fp32_to_ue4m3(268.4f), 0x7E);
  EXPECT_EQ(ref::ggml_fp32_to_ue4m3(std::nextafter(256.0f, 0.0f)), 0x7E);  // 255.99998: carry into exponent 15
  EXPECT_EQ(ref::ggml_fp32_to_ue4m3(239.0f), 0x77);                         // 240 - 1: stays 1.875 * 2^7
  // Subnormal clamp: [7.5, 8) * 2^-9 stays 0x07 (RNE would round up to 0x08).
  EXPECT_EQ(ref::ggml_fp32_to_ue4m3(7.75f * 0x1p-9f), 0x07);
  EXPECT_EQ(ref::ggml_fp32_to_ue4m3(std::nextafter(0x1p-6f, 0.0f)), 0x07);
  // Float literals: x*512 = 0.5 - 2^-25 sums to 1.0f in fp32 -> code 1 (a
  // double sum, floor(0.99999997), would give 0).
  EXPECT_EQ(ref::ggml_fp32_to_ue4m3((0.5f - 0x1p-25f) / 512.0f), 0x01);
  EXPECT_EQ(ref::ggml_fp32_to_ue4m3(0x1p-10f), 0x01);  // 0.5 + 0.5 = 1: half up
  // Pinned block (issue case): amax 0x44c94d00 (1610.41) -> a/6 = 268.4 -> 0x7E.
  const Quantized q = quantize(recipe("nvfp4.ggml"), 0.0f, block_of({std::bit_cast<float>(0x44c94d00u)}));
  EXPECT_EQ(q.scale, 0x7E);
}

TEST(Nvfp4Ggml, Ue4m3DecoderOnEveryCode) {
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    // Oracle: bit 7 ignored, 0x00 and 0x7F give 0, 0xFF reads as exponent 15
    // mantissa 7 = 480; halved.
    double v = 0.0;
    if (c == 0xFF) {
      v = 480.0;
    } else if (c != 0 && c != 0x7F) {
      v = oracle::oracle_decode(oracle::ue4m3(), static_cast<uint32_t>(c & 0x7F));
    }
    EXPECT_FLOAT_BITS(ref::ggml_ue4m3_to_fp32(static_cast<uint8_t>(c)), static_cast<float>(v * 0.5));
  }
}

TEST(Nvfp4Ggml, DequantizeRowGivesPositiveZeroFor0x8) {
  const Recipe& gg = recipe("nvfp4.ggml");
  const auto ts = ref::nvfp4_tensor_scale(gg, 0.0f);
  Codes c{};
  for (int i = 0; i < 16; ++i) c[i] = static_cast<uint8_t>(i);
  Block out{};
  ref::nvfp4_decode_block(gg, ts, 0x40, c.data(), out.data());  // s = 2: d = 1
  const float kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_BITS(out[i], kv[i]);
  EXPECT_EQ(bits(out[8]), 0u);  // +0, not -0
  // Scale 0xFF decodes as 240 (d), 0x7F as 0.
  ref::nvfp4_decode_block(gg, ts, 0xFF, c.data(), out.data());
  EXPECT_FLOAT_BITS(out[7], 12.0f * 240.0f);
  ref::nvfp4_decode_block(gg, ts, 0x7F, c.data(), out.data());
  EXPECT_FLOAT_BITS(out[7], 0.0f);
}

// ===================================================== nvfp4.cutlass_epi ==

// gett.hpp's NaN-propagating block max and acc_scale minimum: a block whose
// amax is NaN gets scale 0x7F and code 0x7 in every lane, zeros and
// negatives included.
TEST(Nvfp4CutlassEpi, NaNBlockIsCode7InEveryLane) {
  const Recipe& r = recipe("nvfp4.cutlass_epi");
  const Quantized q = quantize(r, 2688.0f, block_of({1.0f, kNaN, -2.0f, 0.0f, -0.0f, -6.0f}));
  EXPECT_EQ(q.scale, 0x7F);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(q.codes[i], 0x7) << i;
  // A block with no NaN keeps signed codes: s = e4m3(2 * RN16) = 0x2B
  // (0.34375), -2 * (1/0.34375) = -5.82 -> 0xF.
  const Quantized finite = quantize(r, 2688.0f, block_of({1.0f, -2.0f}));
  EXPECT_EQ(finite.scale, 0x2B);
  EXPECT_EQ(finite.codes[1], 0xF);
}

// ================================================== dequantize orders ====

// TE's dequantize kernel: x = q * fp32(fp32(s * G) * fp32(1/(6*M))).
TEST(Nvfp4Dequantize, TransformerEngineUsesTheTensorAmax) {
  const Recipe& te = recipe("nvfp4.te");
  const float g = 1000.0f;
  const auto ts = ref::nvfp4_tensor_scale(te, g);
  Codes c = codes_of({0x7, 0x5, 0x3, 0xF, 0x8});
  Block out{};
  ref::nvfp4_decode_block(te, ts, 0x4B, c.data(), out.data());  // s = 5.5
  const float factor = (5.5f * g) * (1.0f / 2688.0f);
  EXPECT_FLOAT_BITS(out[0], 6.0f * factor);
  EXPECT_FLOAT_BITS(out[1], 3.0f * factor);
  EXPECT_FLOAT_BITS(out[2], 1.5f * factor);
  EXPECT_FLOAT_BITS(out[3], -6.0f * factor);
  EXPECT_FLOAT_BITS(out[4], -0.0f);
  // It differs from fp32(fp32(q * s) * S_dec) in the last bit here.
  EXPECT_NE(bits(out[0]), bits((6.0f * 5.5f) * ts.decode));
  // 4over6 (M = 256): fp32(1/1536).
  const Recipe& r46 = recipe("nvfp4.te_4over6");
  ref::nvfp4_decode_block(r46, ref::nvfp4_tensor_scale(r46, g), 0x4B, c.data(), out.data());
  EXPECT_FLOAT_BITS(out[0], 6.0f * ((5.5f * g) * (1.0f / 1536.0f)));
}

// torchao: x = q * fp32(S_dec * s). Pinned: G = 5000, code 5, scale 0x19
// (0.0703125) -> 0x3ec8e492 where fp32(fp32(3 * s) * S_dec) is 0x3ec8e493;
// G = 1e6, code 7, scale 0x7E -> 999999.94.
TEST(Nvfp4Dequantize, TorchaoMultipliesTheScalesFirst) {
  for (auto id : {"nvfp4.torchao", "nvfp4.torchao_cpu"}) {
    SCOPED_TRACE(id);
    const Recipe& r = recipe(id);
    Codes c = codes_of({0x5, 0x8});
    Block out{};
    ref::nvfp4_decode_block(r, ref::nvfp4_tensor_scale(r, 5000.0f), 0x19, c.data(), out.data());
    EXPECT_EQ(bits(out[0]), 0x3ec8e492u);
    EXPECT_FLOAT_BITS(out[1], -0.0f);  // torchao's bit-level unpack keeps the sign
    c = codes_of({0x7});
    ref::nvfp4_decode_block(r, ref::nvfp4_tensor_scale(r, 1e6f), 0x7E, c.data(), out.data());
    EXPECT_FLOAT_BITS(out[0], 999999.94f);
    EXPECT_EQ(bits(out[0]), 0x497423ffu);
  }
  // Single level: q * s.
  const Recipe& r1 = recipe("nvfp4.torchao_1l");
  Codes c = codes_of({0x5});
  Block out{};
  ref::nvfp4_decode_block(r1, ref::nvfp4_tensor_scale(r1, 0.0f), 0x19, c.data(), out.data());
  EXPECT_FLOAT_BITS(out[0], 3.0f * 0.0703125f);
  // Fake quant follows the same order: the block max of G = 1e6 gets 0x7E, code 7.
  const Block fq = fake_quant(recipe("nvfp4.torchao_cpu"), 1e6f, block_of({1e6f}));
  EXPECT_EQ(bits(fq[0]), 0x497423ffu);
}

// ModelOpt: x = table(q) * fp32(s * S_dec), the table's 0x8 entry is +0.
TEST(Nvfp4Dequantize, ModeloptMultipliesTheScalesFirstAndDecodesPlusZero) {
  for (auto id : {"nvfp4.modelopt", "nvfp4.modelopt_cpu"}) {
    SCOPED_TRACE(id);
    const Recipe& r = recipe(id);
    Codes c = codes_of({0x7, 0x8, 0xD});
    Block out{};
    ref::nvfp4_decode_block(r, ref::nvfp4_tensor_scale(r, 1e6f), 0x7E, c.data(), out.data());
    EXPECT_EQ(bits(out[0]), 0x497423ffu);
    EXPECT_EQ(bits(out[1]), 0u);
    const float f = 448.0f * ref::nvfp4_tensor_scale(r, 1e6f).decode;
    EXPECT_FLOAT_BITS(out[2], -3.0f * f);
    c = codes_of({0x5});
    ref::nvfp4_decode_block(r, ref::nvfp4_tensor_scale(r, 5000.0f), 0x19, c.data(), out.data());
    EXPECT_EQ(bits(out[0]), 0x3ec8e492u);
  }
}

// compressed-tensors: x = q * fp32(s / S_enc); its zero zero-point turns a
// -0.0 input into code 0x0.
TEST(Nvfp4Dequantize, CompressedTensorsDividesTheScaleByTheGlobalScale) {
  for (auto id : {"nvfp4.ct", "nvfp4.ct_cuda", "nvfp4.ct_legacy", "nvfp4.ct_legacy_cpu"}) {
    SCOPED_TRACE(id);
    const Recipe& r = recipe(id);
    const auto ts = ref::nvfp4_tensor_scale(r, 1000.0f);
    Codes c = codes_of({0x7, 0x5, 0x8});
    Block out{};
    ref::nvfp4_decode_block(r, ts, 0x4B, c.data(), out.data());
    const float f = 5.5f / ts.encode;
    EXPECT_FLOAT_BITS(out[0], 6.0f * f);
    EXPECT_FLOAT_BITS(out[1], 3.0f * f);
    EXPECT_FLOAT_BITS(out[2], -0.0f);
    // -0.0 in, code 0x0 out; a negative value that rounds to zero keeps 0x8.
    const Quantized q = quantize(r, 2688.0f, block_of({6.0f, -0.0f, -0.1f}));
    EXPECT_EQ(q.codes, codes_of({0x7, 0x0, 0x8}));
  }
}

// compressed-tensors' triton path rounds x/d to bf16 before the E2M1 table:
// 2.4999998 (below the tie 2.5 -> 2) becomes bf16 2.5, a tie -> 2; 3.4999998
// -> bf16 3.5 -> 4 where fp32 gives 3.
TEST(Nvfp4Ct, TritonPathRoundsTheQuotientToBf16) {
  const float below = std::nextafter(3.5f, 0.0f);
  const Block x = block_of({6.0f, below});
  EXPECT_EQ(quantize(recipe("nvfp4.ct"), 2688.0f, x).codes[1], 0x5);
  EXPECT_EQ(quantize(recipe("nvfp4.ct_cuda"), 2688.0f, x).codes[1], 0x6);
}

// ModelOpt's triton fake quant: a NaN or Inf per-tensor scale makes every
// block's d = 1.0; an all-NaN block has amax NaN (tl.max), p = 448.
TEST(Nvfp4ModeloptFq, NaNAndInfFallbacks) {
  const Recipe& r = recipe("nvfp4.modelopt_fq");
  const Block x = block_of({0.3f, -1.2f, 2.6f, 5.0f});
  for (float g : {kNaN, kInf}) {
    SCOPED_TRACE(g);
    const Block fq = fake_quant(r, g, x);
    EXPECT_FLOAT_BITS(fq[0], 0.5f);
    EXPECT_FLOAT_BITS(fq[1], -1.0f);
    EXPECT_FLOAT_BITS(fq[2], 3.0f);
    EXPECT_FLOAT_BITS(fq[3], 4.0f);
  }
  // The tensor amax propagates NaN (ModelOpt's reduce_amax).
  const std::vector<float> t = {1.0f, kNaN};
  EXPECT_TRUE(std::isnan(ref::nvfp4_global_amax(r, t)));
  // All-NaN block, G = 2688: d = 448, each NaN lane -> -6 * 448.
  Block nan_block;
  nan_block.fill(kNaN);
  EXPECT_TRUE(std::isnan(ref::nvfp4_block_amax(r, nan_block.data(), 16)));
  const Block fq = fake_quant(r, 2688.0f, nan_block);
  for (float v : fq) EXPECT_FLOAT_BITS(v, -6.0f * 448.0f);
}

// ========================================================== properties ==

// Non-finite and signed-zero inputs, per recipe (docs/spec/nvfp4.md §1, §10).
TEST(Nvfp4Properties, NegativeZero) {
  const Block x = block_of({1.0f, -0.0f});
  for (const Recipe& r : nvfp4_recipes()) {
    SCOPED_TRACE(std::string(r.id));
    // ModelOpt's cast takes the sign from x < 0, ggml's argmin gives index 0,
    // compressed-tensors adds its zero zero-point (-0 + 0 = +0).
    const bool positive_zero = r.nv.rule == NvScaleRule::modelopt || r.nv.rule == NvScaleRule::ggml ||
                               r.nv.rule == NvScaleRule::ct || r.fake_quant_only;
    if (r.fake_quant_only) {
      EXPECT_FLOAT_BITS(fake_quant(r, 2688.0f, x)[1], 0.0f);
      continue;
    }
    const Quantized q = quantize(r, 2688.0f, x);
    EXPECT_EQ(q.codes[1], positive_zero ? 0x0 : 0x8);
    EXPECT_FLOAT_BITS(q.decoded[1], positive_zero ? 0.0f : -0.0f);
  }
  // A block of -0.0 only: the zero-block scale of each library (§4.8), and the
  // zero sign of each element cast.
  Block nz;
  nz.fill(-0.0f);
  for (const Recipe& r : nvfp4_recipes()) {
    if (r.fake_quant_only) continue;
    SCOPED_TRACE(std::string(r.id));
    const Quantized q = quantize(r, 2688.0f, nz);
    const Quantized z = quantize(r, 2688.0f, Block{});
    EXPECT_EQ(q.scale, z.scale);
    const bool positive_zero =
        r.nv.rule == NvScaleRule::modelopt || r.nv.rule == NvScaleRule::ggml || r.nv.rule == NvScaleRule::ct;
    for (int i = 0; i < 16; ++i) EXPECT_EQ(q.codes[i], positive_zero ? 0x0 : 0x8);
  }
}

TEST(Nvfp4Properties, NaNElement) {
  const Block x = block_of({1.0f, kNaN, 2.0f});
  const Block clean = block_of({1.0f, 0.0f, 2.0f});
  for (const Recipe& r : nvfp4_recipes()) {
    SCOPED_TRACE(std::string(r.id));
    if (r.fake_quant_only) {
      // Triton's max drops the NaN; the NaN lane becomes -6*d (§10, [derived]).
      const Block fq = fake_quant(r, 2688.0f, x);
      const Block fc = fake_quant(r, 2688.0f, clean);
      const float d = ue4m3_decode(ue4m3_encode(2.0f / 6.0f, Rounding::rne, Overflow::saturate)) * 1.0f;
      EXPECT_FLOAT_BITS(fq[0], fc[0]);
      EXPECT_FLOAT_BITS(fq[1], -6.0f * d);
      EXPECT_FLOAT_BITS(fq[2], fc[2]);
      continue;
    }
    const Quantized q = quantize(r, 2688.0f, x);
    if (r.nv.amax_nan == NvAmaxNan::propagate) {
      // torch.amax / CUTLASS host: NaN amax -> scale 0x7F (NaN) -> NaN block;
      // every scaled element is NaN. CUTLASS's E2M1 conversion and ModelOpt's
      // table give 0x7, torchao's integer bit cast of the canonical NaN 0x4,
      // compressed-tensors' packer magnitude index 0.
      EXPECT_EQ(q.scale, 0x7F);
      for (float v : q.decoded) EXPECT_TRUE(std::isnan(v));
      const bool torchao = r.nv.rule == NvScaleRule::torchao || r.nv.rule == NvScaleRule::torchao_1l;
      const uint8_t nan_code = r.nv.rule == NvScaleRule::ct ? 0x0 : torchao ? 0x4 : 0x7;
      for (int i = 0; i < 16; ++i) EXPECT_EQ(q.codes[i], nan_code) << i;
    } else {
      // fmaxf-style amax: the block is scaled from its other elements.
      const Quantized c = quantize(r, 2688.0f, clean);
      EXPECT_EQ(q.scale, c.scale);
      EXPECT_EQ(q.codes[0], c.codes[0]);
      EXPECT_EQ(q.codes[2], c.codes[2]);
      EXPECT_EQ(q.codes[1], r.nv.rule == NvScaleRule::ggml ? 0x0 : 0x7);  // ggml: every comparison false
    }
  }
}

TEST(Nvfp4Properties, InfElement) {
  const Block x = block_of({1.0f, kInf, -2.0f});
  for (const Recipe& r : nvfp4_recipes()) {
    SCOPED_TRACE(std::string(r.id));
    if (r.fake_quant_only) {
      const Block fq = fake_quant(r, 2688.0f, x);  // d = 448
      EXPECT_FLOAT_BITS(fq[0], 0.0f);
      EXPECT_FLOAT_BITS(fq[1], 6.0f * 448.0f);
      EXPECT_FLOAT_BITS(fq[2], -0.0f);
      continue;
    }
    const Quantized q = quantize(r, 2688.0f, x);
    switch (r.nv.rule) {
      case NvScaleRule::modelopt:
        // Inf/6 through PyTorch's non-saturating cast -> NaN scale.
        EXPECT_EQ(q.scale, 0x7F);
        for (int i = 0; i < 16; ++i) EXPECT_EQ(q.codes[i], 0x7) << i;
        break;
      case NvScaleRule::ggml:
        // Scale clamps to 448; every error against Inf is Inf -> code 0.
        EXPECT_EQ(q.scale, 0x7E);
        EXPECT_EQ(q.codes, Codes{});
        break;
      default:
        // Satfinite / clamp to 448; Inf -> +6; the rest underflow.
        EXPECT_EQ(q.scale, 0x7E);
        EXPECT_EQ(q.codes, codes_of({0x0, 0x7, 0x8}));
        break;
    }
  }
}

TEST(Nvfp4Properties, SubnormalScales) {
  // EX-N4b's block in every recipe.
  const Block x = block_of({0.06f, -0.02f, 0.01f});
  struct Case {
    const char* id;
    uint8_t scale;
    Codes codes;
  };
  const Case cases[] = {
      {"nvfp4.te", 0x05, codes_of({0x7, 0xC, 0x2})},          {"nvfp4.te_2d", 0x05, codes_of({0x7, 0xC, 0x2})},
      {"nvfp4.te_4over6", 0x03, codes_of({0x7, 0xC, 0x2})},   {"nvfp4.torchao", 0x08, codes_of({0x6, 0xB, 0x1})},
      {"nvfp4.torchao_1l", 0x08, codes_of({0x6, 0xB, 0x1})},  {"nvfp4.modelopt", 0x05, codes_of({0x7, 0xC, 0x2})},
      {"nvfp4.ct", 0x05, codes_of({0x7, 0xC, 0x2})},          {"nvfp4.cutlass_epi", 0x05, codes_of({0x7, 0xC, 0x2})},
      {"nvfp4.cudnn", 0x06, codes_of({0x7, 0xB, 0x2})},       {"nvfp4.ggml", 0x05, codes_of({0x7, 0xC, 0x2})},
  };
  for (const Case& c : cases) expect_block(quantize(recipe(c.id), 2688.0f, x), c.scale, c.codes, c.id);
  // ModelOpt's fake quant keeps the subnormal scale too (d = 0.009765625 > 1e-5).
  const Block fq = fake_quant(recipe("nvfp4.modelopt_fq"), 2688.0f, x);
  EXPECT_FLOAT_BITS(fq[0], 0.05859375f);
  EXPECT_FLOAT_BITS(fq[1], -0.01953125f);
  EXPECT_FLOAT_BITS(fq[2], 0.009765625f);
}

// Random blocks spread over ~50 binades, with global amaxes from the block's
// own amax up to 2^24 times larger (scales down to subnormal and zero) and a
// few below it (saturating scales).
struct RandomCase {
  Block x;
  float global_amax;
};

std::vector<RandomCase> random_cases(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> center(-20, 20), spread(0, 12), ratio(0, 24), kind(0, 15);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::vector<RandomCase> cases(n);
  for (RandomCase& c : cases) {
    const int e0 = center(rng);
    float amax = 0.0f;
    for (float& v : c.x) {
      const int k = kind(rng);
      if (k == 0) {
        v = 0.0f;
      } else {
        const int below = spread(rng);  // one draw per statement: argument order is the compiler's
        v = std::ldexp(mant(rng), e0 - below);
        if (k == 1) v = std::ldexp(std::round(std::ldexp(v, 3 - e0)), e0 - 3);  // coarse grid: many ties
      }
      if (rng() & 1) v = -v;
      amax = std::fmax(amax, std::fabs(v));
    }
    const int k = kind(rng);
    if (k == 0)
      c.global_amax = amax;
    else if (k == 1)
      c.global_amax = std::ldexp(amax, -1 - static_cast<int>(rng() % 3));
    else {
      const int e = ratio(rng);  // one draw per statement: argument order is the compiler's
      c.global_amax = std::ldexp(amax * mant(rng), e);
    }
  }
  return cases;
}

TEST(Nvfp4Properties, DecodeOfQuantizeEqualsFakeQuant) {
  const auto cases = random_cases(4000, 0x4E56F4);
  for (const Recipe& r : nvfp4_recipes()) {
    if (r.fake_quant_only) continue;
    SCOPED_TRACE(std::string(r.id));
    int failures = 0;
    for (const RandomCase& c : cases) {
      const Quantized q = quantize(r, c.global_amax, c.x);
      const Block fq = fake_quant(r, c.global_amax, c.x);
      for (int i = 0; i < 16 && failures < 10; ++i) {
        if (!same_float(q.decoded[i], fq[i])) {
          ++failures;
          ADD_FAILURE() << "x = " << c.x[i] << " G = " << c.global_amax;
        }
      }
      for (uint8_t code : q.codes) EXPECT_LT(code, 16);
      // Finite inputs never produce a NaN scale, except where the library's
      // arithmetic overflows on purpose: ModelOpt's non-saturating cast when
      // G < a_b pushes p above 464.
      if (!(r.nv.rule == NvScaleRule::modelopt && c.global_amax < q.block_amax)) {
        EXPECT_NE(q.scale, 0x7F);
      }
    }
  }
}

TEST(Nvfp4Properties, SignSymmetry) {
  const auto cases = random_cases(2000, 0x5167);
  for (const Recipe& r : nvfp4_recipes()) {
    SCOPED_TRACE(std::string(r.id));
    for (const RandomCase& c : cases) {
      Block neg;
      for (int i = 0; i < 16; ++i) neg[i] = -c.x[i];
      if (r.fake_quant_only) {
        const Block p = fake_quant(r, c.global_amax, c.x), n = fake_quant(r, c.global_amax, neg);
        for (int i = 0; i < 16; ++i) {
          if (c.x[i] == 0.0f)
            EXPECT_FLOAT_BITS(n[i], 0.0f);  // where(x >= 0, q, -q): -0 >= 0
          else
            EXPECT_FLOAT_BITS(n[i], -p[i]);
        }
        continue;
      }
      const Quantized p = quantize(r, c.global_amax, c.x), n = quantize(r, c.global_amax, neg);
      ASSERT_EQ(p.scale, n.scale);
      for (int i = 0; i < 16; ++i) {
        uint8_t expected = p.codes[i] ^ 0x8;
        // ModelOpt's sign is y < 0 (and 0/0 -> 0x7); ggml's argmin never picks -0.
        // A NaN scale (non-saturating cast, G < a_b) makes every y NaN -> 0x7.
        if (r.nv.rule == NvScaleRule::modelopt && (c.x[i] == 0.0f || p.scale == 0x7F)) expected = p.codes[i];
        if (r.nv.rule == NvScaleRule::ggml && (p.codes[i] & 0x7) == 0) expected = 0x0;
        // compressed-tensors adds its zero zero-point: -0 -> +0 (only an exact zero quotient).
        if (r.nv.rule == NvScaleRule::ct && c.x[i] == 0.0f) expected = p.codes[i];
        ASSERT_EQ(n.codes[i], expected) << "x = " << c.x[i] << " G = " << c.global_amax;
        EXPECT_TRUE(same_float(n.decoded[i], -p.decoded[i]) || (n.decoded[i] == 0.0f && p.decoded[i] == 0.0f));
      }
    }
  }
}

// ============================================== independent oracle (TE) ==

// The E4M3 value of codes 0x00..0x7E from the format definition (bias 7,
// subnormals m * 2^-9), not from the codec.
double e4m3_value(int code) {
  const int e = code >> 3, m = code & 7;
  return e == 0 ? std::ldexp(m, -9) : std::ldexp(1.0 + m / 8.0, e - 7);
}

// Nearest E4M3 code to p >= 0 by search over all finite codes; ties go to the
// even code; values above 448 go to 448 (satfinite).
int oracle_e4m3(double p) {
  if (std::isnan(p)) return 0x7F;
  if (p >= 448.0) return 0x7E;  // satfinite (and keeps the search below free of absorption)
  int best = 0;
  double best_err = std::fabs(p - e4m3_value(0));
  for (int c = 1; c <= 0x7E; ++c) {
    const double err = std::fabs(p - e4m3_value(c));
    if (err < best_err || (err == best_err && c % 2 == 0)) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

constexpr double kE2M1Magnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

// Nearest E2M1 code to y by table search, ties to the even code, sign from
// the sign bit, NaN -> 0x7 (CUDA satfinite).
int oracle_e2m1(double y) {
  if (std::isnan(y)) return 0x7;
  const double a = std::fabs(y);
  int best = 0;
  if (a > 6.0) {
    best = 7;  // saturation (and no absorption in a - v for huge a)
  } else {
    double best_err = a;
    for (int c = 1; c < 8; ++c) {
      const double err = std::fabs(a - kE2M1Magnitudes[c]);
      if (err < best_err || (err == best_err && c % 2 == 0)) {
        best = c;
        best_err = err;
      }
    }
  }
  return best | (std::signbit(y) ? 8 : 0);
}

bool is_e2m1_tie(double a) {
  for (double t : {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0})
    if (std::fabs(a) == t) return true;
  return false;
}

TEST(Nvfp4Oracle, TeMatchesTableSearch) {
  const Recipe& r = recipe("nvfp4.te");
  const auto cases = random_cases(20000, 0x0AC1E);
  int tie_landings = 0, checked = 0, zero_scales = 0, subnormal_scales = 0, saturated_scales = 0;
  for (const RandomCase& c : cases) {
    const Quantized q = quantize(r, c.global_amax, c.x);
    // §4.1 step 1 from the spec's words.
    float s_enc = 2688.0f / c.global_amax;
    if (std::isinf(s_enc)) s_enc = kFltMax;
    if (c.global_amax == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
    EXPECT_FLOAT_BITS(q.ts.encode, s_enc);
    EXPECT_FLOAT_BITS(q.ts.decode, 1.0f / s_enc);
    double a_b = 0;
    for (float v : c.x) a_b = std::max(a_b, std::fabs(static_cast<double>(v)));
    // Scale: nearest E4M3 to p = fp32(a_b * fp32(S_enc * RN16)).
    const float m = static_cast<float>(static_cast<double>(s_enc) * kRN16);
    const float p = static_cast<float>(a_b * m);
    const int s = oracle_e4m3(p);
    ASSERT_EQ(q.scale, s) << "a_b = " << a_b << " G = " << c.global_amax;
    zero_scales += s == 0;
    subnormal_scales += s > 0 && s < 8;
    saturated_scales += s == 0x7E;
    // Elements: nearest E2M1 to the product x * enc_b. TE rounds the product
    // to fp32 first (mul.f32x2); when that rounding lands exactly on a tie
    // the exact product may lie on the other side, so the exact check skips
    // those cases (counted).
    const double s_dec = static_cast<double>(1.0f / s_enc);
    const float s_times_dec = static_cast<float>(e4m3_value(s) * s_dec);
    const double enc = std::min(static_cast<double>(1.0f / s_times_dec), static_cast<double>(kFltMax));
    for (int i = 0; i < 16; ++i) {
      const double exact = static_cast<double>(c.x[i]) * enc;  // exact: 24 x 24 bits
      const float y = static_cast<float>(exact);
      ASSERT_EQ(q.codes[i], oracle_e2m1(y)) << "x = " << c.x[i] << " enc = " << enc;
      if (is_e2m1_tie(y) && exact != static_cast<double>(y)) {
        ++tie_landings;
      } else {
        ASSERT_EQ(q.codes[i] & 7, oracle_e2m1(exact) & 7) << "x = " << c.x[i] << " enc = " << enc;
      }
      ++checked;
    }
  }
  // The random set reaches every scale regime.
  EXPECT_GT(zero_scales, 100);
  EXPECT_GT(subnormal_scales, 100);
  EXPECT_GT(saturated_scales, 100);
  RecordProperty("elements", checked);
  RecordProperty("fp32_tie_landings", tie_landings);
}

// TE rounds x * enc_b to fp32 before the E2M1 conversion (mul.f32x2, §4.1
// step 4). Here the exact product is 5.0000000112 (nearest E2M1: 6), but the
// fp32 product is the tie 5.0, which goes to 4 (code 0x6).
TEST(Nvfp4Oracle, TeRoundsTheProductToFp32First) {
  const float g = 0x1.1388fp+0f;
  const float x1 = 0x1.cb399p-1f;
  const Quantized q = quantize(recipe("nvfp4.te"), g, block_of({g, x1}));
  EXPECT_EQ(q.scale, 0x7E);
  const float enc = std::fmin(1.0f / (448.0f * q.ts.decode), kFltMax);
  EXPECT_FLOAT_BITS(enc, 0x1.64c66ep+2f);
  EXPECT_FLOAT_BITS(x1 * enc, 5.0f);
  EXPECT_GT(static_cast<double>(x1) * enc, 5.0);
  EXPECT_EQ(oracle_e2m1(static_cast<double>(x1) * enc), 0x7);
  EXPECT_EQ(q.codes[1], 0x6);
}

}  // namespace
}  // namespace fp4emu
