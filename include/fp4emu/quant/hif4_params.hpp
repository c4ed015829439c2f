#pragma once
// Recipe parameters of HiF4 (hif4.md §6). Data only: the reference quantizer
// (src/quant/reference/hif4.cpp) reads these; no recipe has its own code path
// beyond what these fields select.
#include <cstdint>

namespace fp4emu {

// Arithmetic the scale / bit / element steps are carried out in.
enum class Hif4Arithmetic : uint8_t {
  fp32,       // V14 family: fp32 products, bf16 scale, fp32 ratio (§6.1)
  exact,      // V14-numpy: float64 products, exact for fp32 inputs (§6.2)
  bf16,       // A6-HW: every intermediate rounded to bf16 (§6.5)
  pow2_v12,   // V12: power-of-two level-1 scale, no E6M2 (§6.6)
};

// Range handling of the level-1 scale before E6M2 rounding.
enum class Hif4ScaleRange : uint8_t {
  clamp,                // clamp to [2^-48, 49152] (V14, AMCT)
  unclamped,            // no clamp: zero blocks and out-of-range scales give a NaN block (V14-noclip)
  unclamped_zero_min,   // no clamp, but a zero block gets 2^-48 (V14-special)
  saturate_e6m2,        // A6: saturating E6M2 conversion, exponent clamped to [-48, 15]
};

// Non-finite inputs (hif4.md §6.1 "Special inputs", §6.3, §6.4).
enum class NonFinitePolicy : uint8_t {
  torch,        // NaN anywhere -> NaN block (scale 0xFF); +-Inf acts as a huge value (saturates)
  poison,       // NaN or Inf anywhere -> NaN block (0xFF); codes computed with those lanes set to 0
  passthrough,  // non-finite lanes count as 0 for the scale; fake-quant copies them to the output
};

// Sign of the code for -0.0 inputs (hif4.md §10.6).
enum class ZeroSign : uint8_t {
  sign_bit,       // sign from the sign bit: -0.0 -> 0x8 (CUDA kernel)
  less_than_zero, // sign from x < 0: -0.0 -> 0x0 (NumPy, AMCT, A6 golden)
};

struct Hif4Params {
  Hif4Arithmetic arithmetic = Hif4Arithmetic::fp32;
  Hif4ScaleRange scale_range = Hif4ScaleRange::clamp;
  bool bf16_element_ratio = false;   // AMCT: t = bf16(a * r * 2^-(b+c)) before rounding
  NonFinitePolicy non_finite = NonFinitePolicy::torch;
  ZeroSign zero_sign = ZeroSign::sign_bit;
};

}  // namespace fp4emu
