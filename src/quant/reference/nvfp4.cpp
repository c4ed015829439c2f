// NVFP4 scalar reference quantizer: the NVFP4 specification (docs/spec/nvfp4.md) in code.
//
// Every recipe is a fixed sequence of binary32 operations copied from the
// library it reproduces (docs/spec/nvfp4.md §4.0 variant map). Each C++ float operation
// below is one IEEE rounding (the build uses -ffp-contract=off, no fast math),
// so the order of the operations *is* the recipe: do not "simplify" a/6 into
// a*(1/6) or x/d into x*(1/d). Every conversion to E4M3 / E2M1 is a named
// codec call. Where the library uses fminf/fmaxf (NaN-dropping) the code uses
// std::fmin/std::fmax; where it uses torch.clamp (NaN-propagating) it uses
// torch_clamp below.
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/reference.hpp"
#include "src/quant/library_ops.hpp"

namespace fp4emu::reference {

// ---- ggml's UE4M3 (public for the exhaustive tests) --------------------------
// Ported line by line from ggml src/ggml-impl.h (d99724f2): the encoder at
// lines 517-553, the decoder at lines 502-515 (docs/formats.md, nvfp4.ggml).

// SIMD twin: src/quant/simd/nvfp4-inl.h GgmlUe4m3Code.
uint8_t ggml_fp32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;  // x <= 0 and NaN
  if (x > 448.0f) x = 448.0f;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const int fp32_exp = static_cast<int>((bits >> 23) & 0xFF) - 127;
  const int fp32_man = static_cast<int>((bits >> 20) & 0x7);
  int ue4m3_exp = fp32_exp + 7;
  if (ue4m3_exp <= 0) {
    // Subnormal: float literals, so an fp32 product (exact) and an fp32 sum
    // (rounded: x*512 = 0.5 - 2^-25 gives 1.0f), then truncation; the clamp
    // keeps [7.5, 8) * 2^-9 at 0x07 instead of rounding into 0x08.
    int man = static_cast<int>(x * 512.0f + 0.5f);
    if (man > 7) man = 7;
    if (man < 1) return 0;
    return static_cast<uint8_t>(man);
  }
  // Saturation by exponent: every x >= 256 gives 0x7E (448), not only x > 464.
  if (ue4m3_exp >= 15) return 0x7E;
  // Normals round half up on the first dropped bit, carrying into the exponent.
  const int round_bit = static_cast<int>((bits >> 19) & 1);
  int ue4m3_man = fp32_man + round_bit;
  if (ue4m3_man > 7) {
    ue4m3_man = 0;
    ue4m3_exp++;
    if (ue4m3_exp >= 15) return 0x7E;
  }
  return static_cast<uint8_t>((ue4m3_exp << 3) | ue4m3_man);
}

float ggml_ue4m3_to_fp32(uint8_t x) {
  // Only 0x00 and 0x7F are 0; bit 7 is ignored otherwise, so 0xFF reads as
  // exponent 15, mantissa 7 (480, halved to 240).
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF;
  const int man = x & 0x7;
  float raw;
  if (exp == 0) {
    raw = std::ldexp(static_cast<float>(man), -9);
  } else {
    raw = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  }
  // Halved: ggml's kvalues are twice the E2M1 values.
  return raw * 0.5f;
}

namespace {

constexpr float kFltMax = std::numeric_limits<float>::max();
using library::kE2m1Max;
using library::kRn16;  // docs/spec/nvfp4.md notation RN16
constexpr float kE4M3Max = 448.0f;
// torch.finfo(torch.float8_e4m3fn).tiny = 2^-6, torchao's E4M3_EPS (code 0x08).
constexpr float kE4M3Tiny = 0.015625f;
// compressed-tensors' replacement for a zero scale: "the next largest fp8 value
// from 0" in its words, 0.125 (code 0x20).
constexpr uint8_t kCtZeroScaleCode = 0x20;
// fp32(1/2688): PyTorch on CUDA evaluates `tensor / 2688.0` as tensor * this
// (docs/formats.md "Device semantics").
constexpr float kRcp2688 = 1.0f / (kE2m1Max * kE4M3Max);

// ---- Named conversions ------------------------------------------------------

// cvt.rn.satfinite.e4m3x2.f32 / __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)
// (docs/spec/nvfp4.md §2.1): RNE, |x| > 448 and Inf -> 448, NaN -> 0x7F.
uint8_t cvt_rn_satfinite_ue4m3(float p) { return ue4m3_encode(p, Rounding::rne, Overflow::saturate); }

// PyTorch `.to(torch.float8_e4m3fn)` (docs/spec/nvfp4.md §2.1): RNE without saturation:
// |x| > 464 and Inf become NaN (0x7F).
uint8_t torch_to_float8_e4m3fn(float p) { return ue4m3_encode(p, Rounding::rne, Overflow::to_special); }

// cvt.rn.satfinite.e2m1x2.f32 (docs/spec/nvfp4.md §1): RNE, saturate at +-6, NaN -> +6
// (0x7), -0 and negative underflow -> 0x8. `rounding` replaces RNE when the
// caller overrides the element rounding (rtz: the CUDA API's cudaRoundZero).
uint8_t cvt_satfinite_e2m1(float y, Rounding rounding) { return e2m1_encode(y, rounding); }

// torch.clamp: NaN passes through (unlike fminf/fmaxf).
// SIMD twin: src/quant/simd/nvfp4-inl.h TorchClamp.
float torch_clamp(float v, float lo, float hi) {
  if (std::isnan(v)) return v;
  if (v < lo) return lo;
  if (v > hi) return hi;
  return v;
}

// Amax reductions. NaN handling is the library's (NvParams::amax_nan).
// SIMD twin: src/quant/simd/nvfp4-inl.h NvBlockAmax (one block), driver.cpp for the tensor amax.
float reduce_amax(NvAmaxNan nan_rule, const float* x, size_t n) {
  if (nan_rule == NvAmaxNan::maxnum) {
    // triton tl.max (maxnumf over the lanes, no zero start): NaN lanes lose
    // to any number, so the result is NaN only when every lane is NaN.
    float a = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i < n; ++i) {
      const float v = std::fabs(x[i]);
      if (std::isnan(a) || v > a) a = std::isnan(v) ? a : v;
    }
    return a;
  }
  // torch.amax(abs(x)) and the CUTLASS host reference: NaN wins. fmaxf
  // (TE/cuDNN kernels) and ggml's loop: NaN never wins. (TE's python
  // reference uses torch.amax and would propagate; the recipe follows the
  // kernels.)
  return nan_rule == NvAmaxNan::propagate ? library::amax_nan_wins(x, n) : library::amax_nan_ignored(x, n);
}

// ---- Per-tensor scale (docs/spec/nvfp4.md §2.2) ----------------------------------------

// NVIDIA paper / TE (§4.1 step 1): S_enc = fp32(6*M/G), then
// fminf(., FLT_MAX), then G == 0 or S_enc == 0 -> 1. G = NaN gives FLT_MAX
// (fminf drops the NaN). S_dec = fp32(1/S_enc).
NvTensorScale te_tensor_scale(float g, float e4m3_max) {
  const float numerator = kE2m1Max * e4m3_max;  // compile-time 2688 (1536 for M = 256), exact
  float s_enc = numerator / g;
  s_enc = std::fmin(s_enc, kFltMax);
  if (g == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
  const float s_dec = 1.0f / s_enc;
  return {g, s_enc, s_dec};
}

// PyTorch's `tensor / python_scalar` (docs/formats.md "Device semantics"):
// CUDA multiplies by the fp32 reciprocal of the scalar, computed on the host
// in fp32 (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu, is_cpu_scalar
// branch); the CPU kernel divides.
// SIMD twin: src/quant/simd/nvfp4-inl.h DivSixTorch.
float torch_div_scalar(float t, float scalar, float rcp_scalar, NvDevice device) {
  return device == NvDevice::cuda ? t * rcp_scalar : t / scalar;
}

// compressed-tensors' generate_gparam (docs/formats.md, nvfp4.ct):
// `448.0 * 6.0 / G` is a Python float divided by a tensor, which PyTorch
// evaluates as reciprocal(G) * 2688 (Tensor.__rtruediv__) on every device.
// The current release (helpers.py:324-337 at ac8e2ba8) first clamps G to
// FLT_MIN (NaN passes torch.clamp) and then replaces NaN and +-Inf by 1.0;
// the legacy one (helpers.py:430-434 at 52792be0) does neither.
float ct_global_scale(float g, NvCtRelease release) {
  if (release == NvCtRelease::current) g = torch_clamp(g, std::numeric_limits<float>::min(), std::numeric_limits<float>::infinity());
  const float rcp = 1.0f / g;
  float s_enc = rcp * (kE2m1Max * kE4M3Max);
  if (release == NvCtRelease::current && !std::isfinite(s_enc)) s_enc = 1.0f;
  return s_enc;
}

// ---- Block quantizers, one per library ---------------------------------------
// Each returns the UE4M3 scale code and writes 16 unpacked E2M1 codes.

// NVFP4_TE / NVFP4_TE_2D (docs/spec/nvfp4.md §4.1; 2D differs only in the amax passed in).
// SIMD twin: src/quant/simd/nvfp4-inl.h NvTe, run by NvScaleGroup and NvElement in NvGroup.
uint8_t quantize_te(const NvTensorScale& ts, float a_b, const float* x, uint8_t* codes, Rounding r,
                    const uint8_t* rbits) {
  // §4.1 step 2: m = fp32(S_enc * RN16), p = fp32(a_b * m), p = fminf(p, FLT_MAX).
  const float m = ts.encode * kRn16;
  float p = a_b * m;
  p = std::fmin(p, kFltMax);
  const uint8_t s = cvt_rn_satfinite_ue4m3(p);
  // §4.1 step 3: enc_b = fminf(fp32(1 / fp32(fp32(s) * S_dec)), FLT_MAX).
  // s = 0 (all-zero or tiny block, §4.8): 1/0 = Inf -> FLT_MAX, so nonzero
  // elements saturate to +-6 and decode to 0.
  const float s_times_dec = ue4m3_decode(s) * ts.decode;
  const float enc_b = std::fmin(1.0f / s_times_dec, kFltMax);
  // §4.1 step 4: y = fp32(x * enc_b) (mul.f32x2), then cvt.rn.satfinite.e2m1x2.
  // The TE python reference maps -0.0 to code 0; the kernel's cvt keeps the
  // sign (0x8). We follow the kernel (the hardware recipe, §4.7).
  // Stochastic rounding (§5, gradients): cvt.rs.satfinite.e2m1x4.f32 with the
  // element's random byte, the integer rule (NaN -> +6 as in cvt.rn).
  for (int i = 0; i < kNvBlock; ++i) {
    const float y = x[i] * enc_b;
    codes[i] = r == Rounding::stochastic ? e2m1_encode_sr(y, rbits[i]) : cvt_satfinite_e2m1(y, r);
  }
  return s;
}

// NVFP4_TE_4OVER6 (docs/spec/nvfp4.md §4.2). Two candidate scales s6 (block max -> 6)
// and s4 (block max -> 4); s4 is kept only if its block error is strictly
// smaller. S_enc uses M = recipe.nv.tensor_scale_e4m3_max (256 for this
// recipe, see nvfp4_recipes.cpp).
// SIMD twin: src/quant/simd/nvfp4-inl.h Nv4over6Group.
uint8_t quantize_te_4over6(const NvParams& nv, const NvTensorScale& ts, float a_b, const float* x,
                           uint8_t* codes, Rounding r) {
  // s6 = e4m3(min(fp32(fp32(a_b/6) * S_enc), 448)),
  // s4 = e4m3(min(fp32(fp32(1.5 * fp32(a_b/6)) * S_enc), 448)); the spec's
  // "1.5·fp32(a_b/6)·S_enc" is evaluated left to right [assumption].
  const float bs = a_b / kE2m1Max;
  const float p6 = std::fmin(bs * ts.encode, kE4M3Max);
  const float bs4 = 1.5f * bs;
  const float p4 = std::fmin(bs4 * ts.encode, kE4M3Max);
  const uint8_t candidates[2] = {cvt_rn_satfinite_ue4m3(p6), cvt_rn_satfinite_ue4m3(p4)};

  uint8_t candidate_codes[2][kNvBlock];
  float error[2];
  // The reference decodes a candidate as code*s*G/(6*M), not through S_dec,
  // evaluated left to right in fp32: fp32(fp32(fp32(code*s) * G) / fp32(6*M))
  // [assumption on the association]. The error is accumulated in fp32 in
  // element order.
  const float six_m = kE2m1Max * nv.tensor_scale_e4m3_max;  // exact
  for (int c = 0; c < 2; ++c) {
    const float s_value = ue4m3_decode(candidates[c]);
    const float s_times_dec = s_value * ts.decode;
    const float enc = std::fmin(1.0f / s_times_dec, kFltMax);
    float err = 0.0f;
    for (int i = 0; i < kNvBlock; ++i) {
      const float y = x[i] * enc;
      candidate_codes[c][i] = cvt_satfinite_e2m1(y, r);
      const float code_times_s = e2m1_decode(candidate_codes[c][i]) * s_value;  // exact
      const float times_g = code_times_s * ts.global_amax;
      const float x_hat = times_g / six_m;
      const float diff = x_hat - x[i];
      if (nv.select_metric == NvSelectMetric::mae) {
        err = err + std::fabs(diff);
      } else {
        err = err + diff * diff;
      }
    }
    error[c] = err;
  }
  // Strictly smaller error keeps s4; ties (and NaN errors) keep s6.
  const int pick = error[1] < error[0] ? 1 : 0;
  for (int i = 0; i < kNvBlock; ++i) codes[i] = candidate_codes[pick][i];
  return candidates[pick];
}

// torchao's _f32_to_floatx_unpacked (torchao/prototype/custom_fp_utils.py:25-145
// at 36027d82d) has no NaN case: a NaN is neither >= 6 nor < 1, so it takes
// the normal path, (bits - (126 << 23) + 0x1FFFFF + mant_odd) >> 22, cast to
// uint8 (mod 256). On CUDA every NaN that reaches it is the canonical
// 0x7FFFFFFF (arithmetic with a NaN operand returns it; torch.clamp passes
// NaN through), which gives 0x104 -> code 0x4.
uint8_t torchao_nan_code() {
  const int32_t bits = 0x7FFFFFFF;
  const int32_t mant_odd = (bits >> 22) & 1;
  const int32_t normal = bits + (-(126 << 23) + 0x1FFFFF) + mant_odd;
  return static_cast<uint8_t>(normal >> 22);
}

// NVFP4_TORCHAO (docs/spec/nvfp4.md §4.3): torchao nvfp4_tensor.py nvfp4_quantize
// (lines 772-850 at 36027d82d). S_dec = ts.decode. NVFP4_TORCHAO_1L is the
// single-level branch: S_dec = 1 makes t = bs and r = fp32(1/s) exactly as
// its `data_hp * (1.0 / block_scale_fp32)`.
// SIMD twin: src/quant/simd/nvfp4-inl.h NvTorchao in NvGroup.
uint8_t quantize_torchao(NvDevice device, float s_dec, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // bs = max_abs / F4_E2M1_MAX (a Python scalar: fp32(a_b * RN16) on CUDA);
  // t = fp32(bs / S_dec) clamped to [2^-6, 448] (torch.clamp: NaN stays
  // NaN); s = PyTorch cast.
  const float bs = torch_div_scalar(a_b, kE2m1Max, kRn16, device);
  const float t = torch_clamp(bs / s_dec, kE4M3Tiny, kE4M3Max);
  const uint8_t s = torch_to_float8_e4m3fn(t);
  // r = fp32(fp32(1/S_dec) / fp32(s)); y = fp32(x * r) (reciprocal multiply,
  // "to match the MSLK triton kernel numerics").
  const float inv_s_dec = 1.0f / s_dec;
  const float rcp = inv_s_dec / ue4m3_decode(s);
  for (int i = 0; i < kNvBlock; ++i) {
    float y = x[i] * rcp;
    y = torch_clamp(y, -kE2m1Max, kE2m1Max);
    // torchao's bit-level RNE cast f32_to_f4_unpacked (sign from the sign
    // bit, so -0 -> 0x8). NaN has no special case there: see torchao_nan_code.
    codes[i] = std::isnan(y) ? torchao_nan_code() : cvt_satfinite_e2m1(y, r);
  }
  return s;
}

// ModelOpt's E2M1 cast `_cast_fp4` (docs/spec/nvfp4.md §1, §4.4): bounds table (RNE,
// > 5 -> 6) on |y|, sign bit from y < 0 (so -0.0 -> 0x0), NaN -> 0x7
// (NaN sorts last in searchsorted).
uint8_t modelopt_cast_fp4(float y, Rounding r) {
  if (std::isnan(y)) return 0x7;
  const uint8_t magnitude = e2m1_encode(std::fabs(y), r);
  return static_cast<uint8_t>(magnitude | (y < 0.0f ? 0x8 : 0x0));
}

// NVFP4_MODELOPT export path (docs/spec/nvfp4.md §4.4): NVFP4QTensor.quantize and
// get_weights_scaling_factor (modelopt/torch/quantization/qtensor/
// nvfp4_tensor.py lines 63-92, 143-232 at 5a4242fa). S_dec = ts.decode.
// SIMD twin: src/quant/simd/nvfp4-inl.h NvModelopt in NvGroup.
uint8_t quantize_modelopt(float s_dec, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // p = fp32(a_b / fp32(6 * S_dec)); p == 0 -> 1.0 (only an all-zero block);
  // s = PyTorch cast, no clamp (a_b <= G keeps p <= 448 in practice).
  const float six_s_dec = kE2m1Max * s_dec;
  float p = a_b / six_s_dec;
  if (p == 0.0f) p = 1.0f;
  const uint8_t s = torch_to_float8_e4m3fn(p);
  // y = fp32(x / fp32(fp32(s) * S_dec)) (true division). A positive p that
  // rounds to scale 0 gives x/0 = +-Inf -> +-6 and 0/0 = NaN -> 0x7 (§4.8).
  const float d = ue4m3_decode(s) * s_dec;
  for (int i = 0; i < kNvBlock; ++i) {
    const float y = x[i] / d;
    codes[i] = modelopt_cast_fp4(y, r);
  }
  return s;
}

// compressed-tensors' E2M1 step for one lane (docs/formats.md, nvfp4.ct):
// the zero point is added (`scaled += zero_point`, a zero tensor, so -0.0
// becomes +0.0), torch.clamp to +-6, then cast_to_fp4's table (RNE; ties
// 0.25 -> 0, 0.75 -> 1, ...) and pack_fp4_to_uint8 (sign from signbit). The
// triton path first rounds the quotient to bf16. NaN reaches the packer
// unchanged, whose index lookup gives magnitude 0: code 0x0.
uint8_t ct_cast_fp4(const NvParams& nv, float y, Rounding r) {
  y = y + 0.0f;
  y = torch_clamp(y, -kE2m1Max, kE2m1Max);
  if (nv.ct_bf16_quotient) y = bf16_rne(y);
  if (std::isnan(y)) return 0x0;
  return cvt_satfinite_e2m1(y, r);
}

// NVFP4_CT compressed-tensors (docs/spec/nvfp4.md §4.5): calculate_qparams, _quantize
// (legacy 52792be0: helpers.py:87-124, forward.py:455-489; current ac8e2ba8:
// helpers.py:70-126, forward_helpers.py:224-332 and 525-547).
// S_enc = ts.encode (ct_global_scale).
// SIMD twin: src/quant/simd/nvfp4-inl.h NvCt in NvGroup.
uint8_t quantize_ct(const NvParams& nv, float s_enc, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // s = e4m3(clamp(fp32(S_enc * fp32(a_b/6)), +-448)) (PyTorch cast; a_b/6 is
  // tensor / Python scalar); a scale of 0 is replaced by 0.125 (code 0x20).
  const float bs = torch_div_scalar(a_b, kE2m1Max, kRn16, nv.device);
  const float p = torch_clamp(s_enc * bs, -kE4M3Max, kE4M3Max);
  uint8_t s = torch_to_float8_e4m3fn(p);
  if (ue4m3_decode(s) == 0.0f) s = kCtZeroScaleCode;
  // y = fp32(x / fp32(fp32(s) / S_enc)) (tensor divisions: IEEE on both
  // devices; the triton path's `/` is approximate, see docs/formats.md).
  const float d = ue4m3_decode(s) / s_enc;
  for (int i = 0; i < kNvBlock; ++i) codes[i] = ct_cast_fp4(nv, x[i] / d, r);
  return s;
}

// NVFP4_CUTLASS_EPI (docs/spec/nvfp4.md §4.6), the exact host reference. st = ts.encode.
// SIMD twin: src/quant/simd/nvfp4-inl.h NvCutlassEpi in NvGroup.
uint8_t quantize_cutlass_epi(float st, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // pv = fp32(a_b * fp32(st * fp32(1/6))); s = float_ue4m3_t(pv) (RNE satfinite).
  const float st_rn16 = st * kRn16;
  const float pv = a_b * st_rn16;
  const uint8_t s = cvt_rn_satfinite_ue4m3(pv);
  // acc_scale = minimum_with_nan_propagation(fp32(st * fp32(1/fp32(s))),
  // FLT_MAX) (gett.hpp:463-469 at 7107b0553; functional.h:499-511): s = 0 ->
  // FLT_MAX, and a NaN scale (NaN amax, propagated by the block max at
  // gett.hpp:441-449) stays NaN, so every lane of the block is NaN and
  // converts to E2M1 code 0x7 whatever its value. (The device epilogue uses
  // rcp.approx.ftz; §11 item 3, not modelled.)
  const float rcp_s = 1.0f / ue4m3_decode(s);
  const float st_rcp = st * rcp_s;
  const float acc_scale = std::isnan(st_rcp) ? st_rcp : std::fmin(st_rcp, kFltMax);
  for (int i = 0; i < kNvBlock; ++i) {
    const float y = x[i] * acc_scale;
    codes[i] = cvt_satfinite_e2m1(y, r);
  }
  return s;
}

// NVFP4_CUDNN, the cuDNN frontend's documented formula only (docs/spec/nvfp4.md §4.0,
// §11 item 5; unverified against a binary). The documented formula is
// scale = quantize_round_up(amax / vmax), out = quantize_round_to_even(vals / scale).
// Assumptions (none is documented):
//  - the TE per-tensor scale is folded in the way compressed-tensors and
//    4over6 do it: p = fp32(fp32(a_b / 6) * S_enc);
//  - "round up" is toward +Inf on the E4M3 grid, saturating at 448, NaN -> 0x7F;
//  - "vals / scale" divides by the decoded block scale fp32(fp32(s) * S_dec);
//  - a zero scale (only when p == 0) gives signed-zero codes instead of 0/0.
// SIMD twin: src/quant/simd/nvfp4-inl.h NvCudnn in NvGroup.
uint8_t quantize_cudnn(const NvTensorScale& ts, float a_b, const float* x, uint8_t* codes, Rounding r) {
  const float bs = a_b / kE2m1Max;
  const float p = bs * ts.encode;
  const uint8_t s = ue4m3_encode(p, Rounding::rtp, Overflow::saturate);
  const float d = ue4m3_decode(s) * ts.decode;
  for (int i = 0; i < kNvBlock; ++i) {
    if (d == 0.0f) {
      codes[i] = std::signbit(x[i]) ? 0x8 : 0x0;
      continue;
    }
    const float y = x[i] / d;
    codes[i] = cvt_satfinite_e2m1(y, r);
  }
  return s;
}

// NVFP4_GGML, `quantize_row_nvfp4_ref` per 16-element sub-block
// (ggml-quants.c:384-416 at d99724f2; docs/spec/nvfp4.md §2.1, §6.1). No per-tensor
// scale. The element rule is `best_index_mxfp4` (ggml-quants.c:337-348), an
// argmin, not a rounding, so `rounding` is not consulted (the recipe allows
// only ties_to_zero, which is what the argmin amounts to).
// SIMD twin: src/quant/simd/nvfp4-inl.h NvGgmlGroupScales, NvGgmlGroupBlocks.
uint8_t quantize_ggml(float a_b, const float* x, uint8_t* codes) {
  const float bs = a_b / kE2m1Max;  // `amax / 6.0f`
  const uint8_t s = ggml_fp32_to_ue4m3(bs);
  const float d = ggml_ue4m3_to_fp32(s);  // already halved
  // ggml-common.h kvalues_fp4 (d99724f2, lines 1126-1129) is kvalues_mxfp4.
  for (int i = 0; i < kNvBlock; ++i) codes[i] = library::ggml_best_index(d, x[i]);
  return s;
}

// NVFP4_MODELOPT_FQ: ModelOpt's triton fake quant, fp4_fake_quant_kernel
// (modelopt/torch/quantization/triton/fp4_kernel.py:45-140 at 5a4242fa),
// op by op. No codes exist; the output is computed directly. S_dec =
// ts.decode (the kernel's global_scale, possibly NaN, Inf or 0).
// SIMD twin: src/quant/simd/nvfp4-inl.h NvModeloptFqGroup.
void fake_quant_modelopt_fq(float s_dec, float a_b, const float* x, float* out, Rounding r) {
  // global_scale_safe = where(S_dec > 0, S_dec, 1e-12): NaN and 0 -> 1e-12.
  const float safe = s_dec > 0.0f ? s_dec : 1e-12f;
  // p = min(a_b / (6 * safe), 448): tl.minimum is minnum, so NaN -> 448.
  const float six_safe = kE2m1Max * safe;
  const float p = std::fmin(a_b / six_safe, kE4M3Max);
  // fp8e4nv cast (cvt.rn.satfinite), times the unguarded S_dec; d >= 1e-5
  // or else 1.0 (a NaN d, from a NaN or Inf S_dec, becomes 1.0).
  const uint8_t s = cvt_rn_satfinite_ue4m3(p);
  float d = ue4m3_decode(s) * s_dec;
  if (!(d >= 1e-5f)) d = 1.0f;
  // x^ = where(x >= 0, q*d, -(q*d)) with q = table(fp32(|x| / d)). The
  // table's comparisons are all false for NaN, so NaN -> q = 6 and, with
  // x >= 0 false, x^ = -6*d. -0.0 >= 0 is true -> +0.
  for (int i = 0; i < kNvBlock; ++i) {
    const float ax = std::fabs(x[i]) / d;
    const float q = std::isnan(ax) ? kE2m1Max : e2m1_decode(e2m1_encode(ax, r));
    const float qd = q * d;
    out[i] = x[i] >= 0.0f ? qd : -qd;
  }
}

// The value every code of a block is multiplied by, for the decode orders
// that multiply the element by one per-block factor (docs/formats.md,
// dequantize table).
float decode_factor(const Recipe& recipe, const NvTensorScale& ts, uint8_t scale) {
  const NvParams& nv = recipe.nv;
  const float s = ue4m3_decode(scale);
  switch (nv.decode) {
    case NvDecode::te: {
      // dequantize_nvfp4.cuh:66-69 (d0067d0da): fp32(fp32(s * amax) * fp32(1/(6*M))).
      const float factor_inv = 1.0f / (kE2m1Max * nv.tensor_scale_e4m3_max);
      const float s_times_amax = s * ts.global_amax;
      return s_times_amax * factor_inv;
    }
    case NvDecode::torchao:
      // get_hp_scales (nvfp4_tensor.py:253-257): per_tensor_scale * s; single level: s.
      return nv.rule == NvScaleRule::torchao_1l ? s : ts.decode * s;
    case NvDecode::modelopt:
      // NVFP4QTensor.dequantize (nvfp4_tensor.py:285-296): q_per_block_scale * double_scale.
      return s * ts.decode;
    case NvDecode::ct:
      // _dequantize: scale / global_scale (forward.py:501-502 at 52792be0;
      // forward_helpers.py:559-560 at ac8e2ba8).
      return s / ts.encode;
    case NvDecode::ggml:
      // kvalue * d with d = s/2: the factor of the E2M1 value is 2*d (exact).
      return ggml_ue4m3_to_fp32(scale) * 2.0f;
    case NvDecode::code_times_scale_then_tensor: break;
  }
  return s;
}

}  // namespace

// ---- Public API ----------------------------------------------------------------

NvTensorScale nvfp4_tensor_scale(const Recipe& recipe, float global_amax) {
  const float g = global_amax;
  const NvParams& nv = recipe.nv;
  switch (nv.rule) {
    case NvScaleRule::te:
    case NvScaleRule::te_4over6:
    case NvScaleRule::cudnn:
      return te_tensor_scale(g, nv.tensor_scale_e4m3_max);
    case NvScaleRule::cutlass_epi:
      // CUTLASS takes the encode constant st from its caller; fp4emu derives it
      // as TE does (§4.1 step 1) so that one G means one S_enc everywhere.
      return te_tensor_scale(g, nv.tensor_scale_e4m3_max);
    case NvScaleRule::torchao:
    case NvScaleRule::modelopt:
    case NvScaleRule::modelopt_fq: {
      // Decode convention: S_dec = G / (448 * 6), a tensor divided by a
      // Python float (torchao per_tensor_amax_to_scale, nvfp4_tensor.py:769;
      // ModelOpt get_weights_scaling_factor_2, nvfp4_tensor.py:97, and
      // fp4_fake_quant_block, fp4_kernel.py:179). No guard: G = 0 divides by
      // zero later, as in the library (ModelOpt's fake quant guards inside
      // its kernel). `encode` holds fp32(1/S_dec), the reciprocal torchao
      // multiplies by; ModelOpt does not use it.
      const float s_dec = torch_div_scalar(g, kE2m1Max * kE4M3Max, kRcp2688, nv.device);
      return {g, 1.0f / s_dec, s_dec};
    }
    case NvScaleRule::ct: {
      // Encode convention: only S_enc is stored; the packed metadata's S_dec
      // is fp32(1/S_enc) (decoding divides by S_enc, decode_factor).
      const float s_enc = ct_global_scale(g, nv.ct_release);
      return {g, s_enc, 1.0f / s_enc};
    }
    case NvScaleRule::torchao_1l:
    case NvScaleRule::ggml:
      return {g, 1.0f, 1.0f};  // single level: no per-tensor scale
  }
  return {g, 1.0f, 1.0f};
}

float nvfp4_global_amax(const Recipe& recipe, std::span<const float> x) {
  return reduce_amax(recipe.nv.tensor_amax_nan, x.data(), x.size());
}

float nvfp4_block_amax(const Recipe& recipe, const float* x, int n) {
  return reduce_amax(recipe.nv.amax_nan, x, static_cast<size_t>(n));
}

uint8_t nvfp4_quantize_block(const Recipe& recipe, Rounding rounding, const NvTensorScale& ts,
                             float block_amax, const float* x, uint8_t* codes, const uint8_t* rbits) {
  const float a_b = block_amax;
  check_rounding(recipe, rounding);
  if (rounding == Rounding::stochastic && (recipe.nv.rule != NvScaleRule::te || rbits == nullptr))
    throw InputError("nvfp4_quantize_block: stochastic rounding needs a TransformerEngine recipe and one "
                     "random byte per element (recipe " + std::string(recipe.id) + ")");
  switch (recipe.nv.rule) {
    case NvScaleRule::te: return quantize_te(ts, a_b, x, codes, rounding, rbits);
    case NvScaleRule::te_4over6: return quantize_te_4over6(recipe.nv, ts, a_b, x, codes, rounding);
    case NvScaleRule::torchao: return quantize_torchao(recipe.nv.device, ts.decode, a_b, x, codes, rounding);
    case NvScaleRule::torchao_1l: return quantize_torchao(recipe.nv.device, 1.0f, a_b, x, codes, rounding);
    case NvScaleRule::modelopt: return quantize_modelopt(ts.decode, a_b, x, codes, rounding);
    case NvScaleRule::ct: return quantize_ct(recipe.nv, ts.encode, a_b, x, codes, rounding);
    case NvScaleRule::cutlass_epi: return quantize_cutlass_epi(ts.encode, a_b, x, codes, rounding);
    case NvScaleRule::cudnn: return quantize_cudnn(ts, a_b, x, codes, rounding);
    case NvScaleRule::ggml: return quantize_ggml(a_b, x, codes);
    case NvScaleRule::modelopt_fq: break;
  }
  throw InputError("recipe " + std::string(recipe.id) +
                   " is fake-quant only (ModelOpt's triton fake quant produces no codes); "
                   "use fake_quant, or nvfp4.modelopt for the packed export path");
}

bool nvfp4_decode_is_block_factor(const Recipe& recipe) {
  return recipe.nv.decode != NvDecode::code_times_scale_then_tensor;
}

bool nvfp4_decode_positive_zero(const Recipe& recipe) {
  return recipe.nv.decode == NvDecode::modelopt || recipe.nv.decode == NvDecode::ggml;
}

float nvfp4_decode_factor(const Recipe& recipe, const NvTensorScale& ts, uint8_t scale) {
  return decode_factor(recipe, ts, scale);
}

// SIMD twin: src/quant/simd/nvfp4-inl.h NvDecodeBlock.
void nvfp4_decode_block(const Recipe& recipe, const NvTensorScale& ts, uint8_t scale, const uint8_t* codes,
                        float* out) {
  if (recipe.nv.rule == NvScaleRule::modelopt_fq)
    throw InputError("recipe " + std::string(recipe.id) + " is fake-quant only; it has no codes to decode");
  if (nvfp4_decode_is_block_factor(recipe)) {
    // x^ = fp32(q * f): the library multiplies the element value by one
    // per-block factor (decode_factor). ModelOpt's value table and ggml's
    // kvalues hold +0 for code 0x8.
    const float f = decode_factor(recipe, ts, scale);
    const bool positive_zero = nvfp4_decode_positive_zero(recipe);
    for (int i = 0; i < kNvBlock; ++i) {
      const uint8_t c = positive_zero && codes[i] == 0x8 ? 0x0 : codes[i];
      out[i] = e2m1_decode(c) * f;
    }
    return;
  }
  // No library defines this recipe's dequantize (cudnn, cutlass_epi): the
  // docs/spec/nvfp4.md §0 reading x^ = fp32(fp32(e2m1 * ue4m3) * S_dec). The first
  // product is exact (2 + 4 significant bits); UE4M3 0x7F is NaN, so the
  // whole block decodes to NaN.
  const float s = ue4m3_decode(scale);
  for (int i = 0; i < kNvBlock; ++i) {
    const float code_times_s = e2m1_decode(codes[i]) * s;
    out[i] = code_times_s * ts.decode;
  }
}

void nvfp4_decode_block_unscaled(const Recipe& recipe, uint8_t scale, const uint8_t* codes, float* out) {
  // ggml's own decoder and kvalues (+0 for 0x8); every other recipe the
  // UE4M3 value and the signed E2M1 value (CUTLASS's float_e2m1_t keeps -0).
  const bool ggml = recipe.nv.rule == NvScaleRule::ggml;
  const float s = ggml ? ggml_ue4m3_to_fp32(scale) * 2.0f : ue4m3_decode(scale);
  for (int i = 0; i < kNvBlock; ++i) {
    const uint8_t c = ggml && codes[i] == 0x8 ? 0x0 : codes[i];
    out[i] = e2m1_decode(c) * s;
  }
}

void nvfp4_fake_quant_block(const Recipe& recipe, Rounding rounding, const NvTensorScale& ts, float block_amax,
                            const float* x, float* out, const uint8_t* rbits) {
  check_rounding(recipe, rounding);
  if (recipe.nv.rule == NvScaleRule::modelopt_fq) {
    fake_quant_modelopt_fq(ts.decode, block_amax, x, out, rounding);
    return;
  }
  uint8_t codes[kNvBlock];
  const uint8_t scale = nvfp4_quantize_block(recipe, rounding, ts, block_amax, x, codes, rbits);
  nvfp4_decode_block(recipe, ts, scale, codes, out);
}

}  // namespace fp4emu::reference
