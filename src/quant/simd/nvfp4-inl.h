// Per-target NVFP4 block kernels for NVFP4_TE (nvfp4.te, the NVIDIA kernel
// recipe): the fp32 operation sequence of quantize_te in
// src/quant/reference/nvfp4.cpp, in the same order, one block of 16 at a time.
// The scale steps of four blocks run together, lanes across blocks: a vector
// reduction, division and broadcast per 16 elements would cost more than the
// elements.
#if defined(FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
#endif

#include <cstdint>
#include <limits>

#include "codec-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kNvBlock = 16;
constexpr int kNvNanScale = 0x7F;
using NvTag = hn::CappedTag<float, kNvBlock>;

// Per-tensor constants of NVFP4_TE (nvfp4.md §4.1 step 1-2).
struct NvTensorConstants {
  float encode_rn16;  // m = fp32(S_enc * RN16)
  float decode;       // S_dec
  float global_amax;  // G, for TE's dequantize
  float factor_inv;   // fp32(1/(6*M)), for TE's dequantize
};

// Block amax reduced with fmaxf (NvAmaxNan::drop): NaN lanes never win.
// Magnitude bits with NaN lanes zeroed, integer max: the exact maximum.
template <class D>
HWY_INLINE IntVec<D> AbsBitsDroppingNan(D d, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  const auto bits = AbsBits(d, v);
  return hn::IfThenZeroElse(hn::Gt(bits, hn::Set(di, kInfBits)), bits);
}

struct NvBlock {
  hn::Vec<NvTag> scale;   // fp32(ue4m3 s), broadcast
  hn::Vec<NvTag> encode;  // enc_b, broadcast
  hn::Vec<NvTag> factor;  // TE's dequantize factor fp32(fp32(s * G) * fp32(1/(6*M))), broadcast
};

// The scale steps of kNvGroup consecutive blocks at once (one division per
// group instead of per block): lanes across blocks.
constexpr int kNvGroup = 4;
struct NvGroupScales {
  alignas(16) float scale[kNvGroup];
  alignas(16) float encode[kNvGroup];
  alignas(16) float factor[kNvGroup];
  NvBlock block(int b) const {
    const NvTag d;
    return {hn::Set(d, scale[b]), hn::Set(d, encode[b]), hn::Set(d, factor[b])};
  }
};

HWY_INLINE NvGroupScales NvTeGroupScales(const NvTensorConstants& t, const float* HWY_RESTRICT x) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  float amax[kNvGroup];
  for (int b = 0; b < kNvGroup; ++b) {
    auto acc = hn::Zero(di);
    for (int i = 0; i < kNvBlock; i += static_cast<int>(hn::Lanes(d)))
      acc = hn::Max(acc, AbsBitsDroppingNan(d, hn::LoadU(d, x + b * kNvBlock + i)));
    amax[b] = hn::GetLane(hn::BitCast(d, hn::MaxOfLanes(di, acc)));
  }
  const hn::CappedTag<float, kNvGroup> dg;
  const int lanes = static_cast<int>(hn::Lanes(dg));
  NvGroupScales g;
  for (int b = 0; b < kNvGroup; b += lanes) {
    // The amax of block b + i in lane i, built in registers (a vector load of
    // the scalars just stored would stall on store forwarding).
    auto a = hn::Set(dg, amax[b + lanes - 1]);
    for (int i = lanes - 2; i >= 0; --i) a = hn::IfThenElse(hn::FirstN(dg, i + 1), hn::Set(dg, amax[b + i]), a);
    // §4.1 step 2: p = fminf(fp32(a_b * m), FLT_MAX), s = cvt.rn.satfinite.e4m3(p).
    const auto p = hn::Min(hn::Mul(a, hn::Set(dg, t.encode_rn16)),
                           hn::Set(dg, std::numeric_limits<float>::max()));
    const auto s = Ue4m3RneSatGrid(dg, p);
    // §4.1 step 3: enc_b = fminf(fp32(1 / fp32(s * S_dec)), FLT_MAX); s = 0 -> FLT_MAX.
    const auto enc = hn::Min(hn::Div(hn::Set(dg, 1.0f), hn::Mul(s, hn::Set(dg, t.decode))),
                             hn::Set(dg, std::numeric_limits<float>::max()));
    // TE's dequantize (dequantize_nvfp4.cuh:69): fp32(fp32(s * G) * fp32(1/(6*M))).
    const auto factor = hn::Mul(hn::Mul(s, hn::Set(dg, t.global_amax)), hn::Set(dg, t.factor_inv));
    hn::Store(s, dg, g.scale + b);
    hn::Store(enc, dg, g.encode + b);
    hn::Store(factor, dg, g.factor + b);
  }
  return g;
}

// §4.1 step 4: y = fp32(x * enc_b), cvt.rn.satfinite.e2m1 (NaN -> +6, code 0x7).
template <Rounding R>
HWY_INLINE hn::Vec<NvTag> NvSignedGrid(const NvBlock& b, hn::Vec<NvTag> v, IntVec<NvTag>* code) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  const auto y = hn::Mul(v, b.encode);
  const auto nan = hn::IsNaN(y);
  const auto grid = hn::IfThenElse(nan, hn::Set(d, 6.0f), E2m1Grid<R>(d, hn::Abs(y)));
  const auto sign = hn::BitCast(d, hn::IfThenZeroElse(hn::RebindMask(di, nan),
                                                      hn::And(hn::BitCast(di, y), hn::Set(di, INT32_MIN))));
  if (code) *code = hn::Or(E2m1Code(d, grid), hn::ShiftRight<28>(hn::BitCast(di, sign)));
  return hn::Or(grid, sign);
}

// kNvGroup blocks.
template <Rounding R>
HWY_INLINE void NvTeFakeQuantGroup(const NvTensorConstants& t, const float* HWY_RESTRICT x, float* HWY_RESTRICT y) {
  const NvTag d;
  const NvGroupScales g = NvTeGroupScales(t, x);
  for (int b = 0; b < kNvGroup; ++b) {
    const NvBlock blk = g.block(b);
    for (int i = b * kNvBlock; i < (b + 1) * kNvBlock; i += static_cast<int>(hn::Lanes(d))) {
      const auto q = NvSignedGrid<R>(blk, hn::LoadU(d, x + i), nullptr);
      // TE's dequantize: fp32(e2m1 * factor).
      hn::StoreU(hn::Mul(q, blk.factor), d, y + i);
    }
  }
}

// kNvGroup blocks: writes their codes and UE4M3 codes.
template <Rounding R>
HWY_INLINE void NvTeQuantizeGroup(const NvTensorConstants& t, const float* HWY_RESTRICT x, uint8_t* HWY_RESTRICT codes,
                                  uint32_t* HWY_RESTRICT scales) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  const NvGroupScales g = NvTeGroupScales(t, x);
  for (int b = 0; b < kNvGroup; ++b) {
    const NvBlock blk = g.block(b);
    for (int i = b * kNvBlock; i < (b + 1) * kNvBlock; i += static_cast<int>(hn::Lanes(d))) {
      IntVec<NvTag> code = hn::Zero(di);
      NvSignedGrid<R>(blk, hn::LoadU(d, x + i), &code);
      StoreCodeBytes(d, hn::And(code, hn::Set(di, 0xF)), codes + i);
    }
    scales[b] = static_cast<uint32_t>(hn::GetLane(Ue4m3Code(d, blk.scale)));
  }
}

// nvfp4_decode_block for the recipes without a library dequantize (cudnn,
// cutlass_epi): fp32(fp32(e2m1 * s) * S_dec),
// with the sign in the first factor as the reference has it, so that NaN
// operands propagate alike; UE4M3 0x7F makes the block NaN.
HWY_INLINE void NvDecodeBlock(float s_dec, uint8_t scale, const uint8_t* HWY_RESTRICT codes, float* HWY_RESTRICT y) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const int scale_code = scale & 0x7F;
  if (scale_code == kNvNanScale) {
    for (int i = 0; i < kNvBlock; i += n) hn::StoreU(hn::BitCast(d, hn::Set(di, kQuietNanBits)), d, y + i);
    return;
  }
  const auto s = Ue4m3Value(d, hn::Set(di, scale_code));
  const auto decode = hn::Set(d, s_dec);
  for (int i = 0; i < kNvBlock; i += n) {
    const auto c = LoadCodeBytes(d, codes + i);
    const auto magnitude = E2m1Value(d, hn::And(c, hn::Set(di, 7)));
    const auto sign = hn::BitCast(d, hn::ShiftLeft<28>(hn::And(c, hn::Set(di, 8))));
    hn::StoreU(hn::Mul(hn::Mul(hn::Or(magnitude, sign), s), decode), d, y + i);
  }
}

// nvfp4_decode_block for the recipes whose library multiplies the element by
// one per-block factor f (reference::nvfp4_decode_factor): fp32(e2m1 * f);
// with positive_zero, code 0x8 is +0 (ModelOpt's table, ggml's kvalues).
HWY_INLINE void NvDecodeBlockFactor(float factor, bool positive_zero, const uint8_t* HWY_RESTRICT codes,
                                    float* HWY_RESTRICT y) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const auto f = hn::Set(d, factor);
  for (int i = 0; i < kNvBlock; i += n) {
    auto c = LoadCodeBytes(d, codes + i);
    if (positive_zero) c = hn::IfThenZeroElse(hn::Eq(c, hn::Set(di, 8)), c);
    const auto magnitude = E2m1Value(d, hn::And(c, hn::Set(di, 7)));
    const auto sign = hn::BitCast(d, hn::ShiftLeft<28>(hn::And(c, hn::Set(di, 8))));
    hn::StoreU(hn::Mul(hn::Or(magnitude, sign), f), d, y + i);
  }
}

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
