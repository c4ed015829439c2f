// NVFP4 scalar reference quantizer: the NVFP4 specification (nvfp4.md) in code.
//
// Every recipe is a fixed sequence of binary32 operations copied from the
// library it reproduces (nvfp4.md §4.0 variant map). Each C++ float operation
// below is one IEEE rounding (the build uses -ffp-contract=off, no fast math),
// so the order of the operations *is* the recipe: do not "simplify" a/6 into
// a*(1/6) or x/d into x*(1/d). Every conversion to E4M3 / E2M1 is a named
// codec call. Where the library uses fminf/fmaxf (NaN-dropping) the code uses
// std::fmin/std::fmax; where it uses torch.clamp (NaN-propagating) it uses
// torch_clamp below.
#include <cmath>
#include <limits>
#include <string>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/reference.hpp"

namespace fp4emu::reference {
namespace {

constexpr float kFltMax = std::numeric_limits<float>::max();
// nvfp4.md notation: RN16 = fp32(1/6) = 0x3E2AAAAB (folded by the compiler with
// one RNE rounding, as nvcc folds the kernel's constant).
constexpr float kRN16 = 1.0f / 6.0f;
constexpr float kE2M1Max = 6.0f;
constexpr float kE4M3Max = 448.0f;
// torch.finfo(torch.float8_e4m3fn).tiny = 2^-6, torchao's E4M3_EPS (code 0x08).
constexpr float kE4M3Tiny = 0.015625f;
// compressed-tensors' replacement for a zero scale: "the next largest fp8 value
// from 0" in its words, 0.125 (code 0x20).
constexpr uint8_t kCtZeroScaleCode = 0x20;

// ---- Named conversions ------------------------------------------------------

// cvt.rn.satfinite.e4m3x2.f32 / __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)
// (nvfp4.md §2.1): RNE, |x| > 448 and Inf -> 448, NaN -> 0x7F.
uint8_t cvt_rn_satfinite_ue4m3(float p) { return ue4m3_encode(p, Rounding::rne, Overflow::saturate); }

// PyTorch `.to(torch.float8_e4m3fn)` (nvfp4.md §2.1): RNE without saturation:
// |x| > 464 and Inf become NaN (0x7F).
uint8_t torch_to_float8_e4m3fn(float p) { return ue4m3_encode(p, Rounding::rne, Overflow::to_special); }

// cvt.rn.satfinite.e2m1x2.f32 (nvfp4.md §1): RNE, saturate at +-6, NaN -> +6
// (0x7), -0 and negative underflow -> 0x8. `rounding` replaces RNE when the
// caller overrides the element rounding (rtz: the CUDA API's cudaRoundZero).
uint8_t cvt_satfinite_e2m1(float y, Rounding rounding) { return e2m1_encode(y, rounding); }

// torch.clamp: NaN passes through (unlike fminf/fmaxf).
float torch_clamp(float v, float lo, float hi) {
  if (std::isnan(v)) return v;
  if (v < lo) return lo;
  if (v > hi) return hi;
  return v;
}

// ggml_fp32_to_ue4m3 (nvfp4.md §2.1, "ggml's own ... is not RNE"):
// x <= 0 or NaN -> 0; x > 448 -> 448; normals round half up (add the first
// dropped bit, which on a positive value is round-half-away). Below 2^-6 the
// code is (int)(x*512 + 0.5): x*512 is exact in float and, with 0.5 a double
// literal as the spec writes it, the sum is exact in double, so the truncation
// is floor(x*512 + 0.5), half up again [assumption: were the literal 0.5f, the
// single input 2^-10 - 2^-34 would round to code 1 instead of 0]. Both paths
// are therefore the E4M3 grid with round-half-away.
uint8_t ggml_fp32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > kE4M3Max) x = kE4M3Max;
  return ue4m3_encode(x, Rounding::rha, Overflow::saturate);
}

// ggml_ue4m3_to_fp32: codes 0x00 and 0x7F both decode to 0.
float ggml_ue4m3_to_fp32(uint8_t code) {
  const uint8_t c = code & 0x7F;
  if (c == 0x7F) return 0.0f;
  return ue4m3_decode(c);
}

// ggml's kvalues (twice the E2M1 value of codes 0..15), used with d = s/2.
constexpr float kGgmlKvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

bool is_single_level(NvScaleRule rule) {
  return rule == NvScaleRule::torchao_1l || rule == NvScaleRule::ggml;
}

// Amax reductions. NaN handling is the library's (NvParams::amax_nan).
float reduce_amax(NvAmaxNan nan_rule, const float* x, size_t n) {
  float a = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float v = std::fabs(x[i]);
    if (nan_rule == NvAmaxNan::propagate) {
      // torch.amax(abs(x)) and the CUTLASS host reference: NaN wins.
      if (std::isnan(v)) return v;
      if (v > a) a = v;
    } else {
      // fmaxf (TE/cuDNN kernels, triton's maxnumf) and ggml's
      // `if (amax < fabsf(v))` loop: NaN never wins. (TE's python reference
      // uses torch.amax and would propagate; the recipe follows the kernels.)
      // NaN lanes are skipped explicitly: glibc's fmaxf follows IEEE 754-2008
      // maxNum and returns NaN for a *signaling* NaN, which CUDA's does not.
      if (!std::isnan(v)) a = std::fmax(a, v);
    }
  }
  return a;
}

// ---- Per-tensor scale (nvfp4.md §2.2) ----------------------------------------

// NVIDIA paper / TE (§4.1 step 1): S_enc = fp32(6*M/G), then
// fminf(., FLT_MAX), then G == 0 or S_enc == 0 -> 1. G = NaN gives FLT_MAX
// (fminf drops the NaN). S_dec = fp32(1/S_enc).
NvTensorScale te_tensor_scale(float g, float e4m3_max) {
  const float numerator = kE2M1Max * e4m3_max;  // compile-time 2688 (1536 for M = 256), exact
  float s_enc = numerator / g;
  s_enc = std::fmin(s_enc, kFltMax);
  if (g == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
  const float s_dec = 1.0f / s_enc;
  return {g, s_enc, s_dec};
}

// ---- Block quantizers, one per library ---------------------------------------
// Each returns the UE4M3 scale code and writes 16 unpacked E2M1 codes.

// NVFP4_TE / NVFP4_TE_2D (nvfp4.md §4.1; 2D differs only in the amax passed in).
uint8_t quantize_te(const NvTensorScale& ts, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // §4.1 step 2: m = fp32(S_enc * RN16), p = fp32(a_b * m), p = fminf(p, FLT_MAX).
  const float m = ts.encode * kRN16;
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
  for (int i = 0; i < kNvBlock; ++i) {
    const float y = x[i] * enc_b;
    codes[i] = cvt_satfinite_e2m1(y, r);
  }
  return s;
}

// NVFP4_TE_4OVER6 (nvfp4.md §4.2). Two candidate scales s6 (block max -> 6)
// and s4 (block max -> 4); s4 is kept only if its block error is strictly
// smaller. S_enc uses M = recipe.nv.tensor_scale_e4m3_max (256 for this
// recipe, see nvfp4_recipes.cpp).
uint8_t quantize_te_4over6(const NvParams& nv, const NvTensorScale& ts, float a_b, const float* x,
                           uint8_t* codes, Rounding r) {
  // s6 = e4m3(min(fp32(fp32(a_b/6) * S_enc), 448)),
  // s4 = e4m3(min(fp32(fp32(1.5 * fp32(a_b/6)) * S_enc), 448)); the spec's
  // "1.5·fp32(a_b/6)·S_enc" is evaluated left to right [assumption].
  const float bs = a_b / kE2M1Max;
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
  const float six_m = kE2M1Max * nv.tensor_scale_e4m3_max;  // exact
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

// NVFP4_TORCHAO (nvfp4.md §4.3). S_dec = ts.decode = fp32(G/2688).
// NVFP4_TORCHAO_1L is the same sequence with S_dec = 1 (t = bs, r = 1/s).
uint8_t quantize_torchao(float s_dec, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // bs = fp32(a_b / 6) (true division); t = fp32(bs / S_dec) clamped to
  // [2^-6, 448] (torch.clamp: NaN stays NaN); s = PyTorch cast.
  const float bs = a_b / kE2M1Max;
  const float t = torch_clamp(bs / s_dec, kE4M3Tiny, kE4M3Max);
  const uint8_t s = torch_to_float8_e4m3fn(t);
  // r = fp32(fp32(1/S_dec) / fp32(s)); y = fp32(x * r) (reciprocal multiply,
  // "matches the MSLK triton kernel numerics").
  const float inv_s_dec = 1.0f / s_dec;
  const float rcp = inv_s_dec / ue4m3_decode(s);
  for (int i = 0; i < kNvBlock; ++i) {
    float y = x[i] * rcp;
    y = torch_clamp(y, -kE2M1Max, kE2M1Max);
    // torchao's bit-level RNE cast (sign from the sign bit, so -0 -> 0x8).
    // For NaN its output is unspecified ("garbage [inference]", §10); we take
    // the CUDA rule, NaN -> 0x7.
    codes[i] = cvt_satfinite_e2m1(y, r);
  }
  return s;
}

// ModelOpt's E2M1 cast `_cast_fp4` (nvfp4.md §1, §4.4): bounds table (RNE,
// > 5 -> 6) on |y|, sign bit from y < 0 (so -0.0 -> 0x0), NaN -> 0x7
// (NaN sorts last in searchsorted).
uint8_t modelopt_cast_fp4(float y, Rounding r) {
  if (std::isnan(y)) return 0x7;
  const uint8_t magnitude = e2m1_encode(std::fabs(y), r);
  return static_cast<uint8_t>(magnitude | (y < 0.0f ? 0x8 : 0x0));
}

// NVFP4_MODELOPT export path (nvfp4.md §4.4). S_dec = ts.decode = fp32(G/2688).
uint8_t quantize_modelopt(float s_dec, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // p = fp32(a_b / fp32(6 * S_dec)); p == 0 -> 1.0 (only an all-zero block);
  // s = PyTorch cast, no clamp (a_b <= G keeps p <= 448 in practice).
  const float six_s_dec = kE2M1Max * s_dec;
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

// NVFP4_CT compressed-tensors (nvfp4.md §4.5). S_enc = ts.encode = fp32(2688/G).
uint8_t quantize_ct(float s_enc, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // s = e4m3(clamp(fp32(S_enc * fp32(a_b/6)), max = 448)) (PyTorch cast);
  // a scale of 0 is replaced by 0.125 (code 0x20).
  const float bs = a_b / kE2M1Max;
  const float p = torch_clamp(s_enc * bs, -kE4M3Max, kE4M3Max);
  uint8_t s = torch_to_float8_e4m3fn(p);
  if (ue4m3_decode(s) == 0.0f) s = kCtZeroScaleCode;
  // y = fp32(x / fp32(fp32(s) / S_enc)), clamp +-6, RNE table; sign from
  // torch.signbit in the packer (-0.0 -> 0x8). NaN: compressed-tensors keeps
  // it through QDQ and its packer's argmin is undefined; we take the CUDA rule
  // (0x7).
  const float d = ue4m3_decode(s) / s_enc;
  for (int i = 0; i < kNvBlock; ++i) {
    float y = x[i] / d;
    y = torch_clamp(y, -kE2M1Max, kE2M1Max);
    codes[i] = cvt_satfinite_e2m1(y, r);
  }
  return s;
}

// NVFP4_CUTLASS_EPI (nvfp4.md §4.6), the exact host reference. st = ts.encode.
uint8_t quantize_cutlass_epi(float st, float a_b, const float* x, uint8_t* codes, Rounding r) {
  // pv = fp32(a_b * fp32(st * fp32(1/6))); s = float_ue4m3_t(pv) (RNE satfinite).
  const float st_rn16 = st * kRN16;
  const float pv = a_b * st_rn16;
  const uint8_t s = cvt_rn_satfinite_ue4m3(pv);
  // acc_scale = min(fp32(st * fp32(1/fp32(s))), FLT_MAX); s = 0 -> FLT_MAX.
  // (The device epilogue uses rcp.approx.ftz; §11 item 3, not modelled.)
  const float rcp_s = 1.0f / ue4m3_decode(s);
  const float acc_scale = std::fmin(st * rcp_s, kFltMax);
  for (int i = 0; i < kNvBlock; ++i) {
    const float y = x[i] * acc_scale;
    codes[i] = cvt_satfinite_e2m1(y, r);
  }
  return s;
}

// NVFP4_CUDNN, the cuDNN frontend's documented formula only (nvfp4.md §4.0,
// §11 item 5; unverified against a binary). The documented formula is
// scale = quantize_round_up(amax / vmax), out = quantize_round_to_even(vals / scale).
// Assumptions (none is documented):
//  - the TE per-tensor scale is folded in the way compressed-tensors and
//    4over6 do it: p = fp32(fp32(a_b / 6) * S_enc);
//  - "round up" is toward +Inf on the E4M3 grid, saturating at 448, NaN -> 0x7F;
//  - "vals / scale" divides by the decoded block scale fp32(fp32(s) * S_dec);
//  - a zero scale (only when p == 0) gives signed-zero codes instead of 0/0.
uint8_t quantize_cudnn(const NvTensorScale& ts, float a_b, const float* x, uint8_t* codes, Rounding r) {
  const float bs = a_b / kE2M1Max;
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

// NVFP4_GGML, `quantize_row_nvfp4_ref` per 16-element sub-block (nvfp4.md
// §4.0, §2.1, §6.1). No per-tensor scale. The element rule is an argmin, not
// a rounding, so `rounding` is not consulted (the recipe allows only
// ties_to_zero, which is what the argmin amounts to).
uint8_t quantize_ggml(float a_b, const float* x, uint8_t* codes) {
  const float bs = a_b / kE2M1Max;
  const uint8_t s = ggml_fp32_to_ue4m3(bs);
  const float d = ggml_ue4m3_to_fp32(s) * 0.5f;  // exact
  // argmin_k fabsf(kv[k]*d - x) over k = 0..15 in order, strict '<': the
  // first index wins ties (so ties go toward zero and -0 / negative
  // underflow give +0). kv*d is exact; the subtraction is an fp32 rounding,
  // which can merge two candidates' errors. NaN: every comparison is false ->
  // code 0. +-Inf: every error is Inf -> code 0.
  for (int i = 0; i < kNvBlock; ++i) {
    int best = 0;
    float best_err = std::fabs(kGgmlKvalues[0] * d - x[i]);
    for (int k = 1; k < 16; ++k) {
      const float kd = kGgmlKvalues[k] * d;
      const float err = std::fabs(kd - x[i]);
      if (err < best_err) {
        best = k;
        best_err = err;
      }
    }
    codes[i] = static_cast<uint8_t>(best);
  }
  return s;
}

// NVFP4_MODELOPT_FQ: ModelOpt's triton fake quant (nvfp4.md §4.0, §4.4).
// No codes exist; the output is computed directly.
void fake_quant_modelopt_fq(float s_dec, float a_b, const float* x, float* out, Rounding r) {
  // d = fp32(e4m3(min(fp32(a_b / fp32(6 * S_dec)), 448)) * S_dec) (tl.minimum
  // is fminf-like; the fp8 cast is triton's, RNE satfinite); d < 1e-5 -> 1.0.
  const float six_s_dec = kE2M1Max * s_dec;
  const float p = std::fmin(a_b / six_s_dec, kE4M3Max);
  const uint8_t s = cvt_rn_satfinite_ue4m3(p);
  float d = ue4m3_decode(s) * s_dec;
  if (d < 1e-5f) d = 1.0f;
  // x^ = where(x >= 0, q, -q) * d with q = table(fp32(|x| / d)). The table's
  // comparisons are all false for NaN, so NaN -> q = 6 and, with x >= 0 false,
  // x^ = -6*d (§10, [derived]). -0.0 >= 0 is true -> +0.
  for (int i = 0; i < kNvBlock; ++i) {
    const float ax = std::fabs(x[i]) / d;
    const float q = std::isnan(ax) ? kE2M1Max : e2m1_decode(e2m1_encode(ax, r));
    const float signed_q = x[i] >= 0.0f ? q : -q;
    out[i] = signed_q * d;
  }
}

}  // namespace

// ---- Public API ----------------------------------------------------------------

NvTensorScale nvfp4_tensor_scale(const Recipe& recipe, float global_amax) {
  const float g = global_amax;
  switch (recipe.nv.rule) {
    case NvScaleRule::te:
    case NvScaleRule::te_4over6:
    case NvScaleRule::cudnn:
      return te_tensor_scale(g, recipe.nv.tensor_scale_e4m3_max);
    case NvScaleRule::cutlass_epi:
      // CUTLASS takes the encode constant st from its caller; fp4emu derives it
      // as TE does (§4.1 step 1) so that one G means one S_enc everywhere.
      return te_tensor_scale(g, recipe.nv.tensor_scale_e4m3_max);
    case NvScaleRule::torchao:
    case NvScaleRule::modelopt: {
      // Decode convention: S_dec = fp32(G / 2688) (python 448*6 = 2688.0).
      // No guard: G = 0 divides by zero later, as in the library (§10).
      // `encode` holds fp32(1/S_dec), the reciprocal torchao multiplies by;
      // ModelOpt does not use it.
      const float s_dec = g / (kE2M1Max * kE4M3Max);
      return {g, 1.0f / s_dec, s_dec};
    }
    case NvScaleRule::modelopt_fq: {
      // As ModelOpt, with the fake-quant guard S_dec <= 0 -> 1e-12.
      float s_dec = g / (kE2M1Max * kE4M3Max);
      if (s_dec <= 0.0f) s_dec = 1e-12f;
      return {g, 1.0f / s_dec, s_dec};
    }
    case NvScaleRule::ct: {
      // Encode convention without guards: S_enc = fp32(2688 / G) (G = 0 -> Inf).
      // compressed-tensors stores only S_enc; decoding uses S_dec = fp32(1/S_enc).
      const float s_enc = (kE2M1Max * kE4M3Max) / g;
      return {g, s_enc, 1.0f / s_enc};
    }
    case NvScaleRule::torchao_1l:
    case NvScaleRule::ggml:
      return {g, 1.0f, 1.0f};  // single level: no per-tensor scale
  }
  return {g, 1.0f, 1.0f};
}

float nvfp4_global_amax(const Recipe& recipe, std::span<const float> x) {
  return reduce_amax(recipe.nv.amax_nan, x.data(), x.size());
}

float nvfp4_block_amax(const Recipe& recipe, const float* x, int n) {
  return reduce_amax(recipe.nv.amax_nan, x, static_cast<size_t>(n));
}

uint8_t nvfp4_quantize_block(const Recipe& recipe, Rounding rounding, const NvTensorScale& ts,
                             float block_amax, const float* x, uint8_t* codes) {
  const float a_b = block_amax;
  switch (recipe.nv.rule) {
    case NvScaleRule::te: return quantize_te(ts, a_b, x, codes, rounding);
    case NvScaleRule::te_4over6: return quantize_te_4over6(recipe.nv, ts, a_b, x, codes, rounding);
    case NvScaleRule::torchao: return quantize_torchao(ts.decode, a_b, x, codes, rounding);
    case NvScaleRule::torchao_1l: return quantize_torchao(1.0f, a_b, x, codes, rounding);
    case NvScaleRule::modelopt: return quantize_modelopt(ts.decode, a_b, x, codes, rounding);
    case NvScaleRule::ct: return quantize_ct(ts.encode, a_b, x, codes, rounding);
    case NvScaleRule::cutlass_epi: return quantize_cutlass_epi(ts.encode, a_b, x, codes, rounding);
    case NvScaleRule::cudnn: return quantize_cudnn(ts, a_b, x, codes, rounding);
    case NvScaleRule::ggml: return quantize_ggml(a_b, x, codes);
    case NvScaleRule::modelopt_fq: break;
  }
  throw InputError("recipe " + std::string(recipe.id) +
                   " is fake-quant only (ModelOpt's triton fake quant produces no codes); "
                   "use fake_quant, or nvfp4.modelopt for the packed export path");
}

void nvfp4_decode_block(const Recipe& recipe, const NvTensorScale& ts, uint8_t scale, const uint8_t* codes,
                        float* out) {
  if (recipe.nv.rule == NvScaleRule::modelopt_fq)
    throw InputError("recipe " + std::string(recipe.id) + " is fake-quant only; it has no codes to decode");
  // nvfp4.md §0: x^ = fp32(fp32(e2m1 * ue4m3) * S_dec). The first product is
  // exact (2 + 4 significant bits). UE4M3 0x7F is NaN, so the whole block
  // decodes to NaN; ggml's own decoder maps 0x7F to 0 instead (ggml never
  // writes 0x7F). For the encode-convention recipes (te*, ct, cutlass_epi,
  // cudnn) S_dec = fp32(1/S_enc) as TE computes it; single-level recipes have
  // S_dec = 1.
  const float s_dec = is_single_level(recipe.nv.rule) ? 1.0f : ts.decode;
  const float s = recipe.nv.rule == NvScaleRule::ggml ? ggml_ue4m3_to_fp32(scale) : ue4m3_decode(scale);
  for (int i = 0; i < kNvBlock; ++i) {
    const float code_times_s = e2m1_decode(codes[i]) * s;
    out[i] = code_times_s * s_dec;
  }
}

void nvfp4_fake_quant_block(const Recipe& recipe, Rounding rounding, const NvTensorScale& ts, float block_amax,
                            const float* x, float* out) {
  if (recipe.nv.rule == NvScaleRule::modelopt_fq) {
    fake_quant_modelopt_fq(ts.decode, block_amax, x, out, rounding);
    return;
  }
  uint8_t codes[kNvBlock];
  const uint8_t scale = nvfp4_quantize_block(recipe, rounding, ts, block_amax, x, codes);
  nvfp4_decode_block(recipe, ts, scale, codes, out);
}

}  // namespace fp4emu::reference
