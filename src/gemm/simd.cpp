// Fast forms of the GEMM models (Highway, dynamic dispatch; OpenMP over
// output tiles). Each output is computed whole by one tile, in the order of
// its scalar form (reference.cpp), so the bits do not depend on the target or
// the thread count; tests compare every compiled target with the scalar form.
//
// Packed × packed (exact, block_fp32): the integer block dot products
// d = Σ_{k∈block} N_a·N_b are int16×int16→int32 multiply-adds
// (ReorderWidenMulAccumulate = pmaddwd on x86), vectorised over columns of B:
// a pair (N_a[2p], N_a[2p+1]) of a row of A is broadcast and multiplied with
// the pairs of kTileVecs·Lanes columns of B. |d| ≤ 64·28·28 < 2^16.
//
// block_fp32 with one block per step: q = fp32(d·u_a·u_b) is one fp32
// multiply of float(d) (exact) by f = u_a·u_b, which is exact whenever it is a
// normal float (units have at most 4 significant bits); lanes where it is not
// (MXFP4 units near the ends of the E8M0 range, zero units, NaN blocks) take
// the same value in double: d·u_a·u_b is exact there and the cast rounds once.
//
// exact, and block_fp32 with several blocks per step: the block dot products
// of a tile are stored and combined per output (combine_dots): in one int64
// when the output's exponents are close, in the Kulisch accumulator otherwise.

#include <algorithm>
#include <bit>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "exact_sum.hpp"
#include "fp4emu/threads.hpp"
#include "models.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/gemm/simd.cpp"  // relative to the repository root
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef FP4EMU_GEMM_SIMD_ONCE
#define FP4EMU_GEMM_SIMD_ONCE
namespace fp4emu::gemm_detail {

constexpr int kTileRows = 4;  // rows of A per tile

// Packed × packed operands laid out for the integer kernels. B is cut into
// panels of `cols` columns (the target's tile width), each stored contiguously
// along k, so a tile streams its panel sequentially.
struct IntLayout {
  int64_t m = 0, n = 0, kpad = 0, blocks = 0, mp = 0, np = 0, cols = 0;
  int block = 0;
  // A pair (N[2p], N[2p+1]) is one int32, low half first (two int16 lanes).
  std::vector<int32_t> a;  // mp × kpad/2
  std::vector<int32_t> b;  // [np/cols][kpad/2][cols]
  std::vector<float> ua;  // mp × blocks
  std::vector<float> ub;  // [np/cols][blocks][cols]
  const int32_t* b_pairs(int64_t j0, int64_t p) const { return b.data() + ((j0 / cols) * (kpad / 2) + p) * cols; }
  const float* b_units(int64_t j0, int64_t kb) const { return ub.data() + ((j0 / cols) * blocks + kb) * cols; }
};

}  // namespace fp4emu::gemm_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace fp4emu::gemm_detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Vectors of B columns per tile. Arrays of vectors below are fine on every
// fixed-width target (x86, NEON, EMU128); sizeless (SVE, RVV) targets would
// need the tile unrolled by hand.
constexpr int kTileVecs = 2;

#if HWY_TARGET == HWY_SCALAR
// One-lane target: no int16 pairs in an int32 lane. The driver uses the
// scalar forms instead.
bool HasKernels() { return false; }
size_t TileCols() { return 1; }
void BlockDotsTile(const IntLayout&, int64_t, int64_t, int32_t*) {}
void BlockFp32Tile(const IntLayout&, int64_t, int64_t, float*) {}
void FmaTile(const float*, const float*, int64_t, int64_t, float*) {}
#else
bool HasKernels() { return true; }

size_t TileCols() {
  const hn::ScalableTag<int32_t> d32;
  return kTileVecs * hn::Lanes(d32);
}

// Calls sink(kb, dots) for each block kb in increasing order, where
// dots[ii][r] holds the block dot products of row i0+ii with columns
// j0 + r·Lanes ... j0 + (r+1)·Lanes - 1.
template <class Sink>
HWY_INLINE void ForEachBlockDot(const IntLayout& op, int64_t i0, int64_t j0, const Sink& sink) {
  const hn::ScalableTag<int32_t> d32;
  const hn::Repartition<int16_t, decltype(d32)> d16;
  using V = hn::Vec<decltype(d32)>;
  const size_t lanes = hn::Lanes(d32);
  const int32_t* a_pairs[kTileRows];
  for (int ii = 0; ii < kTileRows; ++ii) a_pairs[ii] = op.a.data() + (i0 + ii) * (op.kpad / 2);
  const int64_t pairs = op.block / 2;
  for (int64_t kb = 0; kb < op.blocks; ++kb) {
    V sum0[kTileRows][kTileVecs], sum1[kTileRows][kTileVecs];
    for (int ii = 0; ii < kTileRows; ++ii)
      for (int r = 0; r < kTileVecs; ++r) sum0[ii][r] = sum1[ii][r] = hn::Zero(d32);
    for (int64_t p = kb * pairs; p < (kb + 1) * pairs; ++p) {
      const int32_t* bp = op.b_pairs(j0, p);
      hn::Vec<decltype(d16)> bv[kTileVecs];
      for (int r = 0; r < kTileVecs; ++r) bv[r] = hn::BitCast(d16, hn::LoadU(d32, bp + r * lanes));
      for (int ii = 0; ii < kTileRows; ++ii) {
        const auto av = hn::BitCast(d16, hn::Set(d32, a_pairs[ii][p]));
        for (int r = 0; r < kTileVecs; ++r)
          sum0[ii][r] = hn::ReorderWidenMulAccumulate(d32, av, bv[r], sum0[ii][r], sum1[ii][r]);
      }
    }
    V dots[kTileRows][kTileVecs];
    for (int ii = 0; ii < kTileRows; ++ii)
      for (int r = 0; r < kTileVecs; ++r) dots[ii][r] = hn::RearrangeToOddPlusEven(sum0[ii][r], sum1[ii][r]);
    sink(kb, dots);
  }
}

// dots: kTileRows × TileCols() per block, blocks one after the other.
void BlockDotsTile(const IntLayout& op, int64_t i0, int64_t j0, int32_t* dots_out) {
  const hn::ScalableTag<int32_t> d32;
  const size_t lanes = hn::Lanes(d32), cols = kTileVecs * lanes;
  ForEachBlockDot(op, i0, j0, [&](int64_t kb, const auto& dots) {
    int32_t* out = dots_out + kb * kTileRows * cols;
    for (int ii = 0; ii < kTileRows; ++ii)
      for (int r = 0; r < kTileVecs; ++r) hn::StoreU(dots[ii][r], d32, out + ii * cols + r * lanes);
  });
}

// block_fp32, one block per step: out[ii][col] = fp32 accumulation over the blocks.
void BlockFp32Tile(const IntLayout& op, int64_t i0, int64_t j0, float* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> d32;
  using VF = hn::Vec<decltype(df)>;
  const size_t lanes = hn::Lanes(df), cols = kTileVecs * lanes;
  VF acc[kTileRows][kTileVecs];
  for (int ii = 0; ii < kTileRows; ++ii)
    for (int r = 0; r < kTileVecs; ++r) acc[ii][r] = hn::Zero(df);
  const VF lo = hn::Set(df, FLT_MIN), hi = hn::Set(df, FLT_MAX);
  ForEachBlockDot(op, i0, j0, [&](int64_t kb, const auto& dots) {
    for (int ii = 0; ii < kTileRows; ++ii) {
      const float ua = op.ua[(i0 + ii) * op.blocks + kb];
      const VF uav = hn::Set(df, ua);
      for (int r = 0; r < kTileVecs; ++r) {
        const float* ub = op.b_units(j0, kb) + r * lanes;
        const VF f = hn::Mul(uav, hn::LoadU(df, ub));
        VF q;
        if (hn::AllTrue(df, hn::And(hn::Ge(f, lo), hn::Le(f, hi)))) {
          q = hn::Mul(hn::ConvertTo(df, dots[ii][r]), f);  // f exact: one rounding
        } else {
          HWY_ALIGN int32_t d[hn::MaxLanes(d32)];
          HWY_ALIGN float qs[hn::MaxLanes(df)];
          hn::Store(dots[ii][r], d32, d);
          for (size_t l = 0; l < lanes; ++l)
            qs[l] = static_cast<float>(static_cast<double>(d[l]) *
                                       (static_cast<double>(ua) * static_cast<double>(ub[l])));
          q = hn::Load(df, qs);
        }
        acc[ii][r] = hn::Add(acc[ii][r], q);
      }
    }
  });
  for (int ii = 0; ii < kTileRows; ++ii)
    for (int r = 0; r < kTileVecs; ++r) hn::StoreU(acc[ii][r], df, out + ii * cols + r * lanes);
}

// fma_fp32 tile: a is rows × k, b is the panel of columns j0.. as k × cols.
void FmaTile(const float* a, const float* b, int64_t k, int64_t i0, float* out) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df), cols = kTileVecs * lanes;
#if HWY_NATIVE_FMA
  using VF = hn::Vec<decltype(df)>;
  VF acc[kTileRows][kTileVecs];
  for (int ii = 0; ii < kTileRows; ++ii)
    for (int r = 0; r < kTileVecs; ++r) acc[ii][r] = hn::Zero(df);
  for (int64_t kk = 0; kk < k; ++kk) {
    VF bv[kTileVecs];
    for (int r = 0; r < kTileVecs; ++r) bv[r] = hn::LoadU(df, b + kk * cols + r * lanes);
    for (int ii = 0; ii < kTileRows; ++ii) {
      const VF av = hn::Set(df, a[(i0 + ii) * k + kk]);
      for (int r = 0; r < kTileVecs; ++r) acc[ii][r] = hn::MulAdd(av, bv[r], acc[ii][r]);  // fused
    }
  }
  for (int ii = 0; ii < kTileRows; ++ii)
    for (int r = 0; r < kTileVecs; ++r) hn::StoreU(acc[ii][r], df, out + ii * cols + r * lanes);
#else
  // This target's MulAdd is a multiply then an add (two roundings): use the
  // fused scalar fma.
  for (int ii = 0; ii < kTileRows; ++ii)
    for (size_t c = 0; c < cols; ++c) {
      float acc = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) acc = std::fma(a[(i0 + ii) * k + kk], b[kk * cols + c], acc);
      out[ii * cols + c] = acc;
    }
#endif
}
#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace fp4emu::gemm_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fp4emu::gemm_detail {

HWY_EXPORT(HasKernels);
HWY_EXPORT(TileCols);
HWY_EXPORT(BlockDotsTile);
HWY_EXPORT(BlockFp32Tile);
HWY_EXPORT(FmaTile);

namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Two int16 lanes in one int32, `lo` in the low half (little-endian lane order).
int32_t int16_pair(int8_t lo, int8_t hi) {
  return static_cast<int32_t>(static_cast<uint16_t>(int16_t{lo}) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(int16_t{hi})) << 16));
}

IntLayout make_int_layout(const PackedOperand& a, const PackedOperand& b, int64_t cols) {
  IntLayout L;
  L.m = a.rows;
  L.n = b.rows;
  L.kpad = a.kpad;
  L.block = a.block;
  L.blocks = a.blocks;
  L.cols = cols;
  L.mp = round_up(L.m, kTileRows);
  L.np = round_up(L.n, cols);
  L.a.assign(L.mp * L.kpad / 2, 0);
  for (size_t p = 0; p < a.n.size() / 2; ++p) L.a[p] = int16_pair(a.n[2 * p], a.n[2 * p + 1]);
  // Padding rows and columns get N = 0 and unit 1, so their lanes stay on
  // the exact-f path and never produce NaN.
  L.b.assign(L.kpad / 2 * L.np, 0);
  L.ub.assign(L.blocks * L.np, 1.0f);
  L.ua.assign(L.mp * L.blocks, 1.0f);
  std::copy(a.unit.begin(), a.unit.end(), L.ua.begin());
  for (int64_t j = 0; j < L.n; ++j) {
    const int8_t* col = b.n.data() + j * b.kpad;
    const int64_t panel = j / cols, c = j % cols;
    int32_t* dst = L.b.data() + panel * (L.kpad / 2) * cols + c;
    for (int64_t p = 0; p < L.kpad / 2; ++p) dst[p * cols] = int16_pair(col[2 * p], col[2 * p + 1]);
    float* units = L.ub.data() + panel * L.blocks * cols + c;
    for (int64_t kb = 0; kb < L.blocks; ++kb) units[kb * cols] = b.unit[b.block_index(j, kb)];
  }
  return L;
}

// Per row of an operand: whether it holds a NaN block, and the range of the
// exponents of its nonzero units. A NaN block poisons every output of its
// row (A) or column (B): each block of a row meets a block of every column.
struct RowFacts {
  std::vector<uint8_t> nan;
  std::vector<int> emin, emax;
};

RowFacts row_facts(const PackedOperand& p) {
  RowFacts f;
  f.nan.assign(p.rows, 0);
  f.emin.assign(p.rows, 0);
  f.emax.assign(p.rows, 0);
  for (int64_t r = 0; r < p.rows; ++r) {
    int lo = INT32_MAX, hi = INT32_MIN;
    for (int64_t kb = 0; kb < p.blocks; ++kb) {
      const int64_t i = p.block_index(r, kb);
      if (std::isnan(p.unit[i])) f.nan[r] = 1;
      if (p.unit_m[i] == 0) continue;
      lo = std::min<int>(lo, p.unit_e[i]);
      hi = std::max<int>(hi, p.unit_e[i]);
    }
    if (lo <= hi) {
      f.emin[r] = lo;
      f.emax[r] = hi;
    }
  }
  return f;
}

// The integer dot products carry no sign of zero: an `exact` result +0 is
// −0 when every element product is −0 (then the sum is exactly zero).
// block_fp32 needs no such step: its accumulator starts at +0.
float exact_zero_sign(float r, const PackedOperand& a, int64_t i, const PackedOperand& b, int64_t j) {
  if (r == 0.0f && !std::signbit(r) && every_product_negative_zero(a, i, b, j)) return -0.0f;
  return r;
}

// exact and block_fp32 from one output's block dot products (dots[kb] at
// stride `stride`), the steps of reference.cpp on whole blocks: block kb
// contributes t·2^e, t = d·m_a·m_b (|t| < 2^24), e = e_a + e_b.
float combine_dots(const PackedOperand& a, const RowFacts& fa, int64_t i, const PackedOperand& b,
                   const RowFacts& fb, int64_t j, const int32_t* dots, int64_t stride, GemmModel model,
                   int blocks_per_step, std::vector<Term>& terms) {
  if (fa.nan[i] || fb.nan[j]) return NAN;
  const int64_t blocks = a.blocks;
  const int8_t* am = a.unit_m.data() + a.block_index(i, 0);
  const int8_t* bm = b.unit_m.data() + b.block_index(j, 0);
  const int16_t* ae = a.unit_e.data() + a.block_index(i, 0);
  const int16_t* be = b.unit_e.data() + b.block_index(j, 0);
  if (model == GemmModel::exact) {
    // The exponents of this output lie in [base, base + spread]; when the
    // spread is small every term shifted to `base` fits one int64 exactly.
    const int base = fa.emin[i] + fb.emin[j];
    const int spread = fa.emax[i] + fb.emax[j] - base;
    if (spread <= 62 - 24 - static_cast<int>(std::bit_width(static_cast<uint64_t>(blocks)))) {
      int64_t sum = 0;
      for (int64_t kb = 0; kb < blocks; ++kb) {
        if (am[kb] == 0 || bm[kb] == 0) continue;  // zero unit: no exponent
        sum += (int64_t{dots[kb * stride]} * am[kb] * bm[kb]) << (ae[kb] + be[kb] - base);
      }
      return exact_zero_sign(round_scaled_to_fp32(sum, base), a, i, b, j);
    }
  }
  for (int64_t kb = 0; kb < blocks; ++kb)
    terms[kb] = {int64_t{dots[kb * stride]} * am[kb] * bm[kb], ae[kb] + be[kb]};
  if (model == GemmModel::exact)
    return exact_zero_sign(sum_terms_to_fp32(terms.data(), static_cast<int>(blocks)), a, i, b, j);
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < blocks; k0 += blocks_per_step) {
    const int64_t k1 = std::min(blocks, k0 + blocks_per_step);
    const float q = sum_terms_to_fp32(terms.data() + k0, static_cast<int>(k1 - k0));
    acc = acc + q;
  }
  return acc;
}

}  // namespace

void simd_packed_gemm(const PackedOperand& a, const PackedOperand& b, GemmModel model, int blocks_per_step,
                      int threads, float* c) {
  const int64_t cols = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(TileCols)());
  const IntLayout L = make_int_layout(a, b, cols);
  const bool fused = model == GemmModel::block_fp32 && blocks_per_step == 1;
  const RowFacts fa = row_facts(a), fb = row_facts(b);
  const int64_t row_tiles = L.mp / kTileRows, col_tiles = L.np / cols;
#pragma omp parallel num_threads(thread_count(threads))
  {
    std::vector<float> out(kTileRows * cols);
    std::vector<int32_t> dots(fused ? 0 : L.blocks * kTileRows * cols);
    std::vector<Term> terms(L.blocks);
    // Column panels outermost: consecutive tiles reuse one panel of B.
#pragma omp for schedule(static)
    for (int64_t t = 0; t < row_tiles * col_tiles; ++t) {
      const int64_t i0 = (t % row_tiles) * kTileRows, j0 = (t / row_tiles) * cols;
      if (fused) HWY_DYNAMIC_DISPATCH(BlockFp32Tile)(L, i0, j0, out.data());
      else HWY_DYNAMIC_DISPATCH(BlockDotsTile)(L, i0, j0, dots.data());
      for (int ii = 0; ii < kTileRows && i0 + ii < L.m; ++ii)
        for (int64_t jj = 0; jj < cols && j0 + jj < L.n; ++jj) {
          float& dst = c[(i0 + ii) * L.n + j0 + jj];
          if (fused) dst = out[ii * cols + jj];
          else dst = combine_dots(a, fa, i0 + ii, b, fb, j0 + jj, dots.data() + ii * cols + jj, kTileRows * cols,
                                  model, blocks_per_step, terms);
        }
    }
  }
}

bool simd_kernels_available() { return HWY_DYNAMIC_DISPATCH(HasKernels)(); }

void simd_fma_gemm(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n, int64_t k,
                   int threads, float* c) {
  const int64_t cols = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(TileCols)());
  const int64_t mp = round_up(m, kTileRows), np = round_up(n, cols);
  std::vector<float> ap(mp * k, 0.0f), bt(k * np, 0.0f);  // bt: [np/cols][k][cols] panels
  std::copy(a.begin(), a.end(), ap.begin());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t kk = 0; kk < k; ++kk) bt[((j / cols) * k + kk) * cols + j % cols] = b[j * k + kk];
  const int64_t row_tiles = mp / kTileRows, col_tiles = np / cols;
#pragma omp parallel num_threads(thread_count(threads))
  {
    std::vector<float> out(kTileRows * cols);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < row_tiles * col_tiles; ++t) {
      const int64_t i0 = (t % row_tiles) * kTileRows, j0 = (t / row_tiles) * cols;
      HWY_DYNAMIC_DISPATCH(FmaTile)(ap.data(), bt.data() + (j0 / cols) * k * cols, k, i0, out.data());
      for (int ii = 0; ii < kTileRows && i0 + ii < m; ++ii)
        for (int64_t jj = 0; jj < cols && j0 + jj < n; ++jj) c[(i0 + ii) * n + j0 + jj] = out[ii * cols + jj];
    }
  }
}

}  // namespace fp4emu::gemm_detail
#endif  // HWY_ONCE
