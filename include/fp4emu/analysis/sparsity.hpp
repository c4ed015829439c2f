#pragma once
// Sparsity patterns S for the Rollout-ResQ study (docs/analysis.md §3.2),
// applied to an m x d matrix (tokens x reduction axis, row-major). Every
// pattern keeps the largest magnitudes it is allowed to keep and resolves
// exact ties toward the lower index (within a group, or the lower column,
// row, tile or flat index), so a mask is a pure function of the values.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4emu::analysis {

struct SparsityPattern {
  enum class Kind : uint8_t {
    none,          // no residual at all (X^ = Q(X)): the baseline
    dense,         // the whole residual (S = identity)
    n_of_m,        // N:M along each row: keep N of every M consecutive elements
    channel,       // keep the columns with the largest L2 norm over the rows
    row,           // keep the rows (tokens) with the largest L2 norm
    block,         // keep the block_rows x block_cols tiles with the largest L2 norm
    unstructured,  // keep the largest |values| over the whole matrix
    random,        // keep a seeded random subset of positions
  } kind = Kind::dense;
  int n = 0, m = 0;                   // N:M
  int block_rows = 0, block_cols = 0; // block tiles (tokens x channels)
  double density = 1.0;               // kept fraction (channel, row, block, unstructured, random)
  uint64_t seed = 0;                  // random
  std::string name;                   // canonical name, e.g. "2:4", "channel50", "block32x64"
};

// Parses one pattern name:
//   none | dense | N:M (1 <= N < M <= 16) |
//   channelP | rowP | unstructuredP | randomP   (P = kept percent, 1..99) |
//   channel | row | unstructured | random | blockRxC  (kept fraction = default_density)
// plus the spellings of docs/analysis.md §3: chan50, tok50, top50, rand50, blk:RxC.
// InputError names the text and lists what is accepted.
SparsityPattern parse_pattern(std::string_view text, double default_density = 0.5, uint64_t seed = 0);

// How many of `count` items a fraction keeps: round(fraction * count), ties
// up, within [0, count].
int64_t kept_count(double fraction, int64_t count);

// The keep mask (1 = keep) of `pattern` on the rows x cols matrix `values`.
// none keeps nothing, dense everything. N:M groups run along each row; a
// last group shorter than M (cols not a multiple of M) is treated as padded
// with zeros, which are never preferred, so it keeps min(N, its length).
// Partial edge tiles of a block pattern take part in the ranking as they are.
// `threads` as everywhere (0: OpenMP's default); the mask is the same for any
// count. Values must not be NaN (their rank is unspecified).
std::vector<uint8_t> sparsity_mask(const SparsityPattern& pattern, std::span<const float> values, int64_t rows,
                                   int64_t cols, int threads = 1);

// The relative speed-up r_s of the sparse residual GEMM in the cost model
// (docs/analysis.md §3.4): 2 for the hardware patterns 2:4 and 4:8 (sparse tensor
// cores; cuSPARSELt runs e2m1 as paired 4:8), 1/density for channel, row
// and block patterns (a gathered or ideal block-sparse dense GEMM), 1 for
// dense, other N:M, unstructured and random (no hardware speed-up assumed).
double sparse_speedup(const SparsityPattern& pattern);

}  // namespace fp4emu::analysis
