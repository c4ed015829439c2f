// Per-target NVFP4 block kernels for every NVFP4 recipe: the fp32 operation
// sequences of src/quant/reference/nvfp4.cpp, in the same order.
//
// One kernel, templated over a scale policy (NvTe, NvCutlassEpi, NvCudnn,
// NvTorchao, NvModelopt, NvCt, NvModeloptFq): each policy is the block-scale
// step of one library (nvfp4.cpp quantize_<rule>) and the traits of its E2M1
// step (multiply or divide, sign rule, NaN code). The recipe's other
// parameters (amax NaN rule, device, 16x16 tiles, decode order) are data read
// at run time. Two rules whose element step differs in kind have kernels of
// their own: te_4over6 (two candidate scales and a block error) and ggml
// (an argmin over ggml's value table).
//
// The scale steps of kNvGroup blocks run together, lanes across blocks: a
// vector reduction, division and broadcast per 16 elements would cost more
// than the elements.
#if defined(FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
#endif

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "codec-inl.h"
#include "ggml-inl.h"
#include "fp4emu/quant/nvfp4_params.hpp"
#include "fp4emu/quant/reference.hpp"
#include "hwy/highway.h"
#include "kernels.hpp"
#include "pack-inl.h"
#include "src/quant/library_ops.hpp"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kNvBlock = 16;
constexpr int kNvGroup = 4;
constexpr int32_t kNvNanScale = 0x7F;
using NvTag = hn::CappedTag<float, kNvBlock>;
using NvGroupTag = hn::CappedTag<float, kNvGroup>;

constexpr float kNvFltMax = std::numeric_limits<float>::max();
constexpr float kNvE4m3Tiny = 0.015625f;  // torchao's E4M3_EPS

// Per-tensor constants and the recipe's run-time parameters.
struct NvTensorConstants {
  float s_enc = 1.0f, s_dec = 1.0f, g = 0.0f;
  float m = 0.0f;            // fp32(S_enc * RN16) (te, cutlass_epi)
  float six_m = 2688.0f;     // 6*M (te_4over6's candidate decode)
  NvAmaxNan amax_nan = NvAmaxNan::drop;
  bool cuda = true;          // PyTorch CUDA: a / 6 is a * RN16
  bool bf16_quotient = false;  // ct's triton path
  bool select_mse = false;     // te_4over6
  // Decode of a block: fp32(q * factor[scale byte]), then * S_dec when
  // two_step (reference::nvfp4_decode_factor; code 0x8 is +0 when positive_zero).
  const float* factor = nullptr;
  const GgmlArgminRow* ggml = nullptr;  // nvfp4.ggml: the argmin's rows by scale code
  int32_t ggml_literal_bits = 0;         // nvfp4.ggml: KernelArgs::ggml_literal_bits
  bool two_step = false;
  bool positive_zero = false;
  NibbleOrder order = NibbleOrder::low_first;  // of the packed codes (NvGroup's quantize)
};

// ---- Block amax --------------------------------------------------------------

// Magnitude bits with NaN lanes zeroed: their integer max is fmaxf's amax.
template <class DI>
HWY_INLINE hn::Vec<DI> AbsBitsDroppingNanBits(DI di, hn::Vec<DI> bits) {
  return hn::IfThenZeroElse(hn::Gt(bits, hn::Set(di, kInfBits)), bits);
}
template <class D>
HWY_INLINE IntVec<D> AbsBitsDroppingNan(D d, hn::Vec<D> v) {
  return AbsBitsDroppingNanBits(hn::RebindToSigned<D>(), AbsBits(d, v));
}

// nvfp4.cpp reduce_amax over one block of 16. drop: NaN never wins;
// propagate: any NaN gives a NaN (whose payload no later step reads);
// maxnum: NaN only when all 16 are NaN.
HWY_INLINE float NvBlockAmax(NvAmaxNan rule, const float* HWY_RESTRICT x) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  auto max_bits = hn::Zero(di);
  auto min_bits = hn::Set(di, kAbsMask);
  for (int i = 0; i < kNvBlock; i += n) {
    const auto bits = AbsBits(d, hn::LoadU(d, x + i));
    if (rule == NvAmaxNan::drop) {
      max_bits = hn::Max(max_bits, hn::IfThenZeroElse(hn::Gt(bits, hn::Set(di, kInfBits)), bits));
    } else if (rule == NvAmaxNan::propagate) {
      max_bits = hn::Max(max_bits, bits);
    } else {
      max_bits = hn::Max(max_bits, hn::IfThenZeroElse(hn::Gt(bits, hn::Set(di, kInfBits)), bits));
      min_bits = hn::Min(min_bits, bits);
    }
  }
  int32_t a = hn::GetLane(hn::MaxOfLanes(di, max_bits));
  if (rule == NvAmaxNan::maxnum && hn::GetLane(hn::MinOfLanes(di, min_bits)) > kInfBits) a = kQuietNanBits;
  return std::bit_cast<float>(a);
}

#if HWY_TARGET != HWY_SCALAR  // no Interleave* there
// m[b] (int32 lanes of block b, 4 or 8 of them) reduced by op (Max, Min) to
// lane b of one 4-lane vector: the four vectors are folded together by
// interleaving (per 128-bit part: b0 lanes 0|2, b1 0|2, b0 1|3, b1 1|3, then
// with blocks 2 and 3 as 64-bit pairs b0, b1, b2, b3), then the two parts,
// rather than reduced one by one.
template <class D, class Op>
HWY_INLINE hn::Vec<hn::CappedTag<int32_t, kNvGroup>> NvFoldBlocks(D di, const hn::Vec<D> (&m)[kNvGroup], Op op) {
  static_assert(hn::MaxLanes(di) == 4 || hn::MaxLanes(di) == 8);
  const auto p = op(hn::InterleaveLower(di, m[0], m[1]), hn::InterleaveUpper(di, m[0], m[1]));
  const auto q = op(hn::InterleaveLower(di, m[2], m[3]), hn::InterleaveUpper(di, m[2], m[3]));
  const hn::Repartition<int64_t, D> d64;
  const auto p64 = hn::BitCast(d64, p), q64 = hn::BitCast(d64, q);
  const auto r = op(hn::BitCast(di, hn::InterleaveLower(d64, p64, q64)), hn::BitCast(di, hn::InterleaveUpper(d64, p64, q64)));
  if constexpr (hn::MaxLanes(di) == 8) {
    const hn::Half<D> dh;
    return op(hn::LowerHalf(dh, r), hn::UpperHalf(dh, r));
  } else {
    return r;
  }
}

// NvBlockAmax of the kNvGroup blocks at x, block b in lane b, read with d (4 or 8 lanes).
template <class D>
HWY_INLINE hn::Vec<hn::CappedTag<float, kNvGroup>> NvGroupAmax(D d, NvAmaxNan rule, const float* HWY_RESTRICT x) {
  const hn::RebindToSigned<D> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const bool drop = rule != NvAmaxNan::propagate;
  hn::Vec<decltype(di)> bits[kNvGroup];
  for (int b = 0; b < kNvGroup; ++b) {
    for (int i = 0; i < kNvBlock; i += n) {
      auto v = AbsBits(d, hn::LoadU(d, x + b * kNvBlock + i));
      if (drop) v = AbsBitsDroppingNanBits(di, v);
      bits[b] = i == 0 ? v : hn::Max(bits[b], v);
    }
  }
  const hn::CappedTag<float, kNvGroup> d4;
  const hn::RebindToSigned<decltype(d4)> di4;
  auto a = NvFoldBlocks(di, bits, [](auto u, auto v) { return hn::Max(u, v); });
  if (rule == NvAmaxNan::maxnum) {  // NaN only where all 16 are
    for (int b = 0; b < kNvGroup; ++b) {
      bits[b] = hn::Set(di, kAbsMask);
      for (int i = 0; i < kNvBlock; i += n) bits[b] = hn::Min(bits[b], AbsBits(d, hn::LoadU(d, x + b * kNvBlock + i)));
    }
    const auto all_nan = hn::Gt(NvFoldBlocks(di, bits, [](auto u, auto v) { return hn::Min(u, v); }),
                                hn::Set(di4, kInfBits));
    a = hn::IfThenElse(all_nan, hn::Set(di4, kQuietNanBits), a);
  }
  return hn::BitCast(d4, a);
}
#endif

// ---- UE4M3 roundings the policies need beyond Ue4m3RneSatGrid ---------------

// PyTorch `.to(torch.float8_e4m3fn)` (torch_to_float8_e4m3fn) decoded, for
// p >= 0 or NaN: RNE; what rounds above 448 (p > 464, Inf) and NaN give NaN.
template <class D>
HWY_INLINE hn::Vec<D> Ue4m3TorchGrid(D d, hn::Vec<D> p) {
  const hn::RebindToSigned<D> di;
  const auto finite = hn::IfThenZeroElse(hn::IsNaN(p), hn::Min(p, hn::Set(d, 512.0f)));
  const auto exponent = hn::And(hn::BitCast(di, finite), hn::Set(di, kExponentMask));
  const auto magic = hn::Add(hn::Max(exponent, hn::Set(di, 121 << 23)), hn::Set(di, 20 << 23));
  const auto grid = RoundToQuantum<Rounding::rne>(d, finite, hn::BitCast(d, magic));
  const auto nan = hn::Or(hn::IsNaN(p), hn::Gt(grid, hn::Set(d, 448.0f)));
  return hn::IfThenElse(nan, hn::BitCast(d, hn::Set(di, kQuietNanBits)), grid);
}

// ue4m3_encode(p, rtp, saturate) decoded, for p >= 0, not NaN: round up on
// the grid, at most 448.
template <class D>
HWY_INLINE hn::Vec<D> Ue4m3RtpSatGrid(D d, hn::Vec<D> p) {
  const hn::RebindToSigned<D> di;
  p = hn::Min(p, hn::Set(d, 448.0f));
  const auto exponent = hn::And(hn::BitCast(di, p), hn::Set(di, kExponentMask));
  const auto magic = hn::BitCast(d, hn::Add(hn::Max(exponent, hn::Set(di, 121 << 23)), hn::Set(di, 20 << 23)));
  const auto nearest = RoundToQuantum<Rounding::rne>(d, p, magic);
  const auto quantum = hn::Mul(magic, hn::Set(d, 0x1p-23f));  // exact
  return hn::IfThenElse(hn::Lt(nearest, p), hn::Add(nearest, quantum), nearest);
}

// UE4M3 code of a grid value, NaN -> 0x7F.
template <class D>
HWY_INLINE IntVec<D> Ue4m3CodeOrNan(D d, hn::Vec<D> s) {
  const hn::RebindToSigned<D> di;
  const auto nan = hn::IsNaN(s);
  const auto code = Ue4m3Code(d, hn::IfThenZeroElse(nan, s));
  return hn::IfThenElse(hn::RebindMask(di, nan), hn::Set(di, kNvNanScale), code);
}

// torch.clamp(v, lo, hi): NaN passes through.
template <class D>
HWY_INLINE hn::Vec<D> TorchClamp(D d, hn::Vec<D> v, float lo, float hi) {
  return hn::IfThenElse(hn::IsNaN(v), v, hn::Min(hn::Max(v, hn::Set(d, lo)), hn::Set(d, hi)));
}

// a / 6 as the library evaluates it: `tensor / 6.0` in PyTorch is a * RN16 on CUDA.
template <class D>
HWY_INLINE hn::Vec<D> DivSixTorch(D d, const NvTensorConstants& t, hn::Vec<D> a) {
  return t.cuda ? hn::Mul(a, hn::Set(d, library::kRn16)) : hn::Div(a, hn::Set(d, 6.0f));
}

// ---- Scale policies ------------------------------------------------------------
// Scale(t, a, s, e): from the block amaxes a (lanes across blocks) the decoded
// UE4M3 scale s (NaN for code 0x7F) and the element step's operand e.
// kDivide: y = x / e, else y = x * e. kSignLessThanZero: the code's sign is
// y < 0 (-0 -> 0x0) instead of the sign bit. kNanCode: the code of a NaN y.

// NVFP4_TE / TE_2D (quantize_te).
struct NvTe {
  static constexpr bool kDivide = false, kSignLessThanZero = false, kZeroDivisorKeepsSign = false;
  static constexpr int32_t kNanCode = 0x7;
  template <class D>
  static HWY_INLINE void Scale(D d, const NvTensorConstants& t, hn::Vec<D> a, hn::Vec<D>& s, hn::Vec<D>& e) {
    const auto p = hn::Min(hn::Mul(a, hn::Set(d, t.m)), hn::Set(d, kNvFltMax));
    s = Ue4m3RneSatGrid(d, p);
    e = hn::Min(hn::Div(hn::Set(d, 1.0f), hn::Mul(s, hn::Set(d, t.s_dec))), hn::Set(d, kNvFltMax));
  }
};

// NVFP4_CUTLASS_EPI (quantize_cutlass_epi); a NaN amax makes s NaN and e NaN.
struct NvCutlassEpi {
  static constexpr bool kDivide = false, kSignLessThanZero = false, kZeroDivisorKeepsSign = false;
  static constexpr int32_t kNanCode = 0x7;
  template <class D>
  static HWY_INLINE void Scale(D d, const NvTensorConstants& t, hn::Vec<D> a, hn::Vec<D>& s, hn::Vec<D>& e) {
    const auto pv = hn::Mul(a, hn::Set(d, t.m));
    s = hn::IfThenElse(hn::IsNaN(pv), pv, Ue4m3RneSatGrid(d, hn::IfThenZeroElse(hn::IsNaN(pv), pv)));
    const auto st_rcp = hn::Mul(hn::Set(d, t.s_enc), hn::Div(hn::Set(d, 1.0f), s));
    e = hn::IfThenElse(hn::IsNaN(st_rcp), st_rcp, hn::Min(st_rcp, hn::Set(d, kNvFltMax)));
  }
};

// NVFP4_CUDNN (quantize_cudnn): e = s * S_dec; e = 0 keeps the sign of x.
struct NvCudnn {
  static constexpr bool kDivide = true, kSignLessThanZero = false, kZeroDivisorKeepsSign = true;
  static constexpr int32_t kNanCode = 0x7;
  template <class D>
  static HWY_INLINE void Scale(D d, const NvTensorConstants& t, hn::Vec<D> a, hn::Vec<D>& s, hn::Vec<D>& e) {
    const auto p = hn::Mul(hn::Div(a, hn::Set(d, 6.0f)), hn::Set(d, t.s_enc));
    s = Ue4m3RtpSatGrid(d, p);
    e = hn::Mul(s, hn::Set(d, t.s_dec));
  }
};

// NVFP4_TORCHAO / TORCHAO_1L (quantize_torchao; S_dec = 1 for 1L).
struct NvTorchao {
  static constexpr bool kDivide = false, kSignLessThanZero = false, kZeroDivisorKeepsSign = false;
  static constexpr int32_t kNanCode = 0x4;  // nvfp4.cpp torchao_nan_code
  template <class D>
  static HWY_INLINE void Scale(D d, const NvTensorConstants& t, hn::Vec<D> a, hn::Vec<D>& s, hn::Vec<D>& e) {
    const auto bs = DivSixTorch(d, t, a);
    s = Ue4m3TorchGrid(d, TorchClamp(d, hn::Div(bs, hn::Set(d, t.s_dec)), kNvE4m3Tiny, 448.0f));
    e = hn::Div(hn::Set(d, 1.0f / t.s_dec), s);
  }
};

// NVFP4_MODELOPT (quantize_modelopt): e = s * S_dec, divided by.
struct NvModelopt {
  static constexpr bool kDivide = true, kSignLessThanZero = true, kZeroDivisorKeepsSign = false;
  static constexpr int32_t kNanCode = 0x7;
  template <class D>
  static HWY_INLINE void Scale(D d, const NvTensorConstants& t, hn::Vec<D> a, hn::Vec<D>& s, hn::Vec<D>& e) {
    auto p = hn::Div(a, hn::Set(d, 6.0f * t.s_dec));
    p = hn::IfThenElse(hn::Eq(p, hn::Zero(d)), hn::Set(d, 1.0f), p);
    s = Ue4m3TorchGrid(d, p);
    e = hn::Mul(s, hn::Set(d, t.s_dec));
  }
};

// NVFP4_CT (quantize_ct): e = s / S_enc, divided by; scale 0 -> 0.125.
// Its cast (ct_cast_fp4) adds +0 first, then takes the sign bit.
struct NvCt {
  static constexpr bool kDivide = true, kSignLessThanZero = false, kZeroDivisorKeepsSign = false;
  static constexpr int32_t kNanCode = 0x0;
  template <class D>
  static HWY_INLINE void Scale(D d, const NvTensorConstants& t, hn::Vec<D> a, hn::Vec<D>& s, hn::Vec<D>& e) {
    const auto p = TorchClamp(d, hn::Mul(hn::Set(d, t.s_enc), DivSixTorch(d, t, a)), -448.0f, 448.0f);
    s = Ue4m3TorchGrid(d, p);
    s = hn::IfThenElse(hn::Eq(s, hn::Zero(d)), hn::Set(d, 0.125f), s);
    e = hn::Div(s, hn::Set(d, t.s_enc));
  }
};

// NVFP4_MODELOPT_FQ (fake_quant_modelopt_fq): e = d, the block's divisor and factor.
struct NvModeloptFq {
  template <class D>
  static HWY_INLINE void Scale(D d, const NvTensorConstants& t, hn::Vec<D> a, hn::Vec<D>& s, hn::Vec<D>& e) {
    const float safe = t.s_dec > 0.0f ? t.s_dec : 1e-12f;
    const auto q = hn::Div(a, hn::Set(d, 6.0f * safe));
    const auto p = hn::IfThenElse(hn::IsNaN(q), hn::Set(d, 448.0f), hn::Min(q, hn::Set(d, 448.0f)));  // fminf
    s = Ue4m3RneSatGrid(d, p);
    const auto dv = hn::Mul(s, hn::Set(d, t.s_dec));
    e = hn::IfThenElse(hn::Ge(dv, hn::Set(d, 1e-5f)), dv, hn::Set(d, 1.0f));
  }
};

// ---- Group scale step -----------------------------------------------------------

struct NvGroupScales {
  alignas(16) float scale[kNvGroup];  // decoded UE4M3 s (NaN for 0x7F)
  alignas(16) float elem[kNvGroup];   // the element step's operand
  alignas(16) int32_t code[kNvGroup];  // UE4M3 code
};

// amax: the blocks' amaxes given (16x16 tiles), or null to reduce them here.
template <class P>
HWY_INLINE NvGroupScales NvScaleGroup(const NvTensorConstants& t, const float* HWY_RESTRICT x,
                                      const float* HWY_RESTRICT amax_in) {
  float amax[kNvGroup];
  for (int b = 0; b < kNvGroup; ++b) amax[b] = amax_in ? amax_in[b] : NvBlockAmax(t.amax_nan, x + b * kNvBlock);
  const NvGroupTag dg;
  const int lanes = static_cast<int>(hn::Lanes(dg));
  NvGroupScales g;
  for (int b = 0; b < kNvGroup; b += lanes) {
    // The amax of block b + i in lane i, built in registers (a vector load of
    // the scalars just stored would stall on store forwarding).
    auto a = hn::Set(dg, amax[b + lanes - 1]);
    for (int i = lanes - 2; i >= 0; --i) a = hn::IfThenElse(hn::FirstN(dg, i + 1), hn::Set(dg, amax[b + i]), a);
    hn::Vec<NvGroupTag> s, e;
    P::Scale(dg, t, a, s, e);
    hn::Store(s, dg, g.scale + b);
    hn::Store(e, dg, g.elem + b);
    hn::Store(Ue4m3CodeOrNan(dg, s), hn::RebindToSigned<NvGroupTag>(), g.code + b);
  }
  return g;
}

// ---- Element step ---------------------------------------------------------------

// The E2M1 code of y = x (op) e and its signed value q, as the policy's
// library casts (cvt_satfinite_e2m1, modelopt_cast_fp4, ct_cast_fp4, or
// torchao's NaN case). With positive_zero, q is +0 where the code is 0x8.
// r: the lanes' random bytes (Rounding::stochastic: cvt.rs, NaN -> +6 as cvt.rn).
// D: the lanes' tag (te_4over6 runs it on at most 8 lanes).
template <class P, Rounding R, class D = NvTag>
HWY_INLINE hn::Vec<D> NvElement(const NvTensorConstants& t, hn::Vec<D> e, bool zero_divisor, hn::Vec<D> x,
                                IntVec<D>* code, IntVec<D> r = hn::Zero(hn::RebindToSigned<D>())) {
  const D d;
  const hn::RebindToSigned<D> di;
  const auto sign_mask = hn::Set(di, INT32_MIN);
  if constexpr (P::kZeroDivisorKeepsSign) {
    if (zero_divisor) {  // cudnn: codes 0x0 / 0x8 from the sign of x
      const auto sign = hn::And(hn::BitCast(di, x), sign_mask);
      if (code) *code = hn::BitCast(di, hn::ShiftRight<28>(hn::BitCast(hn::RebindToUnsigned<D>(), sign)));
      return hn::BitCast(d, sign);
    }
  }
  auto y = P::kDivide ? hn::Div(x, e) : hn::Mul(x, e);
  if constexpr (std::is_same_v<P, NvCt>) {  // ct_cast_fp4: + 0 (-0 -> +0), clamp, the triton path's bf16
    y = hn::Add(y, hn::Zero(d));
    if (t.bf16_quotient) {
      const auto clamped = hn::Min(hn::Max(y, hn::Set(d, -6.0f)), hn::Set(d, 6.0f));
      y = hn::IfThenElse(hn::IsNaN(y), y, Bf16Rne(d, clamped));
    }
  }
  const auto nan = hn::IsNaN(y);
  // A NaN y whose code is 0x7 (+6) needs no mask but the sign's: E2m1Grid's
  // first step, Min(|y|, 6), gives 6 for a NaN on every target (x86 min
  // returns its second operand; Highway's emulated and scalar Min the other
  // operand), as the scale steps' Min(p, 448) gives 448.
  constexpr bool kNanIsSix = P::kNanCode == 0x7;
  const auto grid = E2m1Grid<R>(d, kNanIsSix ? hn::Abs(y) : hn::IfThenZeroElse(nan, hn::Abs(y)), r);
  auto sign = P::kSignLessThanZero ? hn::IfThenElseZero(hn::RebindMask(di, hn::Lt(y, hn::Zero(d))), sign_mask)
                                   : hn::And(hn::BitCast(di, y), sign_mask);
  sign = hn::IfThenZeroElse(hn::RebindMask(di, nan), sign);
  if (code) {
    const auto magnitude = E2m1Code(d, grid);
    const auto c = hn::Or(magnitude, hn::BitCast(di, hn::ShiftRight<28>(hn::BitCast(hn::RebindToUnsigned<D>(), sign))));
    *code = kNanIsSix ? c : hn::IfThenElse(hn::RebindMask(di, nan), hn::Set(di, P::kNanCode), c);
  }
  if (t.positive_zero) sign = hn::IfThenZeroElse(hn::RebindMask(di, hn::Eq(grid, hn::Zero(d))), sign);
  const auto q = hn::BitCast(d, hn::Or(hn::BitCast(di, grid), sign));
  if constexpr (kNanIsSix) return q;
  const float nan_value = P::kNanCode == 0x4 ? 2.0f : 0.0f;
  return hn::IfThenElse(nan, hn::Set(d, nan_value), q);
}

// ---- Decode -------------------------------------------------------------------

// Signed E2M1 value of codes 0..15; with positive_zero, 0x8 is +0.
template <class D>
HWY_INLINE hn::Vec<D> NvCodeValue(D d, IntVec<D> c, bool positive_zero) {
  const hn::RebindToSigned<D> di;
  if (positive_zero) c = hn::IfThenZeroElse(hn::Eq(c, hn::Set(di, 8)), c);
  const auto magnitude = E2m1Value(d, hn::And(c, hn::Set(di, 7)));
  return hn::Or(magnitude, hn::BitCast(d, hn::ShiftLeft<28>(hn::And(c, hn::Set(di, 8)))));
}

// nvfp4_decode_block: fp32(q * f), then * S_dec for the two-step order.
template <class V>
HWY_INLINE V NvDecode(const NvTensorConstants& t, V q, V f) {
  const auto v = hn::Mul(q, f);
  return t.two_step ? hn::Mul(v, hn::Set(hn::DFromV<V>(), t.s_dec)) : v;
}

HWY_INLINE void NvDecodeBlock(const NvTensorConstants& t, uint8_t scale, const uint8_t* HWY_RESTRICT codes,
                              float* HWY_RESTRICT y) {
  const NvTag d;
  const auto f = hn::Set(d, t.factor[scale]);
  for (int i = 0; i < kNvBlock; i += static_cast<int>(hn::Lanes(d)))
    hn::StoreU(NvDecode(t, NvCodeValue(d, LoadCodeBytes(d, codes + i), t.positive_zero), f), d, y + i);
}

// ---- Generic kernel: kNvGroup blocks --------------------------------------------

// Writes fake-quant values to y when y is set, else the group's codes packed
// in t.order (kNvGroup * 8 bytes, from registers: PackCodeVectors) and scale
// codes. rbits: the group's random bytes (Rounding::stochastic), else unread.
template <class P, Rounding R>
HWY_INLINE void NvGroup(const NvTensorConstants& t, const float* HWY_RESTRICT x, const float* HWY_RESTRICT amax,
                        float* HWY_RESTRICT y, uint8_t* HWY_RESTRICT codes, uint32_t* HWY_RESTRICT scales,
                        const uint8_t* HWY_RESTRICT rbits) {
  const NvTag d;
  const hn::RebindToSigned<NvTag> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const NvGroupScales g = NvScaleGroup<P>(t, x, amax);
  for (int b = 0; b < kNvGroup; ++b) {
    const auto e = hn::Set(d, g.elem[b]);
    const bool zero_divisor = P::kZeroDivisorKeepsSign && g.elem[b] == 0.0f;
    if (y) {
      const auto f = hn::Set(d, t.factor[g.code[b]]);
      for (int i = b * kNvBlock; i < (b + 1) * kNvBlock; i += n)
        hn::StoreU(NvDecode(t, NvElement<P, R>(t, e, zero_divisor, hn::LoadU(d, x + i), nullptr,
                                               RandomBytes<R>(d, rbits, i)),
                            f),
                   d, y + i);
    } else {
      IntVec<NvTag> code[kNvBlock / hn::MaxLanes(d)];
      for (int i = 0; i < kNvBlock; i += n) {
        code[i / n] = hn::Zero(di);
        NvElement<P, R>(t, e, zero_divisor, hn::LoadU(d, x + b * kNvBlock + i), &code[i / n],
                        RandomBytes<R>(d, rbits, b * kNvBlock + i));
      }
      PackCodeVectors<kNvBlock>(di, t.order, code, codes + b * (kNvBlock / 2));
      scales[b] = static_cast<uint32_t>(g.code[b]);
    }
  }
}

// NVFP4_MODELOPT_FQ fake quant (fake_quant_modelopt_fq): no codes.
template <Rounding R>
HWY_INLINE void NvModeloptFqGroup(const NvTensorConstants& t, const float* HWY_RESTRICT x, float* HWY_RESTRICT y) {
  const NvTag d;
  const int n = static_cast<int>(hn::Lanes(d));
  const NvGroupScales g = NvScaleGroup<NvModeloptFq>(t, x, nullptr);
  for (int b = 0; b < kNvGroup; ++b) {
    const auto dv = hn::Set(d, g.elem[b]);
    for (int i = b * kNvBlock; i < (b + 1) * kNvBlock; i += n) {
      const auto v = hn::LoadU(d, x + i);
      const auto ax = hn::Div(hn::Abs(v), dv);
      const auto nan = hn::IsNaN(ax);
      const auto q = hn::IfThenElse(nan, hn::Set(d, 6.0f), E2m1Grid<R>(d, hn::IfThenZeroElse(nan, ax)));
      const auto qd = hn::Mul(q, dv);
      hn::StoreU(hn::IfThenElse(hn::Ge(v, hn::Zero(d)), qd, hn::Neg(qd)), d, y + i);
    }
  }
}

// ---- te_4over6: two candidates, the smaller block error --------------------------

// q with -0 as +0 where the recipe decodes code 0x8 as +0 (NvElement's positive_zero).
template <class V>
HWY_INLINE V NvPositiveZero(const NvTensorConstants& t, V q) {
  return t.positive_zero ? hn::Add(q, hn::Zero(hn::DFromV<V>())) : q;  // -0 + +0 = +0; nonzero q unchanged
}

// quantize_te_4over6: candidates s6 (max -> 6) and s4 (max -> 4), each
// quantized as TE does; s4 is kept when its error, accumulated in element
// order in fp32, is strictly smaller.
//
// Lanes are chains: chain j = 4c + b is candidate c (0: s6, 1: s4) of block b
// of the group, on one vector of 8 lanes or two of 4 (vector v holds chains
// v * lanes ..). The values are transposed as they are loaded, so that element
// i of the four blocks is one vector: each step of the eight error sums is one
// vector add, each sum still in element order (the reference's bits), and the
// scales are per lane, not broadcast per block. The picked candidate is
// transposed back. (Per block and candidate, with a serial scalar sum and its
// terms stored, this was 20.5 AVX2 instructions per value.)
using Nv4over6Tag = hn::CappedTag<float, 2 * kNvGroup>;
constexpr int kNv4over6Vecs = static_cast<int>(2 * kNvGroup / hn::MaxLanes(Nv4over6Tag()));

// Elements 4k .. 4k + 3 of the group's blocks: col[j][v] is element 4k + j of
// the blocks of vector v's chains.
template <class D>
HWY_INLINE void Nv4over6Columns(D d, const float* HWY_RESTRICT x, int k, hn::Vec<D> (&col)[4][kNv4over6Vecs]) {
#if HWY_TARGET == HWY_SCALAR
  for (int j = 0; j < 4; ++j)
    for (int v = 0; v < kNv4over6Vecs; ++v) col[j][v] = hn::Set(d, x[(v % kNvGroup) * kNvBlock + 4 * k + j]);
#else
  // A 4x4 transpose in each 128-bit part: blocks 0..3 in every part.
  hn::Vec<D> r[kNvGroup];
  for (int b = 0; b < kNvGroup; ++b) {
    const float* p = x + b * kNvBlock + 4 * k;
    r[b] = hn::MaxLanes(d) > 4 ? hn::LoadDup128(d, p) : hn::LoadU(d, p);
  }
  const hn::Repartition<uint64_t, D> d64;
  const auto t0 = hn::BitCast(d64, hn::InterleaveLower(d, r[0], r[1]));
  const auto t1 = hn::BitCast(d64, hn::InterleaveLower(d, r[2], r[3]));
  const auto t2 = hn::BitCast(d64, hn::InterleaveUpper(d, r[0], r[1]));
  const auto t3 = hn::BitCast(d64, hn::InterleaveUpper(d, r[2], r[3]));
  const hn::Vec<D> c[4] = {hn::BitCast(d, hn::InterleaveLower(d64, t0, t1)), hn::BitCast(d, hn::InterleaveUpper(d64, t0, t1)),
                           hn::BitCast(d, hn::InterleaveLower(d64, t2, t3)), hn::BitCast(d, hn::InterleaveUpper(d64, t2, t3))};
  for (int j = 0; j < 4; ++j)
    for (int v = 0; v < kNv4over6Vecs; ++v) col[j][v] = c[j];
#endif
}

#if HWY_TARGET != HWY_SCALAR
// The transpose back, for 4-lane vectors: lane b of row[j] to out[b * stride + j].
template <class D4, class T>
HWY_INLINE void Nv4over6StoreRows(D4 d4, const hn::Vec<D4> (&row)[4], T* HWY_RESTRICT out, int stride) {
  const hn::Repartition<uint64_t, D4> d64;
  const auto t0 = hn::BitCast(d64, hn::InterleaveLower(d4, row[0], row[1]));
  const auto t1 = hn::BitCast(d64, hn::InterleaveLower(d4, row[2], row[3]));
  const auto t2 = hn::BitCast(d64, hn::InterleaveUpper(d4, row[0], row[1]));
  const auto t3 = hn::BitCast(d64, hn::InterleaveUpper(d4, row[2], row[3]));
  hn::StoreU(hn::BitCast(d4, hn::InterleaveLower(d64, t0, t1)), d4, out);
  hn::StoreU(hn::BitCast(d4, hn::InterleaveUpper(d64, t0, t1)), d4, out + stride);
  hn::StoreU(hn::BitCast(d4, hn::InterleaveLower(d64, t2, t3)), d4, out + 2 * stride);
  hn::StoreU(hn::BitCast(d4, hn::InterleaveUpper(d64, t2, t3)), d4, out + 3 * stride);
}
#endif

#if HWY_TARGET != HWY_SCALAR
// The group's block amaxes (NvGroupAmax), block b in lane b of each 4 lanes.
template <class D>  // a template, so that the other lane count's branch is not compiled
HWY_INLINE hn::Vec<D> Nv4over6Amax(D d, NvAmaxNan rule, const float* HWY_RESTRICT x) {
  const auto a = NvGroupAmax(d, rule, x);
  if constexpr (hn::MaxLanes(d) == 8) {
    return hn::Combine(d, a, a);
  } else {
    return a;
  }
}
#endif

// kFake: fake-quant values to y, else codes (one per byte) and scale codes.
// kMse: the squared error, else the absolute one.
template <Rounding R, bool kFake, bool kMse>
HWY_INLINE void Nv4over6GroupOf(const NvTensorConstants& t, const float* HWY_RESTRICT x, float* HWY_RESTRICT y,
                                uint8_t* HWY_RESTRICT codes, uint32_t* HWY_RESTRICT scales) {
  const Nv4over6Tag d;
  const hn::RebindToSigned<Nv4over6Tag> di;
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(d));
  constexpr int kVecs = kNv4over6Vecs;
  using V = hn::Vec<Nv4over6Tag>;
  // The chains' scales.
  V scale[kVecs], enc[kVecs], err[kVecs];
  alignas(64) int32_t scale_code[2 * kNvGroup];
#if HWY_TARGET != HWY_SCALAR
  const V amax = Nv4over6Amax(d, t.amax_nan, x);
#endif
  for (int v = 0; v < kVecs; ++v) {
    const auto chain = hn::Iota(di, v * kLanes);
#if HWY_TARGET == HWY_SCALAR
    const V a = hn::Set(d, NvBlockAmax(t.amax_nan, x + (v % kNvGroup) * kNvBlock));
#else
    const V a = amax;
#endif
    const auto bs = hn::Div(a, hn::Set(d, 6.0f));
    // s6 from fp32(bs * S_enc), s4 from fp32(fp32(1.5 * bs) * S_enc) (1 * bs is bs).
    const auto times = hn::IfThenElse(hn::RebindMask(d, hn::Lt(chain, hn::Set(di, kNvGroup))), hn::Set(d, 1.0f),
                                      hn::Set(d, 1.5f));
    const auto p = hn::Min(hn::Mul(hn::Mul(times, bs), hn::Set(d, t.s_enc)), hn::Set(d, 448.0f));
    scale[v] = Ue4m3RneSatGrid(d, p);
    enc[v] = hn::Min(hn::Div(hn::Set(d, 1.0f), hn::Mul(scale[v], hn::Set(d, t.s_dec))), hn::Set(d, kNvFltMax));
    hn::Store(Ue4m3Code(d, scale[v]), di, scale_code + v * kLanes);
    err[v] = hn::Zero(d);
  }
  // Both candidates of every element, in element order; their q (fake quant)
  // or codes, chain j of element i at [i][j], for the pick. The sign of a
  // zero q changes no error: positive_zero is applied to the picked q only,
  // out of the element loop.
  alignas(64) float q[kNvBlock][2 * kNvGroup];
  alignas(64) int32_t code[kNvBlock][2 * kNvGroup];
  NvTensorConstants te = t;
  te.positive_zero = false;
  const auto g = hn::Set(d, t.g);
  const auto six_m = hn::Set(d, t.six_m);
  for (int k = 0; k < kNvBlock / 4; ++k) {
    V col[4][kVecs];
    Nv4over6Columns(d, x, k, col);
    for (int j = 0; j < 4; ++j) {
      for (int v = 0; v < kVecs; ++v) {
        IntVec<Nv4over6Tag> cv = hn::Zero(di);
        const auto qv = NvElement<NvTe, R, Nv4over6Tag>(te, enc[v], false, col[j][v], kFake ? nullptr : &cv);
        // x^ = fp32(fp32(fp32(q * s) * G) / 6M); q is the decoded code (0x8 -> -0).
        const auto diff = hn::Sub(hn::Div(hn::Mul(hn::Mul(qv, scale[v]), g), six_m), col[j][v]);
        err[v] = hn::Add(err[v], kMse ? hn::Mul(diff, diff) : hn::Abs(diff));
        if constexpr (kFake)
          hn::Store(qv, d, q[4 * k + j] + v * kLanes);
        else
          hn::Store(cv, di, code[4 * k + j] + v * kLanes);
      }
    }
  }
  alignas(64) float error[2 * kNvGroup];
  for (int v = 0; v < kVecs; ++v) hn::Store(err[v], d, error + v * kLanes);
  // The pick, per block; lane b is block b.
  const hn::CappedTag<float, kNvGroup> d4;
#if HWY_TARGET == HWY_SCALAR
  for (int b = 0; b < kNvGroup; ++b) {
    const int c = error[kNvGroup + b] < error[b] ? kNvGroup : 0;
    for (int i = 0; i < kNvBlock; ++i) {
      if constexpr (kFake)
        y[b * kNvBlock + i] = hn::GetLane(NvDecode(t, NvPositiveZero(t, hn::Set(d4, q[i][c + b])),
                                                   hn::Set(d4, t.factor[scale_code[c + b]])));
      else
        codes[b * kNvBlock + i] = static_cast<uint8_t>(code[i][c + b]);
    }
    if constexpr (!kFake) scales[b] = static_cast<uint32_t>(scale_code[c + b]);
  }
#else
  const hn::RebindToSigned<decltype(d4)> di4;
  const auto pick = hn::Lt(hn::Load(d4, error + kNvGroup), hn::Load(d4, error));  // NaN keeps s6
  const auto pick_i = hn::RebindMask(di4, pick);
  const auto picked_scale = hn::IfThenElse(pick_i, hn::Load(di4, scale_code + kNvGroup), hn::Load(di4, scale_code));
  if constexpr (kFake) {
    const auto f = hn::GatherIndex(d4, t.factor, picked_scale);
    for (int k = 0; k < kNvBlock / 4; ++k) {
      hn::Vec<decltype(d4)> row[4];
      for (int j = 0; j < 4; ++j) {
        const auto picked = hn::IfThenElse(pick, hn::Load(d4, q[4 * k + j] + kNvGroup), hn::Load(d4, q[4 * k + j]));
        row[j] = NvDecode(t, NvPositiveZero(t, picked), f);
      }
      Nv4over6StoreRows(d4, row, y + 4 * k, kNvBlock);
    }
  } else {
    const hn::RebindToUnsigned<decltype(d4)> du4;
    hn::StoreU(hn::BitCast(du4, picked_scale), du4, scales);
    // Lane b of word[k]: block b's codes 4k .. 4k + 3, one per byte, in memory order.
    hn::Vec<decltype(di4)> word[4];
    for (int k = 0; k < kNvBlock / 4; ++k) {
      word[k] = hn::Zero(di4);
      for (int j = 0; j < 4; ++j) {
        const auto c = hn::IfThenElse(pick_i, hn::Load(di4, code[4 * k + j] + kNvGroup), hn::Load(di4, code[4 * k + j]));
        word[k] = hn::Or(word[k], hn::ShiftLeftSame(c, 8 * j));
      }
    }
    Nv4over6StoreRows(di4, word, reinterpret_cast<int32_t*>(codes), kNvBlock / 4);
  }
#endif
}

// kFake: fake-quant values to y, else codes and scale codes.
template <Rounding R, bool kFake>
HWY_INLINE void Nv4over6Group(const NvTensorConstants& t, const float* HWY_RESTRICT x, float* HWY_RESTRICT y,
                              uint8_t* HWY_RESTRICT codes, uint32_t* HWY_RESTRICT scales) {
  if (t.select_mse)
    Nv4over6GroupOf<R, kFake, true>(t, x, y, codes, scales);
  else
    Nv4over6GroupOf<R, kFake, false>(t, x, y, codes, scales);
}

// ---- ggml: ggml's UE4M3 and argmin ------------------------------------------------

// reference::ggml_fp32_to_ue4m3 for each lane.
template <class D>
HWY_INLINE IntVec<D> GgmlUe4m3Code(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto positive = hn::RebindMask(di, hn::Gt(x, hn::Zero(d)));  // false for NaN
  const auto xc = hn::Min(hn::IfThenZeroElse(hn::IsNaN(x), x), hn::Set(d, 448.0f));
  const auto bits = hn::BitCast(di, xc);
  // Subnormal (x < 2^-6): int(fp32(x * 512 + 0.5)), at most 7.
  const auto man = hn::Min(hn::ConvertTo(di, hn::Add(hn::Mul(xc, hn::Set(d, 512.0f)), hn::Set(d, 0.5f))), hn::Set(di, 7));
  // Normal: exponent and three mantissa bits, half up on the next bit; exponent 15 -> 0x7E.
  auto normal = hn::Add(hn::Sub(hn::ShiftRight<20>(bits), hn::Set(di, 120 << 3)),
                        hn::And(hn::ShiftRight<19>(bits), hn::Set(di, 1)));
  normal = hn::IfThenElse(hn::Gt(normal, hn::Set(di, 119)), hn::Set(di, 0x7E), normal);
  const auto code = hn::IfThenElse(hn::RebindMask(di, hn::Lt(xc, hn::Set(d, 0x1p-6f))), man, normal);
  return hn::IfThenElseZero(positive, code);
}

// ggml's element step (ggml-inl.h GgmlArgmin) takes whole blocks per vector,
// one block a vector where a vector holds 16 lanes (AVX3): that halves the
// argmin's and the packing's ops per block there against two 8-lane vectors.
using NvGgmlTag = NvTag;

// The largest |x| bits of each of the kNvGroup blocks at x, NaN included
// (above kInfBits), to out.
template <class D>  // NvGgmlTag; a template, so that the other lane counts' branches are not compiled
HWY_INLINE void NvGgmlGroupMaxBits(D d, const float* HWY_RESTRICT x, int32_t* HWY_RESTRICT out) {
  const hn::RebindToSigned<D> di;
  const int n = static_cast<int>(hn::Lanes(d));
  IntVec<D> m[kNvGroup];
  for (int b = 0; b < kNvGroup; ++b) {
    m[b] = AbsBits(d, hn::LoadU(d, x + b * kNvBlock));
    for (int i = n; i < kNvBlock; i += n) m[b] = hn::Max(m[b], AbsBits(d, hn::LoadU(d, x + b * kNvBlock + i)));
  }
#if HWY_TARGET != HWY_SCALAR
  const auto max = [](auto a, auto b) { return hn::Max(a, b); };
  const hn::CappedTag<int32_t, kNvGroup> d4;
  if constexpr (hn::MaxLanes(d) == 16) {  // a block's two halves first
    const hn::Half<decltype(di)> dh;
    hn::Vec<decltype(dh)> h[kNvGroup];
    for (int b = 0; b < kNvGroup; ++b) h[b] = hn::Max(hn::LowerHalf(dh, m[b]), hn::UpperHalf(dh, m[b]));
    hn::StoreU(NvFoldBlocks(dh, h, max), d4, out);
    return;
  } else if constexpr (hn::MaxLanes(d) == 8) {  // a block's two vectors are folded above
    hn::StoreU(NvFoldBlocks(di, m, max), d4, out);
    return;
  }
#endif
  for (int b = 0; b < kNvGroup; ++b) out[b] = hn::GetLane(hn::MaxOfLanes(di, m[b]));
}

// NvGgmlGroupBlocks' blocks, once their scale codes and max bits are known.
// kMayBeLiteral: each block is tested against its row's limit_bits (when
// some block of the group reaches t.ggml_literal_bits, which is rare);
// without it the loop has no branch but the packing's on `order`, which the
// caller makes a constant where it can. kFake: fake-quant values to y, else
// packed codes and scale codes.
template <bool kFake, bool kMayBeLiteral>
HWY_INLINE void NvGgmlBlocks(const NvTensorConstants& t, const GgmlArgminConstants<NvGgmlTag>& argmin,
                             NibbleOrder order, const float* HWY_RESTRICT x,
                             float* HWY_RESTRICT y, uint8_t* HWY_RESTRICT packed, uint32_t* HWY_RESTRICT scales,
                             const int32_t* HWY_RESTRICT max_bits, const int32_t* HWY_RESTRICT scale_code) {
  const NvGgmlTag d;
  const hn::RebindToSigned<NvGgmlTag> di;
  constexpr int kVectors = kNvBlock / hn::MaxLanes(d);
  const int n = static_cast<int>(hn::Lanes(d));
  for (int b = 0; b < kNvGroup; ++b) {
    const float* xb = x + b * kNvBlock;
    int s = scale_code[b];
    bool literal = false;
    if constexpr (kMayBeLiteral) {
      literal = static_cast<uint32_t>(max_bits[b]) >= t.ggml[s].limit_bits;
      if (literal) s = reference::ggml_fp32_to_ue4m3(NvBlockAmax(NvAmaxNan::drop, xb) / 6.0f);
    }
    const GgmlArgminRow& row = t.ggml[s];
    IntVec<NvGgmlTag> code[kVectors];
    for (int i = 0; i < kNvBlock; i += n) {
      const auto v = hn::LoadU(d, xb + i);
      code[i / n] = literal ? GgmlArgminLiteral(d, row.d, v) : GgmlArgmin(d, argmin, row, v);
    }
    if constexpr (kFake) {
      for (int i = 0; i < kNvBlock; i += n)
        hn::StoreU(GgmlCodeValue(d, code[i / n], hn::Set(d, row.d)), d, y + b * kNvBlock + i);
    } else {
      PackCodeVectors<kNvBlock>(di, order, code, packed + b * (kNvBlock / 2));
      scales[b] = static_cast<uint32_t>(s);
    }
  }
}

// A group's block maxima and scale codes. NvGgmlRun computes them one group
// ahead of the blocks that use them: each block's argmin reads its
// row by scale code, at the end of a chain of some 80 cycles (the maxima, a
// division, the code, the row's loads), and with the chain in front of its
// own blocks the core did not overlap it with the previous group's
// (AVX-512, one thread: 1.9 G values/s, 2.6 G with the rows unhooked).
struct NvGgmlScales {
  alignas(16) int32_t max_bits[kNvGroup];  // the largest |x| bits, NaN included (above kInfBits)
  alignas(16) int32_t scale_code[kNvGroup];
  bool literal;  // some block's max bits reach t.ggml_literal_bits (rare): each block is tested
};

// quantize_ggml's scale codes of the kNvGroup blocks at x (ggml_fp32_to_ue4m3
// of amax / 6) to s. seen, when set: kNvGroup lanes that keep the largest
// block max bits (NaN included) of the groups so far, for the run's tensor
// amax (KernelArgs::run_amax).
HWY_INLINE void NvGgmlGroupScales(const NvTensorConstants& t, const float* HWY_RESTRICT x, int32_t* HWY_RESTRICT seen,
                                  NvGgmlScales& s) {
  const NvGroupTag dg;
  const hn::RebindToSigned<NvGroupTag> dgi;
  const int lanes = static_cast<int>(hn::Lanes(dg));
  NvGgmlGroupMaxBits(NvGgmlTag(), x, s.max_bits);
  bool literal = false;
  for (int b = 0; b < kNvGroup; b += lanes) {  // a NaN lane's code is not used: its block takes the literal path
    const auto bits = hn::Load(dgi, s.max_bits + b);
    if (seen) hn::Store(hn::Max(hn::Load(dgi, seen + b), bits), dgi, seen + b);
    hn::Store(GgmlUe4m3Code(dg, hn::Div(hn::BitCast(dg, bits), hn::Set(dg, 6.0f))), dgi, s.scale_code + b);
    // One test for the group, not a load and a branch per block (nor a gather of their rows' limits).
    literal = literal || !hn::AllTrue(dgi, hn::Lt(bits, hn::Set(dgi, t.ggml_literal_bits)));
  }
  s.literal = literal;
}

// quantize_ggml's kNvGroup blocks at x, their scales s known. kFake:
// fake-quant values to y (the decode factor of scale s is 2d,
// ggml_ue4m3_to_fp32 * 2: GgmlCodeValue), else the codes packed in `order`
// (kNvGroup * 8 bytes) and the scale codes.
template <bool kFake>
HWY_INLINE void NvGgmlGroupBlocks(const NvTensorConstants& t, const GgmlArgminConstants<NvGgmlTag>& argmin,
                                  NibbleOrder order, const float* HWY_RESTRICT x,
                                  float* HWY_RESTRICT y, uint8_t* HWY_RESTRICT packed, uint32_t* HWY_RESTRICT scales,
                                  const NvGgmlScales& s) {
  if (HWY_UNLIKELY(s.literal))
    NvGgmlBlocks<kFake, true>(t, argmin, order, x, y, packed, scales, s.max_bits, s.scale_code);
  else if (kFake || order == NibbleOrder::split_half)  // ggml's own order, a constant in the packing
    NvGgmlBlocks<kFake, false>(t, argmin, NibbleOrder::split_half, x, y, packed, scales, s.max_bits, s.scale_code);
  else
    NvGgmlBlocks<kFake, false>(t, argmin, order, x, y, packed, scales, s.max_bits, s.scale_code);
}

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_NVFP4_INL_H_
