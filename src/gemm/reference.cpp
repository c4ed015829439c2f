// Scalar forms of the GEMM accumulation models: the specification in code
// (docs/gemm.md). One output at a time, every element product formed exactly
// from the operands' exact values, every rounding written out. The fast forms
// (simd.cpp) are checked against these bit for bit.
#include <cmath>

#include "exact_sum.hpp"
#include "models.hpp"

namespace fp4emu::gemm_detail {
namespace {

// The exact value of one operand element: N·unit (packed) or the fp32 value
// (dense), or an IEEE special. A NaN block makes each of its elements NaN
// (docs/spec/mxfp4.md §7.4: a NaN scale poisons its products).
struct ExactElement {
  enum Kind : uint8_t { finite, nan, inf } kind = finite;
  bool negative = false;  // the sign bit (for zeros too)
  Dyadic v;
};

ExactElement element_exact(const Operand& o, int64_t r, int64_t kk) {
  ExactElement x;
  if (o.is_packed) {
    const PackedOperand& p = o.packed;
    const int64_t blk = p.block_index(r, kk / p.block);
    if (std::isnan(p.unit[blk])) {
      x.kind = ExactElement::nan;
      return x;
    }
    x.v = {int64_t{p.n[r * p.kpad + kk]} * p.unit_m[blk], p.unit_e[blk]};
    x.negative = p.sign[r * p.kpad + kk] != 0;
    return x;
  }
  const float f = o.dense.values[r * o.dense.k + kk];
  x.negative = std::signbit(f);
  if (std::isnan(f)) {
    x.kind = ExactElement::nan;
  } else if (std::isinf(f)) {
    x.kind = ExactElement::inf;
  } else {
    x.v = split_fp32(f);
  }
  return x;
}

// s += a·b exactly, with IEEE's rules for specials (Inf·0 = NaN) and for the
// sign of a zero product (the signs' exclusive or).
void add_product(ExactSum& s, const ExactElement& a, const ExactElement& b) {
  if (a.kind == ExactElement::nan || b.kind == ExactElement::nan) return s.add_nan();
  if (a.kind == ExactElement::inf || b.kind == ExactElement::inf) {
    const bool a_zero = a.kind == ExactElement::finite && a.v.m == 0;
    const bool b_zero = b.kind == ExactElement::finite && b.v.m == 0;
    if (a_zero || b_zero) return s.add_nan();
    return s.add_inf(a.negative != b.negative);
  }
  if (a.v.m == 0 || b.v.m == 0) return s.add_zero(a.negative != b.negative);
  s.add(a.v.m * b.v.m, a.v.e + b.v.e);
}

}  // namespace

float exact_dot(const Operand& a, int64_t i, const Operand& b, int64_t j) {
  ExactSum s;
  for (int64_t kk = 0; kk < a.k(); ++kk) add_product(s, element_exact(a, i, kk), element_exact(b, j, kk));
  return s.round_to_fp32();
}

float block_fp32_dot(const Operand& a, int64_t i, const Operand& b, int64_t j, int block, int blocks_per_step) {
  const int64_t k = a.k();
  const int64_t step = int64_t{block} * blocks_per_step;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += step) {
    ExactSum s;
    for (int64_t kk = k0; kk < std::min(k, k0 + step); ++kk)
      add_product(s, element_exact(a, i, kk), element_exact(b, j, kk));
    const float q = s.round_to_fp32();  // the step's exact sum, rounded once
    acc = acc + q;  // one fp32 add, RNE; from +0, a zero step (±0) leaves +0
  }
  return acc;
}

float fma_fp32_dot(const Operand& a, int64_t i, const Operand& b, int64_t j) {
  float acc = 0.0f;
  for (int64_t kk = 0; kk < a.k(); ++kk) acc = std::fma(element_fp32(a, i, kk), element_fp32(b, j, kk), acc);
  return acc;
}

}  // namespace fp4emu::gemm_detail
