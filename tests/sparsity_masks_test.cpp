// Sparsity masks: each pattern checked against the definition of
// docs/analysis.md §3.2 written as a property (the kept set is the right size
// and no dropped element outranks a kept one, ties to the lower index), on
// random and tie-heavy data, plus hand-made examples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "fp4emu/analysis/resq.hpp"
#include "fp4emu/analysis/sparsity.hpp"
#include "fp4emu/error.hpp"

namespace fp4emu::analysis {
namespace {

// Values with many exact ties in magnitude (as FP4 codes times a scale have).
std::vector<float> tie_heavy(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const float grid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::vector<float> v(n);
  for (float& x : v) {
    const float sign = (rng() & 1) ? -1.0f : 1.0f;  // one draw per statement: operand order is the compiler's
    x = grid[rng() % 8] * sign;
  }
  return v;
}

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// a outranks b: larger score, or equal score and lower index.
bool outranks(double sa, int64_t a, double sb, int64_t b) { return sa > sb || (sa == sb && a < b); }

TEST(SparsityNM, EveryNOfMUpTo16KeepsTheLargestWithLowestIndexTies) {
  for (int m = 2; m <= 16; ++m)
    for (int n = 1; n < m; ++n)
      for (int64_t cols : {int64_t(m) * 3, int64_t(m) * 2 + m / 2 + 1})
        for (int data = 0; data < 2; ++data) {
          const int64_t rows = 3;
          const std::vector<float> v = data ? tie_heavy(rows * cols, m * 31 + n) : gaussian(rows * cols, m * 7 + n);
          const SparsityPattern p = parse_pattern(std::to_string(n) + ":" + std::to_string(m));
          const std::vector<uint8_t> mask = sparsity_mask(p, v, rows, cols);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t g = 0; g < cols; g += m) {
              const int64_t len = std::min<int64_t>(m, cols - g);
              int kept = 0;
              for (int64_t i = g; i < g + len; ++i) kept += mask[r * cols + i];
              ASSERT_EQ(kept, std::min<int64_t>(n, len)) << n << ":" << m << " group " << g;
              for (int64_t i = g; i < g + len; ++i)
                for (int64_t j = g; j < g + len; ++j)
                  if (mask[r * cols + i] && !mask[r * cols + j]) {
                    ASSERT_TRUE(outranks(std::fabs(v[r * cols + i]), i, std::fabs(v[r * cols + j]), j))
                        << n << ":" << m << " kept " << i << " over " << j;
                  }
            }
        }
}

TEST(SparsityNM, HandExamples) {
  const SparsityPattern p24 = parse_pattern("2:4");
  // All equal: the two lowest indices.
  EXPECT_EQ(sparsity_mask(p24, std::vector<float>{1, 1, 1, 1}, 1, 4), (std::vector<uint8_t>{1, 1, 0, 0}));
  // Sign does not matter; -2 and 2 tie and both beat 1.
  EXPECT_EQ(sparsity_mask(p24, std::vector<float>{0.5f, -2, 2, 1}, 1, 4), (std::vector<uint8_t>{0, 1, 1, 0}));
  // Tie between positions 1 and 3 for the second slot: position 1.
  EXPECT_EQ(sparsity_mask(p24, std::vector<float>{3, -1, 0, 1}, 1, 4), (std::vector<uint8_t>{1, 1, 0, 0}));
  // A short last group keeps min(N, length): 6 columns = one group of 4 and one of 2.
  EXPECT_EQ(sparsity_mask(p24, std::vector<float>{0, 0, 0, 0, 5, 4}, 1, 6),
            (std::vector<uint8_t>{1, 1, 0, 0, 1, 1}));
  // Groups run along each row, never across rows.
  EXPECT_EQ(sparsity_mask(parse_pattern("1:2"), std::vector<float>{1, 2, 4, 3}, 2, 2),
            (std::vector<uint8_t>{0, 1, 1, 0}));
}

TEST(SparsityRanked, ChannelRowBlockUnstructured) {
  const int64_t rows = 12, cols = 40;
  for (int data = 0; data < 2; ++data) {
    const std::vector<float> v = data ? tie_heavy(rows * cols, 5) : gaussian(rows * cols, 6);
    // Channel: whole columns, ranked by sum of squares.
    {
      const std::vector<uint8_t> mask = sparsity_mask(parse_pattern("channel25"), v, rows, cols);
      std::vector<double> norm(cols, 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) norm[c] += double(v[r * cols + c]) * v[r * cols + c];
      int kept = 0;
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t r = 1; r < rows; ++r) ASSERT_EQ(mask[r * cols + c], mask[c]);
        kept += mask[c];
      }
      EXPECT_EQ(kept, 10);
      for (int64_t a = 0; a < cols; ++a)
        for (int64_t b = 0; b < cols; ++b)
          if (mask[a] && !mask[b]) { ASSERT_TRUE(outranks(norm[a], a, norm[b], b)); }
    }
    // Row: whole rows.
    {
      const std::vector<uint8_t> mask = sparsity_mask(parse_pattern("row50"), v, rows, cols);
      std::vector<double> norm(rows, 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) norm[r] += double(v[r * cols + c]) * v[r * cols + c];
      int kept = 0;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 1; c < cols; ++c) ASSERT_EQ(mask[r * cols + c], mask[r * cols]);
        kept += mask[r * cols];
      }
      EXPECT_EQ(kept, 6);
      for (int64_t a = 0; a < rows; ++a)
        for (int64_t b = 0; b < rows; ++b)
          if (mask[a * cols] && !mask[b * cols]) { ASSERT_TRUE(outranks(norm[a], a, norm[b], b)); }
    }
    // Block 5x16 on 12x40: 3 x 3 tiles, partial at the edges; keep 50% = round(4.5) = 5.
    {
      const std::vector<uint8_t> mask = sparsity_mask(parse_pattern("block5x16"), v, rows, cols);
      std::vector<double> norm(9, 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) norm[(r / 5) * 3 + c / 16] += double(v[r * cols + c]) * v[r * cols + c];
      std::vector<int> tile_kept(9, -1);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          int& t = tile_kept[(r / 5) * 3 + c / 16];
          if (t < 0) t = mask[r * cols + c];
          ASSERT_EQ(t, mask[r * cols + c]) << "a tile is kept or dropped whole";
        }
      int kept = 0;
      for (int t = 0; t < 9; ++t) kept += tile_kept[t];
      EXPECT_EQ(kept, 5);
      for (int a = 0; a < 9; ++a)
        for (int b = 0; b < 9; ++b)
          if (tile_kept[a] && !tile_kept[b]) { ASSERT_TRUE(outranks(norm[a], a, norm[b], b)); }
    }
    // Unstructured: the global top half by |v|.
    {
      const std::vector<uint8_t> mask = sparsity_mask(parse_pattern("unstructured50"), v, rows, cols);
      int kept = 0;
      for (uint8_t k : mask) kept += k;
      EXPECT_EQ(kept, rows * cols / 2);
      for (int64_t a = 0; a < rows * cols; ++a)
        for (int64_t b = 0; b < rows * cols; ++b)
          if (mask[a] && !mask[b]) { ASSERT_TRUE(outranks(std::fabs(v[a]), a, std::fabs(v[b]), b)); }
    }
  }
}

// The masks split across threads (rows, column slices, tile rows, fixed
// chunks of the unstructured ranking): on matrices of several chunks, every
// pattern's mask is the same for 1, 2 and 3 threads, and unstructured keeps
// exactly the first k of a full sort by (|v| descending, index), ties
// crossing chunk boundaries included.
TEST(SparsityThreads, EveryPatternTheSameForAnyThreadCountAndUnstructuredIsTheSortedTopK) {
  const int64_t rows = 300, cols = 520;  // 156 000 elements: three 65 536-element chunks
  for (int data = 0; data < 2; ++data) {
    const std::vector<float> v = data ? tie_heavy(rows * cols, 11) : gaussian(rows * cols, 12);
    for (const char* name : {"2:4", "3:7", "channel30", "row50", "block32x64", "block7x9", "unstructured50",
                             "unstructured1", "unstructured99", "random50"}) {
      const SparsityPattern p = parse_pattern(name, 0.5, 3);
      const std::vector<uint8_t> one = sparsity_mask(p, v, rows, cols, 1);
      for (int threads : {2, 3}) EXPECT_EQ(sparsity_mask(p, v, rows, cols, threads), one) << name << " " << threads;
      if (p.kind != SparsityPattern::Kind::unstructured) continue;
      std::vector<int64_t> idx(v.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
      std::vector<uint8_t> want(v.size(), 0);
      for (int64_t i = 0; i < kept_count(p.density, int64_t(v.size())); ++i) want[idx[i]] = 1;
      EXPECT_EQ(one, want) << name << (data ? " tie-heavy" : " gaussian");
    }
  }
  // All equal: the lowest indices; the extremes keep nothing or everything.
  const std::vector<float> flat(200000, -2.5f);
  const std::vector<uint8_t> m = sparsity_mask(parse_pattern("unstructured50"), flat, 1000, 200, 2);
  for (size_t i = 0; i < flat.size(); ++i) ASSERT_EQ(m[i], i < 100000 ? 1 : 0) << i;
}

TEST(SparsityRandom, SeededExactCount) {
  const std::vector<float> v = gaussian(1000, 1);
  const auto a = sparsity_mask(parse_pattern("random50", 0.5, 7), v, 10, 100);
  const auto b = sparsity_mask(parse_pattern("random50", 0.5, 7), v, 10, 100);
  const auto c = sparsity_mask(parse_pattern("random50", 0.5, 8), v, 10, 100);
  int kept = 0;
  for (uint8_t k : a) kept += k;
  EXPECT_EQ(kept, 500);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The mask does not look at the values.
  EXPECT_EQ(a, sparsity_mask(parse_pattern("random50", 0.5, 7), gaussian(1000, 2), 10, 100));
}

TEST(SparsityPatterns, NamesAliasesAndErrors) {
  EXPECT_EQ(parse_pattern("chan50").name, "channel50");
  EXPECT_EQ(parse_pattern("tok50").name, "row50");
  EXPECT_EQ(parse_pattern("top50").name, "unstructured50");
  EXPECT_EQ(parse_pattern("rand50").name, "random50");
  EXPECT_EQ(parse_pattern("blk:32x64").name, "block32x64");
  EXPECT_EQ(parse_pattern("block16x16").block_rows, 16);
  EXPECT_DOUBLE_EQ(parse_pattern("4:8").density, 0.5);
  EXPECT_DOUBLE_EQ(parse_pattern("channel", 0.25).density, 0.25);
  EXPECT_EQ(parse_pattern("channel", 0.25).name, "channel25");
  EXPECT_DOUBLE_EQ(parse_pattern("block32x64", 0.25).density, 0.25);
  for (const char* bad : {"3:3", "0:4", "5:4", "2:17", "2:", "x:4", "channel0", "channel100", "block0x4", "block4",
                          "blockAxB", "foo", ""})
    EXPECT_THROW(parse_pattern(bad), InputError) << bad;
  EXPECT_EQ(sparsity_mask(parse_pattern("none"), std::vector<float>{1, 2}, 1, 2), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(sparsity_mask(parse_pattern("dense"), std::vector<float>{1, 0}, 1, 2), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(kept_count(0.5, 7), 4);  // 3.5 rounds up
  EXPECT_EQ(kept_count(0.5, 6), 3);
}

// docs/analysis.md §3.4: FP4 alone 4x, dense residual 2x, 2:4 residual 2.67x.
TEST(SparsityCostModel, SpeedupsOfThePaper) {
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("none")), 4.0);
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("dense")), 2.0);
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("2:4")), 2.0 / 0.75);
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("4:8")), 2.0 / 0.75);
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("channel50")), 2.0 / 0.75);
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("block32x64")), 2.0 / 0.75);
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("unstructured50")), 2.0);
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("random50")), 2.0);
  EXPECT_DOUBLE_EQ(speedup_vs_fp16(parse_pattern("1:4")), 2.0);  // no hardware 1:4 assumed
  EXPECT_DOUBLE_EQ(cost_over_mdn(parse_pattern("2:4")), 0.75);
}

}  // namespace
}  // namespace fp4emu::analysis
