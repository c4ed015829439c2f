// Views of caller memory (fp4emu/quant/view.hpp), checked once at the API.
#include "src/quant/strided.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "fp4emu/error.hpp"

namespace fp4emu {
namespace {

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// Row-major without gaps; axes of length 1 have any stride.
bool is_contiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

std::vector<int64_t> checked_strides(const std::vector<int64_t>& strides, const std::vector<int64_t>& shape,
                                     const char* what) {
  if (strides.empty()) return row_major_strides(shape);
  if (strides.size() != shape.size())
    throw InputError(fmt::format("{}: {} strides [{}] for a tensor of rank {} (shape [{}]); give one stride per "
                                 "axis, in elements, or none for a row-major contiguous array",
                                 what, strides.size(), fmt::join(strides, ", "), shape.size(), fmt::join(shape, ", ")));
  return strides;
}

template <class T>
TensorView span_view(std::span<const T> values, std::vector<int64_t> shape, InputDType dtype, const char* name) {
  for (int64_t d : shape)
    if (d < 0) throw InputError(fmt::format("{}: shape [{}] has a negative dimension", name, fmt::join(shape, ", ")));
  if (static_cast<int64_t>(values.size()) != product(shape))
    throw InputError(fmt::format("{}: the span holds {} values, shape [{}] needs {}", name, values.size(),
                                 fmt::join(shape, ", "), product(shape)));
  return TensorView{values.data(), dtype, std::move(shape), {}};
}

}  // namespace

TensorView f32_view(std::span<const float> values, std::vector<int64_t> shape) {
  return span_view(values, std::move(shape), InputDType::f32, "f32_view");
}
TensorView bf16_view(std::span<const uint16_t> bits, std::vector<int64_t> shape) {
  return span_view(bits, std::move(shape), InputDType::bf16, "bf16_view");
}
TensorView f16_view(std::span<const uint16_t> bits, std::vector<int64_t> shape) {
  return span_view(bits, std::move(shape), InputDType::f16, "f16_view");
}
OutputView output_view(std::span<float> values, const std::vector<int64_t>& shape) {
  if (static_cast<int64_t>(values.size()) != product(shape))
    throw InputError(fmt::format("output_view: the span holds {} values, shape [{}] needs {}", values.size(),
                                 fmt::join(shape, ", "), product(shape)));
  return OutputView{values.data(), {}};
}

namespace detail {

int64_t StridedIn::numel() const { return product(shape); }

void StridedIn::load(int64_t offset, int64_t step, int64_t n, float* out) const {
  switch (dtype) {
    case InputDType::f32: {
      const float* p = static_cast<const float*>(data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = p[i * step];
      return;
    }
    case InputDType::bf16: {
      const uint16_t* p = static_cast<const uint16_t*>(data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_to_f32(p[i * step]);
      return;
    }
    case InputDType::f16: {
      const uint16_t* p = static_cast<const uint16_t*>(data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = f16_bits_to_f32(p[i * step]);
      return;
    }
  }
}

StridedIn strided(const TensorView& v) {
  StridedIn s;
  s.dtype = v.dtype;
  s.shape = v.shape;
  s.strides = checked_strides(v.strides, v.shape, "input view");
  if (!v.data && product(v.shape) != 0)
    throw InputError("input view: data is null; point it at the first element of the tensor");
  s.data = v.data;
  s.contiguous = is_contiguous(s.shape, s.strides);
  return s;
}

StridedOut strided(const OutputView& v, const std::vector<int64_t>& shape) {
  StridedOut s;
  s.shape = shape;
  s.strides = checked_strides(v.strides, shape, "output view");
  if (!v.data && product(shape) != 0)
    throw InputError("output view: data is null; point it at the first element of the destination");
  s.data = v.data;
  s.contiguous = is_contiguous(s.shape, s.strides);
  return s;
}

int64_t row_offset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int axis, int64_t row) {
  int64_t offset = 0;
  for (int d = static_cast<int>(shape.size()); d-- > 0;) {
    if (d == axis) continue;
    offset += row % shape[d] * strides[d];
    row /= shape[d];
  }
  return offset;
}

const float* dense_f32(const StridedIn& x, std::vector<float>& storage) {
  if (const float* p = x.dense_f32()) return p;
  const int rank = static_cast<int>(x.shape.size());
  const int64_t len = x.shape[rank - 1];
  const int64_t rows = x.numel() / len;
  storage.resize(x.numel());
  for (int64_t r = 0; r < rows; ++r)
    x.load(row_offset(x.shape, x.strides, rank - 1, r), x.strides[rank - 1], len, storage.data() + r * len);
  return storage.data();
}

}  // namespace detail
}  // namespace fp4emu
