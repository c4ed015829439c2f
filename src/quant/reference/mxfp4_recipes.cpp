// Recipe table of MXFP4 (docs/spec/mxfp4.md §4.0 variant map, docs/architecture.md §10).
// Each entry is data; src/quant/reference/mxfp4.cpp reads it.
#include <array>

#include "fp4emu/quant/recipe.hpp"

namespace fp4emu {
namespace {

// The OCP spec makes RNE mandatory and allows other element roundings (§4.1);
// the convert recipes accept the deterministic ones fp4emu implements. rtp is
// a scale rounding, not an element one.
constexpr uint8_t kConvertRoundings = rounding_bit(Rounding::rne) | rounding_bit(Rounding::rha) |
                                      rounding_bit(Rounding::rtz) |
                                      rounding_bit(Rounding::ties_to_zero);
// Stochastic rounding (§5.5, the integer rule of PTX cvt.rs): the OCP recipe
// (the spec allows roundings besides RNE) and NVIDIA's rceil, whose hardware
// has cvt.rs. torchao (ceil, even) and ggml offer none; microxcaling's
// "dither" is another arithmetic (fp32 floor(|y| + U)), not offered.
constexpr uint8_t kSrRoundings = kConvertRoundings | rounding_bit(Rounding::stochastic);

constexpr Recipe mx_recipe(std::string_view id, bool is_default, std::string_view summary,
                           std::string_view spec_ref, Rounding element_rounding,
                           uint8_t allowed_roundings, NibbleOrder nibble_order, MxParams mx,
                           int bits_version) {
  return Recipe{
      .id = id,
      .format = Format::mxfp4,
      .is_default = is_default,
      .summary = summary,
      .spec_ref = spec_ref,
      .element_rounding = element_rounding,
      .allowed_roundings = allowed_roundings,
      .default_tail = TailPolicy::pad,  // §3 proposal: zero-pad, padded codes 0x0
      .nibble_order = nibble_order,
      .scale_bit_order = ScaleBitOrder::lsb_first,  // HiF4 only; unused
      .fake_quant_only = false,
      .bf16_input_only = false,
      .mx = mx,
      .bits_version = bits_version,
  };
}

constexpr std::array<Recipe, 6> kMxfp4Recipes = {
    mx_recipe("mxfp4.ocp", true,
              "OCP MX v1.0 §6.3: X = 2^(floor(log2 amax) - 2) from the exponent bits, E2M1 RNE, "
              "saturate",
              "docs/spec/mxfp4.md §4.1, §5.1", Rounding::rne, kSrRoundings, NibbleOrder::low_first,
              MxParams{.scale_rule = MxScaleRule::ocp_floor,
                       .scale_range = MxScaleRange::clamp,
                       .nan_propagating_amax = true,
                       .inf_amax = MxInfAmax::nan_block,
                       .element_select = MxElementSelect::convert,
                       .nan_block_codes = MxNanBlockCodes::torchao_cuda},
              /*bits_version=*/2),
    mx_recipe("mxfp4.rceil", false,
              "NVIDIA (cuBLAS/cuDNN/TE/CUTLASS/torchao RCEIL): scale = cvt.rp.satfinite.ue8m0"
              "(fp32(amax * fp32(1/6))), E2M1 RNE",
              "docs/spec/mxfp4.md §4.5, §5.1", Rounding::rne, kSrRoundings, NibbleOrder::low_first,
              MxParams{.scale_rule = MxScaleRule::rceil,
                       .scale_range = MxScaleRange::clamp,
                       .nan_propagating_amax = true,
                       .inf_amax = MxInfAmax::scale_rule,
                       .element_select = MxElementSelect::convert},
              /*bits_version=*/1),
    mx_recipe("mxfp4.ceil", false,
              "torchao ScaleCalculationMode.CEIL: X = 2^(ceil(log2 amax) - 2), E2M1 RNE",
              "docs/spec/mxfp4.md §4.3, §5.1", Rounding::rne, kConvertRoundings, NibbleOrder::low_first,
              MxParams{.scale_rule = MxScaleRule::ceil,
                       .scale_range = MxScaleRange::clamp,
                       .nan_propagating_amax = true,
                       .inf_amax = MxInfAmax::nan_block,
                       .element_select = MxElementSelect::convert,
                       .nan_block_codes = MxNanBlockCodes::torchao_cuda},
              /*bits_version=*/2),
    mx_recipe("mxfp4.even", false,
              "torchao ScaleCalculationMode.EVEN: amax rounded half-up to 1 mantissa bit (NaN "
              "block when that overflows), then the OCP floor, E2M1 RNE",
              "docs/spec/mxfp4.md §4.4, §5.1", Rounding::rne, kConvertRoundings, NibbleOrder::low_first,
              MxParams{.scale_rule = MxScaleRule::even,
                       .scale_range = MxScaleRange::clamp,
                       .nan_propagating_amax = true,
                       .inf_amax = MxInfAmax::nan_block,
                       .element_select = MxElementSelect::convert,
                       .nan_block_codes = MxNanBlockCodes::torchao_cuda},
              /*bits_version=*/2),
    mx_recipe("mxfp4.microxcaling", false,
              "microxcaling python default: floor(fp32 log2(amax)) - 2 (the log2f quirk), "
              "round half away from zero",
              "docs/spec/mxfp4.md §4.2, §4.6, §5.2", Rounding::rha, kConvertRoundings,
              NibbleOrder::low_first,
              MxParams{.scale_rule = MxScaleRule::log2f_floor,
                       .scale_range = MxScaleRange::clamp,
                       .nan_propagating_amax = true,
                       .inf_amax = MxInfAmax::nan_block,
                       .element_select = MxElementSelect::convert,
                       .zero_sign = MxZeroSign::torch_sign},
              /*bits_version=*/2),
    mx_recipe("mxfp4.ggml", false,
              "ggml block_mxfp4: floorf(log2f(amax)) - 2 with x86-64 uint8 wrap, NaN-skipping "
              "amax, argmin codes (ties toward zero), split-half nibbles",
              "docs/spec/mxfp4.md §4.2, §5.4, §6.1", Rounding::ties_to_zero,
              rounding_bit(Rounding::ties_to_zero), NibbleOrder::split_half,
              MxParams{.scale_rule = MxScaleRule::log2f_floor,
                       .scale_range = MxScaleRange::x86_uint8_wrap,
                       .nan_propagating_amax = false,
                       .inf_amax = MxInfAmax::scale_rule,
                       .element_select = MxElementSelect::ggml_argmin},
              /*bits_version=*/1),
};

}  // namespace

std::span<const Recipe> mxfp4_recipes() { return kMxfp4Recipes; }

}  // namespace fp4emu
