#pragma once
// The packed (quantized) form of a tensor (docs/architecture.md §3, §7).
//
// The tensor is viewed as `rows` rows along the block axis: the block axis is
// moved last, as kernels store K-major operands. Row r = (outer, inner) holds
// x[outer, k, inner] for k = 0..axis_len-1, zero-padded to padded_len. Rows
// are ordered with `inner` fastest. Codes are row-major [rows, padded_len]
// nibbles packed two per byte; scales are row-major [rows, blocks_per_row]
// with scale_bytes_per_block bytes each.
#include <cstdint>
#include <string>
#include <vector>

#include "fp4emu/codec/rounding.hpp"
#include "fp4emu/quant/recipe.hpp"

namespace fp4emu {

// Everything but the buffers: the form of the codes and scales, wherever
// they are stored (PackedTensor's vectors, or caller memory for the view
// forms of quantize / dequantize in quantize.hpp).
struct PackedHeader {
  Format format = Format::hif4;
  std::string recipe_id;
  std::vector<int64_t> shape;  // logical shape of the original tensor
  int axis = 0;                // block axis, 0..rank-1
  int64_t rows = 0;
  int64_t axis_len = 0;        // shape[axis]
  int64_t padded_len = 0;      // axis_len rounded up to a multiple of block_size
  int block_size = 0;

  Rounding rounding = Rounding::rne;  // element rounding used
  std::string stochastic;             // Rounding::stochastic: its random bits (stochastic.hpp describe())
  TailPolicy tail = TailPolicy::pad;
  NibbleOrder nibble_order = NibbleOrder::low_first;
  ScaleBitOrder scale_bit_order = ScaleBitOrder::lsb_first;
  ScaleLayout scale_layout = ScaleLayout::linear;

  // NVFP4 per-tensor scale (1 and unused for the other formats and for the
  // single-level NVFP4 recipes). Decoding multiplies by global_decode_scale.
  float global_amax = 0.0f;
  float global_encode_scale = 1.0f;
  float global_decode_scale = 1.0f;

  int64_t blocks_per_row() const { return padded_len / block_size; }
  // Shape of a stored per-row array: the input shape without the block axis,
  // then `last` (padded_len/2 code bytes, or blocks_per_row() scales).
  std::vector<int64_t> stored_shape(int64_t last) const {
    std::vector<int64_t> s;
    for (size_t d = 0; d < shape.size(); ++d)
      if (static_cast<int>(d) != axis) s.push_back(shape[d]);
    s.push_back(last);
    return s;
  }
  int64_t num_blocks() const { return rows * blocks_per_row(); }
  // Sizes of the two buffers.
  int64_t code_bytes() const { return rows * padded_len / 2; }
  int64_t scale_bytes() const { return num_blocks() * scale_bytes_per_block(format); }
};

struct PackedTensor : PackedHeader {
  std::vector<uint8_t> codes;   // code_bytes() bytes
  // scale_bytes() bytes. HiF4: the 32-bit scale word little-endian:
  // [E6M2, L2 bits, L3 groups 0-7, L3 groups 8-15].
  std::vector<uint8_t> scales;
};

}  // namespace fp4emu
