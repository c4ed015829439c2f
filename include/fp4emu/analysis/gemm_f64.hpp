#pragma once
// C = A B^T in double, for the studies' error products (resq's X Q(W)^T and
// E Q(W)^T). Every C[i][j] is the chain acc = fma(A[i][k], B[j][k], acc) over
// k = 0, 1, ..., d-1 from acc = 0: the same bits on every Highway target, for
// any thread count and any blocking (gemm_abt_f64_scalar is that definition;
// tests compare the two bit for bit).
#include <cstdint>
#include <span>
#include <vector>

namespace fp4emu::analysis {

// A is m x d, B is n x d, both row-major; C is m x n row-major. `threads` as
// everywhere (0: OpenMP's default).
std::vector<double> gemm_abt_f64(std::span<const double> a, std::span<const double> b, int64_t m, int64_t d,
                                 int64_t n, int threads);
// The same product with B in fp32 (widened exactly as it is packed: no double
// copy of a large weight), written into `c` (m x n), which the caller reuses.
void gemm_abt_f64(std::span<const double> a, std::span<const float> b, int64_t m, int64_t d, int64_t n, int threads,
                  std::span<double> c);
std::vector<double> gemm_abt_f64_scalar(std::span<const double> a, std::span<const double> b, int64_t m, int64_t d,
                                        int64_t n);

}  // namespace fp4emu::analysis
