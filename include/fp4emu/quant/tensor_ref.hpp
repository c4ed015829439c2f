#pragma once
// A read-only fp32 tensor in the caller's memory: the input of the analysis
// calls (compare, identify, the underflow and Rollout-ResQ studies), which
// read it in place (docs/architecture.md §3). An owning Tensor converts to one
// without copying; a TensorRef must not outlive the memory it names.
#include <cstdint>
#include <span>
#include <vector>

#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/tensor.hpp"
#include "fp4emu/quant/view.hpp"

namespace fp4emu {

struct TensorRef {
  std::vector<int64_t> shape;
  std::span<const float> data;  // row-major

  // NOLINTNEXTLINE(google-explicit-constructor): a Tensor is passed where a TensorRef is read
  TensorRef(const Tensor& t) : shape(t.shape), data(t.data) {}
  // InputError when `data` does not hold exactly the product of `shape` values.
  TensorRef(std::vector<int64_t> shape, std::span<const float> data);

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // The same memory as a view for the quantize.hpp calls (an fp32 view: the
  // values' input dtype is QuantOptions::input_dtype).
  TensorView view() const { return TensorView{data.data(), InputDType::f32, shape, {}}; }
};

// quantize / fake_quant of the values a TensorRef names, into owning results
// (the Tensor forms of quantize.hpp, without the copy into a Tensor).
PackedTensor quantize(const TensorRef& x, const QuantOptions& options);
Tensor fake_quant(const TensorRef& x, const QuantOptions& options);

}  // namespace fp4emu
