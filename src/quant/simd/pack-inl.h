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

// A block's codes held in vectors (code_vecs[v] lane l is element
// v·Lanes + l, an int32 0..15) -> out[0..kBlock/2), with no trip through
// memory: a byte store of each vector read back wider by PackNibbles stalls
// store forwarding. Position-local orders pair adjacent lanes as one 64-bit
// lane (code | next << 32): its low byte, after a shift and an or, is the
// packed byte; split_half pairs lane l of vector v with that of v + kBlock/2/Lanes.
template <int kBlock, class DI>
HWY_INLINE void PackCodeVectors(DI di, NibbleOrder order, const hn::Vec<DI>* HWY_RESTRICT code_vecs,
                                uint8_t* HWY_RESTRICT out) {
  [[maybe_unused]] constexpr int kHalf = kBlock / 2;  // unused by the scalar target
  const int n = static_cast<int>(hn::Lanes(di));
  const hn::Rebind<uint8_t, DI> du8;
#if HWY_TARGET == HWY_SCALAR  // one lane: through bytes
  (void)n;
  (void)du8;
  uint8_t codes[kBlock];
  for (int i = 0; i < kBlock; ++i) codes[i] = static_cast<uint8_t>(hn::GetLane(code_vecs[i]));
  PackNibbles<kBlock>(order, codes, out);
#else
  {
    if (order == NibbleOrder::split_half) {
      for (int i = 0; i < kHalf; i += n)
        hn::StoreU(hn::DemoteTo(du8, hn::Or(code_vecs[i / n], hn::ShiftLeft<4>(code_vecs[(kHalf + i) / n]))), du8,
                   out + i);
      return;
    }
    const hn::Repartition<uint64_t, DI> d64;
    for (int i = 0; i < kBlock; i += 2 * n) {
      hn::Vec<DI> pairs[2];
      for (int h = 0; h < 2; ++h) {
        const auto w = hn::BitCast(d64, code_vecs[i / n + h]);
        pairs[h] = hn::BitCast(di, order == NibbleOrder::low_first ? hn::Or(w, hn::ShiftRight<28>(w))
                                                                   : hn::Or(hn::ShiftLeft<4>(w), hn::ShiftRight<32>(w)));
      }
      hn::StoreU(hn::DemoteTo(du8, hn::ConcatEven(di, pairs[1], pairs[0])), du8, out + i / 2);
    }
  }
#endif
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
