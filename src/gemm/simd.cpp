// Fast forms of the GEMM models (Highway, dynamic dispatch; OpenMP over
// output tiles). Each output is computed whole by one tile, in the order of
// its scalar form (reference.cpp), so the bits do not depend on the target or
// the thread count; tests compare every compiled target with the scalar form.
//
// Packed × packed (exact, block_fp32): the integer block dot products
// d = Σ_{k∈block} N_a·N_b, vectorised over columns of B: a quad
// (N_a[4q] .. N_a[4q+3]) of a row of A is broadcast and multiplied with the
// quads of kTileVecs·Lanes columns of B, byte by byte, the pairs summed into
// int16 lanes (QuadPairProducts: pmaddubsw on x86, u8×s8), the int16 sums
// widened to int32 once per kWidenQuads quads, at most 32 elements (pmaddwd
// with ones). pmaddubsw needs one unsigned factor: A's bytes are
// N_a + kAOffset, and the block's kAOffset·Σ N_b is subtracted afterwards.
// |d| ≤ 64·28·28 < 2^16.
//
// block_fp32 with one block per step: q = fp32(d·u_a·u_b) is one fp32
// multiply of float(d) (exact) by f = u_a·u_b, which is exact whenever it is a
// normal float (units have at most 4 significant bits), and then exact too
// when |f| < 2^112, so acc + q is one MulAdd (BlockFp32TileUnits); lanes
// where f is out of that range (MXFP4 units near the ends of the E8M0 range,
// zero units, NaN blocks) take q in double: d·u_a·u_b is exact there and the
// cast rounds once.
//
// exact: when every output of a tile has its unit exponents close, the tile
// sums its block terms in double lanes (ExactSumsTile); otherwise, and for
// block_fp32 with several blocks per step, the block dot products of a tile
// are stored and combined per output (combine_dots): in one int64 when the
// output's exponents are close, in the Kulisch accumulator otherwise.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "exact_sum.hpp"
#include "fp4emu/threads.hpp"
#include "models.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/gemm/simd.cpp"  // relative to the repository root
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "src/quant/simd/pack-inl.h"

#ifndef FP4EMU_GEMM_SIMD_ONCE
#define FP4EMU_GEMM_SIMD_ONCE
namespace fp4emu::gemm_detail {

constexpr int kTileRows = 4;  // rows of A per tile of the integer kernels
constexpr int kMaxFmaRows = 8;  // rows of A per fma_fp32 tile, at most (FmaRows)

// Exactness of the byte products (QuadPairProducts). Every element is an
// integer |N| ≤ 28 in its block's units: 2·E2M1 ≤ 12 (MXFP4, NVFP4), HiF4's
// 4·S1P2 ≤ 7 times 2^(b+c) ≤ 4. A's bytes are N_a + kAOffset ∈ [0, 56]
// (uint8), B's are N_b ∈ [−28, 28] (int8). A pair sum of two byte products
// has |·| ≤ 2·56·28 = 3136, so pmaddubsw never saturates; an int16 lane sums
// the pairs of kQuadsPerWiden quads, |·| ≤ 8·3136 = 25088 < 2^15, and is
// widened to int32 before it could wrap. The offset's term kAOffset·Σ N_b,
// |·| ≤ 28·64·28, is subtracted in int32. tests/gemm_impl_test.cpp
// (GemmSimd.LargestElements) runs every format with its largest elements
// in every lane, both signs.
constexpr int kAOffset = 28;
constexpr int kQuadsPerWiden = 8;

// Packed × packed operands laid out for the integer kernels. B is cut into
// panels of `cols` columns (the target's tile width), each stored contiguously
// along k, so a tile streams its panel sequentially.
struct IntLayout {
  int64_t m = 0, n = 0, kpad = 0, blocks = 0, mp = 0, np = 0, cols = 0;
  int block = 0;
  // A quad (N[4q] .. N[4q+3]) is one uint32, element 4q in the low byte:
  // A's bytes are N + kAOffset (uint8), B's are N (int8).
  // Written whole: the padding by int_layout_shell, the operands' rows by
  // layout_a_rows and layout_b_panel inside the parallel region.
  UninitialisedBuffer<uint32_t> a;  // mp × kpad/4
  UninitialisedBuffer<uint32_t> b;  // [np/cols][kpad/4][cols]
  UninitialisedBuffer<int32_t> b_offset_sums;  // [np/cols][blocks][cols]: kAOffset · Σ_{k∈block} N_b
  UninitialisedBuffer<float> ua;  // mp × blocks
  UninitialisedBuffer<float> ub;  // [np/cols][blocks][cols]
  // `exact` only: unit_m · 2^(unit_e − emin) (operand.hpp), emin the smallest
  // exponent of the row's / column's nonzero units (RowFacts), 0 for a zero
  // unit; laid out as ua / ub. Where an output's exponents span at most
  // double_spread_limit these are exact integers below 2^(4 + spread).
  UninitialisedBuffer<float> ua_rel, ub_rel;
  // 1 where every unit of a row of A (mp) / of a panel of B (np/cols) is 0 or
  // normal with |u| in [2^-63, 2^56): then every unit product of a tile is 0
  // or an exact normal float below 2^112, and BlockFp32Tile skips its
  // per-block check (kUnitProductLimit).
  std::vector<uint8_t> a_units_normal, b_panel_units_normal;
  const uint32_t* b_quads(int64_t j0, int64_t q) const { return b.data() + ((j0 / cols) * (kpad / 4) + q) * cols; }
  const float* b_units(int64_t j0, int64_t kb) const { return ub.data() + ((j0 / cols) * blocks + kb) * cols; }
  int64_t b_block(int64_t j0, int64_t kb) const { return ((j0 / cols) * blocks + kb) * cols; }
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

// Rows of A per fma_fp32 tile: kFmaRows × kTileVecs independent chains of
// fused multiply-adds, as many as the registers hold beside B's vectors and
// A's broadcast: 8 rows (16 accumulators) with the 32 registers of AVX-512
// and Arm, 6 (12) with the 16 of AVX2 and SSE4.
#if HWY_ARCH_X86 && HWY_MAX_BYTES < 64
constexpr int kFmaRows = 6;
#else
constexpr int kFmaRows = 8;
#endif
static_assert(kFmaRows <= kMaxFmaRows);
size_t FmaRows() { return kFmaRows; }

// ---- Packed operand to fp32 rows (decode_fp32_operand) ---------------------

// table[code] for 16 codes in each lane: one TableLookupLanes per table
// slice of Lanes entries (one on AVX-512, two on AVX2), slices chosen by the
// code's high bits.
template <class DF, class VI>
HWY_INLINE hn::Vec<DF> Lookup16(DF df, const float* HWY_RESTRICT table, VI code) {
  const hn::RebindToSigned<DF> di;
  const size_t lanes = hn::Lanes(df);
  if (lanes >= 16) return hn::TableLookupLanes(hn::LoadU(df, table), hn::IndicesFromVec(df, code));
  const VI low = hn::And(code, hn::Set(di, static_cast<int32_t>(lanes - 1)));
  hn::Vec<DF> v = hn::TableLookupLanes(hn::LoadU(df, table), hn::IndicesFromVec(df, low));
  for (size_t c = lanes; c < 16; c += lanes) {
    const hn::Vec<DF> part = hn::TableLookupLanes(hn::LoadU(df, table + c), hn::IndicesFromVec(df, low));
    v = hn::IfThenElse(hn::RebindMask(df, hn::Gt(code, hn::Set(di, static_cast<int32_t>(c) - 1))), part, v);
  }
  return v;
}

// HiF4's micro-exponent factor 2^(b_{j/8} + c_{j/4}) of elements j.. of a
// block with scale word `word` (docs/spec/hif4.md §3-§4: L2 bits 8..15, L3
// bits 16..31), as fp32.
template <class DF>
HWY_INLINE hn::Vec<DF> Hif4Factor(DF df, uint32_t word, uint32_t j) {
  const hn::RebindToUnsigned<DF> du;
  const auto jv = hn::Iota(du, j);
  const auto w = hn::Set(du, word);
  const auto one = hn::Set(du, 1u);
  const auto l2 = hn::And(hn::Shr(w, hn::Add(hn::ShiftRight<3>(jv), hn::Set(du, 8u))), one);
  const auto l3 = hn::And(hn::Shr(w, hn::Add(hn::ShiftRight<2>(jv), hn::Set(du, 16u))), one);
  return hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::Add(l2, l3), hn::Set(du, 127u))));
}

// Rows [r0, r1) of p into out (rows × k): out[r·k + kk] = value(code)·unit,
// value(code) = N as fp32 (−0 kept), times 2^(b+c) for HiF4, which is exact;
// the multiply by the unit is the one rounding of element_fp32.
template <int kBlock>
void DecodeRowsBlock(const PackedTensor& p, const ElementTables& t, int64_t r0, int64_t r1, float* out) {
  const hn::CappedTag<float, kBlock> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t lanes = hn::Lanes(df);
  const int64_t k = p.axis_len, blocks = p.blocks_per_row(), row_bytes = p.padded_len / 2;
  const bool hif4 = p.format == Format::hif4;
  HWY_ALIGN float table[16 + hn::MaxLanes(df)] = {};
  std::copy(t.values.begin(), t.values.end(), table);
  HWY_ALIGN uint8_t codes[kBlock];
  HWY_ALIGN float partial[kBlock];
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t index = r * blocks + b;
      const uint32_t word = hif4 ? scale_word(p, index) : p.scales[index];
      const auto unit = hn::Set(df, t.units[word & 0xFF]);
      fp4emu::simd::HWY_NAMESPACE::UnpackNibbles<kBlock>(p.nibble_order, p.codes.data() + r * row_bytes + b * (kBlock / 2),
                                                         codes);
      const int64_t count = std::min<int64_t>(kBlock, k - b * kBlock);
      float* dst = out + (r - r0) * k + b * kBlock;
      float* w = count == kBlock ? dst : partial;
      for (size_t j = 0; j < kBlock; j += lanes) {
        auto v = Lookup16(df, table, hn::PromoteTo(di, hn::LoadU(d8, codes + j)));
        if (hif4) v = hn::Mul(v, Hif4Factor(df, word, static_cast<uint32_t>(j)));
        hn::StoreU(hn::Mul(v, unit), df, w + j);
      }
      if (w == partial) std::copy(partial, partial + count, dst);
    }
}

void DecodeRows(const PackedTensor& p, const ElementTables& t, int64_t r0, int64_t r1, float* out) {
  switch (p.block_size) {
    case 16: return DecodeRowsBlock<16>(p, t, r0, r1, out);
    case 32: return DecodeRowsBlock<32>(p, t, r0, r1, out);
    case 64: return DecodeRowsBlock<64>(p, t, r0, r1, out);
  }
}

#if HWY_TARGET == HWY_SCALAR
// One-lane target: no int16 pairs in an int32 lane. The driver uses the
// scalar forms instead.
bool HasKernels() { return false; }
size_t TileCols() { return 1; }
void BlockDotsTile(const IntLayout&, int64_t, int64_t, int32_t*) {}
void ExactSumsTile(const IntLayout&, int64_t, int64_t, double*) {}
void BlockFp32Tile(const IntLayout&, int64_t, int64_t, float*, int64_t) {}
void FmaTile(const float* const*, const float*, int64_t, float*) {}
#else
bool HasKernels() { return true; }

size_t TileCols() {
  const hn::ScalableTag<int32_t> d32;
  return kTileVecs * hn::Lanes(d32);
}

// Per 16-bit lane i: a[2i]·b[2i] + a[2i+1]·b[2i+1], a's bytes unsigned, b's
// signed, for operands within the bounds at kAOffset (no saturation, no wrap).
template <class D16, class V8U, class V8I>
HWY_INLINE hn::Vec<D16> QuadPairProducts(D16 d16, V8U a, V8I b) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  (void)d16;
  return hn::Vec<D16>{_mm512_maddubs_epi16(a.raw, b.raw)};
#elif HWY_TARGET == HWY_AVX2
  (void)d16;
  return hn::Vec<D16>{_mm256_maddubs_epi16(a.raw, b.raw)};
#elif HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  (void)d16;
  return hn::Vec<D16>{_mm_maddubs_epi16(a.raw, b.raw)};
#else
  // Portable form: the low and high byte of each 16-bit lane, zero- and
  // sign-extended; the products and their sum fit int16 (bounds above).
  const hn::RebindToUnsigned<D16> du16;
  const auto a16 = hn::BitCast(du16, a);
  const auto a_lo = hn::BitCast(d16, hn::And(a16, hn::Set(du16, 0xFF)));
  const auto a_hi = hn::BitCast(d16, hn::ShiftRight<8>(a16));
  const auto b16 = hn::BitCast(d16, b);
  const auto b_lo = hn::ShiftRight<8>(hn::ShiftLeft<8>(b16));
  const auto b_hi = hn::ShiftRight<8>(b16);
  return hn::Add(hn::Mul(a_lo, b_lo), hn::Mul(a_hi, b_hi));
#endif
}

// Rows of A per pass of a tile: a tile's kTileRows rows run in passes of
// kPassRows, each pass streaming the panel of B once. Its live vectors are
// kPassRows·kTileVecs int16 pair sums and as many accumulators (twice as
// many for `exact`'s double halves), B's vectors and A's broadcast: 4 rows
// (19, 27 for `exact`) fit the 32 registers of AVX-512 and Arm; the 16 of
// AVX2 and SSE4 take 2 rows (11, 15), where 4 spilled every block.
// Quads summed in int16 lanes before a widening: kQuadsPerWiden (the bound)
// on 32 registers; 4 on 16, where MXFP4's and HiF4's 8 spilled (GCC forms
// all their byte products before adding them; callgrind: 4 is 4-9% fewer
// tile instructions).
#if HWY_ARCH_X86 && HWY_MAX_BYTES < 64
constexpr int kPassRows = 2;
constexpr int kWidenQuads = 4;
#else
constexpr int kPassRows = kTileRows;
constexpr int kWidenQuads = kQuadsPerWiden;
#endif
static_assert(kTileRows % kPassRows == 0 && kWidenQuads <= kQuadsPerWiden);

// body(std::integral_constant<int, block>{}) for the layout's block size: the
// quad loops of ForEachBlockDot unroll whole for a block size known at
// compile time.
template <class Body>
HWY_INLINE void WithBlockSize(int block, const Body& body) {
  switch (block) {
    case 16: return body(std::integral_constant<int, 16>{});
    case 32: return body(std::integral_constant<int, 32>{});
    default: return body(std::integral_constant<int, 64>{});
  }
}

// Calls sink(kb, dots) for each block kb in increasing order, where
// dots[ii][r] (ii < kPassRows) holds the block dot products of row i0+ii with
// columns j0 + r·Lanes ... j0 + (r+1)·Lanes - 1; kBlock is op.block.
template <int kBlock, class Sink>
HWY_INLINE void ForEachBlockDot(const IntLayout& op, int64_t i0, int64_t j0, const Sink& sink) {
  const hn::ScalableTag<int32_t> d32;
  const hn::Repartition<int16_t, decltype(d32)> d16;
  const hn::Repartition<uint8_t, decltype(d32)> du8;
  const hn::Repartition<int8_t, decltype(d32)> di8;
  const hn::RebindToUnsigned<decltype(d32)> du32;
  using V = hn::Vec<decltype(d32)>;
  using V16 = hn::Vec<decltype(d16)>;
  constexpr int kQuads = kBlock / 4, kWiden = kQuads < kWidenQuads ? kQuads : kWidenQuads;
  const size_t lanes = hn::Lanes(d32);
  const uint32_t* a_quads[kPassRows];
  for (int ii = 0; ii < kPassRows; ++ii) a_quads[ii] = op.a.data() + (i0 + ii) * (op.kpad / 4);
  const V16 ones = hn::Set(d16, 1);
  for (int64_t kb = 0; kb < op.blocks; ++kb) {
    V sum0[kPassRows][kTileVecs], sum1[kPassRows][kTileVecs];
    for (int ii = 0; ii < kPassRows; ++ii)
      for (int r = 0; r < kTileVecs; ++r) sum0[ii][r] = sum1[ii][r] = hn::Zero(d32);
    for (int w = 0; w < kQuads; w += kWiden) {
      V16 pairs[kPassRows][kTileVecs];
      for (int ii = 0; ii < kPassRows; ++ii)
        for (int r = 0; r < kTileVecs; ++r) pairs[ii][r] = hn::Zero(d16);
      for (int qq = w; qq < w + kWiden; ++qq) {
        const int64_t q = kb * kQuads + qq;
        const uint32_t* bq = op.b_quads(j0, q);
        hn::Vec<decltype(di8)> bv[kTileVecs];
        for (int r = 0; r < kTileVecs; ++r) bv[r] = hn::BitCast(di8, hn::LoadU(du32, bq + r * lanes));
        for (int ii = 0; ii < kPassRows; ++ii) {
          const auto av = hn::BitCast(du8, hn::Set(du32, a_quads[ii][q]));
          for (int r = 0; r < kTileVecs; ++r) pairs[ii][r] = hn::Add(pairs[ii][r], QuadPairProducts(d16, av, bv[r]));
        }
      }
      for (int ii = 0; ii < kPassRows; ++ii)
        for (int r = 0; r < kTileVecs; ++r)
          sum0[ii][r] = hn::ReorderWidenMulAccumulate(d32, pairs[ii][r], ones, sum0[ii][r], sum1[ii][r]);
    }
    const int32_t* offset_sums = op.b_offset_sums.data() + op.b_block(j0, kb);
    V dots[kPassRows][kTileVecs];
    for (int r = 0; r < kTileVecs; ++r) {
      const V offset = hn::LoadU(d32, offset_sums + r * lanes);
      for (int ii = 0; ii < kPassRows; ++ii)
        dots[ii][r] = hn::Sub(hn::RearrangeToOddPlusEven(sum0[ii][r], sum1[ii][r]), offset);
    }
    sink(kb, dots);
  }
}

// dots: kTileRows × TileCols() per block, blocks one after the other.
void BlockDotsTile(const IntLayout& op, int64_t i0, int64_t j0, int32_t* dots_out) {
  const hn::ScalableTag<int32_t> d32;
  const size_t lanes = hn::Lanes(d32), cols = kTileVecs * lanes;
  WithBlockSize(op.block, [&](auto block) {
    for (int p = 0; p < kTileRows; p += kPassRows)
      ForEachBlockDot<decltype(block)::value>(op, i0 + p, j0, [&](int64_t kb, const auto& dots) {
        int32_t* out = dots_out + (kb * kTileRows + p) * cols;
        for (int ii = 0; ii < kPassRows; ++ii)
          for (int r = 0; r < kTileVecs; ++r) hn::StoreU(dots[ii][r], d32, out + ii * cols + r * lanes);
      });
  });
}

// exact, when every output of the tile has its unit exponents within
// double_spread_limit (simd_packed_gemm checks): block kb adds
// x = d·f, f = ua_rel·ub_rel = m_a·m_b·2^(e − base), e = e_a + e_b, base the
// output's smallest e. f (at most 8 significant bits) and x (|d·m_a·m_b| <
// 2^24, so at most 24) are exact in fp32, and x is an integer below
// 2^(24 + spread); the sums of all blocks stay integers below 2^53, exact in
// double. sums: kTileRows × cols, each an integer, the output's sum/2^base.
void ExactSumsTile(const IntLayout& op, int64_t i0, int64_t j0, double* sums) {
  const hn::ScalableTag<float> df;
  const hn::Half<decltype(df)> dh;
  const hn::Repartition<double, decltype(df)> dd;
  using VF = hn::Vec<decltype(df)>;
  using VD = hn::Vec<decltype(dd)>;
  const size_t lanes = hn::Lanes(df), cols = kTileVecs * lanes, half = hn::Lanes(dd);
  WithBlockSize(op.block, [&](auto block) {
    for (int p = 0; p < kTileRows; p += kPassRows) {
      VD acc[kPassRows][kTileVecs][2];
      for (int ii = 0; ii < kPassRows; ++ii)
        for (int r = 0; r < kTileVecs; ++r) acc[ii][r][0] = acc[ii][r][1] = hn::Zero(dd);
      ForEachBlockDot<decltype(block)::value>(op, i0 + p, j0, [&](int64_t kb, const auto& dots) {
        const float* ub = op.ub_rel.data() + op.b_block(j0, kb);
        for (int ii = 0; ii < kPassRows; ++ii) {
          const VF ua = hn::Set(df, op.ua_rel[(i0 + p + ii) * op.blocks + kb]);
          for (int r = 0; r < kTileVecs; ++r) {
            const VF x = hn::Mul(hn::ConvertTo(df, dots[ii][r]), hn::Mul(ua, hn::LoadU(df, ub + r * lanes)));
            acc[ii][r][0] = hn::Add(acc[ii][r][0], hn::PromoteTo(dd, hn::LowerHalf(dh, x)));
            acc[ii][r][1] = hn::Add(acc[ii][r][1], hn::PromoteTo(dd, hn::UpperHalf(dh, x)));
          }
        }
      });
      for (int ii = 0; ii < kPassRows; ++ii)
        for (int r = 0; r < kTileVecs; ++r) {
          hn::StoreU(acc[ii][r][0], dd, sums + (p + ii) * cols + r * lanes);
          hn::StoreU(acc[ii][r][1], dd, sums + (p + ii) * cols + r * lanes + half);
        }
    }
  });
}

// Units for which block_fp32 may skip its per-block check (IntLayout::
// a_units_normal): 0 or |u| in [2^-63, 2^56). Every unit product f is then 0
// or an exact normal float with at most 8 significant bits and |f| < 2^112.
// BlockFp32TileUnits checks f against the same range where a unit may be out.
constexpr float kUnitProductMin = FLT_MIN, kUnitProductLimit = 0x1p112f;

// block_fp32, one block per step: out[ii·stride + col] = fp32 accumulation
// over the blocks. kCheckUnits false: the layout vouches that every unit
// product is in range (kUnitProductMin).
//
// The step acc + fp32(d·f) is one MulAdd(d, f, acc) where f is in range:
// d is an integer, |d| < 2^16, and f (0, or 2^-126 ≤ |f| < 2^112 with at
// most 8 significant bits) makes d·f 0 or a number of at most 24
// significant bits within [2^-126, 2^128): exact in fp32, so the fused form
// rounds acc + d·f once, as the separate add does (and an unfused MulAdd
// gives the same bits). A zero d·f leaves acc, which is never −0, as it is.
template <int kBlock, bool kCheckUnits>
HWY_INLINE void BlockFp32TileUnits(const IntLayout& op, int64_t i0, int64_t j0, float* out, int64_t stride) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> d32;
  using VF = hn::Vec<decltype(df)>;
  const size_t lanes = hn::Lanes(df);
  const VF lo = hn::Set(df, kUnitProductMin), hi = hn::Set(df, kUnitProductLimit);
  for (int p = 0; p < kTileRows; p += kPassRows) {
    VF acc[kPassRows][kTileVecs];
    for (int ii = 0; ii < kPassRows; ++ii)
      for (int r = 0; r < kTileVecs; ++r) acc[ii][r] = hn::Zero(df);
    ForEachBlockDot<kBlock>(op, i0 + p, j0, [&](int64_t kb, const auto& dots) {
      for (int ii = 0; ii < kPassRows; ++ii) {
        const float ua = op.ua[(i0 + p + ii) * op.blocks + kb];
        const VF uav = hn::Set(df, ua);
        for (int r = 0; r < kTileVecs; ++r) {
          const float* ub = op.b_units(j0, kb) + r * lanes;
          const VF f = hn::Mul(uav, hn::LoadU(df, ub));
          if (!kCheckUnits || hn::AllTrue(df, hn::And(hn::Ge(f, lo), hn::Lt(f, hi)))) {
            acc[ii][r] = hn::MulAdd(hn::ConvertTo(df, dots[ii][r]), f, acc[ii][r]);
          } else {
            // Out of range (or zero, or NaN) in some lane: each lane's
            // d·u_a·u_b in double, where it is exact, rounded once.
            HWY_ALIGN int32_t d[hn::MaxLanes(d32)];
            HWY_ALIGN float qs[hn::MaxLanes(df)];
            hn::Store(dots[ii][r], d32, d);
            for (size_t l = 0; l < lanes; ++l)
              qs[l] = static_cast<float>(static_cast<double>(d[l]) *
                                         (static_cast<double>(ua) * static_cast<double>(ub[l])));
            acc[ii][r] = hn::Add(acc[ii][r], hn::Load(df, qs));
          }
        }
      }
    });
    for (int ii = 0; ii < kPassRows; ++ii)
      for (int r = 0; r < kTileVecs; ++r) hn::StoreU(acc[ii][r], df, out + (p + ii) * stride + r * lanes);
  }
}

// out: kTileRows rows of TileCols() values, `stride` apart.
void BlockFp32Tile(const IntLayout& op, int64_t i0, int64_t j0, float* out, int64_t stride) {
  bool normal = op.b_panel_units_normal[j0 / op.cols] != 0;
  for (int ii = 0; ii < kTileRows; ++ii) normal = normal && op.a_units_normal[i0 + ii] != 0;
  WithBlockSize(op.block, [&](auto block) {
    if (normal) BlockFp32TileUnits<decltype(block)::value, false>(op, i0, j0, out, stride);
    else BlockFp32TileUnits<decltype(block)::value, true>(op, i0, j0, out, stride);
  });
}

// fma_fp32 tile: kFmaRows rows of A (a_rows, each k long) times the panel of
// columns j0.. (b, k × cols); out is kFmaRows × cols.
void FmaTile(const float* const* a_rows, const float* b, int64_t k, float* out) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df), cols = kTileVecs * lanes;
#if HWY_NATIVE_FMA
  using VF = hn::Vec<decltype(df)>;
  VF acc[kFmaRows][kTileVecs];
  for (int ii = 0; ii < kFmaRows; ++ii)
    for (int r = 0; r < kTileVecs; ++r) acc[ii][r] = hn::Zero(df);
  for (int64_t kk = 0; kk < k; ++kk) {
    VF bv[kTileVecs];
    for (int r = 0; r < kTileVecs; ++r) bv[r] = hn::LoadU(df, b + kk * cols + r * lanes);
    for (int ii = 0; ii < kFmaRows; ++ii) {
      const VF av = hn::Set(df, a_rows[ii][kk]);
      for (int r = 0; r < kTileVecs; ++r) acc[ii][r] = hn::MulAdd(av, bv[r], acc[ii][r]);  // fused
    }
  }
  for (int ii = 0; ii < kFmaRows; ++ii)
    for (int r = 0; r < kTileVecs; ++r) hn::StoreU(acc[ii][r], df, out + ii * cols + r * lanes);
#else
  // This target's MulAdd is a multiply then an add (two roundings): use the
  // fused scalar fma.
  for (int ii = 0; ii < kFmaRows; ++ii)
    for (size_t c = 0; c < cols; ++c) {
      float acc = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) acc = std::fma(a_rows[ii][kk], b[kk * cols + c], acc);
      out[ii * cols + c] = acc;
    }
#endif
}
#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace fp4emu::gemm_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fp4emu::gemm_detail {

HWY_EXPORT(DecodeRows);
HWY_EXPORT(HasKernels);
HWY_EXPORT(TileCols);
HWY_EXPORT(BlockDotsTile);
HWY_EXPORT(ExactSumsTile);
HWY_EXPORT(BlockFp32Tile);
HWY_EXPORT(FmaTile);
HWY_EXPORT(FmaRows);

namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Four bytes in one uint32, element 0 in the low byte (little-endian lane order).
uint32_t byte_quad(const int8_t* n, int offset) {
  uint32_t q = 0;
  for (int e = 0; e < 4; ++e) q |= static_cast<uint32_t>(static_cast<uint8_t>(n[e] + offset)) << (8 * e);
  return q;
}

// The layout's arrays, sized, with the padding filled: padding rows and
// columns get N = 0 and unit 1 (their lanes stay on the exact-f path and
// never produce NaN) and ua_rel / ub_rel 0 (their `exact` terms are 0). The
// operands' rows are laid out by layout_a_rows and layout_b_panel, in the
// parallel region: zero-filling all of it here, on the calling thread, was
// a tenth of a 2-thread block_fp32 call at 1024³.
IntLayout int_layout_shell(const PackedOperand& a, const PackedOperand& b, int64_t cols) {
  IntLayout L;
  L.m = a.rows;
  L.n = b.rows;
  L.kpad = a.kpad;
  L.block = a.block;
  L.blocks = a.blocks;
  L.cols = cols;
  L.mp = round_up(L.m, kTileRows);
  L.np = round_up(L.n, cols);
  const int8_t zeros[4] = {};
  L.a.resize(L.mp * L.kpad / 4);
  L.b.resize(L.kpad / 4 * L.np);
  L.b_offset_sums.resize(L.blocks * L.np);
  L.ub.resize(L.blocks * L.np);
  L.ua.resize(L.mp * L.blocks);
  L.ua_rel.resize(L.mp * L.blocks);
  L.ub_rel.resize(L.blocks * L.np);
  std::fill(L.a.begin() + L.m * (L.kpad / 4), L.a.end(), byte_quad(zeros, kAOffset));
  std::fill(L.ua.begin() + L.m * L.blocks, L.ua.end(), 1.0f);
  std::fill(L.ua_rel.begin() + L.m * L.blocks, L.ua_rel.end(), 0.0f);
  // B's padding columns, in its last panel.
  const int64_t last = L.np / cols - 1;
  for (int64_t j = L.n; j < L.np; ++j) {
    const int64_t c = j - last * cols;
    for (int64_t q = 0; q < L.kpad / 4; ++q) L.b[(last * (L.kpad / 4) + q) * cols + c] = 0;
    for (int64_t kb = 0; kb < L.blocks; ++kb) {
      const int64_t at = (last * L.blocks + kb) * cols + c;
      L.b_offset_sums[at] = 0;
      L.ub[at] = 1.0f;
      L.ub_rel[at] = 0.0f;
    }
  }
  L.a_units_normal.assign(L.mp, 1);  // padding rows: unit 1
  L.b_panel_units_normal.assign(L.np / cols, 1);
  return L;
}

// Per row of an operand: whether it holds a NaN block, and the range of the
// exponents of its nonzero units. A NaN block poisons every output of its
// row (A) or column (B): each block of a row meets a block of every column.
struct RowFacts {
  std::vector<uint8_t> nan;
  std::vector<int> emin, emax;
  explicit RowFacts(int64_t rows) : nan(rows, 0), emin(rows, 0), emax(rows, 0) {}
};

void row_facts(const PackedOperand& p, RowFacts& f, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
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
}

// `exact`'s unit relative to the smallest exponent of its row (IntLayout::
// ua_rel), m·2^(e − emin), e ≥ emin for a nonzero unit: exact for the spreads
// ExactSumsTile takes; beyond 2^127, where it never goes, +Inf.
float relative_unit(int8_t m, int16_t e, int emin) {
  const int shift = e - emin;
  if (m == 0) return 0.0f;
  if (shift > 127) return INFINITY;
  return static_cast<float>(m) * std::bit_cast<float>(static_cast<uint32_t>(127 + shift) << 23);
}

// A unit whose products with any other such unit are 0 or exact normal
// floats (|u_a·u_b| in [2^-126, 2^112), at most 8 significant bits).
bool unit_in_normal_range(float u) {
  return u == 0.0f || (std::fabs(u) >= 0x1p-63f && std::fabs(u) < 0x1p56f);  // false for NaN
}

// Rows [r0, r1) of A, unpacked, into the layout; `fa` holds their facts.
void layout_a_rows(const PackedOperand& a, const RowFacts& fa, IntLayout& L, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t q = 0; q < L.kpad / 4; ++q) L.a[r * (L.kpad / 4) + q] = byte_quad(a.n.data() + r * L.kpad + 4 * q, kAOffset);
  for (int64_t r = r0; r < r1; ++r)
    L.a_units_normal[r] = std::all_of(a.unit.begin() + r * L.blocks, a.unit.begin() + (r + 1) * L.blocks,
                                      unit_in_normal_range);
  std::copy(a.unit.begin() + r0 * L.blocks, a.unit.begin() + r1 * L.blocks, L.ua.begin() + r0 * L.blocks);
  for (int64_t i = r0 * L.blocks; i < r1 * L.blocks; ++i)
    L.ua_rel[i] = relative_unit(a.unit_m[i], a.unit_e[i], fa.emin[i / L.blocks]);
}

// The columns of B in panel `panel`, unpacked, into the layout; `fb` holds
// their facts.
void layout_b_panel(const PackedOperand& b, const RowFacts& fb, IntLayout& L, int64_t panel) {
  const int64_t cols = L.cols;
  for (int64_t j = panel * cols; j < std::min(L.n, (panel + 1) * cols); ++j) {
    const int8_t* col = b.n.data() + j * b.kpad;
    const int64_t c = j - panel * cols;
    uint32_t* dst = L.b.data() + panel * (L.kpad / 4) * cols + c;
    for (int64_t q = 0; q < L.kpad / 4; ++q) dst[q * cols] = byte_quad(col + 4 * q, 0);
    for (int64_t kb = 0; kb < L.blocks; ++kb) {
      int32_t sum = 0;
      for (int e = 0; e < L.block; ++e) sum += col[kb * L.block + e];
      const int64_t at = (panel * L.blocks + kb) * cols + c;
      L.b_offset_sums[at] = kAOffset * sum;
      L.ub[at] = b.unit[b.block_index(j, kb)];
      if (!unit_in_normal_range(L.ub[at])) L.b_panel_units_normal[panel] = 0;
      L.ub_rel[at] = relative_unit(b.unit_m[b.block_index(j, kb)], b.unit_e[b.block_index(j, kb)], fb.emin[j]);
    }
  }
}

// The integer dot products carry no sign of zero: an `exact` result +0 is
// −0 when every element product is −0 (then the sum is exactly zero).
// block_fp32 needs no such step: its accumulator starts at +0.
float exact_zero_sign(float r, const PackedOperand& a, int64_t i, const PackedOperand& b, int64_t j) {
  if (r == 0.0f && !std::signbit(r) && every_product_negative_zero(a, i, b, j)) return -0.0f;
  return r;
}

// The largest spread of an output's block exponents for which its terms
// (|t| < 2^24), shifted to the smallest exponent, sum exactly in one int64.
int int64_spread_limit(int64_t blocks) {
  return 62 - 24 - static_cast<int>(std::bit_width(static_cast<uint64_t>(blocks)));
}

// The same in double (ExactSumsTile): every partial sum an integer below 2^53.
int double_spread_limit(int64_t blocks) {
  return 53 - 24 - static_cast<int>(std::bit_width(static_cast<uint64_t>(blocks)));
}

// sum·2^base rounded once to fp32, for an integer sum below 2^53 in
// magnitude (ExactSumsTile's): the product is exact in double for these
// bases (packed units give |base| of a few hundred), and the conversion
// rounds once (RNE, subnormals, overflow to ±Inf), as round_scaled_to_fp32.
float round_double_sum_to_fp32(double sum, int base) {
  if (base < -1022 || base > 960) return round_scaled_to_fp32(static_cast<int64_t>(sum), base);
  return static_cast<float>(sum * std::bit_cast<double>(static_cast<uint64_t>(base + 1023) << 52));
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
    if (spread <= int64_spread_limit(blocks)) {
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

// One parallel region, no barrier but its end (on a shared machine each
// barrier waits for a thread that may have lost its core). Jobs are handed
// out in order from one counter: C's allocation, chunks of A's rows, then
// B's column panels. A panel's job unpacks and lays out its columns, then
// runs its tiles, taken from the panel's own counter; a thread without jobs
// left helps with the tiles of panels already laid out. A tile waits only
// for C and its own rows of A (jobs handed out before any panel).
void simd_packed_gemm(Operand& a_op, Operand& b_op, GemmModel model, int blocks_per_step, int threads,
                      std::vector<float>& c, const TileEpilogue& epilogue) {
  PackedOperand& a = a_op.packed;
  PackedOperand& b = b_op.packed;
  const int64_t cols = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(TileCols)());
  IntLayout L = int_layout_shell(a, b, cols);
  const bool fused = model == GemmModel::block_fp32 && blocks_per_step == 1;
  RowFacts fa(a.rows), fb(b.rows);
  const int64_t row_tiles = L.mp / kTileRows, col_tiles = L.np / cols;
  constexpr int64_t kChunkRows = 4 * kTileRows;  // a tile's rows lie in one chunk
  const int64_t a_chunks = (L.m + kChunkRows - 1) / kChunkRows;
  std::vector<std::atomic<int>> a_ready(a_chunks);
  std::vector<std::atomic<int>> panel_ready(col_tiles);
  std::vector<std::atomic<int64_t>> panel_next_tile(col_tiles);
  // Allocated here, so that a failure throws to the caller; its pages are
  // written (and faulted in) by the region's first job.
  c.reserve(L.m * L.n);
  std::atomic<int> c_ready{0};
  std::atomic<int64_t> next_job{0};
  const int64_t jobs = 1 + a_chunks + col_tiles;
#pragma omp parallel num_threads(thread_count(threads))
  {
    std::vector<uint8_t> codes(L.kpad);
    std::vector<float> out(kTileRows * cols);
    std::vector<int32_t> dots(fused ? 0 : L.blocks * kTileRows * cols);
    std::vector<Term> terms(L.blocks);
    std::vector<double> sums(model == GemmModel::exact ? kTileRows * cols : 0);
    const auto compute_tile = [&](int64_t i0, int64_t j0) {
      float* const cd = c.data();
      if (model == GemmModel::exact) {
        // Every output of the tile within the double spread (the widest row
        // spread plus the widest column spread): its sums in vector lanes
        // (ExactSumsTile); else combine_dots, one by one.
        const int64_t i1 = std::min(L.m, i0 + kTileRows), j1 = std::min(L.n, j0 + cols);
        int spread_a = 0, spread_b = 0;
        for (int64_t i = i0; i < i1; ++i) spread_a = std::max(spread_a, fa.emax[i] - fa.emin[i]);
        for (int64_t j = j0; j < j1; ++j) spread_b = std::max(spread_b, fb.emax[j] - fb.emin[j]);
        if (spread_a + spread_b <= double_spread_limit(L.blocks)) {
          HWY_DYNAMIC_DISPATCH(ExactSumsTile)(L, i0, j0, sums.data());
          const int* emin_b = fb.emin.data();
          const uint8_t* nan_b = fb.nan.data();
          for (int64_t i = i0; i < i1; ++i) {
            const double* row_sums = sums.data() + (i - i0) * cols - j0;
            float* c_row = cd + i * L.n;
            const int emin_a = fa.emin[i];
            const bool nan_a = fa.nan[i];
            for (int64_t j = j0; j < j1; ++j) {
              float r = round_double_sum_to_fp32(row_sums[j], emin_a + emin_b[j]);
              if (nan_a || nan_b[j]) r = NAN;
              else if (r == 0.0f) r = exact_zero_sign(r, a, i, b, j);
              c_row[j] = r;
            }
          }
          return;
        }
      }
      if (fused) {
        // A whole tile straight into C; an edge tile through `out`.
        if (i0 + kTileRows <= L.m && j0 + cols <= L.n) {
          HWY_DYNAMIC_DISPATCH(BlockFp32Tile)(L, i0, j0, cd + i0 * L.n + j0, L.n);
          return;
        }
        HWY_DYNAMIC_DISPATCH(BlockFp32Tile)(L, i0, j0, out.data(), cols);
      } else {
        HWY_DYNAMIC_DISPATCH(BlockDotsTile)(L, i0, j0, dots.data());
      }
      for (int ii = 0; ii < kTileRows && i0 + ii < L.m; ++ii)
        for (int64_t jj = 0; jj < cols && j0 + jj < L.n; ++jj) {
          float& dst = cd[(i0 + ii) * L.n + j0 + jj];
          if (fused) dst = out[ii * cols + jj];
          else dst = combine_dots(a, fa, i0 + ii, b, fb, j0 + jj, dots.data() + ii * cols + jj, kTileRows * cols,
                                  model, blocks_per_step, terms);
        }
    };
    const auto tile = [&](int64_t i0, int64_t j0) {
      compute_tile(i0, j0);
      epilogue(c.data(), i0, std::min(L.m, i0 + kTileRows), j0, std::min(L.n, j0 + cols));
    };
    const auto panel_tiles = [&](int64_t panel) {
      for (int64_t t; (t = panel_next_tile[panel].fetch_add(1)) < row_tiles;) {
        const int64_t i0 = t * kTileRows;
        while (!c_ready.load(std::memory_order_acquire) || !a_ready[i0 / kChunkRows].load(std::memory_order_acquire))
          std::this_thread::yield();
        tile(i0, panel * cols);
      }
    };
    for (int64_t job; (job = next_job.fetch_add(1)) < jobs;) {
      if (job == 0) {
        // C's fresh pages (4 MB at 1024³) fault in beside the unpacking:
        // on the calling thread before the region they took 3 ms.
        advise_huge_pages(c.data(), L.m * L.n * sizeof(float));
        c.assign(L.m * L.n, 0.0f);
        c_ready.store(1, std::memory_order_release);
      } else if (job <= a_chunks) {
        const int64_t r0 = (job - 1) * kChunkRows, r1 = std::min(L.m, r0 + kChunkRows);
        unpack_rows(*a_op.source, a_op.tables, a, r0, r1, codes.data(), model == GemmModel::exact);
        row_facts(a, fa, r0, r1);
        layout_a_rows(a, fa, L, r0, r1);
        a_ready[job - 1].store(1, std::memory_order_release);
      } else {
        const int64_t panel = job - 1 - a_chunks;
        const int64_t j0 = panel * cols, j1 = std::min(L.n, j0 + cols);
        unpack_rows(*b_op.source, b_op.tables, b, j0, j1, codes.data(), model == GemmModel::exact);
        row_facts(b, fb, j0, j1);
        layout_b_panel(b, fb, L, panel);
        panel_ready[panel].store(1, std::memory_order_release);
        panel_tiles(panel);
      }
    }
    for (int64_t panel = 0; panel < col_tiles; ++panel)
      if (panel_ready[panel].load(std::memory_order_acquire)) panel_tiles(panel);
  }
}

bool simd_kernels_available() { return HWY_DYNAMIC_DISPATCH(HasKernels)(); }

DenseOperand decode_fp32_operand(const PackedTensor& p, Side side, BLayout layout, int threads) {
  const ElementTables tables = checked_element_tables(p, side, layout);
  DenseOperand d;
  d.rows = p.rows;
  d.k = p.axis_len;
  d.values.resize(d.rows * d.k);
  // Chunks of rows taken as threads free up (a busy core does fewer).
  constexpr int64_t kChunk = 16;
#pragma omp parallel for schedule(dynamic) num_threads(thread_count(threads))
  for (int64_t r0 = 0; r0 < d.rows; r0 += kChunk)
    decode_fp32_rows(p, tables, r0, std::min(d.rows, r0 + kChunk), d.values.data() + r0 * d.k);
  return d;
}

void decode_fp32_rows(const PackedTensor& p, const ElementTables& tables, int64_t r0, int64_t r1, float* out) {
  HWY_DYNAMIC_DISPATCH(DecodeRows)(p, tables, r0, r1, out);
}

void simd_fma_gemm(const float* a, const float* b, int64_t m, int64_t n, int64_t k,
                   int threads, float* c) {
  const int64_t cols = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(TileCols)());
  const int64_t np = round_up(n, cols);
  const int64_t rows = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(FmaRows)());
  const int64_t row_tiles = (m + rows - 1) / rows, col_tiles = np / cols;
  Fp32Rows bt(k * np);  // [np/cols][k][cols] panels, every value written below; columns beyond n are 0
#pragma omp parallel num_threads(thread_count(threads))
  {
#pragma omp for schedule(dynamic)
    for (int64_t panel = 0; panel < col_tiles; ++panel) {
      float* dst = bt.data() + panel * k * cols;
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t jj = 0; jj < cols; ++jj) {
          const int64_t j = panel * cols + jj;
          dst[kk * cols + jj] = j < n ? b[j * k + kk] : 0.0f;
        }
    }
    std::vector<float> out(rows * cols);
    // Tiles taken as threads free up (on a shared machine a thread that
    // loses its core takes fewer); column panels outermost, so consecutive
    // tiles reuse one panel of B.
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < row_tiles * col_tiles; ++t) {
      const int64_t i0 = (t % row_tiles) * rows, j0 = (t / row_tiles) * cols;
      const float* a_rows[kMaxFmaRows];  // rows beyond m repeat the last one; their outputs are dropped
      for (int64_t ii = 0; ii < rows; ++ii) a_rows[ii] = a + std::min(i0 + ii, m - 1) * k;
      HWY_DYNAMIC_DISPATCH(FmaTile)(a_rows, bt.data() + (j0 / cols) * k * cols, k, out.data());
      for (int64_t ii = 0; ii < rows && i0 + ii < m; ++ii)
        for (int64_t jj = 0; jj < cols && j0 + jj < n; ++jj) c[(i0 + ii) * n + j0 + jj] = out[ii * cols + jj];
    }
  }
}

}  // namespace fp4emu::gemm_detail
#endif  // HWY_ONCE
