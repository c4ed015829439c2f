#pragma once
// Recipe parameters of MXFP4 (docs/spec/mxfp4.md §4, §5). Data only: the reference
// quantizer (src/quant/reference/mxfp4.cpp) reads these fields; no recipe has
// a code path of its own beyond what they select.
#include <cstdint>

namespace fp4emu {

enum class MxScaleRule : uint8_t {
  ocp_floor,    // MX_SCALE_OCP_FLOOR: flog2(amax) - 2 from the exponent bits (§4.1)
  log2f_floor,  // MX_SCALE_LOG2F_FLOOR: floor of a correctly rounded binary32 log2 (§4.2)
  ceil,         // MX_SCALE_CEIL (torchao) (§4.3)
  even,         // MX_SCALE_EVEN (torchao) (§4.4)
  rceil,        // MX_SCALE_RCEIL: RP of fp32(amax * fp32(1/6)), satfinite (§4.5)
};

// What happens to a shared exponent s below the E8M0 range (s < -127).
enum class MxScaleRange : uint8_t {
  clamp,           // s = max(s, -127): code 0x00 (OCP, torchao, microxcaling, NVIDIA)
  x86_uint8_wrap,  // ggml: amax > 0 ? (uint8_t)(s + 127) : 0, where the C cast (UB for
                   // negatives) is what gcc/clang emit on x86-64: cvttss2si to int32
                   // (Inf, NaN, out of range -> INT32_MIN) and keep the low byte.
                   // -5 -> 0xFB, -1 -> 0xFF, +Inf -> 0x00 (§4.2, EX-M4)
};

// Infinite block amax.
enum class MxInfAmax : uint8_t {
  nan_block,   // scale 0xFF; codes as MxNanBlockCodes says
  scale_rule,  // Inf is an ordinary input of the scale rule: RCEIL's satfinite gives
               // 0xFE and the Inf lanes convert to +-6; ggml's uint8 wrap gives 0x00
};

// The element codes of a NaN block (scale 0xFF), docs/formats.md "MXFP4".
enum class MxNanBlockCodes : uint8_t {
  // Convention where the library defines none: the codes the block would get
  // with its NaN (and poisoning Inf) lanes set to +0.
  zero_lanes,
  // torchao to_mx on CUDA: every element is data * NaN, which CUDA returns as
  // the canonical NaN 0x7FFFFFFF; f32_to_f4_unpacked's bit arithmetic turns
  // that into code 0x4 in every lane.
  torchao_cuda,
};

// The sign of a zero element code.
enum class MxZeroSign : uint8_t {
  sign_bit,    // E2M1 conversion of y keeps its sign: -0 and negative underflow -> 0x8
  torch_sign,  // microxcaling: sign from torch.sign(fp32(V / X)), which is +0 for
               // a zero quotient (-0 inputs, or |V / X| <= 2^-150) -> 0x0: PyTorch's
               // sign is (0 < a) - is_negative(a) with is_negative(a) = a < 0
               // (c10 TypeSafeSignMath.h), on CPU and CUDA alike
};

// How an element code is chosen once the scale is known.
enum class MxElementSelect : uint8_t {
  convert,      // E2M1 conversion of y = V * 2^-s with the element rounding (§5);
                // NaN -> 0x7 (CUDA oracle, §1.3 proposal)
  ggml_argmin,  // ggml: argmin_i fp32 |kv_i*d - x| over the 16 codes, first index wins,
                // d = 2^(c-128) (§5.4); NaN and Inf -> code 0
};

struct MxParams {
  MxScaleRule scale_rule = MxScaleRule::ocp_floor;
  MxScaleRange scale_range = MxScaleRange::clamp;
  // true: torch.amax semantics, a NaN anywhere makes amax NaN -> scale 0xFF, codes
  // as nan_block_codes says. false: ggml's `if (amax < fabsf(v))` loop,
  // which never takes a NaN.
  bool nan_propagating_amax = true;
  MxInfAmax inf_amax = MxInfAmax::nan_block;
  MxElementSelect element_select = MxElementSelect::convert;
  MxNanBlockCodes nan_block_codes = MxNanBlockCodes::zero_lanes;
  MxZeroSign zero_sign = MxZeroSign::sign_bit;
};

}  // namespace fp4emu
