// Underflow statistics against plain double loops on crafted tensors: a
// hand-made MXFP4 tensor with known answers, and random tensors of every
// format checked field by field against an independent recomputation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/error.hpp"

namespace fp4emu::analysis {
namespace {

UnderflowStats stats_of(const Tensor& x, const std::string& recipe) {
  QuantOptions o;
  o.recipe = recipe;
  return study_underflow(x, o, parse_transform("none"), nullptr, nullptr, UnderflowOptions{});
}

// MXFP4 (OCP floor scale, RNE): a block with amax 4 has scale 1, so 0.2
// flushes, 0.25 ties to the even code 0, 1.0 is exact; amax 7.5 also has
// scale 1 and 7.5 is clipped to 6.
TEST(UnderflowStats, HandMadeMxfp4Tensor) {
  std::vector<float> v(64, 0.0f);
  v[0] = 4.0f;
  for (int i = 1; i <= 10; ++i) v[i] = (i % 2) ? 0.2f : -0.2f;
  for (int i = 11; i < 32; ++i) v[i] = 1.0f;
  v[32] = 7.5f, v[33] = 0.25f, v[34] = 0.2500001f;
  const UnderflowStats s = stats_of(Tensor{{1, 64}, v}, "mxfp4.ocp");
  EXPECT_EQ(s.n, 64);
  EXPECT_EQ(s.n_nonzero, 35);
  EXPECT_EQ(s.n_underflow, 11);
  EXPECT_DOUBLE_EQ(s.underflow_ratio, 11.0 / 35);
  EXPECT_EQ(s.n_zero_after, 40);  // 11 flushed + 29 zeros
  EXPECT_EQ(s.n_blocks, 2);
  EXPECT_DOUBLE_EQ(s.blocks_with_underflow_ratio, 1.0);
  EXPECT_DOUBLE_EQ(s.mean_block_ur, (10.0 / 32 + 1.0 / 3) / 2);
  EXPECT_DOUBLE_EQ(s.max_block_ur, 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.p99_block_ur, 10.0 / 32 + 0.99 * (1.0 / 3 - 10.0 / 32));
  ASSERT_TRUE(s.n_saturated.has_value());
  EXPECT_EQ(*s.n_saturated, 1);
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_abs, 0.5);  // 7.5 >= 6
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_rel, 0.0);  // 7.5 < 8 * median(4, 7.5)
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_uf, 0.0);
  const double crest0 = 4.0 / std::sqrt((16.0 + 10 * double(0.2f) * double(0.2f) + 21.0) / 32);
  const double crest1 =
      7.5 / std::sqrt((56.25 + 0.0625 + double(0.2500001f) * double(0.2500001f)) / 32);
  EXPECT_NEAR(s.crest_mean, (crest0 + crest1) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(s.max_abs, 7.5);
  EXPECT_DOUBLE_EQ(s.token_ur[0], 11.0 / 35);
  EXPECT_DOUBLE_EQ(s.channel_ur[1], 1.0);
  EXPECT_DOUBLE_EQ(s.channel_ur[0], 0.0);
  EXPECT_TRUE(std::isnan(s.channel_ur[40]));  // all-zero column: UR undefined
  EXPECT_EQ(s.block_flushed[0], 10);
  EXPECT_EQ(s.block_flushed[1], 1);
  // log2 histogram: 0.2 is in [2^-3, 2^-2), 0.25 and 0.2500001 in [2^-2, 2^-1).
  EXPECT_EQ(s.log2_hist_underflow.at(-3), 10);
  EXPECT_EQ(s.log2_hist_underflow.at(-2), 1);
  EXPECT_EQ(s.log2_hist_all.at(-2), 2);
}

// Every field recomputed with plain loops from x and Q(x).
void check_against_loops(const Tensor& x, const std::string& recipe) {
  QuantOptions o;
  o.recipe = recipe;
  const UnderflowStats s = stats_of(x, recipe);
  const Tensor q = fake_quant(x, o);
  const int64_t m = x.shape[0], d = x.shape[1];
  const int b = block_size(resolve_options(o, x.shape).recipe->format);
  const int64_t nb = (d + b - 1) / b;
  int64_t nz = 0, fl = 0, z = 0;
  double xx = 0, ee = 0, qq = 0, xq = 0;
  std::vector<double> ur_b, amax(m * nb, 0), crest;
  int64_t with = 0, oabs = 0, orel = 0, ouf = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t blk = 0; blk < nb; ++blk) {
      int64_t bnz = 0, bfl = 0, len = 0;
      double sq = 0;
      for (int64_t c = blk * b; c < std::min(d, (blk + 1) * b); ++c) {
        const double a = x.data[r * d + c], qa = q.data[r * d + c];
        ++len;
        sq += a * a;
        amax[r * nb + blk] = std::max(amax[r * nb + blk], std::fabs(a));
        xx += a * a, ee += (a - qa) * (a - qa), qq += qa * qa, xq += a * qa;
        if (qa == 0) ++z;
        if (a != 0) {
          ++nz, ++bnz;
          if (qa == 0) ++fl, ++bfl;
        }
      }
      if (sq > 0) crest.push_back(amax[r * nb + blk] / std::sqrt(sq / len));
      if (amax[r * nb + blk] >= 6.0) ++oabs;
      if (bnz) {
        ur_b.push_back(double(bfl) / bnz);
        with += bfl > 0;
        ouf += double(bfl) / bnz >= 0.5;
      }
    }
  std::vector<double> sorted = amax;
  std::sort(sorted.begin(), sorted.end());
  const double h = (sorted.size() - 1) * 0.5;
  const double med = sorted[size_t(h)] + (h - std::floor(h)) * (sorted[std::min(sorted.size() - 1, size_t(h) + 1)] -
                                                                sorted[size_t(h)]);
  for (double a : amax) orel += a > 0 && a >= 8 * med;
  std::sort(ur_b.begin(), ur_b.end());
  double mean = 0, cmean = 0;
  for (double u : ur_b) mean += u;
  for (double k : crest) cmean += k;
  const double hp = (ur_b.size() - 1) * 0.99;
  const size_t lo = size_t(hp);
  const double p99 = lo + 1 < ur_b.size() ? ur_b[lo] + (hp - lo) * (ur_b[lo + 1] - ur_b[lo]) : ur_b.back();

  SCOPED_TRACE(recipe);
  EXPECT_EQ(s.n_nonzero, nz);
  EXPECT_EQ(s.n_underflow, fl);
  EXPECT_EQ(s.n_zero_after, z);
  EXPECT_DOUBLE_EQ(s.underflow_ratio, double(fl) / nz);
  EXPECT_DOUBLE_EQ(s.blocks_with_underflow_ratio, double(with) / (m * nb));
  EXPECT_NEAR(s.mean_block_ur, mean / ur_b.size(), 1e-12);
  EXPECT_DOUBLE_EQ(s.p99_block_ur, p99);
  EXPECT_DOUBLE_EQ(s.max_block_ur, ur_b.back());
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_abs, double(oabs) / (m * nb));
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_rel, double(orel) / (m * nb));
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_uf, double(ouf) / (m * nb));
  EXPECT_NEAR(s.crest_mean, cmean / crest.size(), 1e-12);
  EXPECT_NEAR(s.qsnr_db, 10 * std::log10(xx / ee), 1e-9);
  EXPECT_NEAR(s.rel_l2, std::sqrt(ee / xx), 1e-12);
  EXPECT_NEAR(s.cosine, xq / std::sqrt(xx * qq), 1e-12);
  for (int64_t r = 0; r < m; ++r) {
    int64_t tn = 0, tf = 0;
    for (int64_t c = 0; c < d; ++c)
      if (x.data[r * d + c] != 0) ++tn, tf += q.data[r * d + c] == 0;
    if (tn) { EXPECT_DOUBLE_EQ(s.token_ur[r], double(tf) / tn); }
  }
  for (int64_t c = 0; c < d; ++c) {
    int64_t cn = 0, cf = 0;
    for (int64_t r = 0; r < m; ++r)
      if (x.data[r * d + c] != 0) ++cn, cf += q.data[r * d + c] == 0;
    if (cn) { EXPECT_DOUBLE_EQ(s.channel_ur[c], double(cf) / cn); }
  }
}

TEST(UnderflowStats, AgreesWithPlainLoopsForEveryFormat) {
  std::mt19937 rng(42);
  std::normal_distribution<float> g;
  std::uniform_int_distribution<int> coin(0, 9);
  // 24 x 200: a tail block for every format; zeros, hot channels, a massive token.
  std::vector<float> v(24 * 200);
  for (size_t i = 0; i < v.size(); ++i) v[i] = coin(rng) == 0 ? 0.0f : g(rng);
  for (int r = 0; r < 24; ++r) v[r * 200 + 17] *= 40.0f, v[r * 200 + 150] *= 25.0f;
  for (int c = 0; c < 200; ++c) v[c] *= 30.0f;
  const Tensor x{{24, 200}, v};
  for (const char* r : {"hif4.v14", "hif4.v14_f64", "mxfp4.ocp", "mxfp4.ceil", "nvfp4.te", "nvfp4.torchao"})
    check_against_loops(x, r);
}

TEST(UnderflowStats, SaturationIsUnknownWithoutPackedForm) {
  const Tensor x{{1, 32}, std::vector<float>(32, 1.0f)};
  EXPECT_FALSE(stats_of(x, "nvfp4.modelopt_fq").n_saturated.has_value());
  EXPECT_TRUE(stats_of(x, "nvfp4.te").n_saturated.has_value());
}

TEST(UnderflowStats, NonFiniteInputsAreCountedAndSkipped) {
  std::vector<float> v(32, 1.0f);
  v[3] = std::nanf("");
  v[4] = INFINITY;
  const UnderflowStats s = stats_of(Tensor{{1, 32}, v}, "nvfp4.te");
  EXPECT_EQ(s.n_nonfinite, 2);
  EXPECT_EQ(s.n, 30);
}

TEST(UnderflowNames, LayerAndKind) {
  auto role = [](const char* n) { return parse_tensor_role(n); };
  EXPECT_EQ(role("model.layers.12.mlp.down_proj.input").layer, 12);
  EXPECT_EQ(role("model.layers.12.mlp.down_proj.input").kind, "down_in");
  EXPECT_EQ(role("model.layers.0.self_attn.k_proj.input").kind, "qkv_in");
  EXPECT_EQ(role("model.layers.0.self_attn.qkv_proj.input").proj, "qkv");
  EXPECT_EQ(role("model.layers.3.self_attn.o_proj.input").kind, "o_in");
  EXPECT_EQ(role("model.layers.3.mlp.gate_up_proj.input").kind, "gateup_in");
  EXPECT_EQ(role("model.layers.3.mlp.up_proj.input").kind, "gateup_in");
  EXPECT_EQ(role("layer7/down_in").layer, 7);
  EXPECT_EQ(role("layer7/down_in").kind, "down_in");
  EXPECT_EQ(role("x").layer, -1);
  EXPECT_EQ(role("x").kind, "");
}

TEST(UnderflowRecipes, SelectionAndScaleRule) {
  auto ids = [](const std::vector<const Recipe*>& v) {
    std::vector<std::string> s;
    for (const Recipe* r : v) s.emplace_back(r->id);
    return s;
  };
  EXPECT_EQ(ids(study_recipes({}, {}, "")), (std::vector<std::string>{"hif4.v14", "mxfp4.ocp", "nvfp4.te"}));
  EXPECT_EQ(ids(study_recipes({"mxfp4"}, {}, "ceil")), (std::vector<std::string>{"mxfp4.rceil"}));
  EXPECT_EQ(ids(study_recipes({}, {"nvfp4.torchao", "hif4"}, "")),
            (std::vector<std::string>{"nvfp4.torchao", "hif4.v14"}));
  EXPECT_THROW(study_recipes({"fp8"}, {}, ""), InputError);
  EXPECT_THROW(study_recipes({}, {"mxfp4.nope"}, ""), InputError);
  EXPECT_THROW(study_recipes({}, {}, "floor"), InputError);
}

}  // namespace
}  // namespace fp4emu::analysis
