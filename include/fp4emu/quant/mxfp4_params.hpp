#pragma once
// Recipe parameters of MXFP4 (mxfp4.md §4, §5). Data only.
#include <cstdint>

namespace fp4emu {

enum class MxScaleRule : uint8_t {
  ocp_floor,    // MX_SCALE_OCP_FLOOR: flog2(amax) - 2 from the exponent bits (§4.1)
  log2f_floor,  // MX_SCALE_LOG2F_FLOOR: floor of a binary32 log2 (§4.2)
  ceil,         // MX_SCALE_CEIL (torchao) (§4.3)
  even,         // MX_SCALE_EVEN (torchao) (§4.4)
  rceil,        // MX_SCALE_RCEIL: RP of fp32(amax * fp32(1/6)), satfinite (§4.5)
};

// How an element code is chosen once the scale is known.
enum class MxElementSelect : uint8_t {
  convert,      // E2M1 conversion of y = V * 2^-s with the element rounding
  ggml_argmin,  // ggml: argmin |kv*d - x| over the 16 codes, first index wins (§5.4)
};

struct MxParams {
  MxScaleRule scale_rule = MxScaleRule::ocp_floor;
  bool lower_clamp = true;            // clamp the shared exponent at -127 (false: ggml's uint8 wrap)
  bool nan_propagating_amax = true;   // torch.amax semantics; false: ggml's `amax < |v|` loop
  MxElementSelect element_select = MxElementSelect::convert;
};

}  // namespace fp4emu
