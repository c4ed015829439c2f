#pragma once
// Recipe parameters of NVFP4 (docs/spec/nvfp4.md §4). Data only: the reference quantizer
// (src/quant/reference/nvfp4.cpp) reads these.
#include <cstdint>

namespace fp4emu {

// The library whose operation order the block-scale and element steps follow
// (docs/spec/nvfp4.md §4.0 variant map). Each names a fixed sequence of fp32 operations,
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
  drop,       // fmaxf from 0 (CUDA kernels, ggml's `amax < |v|` loop): NaN never wins
  propagate,  // torch.amax / CUTLASS host reference: any NaN makes the amax NaN
  maxnum,     // triton tl.max (maxnum over the lanes, no zero start): NaN only when every lane is NaN
};

// Where the library's PyTorch operations run (docs/formats.md "Device
// semantics"). Only `tensor / python_scalar` differs: PyTorch's CUDA kernel
// multiplies by fp32(1/scalar) (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu),
// the CPU divides.
enum class NvDevice : uint8_t {
  cuda,
  cpu,
};

// Which compressed-tensors release the `ct` rule follows (docs/formats.md).
enum class NvCtRelease : uint8_t {
  legacy,   // neuralmagic/compressed-tensors 52792be0 (releases 0.13, 0.14): no guards
  current,  // vllm-project/compressed-tensors 0.18.0 (ac8e2ba8): G >= FLT_MIN, NaN/Inf S_enc -> 1
};

// How the library turns codes and scales back into values (docs/formats.md,
// NVFP4 dequantize table).
enum class NvDecode : uint8_t {
  code_times_scale_then_tensor,  // fp32(fp32(q*s) * S_dec): no library defines one (cudnn, cutlass_epi)
  te,              // q * fp32(fp32(s*G) * fp32(1/(6*M))), TE dequantize_nvfp4.cuh
  torchao,         // q * fp32(S_dec*s): torchao NVFP4Tensor.dequantize / get_hp_scales (0x8 -> -0)
  modelopt,        // q * fp32(s*S_dec): ModelOpt NVFP4QTensor.dequantize (table: 0x8 -> +0)
  ct,              // q * fp32(s/S_enc): compressed-tensors _dequantize
  ggml,            // kvalue * (s/2): dequantize_row_nvfp4 (0x8 -> +0)
};

// Block error used by 4over6 to choose between the two candidate scales.
enum class NvSelectMetric : uint8_t {
  mae,  // sum |x^ - x| (TE default)
  mse,  // sum (x^ - x)^2
};

struct NvParams {
  NvScaleRule rule = NvScaleRule::te;
  bool tile_2d = false;               // 16x16 amax tiles (NVFP4_TE_2D)
  NvAmaxNan amax_nan = NvAmaxNan::drop;         // block amax
  NvAmaxNan tensor_amax_nan = NvAmaxNan::drop;  // per-tensor amax G
  // M in the per-tensor scale S_enc = 6*M/G (448; TE 4over6 uses 256 so that
  // the 1.5x candidate stays within E4M3). Encode-convention recipes only.
  float tensor_scale_e4m3_max = 448.0f;
  NvSelectMetric select_metric = NvSelectMetric::mae;  // te_4over6 only
  NvDecode decode = NvDecode::code_times_scale_then_tensor;
  NvDevice device = NvDevice::cuda;            // PyTorch-based rules (torchao*, modelopt*, ct)
  NvCtRelease ct_release = NvCtRelease::current;  // ct only
  // ct only: compressed-tensors' triton path (CUDA) rounds x/d to bf16 before
  // the E2M1 table (forward_helpers.py _quantize_kernel).
  bool ct_bf16_quotient = false;
};

}  // namespace fp4emu
