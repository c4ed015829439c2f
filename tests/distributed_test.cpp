// The pieces of the MPI layer that run without MPI (tools/fp4emu/distributed.hpp):
// the split of tensors over ranks and the byte encoding of results. The
// ranks themselves are tested under mpirun by tests/mpi/mpi_reproduce.py.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "distributed.hpp"
#include "src/io/byte_stream.hpp"

namespace fp4emu::cli::dist {
namespace {

TEST(DistributedSplit, LargestFirstToTheLeastLoadedRank) {
  const std::vector<uint64_t> costs = {10, 40, 40, 5, 30, 0};
  // 40 (item 1) -> 0, 40 (item 2) -> 1, 30 -> 2, 10 -> 2 (load 30 < 40), 5 -> 0, 0 -> 1.
  EXPECT_EQ(assign(costs, 3), (std::vector<int>{2, 0, 1, 0, 2, 1}));
  EXPECT_EQ(assign(costs, 1), (std::vector<int>(costs.size(), 0)));
  // More ranks than items: each item alone, the rest idle.
  EXPECT_EQ(assign(std::vector<uint64_t>{7, 7}, 4), (std::vector<int>{0, 1}));
}

TEST(DistributedSplit, EveryItemOnceWhateverTheRanks) {
  std::vector<uint64_t> costs;
  for (uint64_t i = 0; i < 37; ++i) costs.push_back((i * 7919) % 101);
  for (int ranks = 1; ranks <= 9; ++ranks) {
    const std::vector<int> owner = assign(costs, ranks);
    ASSERT_EQ(owner.size(), costs.size());
    std::vector<uint64_t> load(size_t(ranks), 0);
    for (size_t i = 0; i < owner.size(); ++i) {
      ASSERT_GE(owner[i], 0);
      ASSERT_LT(owner[i], ranks);
      load[size_t(owner[i])] += costs[i];
    }
    // Greedy largest-first: no rank exceeds the mean by more than the largest item.
    uint64_t total = 0, largest = 0;
    for (uint64_t c : costs) total += c, largest = std::max(largest, c);
    for (uint64_t l : load) EXPECT_LE(l, total / uint64_t(ranks) + largest) << ranks << " ranks";
  }
}

TEST(DistributedBytes, RoundTripKeepsEveryBit) {
  io::ByteWriter w;
  const std::vector<double> v = {1.0, -0.0, std::numeric_limits<double>::quiet_NaN(),
                                 std::numeric_limits<double>::infinity(), 0x1.fffffffffffffp-1};
  const std::map<int, int64_t> hist = {{-3, 5}, {7, 1}};
  const std::optional<int64_t> some = 42, none;
  w.put(std::string("model.layers.0.q_proj, \"quoted\""));
  w.put(v), w.put(hist), w.put(some), w.put(none), w.put(std::vector<std::string>{"a", "", "bc"});
  w.put(int32_t{-7});
  const std::string bytes = w.take();

  io::ByteReader r(bytes);
  EXPECT_EQ(r.get<std::string>(), "model.layers.0.q_proj, \"quoted\"");
  const std::vector<double> v2 = r.get<std::vector<double>>();
  ASSERT_EQ(v2.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(std::signbit(v2[i]), std::signbit(v[i]));
    EXPECT_EQ(std::isnan(v2[i]), std::isnan(v[i]));
  }
  EXPECT_EQ(v2[4], v[4]);
  EXPECT_EQ((r.get<std::map<int, int64_t>>()), hist);
  EXPECT_EQ(r.get<std::optional<int64_t>>(), some);
  EXPECT_EQ(r.get<std::optional<int64_t>>(), none);
  EXPECT_EQ(r.get<std::vector<std::string>>(), (std::vector<std::string>{"a", "", "bc"}));
  EXPECT_EQ(r.get<int32_t>(), -7);
  EXPECT_TRUE(r.done());
}

TEST(DistributedBytes, ShortInputIsRefused) {
  io::ByteWriter w;
  w.put(std::vector<double>{1, 2, 3});
  std::string bytes = w.take();
  bytes.pop_back();
  io::ByteReader r(bytes);
  EXPECT_THROW((void)r.get<std::vector<double>>(), std::logic_error);
}

TEST(DistributedJob, AloneWithoutLauncher) {
  // The test binary is not started by mpirun: one rank, results as computed.
  EXPECT_EQ(size(), 1);
  EXPECT_TRUE(is_root());
  EXPECT_EQ(where(), "");
  const std::vector<uint64_t> costs = {3, 1, 2};
  const std::vector<int> got = map_items<int>(
      costs,
      [](const std::vector<size_t>& items) {
        std::vector<int> out;
        for (size_t i : items) out.push_back(int(i) * 10);
        return out;
      },
      [](Writer&, const int&) { FAIL() << "no encoding when alone"; }, [](Reader&, int&) { FAIL(); });
  EXPECT_EQ(got, (std::vector<int>{0, 10, 20}));
}

TEST(DistributedRows, PiecesOfWholeTileRowsAboveTheThresholdOnly) {
  // 100 rows of 64 bytes (6400 bytes) above 1000 bytes: 1000 / 64 = 15 rows fit, rounded up to one tile of 16.
  const std::vector<RowShape> shapes = {{100, 64, true}, {100, 64, false}, {10, 64, true}, {7, 4096, true}};
  const RowPlan plan = plan_rows(shapes, 1000);
  ASSERT_EQ(plan.first.size(), shapes.size() + 1);
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (const Piece& p : plan.of(0)) rows.emplace_back(p.row_begin, p.row_end);
  // The last piece ragged: 100 is not a multiple of 16.
  EXPECT_EQ(rows, (std::vector<std::pair<int64_t, int64_t>>{{0, 16}, {16, 32}, {32, 48}, {48, 64}, {64, 80},
                                                            {80, 96}, {96, 100}}));
  EXPECT_EQ(plan.of(0).back().bytes, 4u * 64u);
  EXPECT_TRUE(plan.split(0));
  EXPECT_FALSE(plan.split(1));  // not splittable
  EXPECT_FALSE(plan.split(2));  // 640 bytes: under the threshold
  EXPECT_FALSE(plan.split(3));  // 7 rows of 4 KiB: fewer rows than a tile
  EXPECT_TRUE(plan.of(1)[0].whole(shapes[1]));
  // Larger than the threshold by rows that fit it: pieces of as many whole tiles as fit.
  const RowPlan wide = plan_rows(shapes, 64 * 40);
  EXPECT_EQ(wide.of(0).size(), 4u);  // 32, 32, 32, 4 rows
  EXPECT_EQ(wide.of(0)[1].row_begin, 32);
  // Under the threshold: one piece each, whatever their size.
  const RowPlan none = plan_rows(shapes, 1 << 20);
  EXPECT_EQ(none.pieces.size(), shapes.size());
  uint64_t total = 0;
  for (uint64_t c : none.costs()) total += c;
  EXPECT_EQ(total, 6400u + 6400u + 640u + 7u * 4096u);
  EXPECT_EQ(none.note(1 << 20), "");
  EXPECT_EQ(plan.note(1000), "1 tensor(s) above --split-rows-above 1000 bytes studied as 7 row pieces\n");
}

TEST(DistributedRows, RowsAreEveryAxisButTheLast) {
  const RowShape m = row_shape({3, 41, 128}, 2, true);
  EXPECT_EQ(m.rows, 123);
  EXPECT_EQ(m.row_bytes, 256u);
  EXPECT_TRUE(m.splittable);
  const RowShape v = row_shape({4096}, 4, true);  // a vector: one row, never split
  EXPECT_EQ(v.rows, 1);
  EXPECT_EQ(v.row_bytes, 4096u * 4u);
  EXPECT_FALSE(v.splittable);
  EXPECT_FALSE(row_shape({64, 64}, 4, false).splittable);
}

TEST(DistributedJob, AloneTheSharedResultsAreTheResults) {
  const std::vector<uint64_t> costs = {1, 2};
  const std::vector<int> got = shared_items<int>(
      costs,
      [](const std::vector<size_t>& items) {
        std::vector<int> out;
        for (size_t i : items) out.push_back(int(i) + 5);
        return out;
      },
      [](Writer&, const int&) { FAIL() << "no encoding when alone"; }, [](Reader&, int&) { FAIL(); });
  EXPECT_EQ(got, (std::vector<int>{5, 6}));
  EXPECT_EQ(broadcast("abc"), "abc");
}

}  // namespace
}  // namespace fp4emu::cli::dist
