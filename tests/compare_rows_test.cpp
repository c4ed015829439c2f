// A tensor compared as row pieces (docs/analysis.md §1.6, `--split-rows-above`)
// against the same tensor compared whole: every recipe quantizes every
// element to the same bits when each piece takes the whole tensor's NVFP4
// amax (piece_amax reduced over the pieces), and the pieces' statistics
// merged in row order count what the whole tensor's do.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/recipe.hpp"

namespace fp4emu {
namespace {

// 53 rows (pieces of 16, 16, 16, 5) x 96 columns of bf16 values: heavy tails, a
// zero row, tiny values that underflow, one large outlier.
Tensor test_tensor(uint32_t seed) {
  std::mt19937 rng(seed);
  std::student_t_distribution<float> t(3.0f);
  Tensor x;
  x.shape = {53, 96};
  x.data.resize(53 * 96);
  for (float& v : x.data) v = t(rng) * 0.01f;
  for (int c = 0; c < 96; ++c) x.data[size_t(20 * 96 + c)] = 0.0f;
  for (int c = 0; c < 8; ++c) x.data[size_t(40 * 96 + c)] = 1e-9f * float(c + 1);
  x.data[size_t(50 * 96 + 7)] = 300.0f;  // the per-tensor amax lies in the last piece
  for (float& v : x.data) {  // bf16 values, which every recipe reads (hif4.a6 only those)
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits &= 0xFFFF0000u;
    std::memcpy(&v, &bits, 4);
  }
  return x;
}

const int64_t kCuts[] = {0, 16, 32, 48, 53};

Tensor rows_of(const Tensor& x, int64_t begin, int64_t end) {
  Tensor p;
  p.shape = {end - begin, x.shape[1]};
  p.data.assign(x.data.begin() + begin * x.shape[1], x.data.begin() + end * x.shape[1]);
  return p;
}

bool stochastic_only(const Recipe& r) { return r.element_rounding == Rounding::stochastic; }

TEST(CompareRows, PiecesQuantizeToTheWholeTensorsBits) {
  const Tensor x = test_tensor(7);
  int checked = 0;
  for (const Recipe& r : all_recipes()) {
    if (stochastic_only(r)) continue;
    QuantOptions o;
    o.recipe = std::string(r.id);
    o.tail = TailPolicy::pad;
    const Tensor whole = fake_quant(x, o);
    std::vector<float> amaxes;
    for (size_t k = 0; k + 1 < std::size(kCuts); ++k) {
      const Tensor p = rows_of(x, kCuts[k], kCuts[k + 1]);
      if (auto a = piece_amax(r, p.data)) amaxes.push_back(*a);
    }
    QuantOptions po = o;
    if (r.format == Format::nvfp4) {
      ASSERT_EQ(amaxes.size(), std::size(kCuts) - 1) << r.id;
      po.global_amax = *piece_amax(r, amaxes);
      EXPECT_EQ(*po.global_amax, 300.0f) << r.id;
      EXPECT_TRUE(usable_global_amax(r, *po.global_amax));
    } else {
      EXPECT_TRUE(amaxes.empty()) << r.id;
    }
    for (size_t k = 0; k + 1 < std::size(kCuts); ++k) {
      const Tensor p = rows_of(x, kCuts[k], kCuts[k + 1]);
      const Tensor q = fake_quant(p, po);
      ASSERT_EQ(0, std::memcmp(q.data.data(), whole.data.data() + kCuts[k] * 96, q.data.size() * sizeof(float)))
          << r.id << " rows " << kCuts[k] << ".." << kCuts[k + 1];
    }
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST(CompareRows, MergedPiecesCountWhatTheWholeTensorCounts) {
  const Tensor x = test_tensor(11);
  CompareOptions options;
  options.tail = TailPolicy::pad;
  for (const Recipe* r : {&default_recipe(Format::hif4), &default_recipe(Format::mxfp4), &default_recipe(Format::nvfp4)}) {
    const RecipeResult whole = compare_recipe(x, InputDType::f32, *r, options);
    std::vector<float> amaxes;
    for (size_t k = 0; k + 1 < std::size(kCuts); ++k)
      if (auto a = piece_amax(*r, rows_of(x, kCuts[k], kCuts[k + 1]).data)) amaxes.push_back(*a);
    std::vector<RecipeResult> parts;
    for (size_t k = 0; k + 1 < std::size(kCuts); ++k) {
      const TensorPiece piece{x.shape, kCuts[k] * 96,
                              amaxes.empty() ? std::nullopt : std::optional<float>(*piece_amax(*r, amaxes))};
      parts.push_back(compare_recipe(rows_of(x, kCuts[k], kCuts[k + 1]), InputDType::f32, *r, options, &piece));
    }
    const RecipeResult merged = merge_pieces(parts);
    ASSERT_TRUE(merged.skipped.empty());
    const ErrorStats &a = whole.stats, &b = merged.stats;
    EXPECT_EQ(a.count, b.count) << r->id;
    EXPECT_EQ(a.nonzero, b.nonzero);
    EXPECT_GT(a.flushed, 0) << r->id << ": the tiny values underflow";
    EXPECT_EQ(a.flushed, b.flushed);
    EXPECT_EQ(a.zero_after, b.zero_after);
    EXPECT_EQ(a.saturated, b.saturated);
    EXPECT_EQ(a.max_abs_error, b.max_abs_error);
    EXPECT_EQ(whole.bits_per_element, merged.bits_per_element);
    // Sums differ only by the order of the additions.
    EXPECT_NEAR(a.signal_energy, b.signal_energy, 1e-12 * a.signal_energy);
    EXPECT_NEAR(a.error_energy, b.error_energy, 1e-12 * a.error_energy);
    EXPECT_NEAR(a.cross, b.cross, 1e-12 * a.signal_energy);
  }
}

TEST(CompareRows, SkipMessageNamesTheWholeTensorsElement) {
  // hif4.a6 reads bf16 values only: the first non-bf16 element, counted in the whole tensor.
  const Recipe* a6 = find_recipe("hif4.a6");
  ASSERT_NE(a6, nullptr);
  Tensor x;
  x.shape = {32, 64};
  x.data.assign(32 * 64, 1.0f);
  x.data[size_t(20 * 64 + 3)] = 1.0f + 0x1p-20f;
  x.data[size_t(30 * 64)] = 1.0f + 0x1p-20f;
  const RecipeResult whole = compare_recipe(x, InputDType::f32, *a6, {});
  std::vector<RecipeResult> parts;
  for (int64_t b : {0, 16}) {
    const TensorPiece piece{x.shape, b * 64, std::nullopt};
    parts.push_back(compare_recipe(rows_of(x, b, b + 16), InputDType::f32, *a6, {}, &piece));
  }
  EXPECT_FALSE(whole.skipped.empty());
  EXPECT_EQ(merge_pieces(parts).skipped, whole.skipped);
}

TEST(CompareRows, AnAmaxTheQuantizerRefusesKeepsTheTensorWhole) {
  const Recipe& nv = default_recipe(Format::nvfp4);
  EXPECT_TRUE(usable_global_amax(nv, 0.0f));
  EXPECT_FALSE(usable_global_amax(nv, std::numeric_limits<float>::quiet_NaN()));
  EXPECT_FALSE(usable_global_amax(nv, std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(usable_global_amax(nv, 1e-38f));
}

}  // namespace
}  // namespace fp4emu
