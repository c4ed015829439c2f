#pragma once
// Activation underflow (docs/analysis.md §2): how many nonzero inputs a format
// flushes to zero, where (blocks, tokens, channels), and how that relates to
// outlier blocks and block crest factors. Also the naming of activation dumps
// (§1.3, §7.2) shared by the underflow and resq studies.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/analysis/transforms.hpp"
#include "fp4emu/io/tensor_file.hpp"
#include "fp4emu/io/tensor_set.hpp"
#include "fp4emu/quant/quantize.hpp"

namespace fp4emu::analysis {

// ------------------------------------------------------- activation dumps --
// What a tensor name says about its place in the model. Names follow
// "model.layers.{i}.{self_attn|mlp}.{q|k|v|o|gate|up|down}_proj.input"
// (vLLM's fused qkv_proj / gate_up_proj too); the four distinct inputs of a
// layer are qkv_in, o_in, gateup_in and down_in, which may also appear
// literally in the name.
struct TensorRole {
  int layer = -1;    // -1: no layer index in the name
  std::string kind;  // "qkv_in", "o_in", "gateup_in", "down_in", or "" (unknown)
  std::string proj;  // "q", "k", "v", "o", "gate", "up", "down", "qkv", "gate_up", or ""
};
TensorRole parse_tensor_role(std::string_view name);
// The kinds in heatmap row order.
std::span<const std::string_view> tensor_kinds();

struct DumpTensor {
  std::string name;
  Tensor x;  // widened to fp32
  InputDType dtype = InputDType::f32;
};

// The float tensors of an activation dump (io::TensorSet inputs: files,
// directories, globs, sharded indexes) that match any of `patterns` (all when
// empty; io::name_matches syntax: globs and `re:` regexes). Tensors are read
// one at a time (safetensors files are memory-mapped), so a dump of any size
// is studied in the memory of its largest tensor. With `deduplicate`,
// tensors bit-identical to an earlier selected one (q/k/v and gate/up read
// the same input) are skipped and listed in aliases(): every study reports
// and pools such an input once (docs/analysis.md "Duplicates"). InputError
// when a pattern matches nothing or no float tensor is selected.
class Dump {
 public:
  Dump(const std::vector<std::string>& inputs, const std::vector<std::string>& patterns, bool deduplicate = true);
  ~Dump();
  Dump(Dump&&) noexcept;
  Dump& operator=(Dump&&) noexcept;

  // The inputs as given, for messages.
  const std::string& label() const { return set_->label(); }
  const io::TensorSet& set() const { return *set_; }
  size_t size() const { return selected_.size(); }
  const std::string& name(size_t i) const;
  // The file tensor i comes from, and that file's safetensors metadata.
  const std::filesystem::path& file(size_t i) const;
  const std::map<std::string, std::string>& metadata(size_t i) const;
  const io::TensorInfo& info(size_t i) const;  // name, dtype, shape as stored
  uint64_t bytes(size_t i) const { return info(i).nbytes; }
  DumpTensor load(size_t i) const;
  // Rows [row_begin, row_end) of tensor i as a matrix (rows: every axis but
  // the last), read from its part of the file only.
  DumpTensor load_rows(size_t i, int64_t row_begin, int64_t row_end) const;
  // "name = earlier name" for every skipped duplicate.
  const std::vector<std::string>& aliases() const { return aliases_; }
  // The selected tensor of this name, or nullopt.
  std::optional<size_t> find(std::string_view name) const;

 private:
  std::unique_ptr<io::TensorSet> set_;
  std::vector<size_t> selected_;  // indices into set_->tensors()
  std::vector<std::string> aliases_;
};

// The recipes a study runs: each of `recipes` (ids, or a format name for its
// default recipe) when given, else the default recipe of each of `formats`
// (all three when empty). `mxfp4_scale_rule` "ocp" or "ceil" (docs/analysis.md
// §5.2, §8) picks mxfp4.ocp or mxfp4.rceil (2^ceil(log2(amax/6))) for the
// format mxfp4. InputError
// for unknown names.
std::vector<const Recipe*> study_recipes(const std::vector<std::string>& formats,
                                         const std::vector<std::string>& recipes, std::string_view mxfp4_scale_rule);

// The tensor as rows x d with d its last axis (a vector is one row).
struct MatrixShape {
  int64_t rows = 0, cols = 0;
};
MatrixShape as_matrix(const TensorRef& x);

// ---------------------------------------------------------------- stats ----
struct UnderflowOptions {
  double tau_abs = 6.0;  // outlier rule (a): a block holds |x| >= tau_abs (LLM.int8())
  double tau_rel = 8.0;  // rule (b): amax_B >= tau_rel * median of amax_B over the tensor
  double tau_uf = 0.5;   // rule (c): UR_B >= tau_uf
  int top_k = 10;        // tokens and channels listed by UR in the JSON
};

struct RankedIndex {
  int64_t index;
  double ur;
  int64_t nonzero;
};

struct UnderflowStats {
  int64_t rows = 0, cols = 0;  // m x d
  int block = 0;
  // Elements (finite inputs only; non-finite ones are counted and skipped).
  int64_t n = 0, n_nonfinite = 0, n_nonzero = 0, n_underflow = 0, n_zero_after = 0;
  double underflow_ratio = 0;   // UR: n_underflow / n_nonzero
  double zero_ratio_after = 0;  // ZR: n_zero_after / n
  // Blocks along d (the last one may be short).
  int64_t n_blocks = 0;
  int64_t n_blocks_nonzero = 0;            // blocks with a nonzero input (where UR_B is defined)
  double blocks_with_underflow_ratio = 0;  // blocks with UR_B > 0 / n_blocks
  double mean_block_ur = 0, p99_block_ur = 0, max_block_ur = 0;  // over blocks where UR_B is defined
  double outlier_block_ratio_abs = 0, outlier_block_ratio_rel = 0, outlier_block_ratio_uf = 0;
  // Elements clipped to the largest code (|x| above it); nullopt when the
  // recipe has no packed form to read codes from.
  std::optional<int64_t> n_saturated;
  std::optional<double> saturation_ratio;
  // Block crest factor amax_B / rms_B over blocks with rms_B > 0; NaN (null
  // in the reports) when no block has rms_B > 0.
  double crest_mean = 0, crest_median = 0, crest_q3 = 0, crest_max = 0;
  // Input magnitude and the error of the reconstruction in the input's
  // domain (after the inverse transform).
  double max_abs = 0, rms = 0, qsnr_db = 0, rel_l2 = 0, cosine = 0;
  // Per token (row) and channel (column) UR; NaN where the row or column
  // has no nonzero input.
  std::vector<double> token_ur, channel_ur;
  std::vector<RankedIndex> top_tokens, top_channels;
  // Per block counts, rows x blocks, for the detail heatmap.
  std::vector<int32_t> block_nonzero, block_flushed;
  // floor(log2 |x|) -> count, over nonzero inputs and over underflowed ones.
  std::map<int, int64_t> log2_hist_all, log2_hist_underflow;
};

// What underflow_stats gathers over a range of rows, before the ratios and
// order statistics: counts, sums in index order, and the per-row, per-column
// and per-block values they are taken over. The parts of a tensor's row
// ranges, merged in row order, give its whole-tensor statistics (the sums
// merged part by part; docs/analysis.md §1.6).
struct UnderflowParts {
  int64_t rows = 0, cols = 0;
  int block = 0;
  int64_t n = 0, n_nonfinite = 0, n_nonzero = 0, n_underflow = 0, n_zero_after = 0, n_sat = 0;
  bool has_saturation = false;
  double sum_sq = 0, err_sq = 0, orig_sq = 0, rec_sq = 0, dot = 0, max_abs = 0;
  std::vector<int64_t> tok_nz, tok_fl;  // per row
  std::vector<int64_t> ch_nz, ch_fl;    // per column
  // Per block, rows x blocks: amax_B, crest amax_B / rms_B (NaN where
  // rms_B = 0: no crest), and the nonzero and flushed counts.
  std::vector<double> block_amax, block_crest;
  std::vector<int32_t> block_nonzero, block_flushed;
  std::map<int, int64_t> log2_hist_all, log2_hist_underflow;

  // Appends the next rows (same cols, block and saturation).
  void merge(const UnderflowParts& next);
};
UnderflowParts underflow_parts(std::span<const float> x, std::span<const float> q, int64_t rows, int64_t cols,
                               int block, std::span<const float> original, std::span<const double> recon,
                               const std::optional<std::vector<uint8_t>>& saturated);
UnderflowStats finish_underflow(const UnderflowParts& parts, const UnderflowOptions& opt);

// Statistics of the quantized operand `x` (rows x cols) and its quantization
// `q`, blocks of `block` along the rows. `original` and `recon` are the
// input and its reconstruction in the input's domain (for no transform, x
// and q); `saturated` flags clipped elements or is nullopt.
UnderflowStats underflow_stats(std::span<const float> x, std::span<const float> q, int64_t rows, int64_t cols,
                               int block, std::span<const float> original, std::span<const double> recon,
                               const std::optional<std::vector<uint8_t>>& saturated, const UnderflowOptions& opt);

// Flags the elements of x that quantize to the largest element code of their
// block (magnitude code 7: 6.0 in E2M1, 1.75 in S1P2) while |x| exceeds the
// decoded value, i.e. were clipped. nullopt for recipes without a packed
// form (nvfp4.modelopt_fq).
std::optional<std::vector<uint8_t>> saturated_elements(const TensorRef& x, const Tensor& q,
                                                      const QuantOptions& options);

// The whole study of one tensor under one recipe and transform: operand,
// Q (fake_quant along the last axis), saturation, statistics. `w` (n x d) is
// used by SmoothQuant only; `calib` is its stale calibration tensor or null.
// x is read in place (with transform none, it is the operand itself).
UnderflowStats study_underflow(const TensorRef& x, const QuantOptions& options, const TransformSpec& transform,
                               const Tensor* w, const Tensor* calib, const UnderflowOptions& opt);
// The same up to the parts, for a row range of a larger tensor (x: those
// rows; `options.global_amax`: the whole operand's NVFP4 amax). The transform
// must not depend on x's values (row_local).
UnderflowParts study_underflow_parts(const TensorRef& x, const QuantOptions& options, const TransformSpec& transform,
                                     const Tensor* w, const Tensor* calib);
// The operand a run quantizes (x itself, as a matrix, for transform none; the
// transformed rows otherwise): what the first phase of a split tensor takes
// its NVFP4 amax over.
Tensor underflow_operand(const TensorRef& x, const QuantOptions& options, const TransformSpec& transform,
                         const Tensor* w, const Tensor* calib);
// Whether a run can study row ranges apart: none and rht, whose operand row
// depends on its own row only (smoothquant and occ take whole-tensor
// statistics of x).
bool row_local(const TransformSpec& transform);

}  // namespace fp4emu::analysis
