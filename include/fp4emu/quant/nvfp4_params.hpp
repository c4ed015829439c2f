#pragma once
// Recipe parameters of NVFP4 (nvfp4.md §4). Data only.
#include <cstdint>

namespace fp4emu {

// The library whose operation order the block-scale and element steps follow
// (nvfp4.md §4.0 variant map). Each names a fixed sequence of fp32 operations.
enum class NvScaleRule : uint8_t {
  te,           // NVFP4_TE (§4.1)
  te_4over6,    // NVFP4_TE_4OVER6 (§4.2)
  torchao,      // NVFP4_TORCHAO (§4.3)
  torchao_1l,   // NVFP4_TORCHAO_1L: no per-tensor scale
  modelopt,     // NVFP4_MODELOPT export path (§4.4)
  modelopt_fq,  // NVFP4_MODELOPT_FQ triton fake quant (fake-quant only)
  ct,           // NVFP4_CT compressed-tensors (§4.5)
  cutlass_epi,  // NVFP4_CUTLASS_EPI host reference (§4.6)
  cudnn,        // NVFP4_CUDNN documented formula (round the scale up)
  ggml,         // NVFP4_GGML: ggml's UE4M3 and argmin, no per-tensor scale
};

struct NvParams {
  NvScaleRule rule = NvScaleRule::te;
  bool tile_2d = false;               // 16x16 amax tiles (NVFP4_TE_2D)
};

}  // namespace fp4emu
