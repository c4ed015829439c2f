// Kernel-ready scale layouts (scale_layout.hpp): pure byte permutations of the
// row-major scale array.
#include "fp4emu/quant/scale_layout.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace fp4emu {
namespace {

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

void check_size(size_t got, int64_t want, std::string_view what) {
  if (static_cast<int64_t>(got) != want)
    throw std::invalid_argument(fmt::format("{}: {} bytes, expected {}", what, got, want));
}

}  // namespace

std::string_view to_string(StoredScaleLayout l) {
  switch (l) {
    case StoredScaleLayout::linear: return "linear";
    case StoredScaleLayout::swizzled_128x4: return "swizzled_128x4";
    case StoredScaleLayout::hif4_cube: return "hif4_cube";
  }
  return "?";
}

std::optional<StoredScaleLayout> parse_stored_scale_layout(std::string_view name) {
  if (name == "linear") return StoredScaleLayout::linear;
  if (name == "swizzled_128x4") return StoredScaleLayout::swizzled_128x4;
  if (name == "hif4_cube") return StoredScaleLayout::hif4_cube;
  return std::nullopt;
}

bool layout_applies(StoredScaleLayout l, Format f) {
  switch (l) {
    case StoredScaleLayout::linear: return true;
    case StoredScaleLayout::swizzled_128x4: return f == Format::mxfp4 || f == Format::nvfp4;
    case StoredScaleLayout::hif4_cube: return f == Format::hif4;
  }
  return false;
}

ScaleMatrix scale_matrix(const PackedTensor& p) {
  ScaleMatrix m;
  m.cols = p.blocks_per_row();
  const int rank = static_cast<int>(p.shape.size());
  if (p.axis == rank - 1) {
    m.rows = rank >= 2 ? p.shape[rank - 2] : 1;
    for (int d = 0; d + 2 < rank; ++d) m.batch *= p.shape[d];
  } else {
    m.rows = 1;
    for (int d = p.axis + 1; d < rank; ++d) m.rows *= p.shape[d];
    for (int d = 0; d < p.axis; ++d) m.batch *= p.shape[d];
  }
  return m;
}

// ---- 128x4 -----------------------------------------------------------------------

Swizzle128x4Dims swizzle_128x4_dims(int64_t rows, int64_t cols) { return {round_up(rows, 128), round_up(cols, 4)}; }

// docs/spec/mxfp4.md §6.3 step 2: byte order inside a tile is [r mod 32][(r mod 128) div 32][c mod 4].
int64_t swizzle_128x4_offset(int64_t r, int64_t c, int64_t padded_cols) {
  return ((r / 128) * (padded_cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

std::vector<uint8_t> swizzle_128x4(std::span<const uint8_t> linear, const ScaleMatrix& m) {
  check_size(linear.size(), m.batch * m.rows * m.cols, "swizzle_128x4 input");
  const Swizzle128x4Dims d = swizzle_128x4_dims(m.rows, m.cols);
  std::vector<uint8_t> out(m.batch * d.bytes_per_matrix(), 0);
  for (int64_t l = 0; l < m.batch; ++l)
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c)
        out[l * d.bytes_per_matrix() + swizzle_128x4_offset(r, c, d.padded_cols)] =
            linear[(l * m.rows + r) * m.cols + c];
  return out;
}

std::vector<uint8_t> unswizzle_128x4(std::span<const uint8_t> swizzled, const ScaleMatrix& m) {
  const Swizzle128x4Dims d = swizzle_128x4_dims(m.rows, m.cols);
  check_size(swizzled.size(), m.batch * d.bytes_per_matrix(), "swizzled_128x4 scales");
  std::vector<uint8_t> out(m.batch * m.rows * m.cols);
  for (int64_t l = 0; l < m.batch; ++l)
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c)
        out[(l * m.rows + r) * m.cols + c] =
            swizzled[l * d.bytes_per_matrix() + swizzle_128x4_offset(r, c, d.padded_cols)];
  return out;
}

// ---- HiF4 Cube -----------------------------------------------------------------------

int64_t hif4_cube_padded_rows(int64_t rows) { return round_up(rows, kHif4CubeRows); }

// docs/spec/hif4.md §5.3: cell (r/16, c) of 64 bytes; the first 32 bytes pair (E6M2, L2)
// row by row, the last 32 pair (L3 low, L3 high).
int64_t hif4_cube_offset(int64_t r, int64_t c, int b, int64_t cols) {
  const int64_t cell = (r / kHif4CubeRows) * cols + c;
  const int64_t half = b < 2 ? 0 : kHif4CubeCellBytes / 2;
  return cell * kHif4CubeCellBytes + half + (r % kHif4CubeRows) * 2 + (b % 2);
}

std::vector<uint8_t> hif4_cube_swizzle(std::span<const uint8_t> linear, const ScaleMatrix& m) {
  check_size(linear.size(), m.batch * m.rows * m.cols * 4, "hif4_cube input");
  const int64_t per_matrix = hif4_cube_padded_rows(m.rows) * m.cols * 4;
  std::vector<uint8_t> out(m.batch * per_matrix, 0);
  for (int64_t l = 0; l < m.batch; ++l)
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c)
        for (int b = 0; b < 4; ++b)
          out[l * per_matrix + hif4_cube_offset(r, c, b, m.cols)] = linear[((l * m.rows + r) * m.cols + c) * 4 + b];
  return out;
}

std::vector<uint8_t> hif4_cube_unswizzle(std::span<const uint8_t> cube, const ScaleMatrix& m) {
  const int64_t per_matrix = hif4_cube_padded_rows(m.rows) * m.cols * 4;
  check_size(cube.size(), m.batch * per_matrix, "hif4_cube scales");
  std::vector<uint8_t> out(m.batch * m.rows * m.cols * 4);
  for (int64_t l = 0; l < m.batch; ++l)
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c)
        for (int b = 0; b < 4; ++b)
          out[((l * m.rows + r) * m.cols + c) * 4 + b] = cube[l * per_matrix + hif4_cube_offset(r, c, b, m.cols)];
  return out;
}

// ---- any layout ------------------------------------------------------------------------

namespace {

void check_applies(StoredScaleLayout l, Format f) {
  if (!layout_applies(l, f))
    throw std::invalid_argument(
        fmt::format("scale layout {} does not apply to {} scales", to_string(l), format_name(f)));
}

}  // namespace

std::vector<uint8_t> store_scales(const PackedTensor& p, StoredScaleLayout l) {
  check_applies(l, p.format);
  switch (l) {
    case StoredScaleLayout::linear: return p.scales;
    case StoredScaleLayout::swizzled_128x4: return swizzle_128x4(p.scales, scale_matrix(p));
    case StoredScaleLayout::hif4_cube: return hif4_cube_swizzle(p.scales, scale_matrix(p));
  }
  return {};
}

std::vector<uint8_t> load_scales(std::span<const uint8_t> stored, const PackedTensor& p, StoredScaleLayout l) {
  check_applies(l, p.format);
  switch (l) {
    case StoredScaleLayout::linear:
      check_size(stored.size(), p.num_blocks() * scale_bytes_per_block(p.format), "linear scales");
      return {stored.begin(), stored.end()};
    case StoredScaleLayout::swizzled_128x4: return unswizzle_128x4(stored, scale_matrix(p));
    case StoredScaleLayout::hif4_cube: return hif4_cube_unswizzle(stored, scale_matrix(p));
  }
  return {};
}

std::vector<int64_t> stored_scales_shape(const PackedTensor& p, StoredScaleLayout l) {
  check_applies(l, p.format);
  const ScaleMatrix m = scale_matrix(p);
  std::vector<int64_t> shape;
  if (l == StoredScaleLayout::linear) {
    for (size_t d = 0; d < p.shape.size(); ++d)
      if (static_cast<int>(d) != p.axis) shape.push_back(p.shape[d]);
    shape.push_back(p.blocks_per_row());
    return shape;
  }
  if (p.shape.size() > 2) shape.push_back(m.batch);
  if (l == StoredScaleLayout::swizzled_128x4) {
    const Swizzle128x4Dims d = swizzle_128x4_dims(m.rows, m.cols);
    shape.push_back(d.padded_rows / 4);
    shape.push_back(d.padded_cols * 4);
  } else {
    shape.push_back(hif4_cube_padded_rows(m.rows) / kHif4CubeRows);
    shape.push_back(m.cols);
    shape.push_back(kHif4CubeCellBytes);
  }
  return shape;
}

std::optional<ScaleByte> stored_scale_byte(int64_t offset, const PackedTensor& p, StoredScaleLayout l) {
  check_applies(l, p.format);
  const int sb = scale_bytes_per_block(p.format);
  const ScaleMatrix m = scale_matrix(p);
  if (offset < 0) return std::nullopt;
  switch (l) {
    case StoredScaleLayout::linear:
      if (offset >= p.num_blocks() * sb) return std::nullopt;
      return ScaleByte{offset / sb, static_cast<int>(offset % sb)};
    case StoredScaleLayout::swizzled_128x4: {
      const Swizzle128x4Dims d = swizzle_128x4_dims(m.rows, m.cols);
      const int64_t l_idx = offset / d.bytes_per_matrix();
      const int64_t o = offset % d.bytes_per_matrix();
      if (l_idx >= m.batch) return std::nullopt;
      // Invert the formula term by term: tile, then [r%32][(r%128)/32][c%4].
      const int64_t tile = o / 512, in = o % 512;
      const int64_t r = (tile / (d.padded_cols / 4)) * 128 + ((in / 4) % 4) * 32 + in / 16;
      const int64_t c = (tile % (d.padded_cols / 4)) * 4 + in % 4;
      if (r >= m.rows || c >= m.cols) return std::nullopt;
      return ScaleByte{(l_idx * m.rows + r) * m.cols + c, 0};
    }
    case StoredScaleLayout::hif4_cube: {
      const int64_t per_matrix = hif4_cube_padded_rows(m.rows) * m.cols * 4;
      const int64_t l_idx = offset / per_matrix;
      const int64_t o = offset % per_matrix;
      if (l_idx >= m.batch) return std::nullopt;
      const int64_t cell = o / kHif4CubeCellBytes, in = o % kHif4CubeCellBytes;
      const int64_t r = (cell / m.cols) * kHif4CubeRows + (in % 32) / 2;
      const int64_t c = cell % m.cols;
      const int b = static_cast<int>((in / 32) * 2 + in % 2);
      if (r >= m.rows) return std::nullopt;
      return ScaleByte{(l_idx * m.rows + r) * m.cols + c, b};
    }
  }
  return std::nullopt;
}

}  // namespace fp4emu
