// The definitions of docs/analysis.md §2.1 and §3.3 at their edges, each
// recomputed here by plain loops from its written rule: all-zero blocks (the
// median block amax counts them; no outlier rule flags them; UR_B and crest
// leave them out), an all-zero tensor (rms = 0: no crest, UR 0), P % of a
// count that is not whole (round half up), D_prim's mask recomputed on Q(X),
// the residual's rankings on Q(dX) under --order qs, and `none`'s drop fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fp4emu/analysis/resq.hpp"
#include "fp4emu/analysis/sparsity.hpp"
#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/quant/quantize.hpp"

namespace fp4emu::analysis {
namespace {

UnderflowStats mxfp4_stats(const Tensor& x, UnderflowOptions opt = {}) {
  QuantOptions o;
  o.recipe = "mxfp4.ocp";
  return study_underflow(x, o, parse_transform("none"), nullptr, nullptr, opt);
}

// One row of 4 MXFP4 blocks (32 each): two all-zero blocks, a block of 1s,
// and a block with one 4 and 31 values of 0.2 (which flush: scale 1).
Tensor four_blocks() {
  Tensor x{{1, 128}, std::vector<float>(128, 0.0f)};
  for (int i = 64; i < 96; ++i) x.data[i] = 1.0f;
  x.data[96] = 4.0f;
  for (int i = 97; i < 128; ++i) x.data[i] = 0.2f;
  return x;
}

// §2.1 D2: the median amax over all 4 blocks is median(0, 0, 1, 4) = 0.5;
// rule (b) with tau_rel 8 flags amax >= 4, the all-zero blocks never.
TEST(Definitions, MedianBlockAmaxCountsAllZeroBlocks) {
  UnderflowOptions opt;
  opt.tau_rel = 8;
  const UnderflowStats s = mxfp4_stats(four_blocks(), opt);
  EXPECT_EQ(s.n_blocks, 4);
  EXPECT_EQ(s.n_blocks_nonzero, 2);
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_rel, 1.0 / 4);  // the 4-block only: 4 >= 8 x 0.5
  opt.tau_rel = 9;                                       // 4 < 9 x 0.5
  EXPECT_DOUBLE_EQ(mxfp4_stats(four_blocks(), opt).outlier_block_ratio_rel, 0.0);
  // Median 0 (three zero blocks of four): rule (b) as written would flag every
  // block; an all-zero block is still no outlier.
  Tensor x{{1, 128}, std::vector<float>(128, 0.0f)};
  x.data[5] = 1.0f;
  EXPECT_DOUBLE_EQ(mxfp4_stats(x).outlier_block_ratio_rel, 1.0 / 4);
}

// §2.1 D3: _uf and blocks_with_underflow divide by every block; their
// numerators and the UR_B statistics count blocks with a nonzero input only.
TEST(Definitions, BlockRatiosDivideByEveryBlockAndSkipZeroBlocks) {
  UnderflowOptions opt;
  opt.tau_uf = 0.5;
  const UnderflowStats s = mxfp4_stats(four_blocks(), opt);
  EXPECT_EQ(s.n_underflow, 31);
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_uf, 1.0 / 4);       // UR_B = 31/32 in one block of 4
  EXPECT_DOUBLE_EQ(s.blocks_with_underflow_ratio, 1.0 / 4);
  EXPECT_DOUBLE_EQ(s.mean_block_ur, (0.0 + 31.0 / 32) / 2);  // over the 2 nonzero blocks
  EXPECT_DOUBLE_EQ(s.max_block_ur, 31.0 / 32);
  opt.tau_uf = 0;  // every block "reaches" 0, but the all-zero ones have no UR_B
  EXPECT_DOUBLE_EQ(mxfp4_stats(four_blocks(), opt).outlier_block_ratio_uf, 2.0 / 4);
}

// §2.1 D5: crest over blocks with rms_B > 0; none at all for rms = 0.
TEST(Definitions, CrestLeavesOutZeroBlocksAndIsUndefinedForRmsZero) {
  const UnderflowStats s = mxfp4_stats(four_blocks());
  const double crest_ones = 1.0;
  const double crest_mixed = 4.0 / std::sqrt((16.0 + 31 * double(0.2f) * double(0.2f)) / 32);
  EXPECT_NEAR(s.crest_mean, (crest_ones + crest_mixed) / 2, 1e-12);
  EXPECT_NEAR(s.crest_max, crest_mixed, 1e-12);
  const UnderflowStats z = mxfp4_stats(Tensor{{2, 64}, std::vector<float>(128, 0.0f)});
  EXPECT_EQ(z.rms, 0.0);
  EXPECT_TRUE(std::isnan(z.crest_mean) && std::isnan(z.crest_median) && std::isnan(z.crest_q3) &&
              std::isnan(z.crest_max));
  EXPECT_EQ(z.underflow_ratio, 0.0);  // D4: no nonzero input, UR 0
  EXPECT_EQ(z.n_blocks_nonzero, 0);
  EXPECT_EQ(z.mean_block_ur, 0.0);
  EXPECT_EQ(z.outlier_block_ratio_rel, 0.0);
}

// §3.3 R4: kept = floor(P/100 x count + 0.5), so halves round up.
TEST(Definitions, PercentOfANonWholeCountRoundsHalfUp) {
  EXPECT_EQ(kept_count(0.5, 5), 3);  // 2.5
  EXPECT_EQ(kept_count(0.5, 9), 5);  // 4.5
  EXPECT_EQ(kept_count(0.25, 6), 2); // 1.5
  EXPECT_EQ(kept_count(0.2, 6), 1);  // 1.2
  EXPECT_EQ(kept_count(0.01, 3), 0);
  std::vector<float> v(3 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 7) - 3.0f;
  auto kept = [&](const char* p) {
    const std::vector<uint8_t> m = sparsity_mask(parse_pattern(p), v, 3, 5);
    return std::accumulate(m.begin(), m.end(), 0);
  };
  EXPECT_EQ(kept("channel50"), 3 * 3);       // 3 of 5 columns
  EXPECT_EQ(kept("row50"), 2 * 5);           // 2 of 3 rows
  EXPECT_EQ(kept("unstructured50"), 8);      // 7.5 of 15 elements
  EXPECT_EQ(kept("random50"), 8);
  // Tiles of 2 x 2 over 3 x 5: 2 x 3 = 6 tiles, partial edges whole; half = 3.
  const std::vector<uint8_t> m = sparsity_mask(parse_pattern("block2x2"), v, 3, 5);
  int tiles = 0;
  for (int tr = 0; tr < 2; ++tr)
    for (int tc = 0; tc < 3; ++tc) tiles += m[size_t(tr * 2) * 5 + size_t(tc * 2)];
  EXPECT_EQ(tiles, 3);
}

double energy_deleted(const std::vector<float>& v, const std::vector<uint8_t>& keep) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (!keep[i]) s += double(v[i]) * double(v[i]);
  return s;
}

// channelP by plain loops: columns ranked by their L2 norm, ties to the lower.
std::vector<uint8_t> channel_keep(const std::vector<float>& v, int64_t m, int64_t d, int64_t keep) {
  std::vector<double> norm(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < d; ++c) norm[size_t(c)] += double(v[size_t(r * d + c)]) * v[size_t(r * d + c)];
  std::vector<int64_t> idx(static_cast<size_t>(d));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return norm[size_t(a)] > norm[size_t(b)]; });
  std::vector<uint8_t> mask(size_t(m * d), 0);
  for (int64_t k = 0; k < keep; ++k)
    for (int64_t r = 0; r < m; ++r) mask[size_t(r * d + idx[size_t(k)])] = 1;
  return mask;
}

// §3.3 R2 and R3: D_prim prunes Q(X) with a channel mask ranked on Q(X)
// itself; D_res prunes Q(dX) with one ranked on Q(dX), under either order;
// under qs the kept residual is that mask's. `none` has no drop fields.
TEST(Definitions, DropMasksAreRankedOnTheTensorTheyPrune) {
  const int64_t m = 6, d = 64, n = 4;
  Tensor x{{m, d}, std::vector<float>(size_t(m * d))};
  for (int64_t i = 0; i < m * d; ++i) x.data[size_t(i)] = float(std::sin(0.7 * double(i)) * (1 + (i % d) % 5));
  const Tensor w = synthetic_weights(n, d, 3);
  QuantOptions o;
  o.recipe = "nvfp4.te";
  const Tensor qx = fake_quant(x, o);
  Tensor dx{x.shape, std::vector<float>(x.data.size())};
  for (size_t i = 0; i < dx.data.size(); ++i) dx.data[i] = x.data[i] - qx.data[i];
  QuantOptions orr = o;
  const Tensor qdx = fake_quant(dx, orr);
  const std::vector<uint8_t> keep_p = channel_keep(qx.data, m, d, 32), keep_r = channel_keep(qdx.data, m, d, 32);
  ASSERT_NE(keep_p, keep_r);  // the test tells the two masks apart
  for (ResqOrder order : {ResqOrder::qs, ResqOrder::sq}) {
    ResqOptions opt;
    opt.order = order;
    const ResqTensorResult r = study_resq("t", x, w, o, parse_transform("none"), nullptr,
                                          {parse_pattern("none"), parse_pattern("channel50")}, opt);
    const ResqRow& ch = r.rows[1];
    EXPECT_DOUBLE_EQ(ch.sums.drop_prim, energy_deleted(qx.data, keep_p));
    EXPECT_DOUBLE_EQ(ch.sums.drop_res, energy_deleted(qdx.data, keep_r));
    if (order == ResqOrder::qs) {
      double err = 0;
      for (size_t i = 0; i < x.data.size(); ++i) {
        const double e = (double(qx.data[i]) + (keep_r[i] ? double(qdx.data[i]) : 0.0)) - double(x.data[i]);
        err += e * e;
      }
      EXPECT_DOUBLE_EQ(ch.sums.act_err_sq, err);
    }
    const ResqRow& none = r.rows[0];
    EXPECT_TRUE(std::isnan(none.drop_res_mse()) && std::isnan(none.drop_res_rmse()) &&
                std::isnan(none.drop_res_norm()) && std::isnan(none.drop_prim_mse()) &&
                std::isnan(none.drop_prim_rmse()) && std::isnan(none.drop_prim_norm()));
    EXPECT_FALSE(std::isnan(ch.drop_prim_norm()));
  }
}

// §3.3 R1: Q(W) is the recipe along d over the stacked weight: NVFP4's one
// per-tensor scale over q, k and v together, not one per projection.
TEST(Definitions, WeightQuantizedAsStackedWithOneTensorScale) {
  const int64_t d = 32;
  Tensor w{{3, d}, std::vector<float>(size_t(3 * d))};
  for (int64_t i = 0; i < 3 * d; ++i) w.data[size_t(i)] = float((i % 11) - 5) * (i < d ? 100.0f : 0.01f);
  QuantOptions o;
  o.recipe = "nvfp4.te";
  const Tensor stacked = fake_quant(w, o);
  Tensor row1{{1, d}, std::vector<float>(w.data.begin() + d, w.data.begin() + 2 * d)};
  const Tensor alone = fake_quant(row1, o);
  // x = e_j picks one weight element per output: Y_A = X Q(W)^T reads Q(W).
  Tensor x{{1, d}, std::vector<float>(size_t(d), 0.0f)};
  x.data[7] = 1.0f;
  const ResqTensorResult r =
      study_resq("t", x, w, o, parse_transform("none"), nullptr, {parse_pattern("none")}, ResqOptions{});
  double ya_sq = 0;
  for (int64_t k = 0; k < 3; ++k) ya_sq += double(stacked.data[size_t(k * d + 7)]) * stacked.data[size_t(k * d + 7)];
  EXPECT_DOUBLE_EQ(r.rows[0].sums.ya_sq, ya_sq);
  ASSERT_NE(stacked.data[size_t(d + 7)], alone.data[7]);  // the stacked scale differs from a per-projection one
}

}  // namespace
}  // namespace fp4emu::analysis
