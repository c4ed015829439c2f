#pragma once
// Kernel-ready layouts of the block-scale array. In memory a PackedTensor
// always holds its scales row-major [rows, blocks] (packed_tensor.hpp); the
// layouts below are pure byte permutations of that array, applied when a file
// is written (packed_io, golden suites) and undone when it is read.
//
// - swizzled_128x4 (MXFP4, NVFP4; docs/spec/mxfp4.md §6.3, docs/spec/nvfp4.md §6.3): the Blackwell
//   block-scaled GEMM layout of cuBLAS, CUTLASS, TE and torchao
//   ("SWIZZLE_32_4_4"). Rows pad to a multiple of 128, scale columns to a
//   multiple of 4, with zero bytes; each 512-byte tile holds 128 rows x 4
//   scales, tiles ordered column-tile fastest:
//     off(r, c) = ((r/128)*(C'/4) + c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + c%4
//   A batch of matrices adds l*R'*C'.
// - hif4_cube (HiF4; docs/spec/hif4.md §5.3): the Ascend Cube "pre-fractalized" scale
//   layout of GEMM operands, HIF4_A_ZZ for A (rows = m) and HIF4_B_NN for B
//   (rows = n; the [n, k/64] scale array of a K-major B). The spec gives both
//   as [rows/16][k/64][64-byte cell]; inside a cell, bytes 0..31 hold the pair
//   (E6M2, L2 byte) of each of the 16 rows in turn and bytes 32..63 the pair
//   (L3 low byte, L3 high byte). fp4emu pads rows to a multiple of 16 with
//   zero bytes (the spec does not say; the pto-isa golden only uses multiples
//   of 16). The scale words enter in their stored bit order.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fp4emu/quant/packed_tensor.hpp"

namespace fp4emu {

// How a block-scale array is laid out in a file. `linear` is the in-memory
// row-major [rows, blocks] order of PackedTensor::scales.
enum class StoredScaleLayout : uint8_t { linear, swizzled_128x4, hif4_cube };
std::string_view to_string(StoredScaleLayout l);
std::optional<StoredScaleLayout> parse_stored_scale_layout(std::string_view name);
// Whether a format's scales can be stored in a layout (swizzled_128x4: MXFP4
// and NVFP4; hif4_cube: HiF4; linear: all).
bool layout_applies(StoredScaleLayout l, Format f);

// The scale array of a packed tensor seen as `batch` matrices of [rows, cols]
// (cols = blocks per row). The last two dims of the tensor are the operand
// matrix, leading dims are batch: with the block axis last, rows is the dim
// before it; with the block axis elsewhere, rows is everything after it (the
// N of a K x N operand) and batch everything before.
struct ScaleMatrix {
  int64_t batch = 1;
  int64_t rows = 0;
  int64_t cols = 0;
};
ScaleMatrix scale_matrix(const PackedTensor& p);

// ---- 128x4 swizzle (one byte per scale) --------------------------------------
struct Swizzle128x4Dims {
  int64_t padded_rows;  // R' = 128 * ceil(rows / 128)
  int64_t padded_cols;  // C' = 4 * ceil(cols / 4)
  int64_t bytes_per_matrix() const { return padded_rows * padded_cols; }
};
Swizzle128x4Dims swizzle_128x4_dims(int64_t rows, int64_t cols);
// Byte offset of scale (r, c) inside one swizzled matrix with C' padded columns.
int64_t swizzle_128x4_offset(int64_t r, int64_t c, int64_t padded_cols);
// linear: batch * rows * cols bytes, row-major. Returns batch * R' * C' bytes,
// padding zero. std::invalid_argument if the sizes do not match.
std::vector<uint8_t> swizzle_128x4(std::span<const uint8_t> linear, const ScaleMatrix& m);
// Inverse; padding bytes are ignored.
std::vector<uint8_t> unswizzle_128x4(std::span<const uint8_t> swizzled, const ScaleMatrix& m);

// ---- HiF4 Cube layout (four bytes per scale word) -------------------------------
inline constexpr int kHif4CubeRows = 16;
inline constexpr int kHif4CubeCellBytes = 64;
// Rows padded to a multiple of 16.
int64_t hif4_cube_padded_rows(int64_t rows);
// Byte offset of byte `b` (0: E6M2, 1: L2, 2: L3 low, 3: L3 high) of the word
// of scale (r, c) inside one matrix with `cols` scale columns.
int64_t hif4_cube_offset(int64_t r, int64_t c, int b, int64_t cols);
// linear: batch * rows * cols little-endian words (4 bytes each). Returns
// batch * padded_rows * cols * 4 bytes, padding zero.
std::vector<uint8_t> hif4_cube_swizzle(std::span<const uint8_t> linear, const ScaleMatrix& m);
std::vector<uint8_t> hif4_cube_unswizzle(std::span<const uint8_t> cube, const ScaleMatrix& m);

// ---- any layout ----------------------------------------------------------------------
// Bytes of the stored form of the scales of `p` (p.scales is linear).
std::vector<uint8_t> store_scales(const PackedTensor& p, StoredScaleLayout l);
// Linear scales from a stored form (size checked; std::invalid_argument if wrong).
std::vector<uint8_t> load_scales(std::span<const uint8_t> stored, const PackedTensor& p, StoredScaleLayout l);
// Array shape of the stored form, as files hold it: linear [..., blocks]
// (the input shape without the block axis, u8, or u32 words for HiF4);
// swizzled_128x4 [batch, R'/4, 4*C'] (torchao's [32*ceil(M/128), 16*ceil(K/128)]
// for MX), batch dropped when the tensor has rank <= 2; hif4_cube
// [batch, R'/16, cols, 64], batch dropped likewise.
std::vector<int64_t> stored_scales_shape(const PackedTensor& p, StoredScaleLayout l);
// Maps a byte offset of the stored form back to the linear block index
// (row * blocks_per_row + block) and the byte within the block's scale;
// nullopt for a padding byte.
struct ScaleByte {
  int64_t block;
  int byte;
};
std::optional<ScaleByte> stored_scale_byte(int64_t offset, const PackedTensor& p, StoredScaleLayout l);

}  // namespace fp4emu
