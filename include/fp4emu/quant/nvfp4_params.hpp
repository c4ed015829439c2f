#pragma once
// Recipe parameters of NVFP4 (nvfp4.md §4). Data only: the reference quantizer
// (src/quant/reference/nvfp4.cpp) reads these.
#include <cstdint>

namespace fp4emu {

// The library whose operation order the block-scale and element steps follow
// (nvfp4.md §4.0 variant map). Each names a fixed sequence of fp32 operations,
// written out step by step in nvfp4.cpp.
enum class NvScaleRule : uint8_t {
  te,           // NVFP4_TE (§4.1); also NVFP4_TE_2D with tile_2d
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

// How the library's amax reductions (block and tensor) treat NaN.
enum class NvAmaxNan : uint8_t {
  drop,       // fmaxf-style (CUDA kernels, triton maxnumf, ggml's `amax < |v|` loop)
  propagate,  // torch.amax / CUTLASS host reference: any NaN makes the amax NaN
};

// Block error used by 4over6 to choose between the two candidate scales.
enum class NvSelectMetric : uint8_t {
  mae,  // sum |x^ - x| (TE default)
  mse,  // sum (x^ - x)^2
};

struct NvParams {
  NvScaleRule rule = NvScaleRule::te;
  bool tile_2d = false;               // 16x16 amax tiles (NVFP4_TE_2D)
  NvAmaxNan amax_nan = NvAmaxNan::drop;
  // M in the per-tensor scale S_enc = 6*M/G (448; TE 4over6 uses 256 so that
  // the 1.5x candidate stays within E4M3). Encode-convention recipes only.
  float tensor_scale_e4m3_max = 448.0f;
  NvSelectMetric select_metric = NvSelectMetric::mae;  // te_4over6 only
};

}  // namespace fp4emu
