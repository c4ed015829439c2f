// Recipe table of NVFP4 (docs/spec/nvfp4.md §4.0 variant map; ids from docs/architecture.md §10).
// The numerics each NvScaleRule selects are in nvfp4.cpp.
#include "fp4emu/quant/recipe.hpp"

namespace fp4emu {
namespace {

// Element roundings a caller may ask for instead of the recipe's own: RNE and
// RZ, the two modes of the CUDA E2M1 conversion API (docs/spec/nvfp4.md §5: cudaRoundZero
// exists, no library recipe uses it). Stochastic rounding (§5, gradients):
// TransformerEngine's recipes (the TE scale rule, 1D and 2D), whose kernels
// use cvt.rs.satfinite.e2m1x4; no other NVFP4 library offers it.
constexpr uint8_t kConvertRoundings = rounding_bit(Rounding::rne) | rounding_bit(Rounding::rtz);

constexpr Recipe nv_recipe(std::string_view id, bool is_default, std::string_view summary, std::string_view spec_ref,
                           NvParams nv, int bits_version, bool fake_quant_only = false) {
  return Recipe{
      .id = id,
      .format = Format::nvfp4,
      .is_default = is_default,
      .summary = summary,
      .spec_ref = spec_ref,
      .element_rounding = Rounding::rne,
      .allowed_roundings = static_cast<uint8_t>(
          kConvertRoundings | (nv.rule == NvScaleRule::te ? rounding_bit(Rounding::stochastic) : 0)),
      .default_tail = TailPolicy::pad,  // docs/spec/nvfp4.md §3 [proposal]: zero-pad, a_b unchanged
      .nibble_order = NibbleOrder::low_first,  // docs/spec/nvfp4.md §6.1: lower index in bits 3..0
      .scale_bit_order = ScaleBitOrder::lsb_first,  // HiF4 only
      .fake_quant_only = fake_quant_only,
      .bf16_input_only = false,
      .nv = nv,
      .bits_version = bits_version,
  };
}

// PyTorch-based recipes: NaN-propagating amax (torch.amax, torch.max/min) for
// blocks and tensor.
constexpr NvParams torch_params(NvScaleRule rule, NvDecode decode, NvDevice device) {
  return {.rule = rule,
          .amax_nan = NvAmaxNan::propagate,
          .tensor_amax_nan = NvAmaxNan::propagate,
          .decode = decode,
          .device = device};
}

constexpr NvParams ct_params(NvCtRelease release, NvDevice device, bool bf16_quotient) {
  NvParams p = torch_params(NvScaleRule::ct, NvDecode::ct, device);
  p.ct_release = release;
  p.ct_bf16_quotient = bf16_quotient;
  return p;
}

// bits_version: CHANGELOG.md says what changed in each version.
constexpr Recipe kNvfp4Recipes[] = {
    nv_recipe("nvfp4.te", true,
              "NVIDIA reference (TransformerEngine kernels, paper App. B): s = e4m3(a*(S_enc*RN16)), "
              "q = e2m1(x*min(1/(s*S_dec), FLT_MAX)); scale may be 0 or subnormal; "
              "dequantize q*((s*G)*(1/2688))",
              "docs/spec/nvfp4.md §4.1",
              {.rule = NvScaleRule::te, .amax_nan = NvAmaxNan::drop, .decode = NvDecode::te}, 2),
    nv_recipe("nvfp4.te_2d", false,
              "TransformerEngine weights: nvfp4.te with the amax of a 16x16 tile (16 rows x 16 K) "
              "repeated for each of its rows",
              "docs/spec/nvfp4.md §4.2, §3",
              {.rule = NvScaleRule::te, .tile_2d = true, .amax_nan = NvAmaxNan::drop, .decode = NvDecode::te}, 2),
    nv_recipe("nvfp4.te_4over6", false,
              "TransformerEngine 4over6: per block the better (MAE, ties keep s6) of s6 (max -> 6) and "
              "s4 = 1.5*s6 (max -> 4); S_enc = 6*256/G; dequantize q*((s*G)*(1/1536))",
              "docs/spec/nvfp4.md §4.2",
              {.rule = NvScaleRule::te_4over6,
               .amax_nan = NvAmaxNan::drop,
               .tensor_scale_e4m3_max = 256.0f,
               .select_metric = NvSelectMetric::mae,
               .decode = NvDecode::te},
              2),
    nv_recipe("nvfp4.torchao", false,
              "torchao nvfp4_quantize on CUDA: S_dec = G*fp32(1/2688), s = e4m3(clamp((a*RN16)/S_dec, 2^-6, 448)), "
              "q = e2m1(clamp(x*((1/S_dec)/s), +-6)); scale never below 0x08; dequantize q*(S_dec*s)",
              "docs/spec/nvfp4.md §4.3",
              torch_params(NvScaleRule::torchao, NvDecode::torchao, NvDevice::cuda), 2),
    nv_recipe("nvfp4.torchao_cpu", false,
              "nvfp4.torchao with PyTorch's CPU semantics: S_dec = G/2688 and a/6 are true divisions",
              "docs/spec/nvfp4.md §4.3",
              torch_params(NvScaleRule::torchao, NvDecode::torchao, NvDevice::cpu), 1),
    nv_recipe("nvfp4.torchao_1l", false,
              "torchao single level (no per-tensor scale) on CUDA: s = e4m3(clamp(a*RN16, 2^-6, 448)), "
              "q = e2m1(x*(1/s))",
              "docs/spec/nvfp4.md §4.3",
              torch_params(NvScaleRule::torchao_1l, NvDecode::torchao, NvDevice::cuda), 2),
    nv_recipe("nvfp4.torchao_1l_cpu", false,
              "nvfp4.torchao_1l with PyTorch's CPU semantics: a/6 is a true division",
              "docs/spec/nvfp4.md §4.3",
              torch_params(NvScaleRule::torchao_1l, NvDecode::torchao, NvDevice::cpu), 1),
    nv_recipe("nvfp4.modelopt", false,
              "ModelOpt export (NVFP4QTensor.quantize) on CUDA: S_dec = G*fp32(1/2688), s = e4m3(a/(6*S_dec)), "
              "0 -> 1.0, q = table(x/(s*S_dec)); dequantize q*(s*S_dec), 0x8 -> +0",
              "docs/spec/nvfp4.md §4.4",
              torch_params(NvScaleRule::modelopt, NvDecode::modelopt, NvDevice::cuda), 2),
    nv_recipe("nvfp4.modelopt_cpu", false,
              "nvfp4.modelopt with PyTorch's CPU semantics: S_dec = G/2688 is a true division",
              "docs/spec/nvfp4.md §4.4",
              torch_params(NvScaleRule::modelopt, NvDecode::modelopt, NvDevice::cpu), 1),
    nv_recipe("nvfp4.modelopt_fq", false,
              "ModelOpt triton fake quant (no codes, CUDA only): d = e4m3(min(a/(6*S_dec), 448))*S_dec, "
              "d < 1e-5 or NaN -> 1.0, x^ = sign*table(|x|/d)*d; triton's approximate '/' taken as IEEE",
              "docs/spec/nvfp4.md §4.0, §4.4",
              {.rule = NvScaleRule::modelopt_fq,
               .amax_nan = NvAmaxNan::maxnum,
               .tensor_amax_nan = NvAmaxNan::propagate,
               .device = NvDevice::cuda},
              2, /*fake_quant_only=*/true),
    nv_recipe("nvfp4.ct", false,
              "compressed-tensors 0.18 (CPU path): S_enc = 2688*(1/max(G, FLT_MIN)), NaN/Inf -> 1, "
              "s = e4m3(min(S_enc*(a/6), 448)), 0 -> 0.125, q = e2m1(clamp(x/(s/S_enc) + 0, +-6)); "
              "dequantize q*(s/S_enc)",
              "docs/spec/nvfp4.md §4.5", ct_params(NvCtRelease::current, NvDevice::cpu, false), 2),
    nv_recipe("nvfp4.ct_cuda", false,
              "compressed-tensors 0.18 triton path (CUDA): nvfp4.ct with a*RN16 and x/d rounded to bf16 "
              "before the E2M1 table; triton's approximate '/' taken as IEEE",
              "docs/spec/nvfp4.md §4.5", ct_params(NvCtRelease::current, NvDevice::cuda, true), 1),
    nv_recipe("nvfp4.ct_legacy", false,
              "compressed-tensors 0.13/0.14 (neuralmagic 52792be0) on CUDA: nvfp4.ct without the G guards, "
              "a*RN16 for a/6",
              "docs/spec/nvfp4.md §4.5", ct_params(NvCtRelease::legacy, NvDevice::cuda, false), 1),
    nv_recipe("nvfp4.ct_legacy_cpu", false,
              "compressed-tensors 0.13/0.14 (neuralmagic 52792be0) with PyTorch's CPU semantics",
              "docs/spec/nvfp4.md §4.5", ct_params(NvCtRelease::legacy, NvDevice::cpu, false), 1),
    nv_recipe("nvfp4.cutlass_epi", false,
              "CUTLASS block-scaled GEMM epilogue, exact host reference: s = e4m3(a*(st*RN16)), "
              "q = e2m1(x*min(st*(1/s), FLT_MAX)); st derived as TE's S_enc; NaN block -> codes 0x7",
              "docs/spec/nvfp4.md §4.6",
              {.rule = NvScaleRule::cutlass_epi,
               .amax_nan = NvAmaxNan::propagate,
               .tensor_amax_nan = NvAmaxNan::drop},
              2),
    nv_recipe("nvfp4.cudnn", false,
              "cuDNN block_scale_quantize, documented formula only, unverified against a binary: "
              "s = e4m3 round up of (a/6)*S_enc, q = RNE of x/(s*S_dec)",
              "docs/spec/nvfp4.md §4.0, §4.7, §11 item 5",
              {.rule = NvScaleRule::cudnn, .amax_nan = NvAmaxNan::drop}, 1),
    Recipe{
        .id = "nvfp4.ggml",
        .format = Format::nvfp4,
        .is_default = false,
        .summary = "ggml quantize_row_nvfp4_ref: no per-tensor scale, s = ggml_fp32_to_ue4m3(a/6) (half up, "
                   "x >= 256 -> 0x7E, subnormals clamped at 0x07), q = argmin |kv*s/2 - x| (ties toward zero), "
                   "j/j+8 packing; dequantize kv*s/2, 0x8 -> +0",
        .spec_ref = "docs/spec/nvfp4.md §4.0, §2.1, §6.1",
        .element_rounding = Rounding::ties_to_zero,
        .allowed_roundings = rounding_bit(Rounding::ties_to_zero),
        .default_tail = TailPolicy::pad,
        .nibble_order = NibbleOrder::split_half,
        .scale_bit_order = ScaleBitOrder::lsb_first,
        .fake_quant_only = false,
        .bf16_input_only = false,
        .nv = {.rule = NvScaleRule::ggml, .amax_nan = NvAmaxNan::drop, .decode = NvDecode::ggml},
        .bits_version = 2,
    },
};

}  // namespace

std::span<const Recipe> nvfp4_recipes() { return kNvfp4Recipes; }

}  // namespace fp4emu
