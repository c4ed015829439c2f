#pragma once
// Format comparison (docs/analysis.md §5): fake-quantize one tensor with each
// recipe and measure what it loses. The CLI (`fp4emu compare`) drives it one
// tensor at a time and pools the results over tensors.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fp4emu/analysis/metrics.hpp"
#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "fp4emu/quant/tensor.hpp"
#include "fp4emu/quant/tensor_ref.hpp"

namespace fp4emu {

struct CompareOptions {
  int axis = -1;                   // block axis; negative counts from the end
  int threads = 0;                 // the fast path's (fp4emu/threads.hpp: 0 = OpenMP's default)
  std::optional<TailPolicy> tail;  // default: each recipe's
  std::optional<Rounding> rounding;  // element rounding; default: each recipe's
  StochasticBits stochastic;         // Rounding::stochastic: its random bits (every tensor the same key)
};

struct RecipeResult {
  const Recipe* recipe = nullptr;
  // Non-empty when the recipe was not run on this tensor, and why: hif4.a6 on
  // fp32 values that are not bf16; a recipe whose default tail policy is
  // `error` on a ragged axis when CompareOptions::tail is not set.
  std::string skipped;
  ErrorStats stats;
  double bits_per_element = 0;
};

// Checks, from the shape alone, that every recipe can run on the tensor
// (rank >= 1, no zero-size dim, axis in range, and an explicit tail policy
// `error` satisfied; recipes refused only by their own default tail policy
// are skipped by compare_recipe instead).
// Throws the quantizer's InputError; callers prefix the file and tensor.
void check_compare(const std::vector<int64_t>& shape, std::span<const Recipe* const> recipes,
                   const CompareOptions& options);

// A row range of a larger tensor (blocks along its last axis), studied on
// its own (docs/analysis.md §1.6): its results merged in row order with the
// other ranges' (merge_pieces) count what the whole tensor's do, and every
// element is quantized to the same bits as in the whole tensor.
struct TensorPiece {
  std::vector<int64_t> shape;          // the whole tensor's
  int64_t first_element = 0;           // index of the piece's first element in it
  std::optional<float> global_amax;    // NVFP4: the whole tensor's (piece_amax over every piece)
};

// Runs fake_quant(x) with `recipe` and measures it (error_stats), with the
// saturation count from the recipe's codes (count_saturated) when it has a
// packed form. x is read in place; `dtype` says what its fp32 values came
// from. With `piece`, x is that row range of a larger tensor.
RecipeResult compare_recipe(const TensorRef& x, InputDType dtype, const Recipe& recipe,
                            const CompareOptions& options, const TensorPiece* piece = nullptr);

// The per-tensor amax an NVFP4 recipe takes over `x` (its NaN rule); nullopt
// for recipes without one. Over the values of every piece's piece_amax, in
// any order, it is the whole tensor's (a max, NaN by the same rule).
std::optional<float> piece_amax(const Recipe& recipe, std::span<const float> x);
// Whether the quantizer takes `amax` as a given per-tensor amax (finite, and
// 2688/amax finite); a tensor whose amax it refuses is studied whole.
bool usable_global_amax(const Recipe& recipe, float amax);

// The results of a tensor's pieces, merged in row order: the first skip
// message (the whole tensor's first offending element), else the sums of
// every piece in that order.
RecipeResult merge_pieces(std::span<const RecipeResult> pieces);

// Valid pairs (finite x and Q(x)) whose element code in `packed` (a
// quantize() of x with nibble_order low_first) is the element format's
// largest magnitude (E2M1 6, S1P2 q = 7) while |x| > |Q(x)|: the input lay
// beyond the largest value its block can represent and was clipped.
int64_t count_saturated(const TensorRef& x, std::span<const float> quantized,
                        const PackedTensor& packed);

// Storage per element of the packed form: 4-bit codes over the zero-padded
// block axis, the block scales (HiF4 32 bits per 64, MXFP4 8 per 32, NVFP4 8
// per 16) and NVFP4's fp32 per-tensor scale, divided by the element count.
// For whole blocks: HiF4 4.5, MXFP4 4.25, NVFP4 4.5 + 32/n.
double bits_per_element(const Recipe& recipe, const std::vector<int64_t>& shape, int axis);

// Pooled results of one recipe over several tensors: the ratio of sums
// (stats) and the mean of the per-tensor QSNRs in dB (docs/analysis.md §3.3).
struct PooledResult {
  const Recipe* recipe = nullptr;
  ErrorStats stats;
  int64_t tensors = 0;     // tensors pooled (skipped ones are not)
  double sum_qsnr_db = 0;  // over tensors with at least one valid pair
  int64_t qsnr_terms = 0;
  int64_t elements = 0;    // elements of the pooled tensors
  double bits = 0;         // storage bits of the pooled tensors

  void add(const RecipeResult& r, int64_t numel);
  // +inf if any pooled tensor is error-free; NaN if none has a valid pair.
  double mean_qsnr_db() const;
  double bits_per_element() const { return elements == 0 ? 0.0 : bits / elements; }
};

}  // namespace fp4emu
