#pragma once
// TensorView / OutputView (fp4emu/quant/view.hpp) checked and with their
// strides filled in, and the row access both drivers share. A row is the
// values along the block axis at one position of the other axes; rows are
// numbered row-major over the other axes (packed_tensor.hpp).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fp4emu/quant/view.hpp"
#include "src/codec/widen.hpp"

namespace fp4emu::detail {

struct StridedIn {
  const void* data = nullptr;
  InputDType dtype = InputDType::f32;
  std::vector<int64_t> shape, strides;
  bool contiguous = false;  // row-major without gaps
  int64_t numel() const;
  // fp32 values in place: contiguous fp32 data, else null.
  const float* dense_f32() const {
    return contiguous && dtype == InputDType::f32 ? static_cast<const float*>(data) : nullptr;
  }
  float at(int64_t offset) const {
    switch (dtype) {
      case InputDType::f32: return static_cast<const float*>(data)[offset];
      case InputDType::bf16: return bf16_bits_to_f32(static_cast<const uint16_t*>(data)[offset]);
      case InputDType::f16: return f16_bits_to_f32(static_cast<const uint16_t*>(data)[offset]);
    }
    return 0.0f;
  }
  // n values from element `offset` at `step` elements apart, widened to fp32.
  void load(int64_t offset, int64_t step, int64_t n, float* out) const;
};

struct StridedOut {
  float* data = nullptr;
  std::vector<int64_t> shape, strides;
  bool contiguous = false;
  float* dense() const { return contiguous ? data : nullptr; }
};

// InputError naming the field when the view is unusable (null data, strides
// of the wrong rank).
StridedIn strided(const TensorView& v);
StridedOut strided(const OutputView& v, const std::vector<int64_t>& shape);

// Element offset of row `row`, position 0 along `axis`.
int64_t row_offset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int axis, int64_t row);

// The input as one contiguous fp32 array: in place when it is one, else a
// widened copy held in `storage`.
const float* dense_f32(const StridedIn& x, std::vector<float>& storage);

// fn(first, values, n) over every element in row-major order (`first` is the
// row-major index of values[0]), widened to fp32 at most kChunk at a time.
template <class Fn>
void for_each_chunk(const StridedIn& x, Fn&& fn) {
  constexpr int64_t kChunk = 4096;
  if (const float* p = x.dense_f32()) {
    fn(int64_t{0}, p, x.numel());
    return;
  }
  const int last = static_cast<int>(x.shape.size()) - 1;
  const int64_t len = x.shape[last];
  const int64_t rows = len == 0 ? 0 : x.numel() / len;
  std::vector<float> buf(std::min(len, kChunk));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = row_offset(x.shape, x.strides, last, r);
    for (int64_t k0 = 0; k0 < len; k0 += kChunk) {
      const int64_t n = std::min(kChunk, len - k0);
      x.load(base + k0 * x.strides[last], x.strides[last], n, buf.data());
      fn(r * len + k0, static_cast<const float*>(buf.data()), n);
    }
  }
}

}  // namespace fp4emu::detail
