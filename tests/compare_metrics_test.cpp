// The compare metrics (docs/analysis.md §5) against independent computations:
// plain double loops written here, and for saturation an MXFP4-OCP oracle
// from the OCP closed form plus the specs' worked examples.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/analysis/metrics.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/quantize.hpp"

namespace fp4emu {
namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Every metric, the obvious way.
struct Expected {
  int64_t count = 0, nonzero = 0, flushed = 0, zero_after = 0, nan_in = 0, inf_in = 0, nonfinite_out = 0;
  double sx2 = 0, se2 = 0, sq2 = 0, sxq = 0, max_err = 0;
};

Expected plain_loops(const std::vector<float>& x, const std::vector<float>& q) {
  Expected e;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != x[i]) {
      e.nan_in++;
    } else if (x[i] == kInf || x[i] == -kInf) {
      e.inf_in++;
    } else if (q[i] != q[i] || q[i] == kInf || q[i] == -kInf) {
      e.nonfinite_out++;
    } else {
      const double a = x[i], b = q[i];
      e.count++;
      if (b == 0) e.zero_after++;
      if (a != 0) e.nonzero++;
      if (a != 0 && b == 0) e.flushed++;
      e.sx2 += a * a;
      e.se2 += (a - b) * (a - b);
      e.sq2 += b * b;
      e.sxq += a * b;
      if (std::fabs(a - b) > e.max_err) e.max_err = std::fabs(a - b);
    }
  }
  return e;
}

void expect_rel(double got, double want, const char* what) {
  EXPECT_NEAR(got, want, 1e-12 * std::fabs(want)) << what;
}

void expect_matches(const ErrorStats& s, const Expected& e) {
  EXPECT_EQ(s.count, e.count);
  EXPECT_EQ(s.nonzero, e.nonzero);
  EXPECT_EQ(s.flushed, e.flushed);
  EXPECT_EQ(s.zero_after, e.zero_after);
  EXPECT_EQ(s.nan_in, e.nan_in);
  EXPECT_EQ(s.inf_in, e.inf_in);
  EXPECT_EQ(s.nonfinite_out, e.nonfinite_out);
  if (e.count == 0) {
    EXPECT_TRUE(std::isnan(s.qsnr_db()));
    return;
  }
  expect_rel(s.signal_energy, e.sx2, "sum x^2");
  expect_rel(s.error_energy, e.se2, "sum (x-q)^2");
  EXPECT_EQ(s.max_abs_error, e.max_err);
  expect_rel(s.qsnr_db(), 10.0 * std::log10(e.sx2 / e.se2), "qsnr");
  expect_rel(s.nmse(), e.se2 / e.sx2, "nmse");
  expect_rel(s.rel_l2(), std::sqrt(e.se2 / e.sx2), "rel_l2");
  expect_rel(s.cosine(), e.sxq / std::sqrt(e.sx2 * e.sq2), "cosine");
  EXPECT_EQ(s.underflow_ratio(), static_cast<double>(e.flushed) / static_cast<double>(e.nonzero));
  EXPECT_EQ(s.zero_ratio(), static_cast<double>(e.zero_after) / static_cast<double>(e.count));
}

// Heavy-tailed rows with exact zeros, a few outliers, NaN and Inf.
std::vector<float> activations(size_t n, uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  std::student_t_distribution<double> t(3.0);
  std::uniform_int_distribution<int> pick(0, 199);
  std::vector<float> x(n);
  for (float& v : x) {
    const int p = pick(rng);
    v = p < 6 ? 0.0f : p < 8 ? static_cast<float>(60.0 * t(rng)) : static_cast<float>(t(rng));
    if (specials && p == 8) v = kNan;
    if (specials && p == 9) v = -kInf;
  }
  return x;
}

Tensor tensor(std::vector<int64_t> shape, std::vector<float> data) { return Tensor{std::move(shape), std::move(data)}; }

TEST(CompareMetrics, ErrorStatsEqualPlainLoopsForEveryFormat) {
  for (bool specials : {false, true}) {
    const Tensor x = tensor({24, 200}, activations(24 * 200, 1, specials));
    for (const char* recipe : {"hif4.v14", "mxfp4.ocp", "nvfp4.te", "mxfp4.rceil", "nvfp4.torchao", "hif4.v14_special"}) {
      SCOPED_TRACE(testing::Message() << recipe << (specials ? " with NaN/Inf" : ""));
      QuantOptions o;
      o.recipe = recipe;
      const Tensor q = fake_quant(x, o);
      const Expected e = plain_loops(x.data, q.data);
      // With an Inf input, nvfp4.torchao's per-tensor scale is Inf and every
      // output is non-finite: then only the counts are compared.
      if (!specials) { ASSERT_GT(e.count, 1000); }
      expect_matches(error_stats(x.data, q.data), e);
      // and through compare_recipe, the path the CLI takes
      expect_matches(compare_recipe(x, InputDType::f32, *find_recipe(recipe), {}).stats, e);
    }
  }
}

TEST(CompareMetrics, NonFiniteOutputsAreCountedAndLeftOut) {
  const std::vector<float> x = {1.0f, 2.0f, kNan, kInf, 0.0f, 3.0f, -0.5f};
  const std::vector<float> q = {1.0f, kNan, kNan, kInf, 0.0f, kInf, -0.0f};
  const ErrorStats s = error_stats(x, q);
  expect_matches(s, plain_loops(x, q));
  EXPECT_EQ(s.count, 3);  // 1, 0 and -0.5
  EXPECT_EQ(s.nonfinite(), 4);
  EXPECT_EQ(s.flushed, 1);
  EXPECT_EQ(s.zero_after, 2);
  EXPECT_FALSE(s.saturated.has_value());
  EXPECT_THROW(error_stats(x, std::vector<float>(3)), std::invalid_argument);
}

TEST(CompareMetrics, DegenerateTensors) {
  const std::vector<float> zeros(8, 0.0f);
  const ErrorStats z = error_stats(zeros, zeros);
  EXPECT_EQ(z.qsnr_db(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(z.nmse(), 0.0);
  EXPECT_EQ(z.cosine(), 1.0);
  EXPECT_EQ(z.underflow_ratio(), 0.0);
  EXPECT_EQ(z.zero_ratio(), 1.0);
  const ErrorStats exact = error_stats(std::vector<float>{1, -2}, std::vector<float>{1, -2});
  EXPECT_EQ(exact.qsnr_db(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(exact.cosine(), 1.0);
  const ErrorStats none = error_stats(std::vector<float>{kNan}, std::vector<float>{kNan});
  EXPECT_TRUE(std::isnan(none.qsnr_db()));
  const ErrorStats from_zero = error_stats(std::vector<float>{0, 0}, std::vector<float>{0, 1});
  EXPECT_EQ(from_zero.nmse(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(from_zero.cosine(), 0.0);
}

// MXFP4 OCP (docs/spec/mxfp4.md §4.1): X = 2^(floor(log2 amax) - 2); an element is
// clipped when |x| / X > 6. Blocks along the last axis, zero-padded.
int64_t mxfp4_ocp_saturated(const std::vector<float>& x, int64_t rows, int64_t len) {
  int64_t n = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < len; b += 32) {
      double amax = 0;
      for (int64_t k = b; k < std::min(len, b + 32); ++k) amax = std::max(amax, std::fabs(double(x[r * len + k])));
      if (amax == 0) continue;
      const double scale = std::ldexp(1.0, std::ilogb(amax) - 2);
      for (int64_t k = b; k < std::min(len, b + 32); ++k)
        if (std::fabs(double(x[r * len + k])) / scale > 6.0) ++n;
    }
  }
  return n;
}

TEST(CompareMetrics, SaturationMatchesTheOcpOracle) {
  const int64_t rows = 64, len = 200;  // 200: a padded tail block
  const std::vector<float> data = activations(rows * len, 2, false);
  const Tensor x = tensor({rows, len}, data);
  const RecipeResult r = compare_recipe(x, InputDType::f32, *find_recipe("mxfp4.ocp"), {});
  ASSERT_TRUE(r.stats.saturated.has_value());
  const int64_t want = mxfp4_ocp_saturated(data, rows, len);
  EXPECT_GT(want, 100);
  EXPECT_EQ(*r.stats.saturated, want);
  EXPECT_DOUBLE_EQ(*r.stats.saturation_ratio(), static_cast<double>(want) / static_cast<double>(r.stats.count));

  // The same values with the block axis first and a middle axis: the
  // element-to-code mapping of count_saturated must follow the axis.
  std::vector<float> t(data.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < len; ++k) t[k * rows + i] = data[i * len + k];
  CompareOptions axis0;
  axis0.axis = 0;
  const RecipeResult r0 = compare_recipe(tensor({len, 4, rows / 4}, t), InputDType::f32, *find_recipe("mxfp4.ocp"), axis0);
  EXPECT_EQ(*r0.stats.saturated, want);
}

TEST(CompareMetrics, SaturationOnTheWorkedExamples) {
  // docs/spec/hif4.md §8 EX4: 7.875 rounds to q = 8, clamped to 7 -> 7.0 (saturated); 1.0 is exact.
  std::vector<float> hif4(64, 0.0f);
  hif4[0] = 7.875f;
  hif4[1] = 1.0f;
  EXPECT_EQ(*compare_recipe(tensor({1, 64}, hif4), InputDType::f32, *find_recipe("hif4.v14"), {}).stats.saturated, 1);
  // docs/spec/mxfp4.md §8 EX-M2: 7 -> 6 (clipped), -5.5 -> -6 (rounded up in magnitude: not clipped).
  std::vector<float> mx(32, 0.0f);
  mx[0] = 7.0f;
  mx[1] = -5.5f;
  mx[2] = 1.0f;
  EXPECT_EQ(*compare_recipe(tensor({1, 32}, mx), InputDType::f32, *find_recipe("mxfp4.ocp"), {}).stats.saturated, 1);
  EXPECT_EQ(*compare_recipe(tensor({1, 32}, mx), InputDType::f32, *find_recipe("mxfp4.rceil"), {}).stats.saturated, 0);
  // NVFP4 TE with tensor amax 2688 = 6 * 448, so S_enc = 1 (docs/spec/nvfp4.md §2.2):
  // block 1: s = e4m3(6.3 / 6 = 1.05) = 1.0, 6.3 -> 6 (clipped);
  // block 2: s = e4m3(1.1) = 1.125, 6.6 -> 6.75 (not clipped).
  std::vector<float> nv(48, 0.0f);
  nv[0] = 2688.0f;
  nv[16] = 6.3f;
  nv[17] = 1.0f;
  nv[32] = 6.6f;
  const RecipeResult r = compare_recipe(tensor({1, 48}, nv), InputDType::f32, *find_recipe("nvfp4.te"), {});
  EXPECT_EQ(*r.stats.saturated, 1);
  // A value at exactly the top code is not clipped.
  std::vector<float> top(32, 0.0f);
  top[0] = 6.0f;
  EXPECT_EQ(*compare_recipe(tensor({1, 32}, top), InputDType::f32, *find_recipe("mxfp4.ocp"), {}).stats.saturated, 0);
}

TEST(CompareMetrics, FakeQuantOnlyRecipesHaveUnknownSaturation) {
  const Tensor x = tensor({2, 64}, activations(128, 3, false));
  int checked = 0;
  for (const Recipe& r : all_recipes()) {
    if (!r.fake_quant_only || r.bf16_input_only) continue;
    const RecipeResult res = compare_recipe(x, InputDType::f32, r, {});
    EXPECT_GT(res.stats.count, 0) << r.id;
    EXPECT_FALSE(res.stats.saturated.has_value()) << r.id;
    EXPECT_FALSE(res.stats.saturation_ratio().has_value()) << r.id;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(CompareMetrics, Bf16OnlyRecipeIsSkippedOnFp32ValuesThatAreNotBf16) {
  std::vector<float> v(64, 1.0f);
  const Recipe& a6 = *find_recipe("hif4.a6");
  EXPECT_TRUE(compare_recipe(tensor({1, 64}, v), InputDType::f32, a6, {}).skipped.empty());
  v[5] = 1.0f + std::ldexp(1.0f, -20);
  const RecipeResult r = compare_recipe(tensor({1, 64}, v), InputDType::f32, a6, {});
  EXPECT_NE(r.skipped.find("element 5"), std::string::npos) << r.skipped;
  EXPECT_EQ(r.stats.count, 0);
}

TEST(CompareMetrics, BitsPerElement) {
  EXPECT_DOUBLE_EQ(bits_per_element(*find_recipe("hif4.v14"), {4, 64}, -1), 4.5);
  EXPECT_DOUBLE_EQ(bits_per_element(*find_recipe("mxfp4.ocp"), {4, 64}, -1), 4.25);
  EXPECT_DOUBLE_EQ(bits_per_element(*find_recipe("nvfp4.te"), {4, 64}, -1), 4.5 + 32.0 / 256.0);
  // 40 along the axis pads to 64: (2 rows * 64 * 4 + 2 rows * 2 blocks * 8) / 80
  EXPECT_DOUBLE_EQ(bits_per_element(*find_recipe("mxfp4.ocp"), {2, 40}, -1), 544.0 / 80.0);
  EXPECT_DOUBLE_EQ(bits_per_element(*find_recipe("mxfp4.ocp"), {40, 2}, 0), 544.0 / 80.0);
}

TEST(CompareMetrics, PoolingIsRatioOfSumsAndMeanOfDb) {
  const std::vector<float> a = activations(3 * 128, 4, false), b = activations(5 * 128, 5, false);
  const Recipe& r = *find_recipe("nvfp4.te");
  const RecipeResult ra = compare_recipe(tensor({3, 128}, a), InputDType::f32, r, {});
  const RecipeResult rb = compare_recipe(tensor({5, 128}, b), InputDType::f32, r, {});
  RecipeResult skipped;
  skipped.recipe = &r;
  skipped.skipped = "test";
  PooledResult p;
  p.add(ra, 3 * 128);
  p.add(skipped, 1000);
  p.add(rb, 5 * 128);
  EXPECT_EQ(p.tensors, 2);
  EXPECT_EQ(p.elements, 8 * 128);
  // Ratio of sums: the same as measuring both tensors' pairs together.
  QuantOptions o;
  o.recipe = "nvfp4.te";
  std::vector<float> xs = a, qs = fake_quant(tensor({3, 128}, a), o).data;
  const std::vector<float> qb = fake_quant(tensor({5, 128}, b), o).data;
  xs.insert(xs.end(), b.begin(), b.end());
  qs.insert(qs.end(), qb.begin(), qb.end());
  expect_matches(p.stats, plain_loops(xs, qs));
  EXPECT_EQ(*p.stats.saturated, *ra.stats.saturated + *rb.stats.saturated);
  const Expected ea = plain_loops(a, fake_quant(tensor({3, 128}, a), o).data);
  const Expected eb = plain_loops(b, qb);
  expect_rel(p.mean_qsnr_db(), (10 * std::log10(ea.sx2 / ea.se2) + 10 * std::log10(eb.sx2 / eb.se2)) / 2, "mean dB");
  expect_rel(p.bits_per_element(), 4.5 + 32.0 * 2 / (8 * 128), "bits");
}

TEST(CompareMetrics, CheckCompareRejectsShapesAndOptionsBeforeAnyWork) {
  const std::vector<const Recipe*> recipes = {find_recipe("hif4.v14"), find_recipe("mxfp4.ocp")};
  CompareOptions o;
  EXPECT_NO_THROW(check_compare({3, 64}, recipes, o));
  EXPECT_THROW(check_compare({}, recipes, o), InputError);
  EXPECT_THROW(check_compare({3, 0}, recipes, o), InputError);
  o.axis = 2;
  EXPECT_THROW(check_compare({3, 64}, recipes, o), InputError);
  o.axis = -1;
  o.tail = TailPolicy::error;
  EXPECT_NO_THROW(check_compare({3, 64}, recipes, o));
  EXPECT_THROW(check_compare({3, 40}, recipes, o), InputError);
}

TEST(CompareMetrics, RecipesWhoseDefaultTailIsErrorAreSkippedOnRaggedAxes) {
  const Recipe& amct = *find_recipe("hif4.amct");
  ASSERT_EQ(amct.default_tail, TailPolicy::error);
  const std::vector<const Recipe*> recipes = {&amct, find_recipe("mxfp4.ocp")};
  const Tensor x = tensor({2, 40}, activations(80, 7, false));
  CompareOptions o;
  EXPECT_NO_THROW(check_compare(x.shape, recipes, o));
  const RecipeResult r = compare_recipe(x, InputDType::f32, amct, o);
  EXPECT_NE(r.skipped.find("--tail pad"), std::string::npos) << r.skipped;
  EXPECT_TRUE(compare_recipe(x, InputDType::f32, *recipes[1], o).skipped.empty());
  o.tail = TailPolicy::pad;
  EXPECT_TRUE(compare_recipe(x, InputDType::f32, amct, o).skipped.empty());
  EXPECT_GT(compare_recipe(x, InputDType::f32, amct, o).stats.count, 0);
  o.tail = TailPolicy::error;
  EXPECT_THROW(check_compare(x.shape, recipes, o), InputError);
}

TEST(ValueStats, EqualPlainLoopsInChunks) {
  const std::vector<float> x = activations(1000, 6, true);
  ValueStats s, chunked;
  s.add(x);
  for (size_t i = 0; i < x.size(); i += 333) chunked.add(std::span(x).subspan(i, std::min<size_t>(333, x.size() - i)));
  int64_t nan = 0, inf = 0, zeros = 0, finite = 0;
  double mn = 1e300, mx = -1e300, amax = 0, ss = 0;
  for (float f : x) {
    if (f != f) {
      ++nan;
    } else if (std::isinf(f)) {
      ++inf;
    } else {
      ++finite;
      zeros += f == 0;
      mn = std::min(mn, double(f));
      mx = std::max(mx, double(f));
      amax = std::max(amax, std::fabs(double(f)));
      ss += double(f) * f;
    }
  }
  for (const ValueStats* v : {&s, &chunked}) {
    EXPECT_EQ(v->count, 1000);
    EXPECT_EQ(v->nan, nan);
    EXPECT_EQ(v->inf, inf);
    EXPECT_EQ(v->zeros, zeros);
    EXPECT_EQ(v->finite, finite);
    EXPECT_EQ(v->min, mn);
    EXPECT_EQ(v->max, mx);
    EXPECT_EQ(v->amax, amax);
    expect_rel(v->rms(), std::sqrt(ss / finite), "rms");
  }
  ValueStats merged;
  merged.merge(ValueStats{});
  merged.merge(s);
  EXPECT_EQ(merged.min, mn);
  EXPECT_EQ(merged.count, 1000);
}

}  // namespace
}  // namespace fp4emu
