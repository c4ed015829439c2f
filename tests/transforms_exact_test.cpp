// Transforms (docs/analysis.md §4): RHT against an explicitly built Sylvester
// matrix, exact inversion where the arithmetic allows it, X'W'^T = XW^T for
// RHT and SmoothQuant, OCC's clamp + compensation = X exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fp4emu/analysis/resq.hpp"
#include "fp4emu/analysis/transforms.hpp"
#include "fp4emu/error.hpp"

namespace fp4emu::analysis {
namespace {

// Sylvester H_b by its recursion, unnormalised (the oracle).
std::vector<double> sylvester(int b) {
  std::vector<double> h{1.0};
  for (int n = 1; n < b; n *= 2) {
    std::vector<double> g(size_t(4 * n * n));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const double v = h[size_t(i * n + j)];
        g[size_t(i * 2 * n + j)] = v, g[size_t(i * 2 * n + j + n)] = v;
        g[size_t((i + n) * 2 * n + j)] = v, g[size_t((i + n) * 2 * n + j + n)] = -v;
      }
    h = std::move(g);
  }
  return h;
}

std::vector<double> random_rows(int64_t rows, int64_t cols, uint32_t seed, bool integers) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d;
  std::uniform_int_distribution<int> k(-1000, 1000);
  std::vector<double> v(size_t(rows * cols));
  for (double& x : v) x = integers ? k(rng) : d(rng);
  return v;
}

TEST(TransformsRht, MatchesTheSylvesterMatrixTimesSigns) {
  for (int b : {16, 32, 64, 128, 256}) {
    const std::vector<double> signs = rht_signs(RhtSigns::seeded, b, 11);
    const std::vector<double> h = sylvester(b);
    const int64_t cols = 2 * b;
    std::vector<double> x = random_rows(3, cols, b, false), expect(x.size());
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t t = 0; t < cols; t += b)
        for (int j = 0; j < b; ++j) {
          double s = 0;
          for (int i = 0; i < b; ++i) s += x[r * cols + t + i] * h[size_t(i * b + j)];
          expect[r * cols + t + j] = s / std::sqrt(double(b)) * signs[j];
        }
    rht_forward(x, cols, signs);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], expect[i], 1e-12) << "b=" << b << " i=" << i;
  }
}

// With b a power of 4, 1/sqrt(b) is a power of two: forward then inverse is
// the identity bit for bit on values whose sums are exact.
TEST(TransformsRht, ExactInverseForPowerOfFourSizes) {
  for (int b : {16, 64, 256}) {
    const std::vector<double> signs = rht_signs(RhtSigns::seeded, b, 3);
    const std::vector<double> x0 = random_rows(4, 2 * b, b + 1, true);
    std::vector<double> x = x0;
    rht_forward(x, 2 * b, signs);
    EXPECT_NE(x, x0);
    rht_inverse(x, 2 * b, signs);
    EXPECT_EQ(x, x0) << "b=" << b;
  }
  for (int b : {32, 128}) {  // 1/sqrt(b) is rounded: exact to a few ulps
    const std::vector<double> signs = rht_signs(RhtSigns::seeded, b, 3);
    const std::vector<double> x0 = random_rows(4, 2 * b, b + 1, false);
    std::vector<double> x = x0;
    rht_forward(x, 2 * b, signs);
    rht_inverse(x, 2 * b, signs);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], x0[i], 1e-14 * (1 + std::fabs(x0[i])));
  }
}

TEST(TransformsRht, PreservesTheProductAndTheNorm) {
  const int64_t m = 5, n = 7, d = 128;
  const Tensor x{{m, d}, [] {
                   std::vector<float> v(5 * 128);
                   std::mt19937 rng(1);
                   std::normal_distribution<float> g;
                   for (float& f : v) f = g(rng);
                   return v;
                 }()};
  const Tensor w = synthetic_weights(n, d, 4);
  TransformSpec spec = parse_transform("rht:b=32,seed=9");
  const PreparedTransform t(spec, 32, x, &w, nullptr);
  const Tensor xt = t.operand(x), wt = t.weights(w);
  double nx = 0, nxt = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double y = 0, yt = 0;
      for (int64_t k = 0; k < d; ++k) {
        y += double(x.data[i * d + k]) * w.data[j * d + k];
        yt += double(xt.data[i * d + k]) * wt.data[j * d + k];
      }
      EXPECT_NEAR(yt, y, 1e-5 * (1 + std::fabs(y)));  // operands are rounded to fp32 once
    }
    for (int64_t k = 0; k < d; ++k) nx += double(x.data[i * d + k]) * x.data[i * d + k];
    for (int64_t k = 0; k < d; ++k) nxt += double(xt.data[i * d + k]) * xt.data[i * d + k];
  }
  EXPECT_NEAR(nxt / nx, 1.0, 1e-6);
  // Back to the input's domain.
  const std::vector<double> back = t.to_original(xt.data);
  for (size_t i = 0; i < back.size(); ++i) ASSERT_NEAR(back[i], x.data[i], 1e-6 * (1 + std::fabs(x.data[i])));
}

TEST(TransformsRht, SignVectors) {
  const std::vector<double> te = rht_signs(RhtSigns::te, 16, 0);
  const std::vector<double> expect = {+1, +1, +1, -1, +1, -1, -1, -1, -1, -1, -1, +1, -1, +1, -1, -1};
  EXPECT_EQ(te, expect);
  EXPECT_THROW(rht_signs(RhtSigns::te, 32, 0), InputError);
  const std::vector<double> a = rht_signs(RhtSigns::seeded, 256, 5);
  EXPECT_EQ(a, rht_signs(RhtSigns::seeded, 256, 5));
  EXPECT_NE(a, rht_signs(RhtSigns::seeded, 256, 6));
  int neg = 0;
  for (double s : a) {
    ASSERT_TRUE(s == 1.0 || s == -1.0);
    neg += s < 0;
  }
  EXPECT_GT(neg, 90);
  EXPECT_LT(neg, 166);
  // A row length that is not a multiple of the size is an input error.
  const Tensor x{{2, 48}, std::vector<float>(96, 1.0f)};
  EXPECT_THROW(PreparedTransform(parse_transform("rht:b=32"), 32, x, nullptr, nullptr), InputError);
}

TEST(TransformsSmoothQuant, ScalesFormulaAndExactProduct) {
  // X 2 x 3, W 2 x 3 with hand-computable maxima.
  const Tensor x{{2, 3}, {4.0f, -0.5f, 0.0f, -16.0f, 0.25f, 0.0f}};
  const Tensor w{{2, 3}, {1.0f, 4.0f, 0.0f, -0.25f, 1.0f, 0.0f}};
  const std::vector<double> s = smoothquant_scales(x, w, 0.5);
  EXPECT_DOUBLE_EQ(s[0], std::sqrt(16.0) / std::sqrt(1.0));  // max|X| 16, max|W| 1
  EXPECT_DOUBLE_EQ(s[1], std::sqrt(0.5) / std::sqrt(4.0));
  EXPECT_DOUBLE_EQ(s[2], 1e-5);  // dead channel: 0/0 floors
  const std::vector<double> s1 = smoothquant_scales(x, w, 1.0);
  EXPECT_DOUBLE_EQ(s1[0], 16.0);
  // Zero weight column with live activations: capped.
  const Tensor w0{{1, 3}, {0.0f, 1.0f, 1.0f}};
  EXPECT_DOUBLE_EQ(smoothquant_scales(x, w0, 0.5)[0], 1e5);

  const Tensor xr{{4, 64}, [] {
                    std::vector<float> v(256);
                    std::mt19937 rng(2);
                    std::normal_distribution<float> g;
                    for (float& f : v) f = g(rng);
                    v[5] = 300.0f;
                    return v;
                  }()};
  const Tensor wr = synthetic_weights(3, 64, 1);
  const PreparedTransform t(parse_transform("smoothquant:alpha=0.5"), 32, xr, &wr, nullptr);
  const Tensor xt = t.operand(xr), wt = t.weights(wr);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      double y = 0, yt = 0;
      for (int64_t k = 0; k < 64; ++k) {
        y += double(xr.data[i * 64 + k]) * wr.data[j * 64 + k];
        yt += double(xt.data[i * 64 + k]) * wt.data[j * 64 + k];
      }
      EXPECT_NEAR(yt, y, 1e-5 * (1 + std::fabs(y)));
    }
  // Stale calibration: the scales come from the calibration tensor.
  Tensor calib = xr;
  for (float& v : calib.data) v *= 4.0f;
  const PreparedTransform stale(parse_transform("smoothquant:alpha=1,calib=old.safetensors"), 32, xr, &wr, &calib);
  EXPECT_DOUBLE_EQ(stale.smooth_scales()[5], 1200.0);
}

TEST(TransformsOcc, QuantileAndExactCompensation) {
  const std::vector<double> s = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(quantile_linear(s, 0.5), 2.5);  // numpy.quantile([1,2,3,4], 0.5)
  EXPECT_DOUBLE_EQ(quantile_linear(s, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile_linear(s, 1.0), 4.0);
  EXPECT_NEAR(quantile_linear(s, 0.99), 3.97, 1e-12);

  std::vector<float> v(100000);
  std::mt19937 rng(3);
  std::normal_distribution<float> g;
  for (float& f : v) f = g(rng);
  v[17] = 1000.0f;
  const Tensor x{{100, 1000}, v};
  const PreparedTransform t(parse_transform("occ:q=0.99"), 32, x, nullptr, nullptr);
  const Tensor xc = t.operand(x);
  // About 2% of the values are clamped (1% on each side).
  EXPECT_NEAR(double(t.occ_clamped()) / v.size(), 0.02, 0.002);
  EXPECT_NEAR(t.occ_high(), 2.326, 0.05);  // the 99th percentile of N(0, 1)
  EXPECT_NEAR(t.occ_low(), -2.326, 0.05);
  // Clamp + compensation is X exactly.
  const std::vector<double> back = t.to_original(xc.data);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(back[i], double(v[i])) << i;
  EXPECT_EQ(xc.data[17], float(t.occ_high()));
}

TEST(TransformsParse, SpecsAndErrors) {
  EXPECT_EQ(parse_transform("none").kind, TransformSpec::Kind::none);
  const TransformSpec r = parse_transform("rht:b=64,seed=12");
  EXPECT_EQ(r.rht_size, 64);
  EXPECT_EQ(r.seed, 12u);
  EXPECT_EQ(r.to_string(16), "rht:b=64,signs=seeded,seed=12");
  EXPECT_EQ(parse_transform("rht").to_string(16), "rht:b=16,signs=seeded,seed=0");
  EXPECT_EQ(parse_transform("rht:signs=te").to_string(32), "rht:b=16,signs=te");
  EXPECT_DOUBLE_EQ(parse_transform("smoothquant:alpha=0.8").alpha, 0.8);
  EXPECT_DOUBLE_EQ(parse_transform("occ:q=0.999").occ_quantile, 0.999);
  for (const char* bad : {"hadamard", "rht:b=48", "rht:b=512", "rht:b=8", "rht:signs=foo", "rht:b=32,signs=te",
                          "smoothquant:alpha=2", "occ:q=1.5", "occ:q", "occ:quantile=0.9", "rht:b=x"})
    EXPECT_THROW(parse_transform(bad), InputError) << bad;
}

}  // namespace
}  // namespace fp4emu::analysis
