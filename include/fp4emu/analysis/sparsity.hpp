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

// ---- Row pieces (docs/analysis.md §1.6) ---------------------------------------
// The mask of rows [begin, end) of a rows x cols matrix whose other rows are
// studied elsewhere (another process of an MPI job). A ranking that spans rows
// is built in rounds: each piece computes its statistics of the round
// (mask_stats), every piece's are merged in row order (merge_mask_stats, the
// same on every process), and each piece then takes its rows of the mask
// (piece_mask). sparsity_mask is this with one piece. What each pattern shares:
//   row           each row's norm (a row lies in one piece: exact);
//   channel       per column, the sum of squares over the piece's rows; the
//                 pieces' sums added in row order;
//   block         per tile, the partial norm of the piece's rows, added in row
//                 order (a tile row cut by a piece boundary gets two partials);
//   unstructured  counts only (a radix select on the bits of |value|: exact):
//                 round 0 the high 16-bit digit's histogram, round 1 the low
//                 digit's under the chosen high digit, round 2 each piece's
//                 ties at the threshold, kept by the earliest pieces first;
//   random        no round: it draws the whole matrix's mask (it depends on
//                 rows x cols and the seed only) and takes the piece's rows;
//   none, dense, N:M: the piece alone.
// One piece gives the whole matrix's sums in the whole matrix's order; with
// several, channel and cut block norms are added in another order, so their
// last digits (and a ranking between two norms equal to those digits) may
// differ from one piece's, never with the number of processes.
struct RowRange {
  int64_t rows = 0, cols = 0;  // the whole matrix
  int64_t begin = 0, end = 0;  // this piece's rows
  int64_t size() const { return (end - begin) * cols; }
};

// What the rounds decided, the same on every process.
struct MaskRanking {
  std::vector<uint8_t> keep;  // row: per row; channel: per column; block: per tile (row-major)
  int64_t k = 0;              // unstructured: elements kept
  uint32_t high = 0;          // unstructured: the threshold's high digit (round 0)
  int64_t above = 0;          // unstructured: keys above the threshold's digits so far
  uint32_t threshold = 0;     // unstructured: the k-th largest |value| key (round 1)
  std::vector<int64_t> ties;  // unstructured: keys equal to the threshold each piece keeps (round 2)
};
// One piece's statistics of one round.
struct MaskStats {
  std::vector<double> norms;    // row: per row of the piece; channel: per column; block: per tile of the tile rows it touches
  std::vector<int64_t> counts;  // unstructured: a digit's histogram (rounds 0, 1), or {ties} (round 2)
};
// How many rounds the pattern's ranking takes: 0 (none, dense, N:M, random),
// 1 (row, channel, block) or 3 (unstructured).
int ranking_rounds(const SparsityPattern& pattern);
// The piece's statistics for `round`, given what the earlier rounds decided.
MaskStats mask_stats(const SparsityPattern& pattern, std::span<const float> values, const RowRange& range,
                     const MaskRanking& ranking, int round, int threads = 1);
// Every piece's statistics of `round`, in row order (ranges[i] for pieces[i]), into the ranking.
void merge_mask_stats(const SparsityPattern& pattern, std::span<const MaskStats> pieces,
                      std::span<const RowRange> ranges, int round, MaskRanking& ranking);
// The mask of piece `piece` (its index in row order) once every round is merged.
std::vector<uint8_t> piece_mask(const SparsityPattern& pattern, std::span<const float> values, const RowRange& range,
                                size_t piece, const MaskRanking& ranking, int threads = 1);

// The random pattern's mask of a rows x cols matrix (seeded, values unseen).
std::vector<uint8_t> random_mask(const SparsityPattern& pattern, int64_t rows, int64_t cols);

// The relative speed-up r_s of the sparse residual GEMM in the cost model
// (docs/analysis.md §3.4): 2 for the hardware patterns 2:4 and 4:8 (sparse tensor
// cores; cuSPARSELt runs e2m1 as paired 4:8), 1/density for channel, row
// and block patterns (a gathered or ideal block-sparse dense GEMM), 1 for
// dense, other N:M, unstructured and random (no hardware speed-up assumed).
double sparse_speedup(const SparsityPattern& pattern);

}  // namespace fp4emu::analysis
