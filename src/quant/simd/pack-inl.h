// Per-target nibble packing of one block's element codes (one code 0..15 per
// byte) into the packed row, and back, for the three nibble orders of
// recipe.hpp. The shared nibble_slot (include/fp4emu/quant/nibbles.hpp) is
// the definition; the driver tests compare packed bytes with the reference.
#if defined(FP4EMU_SRC_QUANT_SIMD_PACK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4EMU_SRC_QUANT_SIMD_PACK_INL_H_
#undef FP4EMU_SRC_QUANT_SIMD_PACK_INL_H_
#else
#define FP4EMU_SRC_QUANT_SIMD_PACK_INL_H_
#endif

#include <cstdint>

#include "fp4emu/quant/recipe.hpp"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace fp4emu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// codes[0..kBlock) -> out[0..kBlock/2).
template <int kBlock>
HWY_INLINE void PackNibbles(NibbleOrder order, const uint8_t* HWY_RESTRICT codes, uint8_t* HWY_RESTRICT out) {
  constexpr int kHalf = kBlock / 2;
  const hn::CappedTag<uint8_t, kHalf> d8;
  const int n = static_cast<int>(hn::Lanes(d8));
  for (int i = 0; i < kHalf; i += n) {
    hn::Vec<decltype(d8)> low, high;
    switch (order) {
      case NibbleOrder::low_first: hn::LoadInterleaved2(d8, codes + 2 * i, low, high); break;
      case NibbleOrder::high_first: hn::LoadInterleaved2(d8, codes + 2 * i, high, low); break;
      case NibbleOrder::split_half:
        low = hn::LoadU(d8, codes + i);
        high = hn::LoadU(d8, codes + kHalf + i);
        break;
    }
    hn::StoreU(hn::Or(low, hn::ShiftLeft<4>(high)), d8, out + i);
  }
}

// in[0..kBlock/2) -> codes[0..kBlock).
template <int kBlock>
HWY_INLINE void UnpackNibbles(NibbleOrder order, const uint8_t* HWY_RESTRICT in, uint8_t* HWY_RESTRICT codes) {
  constexpr int kHalf = kBlock / 2;
  const hn::CappedTag<uint8_t, kHalf> d8;
  const int n = static_cast<int>(hn::Lanes(d8));
  for (int i = 0; i < kHalf; i += n) {
    const auto bytes = hn::LoadU(d8, in + i);
    const auto low = hn::And(bytes, hn::Set(d8, uint8_t{0x0F}));
    const auto high = hn::ShiftRight<4>(bytes);
    switch (order) {
      case NibbleOrder::low_first: hn::StoreInterleaved2(low, high, d8, codes + 2 * i); break;
      case NibbleOrder::high_first: hn::StoreInterleaved2(high, low, d8, codes + 2 * i); break;
      case NibbleOrder::split_half:
        hn::StoreU(low, d8, codes + i);
        hn::StoreU(high, d8, codes + kHalf + i);
        break;
    }
  }
}

}  // namespace fp4emu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FP4EMU_SRC_QUANT_SIMD_PACK_INL_H_
