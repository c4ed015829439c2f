// The tensor driver: recipes registry, axes, tails, packing, options, and the
// identity dequantize(quantize(x)) == fake_quant(x) for every recipe.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::random_wide;
using testing::same_bits;

Tensor random_tensor(std::vector<int64_t> shape, uint64_t seed, bool bf16_exact) {
  std::mt19937_64 rng(seed);
  Tensor t;
  t.shape = std::move(shape);
  t.data.resize(t.numel());
  for (float& v : t.data) {
    v = random_wide(rng);
    if (bf16_exact) v = bf16_rne(v);
  }
  return t;
}

// Transpose of a 2D tensor.
Tensor transpose2d(const Tensor& x) {
  Tensor t;
  t.shape = {x.shape[1], x.shape[0]};
  t.data.resize(x.data.size());
  for (int64_t i = 0; i < x.shape[0]; ++i)
    for (int64_t j = 0; j < x.shape[1]; ++j) t.data[j * x.shape[0] + i] = x.data[i * x.shape[1] + j];
  return t;
}

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  ASSERT_EQ(a.data.size(), b.data.size()) << what;
  for (size_t i = 0; i < a.data.size(); ++i)
    ASSERT_TRUE(same_bits(a.data[i], b.data[i])) << what << " element " << i << ": " << a.data[i] << " vs " << b.data[i];
}

TEST(Recipes, RegistryMatchesDesign) {
  std::map<Format, int> count;
  std::set<std::string_view> ids;
  for (const Recipe& r : all_recipes()) {
    ++count[r.format];
    EXPECT_TRUE(ids.insert(r.id).second) << "duplicate id " << r.id;
    EXPECT_EQ(r.id.substr(0, r.id.find('.')), format_name(r.format)) << r.id;
    EXPECT_FALSE(r.summary.empty()) << r.id;
    EXPECT_FALSE(r.spec_ref.empty()) << r.id;
    EXPECT_TRUE(r.allowed_roundings & rounding_bit(r.element_rounding)) << r.id << ": own rounding not allowed";
  }
  EXPECT_EQ(count[Format::hif4], 7);
  EXPECT_EQ(count[Format::mxfp4], 6);
  EXPECT_EQ(count[Format::nvfp4], 17);  // 11 libraries; CPU and release variants (docs/formats.md)
  EXPECT_EQ(default_recipe(Format::hif4).id, "hif4.v14");
  EXPECT_EQ(default_recipe(Format::mxfp4).id, "mxfp4.ocp");
  EXPECT_EQ(default_recipe(Format::nvfp4).id, "nvfp4.te");
  for (Format f : {Format::hif4, Format::mxfp4, Format::nvfp4})
    EXPECT_EQ(std::count_if(all_recipes().begin(), all_recipes().end(),
                            [f](const Recipe& r) { return r.format == f && r.is_default; }),
              1);
}

// Shapes whose block axis is a multiple of 64 (so recipes that reject tails
// accept them) and shapes with ragged tails for the others.
TEST(Driver, DequantizeOfQuantizeEqualsFakeQuantForEveryRecipe) {
  uint64_t seed = 1;
  for (const Recipe& r : all_recipes()) {
    if (r.fake_quant_only) continue;
    const bool pads = r.default_tail == TailPolicy::pad;
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{3, 128}, {2, 64, 3}, {5, 77}, {3, 4, 50}}) {
      for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
        if (!pads && shape[axis] % 64 != 0) continue;
        const Tensor x = random_tensor(shape, seed++, r.bf16_input_only);
        QuantOptions o;
        o.recipe = std::string(r.id);
        o.axis = axis;
        const PackedTensor p = quantize(x, o);
        expect_same(dequantize(p), fake_quant(x, o), fmt::format("{} axis {}", r.id, axis));
      }
    }
  }
}

TEST(Driver, AxisIsATransposeOfTheLastAxis) {
  for (const char* id : {"hif4.v14", "mxfp4.ocp", "nvfp4.te", "nvfp4.te_2d"}) {
    const Tensor x = random_tensor({96, 70}, 7, false);
    QuantOptions along0;
    along0.recipe = id;
    along0.axis = 0;
    QuantOptions along_last = along0;
    along_last.axis = -1;
    expect_same(fake_quant(x, along0), transpose2d(fake_quant(transpose2d(x), along_last)), id);
  }
}

TEST(Driver, PadTailEqualsExplicitZeroPadding) {
  for (const char* id : {"hif4.v14", "mxfp4.ocp", "nvfp4.te"}) {
    for (int64_t len : {1, 15, 17, 33, 63, 65, 100}) {
      const Tensor x = random_tensor({3, len}, 100 + len, false);
      const int64_t padded = (len + 63) / 64 * 64;
      Tensor xp;
      xp.shape = {3, padded};
      xp.data.assign(3 * padded, 0.0f);
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t k = 0; k < len; ++k) xp.data[r * padded + k] = x.data[r * len + k];
      QuantOptions o;
      o.recipe = id;
      o.tail = TailPolicy::pad;
      if (std::string(id) == "nvfp4.te") o.global_amax = 1000.0f;  // same per-tensor scale both ways
      const Tensor y = fake_quant(x, o);
      const Tensor yp = fake_quant(xp, o);
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t k = 0; k < len; ++k)
          ASSERT_TRUE(same_bits(y.data[r * len + k], yp.data[r * padded + k])) << id << " len " << len;
    }
  }
}

QuantOptions recipe_options(const char* id) {
  QuantOptions o;
  o.recipe = id;
  return o;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

TEST(Driver, RejectsBadOptionsWithClearMessages) {
  const Tensor x = random_tensor({4, 40}, 3, false);
  auto fq = [&](QuantOptions o) { return error_of([&] { fake_quant(x, o); }); };
  QuantOptions o;
  o.recipe = "hif4.nope";
  EXPECT_NE(fq(o).find("unknown recipe 'hif4.nope'"), std::string::npos);
  EXPECT_NE(fq(o).find("mxfp4.ocp"), std::string::npos) << "lists the known recipes";
  o.recipe = "mxfp4";
  o.axis = 2;
  EXPECT_NE(fq(o).find("axis 2 is out of range"), std::string::npos);
  o.axis = -3;
  EXPECT_NE(fq(o).find("axis -3 is out of range"), std::string::npos);
  o.axis = -1;
  o.tail = TailPolicy::error;
  EXPECT_NE(fq(o).find("not a multiple of the mxfp4 block size 32"), std::string::npos);
  o.tail.reset();
  o.rounding = Rounding::rtp;
  EXPECT_NE(fq(o).find("does not define element rounding 'rtp'"), std::string::npos);
  o.rounding.reset();
  o.scale_bit_order = ScaleBitOrder::msb_first;
  EXPECT_NE(fq(o).find("HiF4 scale words only"), std::string::npos);
  o.scale_bit_order.reset();
  o.global_amax = 3.0f;
  EXPECT_NE(fq(o).find("NVFP4 only"), std::string::npos);
  o.recipe = "nvfp4";
  o.global_amax = -1.0f;
  EXPECT_NE(fq(o).find("must be a finite value >= 0"), std::string::npos);
  o.global_amax = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(fq(o).find("must be a finite value >= 0"), std::string::npos);

  Tensor scalar;
  scalar.data = {1.0f};
  EXPECT_NE(error_of([&] { fake_quant(scalar, recipe_options("hif4")); }).find("rank 0"), std::string::npos);
  Tensor empty;
  empty.shape = {3, 0};
  EXPECT_NE(error_of([&] { fake_quant(empty, recipe_options("hif4")); }).find("zero-size"), std::string::npos);
  Tensor wrong;
  wrong.shape = {2, 2};
  wrong.data = {1.0f};
  EXPECT_NE(error_of([&] { fake_quant(wrong, recipe_options("hif4")); }).find("holds 1 values, expected 4"),
            std::string::npos);
}

TEST(Driver, RecipesThatRejectTailsSayHowToFix) {
  const Tensor x = random_tensor({2, 100}, 5, true);
  for (const char* id : {"hif4.amct", "hif4.a6"}) {
    QuantOptions o;
    o.recipe = id;
    const std::string msg = error_of([&] { fake_quant(x, o); });
    EXPECT_NE(msg.find("use --tail pad"), std::string::npos) << msg;
    o.tail = TailPolicy::pad;  // explicit override is honoured
    EXPECT_NO_THROW(fake_quant(x, o)) << id;
  }
}

TEST(Driver, A6RequiresBf16Values) {
  Tensor x = random_tensor({1, 64}, 9, true);
  x.data[17] = 1.0f + std::ldexp(1.0f, -20);  // not a bf16 value
  QuantOptions o;
  o.recipe = "hif4.a6";
  const std::string msg = error_of([&] { quantize(x, o); });
  EXPECT_NE(msg.find("element 17"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
  x.data[17] = 1.0f;
  EXPECT_NO_THROW(quantize(x, o));
}

TEST(Driver, NibbleOrdersHoldTheSameCodes) {
  const Tensor x = random_tensor({4, 64}, 11, false);
  for (const char* id : {"hif4.v14", "mxfp4.ocp", "nvfp4.te"}) {
    QuantOptions o;
    o.recipe = id;
    const PackedTensor low = quantize(x, o);
    o.nibble_order = NibbleOrder::high_first;
    const PackedTensor high = quantize(x, o);
    o.nibble_order = NibbleOrder::split_half;
    const PackedTensor split = quantize(x, o);
    ASSERT_EQ(low.codes.size(), high.codes.size());
    for (size_t i = 0; i < low.codes.size(); ++i)
      ASSERT_EQ(low.codes[i], static_cast<uint8_t>((high.codes[i] << 4) | (high.codes[i] >> 4))) << id;
    // split_half: byte j of a block holds elements j and j + block/2.
    const int block = block_size(low.format);
    auto code_at = [](const PackedTensor& p, int64_t e) { return (p.codes[e / 2] >> ((e & 1) * 4)) & 0xF; };
    for (int64_t e = 0; e < low.padded_len; ++e) {
      const int64_t b = e / block, j = e % block;
      const uint8_t byte = split.codes[b * block / 2 + j % (block / 2)];
      ASSERT_EQ(code_at(low, e), (j < block / 2 ? byte : byte >> 4) & 0xF) << id << " element " << e;
    }
    expect_same(dequantize(low), dequantize(high), id);
    expect_same(dequantize(low), dequantize(split), id);
  }
}

TEST(Driver, PackedFileRoundTrip) {
  testing::TempDir dir;
  for (const char* id : {"hif4.amct", "mxfp4.ggml", "nvfp4.torchao"}) {
    const Tensor x = random_tensor({2, 3, 64}, 13, false);
    QuantOptions o;
    o.recipe = id;
    o.axis = 1;
    o.tail = TailPolicy::pad;
    const PackedTensor p = quantize(x, o);
    const auto path = dir / (std::string(id) + ".safetensors");
    write_packed(path, p);
    const PackedTensor q = read_packed(path);
    EXPECT_EQ(q.recipe_id, p.recipe_id);
    EXPECT_EQ(q.shape, p.shape);
    EXPECT_EQ(q.axis, p.axis);
    EXPECT_EQ(q.codes, p.codes);
    EXPECT_EQ(q.scales, p.scales);
    EXPECT_EQ(q.nibble_order, p.nibble_order);
    EXPECT_EQ(q.scale_bit_order, p.scale_bit_order);
    EXPECT_TRUE(same_bits(q.global_decode_scale, p.global_decode_scale));
    expect_same(dequantize(q), fake_quant(x, o), id);
  }
}

TEST(Driver, DequantizeRejectsInconsistentPackedTensors) {
  const Tensor x = random_tensor({2, 64}, 17, false);
  PackedTensor p = quantize(x, recipe_options("mxfp4"));
  PackedTensor bad = p;
  bad.codes.pop_back();
  EXPECT_NE(error_of([&] { dequantize(bad); }).find("code bytes"), std::string::npos);
  bad = p;
  bad.scales.push_back(0);
  EXPECT_NE(error_of([&] { dequantize(bad); }).find("scale bytes"), std::string::npos);
  bad = p;
  bad.recipe_id = "mxfp4.nope";
  EXPECT_NE(error_of([&] { dequantize(bad); }).find("unknown recipe"), std::string::npos);
  bad = p;
  bad.axis = 5;
  EXPECT_NE(error_of([&] { dequantize(bad); }).find("inconsistent"), std::string::npos);
}

TEST(Driver, Nvfp4GlobalAmaxIsRecordedAndOverridable) {
  const Tensor x = random_tensor({4, 32}, 19, false);
  float amax = 0;
  for (float v : x.data) amax = std::max(amax, std::fabs(v));
  QuantOptions o;
  o.recipe = "nvfp4.te";
  const PackedTensor from_input = quantize(x, o);
  EXPECT_EQ(from_input.global_amax, amax);
  o.global_amax = amax;
  const PackedTensor given = quantize(x, o);
  EXPECT_EQ(given.scales, from_input.scales);
  EXPECT_EQ(given.codes, from_input.codes);
  o.global_amax = 4.0f * amax;
  const PackedTensor other = quantize(x, o);
  EXPECT_EQ(other.global_amax, 4.0f * amax);
  EXPECT_NE(other.scales, from_input.scales);
}

// A given per-tensor amax below 2688/FLT_MAX (~7.9e-36) would make S_enc =
// 2688/G overflow fp32 (docs/spec/nvfp4.md §2.2): the library refuses it for
// every entry point and implementation, so no front end can pass it through.
TEST(Driver, Nvfp4GlobalAmaxBelowTheEncodeScaleRangeIsRefused) {
  const Tensor x = random_tensor({4, 32}, 23, false);
  std::vector<float> y(x.data.size());
  std::vector<uint8_t> codes(64), scales(8);
  for (Impl impl : {Impl::reference, Impl::fast}) {
    QuantOptions o;
    o.recipe = "nvfp4.te";
    o.impl = impl;
    // 2688/7.8e-36 = 3.45e38 > FLT_MAX; 2688/8e-36 = 3.36e38 is finite.
    for (float g : {std::numeric_limits<float>::denorm_min(), 1e-38f, 7.8e-36f}) {
      o.global_amax = g;
      for (const std::string& msg :
           {error_of([&] { fake_quant(x, o); }), error_of([&] { quantize(x, o); }),
            error_of([&] { packed_header(x.shape, o); }),
            error_of([&] { quantize(f32_view(x.data, x.shape), o, codes, scales); }),
            error_of([&] { fake_quant(f32_view(x.data, x.shape), o, output_view(y, x.shape)); })}) {
        EXPECT_NE(msg.find("2688/G overflows fp32"), std::string::npos) << g << ": " << msg;
        EXPECT_NE(msg.find("at least 7.899"), std::string::npos) << msg;  // 2688/FLT_MAX
      }
    }
    for (float g : {0.0f, 8e-36f, 1e-30f}) {
      o.global_amax = g;
      EXPECT_NO_THROW(fake_quant(x, o)) << g;
      EXPECT_EQ(quantize(x, o).global_amax, g);
    }
  }
}

TEST(Driver, Nvfp4TwoDimensionalTilesShareTheirScale) {
  const Tensor x = random_tensor({40, 48}, 23, false);
  QuantOptions o;
  o.recipe = "nvfp4.te_2d";
  const PackedTensor p = quantize(x, o);
  const int64_t blocks = p.blocks_per_row();
  for (int64_t row = 0; row < p.rows; ++row)
    for (int64_t b = 0; b < blocks; ++b)
      ASSERT_EQ(p.scales[row * blocks + b], p.scales[(row / 16 * 16) * blocks + b]) << row << "," << b;
}

}  // namespace
}  // namespace fp4emu
