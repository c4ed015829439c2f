#pragma once
// Where each 4-bit code sits in a packed row (packed_tensor.hpp, NibbleOrder).
// The one definition of the nibble orders: the driver, the golden writer and
// the GEMM operand reader all use it (the SIMD packer mirrors it and is tested
// against it).
#include <cstdint>

#include "fp4emu/quant/recipe.hpp"

namespace fp4emu {

struct NibbleSlot {
  int64_t byte;  // byte offset in the row
  bool high;     // bits 7..4
};

// Element j of block b of a row.
constexpr NibbleSlot nibble_slot(NibbleOrder order, int block, int64_t b, int j) {
  const int64_t p = b * block + j;
  switch (order) {
    case NibbleOrder::low_first: return {p / 2, (p & 1) != 0};
    case NibbleOrder::high_first: return {p / 2, (p & 1) == 0};
    case NibbleOrder::split_half:  // ggml: byte j of a block holds elements j and j + block/2
      return {b * (block / 2) + j % (block / 2), j >= block / 2};
  }
  return {p / 2, (p & 1) != 0};
}

// The inverse: block b and element j held by a nibble.
constexpr void nibble_element(NibbleOrder order, int block, int64_t byte, bool high, int64_t* b, int* j) {
  if (order == NibbleOrder::split_half) {
    *b = byte / (block / 2);
    *j = static_cast<int>(byte % (block / 2) + (high ? block / 2 : 0));
    return;
  }
  const int64_t p = 2 * byte + ((high == (order == NibbleOrder::low_first)) ? 1 : 0);
  *b = p / block;
  *j = static_cast<int>(p % block);
}

// All padded_len codes of a packed row, one code per byte.
inline void unpack_row(const uint8_t* bytes, NibbleOrder order, int block, int64_t padded_len, uint8_t* codes) {
  if (order != NibbleOrder::split_half) {  // nibble_slot's position-local orders, a byte at a time
    const int first = order == NibbleOrder::low_first ? 0 : 4;
    for (int64_t i = 0; i < padded_len / 2; ++i) {
      codes[2 * i] = static_cast<uint8_t>((bytes[i] >> first) & 0xF);
      codes[2 * i + 1] = static_cast<uint8_t>((bytes[i] >> (4 - first)) & 0xF);
    }
    return;
  }
  for (int64_t b = 0; b < padded_len / block; ++b)
    for (int j = 0; j < block; ++j) {
      const NibbleSlot s = nibble_slot(order, block, b, j);
      codes[b * block + j] = static_cast<uint8_t>((bytes[s.byte] >> (s.high ? 4 : 0)) & 0xF);
    }
}

}  // namespace fp4emu
