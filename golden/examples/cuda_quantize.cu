// A small CUDA quantizer for mxfp4.rceil and nvfp4.te, checked through
// fp4emu_golden.h against a golden suite (golden/examples/README.md).
//
//   nvcc -std=c++17 -O2 -I golden -gencode arch=compute_100a,code=sm_100a \
//        -gencode arch=compute_90,code=sm_90 golden/examples/cuda_quantize.cu -o cuda_quantize
//   ./cuda_quantize SUITE_DIR [--host]
//
// One thread quantizes one block. The element and scale conversions are the
// cuda_fp4.h / cuda_fp8.h intrinsics: on sm_100a they are the PTX cvt
// instructions (cvt.rn.satfinite.e2m1x2.f32, cvt.rp.satfinite.ue8m0x2.f32,
// cvt.rn.satfinite.e4m3x2.f32); elsewhere, and on the host (--host, or no
// GPU), the headers' software emulation of them. Exit 0: every case matched.
#define FP4EMU_GOLDEN_IMPLEMENTATION
#include "fp4emu_golden.h"

#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr float kRN16 = 1.0f / 6.0f;  // docs/formats.md: RN16 = fp32(1/6)

__host__ __device__ inline float float_from_bits(unsigned u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

__host__ __device__ float pow2(int e) {  // 2^e for e in -149..127, exact
  return e >= -126 ? float_from_bits(static_cast<unsigned>(e + 127) << 23) : ldexpf(1.0f, e);
}

__host__ __device__ uint8_t e2m1(float y) {  // RNE, saturating at +-6
  return static_cast<uint8_t>(__nv_cvt_float_to_fp4(y, __NV_E2M1, cudaRoundNearest) & 0xF);
}

// mxfp4.rceil (docs/formats.md, MXFP4): scale = cvt.rp.satfinite.ue8m0 of
// fp32(amax * RN16); elements RNE of x * 2^(127 - c). A NaN lane makes the
// scale 0xFF and the codes those of the block with its NaN lanes set to +0.
__host__ __device__ void quantize_mxfp4_rceil(const float* x, uint8_t* scale, uint8_t* codes) {
  float amax = 0.0f;
  bool has_nan = false;
  for (int i = 0; i < 32; ++i) {
    if (x[i] != x[i]) { has_nan = true; continue; }
    amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
  }
  const uint8_t c = __nv_cvt_float_to_e8m0(amax * kRN16, __NV_SATFINITE, cudaRoundPosInf);
  const float inv = pow2(127 - static_cast<int>(c));  // 1/X, c <= 0xFE here
  for (int i = 0; i < 32; ++i) codes[i] = e2m1(x[i] != x[i] ? 0.0f : x[i] * inv);
  *scale = has_nan ? 0xFF : c;
}

__host__ __device__ float ue4m3_value(uint8_t s) {  // bias 7, subnormals m * 2^-9
  const int e = (s >> 3) & 0xF, m = s & 7;
  return e == 0 ? m * pow2(-9) : (8 + m) * pow2(e - 10);
}

// nvfp4.te (docs/formats.md, NVFP4): s = e4m3_satfinite(fp32(amax * fp32(S_enc * RN16)));
// q = e2m1(fp32(x * min(fp32(1 / fp32(s * S_dec)), FLT_MAX))); the block amax drops NaN.
__host__ __device__ void quantize_nvfp4_te(const float* x, float s_enc, float s_dec, uint8_t* scale, uint8_t* codes) {
  float amax = 0.0f;
  // CUDA's fmaxf drops any NaN, a signaling one too; glibc's fmaxf (the host
  // path) returns NaN for a signaling NaN, so the comparison is spelled out.
  for (int i = 0; i < 16; ++i) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
  const uint8_t s = static_cast<uint8_t>(__nv_cvt_float_to_fp8(amax * (s_enc * kRN16), __NV_SATFINITE, __NV_E4M3));
  const float enc = fminf(1.0f / (ue4m3_value(s) * s_dec), FLT_MAX);
  for (int i = 0; i < 16; ++i) codes[i] = e2m1(x[i] * enc);
  *scale = s;
}

// TransformerEngine's per-tensor scale (docs/formats.md, "Per-tensor scale").
void te_tensor_scale(float global_amax, float* s_enc, float* s_dec) {
  float e = fminf(448.0f * 6.0f / global_amax, FLT_MAX);
  if (global_amax == 0.0f || e == 0.0f) e = 1.0f;
  *s_enc = e;
  *s_dec = 1.0f / e;
}

__global__ void quantize_kernel(const float* rows, int nvfp4, size_t blocks, int block, float s_enc, float s_dec,
                                uint8_t* scales, uint8_t* codes) {
  const size_t b = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (b >= blocks) return;
  if (nvfp4) quantize_nvfp4_te(rows + b * block, s_enc, s_dec, &scales[b], codes + b * block);
  else quantize_mxfp4_rceil(rows + b * block, &scales[b], codes + b * block);
}

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Quantizes rows [rows, padded_len] into one code per byte; false on a CUDA error.
bool quantize(bool on_device, const std::vector<float>& rows, int nvfp4, int block, float s_enc, float s_dec,
              std::vector<uint8_t>& scales, std::vector<uint8_t>& codes) {
  const size_t blocks = scales.size();
  if (!on_device) {
    for (size_t b = 0; b < blocks; ++b) {
      if (nvfp4) quantize_nvfp4_te(&rows[b * block], s_enc, s_dec, &scales[b], &codes[b * block]);
      else quantize_mxfp4_rceil(&rows[b * block], &scales[b], &codes[b * block]);
    }
    return true;
  }
  float* d_rows = nullptr;
  uint8_t *d_scales = nullptr, *d_codes = nullptr;
  bool ok = check(cudaMalloc(&d_rows, rows.size() * sizeof(float) + 1), "cudaMalloc") &&
            check(cudaMalloc(&d_scales, blocks + 1), "cudaMalloc") &&
            check(cudaMalloc(&d_codes, codes.size() + 1), "cudaMalloc") &&
            check(cudaMemcpy(d_rows, rows.data(), rows.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  if (ok && blocks) {
    quantize_kernel<<<static_cast<unsigned>((blocks + 127) / 128), 128>>>(d_rows, nvfp4, blocks, block, s_enc, s_dec,
                                                                       d_scales, d_codes);
    ok = check(cudaGetLastError(), "quantize_kernel") && check(cudaDeviceSynchronize(), "quantize_kernel") &&
         check(cudaMemcpy(scales.data(), d_scales, blocks, cudaMemcpyDeviceToHost), "cudaMemcpy") &&
         check(cudaMemcpy(codes.data(), d_codes, codes.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  cudaFree(d_rows);
  cudaFree(d_scales);
  cudaFree(d_codes);
  return ok;
}

// Runs one case; returns its mismatches, or -1 on an error.
long run_case(const fp4g_suite& s, const fp4g_case& c, bool on_device) {
  char err[FP4G_ERR_LEN];
  const int nvfp4 = std::strcmp(c.format, "nvfp4") == 0;
  fp4g_array in, want_codes, want_scales, want_global, want_swz;
  if (fp4g_case_load(&s, &c, "input.npy", &in, err, sizeof err) != 0 ||
      fp4g_case_load(&s, &c, "codes.npy", &want_codes, err, sizeof err) != 0 ||
      fp4g_case_load(&s, &c, "scales.npy", &want_scales, err, sizeof err) != 0) {
    std::fprintf(stderr, "%s\n", err);
    return -1;
  }
  std::vector<float> rows(c.rows * c.padded_len);
  for (size_t r = 0; r < c.rows; ++r) fp4g_case_row(&c, &in, r, &rows[r * c.padded_len]);
  float s_enc = 1.0f, s_dec = 1.0f;
  long bad = 0;
  if (nvfp4) {  // the tensor amax is the framework's; S_enc and S_dec are the kernel's
    if (fp4g_case_load(&s, &c, "global_scale.npy", &want_global, err, sizeof err) != 0 || want_global.count != 3 ||
        !want_global.f32) {
      std::fprintf(stderr, "%s: global_scale.npy: %s\n", c.id, err);
      return -1;
    }
    te_tensor_scale(want_global.f32[0], &s_enc, &s_dec);
    const float got[3] = {want_global.f32[0], s_enc, s_dec};
    bad += static_cast<long>(fp4g_compare_f32(c.id, "global_scale", want_global.f32, got, 3, 3, stdout, 4));
    fp4g_array_free(&want_global);
  }
  std::vector<uint8_t> scales(c.rows * c.blocks_per_row), codes(c.rows * c.padded_len);
  if (!quantize(on_device, rows, nvfp4, static_cast<int>(c.block_size), s_enc, s_dec, scales, codes)) return -1;
  std::vector<uint8_t> packed(c.rows * c.padded_len / 2);
  for (size_t e = 0; e < codes.size(); ++e) packed[e / 2] |= static_cast<uint8_t>(codes[e] << (4 * (e % 2)));
  bad += static_cast<long>(fp4g_compare_codes(&c, want_codes.u8, packed.data(), stdout, 4));
  bad += static_cast<long>(fp4g_compare_u8(c.id, "scales", want_scales.u8, scales.data(), scales.size(),
                                           c.blocks_per_row, stdout, 4));
  if (c.has_swizzled_128x4) {
    if (fp4g_case_load(&s, &c, "scales_swizzled_128x4.npy", &want_swz, err, sizeof err) != 0) {
      std::fprintf(stderr, "%s\n", err);
      return -1;
    }
    std::vector<uint8_t> swz(fp4g_swizzle_128x4_size(&c));
    fp4g_swizzle_128x4(&c, scales.data(), swz.data());
    bad += static_cast<long>(fp4g_compare_u8(c.id, "scales_swizzled_128x4", want_swz.u8, swz.data(), swz.size(),
                                             want_swz.shape[want_swz.ndim - 1], stdout, 4));
    fp4g_array_free(&want_swz);
  }
  fp4g_array_free(&in);
  fp4g_array_free(&want_codes);
  fp4g_array_free(&want_scales);
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cuda_quantize SUITE_DIR [--host]\n");
    return 2;
  }
  int devices = 0;
  const bool host_only = argc > 2 && std::strcmp(argv[2], "--host") == 0;
  const bool on_device = !host_only && cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (on_device) {
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    std::printf("device: %s (sm_%d%d)%s\n", p.name, p.major, p.minor,
                p.major == 10 ? "" : ", not sm_100: the headers' software conversions run, not the PTX ones");
  } else {
    std::printf("%s: the host emulation of the cuda_fp4.h / cuda_fp8.h conversions runs\n",
                host_only ? "--host" : "no CUDA device");
  }
  fp4g_suite s;
  char err[FP4G_ERR_LEN];
  if (fp4g_suite_open(argv[1], &s, err, sizeof err) != 0) {
    std::fprintf(stderr, "%s\n", err);
    return 2;
  }
  size_t cases = 0, failed = 0, stochastic = 0;
  for (size_t k = 0; k < s.count; ++k) {
    const fp4g_case& c = s.cases[k];
    if (c.is_gemm || c.expect_error) continue;  // the kernel has no ragged-tail refusal
    if (std::strcmp(c.recipe, "mxfp4.rceil") != 0 && std::strcmp(c.recipe, "nvfp4.te") != 0) continue;
    // Stochastic rounding needs cvt.rs (sm_100a) and its unsettled byte map
    // (cuda_sr_byte_map.cu); this kernel rounds to nearest only.
    if (c.stochastic) {
      ++stochastic;
      continue;
    }
    const long bad = run_case(s, c, on_device);
    if (bad < 0) return 2;
    ++cases;
    if (bad > 0) {
      ++failed;
      std::printf("FAIL %s: %ld mismatches\n", c.id, bad);
    }
  }
  fp4g_suite_close(&s);
  std::printf("%zu cases of mxfp4.rceil and nvfp4.te, %zu failed (%zu stochastic-rounding cases not run)\n", cases,
              failed, stochastic);
  return cases > 0 && failed == 0 ? 0 : 1;
}
