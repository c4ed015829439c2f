// The GEMM API (gemm.hpp): checks, the choice of model form, the epilogue.
#include "fp4emu/gemm/gemm.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cmath>

#include "fp4emu/error.hpp"
#include "fp4emu/threads.hpp"
#include "models.hpp"

namespace fp4emu {
namespace {

using namespace gemm_detail;

const Recipe* nvfp4_recipe(const GemmOperand& o) {
  if (!o.packed() || o.packed()->format != Format::nvfp4) return nullptr;
  return find_recipe(o.packed()->recipe_id);
}

bool nvfp4_two_level(const Recipe* r) {
  return r && r->nv.rule != NvScaleRule::torchao_1l && r->nv.rule != NvScaleRule::ggml;
}

// TE computes alpha' from the global amaxes (docs/spec/nvfp4.md §7.1); te_2d is rule te.
bool te_family(const Recipe* r) {
  return r && (r->nv.rule == NvScaleRule::te || r->nv.rule == NvScaleRule::te_4over6);
}

void check_epilogue_inputs(const GemmOptions& o, int64_t m, int64_t n) {
  if (o.c) {
    if (o.c->shape != std::vector<int64_t>{m, n})
      throw InputError(fmt::format("C (the epilogue's source) has shape [{}]; D = alpha·(A·B) + beta·C needs [{}, {}]",
                                   fmt::join(o.c->shape, ", "), m, n));
    if (static_cast<int64_t>(o.c->data.size()) != m * n)
      throw InputError(fmt::format("C (the epilogue's source): shape [{}, {}] needs {} values, it holds {}", m, n,
                                   m * n, o.c->data.size()));
  }
  if (o.bias) {
    if (o.bias->shape != std::vector<int64_t>{n})
      throw InputError(fmt::format("bias has shape [{}]; it must be [{}], one value per column of D (n, "
                                   "nn.Linear's out_features)",
                                   fmt::join(o.bias->shape, ", "), n));
    if (static_cast<int64_t>(o.bias->data.size()) != n)
      throw InputError(fmt::format("bias: shape [{}] needs {} values, it holds {}", n, n, o.bias->data.size()));
  }
}

// docs/gemm.md "Epilogue", CUTLASS's Sm90LinCombPerColBias: T = fma(alpha',
// acc, bias) (fp32(alpha'·acc) without bias, acc without either), then
// D = fma(beta, C, T) when C is given. Each std::fma rounds once, as the FFMA
// that nvcc makes of CUTLASS's `C(a) * C(b) + c`. On rows [i0, i1), columns
// [j0, j1) of d (m×n, row-major): simd_packed_gemm applies it to each tile
// inside its parallel region, where it ran on the calling thread after it.
void apply_epilogue(std::optional<float> alpha, const GemmOptions& o, float* d, int64_t n, int64_t i0, int64_t i1,
                    int64_t j0, int64_t j1) {
  const float* bias = o.bias ? o.bias->data.data() : nullptr;
  const float* c = o.c ? o.c->data.data() : nullptr;
  const float nan = std::bit_cast<float>(kGemmNaNBits);
  for (int64_t i = i0; i < i1; ++i) {
    float* v = d + i * n;
    const float* c_row = c ? c + i * n : nullptr;
    if (bias || c)
      for (int64_t j = j0; j < j1; ++j) {
        if (bias) v[j] = std::fma(alpha.value_or(1.0f), v[j], bias[j]);
        else if (alpha) v[j] = *alpha * v[j];
        if (c) v[j] = std::fma(o.beta, c_row[j], v[j]);
      }
    else if (alpha)
      for (int64_t j = j0; j < j1; ++j) v[j] = *alpha * v[j];
    // Every NaN as the GPU writes it (kGemmNaNBits): the paths above give
    // 0x7fc00000 or x86's 0xffc00000 depending on how the NaN arose. (A
    // pass of its own, branch-free: the compiler vectorises it and the
    // multiply.)
    for (int64_t j = j0; j < j1; ++j) v[j] = std::isnan(v[j]) ? nan : v[j];
  }
}

}  // namespace

std::string_view to_string(GemmModel m) {
  switch (m) {
    case GemmModel::exact: return "exact";
    case GemmModel::block_fp32: return "block_fp32";
    case GemmModel::fma_fp32: return "fma_fp32";
    case GemmModel::fast: return "fast";
  }
  return "?";
}

std::optional<GemmModel> parse_gemm_model(std::string_view name) {
  for (GemmModel m : {GemmModel::exact, GemmModel::block_fp32, GemmModel::fma_fp32, GemmModel::fast})
    if (name == to_string(m)) return m;
  return std::nullopt;
}

std::string_view to_string(BLayout l) { return l == BLayout::kn ? "kn" : "nk"; }

std::optional<BLayout> parse_b_layout(std::string_view name) {
  for (BLayout l : {BLayout::kn, BLayout::nk})
    if (name == to_string(l)) return l;
  return std::nullopt;
}

std::optional<float> gemm_alpha(const GemmOperand& a, const GemmOperand& b, std::optional<float> alpha) {
  const Recipe* ra = nvfp4_recipe(a);
  const Recipe* rb = nvfp4_recipe(b);
  const float al = alpha.value_or(1.0f);
  if (te_family(ra) && te_family(rb)) {
    // TE: alpha' = fp32(fp32(fp32(alpha·G_A)·G_B)·fp32(1/(36·M_A·M_B))), left
    // to right. 36·M_A·M_B is exact in fp32 (M = 448 or 256), so the fp32
    // division is the one rounding of the constant.
    const float constant = 1.0f / (36.0f * ra->nv.tensor_scale_e4m3_max * rb->nv.tensor_scale_e4m3_max);
    const float t = al * a.packed()->global_amax;
    const float u = t * b.packed()->global_amax;
    return u * constant;
  }
  if (nvfp4_two_level(ra) || nvfp4_two_level(rb)) {
    const float sa = nvfp4_two_level(ra) ? a.packed()->global_decode_scale : 1.0f;
    const float sb = nvfp4_two_level(rb) ? b.packed()->global_decode_scale : 1.0f;
    const float t = al * sa;
    return t * sb;
  }
  return alpha;
}

// `fast` with B packed: W's rows decoded kFastPanelRows at a time into one
// buffer, reused, and each panel's columns of C computed by one sgemm. W's
// whole fp32 copy (180 MB at 4096×11008) cost its zero-fill and first-touch
// page faults on every call, a quarter of the call (docs/gemm.md "Speed").
// The panels change only the columns each sgemm call sees: `fast` has no
// defined summation order either way.
namespace {
void fast_gemm_over_panels(const FastSgemm& sgemm, const float* a, const Operand& b, int64_t m, int threads,
                           float* c) {
  constexpr int64_t kFastPanelRows = 1024;
  const int64_t n = b.rows(), k = b.k();
  Fp32Rows panel(std::min(n, kFastPanelRows) * k);
  for (int64_t j0 = 0; j0 < n; j0 += kFastPanelRows) {
    const int64_t rows = std::min(kFastPanelRows, n - j0);
    decode_fp32_rows(*b.source, b.tables, j0, j0 + rows, panel.data());
    sgemm.run(a, panel.data(), m, rows, k, threads, c + j0, n);
  }
}
}  // namespace

Tensor gemm(const GemmOperand& a_in, const GemmOperand& b_in, const GemmOptions& options) {
  if (options.blocks_per_step < 1)
    throw InputError(fmt::format("blocks per step is {}; it must be at least 1", options.blocks_per_step));
  if (options.blocks_per_step != 1 && options.model != GemmModel::block_fp32)
    throw InputError(fmt::format("blocks per step ({}) applies to the block_fp32 model only, not to {}",
                                 options.blocks_per_step, to_string(options.model)));
  if (!a_in.packed() && !b_in.packed())
    throw InputError("both operands are dense; at least one must be packed (quantized) for a block-scaled GEMM");
  // threads = 0: OpenMP's default, but one thread for products too small to
  // amortise a parallel region (on a busy machine a region costs milliseconds).
  const auto dim = [](const GemmOperand& o, size_t d) -> int64_t {
    const std::vector<int64_t>& shape = o.packed() ? o.packed()->shape : o.dense()->shape;
    return d < shape.size() ? shape[d] : 0;  // bad shapes are reported below
  };
  const size_t b_n_axis = options.b_layout == BLayout::kn ? 1 : 0;
  const double work = static_cast<double>(dim(a_in, 0)) * static_cast<double>(dim(a_in, 1)) * dim(b_in, b_n_axis);
  const int threads = options.threads != 0 || work >= (1 << 22) ? thread_count(options.threads) : 1;
  // `fast`'s sgemm, chosen for the whole product (fast.cpp).
  const FastSgemm sgemm = fast_sgemm(dim(a_in, 0), dim(b_in, b_n_axis), dim(a_in, 1));
  // The scalar implementation stays single-threaded throughout. So does the
  // decoding of `fast` when its sgemm has threads of its own (OpenBLAS): they
  // busy-wait after a call, OpenMP's after a parallel region, and on a busy
  // machine each pool then takes cores from the other (gemm_bench measured
  // 2.4× the sgemm's time on 2 cores, 1.3× on one); decoding is ~1% of the work.
  const bool own_threads = options.model == GemmModel::fast && sgemm.own_threads;
  const int unpack_threads = options.impl == GemmImpl::simd && !own_threads ? threads : 1;
  const bool simd = options.impl == GemmImpl::simd && simd_kernels_available();
  // fma_fp32's and fast's fast forms read only the fp32 values: decode them
  // straight from the codes (decode_fp32_operand), no integer form.
  // Packed × packed exact and block_fp32 (simd_packed_gemm): checked here,
  // unpacked inside the one parallel region of the product.
  const bool packed_simd = simd && a_in.packed() && b_in.packed() &&
                           (options.model == GemmModel::exact || options.model == GemmModel::block_fp32);
  const OperandForm form = packed_simd ? OperandForm::deferred
                           : options.impl == GemmImpl::simd && (options.model == GemmModel::fast ||
                                                                (simd && options.model == GemmModel::fma_fp32))
                               ? OperandForm::fp32
                               : OperandForm::integers;
  // `fast` decodes a packed B a panel at a time (fast_gemm_over_panels).
  const bool b_panels = form == OperandForm::fp32 && options.model == GemmModel::fast && b_in.packed();
  Operand a = make_operand(a_in, Side::a, BLayout::kn, unpack_threads, form);
  Operand b = make_operand(b_in, Side::b, options.b_layout, unpack_threads,
                           b_panels ? OperandForm::fp32_rows_later : form);
  if (a.k() != b.k())
    throw InputError(options.b_layout == BLayout::kn
                         ? fmt::format("A is {}×{} and B is {}×{}: the inner dimensions (k) differ", a.rows(),
                                       a.k(), b.k(), b.rows())
                         : fmt::format("A is {}×{} and B (W, --b-layout nk) is {}×{}: the k dimensions differ",
                                       a.rows(), a.k(), b.rows(), b.k()));
  if (a.format && b.format && *a.format != *b.format)
    throw InputError(fmt::format("A is {} and B is {}: a block-scaled GEMM needs one format on both sides "
                                 "(for mixed precision keep one operand dense)",
                                 format_name(*a.format), format_name(*b.format)));
  const int block = a.is_packed ? a.packed.block : b.packed.block;
  const int64_t m = a.rows(), n = b.rows();
  check_epilogue_inputs(options, m, n);

  const std::optional<float> alpha = gemm_alpha(a_in, b_in, options.alpha);
  Tensor c;
  c.shape = {m, n};
  if (!packed_simd) c.data.assign(m * n, 0.0f);  // simd_packed_gemm allocates it in its parallel region
  // The fp32 rows of an operand: its values when dense or decoded, else
  // to_fp32_rows of its integer form, held in `held`.
  std::vector<float> held_a, held_b;
  const auto fp32_rows = [&](const Operand& o, std::vector<float>& held) -> const float* {
    if (!o.is_packed) return o.dense.values.data();
    held = to_fp32_rows(o, threads);
    return held.data();
  };
  switch (options.model) {
    case GemmModel::fast:
      if (b_panels) {
        fast_gemm_over_panels(sgemm, fp32_rows(a, held_a), b, m, threads, c.data.data());
      } else {
        sgemm.run(fp32_rows(a, held_a), fp32_rows(b, held_b), m, n, a.k(), threads, c.data.data(), n);
      }
      break;
    case GemmModel::fma_fp32:
      if (simd) {
        simd_fma_gemm(fp32_rows(a, held_a), fp32_rows(b, held_b), m, n, a.k(), threads, c.data.data());
      } else {
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) c.data[i * n + j] = fma_fp32_dot(a, i, b, j);
      }
      break;
    case GemmModel::exact:
    case GemmModel::block_fp32:
      if (packed_simd) {
        simd_packed_gemm(a, b, options.model, options.blocks_per_step, threads, c.data,
                         [&](float* d, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
                           apply_epilogue(alpha, options, d, n, i0, i1, j0, j1);
                         });
        return c;
      }
      // Dense operands and the scalar implementation: the scalar form per
      // output (rows in parallel for `simd`; the order within an output is fixed).
#pragma omp parallel for schedule(dynamic) num_threads(simd ? threads : 1)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          c.data[i * n + j] = options.model == GemmModel::exact
                                  ? exact_dot(a, i, b, j)
                                  : block_fp32_dot(a, i, b, j, block, options.blocks_per_step);
      break;
  }

  apply_epilogue(alpha, options, c.data.data(), n, 0, m, 0, n);
  return c;
}

PackedTensor gemm_quantized(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                            const QuantOptions& output) {
  QuantOptions o = output;
  o.axis = -1;
  return quantize(gemm(a, b, options), o);
}

}  // namespace fp4emu
