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

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

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

// ---- Codes held in vectors -> packed bytes -------------------------------------
// Each code vector's int32 lanes hold codes 0..15. The bytes are assembled in
// registers and stored whole (a byte store read back wider stalls store
// forwarding): K code vectors are first merged into the bytes of one int32 lane
// each (vector j into byte j), the nibbles paired with one shift and one or
// over all K vectors, the paired lanes narrowed to K-byte units (TruncateTo)
// and the units transposed back into element order with one byte shuffle of at
// most 16 bytes (TableLookupBytes), then stored as one vector.

template <int K>
using UintOfBytes = std::conditional_t<K == 1, uint8_t, std::conditional_t<K == 2, uint16_t, uint32_t>>;

// c[0] | c[1] << 8 | ... | c[K-1] << 8(K-1): vector j's codes in byte j of each lane.
template <int K, class DU>
HWY_INLINE hn::Vec<DU> MergeCodeBytes(DU du, const hn::Vec<hn::RebindToSigned<DU>>* HWY_RESTRICT c) {
  static_assert(K == 1 || K == 2 || K == 4);
  auto s = hn::BitCast(du, c[0]);
  if constexpr (K >= 2) s = hn::Or(s, hn::ShiftLeft<8>(hn::BitCast(du, c[1])));
  if constexpr (K == 4) {
    s = hn::Or(s, hn::ShiftLeft<16>(hn::BitCast(du, c[2])));
    s = hn::Or(s, hn::ShiftLeft<24>(hn::BitCast(du, c[3])));
  }
  return s;
}

// units: lanes of K bytes, byte j of lane i being packed byte j * Lanes + i;
// stores the K * Lanes (<= 16) bytes in order.
template <int K, class DK>
HWY_INLINE void StoreTransposedUnits(DK dk, hn::Vec<DK> units, uint8_t* HWY_RESTRICT out) {
  constexpr int kUnits = static_cast<int>(hn::MaxLanes(dk));
  static_assert(K * kUnits <= 16, "TableLookupBytes shuffles within 16 bytes");
  if constexpr (K == 1) {
    hn::StoreU(units, dk, out);
  } else {
    const hn::Repartition<uint8_t, DK> d8;
    alignas(16) static constexpr auto kFrom = [] {
      std::array<uint8_t, K * kUnits> from{};
      for (int i = 0; i < kUnits; ++i)
        for (int j = 0; j < K; ++j) from[static_cast<size_t>(j * kUnits + i)] = static_cast<uint8_t>(i * K + j);
      return from;
    }();
    hn::StoreU(hn::TableLookupBytes(hn::BitCast(d8, units), hn::Load(d8, kFrom.data())), d8, out);
  }
}

#if HWY_TARGET != HWY_SCALAR  // one lane: PackCodeVectors goes through bytes
// split_half, one block in kBlock / Lanes vectors: packed byte i is
// code i | code (i + kBlock/2) << 4.
template <int kBlock, class DI>
HWY_INLINE void PackSplitHalf(DI di, const hn::Vec<DI>* HWY_RESTRICT c, uint8_t* HWY_RESTRICT out) {
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(di));
  constexpr int kVectors = kBlock / kLanes;
  const hn::RebindToUnsigned<DI> du;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // One vector of 16: its codes narrowed to bytes by one instruction (vpmovdb),
  // which this Highway's TruncateTo does with four shuffles; then the halves
  // paired within 16 bytes. nvfp4.ggml quantize, AVX-512, one thread: 2.68 ->
  // 2.79 G values/s.
  if constexpr (kVectors == 1 && kLanes == 16) {
    const hn::Full128<uint8_t> d16;
    const hn::Vec128<uint8_t> bytes{_mm512_cvtepi32_epi8(c[0].raw)};
    const hn::RepartitionToWide<decltype(d16)> dw;
    const auto high = hn::BitCast(d16, hn::ShiftLeft<4>(hn::BitCast(dw, hn::ShiftRightBytes<8>(d16, bytes))));
    const hn::Half<decltype(d16)> d8;
    hn::StoreU(hn::LowerHalf(d8, hn::Or(bytes, high)), d8, out);
    return;
  }
#endif
  if constexpr (kVectors == 1) {  // the two halves of one vector
    const hn::Half<decltype(du)> dh;
    const auto v = hn::BitCast(du, c[0]);
    const auto q = hn::Or(hn::LowerHalf(dh, v), hn::ShiftLeft<4>(hn::UpperHalf(dh, v)));
    const hn::Rebind<uint8_t, decltype(dh)> d8;
    hn::StoreU(hn::TruncateTo(d8, q), d8, out);
  } else {
    constexpr int kHalf = kVectors / 2;
    constexpr int K = std::min({4, 16 / kLanes, kHalf});
    hn::Vec<DI> q[kHalf];  // lane l of q[v]: packed byte v * kLanes + l
    for (int v = 0; v < kHalf; ++v) q[v] = hn::Or(c[v], hn::ShiftLeft<4>(c[v + kHalf]));
    for (int v = 0; v < kHalf; v += K) {
      const auto s = MergeCodeBytes<K>(du, q + v);
      if constexpr (K == 4) {
        StoreTransposedUnits<K>(du, s, out + v * kLanes);
      } else {
        const hn::Rebind<UintOfBytes<K>, decltype(du)> dk;
        StoreTransposedUnits<K>(dk, hn::TruncateTo(dk, s), out + v * kLanes);
      }
    }
  }
}

#endif

// kBlocks blocks' codes held in vectors (code_vecs[v] lane l is element
// v·Lanes + l, an int32 0..15) -> out[0..kBlocks·kBlock/2). Position-local
// orders pair adjacent lanes, as one 64-bit lane (code | next << 32) whose
// low 32 bits, after a shift and an or, hold the packed bytes; split_half
// pairs each block's halves.
template <int kBlock, int kBlocks = 1, class DI>
HWY_INLINE void PackCodeVectors(DI di, NibbleOrder order, const hn::Vec<DI>* HWY_RESTRICT code_vecs,
                                uint8_t* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR  // one lane: through bytes
  uint8_t codes[kBlock];
  for (int b = 0; b < kBlocks; ++b) {
    for (int i = 0; i < kBlock; ++i) codes[i] = static_cast<uint8_t>(hn::GetLane(code_vecs[b * kBlock + i]));
    PackNibbles<kBlock>(order, codes, out + b * (kBlock / 2));
  }
  (void)di;
#else
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(di));
  static_assert(kBlock % kLanes == 0, "a block is whole vectors");
  if (order == NibbleOrder::split_half) {
    for (int b = 0; b < kBlocks; ++b)
      PackSplitHalf<kBlock>(di, code_vecs + b * (kBlock / kLanes), out + b * (kBlock / 2));
    return;
  }
  constexpr int kVectors = kBlocks * kBlock / kLanes;
  constexpr int K = std::min({4, 32 / kLanes, kVectors});  // K * Lanes / 2 <= 16 bytes per store
  const hn::RebindToUnsigned<DI> du;
  const hn::Repartition<uint64_t, decltype(du)> d64;
  const hn::Rebind<UintOfBytes<K>, decltype(d64)> dk;
  for (int v = 0; v < kVectors; v += K) {
    const auto w = hn::BitCast(d64, MergeCodeBytes<K>(du, code_vecs + v));
    const auto pairs = order == NibbleOrder::low_first ? hn::Or(w, hn::ShiftRight<28>(w))
                                                       : hn::Or(hn::ShiftLeft<4>(w), hn::ShiftRight<32>(w));
    StoreTransposedUnits<K>(dk, hn::TruncateTo(dk, pairs), out + v * (kLanes / 2));
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
