// The underflow study of a tensor as row pieces (docs/analysis.md §1.6,
// `--split-rows-above`) against the same tensor studied whole: the parts of
// each piece merged in row order give the same counts, per-block, per-token
// and per-channel values, order statistics (medians, percentiles, top-k) and
// histograms; the sums differ only in the order of their additions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/quant/recipe.hpp"

namespace fp4emu::analysis {
namespace {

// 45 rows (pieces of 16, 16, 13) x 128 columns: log-normal magnitudes that
// reach the underflow range, a zero row, a hot channel.
Tensor activations() {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 2.5f);
  std::bernoulli_distribution sign(0.5);
  Tensor x;
  x.shape = {45, 128};
  x.data.resize(45 * 128);
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = (sign(rng) ? 1.0f : -1.0f) * std::exp(g(rng)) * 1e-3f;
  for (int c = 0; c < 128; ++c) x.data[size_t(9 * 128 + c)] = 0.0f;
  for (int r = 0; r < 45; ++r) x.data[size_t(r * 128 + 77)] *= 400.0f;
  return x;
}

Tensor rows_of(const Tensor& x, int64_t begin, int64_t end) {
  Tensor p;
  p.shape = {end - begin, x.shape[1]};
  p.data.assign(x.data.begin() + begin * x.shape[1], x.data.begin() + end * x.shape[1]);
  return p;
}

bool same_double(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void expect_same_ur(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_double(a[i], b[i])) << i;
}

TEST(UnderflowRows, MergedPiecesGiveTheWholeTensorsStatistics) {
  const Tensor x = activations();
  const int64_t cuts[] = {0, 16, 32, 45};
  const UnderflowOptions opt;
  for (Format f : {Format::hif4, Format::mxfp4, Format::nvfp4}) {
    for (const char* t : {"none", "rht"}) {
      const TransformSpec spec = parse_transform(t);
      ASSERT_TRUE(row_local(spec));
      const Recipe& r = default_recipe(f);
      QuantOptions o;
      o.recipe = std::string(r.id);
      const UnderflowStats whole = study_underflow(x, o, spec, nullptr, nullptr, opt);
      std::vector<float> amaxes;
      for (size_t k = 0; k + 1 < std::size(cuts); ++k)
        if (auto a = piece_amax(r, underflow_operand(rows_of(x, cuts[k], cuts[k + 1]), o, spec, nullptr, nullptr).data))
          amaxes.push_back(*a);
      QuantOptions po = o;
      if (f == Format::nvfp4) po.global_amax = *piece_amax(r, amaxes);
      UnderflowParts merged = study_underflow_parts(rows_of(x, cuts[0], cuts[1]), po, spec, nullptr, nullptr);
      for (size_t k = 1; k + 1 < std::size(cuts); ++k)
        merged.merge(study_underflow_parts(rows_of(x, cuts[k], cuts[k + 1]), po, spec, nullptr, nullptr));
      const UnderflowStats s = finish_underflow(merged, opt);
      SCOPED_TRACE(std::string(r.id) + " " + t);
      EXPECT_GT(whole.n_underflow, 0);
      EXPECT_EQ(s.rows, whole.rows);
      EXPECT_EQ(s.n, whole.n);
      EXPECT_EQ(s.n_nonzero, whole.n_nonzero);
      EXPECT_EQ(s.n_underflow, whole.n_underflow);
      EXPECT_EQ(s.n_zero_after, whole.n_zero_after);
      EXPECT_EQ(s.n_saturated, whole.n_saturated);
      EXPECT_EQ(s.n_blocks, whole.n_blocks);
      EXPECT_EQ(s.n_blocks_nonzero, whole.n_blocks_nonzero);
      EXPECT_EQ(s.block_nonzero, whole.block_nonzero);
      EXPECT_EQ(s.block_flushed, whole.block_flushed);
      // Order statistics over the gathered per-block, per-token and per-channel values.
      EXPECT_EQ(s.p99_block_ur, whole.p99_block_ur);
      EXPECT_EQ(s.max_block_ur, whole.max_block_ur);
      EXPECT_EQ(s.mean_block_ur, whole.mean_block_ur);
      EXPECT_EQ(s.outlier_block_ratio_rel, whole.outlier_block_ratio_rel);
      EXPECT_EQ(s.crest_median, whole.crest_median);
      EXPECT_EQ(s.crest_q3, whole.crest_q3);
      EXPECT_EQ(s.crest_mean, whole.crest_mean);
      EXPECT_EQ(s.max_abs, whole.max_abs);
      expect_same_ur(s.token_ur, whole.token_ur);
      expect_same_ur(s.channel_ur, whole.channel_ur);
      ASSERT_EQ(s.top_tokens.size(), whole.top_tokens.size());
      for (size_t i = 0; i < s.top_tokens.size(); ++i) EXPECT_EQ(s.top_tokens[i].index, whole.top_tokens[i].index);
      ASSERT_EQ(s.top_channels.size(), whole.top_channels.size());
      for (size_t i = 0; i < s.top_channels.size(); ++i)
        EXPECT_EQ(s.top_channels[i].index, whole.top_channels[i].index);
      EXPECT_EQ(s.log2_hist_all, whole.log2_hist_all);
      EXPECT_EQ(s.log2_hist_underflow, whole.log2_hist_underflow);
      EXPECT_NEAR(s.qsnr_db, whole.qsnr_db, 1e-9);
      EXPECT_NEAR(s.rms, whole.rms, 1e-12 * whole.rms);
    }
  }
}

TEST(UnderflowRows, TransformsWithWholeTensorStatisticsAreNotSplit) {
  EXPECT_FALSE(row_local(parse_transform("occ")));
  EXPECT_FALSE(row_local(parse_transform("smoothquant")));
}

}  // namespace
}  // namespace fp4emu::analysis
