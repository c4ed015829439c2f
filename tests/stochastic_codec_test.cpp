// Stochastic rounding of the element codecs (Rounding::stochastic,
// encode_stochastic): the integer rule against an independent table-search
// oracle, every offset class of every grid interval x all 256 random bytes;
// then the statistics of Philox-drawn bytes (fixed seeds).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/codec/philox.hpp"

namespace fp4emu {
namespace {

// The non-negative grid of a 4-bit element format, in code order.
const std::vector<double> kE2M1Grid = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
const std::vector<double> kS1P2Grid = {0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75};

// Oracle: the neighbours lo <= a < hi by table search, the offset class
// floor(256 (a - lo) / (hi - lo)) (a - lo is exact: lo <= a < 2 lo or lo = 0,
// and the step is a power of two), round away iff class + r >= 256; beyond
// the top value: the top code (satfinite). Returns the magnitude code.
uint32_t oracle_sr(const std::vector<double>& grid, double a, int r) {
  if (a >= grid.back()) return static_cast<uint32_t>(grid.size() - 1);
  size_t i = 0;
  while (i + 1 < grid.size() && grid[i + 1] <= a) ++i;
  const double step = grid[i + 1] - grid[i];
  const int cls = static_cast<int>(std::floor((a - grid[i]) * 256.0 / step));
  return static_cast<uint32_t>(cls + r >= 256 ? i + 1 : i);
}

// fp32 values of every offset class of every interval: the class's lower
// edge, the largest fp32 below its upper edge, and its midpoint; then values
// at and beyond the top and the smallest magnitudes.
std::vector<float> class_representatives(const std::vector<double>& grid) {
  std::vector<float> v;
  for (size_t i = 0; i + 1 < grid.size(); ++i) {
    const double step = grid[i + 1] - grid[i];
    for (int c = 0; c < 256; ++c) {
      const float lo = static_cast<float>(grid[i] + step * c / 256);
      const float hi = static_cast<float>(grid[i] + step * (c + 1) / 256);
      v.push_back(lo);
      v.push_back(std::nextafter(hi, 0.0f));
      v.push_back(static_cast<float>(grid[i] + step * (c + 0.5) / 256));
    }
  }
  const float top = static_cast<float>(grid.back());
  for (float x : {top, std::nextafter(top, 100.0f), 1.0001f * top, 2 * top, 1e30f,
                  std::numeric_limits<float>::max(), 0x1p-149f, 0x1p-126f, 1e-20f})
    v.push_back(x);
  return v;
}

void check_against_oracle(const MinifloatTraits& t, const std::vector<double>& grid) {
  const uint32_t sign = 1u << (t.exp_bits + t.man_bits);
  int64_t checked = 0;
  for (float x : class_representatives(grid)) {
    for (int r = 0; r < 256; ++r) {
      const uint32_t want = oracle_sr(grid, x, r);
      ASSERT_EQ(encode_stochastic(t, x, static_cast<uint8_t>(r), Overflow::saturate), want)
          << t.name << " x=" << x << " r=" << r;
      ASSERT_EQ(encode_stochastic(t, -x, static_cast<uint8_t>(r), Overflow::saturate), want | sign)
          << t.name << " x=" << -x << " r=" << r;
      checked += 2;
    }
  }
  EXPECT_GT(checked, 7 * 256 * 3 * 256 * 2);
}

TEST(StochasticCodec, E2M1EveryOffsetClassEveryByte) { check_against_oracle(kE2M1, kE2M1Grid); }
TEST(StochasticCodec, S1P2EveryOffsetClassEveryByte) { check_against_oracle(kS1P2, kS1P2Grid); }

TEST(StochasticCodec, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int r : {0, 255}) {
    const auto b = static_cast<uint8_t>(r);
    EXPECT_EQ(e2m1_encode_sr(std::nan(""), b), 0x7);  // NaN -> +6 (cvt satfinite, TE fallback)
    EXPECT_EQ(e2m1_encode_sr(-std::nan(""), b), 0x7);
    EXPECT_EQ(e2m1_encode_sr(inf, b), 0x7);
    EXPECT_EQ(e2m1_encode_sr(-inf, b), 0xF);
    EXPECT_EQ(e2m1_encode_sr(0.0, b), 0x0);
    EXPECT_EQ(e2m1_encode_sr(-0.0, b), 0x8);  // the sign is kept, as every E2M1 rounding here
    EXPECT_EQ(s1p2_encode_sr(inf, b), 0x7);
  }
  // Grid values never move, whatever the byte.
  for (int r = 0; r < 256; ++r)
    for (uint8_t c = 0; c < 16; ++c)
      EXPECT_EQ(e2m1_encode_sr(e2m1_decode(c), static_cast<uint8_t>(r)), c == 0x8 ? 0x8 : c);
  // encode() refuses the mode: the bits must be given.
  EXPECT_THROW(encode(kE2M1, 1.25, Rounding::stochastic, Overflow::saturate), std::invalid_argument);
}

// docs/spec/mxfp4.md §8 EX-M6 / docs/spec/nvfp4.md §8 EX-N8: y = fp32(2.4), floor(256 delta) = 102,
// rounds up iff r >= 154.
TEST(StochasticCodec, WorkedExampleEXM6) {
  EXPECT_EQ(e2m1_encode_sr(2.4f, 0x9A), 0x5);
  EXPECT_EQ(e2m1_encode_sr(2.4f, 0x99), 0x4);
  int up = 0;
  for (int r = 0; r < 256; ++r) up += e2m1_encode_sr(2.4f, static_cast<uint8_t>(r)) == 0x5;
  EXPECT_EQ(up, 102);
}

// With Philox bytes (fixed seed), for values across every interval of both
// grids (every binade of E2M1 and its subnormal range): the share of draws
// that round up is floor(256 delta)/256, and the mean of SR(x) is x, each
// within 5 standard errors of N draws (false-alarm rate < 1e-6 per value)
// plus the rule's own bias toward zero, under step/256.
void check_statistics(const MinifloatTraits& t, const std::vector<double>& grid, uint64_t seed) {
  constexpr int kDraws = 4096;
  uint64_t counter = 0;
  for (size_t i = 0; i + 1 < grid.size(); ++i) {
    const double step = grid[i + 1] - grid[i];
    for (double pos : {0.03, 0.25, 0.4, 0.5, 0.77, 0.97}) {
      const float x = static_cast<float>(grid[i] + pos * step);
      const double delta = (x - grid[i]) / step;
      const double p = std::floor(256 * delta) / 256;
      int up = 0;
      double sum = 0;
      for (int n = 0; n < kDraws; n += 16, ++counter) {
        const PhiloxCounter w = philox4x32(philox_counter(counter, 0), philox_key(seed));
        for (int j = 0; j < 16; ++j) {
          const auto r = static_cast<uint8_t>(w[j / 4] >> (8 * (j % 4)));
          const uint32_t code = encode_stochastic(t, x, r, Overflow::saturate);
          up += code == i + 1;
          sum += decode(t, code);
        }
      }
      const double se = std::sqrt(std::max(p * (1 - p), 1.0 / kDraws) / kDraws);
      EXPECT_NEAR(static_cast<double>(up) / kDraws, p, 5 * se) << t.name << " x=" << x;
      EXPECT_NEAR(sum / kDraws, x, step * (5 * se + 1.0 / 256)) << t.name << " x=" << x;
    }
  }
}

TEST(StochasticCodec, E2M1StatisticsPhilox) { check_statistics(kE2M1, kE2M1Grid, 20260301); }
TEST(StochasticCodec, S1P2StatisticsPhilox) { check_statistics(kS1P2, kS1P2Grid, 7); }

}  // namespace
}  // namespace fp4emu
