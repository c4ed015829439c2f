// The output-error GEMM of `fp4emu resq` (C = A B^T in double, gemm_f64.hpp)
// against the loop it replaced (each row of C accumulated over k in order, j
// vectorised by the compiler) and against its scalar definition, at the
// shape of a gate/up input of the bench dump cut to n = 1024
// (m = 512 tokens, d = 2048), one and two threads, all in one run. Report
// ratios of these times, not the times.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "fp4emu/analysis/gemm_f64.hpp"

namespace {

constexpr int64_t kM = 512, kD = 2048, kN = 1024;

const std::vector<double>& operand(int64_t rows, uint64_t seed) {
  static std::vector<double> a, b;
  std::vector<double>& v = seed == 1 ? a : b;
  if (v.empty()) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    v.resize(size_t(rows * kD));
    for (double& x : v) x = g(rng);
  }
  return v;
}

// The loop resq used before gemm_f64: B transposed, then C[i][:] += A[i][k] B^T[k][:].
std::vector<double> previous_loop(const std::vector<double>& a, const std::vector<double>& b, int threads) {
  std::vector<double> bt(size_t(kD * kN));
  for (int64_t j = 0; j < kN; ++j)
    for (int64_t k = 0; k < kD; ++k) bt[k * kN + j] = b[j * kD + k];
  std::vector<double> c(size_t(kM * kN), 0.0);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < kM; ++i) {
    double* ci = c.data() + i * kN;
    for (int64_t k = 0; k < kD; ++k) {
      const double aik = a[i * kD + k];
      const double* bk = bt.data() + k * kN;
      for (int64_t j = 0; j < kN; ++j) ci[j] += aik * bk[j];
    }
  }
  return c;
}

void BM_gemm_f64(benchmark::State& state) {
  const auto& a = operand(kM, 1);
  const auto& b = operand(kN, 2);
  for (auto _ : state) benchmark::DoNotOptimize(fp4emu::analysis::gemm_abt_f64(a, b, kM, kD, kN, int(state.range(0))));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kM * kD * kN, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_previous_loop(benchmark::State& state) {
  const auto& a = operand(kM, 1);
  const auto& b = operand(kN, 2);
  for (auto _ : state) benchmark::DoNotOptimize(previous_loop(a, b, int(state.range(0))));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kM * kD * kN, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_scalar_definition(benchmark::State& state) {
  const auto& a = operand(kM, 1);
  const auto& b = operand(kN, 2);
  for (auto _ : state) benchmark::DoNotOptimize(fp4emu::analysis::gemm_abt_f64_scalar(a, b, kM, kD, kN));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kM * kD * kN, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_gemm_f64)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_previous_loop)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_scalar_definition)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
