// Sparsity masks (sparsity.hpp, docs/analysis.md §3.2).
#include "fp4emu/analysis/sparsity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "fp4emu/analysis/transforms.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/threads.hpp"
#include "src/analysis/chunks.hpp"

namespace fp4emu::analysis {
namespace {

using Kind = SparsityPattern::Kind;

constexpr std::string_view kAccepted =
    "none, dense, N:M (1 <= N < M <= 16, e.g. 2:4, 4:8, 1:4), channelP, rowP, unstructuredP, randomP "
    "(P = kept percent, e.g. channel50), blockRxC (e.g. block32x64: R tokens x C channels)";

bool parse_int(std::string_view s, int& out) {
  if (s.empty() || s.size() > 6) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

[[noreturn]] void bad(std::string_view text, std::string_view why) {
  throw InputError(fmt::format("--pattern '{}': {}; accepted: {}", io::printable(text, 60), why, kAccepted));
}

// Indices 0..count-1 ordered by score, largest first, ties to the lower index.
std::vector<int64_t> ranking(const std::vector<double>& score) {
  std::vector<int64_t> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
  return idx;
}

}  // namespace

int64_t kept_count(double fraction, int64_t count) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::floor(fraction * double(count) + 0.5)), 0, count);
}

SparsityPattern parse_pattern(std::string_view text, double default_density, uint64_t seed) {
  SparsityPattern p;
  p.seed = seed;
  p.density = default_density;
  // The default density is not the pattern's fault: name it, and check it
  // only for the patterns that use it.
  auto check_density = [&] {
    if (!(default_density > 0 && default_density < 1))
      throw InputError(fmt::format("--density {} is out of range: pattern '{}' keeps that fraction of its entries, "
                                   "which must be in (0, 1), e.g. --density 0.5",
                                   default_density, text));
  };
  std::string_view t = text;
  // docs/analysis.md §3 spellings.
  if (t == "chan50") t = "channel50";
  else if (t == "tok50") t = "row50";
  else if (t == "top50") t = "unstructured50";
  else if (t == "rand50") t = "random50";
  std::string blk;
  if (t.substr(0, 4) == "blk:") {
    blk = "block" + std::string(t.substr(4));
    t = blk;
  }

  if (t == "none" || t == "dense") {
    p.kind = t == "none" ? Kind::none : Kind::dense;
    p.density = t == "none" ? 0.0 : 1.0;
    p.name = std::string(t);
    return p;
  }
  if (const size_t colon = t.find(':'); colon != std::string_view::npos) {
    int n = 0, m = 0;
    if (!parse_int(t.substr(0, colon), n) || !parse_int(t.substr(colon + 1), m)) bad(text, "N:M needs two integers");
    if (!(n >= 1 && n < m && m <= 16)) bad(text, "N:M needs 1 <= N < M <= 16");
    p.kind = Kind::n_of_m;
    p.n = n, p.m = m;
    p.density = double(n) / m;
    p.name = fmt::format("{}:{}", n, m);
    return p;
  }
  if (t.substr(0, 5) == "block") {
    const std::string_view dims = t.substr(5);
    const size_t x = dims.find('x');
    int r = 0, c = 0;
    if (x == std::string_view::npos || !parse_int(dims.substr(0, x), r) || !parse_int(dims.substr(x + 1), c) ||
        r < 1 || c < 1)
      bad(text, "a block pattern is blockRxC with R, C >= 1");
    check_density();
    p.kind = Kind::block;
    p.block_rows = r, p.block_cols = c;
    p.name = fmt::format("block{}x{}", r, c);
    return p;
  }
  for (auto [word, kind] : {std::pair{std::string_view("channel"), Kind::channel}, {"row", Kind::row},
                            {"unstructured", Kind::unstructured}, {"random", Kind::random}}) {
    if (t.substr(0, word.size()) != word) continue;
    const std::string_view pct = t.substr(word.size());
    p.kind = kind;
    if (!pct.empty()) {
      int v = 0;
      if (!parse_int(pct, v) || v < 1 || v > 99) bad(text, "the kept percent must be 1..99");
      p.density = v / 100.0;
    } else {
      check_density();
    }
    p.name = fmt::format("{}{}", word, int(std::lround(p.density * 100)));
    if (std::fabs(p.density * 100 - std::round(p.density * 100)) > 1e-9)
      p.name = fmt::format("{}{:g}", word, p.density * 100);
    return p;
  }
  bad(text, "unknown pattern");
}

namespace {

// |v| as an unsigned key: for finite floats (and +-0, which tie) the order of
// the keys is the order of the magnitudes.
uint32_t magnitude_key(float v) { return std::bit_cast<uint32_t>(v) & 0x7fffffffu; }

// Counts of keys by 16-bit digit: the high digits, or the low digits of the
// keys whose high digit is `high`. Integer counts: the same for any thread count.
std::vector<int64_t> digit_histogram(std::span<const float> values, bool low_digit, uint32_t high, int threads) {
  const int64_t total = int64_t(values.size());
  std::vector<int64_t> count(1 << 16, 0);
#pragma omp parallel num_threads(thread_count(threads))
  {
    std::vector<int64_t> mine(1 << 16, 0);
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < total; ++i) {
      const uint32_t key = magnitude_key(values[i]);
      if (!low_digit) ++mine[key >> 16];
      else if ((key >> 16) == high) ++mine[key & 0xffffu];
    }
#pragma omp critical
    for (size_t b = 0; b < mine.size(); ++b) count[b] += mine[b];
  }
  return count;
}

// The digit at which the running count from the top reaches `need`, and the
// count strictly above it.
uint32_t find_digit(const std::vector<int64_t>& count, int64_t need, int64_t& above) {
  above = 0;
  for (int64_t b = int64_t(count.size()) - 1; b >= 0; --b) {
    if (above + count[b] >= need) return uint32_t(b);
    above += count[b];
  }
  return 0;  // unreachable: the counts add up to at least need
}

// The piece's tile rows [first, last) of a block pattern.
std::pair<int64_t, int64_t> tile_rows(const SparsityPattern& p, const RowRange& r) {
  if (r.end <= r.begin) return {0, 0};
  return {r.begin / p.block_rows, (r.end - 1) / p.block_rows + 1};
}

int64_t tile_cols(const SparsityPattern& p, int64_t cols) { return (cols + p.block_cols - 1) / p.block_cols; }

// The unstructured mask needs every element ranked: trivial when it keeps
// nothing or everything.
bool keeps_all_or_none(const MaskRanking& k, int64_t total) { return k.k <= 0 || k.k >= total; }

}  // namespace

int ranking_rounds(const SparsityPattern& p) {
  switch (p.kind) {
    case Kind::row:
    case Kind::channel:
    case Kind::block: return 1;
    case Kind::unstructured: return 3;
    default: return 0;
  }
}

// Each statistic adds its elements in the order one thread over the whole
// matrix would (rows in order; for a column, a row or a tile, its elements in
// row-major order); the threads share rows, column slices or tile rows.
MaskStats mask_stats(const SparsityPattern& p, std::span<const float> values, const RowRange& r,
                     const MaskRanking& ranking, int round, int threads) {
  if (values.size() != size_t(r.size())) throw std::invalid_argument("mask_stats: values do not match the rows");
  const int nt = thread_count(threads);
  const int64_t rows = r.end - r.begin, cols = r.cols;
  auto sq = [&](int64_t i) { return std::fabs(double(values[i])) * std::fabs(double(values[i])); };
  MaskStats s;
  switch (p.kind) {
    case Kind::row: {
      s.norms.assign(size_t(rows), 0.0);
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < cols; ++c) s.norms[i] += sq(i * cols + c);
      break;
    }
    case Kind::channel: {
      // Columns in fixed slices of 64, each thread adding its columns' rows in row order.
      s.norms.assign(size_t(cols), 0.0);
      const int64_t slices = (cols + 63) / 64;
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t sl = 0; sl < slices; ++sl)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t c = sl * 64; c < std::min(cols, sl * 64 + 64); ++c) s.norms[c] += sq(i * cols + c);
      break;
    }
    case Kind::block: {
      // Plain names, not a structured binding: clang before 16 cannot capture one in an OpenMP region.
      const std::pair<int64_t, int64_t> tiles = tile_rows(p, r);
      const int64_t t0 = tiles.first, t1 = tiles.second;
      const int64_t tc = tile_cols(p, cols);
      s.norms.assign(size_t((t1 - t0) * tc), 0.0);
      // One tile row per iteration: its tiles' norms add in row-major order.
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t g = std::max(r.begin, t * p.block_rows); g < std::min(r.end, (t + 1) * p.block_rows); ++g)
          for (int64_t c = 0; c < cols; ++c)
            s.norms[size_t((t - t0) * tc + c / p.block_cols)] += sq((g - r.begin) * cols + c);
      break;
    }
    case Kind::unstructured: {
      if (round > 0 && keeps_all_or_none(ranking, r.rows * r.cols)) break;
      if (round < 2) {
        s.counts = digit_histogram(values, round == 1, ranking.high, threads);
      } else {
        int64_t ties = 0;
        for (int64_t t : chunk_parts<int64_t>(r.size(), threads, [&](int64_t b, int64_t e) {
               int64_t n = 0;
               for (int64_t i = b; i < e; ++i) n += magnitude_key(values[i]) == ranking.threshold;
               return n;
             }))
          ties += t;
        s.counts = {ties};
      }
      break;
    }
    default: break;
  }
  return s;
}

void merge_mask_stats(const SparsityPattern& p, std::span<const MaskStats> pieces, std::span<const RowRange> ranges,
                      int round, MaskRanking& k) {
  if (pieces.empty() || pieces.size() != ranges.size())
    throw std::invalid_argument("merge_mask_stats: one statistics per piece");
  const int64_t rows = ranges[0].rows, cols = ranges[0].cols;
  auto keep_top = [&](const std::vector<double>& norm, int64_t kept) {
    const std::vector<int64_t> rank = ranking(norm);
    k.keep.assign(norm.size(), 0);
    for (int64_t i = 0; i < kept; ++i) k.keep[size_t(rank[i])] = 1;
  };
  switch (p.kind) {
    case Kind::row: {
      std::vector<double> norm;
      for (const MaskStats& s : pieces) norm.insert(norm.end(), s.norms.begin(), s.norms.end());
      keep_top(norm, kept_count(p.density, rows));
      break;
    }
    case Kind::channel: {
      std::vector<double> norm(size_t(cols), 0.0);
      for (const MaskStats& s : pieces)
        for (int64_t c = 0; c < cols; ++c) norm[c] += s.norms[c];
      keep_top(norm, kept_count(p.density, cols));
      break;
    }
    case Kind::block: {
      const int64_t tr = (rows + p.block_rows - 1) / p.block_rows, tc = tile_cols(p, cols);
      std::vector<double> norm(size_t(tr * tc), 0.0);
      for (size_t i = 0; i < pieces.size(); ++i) {
        const int64_t t0 = tile_rows(p, ranges[i]).first;
        for (size_t j = 0; j < pieces[i].norms.size(); ++j) norm[size_t(t0 * tc) + j] += pieces[i].norms[j];
      }
      keep_top(norm, kept_count(p.density, tr * tc));
      break;
    }
    case Kind::unstructured: {
      // The k-th largest key T: every key above it is kept, and of the keys
      // equal to T the first (k - #above) in index order, i.e. in row order of
      // the pieces. The same set as sorting by (|v| descending, index).
      const int64_t total = rows * cols;
      if (round == 0) k.k = kept_count(p.density, total);
      if (keeps_all_or_none(k, total)) break;
      if (round < 2) {
        std::vector<int64_t> count(1 << 16, 0);
        for (const MaskStats& s : pieces)
          for (size_t b = 0; b < count.size(); ++b) count[b] += s.counts[b];
        int64_t above = 0;
        const uint32_t digit = find_digit(count, k.k - k.above, above);
        k.above += above;
        if (round == 0) k.high = digit;
        else k.threshold = (k.high << 16) | digit;
      } else {
        k.ties.assign(pieces.size(), 0);
        for (size_t i = 0, left = size_t(k.k - k.above); i < pieces.size(); ++i) {
          k.ties[i] = std::min<int64_t>(int64_t(left), pieces[i].counts.at(0));
          left -= size_t(k.ties[i]);
        }
      }
      break;
    }
    default: break;
  }
}

std::vector<uint8_t> piece_mask(const SparsityPattern& p, std::span<const float> values, const RowRange& r,
                                size_t piece, const MaskRanking& k, int threads) {
  if (values.size() != size_t(r.size())) throw std::invalid_argument("piece_mask: values do not match the rows");
  const int64_t rows = r.end - r.begin, cols = r.cols, total = r.size();
  const int nt = thread_count(threads);
  std::vector<uint8_t> mask(size_t(total), 0);
  auto mag = [&](int64_t i) { return std::fabs(double(values[i])); };
  switch (p.kind) {
    case Kind::none: break;
    case Kind::dense: std::fill(mask.begin(), mask.end(), 1); break;
    case Kind::n_of_m: {
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t g = 0; g < cols; g += p.m) {
          const int len = int(std::min<int64_t>(p.m, cols - g));
          const int64_t base = i * cols + g;
          // Insertion of the group's indices in rank order: a later element
          // displaces an earlier one only if strictly larger.
          int order[16];
          for (int j = 0; j < len; ++j) {
            int q = j;
            while (q > 0 && mag(base + j) > mag(base + order[q - 1])) {
              order[q] = order[q - 1];
              --q;
            }
            order[q] = j;
          }
          for (int j = 0; j < std::min(p.n, len); ++j) mask[size_t(base + order[j])] = 1;
        }
      break;
    }
    case Kind::row: {
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t i = 0; i < rows; ++i)
        if (k.keep[size_t(r.begin + i)]) std::fill_n(mask.begin() + i * cols, cols, 1);
      break;
    }
    case Kind::channel: {
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < cols; ++c) mask[size_t(i * cols + c)] = k.keep[size_t(c)];
      break;
    }
    case Kind::block: {
      const int64_t tc = tile_cols(p, cols);
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < cols; ++c)
          mask[size_t(i * cols + c)] = k.keep[size_t(((r.begin + i) / p.block_rows) * tc + c / p.block_cols)];
      break;
    }
    case Kind::unstructured: {
      if (k.k <= 0) break;
      if (k.k >= r.rows * r.cols) {
        std::fill(mask.begin(), mask.end(), 1);
        break;
      }
      // Keys above the threshold, then the piece's ties in index order: by
      // fixed chunks, the earliest chunks first.
      const std::vector<int64_t> ties = chunk_parts<int64_t>(total, threads, [&](int64_t b, int64_t e) {
        int64_t t = 0;
        for (int64_t i = b; i < e; ++i) {
          const uint32_t key = magnitude_key(values[i]);
          mask[i] = key > k.threshold;
          t += key == k.threshold;
        }
        return t;
      });
      const int64_t chunks = int64_t(ties.size());
      std::vector<int64_t> quota(size_t(chunks), 0);
      for (int64_t c = 0, left = k.ties.at(piece); c < chunks; ++c) {
        quota[c] = std::min(left, ties[c]);
        left -= quota[c];
      }
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t i = c * kChunk, q = quota[c]; q > 0 && i < std::min(total, (c + 1) * kChunk); ++i)
          if (magnitude_key(values[i]) == k.threshold) mask[i] = 1, --q;
      break;
    }
    case Kind::random: {
      // It depends on rows x cols and the seed only: the whole matrix's, cut.
      const std::vector<uint8_t> all = random_mask(p, r.rows, r.cols);
      std::copy_n(all.begin() + r.begin * cols, total, mask.begin());
      break;
    }
  }
  return mask;
}

std::vector<uint8_t> random_mask(const SparsityPattern& p, int64_t rows, int64_t cols) {
  // Partial Fisher-Yates shuffle: the first k positions of a seeded
  // permutation (one thread: each draw depends on the previous swaps).
  const int64_t total = rows * cols;
  const int64_t k = kept_count(p.density, total);
  std::vector<uint8_t> mask(static_cast<size_t>(total), 0);
  std::vector<int64_t> idx(static_cast<size_t>(total));
  std::iota(idx.begin(), idx.end(), 0);
  SplitMix64 rng(p.seed);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = i + int64_t(rng.next() % uint64_t(total - i));
    std::swap(idx[i], idx[j]);
    mask[idx[i]] = 1;
  }
  return mask;
}

std::vector<uint8_t> sparsity_mask(const SparsityPattern& p, std::span<const float> values, int64_t rows,
                                   int64_t cols, int threads) {
  if (rows < 0 || cols < 0 || values.size() != size_t(rows * cols))
    throw std::invalid_argument("sparsity_mask: values do not match rows x cols");
  const RowRange whole{rows, cols, 0, rows};
  MaskRanking ranking;
  for (int round = 0; round < ranking_rounds(p); ++round) {
    const MaskStats s = mask_stats(p, values, whole, ranking, round, threads);
    merge_mask_stats(p, std::span(&s, 1), std::span(&whole, 1), round, ranking);
  }
  return piece_mask(p, values, whole, 0, ranking, threads);
}

double sparse_speedup(const SparsityPattern& p) {
  switch (p.kind) {
    case Kind::n_of_m: return ((p.n == 2 && p.m == 4) || (p.n == 4 && p.m == 8)) ? 2.0 : 1.0;
    case Kind::channel:
    case Kind::row:
    case Kind::block: return 1.0 / p.density;
    default: return 1.0;
  }
}

}  // namespace fp4emu::analysis
