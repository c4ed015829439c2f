// Recipe table of NVFP4 (nvfp4.md §4.0 variant map; ids from DESIGN.md §10).
// The numerics each NvScaleRule selects are in nvfp4.cpp.
#include "fp4emu/quant/recipe.hpp"

namespace fp4emu {
namespace {

// Element roundings a caller may ask for instead of the recipe's own: RNE and
// RZ, the two modes of the CUDA E2M1 conversion API (nvfp4.md §5: cudaRoundZero
// exists, no library recipe uses it). Stochastic rounding (§5, gradients)
// comes with its own issue.
constexpr uint8_t kConvertRoundings = rounding_bit(Rounding::rne) | rounding_bit(Rounding::rtz);

constexpr Recipe nv_recipe(std::string_view id, bool is_default, std::string_view summary, std::string_view spec_ref,
                           NvParams nv, bool fake_quant_only = false) {
  return Recipe{
      .id = id,
      .format = Format::nvfp4,
      .is_default = is_default,
      .summary = summary,
      .spec_ref = spec_ref,
      .element_rounding = Rounding::rne,
      .allowed_roundings = kConvertRoundings,
      .default_tail = TailPolicy::pad,  // nvfp4.md §3 [proposal]: zero-pad, a_b unchanged
      .nibble_order = NibbleOrder::low_first,  // nvfp4.md §6.1: lower index in bits 3..0
      .scale_bit_order = ScaleBitOrder::lsb_first,  // HiF4 only
      .fake_quant_only = fake_quant_only,
      .bf16_input_only = false,
      .nv = nv,
  };
}

constexpr Recipe kNvfp4Recipes[] = {
    nv_recipe("nvfp4.te", true,
              "NVIDIA reference (TransformerEngine kernels, paper App. B): s = e4m3(a*(S_enc*RN16)), "
              "q = e2m1(x*min(1/(s*S_dec), FLT_MAX)); scale may be 0 or subnormal",
              "nvfp4.md §4.1", {.rule = NvScaleRule::te, .amax_nan = NvAmaxNan::drop}),
    nv_recipe("nvfp4.te_2d", false,
              "TransformerEngine weights: nvfp4.te with the amax of a 16x16 tile (16 rows x 16 K) "
              "repeated for each of its rows",
              "nvfp4.md §4.2, §3", {.rule = NvScaleRule::te, .tile_2d = true, .amax_nan = NvAmaxNan::drop}),
    nv_recipe("nvfp4.te_4over6", false,
              "TransformerEngine 4over6: per block the better (MAE, ties keep s6) of s6 (max -> 6) and "
              "s4 = 1.5*s6 (max -> 4); S_enc = 6*256/G",
              "nvfp4.md §4.2",
              {.rule = NvScaleRule::te_4over6,
               .amax_nan = NvAmaxNan::drop,
               .tensor_scale_e4m3_max = 256.0f,
               .select_metric = NvSelectMetric::mae}),
    nv_recipe("nvfp4.torchao", false,
              "torchao nvfp4_quantize: S_dec = G/2688, s = e4m3(clamp((a/6)/S_dec, 2^-6, 448)), "
              "q = e2m1(clamp(x*((1/S_dec)/s), +-6)); scale never below 0x08",
              "nvfp4.md §4.3", {.rule = NvScaleRule::torchao, .amax_nan = NvAmaxNan::propagate}),
    nv_recipe("nvfp4.torchao_1l", false,
              "torchao single level (no per-tensor scale): s = e4m3(clamp(a/6, 2^-6, 448)), q = e2m1(x*(1/s))",
              "nvfp4.md §4.3", {.rule = NvScaleRule::torchao_1l, .amax_nan = NvAmaxNan::propagate}),
    nv_recipe("nvfp4.modelopt", false,
              "ModelOpt export (NVFP4QTensor.quantize): s = e4m3(a/(6*S_dec)), 0 -> 1.0, "
              "q = table(x/(s*S_dec)); a scale that rounds to 0 gives codes +-6 and 0x7",
              "nvfp4.md §4.4", {.rule = NvScaleRule::modelopt, .amax_nan = NvAmaxNan::propagate}),
    nv_recipe("nvfp4.modelopt_fq", false,
              "ModelOpt triton fake quant (no codes): d = e4m3(min(a/(6*S_dec), 448))*S_dec, "
              "d < 1e-5 -> 1.0, x^ = sign*table(|x|/d)*d",
              "nvfp4.md §4.0, §4.4",
              {.rule = NvScaleRule::modelopt_fq, .amax_nan = NvAmaxNan::drop}, /*fake_quant_only=*/true),
    nv_recipe("nvfp4.ct", false,
              "compressed-tensors / llm-compressor: S_enc = 2688/G, s = e4m3(min(S_enc*(a/6), 448)), "
              "0 -> 0.125, q = e2m1(clamp(x/(s/S_enc), +-6))",
              "nvfp4.md §4.5", {.rule = NvScaleRule::ct, .amax_nan = NvAmaxNan::propagate}),
    nv_recipe("nvfp4.cutlass_epi", false,
              "CUTLASS block-scaled GEMM epilogue, exact host reference: s = e4m3(a*(st*RN16)), "
              "q = e2m1(x*min(st*(1/s), FLT_MAX)); st derived as TE's S_enc",
              "nvfp4.md §4.6", {.rule = NvScaleRule::cutlass_epi, .amax_nan = NvAmaxNan::propagate}),
    nv_recipe("nvfp4.cudnn", false,
              "cuDNN block_scale_quantize, documented formula only, unverified against a binary: "
              "s = e4m3 round up of (a/6)*S_enc, q = RNE of x/(s*S_dec)",
              "nvfp4.md §4.0, §4.7, §11 item 5", {.rule = NvScaleRule::cudnn, .amax_nan = NvAmaxNan::drop}),
    Recipe{
        .id = "nvfp4.ggml",
        .format = Format::nvfp4,
        .is_default = false,
        .summary = "ggml quantize_row_nvfp4_ref: no per-tensor scale, s = ggml UE4M3 (half up) of a/6, "
                   "q = argmin |kv*s/2 - x| (first index wins: ties toward zero), j/j+8 packing",
        .spec_ref = "nvfp4.md §4.0, §2.1, §6.1",
        .element_rounding = Rounding::ties_to_zero,
        .allowed_roundings = rounding_bit(Rounding::ties_to_zero),
        .default_tail = TailPolicy::pad,
        .nibble_order = NibbleOrder::split_half,
        .scale_bit_order = ScaleBitOrder::lsb_first,
        .fake_quant_only = false,
        .bf16_input_only = false,
        .nv = {.rule = NvScaleRule::ggml, .amax_nan = NvAmaxNan::drop},
    },
};

}  // namespace

std::span<const Recipe> nvfp4_recipes() { return kNvfp4Recipes; }

}  // namespace fp4emu
