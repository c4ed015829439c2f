#include "packing.hpp"

namespace fp4emu::golden {

CaseGeometry::CaseGeometry(std::vector<int64_t> shape_, int axis_, int block_, NibbleOrder order)
    : shape(std::move(shape_)), axis(axis_), block(block_), nibble_order(order) {
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  axis_len = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  padded_len = (axis_len + block - 1) / block * block;
}

// packed_tensor.hpp / recipe.hpp NibbleOrder: low_first (PTX, torchao), high_first
// (legacy HiF4 exporter), split_half (ggml: byte j of a block holds elements j
// and j + block/2).
CaseGeometry::Slot CaseGeometry::slot(int64_t b, int j) const {
  const int64_t p = b * block + j;
  switch (nibble_order) {
    case NibbleOrder::low_first: return {p / 2, (p & 1) != 0};
    case NibbleOrder::high_first: return {p / 2, (p & 1) == 0};
    case NibbleOrder::split_half: return {b * (block / 2) + j % (block / 2), j >= block / 2};
  }
  return {p / 2, (p & 1) != 0};
}

void CaseGeometry::element_of(int64_t byte, bool high, int64_t* b, int* j) const {
  switch (nibble_order) {
    case NibbleOrder::low_first:
    case NibbleOrder::high_first: {
      const int64_t p = 2 * byte + ((high == (nibble_order == NibbleOrder::low_first)) ? 1 : 0);
      *b = p / block;
      *j = static_cast<int>(p % block);
      return;
    }
    case NibbleOrder::split_half:
      *b = byte / (block / 2);
      *j = static_cast<int>(byte % (block / 2) + (high ? block / 2 : 0));
      return;
  }
}

}  // namespace fp4emu::golden
