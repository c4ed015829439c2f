#pragma once
#include <cstdint>
#include <vector>

namespace fp4emu {

// Dense row-major float32 array. bf16/fp16 inputs widen to it exactly.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace fp4emu
