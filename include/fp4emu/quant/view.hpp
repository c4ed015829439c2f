#pragma once
// Non-owning tensors: the caller's memory, read (TensorView) or written
// (OutputView) in place by the view forms of quantize / fake_quant /
// dequantize (quantize.hpp). Nothing here allocates the values or copies them.
#include <cstdint>
#include <span>
#include <vector>

namespace fp4emu {

// Element type of the input values. fp32 values are read as they are; bf16
// and fp16 values (their 16-bit patterns) widen to fp32 exactly. hif4.a6 is
// defined on bf16 inputs, so fp32 values given to it must be exact in bf16.
enum class InputDType : uint8_t { f32, bf16, f16 };

// A strided read-only array. Element (i0, i1, ...) is at
// data + (i0 * strides[0] + i1 * strides[1] + ...) elements of `dtype`.
//
// Reading: the fast path reads the values in place when the block axis has
// stride 1 (fp32: no copy at all; bf16/fp16: widened a run of blocks at a time
// into a per-thread buffer). Along any other axis it gathers a tile of rows
// into a per-thread buffer. The scalar reference (Impl::reference, and the
// recipes the fast path does not cover) widens the whole input to one
// contiguous fp32 array first.
struct TensorView {
  const void* data = nullptr;
  InputDType dtype = InputDType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements, one per axis, any sign; empty: row-major contiguous
};

// A strided fp32 destination with the shape of the input (fake_quant) or of
// the packed tensor (dequantize). It must not overlap the input.
struct OutputView {
  float* data = nullptr;
  std::vector<int64_t> strides;  // in elements, one per axis; empty: row-major contiguous
};

// Views of a contiguous row-major array; InputError when the span does not
// hold exactly the product of `shape` values.
TensorView f32_view(std::span<const float> values, std::vector<int64_t> shape);
TensorView bf16_view(std::span<const uint16_t> bits, std::vector<int64_t> shape);
TensorView f16_view(std::span<const uint16_t> bits, std::vector<int64_t> shape);
OutputView output_view(std::span<float> values, const std::vector<int64_t>& shape);

}  // namespace fp4emu
