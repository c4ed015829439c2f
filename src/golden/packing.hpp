#pragma once
// How the arrays of a suite case map to blocks and elements (the packed form
// of packed_tensor.hpp): shared by the blocks.txt writer and the verifier.
#include <cstdint>
#include <vector>

#include "fp4emu/quant/recipe.hpp"

namespace fp4emu::golden {

struct CaseGeometry {
  std::vector<int64_t> shape;
  int axis = 0;
  int block = 0;
  NibbleOrder nibble_order = NibbleOrder::low_first;
  int64_t outer = 1, axis_len = 0, inner = 1;
  int64_t padded_len = 0;

  CaseGeometry(std::vector<int64_t> shape_, int axis_, int block_, NibbleOrder order);
  int64_t rows() const { return outer * inner; }
  int64_t blocks_per_row() const { return padded_len / block; }
  int64_t num_blocks() const { return rows() * blocks_per_row(); }
  int64_t row_bytes() const { return padded_len / 2; }
  // Index into the input / dequantized array of element k of row `row`
  // (k < axis_len).
  int64_t value_index(int64_t row, int64_t k) const {
    return ((row / inner) * axis_len + k) * inner + row % inner;
  }
  // Inverse: (row, k) of a value index.
  void row_and_k(int64_t index, int64_t* row, int64_t* k) const {
    const int64_t i = index % inner, rest = index / inner;
    *k = rest % axis_len;
    *row = (rest / axis_len) * inner + i;
  }
  // Byte (within the row) and nibble of element j of block b, per nibble order.
  struct Slot {
    int64_t byte;
    bool high;
  };
  Slot slot(int64_t b, int j) const;
  // Inverse: (block in row, element) of a nibble.
  void element_of(int64_t byte, bool high, int64_t* b, int* j) const;
};

}  // namespace fp4emu::golden
