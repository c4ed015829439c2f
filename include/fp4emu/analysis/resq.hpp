#pragma once
// Rollout-ResQ: a quantized residual, sparsified, added back to the quantized
// activation (docs/analysis.md §3). For activations X (m x d) and weights W (n x d):
//
//   X^ = Q(X) + S(Q(X - Q(X))),   Y^ = X^ Q(W)^T
//
// The residual is taken over the whole tensor and quantized as a fresh tensor
// with its own block scales (and, for NVFP4, its own per-tensor scale); S
// prunes the quantized codes (order qs, the paper's) without rescaling, or
// prunes before quantizing (order sq, a labelled variant). Errors are
// accumulated in double in a fixed order (fixed chunks, docs/analysis.md §3.3
// R6), the same for any thread count.
#include <cstdint>
#include <functional>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/analysis/sparsity.hpp"
#include "fp4emu/analysis/transforms.hpp"
#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/quant/quantize.hpp"

namespace fp4emu::analysis {

enum class ResqOrder : uint8_t {
  qs,  // S(Q(dX)): quantize the residual densely, then prune (docs/analysis.md §3.1)
  sq,  // Q(S(dX)): prune, then quantize the kept values
};

// Sums over one tensor (or, added up, over many: "pooled"). Every metric of a
// report row is a ratio of these.
struct ResqSums {
  int64_t x_count = 0, y_count = 0;  // m*d, m*n
  double x_sq = 0, act_err_sq = 0;   // ||X||^2, ||X^ - X||^2
  double ya_sq = 0, out_err_sq = 0;  // ||Y_A||^2, ||Y^ - Y_A||^2 with Y_A = X Q(W)^T
  double y_sq = 0, out_err_y_sq = 0; // ||Y||^2, ||Y^ - Y||^2 with Y = X W^T
  double yhat_sq = 0, yhat_dot_ya = 0;
  double max_abs_out = 0;            // max |Y^ - Y_A|
  double none_out_err_sq = 0;        // ||Q(X) Q(W)^T - Y_A||^2: the error without residual
  double drop_res = 0, res_sq = 0;   // ||Q(dX) - S(Q(dX))||^2, ||Q(dX)||^2
  double drop_prim = 0, prim_sq = 0; // ||Q(X) - S(Q(X))||^2, ||Q(X)||^2
  int64_t kept = 0;                  // positions the mask keeps
  double mdn = 0;                    // m*d*n, for the cost model

  void add(const ResqSums& o);
};

// The cost model of docs/analysis.md §3.4: C / (m d n) in FP16-equivalent FLOPs,
// C = (2 m d n / r4) (1 + rho / r_s), r4 = 4 (FP4 throughput over FP16),
// rho = 1 with a residual GEMM (0 for `none`), r_s = sparse_speedup().
// The quantize, residual and gather passes are not modelled.
double cost_over_mdn(const SparsityPattern& pattern);
inline double speedup_vs_fp16(const SparsityPattern& pattern) { return 2.0 / cost_over_mdn(pattern); }

// One row of the report: a pattern on one tensor, or pooled over tensors.
struct ResqRow {
  std::string tensor;  // or "(pooled)"
  SparsityPattern pattern;
  ResqSums sums;
  int tensors = 1;           // how many tensors the row pools
  double mean_act_qsnr_db = 0, mean_out_qsnr_db = 0;  // pooled rows: mean of per-tensor dB

  double act_mse() const;
  double act_nmse() const;
  double act_qsnr_db() const;
  double out_nmse_vs_xqw() const;
  double out_qsnr_db() const;
  double out_nmse_vs_xw() const;
  double cosine_out() const;
  double recovered_fraction() const;   // 1 - NMSE_Y(pattern) / NMSE_Y(none), NaN if Q(X) is exact
  double kept_density() const;         // kept positions / (m d)
  // Figure-4 deletion measures: absolute (per element), RMS, and normalised
  // by the operand's own energy. NaN for `none`.
  double drop_res_mse() const;
  double drop_res_rmse() const;
  double drop_res_norm() const;
  double drop_prim_mse() const;
  double drop_prim_rmse() const;
  double drop_prim_norm() const;
};

// How the output-error products E Q(W)^T (one per pattern) are multiplied.
// Y = X W^T and Y_A = X Q(W)^T, the references, are always gemm_f64.
enum class ResqGemm : uint8_t {
  fast,  // fp32 operands, the build's sgemm (docs/gemm.md "fast"): about twice gemm_f64's speed; its
         // summation order is the library's, so the last digits may differ between machines
  f64,   // gemm_f64.hpp: double, one fixed fma order, the same bits on every machine
};

struct ResqOptions {
  ResqOrder order = ResqOrder::qs;
  ResqGemm gemm = ResqGemm::fast;
};

struct ResqTensorResult {
  std::vector<ResqRow> rows;    // one per pattern, in the order given
  int64_t residual_inexact = 0; // dX elements not exact in fp32 (expected 0)
};

// The study of one tensor: x (m x d activations) and w (n x d weights) under
// one recipe (blocks along d, for both operands) and every pattern. A
// transform (RHT or SmoothQuant) is applied to both operands first; OCC is
// rejected (its compensation is a different residual).
ResqTensorResult study_resq(const std::string& name, const TensorRef& x, const Tensor& w, const QuantOptions& options,
                            const TransformSpec& transform, const Tensor* calib,
                            const std::vector<SparsityPattern>& patterns, const ResqOptions& opt);
// The same study under several recipes at once, one result per recipe in
// their order, each the same as study_resq with that recipe alone. What does
// not depend on the recipe is done once: without a transform, Y = X W^T; the
// random patterns' masks; the buffers of the m x n products.
std::vector<ResqTensorResult> study_resq(const std::string& name, const TensorRef& x, const Tensor& w,
                                         const std::vector<QuantOptions>& recipes, const TransformSpec& transform,
                                         const Tensor* calib, const std::vector<SparsityPattern>& patterns,
                                         const ResqOptions& opt);

// ---- Row pieces (docs/analysis.md §1.6) ---------------------------------------
// A tensor larger than a threshold is studied as row pieces, spread over the
// processes of an MPI job; this process holds some of them. What spans the
// whole tensor is shared through `share`, so that every process takes the
// same decisions and each piece's numbers are the same wherever computed:
// NVFP4's per-tensor amax of the operand and of the residual dX (and under
// --order sq of each pruned dX), maxima over the pieces' (exact); the
// rankings of the patterns (sparsity.hpp "Row pieces"). Y = X W^T and the
// output errors are row by row, W and Q(W) whole in every process.
struct ResqRows {
  std::vector<int64_t> begin;  // every piece's first row, then m: piece i is rows [begin[i], begin[i + 1])
  std::vector<size_t> mine;    // the pieces held here, increasing
  std::vector<TensorRef> x;    // their rows (rows x d), one per `mine`
  // Every piece's payload, in piece order, from those of the pieces held
  // here (in `mine` order). Every process calls it the same number of times;
  // alone (every piece held here) it returns `local`.
  std::function<std::vector<std::string>(std::vector<std::string> local)> share;
};

// The study of a tensor held as row pieces (m x d; no SmoothQuant: its scales
// are statistics of the whole X, nor stochastic rounding, whose random bits
// follow the element index): per piece held here (in `mine` order), per
// recipe, the piece's part, which merge_resq_pieces adds up. nullopt, alike in
// every process, when a shared per-tensor amax is one the quantizer refuses
// as given (an NVFP4 residual whose amax is below 2688/FLT_MAX but not 0):
// that tensor is studied whole instead.
using ResqPieceResults = std::vector<std::vector<ResqTensorResult>>;  // [held piece][recipe]
std::optional<ResqPieceResults> study_resq_rows(const std::string& name, int64_t d, const ResqRows& rows,
                                                const Tensor& w, const std::vector<QuantOptions>& recipes,
                                                const TransformSpec& transform,
                                                const std::vector<SparsityPattern>& patterns, const ResqOptions& opt);
// Every piece's part of one tensor ([piece][recipe], in row order): its
// result per recipe, sums added piece by piece in that order.
std::vector<ResqTensorResult> merge_resq_pieces(std::span<const std::vector<ResqTensorResult>> pieces);

// The weights of the layer(s) that read activation `activation_name` from a
// weights dump: when the name has a (layer, kind) role, every "*.weight"
// tensor of that role, stacked along n in file order (q, k and v read qkv_in:
// their stack is vLLM's fused qkv_proj weight); otherwise "<name without
// .input>.weight". nullopt if none is found; InputError if one found does
// not have d columns.
std::optional<Tensor> find_weights(const Dump& weights, std::string_view activation_name, int64_t d);

// Seeded synthetic weights N(0, 1/d), n x d (docs/analysis.md §3), rounded to fp32.
Tensor synthetic_weights(int64_t n, int64_t d, uint64_t seed);

}  // namespace fp4emu::analysis
