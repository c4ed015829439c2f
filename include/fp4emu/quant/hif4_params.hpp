#pragma once
// Recipe parameters of HiF4 (docs/spec/hif4.md §6). Data only: the reference quantizer
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
  // Clamp s0 to [2^-48, 49152] before E6M2 rounding (V14, AMCT). For V12:
  // the block exponent B is clamped to [-46, 16] (§6.6 step 3).
  clamp,
  // No clamp (V14-noclip): a zero block, or an s0 whose E6M2 rounding lies
  // outside [2^-48, 49152], has no HiF4 scale; the block is NaN (scale 0xFF).
  unclamped,
  // No clamp, but a zero block gets 2^-48 (V14-special). Out-of-range scales
  // give a NaN block as for `unclamped`.
  unclamped_zero_min,
  // A6: saturating bf16->E6M2 conversion (0 and tiny -> 0x00, overflow ->
  // 0xFE). Gives the same codes as `clamp`; kept apart because the source
  // describes it as a conversion property, not a clamp.
  saturate_e6m2,
};

// Non-finite inputs (docs/spec/hif4.md §6.1 "Special inputs", §6.3, §6.4, §10.5).
enum class NonFinitePolicy : uint8_t {
  // torch V14: NaN anywhere -> NaN block (scale 0xFF), its L2/L3 bits and
  // codes computed with the NaN lanes as +0; +-Inf acts as a huge value (the
  // scale clamps, the Inf lane saturates to +-7s).
  torch,
  // AMCT, A6: NaN or Inf anywhere -> NaN block (0xFF); bits and codes computed
  // with those lanes as +0.
  poison,
  // V14-special: non-finite lanes count as +0 for the scale and get code 0x0;
  // fake-quant copies them to the output unchanged.
  passthrough,
};

// Sign of a zero code (docs/spec/hif4.md §10.6).
enum class ZeroSign : uint8_t {
  sign_bit,       // sign from the sign bit: -0.0 -> 0x8 (CUDA kernel)
  less_than_zero, // sign from v < 0: -0.0 -> 0x0 (NumPy, AMCT: v = x; A6 golden:
                  // v = bf16(x * scale), so an underflowed product also gives 0x0)
};

struct Hif4Params {
  Hif4Arithmetic arithmetic = Hif4Arithmetic::fp32;
  Hif4ScaleRange scale_range = Hif4ScaleRange::clamp;
  bool bf16_element_ratio = false;   // AMCT: t = bf16(a * r * 2^-(b+c)) before rounding
  NonFinitePolicy non_finite = NonFinitePolicy::torch;
  ZeroSign zero_sign = ZeroSign::sign_bit;
};

}  // namespace fp4emu
