#pragma once
// The thread-count rule of every OpenMP path (the quantize, dequantize and
// fake-quant fast paths, the GEMM, golden generate) and of the CLI's --threads.

namespace fp4emu {

// Each OpenMP thread gets its own stack, so a count far beyond any machine's
// cores only exhausts memory (100000 threads crash the runtime); no CPU
// fp4emu runs on has more than 1024 hardware threads.
inline constexpr int kMaxThreads = 1024;

// The count to run with: `threads` when it is 1..kMaxThreads, OpenMP's default
// (OMP_NUM_THREADS, else every core; at most kMaxThreads) for 0; InputError
// for anything else.
int thread_count(int threads);

}  // namespace fp4emu
