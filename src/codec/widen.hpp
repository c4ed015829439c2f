#pragma once
// Exact widening of 16-bit float patterns to fp32 (NaN payloads and signed
// zeros kept): the readers (src/io) and the view inputs (src/quant) share it.
#include <bit>
#include <cstdint>

namespace fp4emu {

inline float bf16_bits_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// IEEE binary16 -> binary32. Every f16 value (subnormals included) is a normal
// or zero f32; NaN payloads shift up by 13 bits unchanged.
inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // Inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // normal
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: value = mant * 2^-24. Shift the leading one up to the
    // implicit-bit position (0x400); after k shifts the value is
    // (mant / 1024) * 2^(-14 - k), a normal f32 with biased exponent 113 - k.
    uint32_t k = 0;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      ++k;
    }
    bits = sign | ((113u - k) << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace fp4emu
