// Recipe table of HiF4: the variant map of docs/spec/hif4.md §6.0 under the canonical
// ids of docs/architecture.md §10. Each recipe is data; src/quant/reference/hif4.cpp reads it.
#include <array>

#include "fp4emu/quant/recipe.hpp"

namespace fp4emu {
namespace {

// V14 family and V12: the own rounding is rha, computed as the literal
// floor(fp32(4t + 1/2)) of docs/spec/hif4.md §6.1 step 7. rne, rtz and tiesToZero are
// research overrides that round 4t exactly on the q/4 grid (no source uses them);
// so is stochastic, fp4emu's own definition for HiF4 (no HiF4 library has SR):
// the E2M1 cvt.rs integer rule on the q/4 grid, one random byte per element.
constexpr uint8_t kV14Roundings = rounding_bit(Rounding::rha) | rounding_bit(Rounding::rne) |
                                  rounding_bit(Rounding::rtz) | rounding_bit(Rounding::ties_to_zero) |
                                  rounding_bit(Rounding::stochastic);
// A6 (docs/spec/hif4.md §6.5 step 9, §10.3): the kernel and golden use RNE (ROUND_R); the
// document says ROUND_A (half away). Both are offered.
constexpr uint8_t kA6Roundings = rounding_bit(Rounding::rne) | rounding_bit(Rounding::rha);

constexpr std::array<Recipe, 7> kHif4Recipes{{
    {
        .id = "hif4.v14",
        .format = Format::hif4,
        .is_default = true,
        .summary = "official HiFloat4 V14 (torch/CUDA/AscendC): fp32 products, bf16 scale clamped to "
                   "[2^-48, 49152], E6M2 RNE, bf16 reciprocal, elements floor(4t+1/2); NaN -> NaN block, "
                   "Inf saturates",
        .spec_ref = "docs/spec/hif4.md §6.1",
        .element_rounding = Rounding::rha,
        .allowed_roundings = kV14Roundings,
        .default_tail = TailPolicy::pad,
        .nibble_order = NibbleOrder::low_first,
        .scale_bit_order = ScaleBitOrder::lsb_first,
        .fake_quant_only = false,
        .bf16_input_only = false,
        .hif4 = {.arithmetic = Hif4Arithmetic::fp32,
                 .scale_range = Hif4ScaleRange::clamp,
                 .bf16_element_ratio = false,
                 .non_finite = NonFinitePolicy::torch,
                 .zero_sign = ZeroSign::sign_bit},
    },
    {
        .id = "hif4.v14_f64",
        .format = Format::hif4,
        .is_default = false,
        .summary = "V14-numpy (To_HiFX): V14 with exact float64 products (differs on fp32 inputs, EX7); "
                   "-0.0 gives +0",
        .spec_ref = "docs/spec/hif4.md §6.2",
        .element_rounding = Rounding::rha,
        .allowed_roundings = kV14Roundings,
        .default_tail = TailPolicy::pad,
        .nibble_order = NibbleOrder::low_first,
        .scale_bit_order = ScaleBitOrder::lsb_first,
        .fake_quant_only = false,
        .bf16_input_only = false,
        .hif4 = {.arithmetic = Hif4Arithmetic::exact,
                 .scale_range = Hif4ScaleRange::clamp,
                 .bf16_element_ratio = false,
                 .non_finite = NonFinitePolicy::torch,
                 .zero_sign = ZeroSign::less_than_zero},
    },
    {
        .id = "hif4.v14_noclip",
        .format = Format::hif4,
        .is_default = false,
        .summary = "known-divergent NPU torch V14 without the scale clamp: all-zero blocks and scales "
                   "outside E6M2 [2^-48, 49152] give a NaN block (0xFF), the packed form cannot carry them",
        .spec_ref = "docs/spec/hif4.md §6.3",
        .element_rounding = Rounding::rha,
        .allowed_roundings = kV14Roundings,
        .default_tail = TailPolicy::pad,
        .nibble_order = NibbleOrder::low_first,
        .scale_bit_order = ScaleBitOrder::lsb_first,
        .fake_quant_only = false,
        .bf16_input_only = false,
        .hif4 = {.arithmetic = Hif4Arithmetic::fp32,
                 .scale_range = Hif4ScaleRange::unclamped,
                 .bf16_element_ratio = false,
                 .non_finite = NonFinitePolicy::torch,
                 .zero_sign = ZeroSign::sign_bit},
    },
    {
        .id = "hif4.v14_special",
        .format = Format::hif4,
        .is_default = false,
        .summary = "ddddwee1 mirror: V14 without clamp, zero block -> 2^-48, NaN/Inf count as 0 (code 0) "
                   "and fake-quant passes them through; scales outside E6M2 range give a NaN block",
        .spec_ref = "docs/spec/hif4.md §6.3",
        .element_rounding = Rounding::rha,
        .allowed_roundings = kV14Roundings,
        .default_tail = TailPolicy::pad,
        .nibble_order = NibbleOrder::low_first,
        .scale_bit_order = ScaleBitOrder::lsb_first,
        .fake_quant_only = false,
        .bf16_input_only = false,
        .hif4 = {.arithmetic = Hif4Arithmetic::fp32,
                 .scale_range = Hif4ScaleRange::unclamped_zero_min,
                 .bf16_element_ratio = false,
                 .non_finite = NonFinitePolicy::passthrough,
                 .zero_sign = ZeroSign::sign_bit},
    },
    {
        .id = "hif4.amct",
        .format = Format::hif4,
        .is_default = false,
        .summary = "CANN AMCT HiF4-cast: V14 with the element ratio rounded to bf16, NaN/Inf -> NaN block, "
                   "sign from x<0, MSB-first scale bits, length must be a multiple of 64",
        .spec_ref = "docs/spec/hif4.md §6.4",
        .element_rounding = Rounding::rha,
        .allowed_roundings = kV14Roundings,
        .default_tail = TailPolicy::error,
        .nibble_order = NibbleOrder::low_first,
        .scale_bit_order = ScaleBitOrder::msb_first,
        .fake_quant_only = false,
        .bf16_input_only = false,
        .hif4 = {.arithmetic = Hif4Arithmetic::fp32,
                 .scale_range = Hif4ScaleRange::clamp,
                 .bf16_element_ratio = true,
                 .non_finite = NonFinitePolicy::poison,
                 .zero_sign = ZeroSign::less_than_zero},
    },
    {
        .id = "hif4.a6",
        .format = Format::hif4,
        .is_default = false,
        .summary = "Ascend A6 TQUANT (pto-isa): bf16 input, every step rounded to bf16, saturating E6M2, "
                   "RNE elements (ties to even code), NaN/Inf -> NaN block; E6M2 0x00 = 2^-48 (golden: 0)",
        .spec_ref = "docs/spec/hif4.md §6.5",
        .element_rounding = Rounding::rne,
        .allowed_roundings = kA6Roundings,
        .default_tail = TailPolicy::error,
        .nibble_order = NibbleOrder::low_first,
        .scale_bit_order = ScaleBitOrder::lsb_first,
        .fake_quant_only = false,
        .bf16_input_only = true,
        .hif4 = {.arithmetic = Hif4Arithmetic::bf16,
                 .scale_range = Hif4ScaleRange::saturate_e6m2,
                 .bf16_element_ratio = false,
                 .non_finite = NonFinitePolicy::poison,
                 .zero_sign = ZeroSign::less_than_zero},  // applied to y = bf16(x * scale)
        .bits_version = 2,  // 2: sign from the product y, not x (CHANGELOG.md)
    },
    {
        .id = "hif4.v12_pow2",
        .format = Format::hif4,
        .is_default = false,
        .summary = "legacy V12: power-of-two level-1 scale 2^B from exact floor(log2), B in [-46, 16] "
                   "stored as byte B+48 (not E6M2), elements floor(4t+1/2)",
        .spec_ref = "docs/spec/hif4.md §6.6",
        .element_rounding = Rounding::rha,
        .allowed_roundings = kV14Roundings,
        .default_tail = TailPolicy::pad,
        .nibble_order = NibbleOrder::low_first,
        .scale_bit_order = ScaleBitOrder::lsb_first,
        .fake_quant_only = false,
        .bf16_input_only = false,
        .hif4 = {.arithmetic = Hif4Arithmetic::pow2_v12,
                 .scale_range = Hif4ScaleRange::clamp,
                 .bf16_element_ratio = false,
                 .non_finite = NonFinitePolicy::torch,
                 .zero_sign = ZeroSign::less_than_zero},
    },
}};

}  // namespace

std::span<const Recipe> hif4_recipes() { return kHif4Recipes; }

}  // namespace fp4emu
