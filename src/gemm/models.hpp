#pragma once
// The accumulation models (internal to src/gemm). Each model has one scalar
// form, the specification in code (reference.cpp), and fast forms that must
// give the same bits (simd.cpp; fast.cpp for the sgemm of `fast`). gemm.cpp chooses.
#include <cstdint>
#include <functional>

#include "operand.hpp"

namespace fp4emu::gemm_detail {

// ---- Scalar forms: one output C[i, j] = Σ_k A[i, k]·B[k, j] -----------------
// `a` row i and `b` row j (a column of B) run along k.

// docs/spec/mxfp4.md §7.4 (1): the exact sum of every product, rounded once.
float exact_dot(const Operand& a, int64_t i, const Operand& b, int64_t j);
// docs/spec/mxfp4.md §7.4 (2), (3): steps of `block · blocks_per_step` elements summed
// exactly and rounded to fp32, added into an fp32 accumulator in increasing k.
float block_fp32_dot(const Operand& a, int64_t i, const Operand& b, int64_t j, int block, int blocks_per_step);
// docs/spec/mxfp4.md §7.4 (4): acc = fma(a'_k, b'_k, acc) in increasing k.
float fma_fp32_dot(const Operand& a, int64_t i, const Operand& b, int64_t j);

// ---- Fast forms (write C, m×n row-major, before the epilogue) -------------

// False on a target without integer-pair SIMD (HWY_SCALAR builds): use the
// scalar forms.
bool simd_kernels_available();
// Packed × packed, exact or block_fp32: integer SIMD block dot products.
// a and b come from make_operand(..., OperandForm::deferred); their rows are
// unpacked here, inside the product's one parallel region; c (m×n) is
// allocated there too, and epilogue(c.data(), i0, i1, j0, j1) is called on
// each finished tile, rows [i0, i1), columns [j0, j1).
using TileEpilogue = std::function<void(float* c, int64_t i0, int64_t i1, int64_t j0, int64_t j1)>;
void simd_packed_gemm(Operand& a, Operand& b, GemmModel model, int blocks_per_step, int threads,
                      std::vector<float>& c, const TileEpilogue& epilogue);
// fma_fp32 on fp32 rows (a: m×k, b: n×k as to_fp32_rows gives them).
void simd_fma_gemm(const float* a, const float* b, int64_t m, int64_t n, int64_t k,
                   int threads, float* c);
// `fast`'s sgemm for one product (fast.cpp): a m×k and b n×k row-major (the
// rows of A and the columns of B, each along k), into c with rows `ldc` apart
// (n when c is the whole product).
using Sgemm = void (*)(const float* a, const float* b, int64_t m, int64_t n, int64_t k, int threads, float* c,
                       int64_t ldc);
struct FastSgemm {
  Sgemm run;
  const char* library;  // "OpenBLAS", "Eigen (AVX-512)", "Eigen (AVX2)" or "Eigen"
  // True for OpenBLAS, which runs on pthreads of its own, not OpenMP's: then
  // the rest of the `fast` model runs on the calling thread.
  bool own_threads;
};
// The sgemm `fast` uses for the whole m×k by k×n product (choose it once per
// product, then run it on any part of it).
FastSgemm fast_sgemm(int64_t m, int64_t n, int64_t k);
// The two it chooses between (gemm_bench's baselines): Eigen for the x86
// target the SIMD kernels dispatch to, and OpenBLAS (run is null when the build
// has no OpenBLAS).
FastSgemm eigen_sgemm_for_cpu();
FastSgemm openblas_sgemm_if_built();
// fast_sgemm(m, n, k).run(...).
void fast_gemm(const float* a, const float* b, int64_t m, int64_t n, int64_t k, int threads, float* c, int64_t ldc);

}  // namespace fp4emu::gemm_detail
