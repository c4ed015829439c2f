// Per-target NVFP4 block kernels for NVFP4_TE (nvfp4.te, the NVIDIA kernel
// recipe): the fp32 operation sequence of quantize_te in
// src/quant/reference/nvfp4.cpp, in the same order, one block of 16 at a time.
// The per-block scale steps run on one lane (scalar SSE on x86): a vector
// division per 16 elements would cost more than the elements.
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
using NvScalarTag = hn::CappedTag<float, 1>;

// Per-tensor constants of NVFP4_TE (nvfp4.md §4.1 step 1-2).
struct NvTensorConstants {
  float encode_rn16;  // m = fp32(S_enc * RN16)
  float decode;       // S_dec
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
};

HWY_INLINE NvBlock NvTeBlockScale(const NvTensorConstants& t, const float* HWY_RESTRICT x) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  const NvScalarTag d1;
  auto acc = hn::Zero(di);
  for (int i = 0; i < kNvBlock; i += static_cast<int>(hn::Lanes(d)))
    acc = hn::Max(acc, AbsBitsDroppingNan(d, hn::LoadU(d, x + i)));
  const float amax = hn::GetLane(hn::BitCast(d, hn::MaxOfLanes(di, acc)));
  // §4.1 step 2: p = fminf(fp32(a_b * m), FLT_MAX), s = cvt.rn.satfinite.e4m3(p).
  const auto p = hn::Min(hn::Mul(hn::Set(d1, amax), hn::Set(d1, t.encode_rn16)),
                         hn::Set(d1, std::numeric_limits<float>::max()));
  const auto s = Ue4m3RneSatGrid(d1, p);
  // §4.1 step 3: enc_b = fminf(fp32(1 / fp32(s * S_dec)), FLT_MAX); s = 0 -> FLT_MAX.
  const auto enc = hn::Min(hn::Div(hn::Set(d1, 1.0f), hn::Mul(s, hn::Set(d1, t.decode))),
                           hn::Set(d1, std::numeric_limits<float>::max()));
  return {hn::Set(d, hn::GetLane(s)), hn::Set(d, hn::GetLane(enc))};
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

template <Rounding R>
HWY_INLINE void NvTeFakeQuantBlock(const NvTensorConstants& t, const float* HWY_RESTRICT x, float* HWY_RESTRICT y) {
  const NvTag d;
  const NvBlock b = NvTeBlockScale(t, x);
  const auto decode = hn::Set(d, t.decode);
  for (int i = 0; i < kNvBlock; i += static_cast<int>(hn::Lanes(d))) {
    const auto q = NvSignedGrid<R>(b, hn::LoadU(d, x + i), nullptr);
    // nvfp4.md §0: fp32(fp32(e2m1 * s) * S_dec); the first product is exact.
    hn::StoreU(hn::Mul(hn::Mul(q, b.scale), decode), d, y + i);
  }
}

// Writes 16 codes, returns the UE4M3 code.
template <Rounding R>
HWY_INLINE uint8_t NvTeQuantizeBlock(const NvTensorConstants& t, const float* HWY_RESTRICT x,
                                     uint8_t* HWY_RESTRICT codes) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  const NvBlock b = NvTeBlockScale(t, x);
  for (int i = 0; i < kNvBlock; i += static_cast<int>(hn::Lanes(d))) {
    IntVec<NvTag> code = hn::Zero(di);
    NvSignedGrid<R>(b, hn::LoadU(d, x + i), &code);
    StoreCodeBytes(d, hn::And(code, hn::Set(di, 0xF)), codes + i);
  }
  return static_cast<uint8_t>(hn::GetLane(Ue4m3Code(d, b.scale)));
}

// nvfp4_decode_block (all recipes but ggml): fp32(fp32(e2m1 * s) * S_dec),
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

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
