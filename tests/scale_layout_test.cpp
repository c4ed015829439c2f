// Kernel-ready scale layouts: the 128x4 swizzle against the spec's worked
// offsets and against a literal transcription of torchao's `to_blocked`
// (view / permute / reshape on a strided array, written here the way torch
// evaluates it); the HiF4 Cube layout against docs/spec/hif4.md §5.3's description
// written as a reshape/permute sequence; and the packed-file round trip.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "fp4emu/error.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/scale_layout.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

// A strided n-d view over a shared byte buffer, with torch's semantics for
// view (contiguous only), permute, transpose and reshape (= contiguous + view).
struct Nd {
  std::shared_ptr<std::vector<uint8_t>> data;
  std::vector<int64_t> shape, stride;

  static Nd from(std::vector<uint8_t> v, std::vector<int64_t> shape) {
    Nd a;
    a.data = std::make_shared<std::vector<uint8_t>>(std::move(v));
    a.shape = std::move(shape);
    a.stride = row_major(a.shape);
    return a;
  }
  static std::vector<int64_t> row_major(const std::vector<int64_t>& shape) {
    std::vector<int64_t> s(shape.size());
    int64_t n = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      s[d] = n;
      n *= shape[d];
    }
    return s;
  }
  int64_t numel() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  }
  bool is_contiguous() const { return stride == row_major(shape); }
  Nd view(std::vector<int64_t> s) const {
    EXPECT_TRUE(is_contiguous()) << "torch.view needs a contiguous tensor here";
    int64_t known = 1, infer = -1;
    for (size_t d = 0; d < s.size(); ++d) (s[d] == -1 ? infer = static_cast<int64_t>(d) : known *= s[d]);
    if (infer >= 0) s[infer] = numel() / known;
    Nd a = *this;
    a.shape = s;
    a.stride = row_major(s);
    return a;
  }
  Nd permute(const std::vector<int>& perm) const {
    Nd a = *this;
    for (size_t d = 0; d < perm.size(); ++d) {
      a.shape[d] = shape[perm[d]];
      a.stride[d] = stride[perm[d]];
    }
    return a;
  }
  Nd transpose(int x, int y) const {
    std::vector<int> perm(shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[x], perm[y]);
    return permute(perm);
  }
  Nd contiguous() const {
    std::vector<uint8_t> out;
    std::vector<int64_t> idx(shape.size(), 0);
    for (int64_t n = 0; n < numel(); ++n) {
      int64_t off = 0;
      for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * stride[d];
      out.push_back((*data)[off]);
      for (size_t d = shape.size(); d-- > 0;) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
    return from(out, shape);
  }
  Nd reshape(std::vector<int64_t> s) const { return contiguous().view(std::move(s)); }
  std::vector<uint8_t> flatten() const { return *contiguous().data; }
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// torchao prototype/mx_formats/utils.py `to_blocked`, line by line.
std::vector<uint8_t> torchao_to_blocked(const std::vector<uint8_t>& input, int64_t rows, int64_t cols) {
  const int64_t n_row_blocks = ceil_div(rows, 128), n_col_blocks = ceil_div(cols, 4);
  const int64_t padded_rows = n_row_blocks * 128, padded_cols = n_col_blocks * 4;
  std::vector<uint8_t> padded(padded_rows * padded_cols, 0);  // torch.zeros; padded[:rows, :cols] = input
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) padded[r * padded_cols + c] = input[r * cols + c];
  const Nd blocks = Nd::from(padded, {padded_rows, padded_cols}).view({n_row_blocks, 128, n_col_blocks, 4}).permute({0, 2, 1, 3});
  const Nd rearranged = blocks.reshape({-1, 4, 32, 4}).transpose(1, 2).reshape({-1, 32, 16});
  return rearranged.flatten();
}

// docs/spec/hif4.md §5.3 as array operations: words [R', C] -> bytes [R'/16, 16, C, 4]
// -> cells [R'/16, C, 16 rows, 4 bytes] -> split the 4 bytes into two pairs
// and put the pair index before the row: [R'/16, C, 2, 16, 2].
std::vector<uint8_t> spec_hif4_cube(const std::vector<uint8_t>& words_le, int64_t rows, int64_t cols) {
  const int64_t padded_rows = ceil_div(rows, 16) * 16;
  std::vector<uint8_t> padded(padded_rows * cols * 4, 0);
  std::copy(words_le.begin(), words_le.end(), padded.begin());
  return Nd::from(padded, {padded_rows / 16, 16, cols, 4})
      .permute({0, 2, 1, 3})
      .reshape({padded_rows / 16, cols, 16, 2, 2})
      .permute({0, 1, 3, 2, 4})
      .flatten();
}

std::vector<uint8_t> distinct_bytes(int64_t n, int salt) {
  std::vector<uint8_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131 + salt * 17 + (i >> 8)) % 251 + 1);
  return v;
}

TEST(ScaleLayout, SpecWorkedOffsets) {
  // docs/spec/mxfp4.md §6.3 examples, C' = 8.
  EXPECT_EQ(swizzle_128x4_offset(5, 2, 8), 82);
  EXPECT_EQ(swizzle_128x4_offset(37, 1, 8), 85);
  EXPECT_EQ(swizzle_128x4_offset(130, 5, 8), 1569);
  // docs/spec/nvfp4.md §8 EX-N9: M = 256, K = 128 -> scales [256, 8]; row 130, block 5.
  const Swizzle128x4Dims d = swizzle_128x4_dims(256, 128 / 16);
  EXPECT_EQ(d.padded_rows, 256);
  EXPECT_EQ(d.padded_cols, 8);
  EXPECT_EQ(swizzle_128x4_offset(130, 5, d.padded_cols), 1569);
}

TEST(ScaleLayout, Swizzle128x4MatchesTorchaoToBlocked) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {256, 8}, {128, 4}, {1, 1}, {130, 5}, {129, 7}, {300, 13}, {64, 2}}) {
    const std::vector<uint8_t> linear = distinct_bytes(rows * cols, static_cast<int>(rows + cols));
    const ScaleMatrix m{1, rows, cols};
    const std::vector<uint8_t> ours = swizzle_128x4(linear, m);
    ASSERT_EQ(ours, torchao_to_blocked(linear, rows, cols)) << rows << "x" << cols;
    EXPECT_EQ(unswizzle_128x4(ours, m), linear);
  }
}

TEST(ScaleLayout, Swizzle128x4BatchesMatricesOneAfterAnother) {
  const int64_t batch = 3, rows = 130, cols = 5;
  const std::vector<uint8_t> linear = distinct_bytes(batch * rows * cols, 7);
  const std::vector<uint8_t> ours = swizzle_128x4(linear, {batch, rows, cols});
  std::vector<uint8_t> expected;
  for (int64_t l = 0; l < batch; ++l) {  // docs/spec/mxfp4.md §6.3 step 3: + l * R' * C'
    const std::vector<uint8_t> one(linear.begin() + l * rows * cols, linear.begin() + (l + 1) * rows * cols);
    const std::vector<uint8_t> b = torchao_to_blocked(one, rows, cols);
    expected.insert(expected.end(), b.begin(), b.end());
  }
  EXPECT_EQ(ours, expected);
  EXPECT_EQ(unswizzle_128x4(ours, {batch, rows, cols}), linear);
}

TEST(ScaleLayout, Hif4CubeMatchesSpecDescription) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{16, 1}, {32, 3}, {40, 3}, {1, 2}, {17, 5}}) {
    const std::vector<uint8_t> words = distinct_bytes(rows * cols * 4, static_cast<int>(rows * cols));
    const ScaleMatrix m{1, rows, cols};
    const std::vector<uint8_t> ours = hif4_cube_swizzle(words, m);
    ASSERT_EQ(ours, spec_hif4_cube(words, rows, cols)) << rows << "x" << cols;
    EXPECT_EQ(hif4_cube_unswizzle(ours, m), words);
    // The spec's words: in cell (0, 0), bytes 0..31 are (E6M2, L2) of rows
    // 0..15 in turn, bytes 32..63 (L3 low, L3 high).
    for (int64_t r = 0; r < std::min<int64_t>(rows, 16); ++r) {
      const uint8_t* w = &words[(r * cols) * 4];
      EXPECT_EQ(ours[2 * r], w[0]);
      EXPECT_EQ(ours[2 * r + 1], w[1]);
      EXPECT_EQ(ours[32 + 2 * r], w[2]);
      EXPECT_EQ(ours[32 + 2 * r + 1], w[3]);
    }
  }
}

PackedTensor shape_only(Format f, std::vector<int64_t> shape, int axis) {
  PackedTensor p;
  p.format = f;
  p.shape = shape;
  p.axis = axis;
  p.block_size = block_size(f);
  p.axis_len = shape[axis];
  p.padded_len = (p.axis_len + p.block_size - 1) / p.block_size * p.block_size;
  p.rows = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (static_cast<int>(d) != axis) p.rows *= shape[d];
  return p;
}

TEST(ScaleLayout, ScaleMatrixOfOperands) {
  // A [M, K] blocked along K: rows M.
  ScaleMatrix m = scale_matrix(shape_only(Format::mxfp4, {130, 160}, 1));
  EXPECT_EQ(m.batch, 1);
  EXPECT_EQ(m.rows, 130);
  EXPECT_EQ(m.cols, 5);
  // B stored [K, N] blocked along K (axis 0): rows N.
  m = scale_matrix(shape_only(Format::nvfp4, {128, 136}, 0));
  EXPECT_EQ(m.batch, 1);
  EXPECT_EQ(m.rows, 136);
  EXPECT_EQ(m.cols, 8);
  // Batched [L, M, K].
  m = scale_matrix(shape_only(Format::hif4, {3, 40, 192}, 2));
  EXPECT_EQ(m.batch, 3);
  EXPECT_EQ(m.rows, 40);
  EXPECT_EQ(m.cols, 3);
  // Batched B [L, K, N] blocked along K.
  m = scale_matrix(shape_only(Format::mxfp4, {2, 64, 10}, 1));
  EXPECT_EQ(m.batch, 2);
  EXPECT_EQ(m.rows, 10);
  EXPECT_EQ(m.cols, 2);
}

TEST(ScaleLayout, StoredScaleByteInvertsEveryOffset) {
  for (const auto& [f, layout, shape, axis] :
       std::vector<std::tuple<Format, StoredScaleLayout, std::vector<int64_t>, int>>{
           {Format::mxfp4, StoredScaleLayout::swizzled_128x4, {130, 160}, 1},
           {Format::nvfp4, StoredScaleLayout::swizzled_128x4, {2, 64, 136}, 1},
           {Format::hif4, StoredScaleLayout::hif4_cube, {40, 192}, 1},
           {Format::hif4, StoredScaleLayout::hif4_cube, {2, 128, 20}, 1},
           {Format::hif4, StoredScaleLayout::linear, {3, 128}, 1}}) {
    PackedTensor p = shape_only(f, shape, axis);
    const int sb = scale_bytes_per_block(f);
    p.scales.resize(p.num_blocks() * sb);
    // Each scale byte holds a unique tag: its (block, byte) index + 1 (< 256 here).
    for (size_t i = 0; i < p.scales.size(); ++i) p.scales[i] = static_cast<uint8_t>(i % 255 + 1);
    const std::vector<uint8_t> stored = store_scales(p, layout);
    int64_t seen = 0;
    for (size_t off = 0; off < stored.size(); ++off) {
      const auto at = stored_scale_byte(static_cast<int64_t>(off), p, layout);
      if (!at) {
        EXPECT_EQ(stored[off], 0) << "padding at " << off;
        continue;
      }
      ++seen;
      EXPECT_EQ(stored[off], p.scales[at->block * sb + at->byte]) << "offset " << off;
    }
    EXPECT_EQ(seen, p.num_blocks() * sb);
    EXPECT_EQ(load_scales(stored, p, layout), p.scales);
    // Linear HiF4 scales are stored as u32 words, the other forms as bytes.
    int64_t n = layout == StoredScaleLayout::linear ? sb : 1;
    for (int64_t d : stored_scales_shape(p, layout)) n *= d;
    EXPECT_EQ(n, static_cast<int64_t>(stored.size()));
  }
}

TEST(ScaleLayout, LayoutAppliesToItsFormatsOnly) {
  EXPECT_TRUE(layout_applies(StoredScaleLayout::swizzled_128x4, Format::mxfp4));
  EXPECT_TRUE(layout_applies(StoredScaleLayout::swizzled_128x4, Format::nvfp4));
  EXPECT_FALSE(layout_applies(StoredScaleLayout::swizzled_128x4, Format::hif4));
  EXPECT_TRUE(layout_applies(StoredScaleLayout::hif4_cube, Format::hif4));
  EXPECT_FALSE(layout_applies(StoredScaleLayout::hif4_cube, Format::mxfp4));
  for (auto l : {StoredScaleLayout::linear, StoredScaleLayout::swizzled_128x4, StoredScaleLayout::hif4_cube})
    EXPECT_EQ(parse_stored_scale_layout(to_string(l)), l);
  EXPECT_FALSE(parse_stored_scale_layout("swizzled"));
}

Tensor ramp(std::vector<int64_t> shape) {
  Tensor t;
  t.shape = shape;
  t.data.resize(t.numel());
  std::mt19937_64 rng(5);
  for (float& v : t.data) v = testing::random_wide(rng);
  return t;
}

TEST(ScaleLayout, PackedFileRoundTripInEveryLayout) {
  testing::TempDir dir;
  struct Case {
    const char* recipe;
    std::vector<int64_t> shape;
    int axis;
    StoredScaleLayout layout;
  };
  for (const Case& c : std::vector<Case>{{"mxfp4.ocp", {130, 160}, 1, StoredScaleLayout::swizzled_128x4},
                                         {"nvfp4.te", {64, 136}, 0, StoredScaleLayout::swizzled_128x4},
                                         {"hif4.v14", {40, 192}, -1, StoredScaleLayout::hif4_cube},
                                         {"hif4.amct", {2, 17, 128}, -1, StoredScaleLayout::hif4_cube}}) {
    QuantOptions o;
    o.recipe = c.recipe;
    o.axis = c.axis;
    const Tensor x = ramp(c.shape);
    const PackedTensor p = quantize(x, o);
    const auto path = dir / (std::string(c.recipe) + ".safetensors");
    write_packed(path, p, c.layout);
    const io::SafetensorsFile f = io::read_safetensors(path);
    EXPECT_EQ(f.metadata.at("scale_layout"), to_string(c.layout));
    const io::SafetensorsTensor* scales = f.find("scales");
    ASSERT_NE(scales, nullptr);
    EXPECT_EQ(scales->array.dtype, io::DType::u8);
    EXPECT_EQ(scales->array.shape, stored_scales_shape(p, c.layout));
    EXPECT_EQ(scales->array.bytes, store_scales(p, c.layout));
    const PackedTensor back = read_packed(path);
    EXPECT_EQ(back.scales, p.scales) << c.recipe;
    EXPECT_EQ(back.codes, p.codes);
    const Tensor a = dequantize(p), b = dequantize(back);
    for (size_t i = 0; i < a.data.size(); ++i) ASSERT_TRUE(testing::same_bits(a.data[i], b.data[i])) << i;
  }
  // torchao's swizzled shape for an M x K MX tensor: [32 ceil(M/128), 16 ceil(K/128)].
  QuantOptions o;
  o.recipe = "mxfp4";
  const PackedTensor p = quantize(ramp({130, 160}), o);
  EXPECT_EQ(stored_scales_shape(p, StoredScaleLayout::swizzled_128x4), (std::vector<int64_t>{64, 32}));
}

TEST(ScaleLayout, PackedFileRejectsALayoutOfAnotherFormat) {
  testing::TempDir dir;
  QuantOptions o;
  o.recipe = "hif4";
  const PackedTensor p = quantize(ramp({4, 64}), o);
  EXPECT_THROW(write_packed(dir / "x.safetensors", p, StoredScaleLayout::swizzled_128x4), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.safetensors"));
}

}  // namespace
}  // namespace fp4emu
