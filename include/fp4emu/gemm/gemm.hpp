#pragma once
// Fake-quant GEMM C = Q(A) · Q(B) with named accumulation models
// (docs/spec/mxfp4.md §7.4, docs/spec/nvfp4.md §7.3, docs/spec/hif4.md §4 fixed-point view; docs/gemm.md
// says exactly what each model computes).
//
// The GEMM consumes the packed form, as a kernel does: element codes and block
// scales. A (m×k) is blocked along k (axis 1) and B along k: B (k×n) along
// axis 0, or, with BLayout::nk, W (n×k, nn.Linear's weight) along axis 1, so
// both packed tensors hold k-contiguous rows (rows of A, columns of B). Either
// operand may instead be dense fp32 values (a W4A16 study keeps the bf16
// activations unquantized); at least one operand must be packed.
//
// Every model reads element k of a block as an integer N_k times the block's
// unit u (the value of N = 1): MXFP4/NVFP4 N = 2·e2m1 ∈ [−12, 12], u = scale/2;
// HiF4 N = q·2^(b+c) ∈ [−28, 28], u = E6M2/4. A block dot product of two
// packed operands is an integer times u_a·u_b, exact in fp32 (docs/spec/mxfp4.md §7.2,
// docs/spec/nvfp4.md §7.2).
#include <cstdint>
#include <optional>
#include <string_view>

#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/tensor.hpp"

namespace fp4emu {

enum class GemmModel : uint8_t {
  // The infinitely precise Σ_k a_k·b_k, rounded once to fp32 (RNE).
  exact,
  // Each step of `blocks_per_step` blocks summed exactly, rounded to fp32 and
  // added into an fp32 accumulator in increasing k (RNE per add).
  block_fp32,
  // a'_k = fp32(a_k), b'_k = fp32(b_k) (element times its block scale), then
  // acc = fma(a', b', acc) in increasing k: the CUTLASS host reference.
  fma_fp32,
  // fp32 operands as fma_fp32, multiplied by the fastest sgemm of the build
  // (OpenBLAS when found, else Eigen). Order not defined: not
  // bit-reproducible across builds, machines or thread counts. For studies.
  fast,
};
std::string_view to_string(GemmModel m);
std::optional<GemmModel> parse_gemm_model(std::string_view name);

// How B is held (docs/gemm.md "Operands"). kn: B is k×n (blocked along axis
// 0). nk: B is given as W, n×k (PyTorch's nn.Linear weight, blocked along axis
// 1), so both operands are K-major as block-scaled kernels store them; it is
// read in place, and D = A·Wᵀ is the same product bit for bit.
enum class BLayout : uint8_t { kn, nk };
std::string_view to_string(BLayout l);
std::optional<BLayout> parse_b_layout(std::string_view name);

// Which implementation runs a model. Both give the same bits (tests prove it);
// `scalar` is the readable single-threaded form, the specification in code.
enum class GemmImpl : uint8_t { simd, scalar };

struct GemmOptions {
  GemmModel model = GemmModel::exact;
  // block_fp32: blocks summed exactly per fp32 add (a hardware MMA step spans
  // several blocks: K = 64 is 2 MXFP4, 4 NVFP4 or 1 HiF4 block). The last step
  // of a row takes the blocks that remain.
  int blocks_per_step = 1;
  // Epilogue scale alpha' (gemm_alpha): NVFP4 folds in the per-tensor scales;
  // otherwise alpha' = alpha, and no multiply without it (docs/gemm.md).
  std::optional<float> alpha;
  // How B is held: k×n (default) or W n×k (BLayout).
  BLayout b_layout = BLayout::kn;
  // Epilogue inputs (docs/gemm.md "Epilogue", CUTLASS's LinCombPerColBias):
  // D = fma(beta, C, fma(alpha', acc, bias)) with each term present only when
  // given. `c` (m×n fp32, not owned) is the source C; `beta` scales it and is
  // used only with `c`. `bias` (n values, shape [n], not owned) is added to
  // every row (nn.Linear's bias). Both must outlive the call.
  const Tensor* c = nullptr;
  float beta = 1.0f;
  const Tensor* bias = nullptr;
  // OpenMP threads (also the BLAS's for `fast`, a process-wide setting). 0: the
  // OpenMP default, one thread for products too small to gain from more.
  // Results never depend on it (except `fast`).
  int threads = 0;
  GemmImpl impl = GemmImpl::simd;  // `fast` has no scalar form: always the sgemm
};

// One side of the product: a packed tensor, or dense values used as given.
class GemmOperand {
 public:
  GemmOperand(const PackedTensor& packed) : packed_(&packed) {}  // NOLINT: implicit on purpose
  GemmOperand(const Tensor& dense) : dense_(&dense) {}           // NOLINT
  const PackedTensor* packed() const { return packed_; }
  const Tensor* dense() const { return dense_; }

 private:
  const PackedTensor* packed_ = nullptr;
  const Tensor* dense_ = nullptr;
};

// The bits of every NaN in C, whatever made it (a NaN scale or input, Inf·0,
// Inf − Inf): the canonical fp32 NaN of NVIDIA GPUs (CUDA's CUDART_NAN_F),
// the NaN a tensor-core kernel writes (docs/gemm.md "NaN").
inline constexpr uint32_t kGemmNaNBits = 0x7FFFFFFFu;

// D (m×n, fp32): the product and its epilogue. Throws InputError naming the
// operand, field and fix for shapes that do not chain, operands not blocked
// along k, formats that differ, damaged packed metadata, a C or bias of the
// wrong shape, bad options.
Tensor gemm(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options);

// The epilogue multiplier alpha', or nullopt when there is none (no alpha and
// no NVFP4 per-tensor scale). docs/spec/nvfp4.md §7.1/§7.3:
// - both operands TE-family NVFP4 (nvfp4.te, te_2d, te_4over6): TE's formula
//   fp32(fp32(fp32(alpha·G_A)·G_B)·fp32(1/(36·M_A·M_B))), M = 448 (256 for
//   4over6), taken literally (G = 0 gives 0; Inf and NaN propagate);
// - otherwise, with S_dec = the operand's per-tensor decode scale (1 for dense
//   operands, single-level recipes and other formats):
//   fp32(fp32(alpha·S_dec,A)·S_dec,B), torchao's scale_result with alpha in front.
std::optional<float> gemm_alpha(const GemmOperand& a, const GemmOperand& b, std::optional<float> alpha);

// Output quantization for chained layers: gemm(), then quantize C along its
// last axis (the k of the next GEMM) with `output` (its axis is overridden).
PackedTensor gemm_quantized(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                            const QuantOptions& output);

}  // namespace fp4emu
