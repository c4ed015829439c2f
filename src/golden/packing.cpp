#include "packing.hpp"

#include "fp4emu/quant/nibbles.hpp"

namespace fp4emu::golden {

CaseGeometry::CaseGeometry(std::vector<int64_t> shape_, int axis_, int block_, NibbleOrder order)
    : shape(std::move(shape_)), axis(axis_), block(block_), nibble_order(order) {
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  axis_len = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  padded_len = (axis_len + block - 1) / block * block;
}

CaseGeometry::Slot CaseGeometry::slot(int64_t b, int j) const {
  const NibbleSlot s = nibble_slot(nibble_order, block, b, j);
  return {s.byte, s.high};
}

void CaseGeometry::element_of(int64_t byte, bool high, int64_t* b, int* j) const {
  nibble_element(nibble_order, block, byte, high, b, j);
}

}  // namespace fp4emu::golden
