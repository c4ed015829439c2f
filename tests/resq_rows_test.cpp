// resq on row pieces (docs/analysis.md §1.6, `--split-rows-above`) against
// the same tensor studied whole: what the pieces share (NVFP4's per-tensor
// amaxes, the patterns' rankings) must give every element the whole
// tensor's Q(X), residual codes and masks; the merged sums differ from the
// whole tensor's only in the order of their additions; and pieces held by
// two "processes" (two threads exchanging through ResqRows::share) give the
// bits of one process holding every piece.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/analysis/resq.hpp"
#include "fp4emu/analysis/sparsity.hpp"
#include "fp4emu/quant/recipe.hpp"

namespace fp4emu::analysis {
namespace {

// 45 rows (pieces of 16, 16, 13: not a multiple of 16) x 128 columns:
// heavy-tailed magnitudes, a hot channel, and the outlier that sets NVFP4's
// per-tensor amax in the last piece only.
Tensor activations() {
  std::mt19937 rng(17);
  std::normal_distribution<float> g(0.0f, 1.5f);
  std::bernoulli_distribution sign(0.5);
  Tensor x{{45, 128}, std::vector<float>(45 * 128)};
  for (float& v : x.data) v = (sign(rng) ? 1.0f : -1.0f) * std::exp(g(rng)) * 0.1f;
  for (int r = 0; r < 45; ++r) x.data[size_t(r * 128 + 33)] *= 20.0f;
  x.data[size_t(40 * 128 + 7)] = 97.0f;
  return x;
}

const std::vector<int64_t> kCuts = {0, 16, 32, 45};

Tensor rows_of(const Tensor& x, int64_t begin, int64_t end) {
  const int64_t d = x.shape[1];
  return Tensor{{end - begin, d}, std::vector<float>(x.data.begin() + begin * d, x.data.begin() + end * d)};
}

// x cut at kCuts.
std::vector<Tensor> pieces_of(const Tensor& x) {
  std::vector<Tensor> pieces;
  for (size_t i = 0; i + 1 < kCuts.size(); ++i) pieces.push_back(rows_of(x, kCuts[i], kCuts[i + 1]));
  return pieces;
}

std::vector<float> concat(const std::vector<Tensor>& parts) {
  std::vector<float> v;
  for (const Tensor& t : parts) v.insert(v.end(), t.data.begin(), t.data.end());
  return v;
}

// The pieces' masks, each statistic merged over every piece in row order.
std::vector<uint8_t> piece_masks(const SparsityPattern& p, const std::vector<Tensor>& pieces, int64_t rows,
                                 int64_t cols) {
  std::vector<RowRange> ranges;
  for (size_t i = 0; i < pieces.size(); ++i) ranges.push_back({rows, cols, kCuts[i], kCuts[i + 1]});
  MaskRanking ranking;
  for (int round = 0; round < ranking_rounds(p); ++round) {
    std::vector<MaskStats> stats;
    for (size_t i = 0; i < pieces.size(); ++i) stats.push_back(mask_stats(p, pieces[i].data, ranges[i], ranking, round));
    merge_mask_stats(p, stats, ranges, round, ranking);
  }
  std::vector<uint8_t> mask;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::vector<uint8_t> m = piece_mask(p, pieces[i].data, ranges[i], i, ranking, 2);
    mask.insert(mask.end(), m.begin(), m.end());
  }
  return mask;
}

const char* const kPatterns[] = {"2:4", "3:7", "row30", "channel50", "block16x48", "block7x9",
                                 "unstructured50", "unstructured3", "random50"};

TEST(ResqRows, PiecesQuantizeAndRankLikeTheWholeTensor) {
  const Tensor x = activations();
  for (Format f : {Format::hif4, Format::mxfp4, Format::nvfp4}) {
    const Recipe& recipe = default_recipe(f);
    SCOPED_TRACE(std::string(recipe.id));
    QuantOptions o;
    o.recipe = std::string(recipe.id);
    const Tensor qx = fake_quant(x, o);
    Tensor dx = x;
    for (size_t i = 0; i < dx.data.size(); ++i) dx.data[i] = x.data[i] - qx.data[i];
    const Tensor rq = fake_quant(dx, o);
    // The pieces: the amax phases as study_resq_rows runs them.
    std::vector<Tensor> xs, qxs, dxs, rqs;
    std::vector<float> amaxes;
    for (size_t i = 0; i + 1 < kCuts.size(); ++i) {
      xs.push_back(rows_of(x, kCuts[i], kCuts[i + 1]));
      if (auto a = piece_amax(recipe, xs.back().data)) amaxes.push_back(*a);
    }
    QuantOptions ox = o;
    if (f == Format::nvfp4) ox.global_amax = *piece_amax(recipe, amaxes);
    amaxes.clear();
    for (const Tensor& p : xs) {
      qxs.push_back(fake_quant(p, ox));
      dxs.push_back(p);
      for (size_t i = 0; i < p.data.size(); ++i) dxs.back().data[i] = p.data[i] - qxs.back().data[i];
      if (auto a = piece_amax(recipe, dxs.back().data)) amaxes.push_back(*a);
    }
    QuantOptions orr = o;
    if (f == Format::nvfp4) orr.global_amax = *piece_amax(recipe, amaxes);
    for (const Tensor& p : dxs) rqs.push_back(fake_quant(p, orr));
    ASSERT_EQ(concat(qxs), qx.data);
    ASSERT_EQ(concat(rqs), rq.data);
    for (const char* name : kPatterns) {
      const SparsityPattern p = parse_pattern(name, 0.5, 9);
      SCOPED_TRACE(name);
      // channel and cut block tiles add their pieces' norms in another order
      // than one pass (docs/analysis.md §1.6); on these values no two norms
      // are equal to the last digits, so their masks are the whole tensor's too.
      EXPECT_EQ(piece_masks(p, rqs, 45, 128), sparsity_mask(p, rq.data, 45, 128));
      EXPECT_EQ(piece_masks(p, qxs, 45, 128), sparsity_mask(p, qx.data, 45, 128));
      EXPECT_EQ(piece_masks(p, dxs, 45, 128), sparsity_mask(p, dx.data, 45, 128));
    }
  }
}

// Unstructured ties across piece boundaries: an all-equal matrix keeps the
// lowest indices, i.e. the earliest pieces' ties first.
TEST(ResqRows, UnstructuredTiesGoToTheEarliestPieces) {
  const Tensor flat{{45, 128}, std::vector<float>(45 * 128, -2.5f)};
  const std::vector<Tensor> pieces = pieces_of(flat);
  for (const char* name : {"unstructured50", "unstructured1", "unstructured99"}) {
    const SparsityPattern p = parse_pattern(name);
    const std::vector<uint8_t> mask = piece_masks(p, pieces, 45, 128);
    EXPECT_EQ(mask, sparsity_mask(p, flat.data, 45, 128)) << name;
    const int64_t k = kept_count(p.density, 45 * 128);
    for (int64_t i = 0; i < 45 * 128; ++i) ASSERT_EQ(mask[size_t(i)], i < k ? 1 : 0) << name << " " << i;
  }
}

ResqRows held_rows(const std::vector<Tensor>& pieces, std::vector<size_t> mine) {
  ResqRows rows;
  rows.begin = kCuts;
  for (size_t i : mine) rows.x.emplace_back(pieces[i]);
  rows.mine = std::move(mine);
  rows.share = [](std::vector<std::string> local) { return local; };
  return rows;
}

std::vector<QuantOptions> recipes_of(std::initializer_list<Format> formats) {
  std::vector<QuantOptions> out;
  for (Format f : formats) {
    QuantOptions o;
    o.recipe = std::string(default_recipe(f).id);
    o.threads = 1;
    out.push_back(o);
  }
  return out;
}

std::vector<SparsityPattern> all_patterns() {
  std::vector<SparsityPattern> v;
  for (const char* n : {"none", "dense", "2:4", "row30", "channel50", "block16x48", "block7x9", "unstructured50",
                        "random50"})
    v.push_back(parse_pattern(n, 0.5, 4));
  return v;
}

TEST(ResqRows, MergedPiecesGiveTheWholeTensorsNumbers) {
  const Tensor x = activations();
  const Tensor w = synthetic_weights(24, 128, 3);
  const std::vector<Tensor> pieces = pieces_of(x);
  const std::vector<SparsityPattern> patterns = all_patterns();
  const std::vector<QuantOptions> recipes = recipes_of({Format::hif4, Format::mxfp4, Format::nvfp4});
  for (const char* t : {"none", "rht"})
    for (ResqOrder order : {ResqOrder::qs, ResqOrder::sq}) {
      SCOPED_TRACE(std::string(t) + (order == ResqOrder::qs ? " qs" : " sq"));
      const TransformSpec spec = parse_transform(t);
      const ResqOptions opt{order, ResqGemm::f64};  // row by row in double: the same products either way
      const std::vector<ResqTensorResult> whole = study_resq("x", x, w, recipes, spec, nullptr, patterns, opt);
      const std::optional<ResqPieceResults> parts =
          study_resq_rows("x", 128, held_rows(pieces, {0, 1, 2}), w, recipes, spec, patterns, opt);
      ASSERT_TRUE(parts);
      const std::vector<ResqTensorResult> merged = merge_resq_pieces(*parts);
      ASSERT_EQ(merged.size(), whole.size());
      for (size_t ri = 0; ri < whole.size(); ++ri) {
        EXPECT_EQ(merged[ri].residual_inexact, whole[ri].residual_inexact);
        ASSERT_EQ(merged[ri].rows.size(), patterns.size());
        for (size_t k = 0; k < patterns.size(); ++k) {
          const ResqSums &a = merged[ri].rows[k].sums, &b = whole[ri].rows[k].sums;
          SCOPED_TRACE(testing::Message() << "recipe " << ri << " " << patterns[k].name);
          // Exact: counts, the kept positions, the maximum.
          EXPECT_EQ(a.x_count, b.x_count);
          EXPECT_EQ(a.y_count, b.y_count);
          EXPECT_EQ(a.kept, b.kept);
          EXPECT_EQ(a.mdn, b.mdn);
          EXPECT_EQ(a.max_abs_out, b.max_abs_out);
          // Sums: the same terms, added piece by piece.
          for (auto [u, v] : {std::pair{a.x_sq, b.x_sq}, {a.act_err_sq, b.act_err_sq}, {a.ya_sq, b.ya_sq},
                              {a.out_err_sq, b.out_err_sq}, {a.y_sq, b.y_sq}, {a.out_err_y_sq, b.out_err_y_sq},
                              {a.yhat_sq, b.yhat_sq}, {a.yhat_dot_ya, b.yhat_dot_ya},
                              {a.none_out_err_sq, b.none_out_err_sq}, {a.drop_res, b.drop_res},
                              {a.res_sq, b.res_sq}, {a.drop_prim, b.drop_prim}, {a.prim_sq, b.prim_sq}})
            EXPECT_NEAR(u, v, 1e-12 * std::fabs(v));
        }
      }
    }
}

// Two processes as two threads: each holds some pieces and share() trades
// the payloads through slots between two barriers.
struct TwoProcesses {
  std::barrier<> sync{2};
  std::vector<std::string> slots = std::vector<std::string>(3);

  std::function<std::vector<std::string>(std::vector<std::string>)> share(std::vector<size_t> mine) {
    return [this, mine](std::vector<std::string> local) {
      for (size_t k = 0; k < mine.size(); ++k) slots[mine[k]] = std::move(local[k]);
      sync.arrive_and_wait();
      std::vector<std::string> all = slots;
      sync.arrive_and_wait();
      return all;
    };
  }
};

TEST(ResqRows, PiecesHeldByTwoProcessesGiveTheBitsOfOne) {
  const Tensor x = activations();
  const Tensor w = synthetic_weights(24, 128, 3);
  const std::vector<Tensor> pieces = pieces_of(x);
  const std::vector<SparsityPattern> patterns = all_patterns();
  const std::vector<QuantOptions> recipes = recipes_of({Format::mxfp4, Format::nvfp4});
  for (ResqOrder order : {ResqOrder::qs, ResqOrder::sq}) {
    const ResqOptions opt{order, ResqGemm::fast};
    const TransformSpec spec = parse_transform("none");
    const ResqPieceResults one = *study_resq_rows("x", 128, held_rows(pieces, {0, 1, 2}), w, recipes, spec,
                                                  patterns, opt);
    TwoProcesses job;
    ResqRows a = held_rows(pieces, {0, 2}), b = held_rows(pieces, {1});
    a.share = job.share(a.mine), b.share = job.share(b.mine);
    std::optional<ResqPieceResults> got_a, got_b;
    std::thread other([&] { got_b = study_resq_rows("x", 128, b, w, recipes, spec, patterns, opt); });
    got_a = study_resq_rows("x", 128, a, w, recipes, spec, patterns, opt);
    other.join();
    ASSERT_TRUE(got_a && got_b);
    const std::vector<std::vector<ResqTensorResult>> two = {(*got_a)[0], (*got_b)[0], (*got_a)[1]};
    const std::vector<ResqTensorResult> m1 = merge_resq_pieces(one), m2 = merge_resq_pieces(two);
    for (size_t ri = 0; ri < m1.size(); ++ri)
      for (size_t k = 0; k < patterns.size(); ++k) {
        const ResqSums &u = m1[ri].rows[k].sums, &v = m2[ri].rows[k].sums;
        SCOPED_TRACE(patterns[k].name);
        EXPECT_EQ(0, std::memcmp(&u, &v, sizeof u));  // every field, bit for bit
      }
  }
}

}  // namespace
}  // namespace fp4emu::analysis
