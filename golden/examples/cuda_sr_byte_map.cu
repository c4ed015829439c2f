// Which byte of the 32-bit random word feeds which element of PTX
// `cvt.rs.satfinite.e2m1x4.f32`? The PTX ISA text and TransformerEngine's
// software fallback read it differently (docs/formats.md, "Stochastic
// rounding"; fp4emu's --rbits-map ptx | te). One run on an sm_100 GPU
// settles it; this program is that run.
//
//   nvcc -std=c++17 -O2 -gencode arch=compute_100a,code=sm_100a \
//        golden/examples/cuda_sr_byte_map.cu -o cuda_sr_byte_map
//   ./cuda_sr_byte_map
//
// Probe: elements 0..3 of a group are called as TE calls the instruction,
// {a, b, e, f} = {x3, x2, x1, x0}, so element j comes back in nibble j of the
// 16-bit result (TE's ptx.cuh usage). Element j holds 2.4 and the others 0;
// the word holds 0xFF in byte k and 0x00 elsewhere. 2.4 lies 0.4 of the way
// from 2 to 3: floor(0.4 * 2^8) = 0x66, so it rounds up to 3 (code 0x5) iff
// its byte r satisfies 0x66 + r >= 0x100 (docs/spec/nvfp4.md EX-N8: r >= 0x9A).
// With byte 0x00 it stays 2 (code 0x4). The 16 runs (j, k) give the byte
// feeding each element, compared with both published maps:
//   te : element j <- byte j            (TE's stochastic_round_fp4_e2m1 fallback)
//   ptx: element 0, 1, 2, 3 <- byte 0, 2, 1, 3  (the PTX ISA text)
// Exit 0: the hardware matches one map (printed); 1: neither; 77: no sm_100
// GPU here (nothing to settle, the build alone is checked).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace {

__global__ void cvt_rs_e2m1x4(const float* x, const uint32_t* rbits, uint16_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH_FEAT_SM100_ALL || __CUDA_ARCH_FEAT_SM101_ALL || __CUDA_ARCH_FEAT_SM103_ALL)
  const float* g = x + 4 * i;
  uint16_t d;
  asm volatile("cvt.rs.satfinite.e2m1x4.f32 %0, {%1, %2, %3, %4}, %5;\n"
               : "=h"(d)
               : "f"(g[3]), "f"(g[2]), "f"(g[1]), "f"(g[0]), "r"(rbits[i]));
  out[i] = d;
#else
  out[i] = 0xFFFF;  // not an sm_100 family target: no cvt.rs here
#endif
}

bool has_sm100() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return false;
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return false;
  std::printf("device 0: %s, sm_%d%d\n", p.name, p.major, p.minor);
  return p.major == 10;
}

}  // namespace

int main() {
  if (!has_sm100()) {
    std::printf("no sm_100 GPU: cvt.rs.satfinite.e2m1x4.f32 cannot run here; the byte map stays unsettled\n");
    return 77;
  }
  constexpr int kRuns = 16;  // (element j, byte k)
  float x[4 * kRuns] = {};
  uint32_t rbits[kRuns];
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 4; ++k) {
      const int run = 4 * j + k;
      x[4 * run + j] = 2.4f;
      rbits[run] = 0xFFu << (8 * k);
    }
  float* dx = nullptr;
  uint32_t* dr = nullptr;
  uint16_t* dout = nullptr;
  uint16_t out[kRuns];
  if (cudaMalloc(&dx, sizeof x) != cudaSuccess || cudaMalloc(&dr, sizeof rbits) != cudaSuccess ||
      cudaMalloc(&dout, sizeof out) != cudaSuccess ||
      cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(dr, rbits, sizeof rbits, cudaMemcpyHostToDevice) != cudaSuccess) {
    std::printf("CUDA setup failed\n");
    return 1;
  }
  cvt_rs_e2m1x4<<<1, kRuns>>>(dx, dr, dout, kRuns);
  if (cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("kernel failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  // feeds[j] = the byte whose 0xFF rounded element j up (-1: none or several).
  int feeds[4] = {-1, -1, -1, -1};
  bool clean = true;
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 4; ++k) {
      const uint16_t d = out[4 * j + k];
      const unsigned code = (d >> (4 * j)) & 0xF;
      const bool others_zero = (d & ~(0xFu << (4 * j)) & 0xFFFF) == 0;
      std::printf("element %d, byte %d = 0xFF: result 0x%04x, element code 0x%x\n", j, k, d, code);
      if (!others_zero || (code != 0x4 && code != 0x5)) clean = false;
      if (code == 0x5) feeds[j] = feeds[j] == -1 ? k : -2;
    }
  static constexpr int kTe[4] = {0, 1, 2, 3}, kPtx[4] = {0, 2, 1, 3};
  bool te = clean, ptx = clean;
  for (int j = 0; j < 4; ++j) te = te && feeds[j] == kTe[j], ptx = ptx && feeds[j] == kPtx[j];
  std::printf("bytes feeding elements 0..3: %d %d %d %d\n", feeds[0], feeds[1], feeds[2], feeds[3]);
  if (te) std::printf("hardware matches --rbits-map te (TransformerEngine's fallback)\n");
  if (ptx) std::printf("hardware matches --rbits-map ptx (the PTX ISA text)\n");
  if (!te && !ptx) std::printf("hardware matches neither map: report this with the lines above\n");
  cudaFree(dx), cudaFree(dr), cudaFree(dout);
  return te || ptx ? 0 : 1;
}
