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

// The unstructured mask: the k largest magnitudes, ties to the lower index.
// The k-th largest key T is found by two 16-bit radix histograms; every key
// above T is kept, and of the keys equal to T the first (k - #above) in
// index order. The same set as sorting by (|v| descending, index), in
// passes that split across threads by fixed chunks (counts are exact, so the
// mask does not depend on the thread count).
void keep_largest(std::span<const float> values, int64_t k, int threads, std::vector<uint8_t>& mask) {
  const int64_t total = int64_t(values.size());
  if (k <= 0) return;
  if (k >= total) {
    std::fill(mask.begin(), mask.end(), 1);
    return;
  }
  const int nt = thread_count(threads);
  // Counts of keys by 16-bit digit, over the keys whose high digit is `high`
  // (or every key for the high digit itself).
  auto histogram = [&](bool low_digit, uint32_t high) {
    std::vector<int64_t> count(1 << 16, 0);
#pragma omp parallel num_threads(nt)
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
  };
  // The digit at which the running count from the top reaches `need`, and
  // the count strictly above it.
  auto find_digit = [](const std::vector<int64_t>& count, int64_t need, int64_t& above) {
    above = 0;
    for (int64_t b = int64_t(count.size()) - 1; b >= 0; --b) {
      if (above + count[b] >= need) return uint32_t(b);
      above += count[b];
    }
    return uint32_t(0);  // unreachable: the counts add up to at least need
  };
  int64_t above_high = 0, above_low = 0;
  const uint32_t high = find_digit(histogram(false, 0), k, above_high);
  const uint32_t low = find_digit(histogram(true, high), k - above_high, above_low);
  const uint32_t threshold = (high << 16) | low;
  const int64_t ties_kept = k - above_high - above_low;  // of the keys equal to the threshold, in index order
  const std::vector<int64_t> ties = chunk_parts<int64_t>(total, threads, [&](int64_t b, int64_t e) {
    int64_t t = 0;
    for (int64_t i = b; i < e; ++i) {
      const uint32_t key = magnitude_key(values[i]);
      mask[i] = key > threshold;
      t += key == threshold;
    }
    return t;
  });
  const int64_t chunks = int64_t(ties.size());
  std::vector<int64_t> quota(chunks, 0);  // ties each chunk keeps: the earliest chunks first
  for (int64_t c = 0, left = ties_kept; c < chunks; ++c) {
    quota[c] = std::min(left, ties[c]);
    left -= quota[c];
  }
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t i = c * kChunk, q = quota[c]; q > 0 && i < std::min(total, (c + 1) * kChunk); ++i)
      if (magnitude_key(values[i]) == threshold) mask[i] = 1, --q;
}

}  // namespace

// Each pattern's passes split across threads so that every value is computed
// by the same operations in the same order as by one thread: rows, columns
// or tile rows are divided among the threads, each norm still adds its
// elements in row-major order.
std::vector<uint8_t> sparsity_mask(const SparsityPattern& p, std::span<const float> values, int64_t rows,
                                   int64_t cols, int threads) {
  if (rows < 0 || cols < 0 || values.size() != size_t(rows * cols))
    throw std::invalid_argument("sparsity_mask: values do not match rows x cols");
  const size_t total = values.size();
  const int nt = thread_count(threads);
  std::vector<uint8_t> mask(total, 0);
  auto mag = [&](size_t i) { return std::fabs(double(values[i])); };
  switch (p.kind) {
    case Kind::none: break;
    case Kind::dense: std::fill(mask.begin(), mask.end(), 1); break;
    case Kind::n_of_m: {
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < cols; g += p.m) {
          const int len = int(std::min<int64_t>(p.m, cols - g));
          const size_t base = size_t(r * cols + g);
          // Insertion of the group's indices in rank order: a later element
          // displaces an earlier one only if strictly larger.
          int order[16];
          for (int j = 0; j < len; ++j) {
            int k = j;
            while (k > 0 && mag(base + j) > mag(base + order[k - 1])) {
              order[k] = order[k - 1];
              --k;
            }
            order[k] = j;
          }
          for (int j = 0; j < std::min(p.n, len); ++j) mask[base + order[j]] = 1;
        }
      break;
    }
    case Kind::channel: {
      // Columns in fixed slices of 64, each thread adding its columns' rows
      // in row order.
      std::vector<double> norm(cols, 0.0);
      const int64_t slices = (cols + 63) / 64;
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t sl = 0; sl < slices; ++sl)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = sl * 64; c < std::min(cols, sl * 64 + 64); ++c) norm[c] += mag(r * cols + c) * mag(r * cols + c);
      const std::vector<int64_t> rank = ranking(norm);
      const int64_t kept = kept_count(p.density, cols);
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < kept; ++k) mask[r * cols + rank[k]] = 1;
      break;
    }
    case Kind::row: {
      std::vector<double> norm(rows, 0.0);
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) norm[r] += mag(r * cols + c) * mag(r * cols + c);
      const std::vector<int64_t> rank = ranking(norm);
      const int64_t kept = kept_count(p.density, rows);
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t k = 0; k < kept; ++k) std::fill_n(mask.begin() + rank[k] * cols, cols, 1);
      break;
    }
    case Kind::block: {
      const int64_t tr = (rows + p.block_rows - 1) / p.block_rows, tc = (cols + p.block_cols - 1) / p.block_cols;
      std::vector<double> norm(tr * tc, 0.0);
      // One tile row per iteration: its tiles' norms add in row-major order.
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t t = 0; t < tr; ++t)
        for (int64_t r = t * p.block_rows; r < std::min(rows, (t + 1) * p.block_rows); ++r)
          for (int64_t c = 0; c < cols; ++c)
            norm[t * tc + c / p.block_cols] += mag(r * cols + c) * mag(r * cols + c);
      const std::vector<int64_t> rank = ranking(norm);
      const int64_t kept = kept_count(p.density, tr * tc);
#pragma omp parallel for schedule(static) num_threads(nt)
      for (int64_t k = 0; k < kept; ++k) {
        const int64_t t0 = (rank[k] / tc) * p.block_rows, c0 = (rank[k] % tc) * p.block_cols;
        for (int64_t r = t0; r < std::min(rows, t0 + p.block_rows); ++r)
          for (int64_t c = c0; c < std::min(cols, c0 + p.block_cols); ++c) mask[r * cols + c] = 1;
      }
      break;
    }
    case Kind::unstructured: keep_largest(values, kept_count(p.density, int64_t(total)), threads, mask); break;
    case Kind::random: {
      // Partial Fisher-Yates shuffle: the first k positions of a seeded
      // permutation (one thread: each draw depends on the previous swaps).
      const int64_t k = kept_count(p.density, int64_t(total));
      std::vector<int64_t> idx(total);
      std::iota(idx.begin(), idx.end(), 0);
      SplitMix64 rng(p.seed);
      for (int64_t i = 0; i < k; ++i) {
        const int64_t j = i + int64_t(rng.next() % uint64_t(total - i));
        std::swap(idx[i], idx[j]);
        mask[idx[i]] = 1;
      }
      break;
    }
  }
  return mask;
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
