// GEMM benchmark: fp4emu's GEMM models against the best sgemm available here,
// on the dequantized operands, all in one run (docs/gemm.md "Speed").
//
// Shapes (m×k×n): 1024³, 4096³ and 512×4096×11008 (tokens × hidden ×
// intermediate, the studies' tall-skinny layer), or those of
// --shapes=MxKxN[,MxKxN...]. Formats: mxfp4, nvfp4, hif4.
//
// Baselines, each on the same fp32 operands (A m×k and Bᵀ n×k, row-major):
// - eigen_native: Eigen compiled for the x86 target the SIMD kernels dispatch
//   to (AVX-512 or AVX2 + FMA; src/gemm/eigen_sgemm_*.cpp);
// - openblas: OpenBLAS's cblas_sgemm (its kernels chosen for the CPU at load
//   time), where the build found OpenBLAS.
// These are the two sgemms the `fast` model chooses between (src/gemm/fast.cpp);
// the table names its choice per shape ("fast's sgemm").
// The table at the end names the faster one per shape as "baseline" and gives
// every model's throughput as a ratio to it (targets: fast >= 0.8,
// block_fp32 >= 1, exact >= 0.5, fma_fp32 >= 0.5). A model's time is all of
// gemm() from the packed operands: unpacking (dequantization), layout,
// products, epilogue; the baselines' is the sgemm alone. On a shared machine
// run it with --benchmark_repetitions=3: the table takes each benchmark's
// fastest repetition.
//
// AVX2 forced: FP4EMU_BENCH_TARGET=AVX2 runs the Highway kernels on AVX2, the
// native Eigen baseline from its AVX2 build, and OpenBLAS with its Haswell
// kernels (OPENBLAS_CORETYPE=Haswell, which OpenBLAS reads when it loads: the
// program sets it and runs itself again). Threads: every core for all
// (OMP_NUM_THREADS; OpenBLAS: the same count, set per call).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/threads.hpp"
#include "src/gemm/models.hpp"
#include "src/quant/simd.hpp"

#if FP4EMU_HAVE_OPENBLAS
#include <cblas.h>  // openblas_get_corename
#endif

namespace {

using namespace fp4emu;

struct Shape {
  int64_t m, k, n;
  std::string name() const { return fmt::format("{}x{}x{}", m, k, n); }
  double flops() const { return 2.0 * m * k * n; }
};
std::vector<Shape> shapes = {{1024, 1024, 1024}, {4096, 4096, 4096}, {512, 4096, 11008}};
const char* const kFormats[] = {"mxfp4", "nvfp4", "hif4"};

// "MxKxN,MxKxN...": replaces `shapes`.
bool parse_shapes(const std::string& text) {
  std::vector<Shape> parsed;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    Shape s{};
    char x1 = 0, x2 = 0;
    int used = 0;
    const std::string item = text.substr(at, end - at);
    if (std::sscanf(item.c_str(), "%" SCNd64 "%c%" SCNd64 "%c%" SCNd64 "%n", &s.m, &x1, &s.k, &x2, &s.n, &used) != 5 || x1 != 'x' ||
        x2 != 'x' || used != static_cast<int>(item.size()) || s.m < 1 || s.k < 1 || s.n < 1)
      return false;
    parsed.push_back(s);
    at = end + 1;
  }
  shapes = parsed;
  return !shapes.empty();
}

bool avx2_forced() {
  const char* t = std::getenv("FP4EMU_BENCH_TARGET");
  return t && std::string(t) == "AVX2";
}

Tensor random_tensor(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  Tensor t;
  t.shape = {rows, cols};
  t.data.resize(rows * cols);
  for (float& v : t.data) v = g(rng);
  return t;
}

struct Operands {
  PackedTensor a, b;                  // A m×k along axis 1, B as W n×k along axis 1 (--b-layout nk)
  std::vector<float> da, dbt;         // dequantized: A m×k, Bᵀ n×k
};

// Built once per (format, shape) and kept: quantizing 4096² takes a while.
const Operands& operands(const std::string& format, const Shape& s) {
  static std::map<std::string, Operands> cache;
  const std::string key = format + "/" + s.name();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Operands o;
  QuantOptions q;
  q.recipe = format;
  q.axis = 1;
  o.a = quantize(random_tensor(s.m, s.k, 1), q);
  o.b = quantize(random_tensor(s.n, s.k, 2), q);
  o.da = dequantize(o.a).data;
  o.dbt = dequantize(o.b).data;
  return cache.emplace(key, std::move(o)).first->second;
}

void set_counters(benchmark::State& state, const Shape& s) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(s.flops(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_Baseline(benchmark::State& state, gemm_detail::Sgemm sgemm, std::string format, Shape s) {
  const Operands& o = operands(format, s);
  std::vector<float> c(s.m * s.n);
  const int threads = thread_count(0);
  for (auto _ : state) {
    sgemm(o.da.data(), o.dbt.data(), s.m, s.n, s.k, threads, c.data(), s.n);
    benchmark::DoNotOptimize(c.data());
  }
  set_counters(state, s);
}

void BM_Model(benchmark::State& state, std::string format, Shape s, GemmModel model) {
  const Operands& o = operands(format, s);
  GemmOptions g;
  g.model = model;
  g.b_layout = BLayout::nk;
  for (auto _ : state) {
    Tensor c = gemm(o.a, o.b, g);
    benchmark::DoNotOptimize(c.data.data());
  }
  set_counters(state, s);
}

// Collects each run's time per iteration for the ratio table: with
// --benchmark_repetitions=N the fastest repetition of each, which on a shared
// machine is the one least slowed by other processes (the big shapes run one
// iteration per repetition).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Iteration && r.iterations > 0) {
        const double sec = r.GetAdjustedRealTime();
        auto [it, fresh] = seconds_.emplace(r.benchmark_name(), sec);
        if (!fresh) it->second = std::min(it->second, sec);
      }
    ConsoleReporter::ReportRuns(runs);
  }
  void PrintTable() const {
    fmt::print("\nThroughput relative to the baseline sgemm on the dequantized operands (same run, fastest "
               "repetition of each; higher is faster; SIMD target {})\n",
               simd::dispatched_target());
    fmt::print("| format | m×k×n | eigen_native GFLOP/s | openblas GFLOP/s | baseline | fast's sgemm | fast | "
               "block_fp32 | fma_fp32 | exact |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (const char* f : kFormats)
      for (const Shape& s : shapes) {
        const auto t = [&](const std::string& name) {
          // Names carry suffixes such as "/min_time:0.500/real_time".
          const std::string prefix = fmt::format("{}/{}/{}", name, f, s.name());
          for (const auto& [key, sec] : seconds_)
            if (key == prefix || key.rfind(prefix + "/", 0) == 0) return sec;
          return 0.0;
        };
        const auto gflops = [&](double ms) { return ms > 0 ? fmt::format("{:.1f}", s.flops() / (ms * 1e-3) * 1e-9) : "-"; };
        const double eigen = t("eigen_native"), blas = t("openblas");
        const bool use_blas = blas > 0 && (eigen <= 0 || blas < eigen);
        const double base = use_blas ? blas : eigen;
        if (base <= 0) continue;
        const auto ratio = [&](const char* m) {
          const double sec = t(m);
          return sec > 0 ? fmt::format("{:.2f}", base / sec) : std::string("-");
        };
        fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", f, s.name(), gflops(eigen), gflops(blas),
                   use_blas ? "openblas" : "eigen_native", gemm_detail::fast_sgemm(s.m, s.n, s.k).library,
                   ratio("fast"), ratio("block_fp32"), ratio("fma_fp32"), ratio("exact"));
      }
  }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
  if (avx2_forced()) {
#if FP4EMU_HAVE_OPENBLAS
    // OpenBLAS reads its core type when it loads: run again with it set.
    if (!std::getenv("OPENBLAS_CORETYPE")) {
      setenv("OPENBLAS_CORETYPE", "Haswell", 1);
      execv("/proc/self/exe", argv);
      std::perror("gemm_bench: execv /proc/self/exe");
      return 2;
    }
#endif
    bool found = false;
    for (int64_t t : simd::compiled_targets())
      if (simd::target_name(t) == "AVX2") {
        simd::force_target(t);
        found = true;
      }
    if (!found) {
      std::fprintf(stderr, "FP4EMU_BENCH_TARGET=AVX2 is not a compiled target this CPU supports\n");
      return 2;
    }
  }
  benchmark::AddCustomContext("simd_target", simd::dispatched_target());
#if FP4EMU_HAVE_OPENBLAS
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
#endif
  benchmark::AddCustomContext("eigen_native", gemm_detail::eigen_sgemm_for_cpu().library);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--shapes=", 9) == 0) {
      if (!parse_shapes(argv[i] + 9)) {
        std::fprintf(stderr, "gemm_bench: --shapes wants MxKxN[,MxKxN...] with positive sizes, e.g. "
                             "--shapes=2048x2048x2048, not '%s'\n", argv[i] + 9);
        return 2;
      }
      std::copy(argv + i + 1, argv + argc + 1, argv + i);  // argv[argc] is null
      --argc;
      break;
    }
  for (const char* f : kFormats)
    for (const Shape& s : shapes) {
      const std::string suffix = fmt::format("/{}/{}", f, s.name());
      const bool big = s.flops() > 1e10;
      const auto reg = [&](const std::string& name, auto fn) {
        benchmark::RegisterBenchmark((name + suffix).c_str(), fn)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(big ? 0.01 : 0.5);  // the big shapes: one iteration or two
      };
      reg("eigen_native", [f, s](benchmark::State& st) {
        BM_Baseline(st, gemm_detail::eigen_sgemm_for_cpu().run, f, s);
      });
#if FP4EMU_HAVE_OPENBLAS
      reg("openblas", [f, s](benchmark::State& st) {
        BM_Baseline(st, gemm_detail::openblas_sgemm_if_built().run, f, s);
      });
#endif
      reg("fast", [f, s](benchmark::State& st) { BM_Model(st, f, s, GemmModel::fast); });
      reg("block_fp32", [f, s](benchmark::State& st) { BM_Model(st, f, s, GemmModel::block_fp32); });
      reg("fma_fp32", [f, s](benchmark::State& st) { BM_Model(st, f, s, GemmModel::fma_fp32); });
      reg("exact", [f, s](benchmark::State& st) { BM_Model(st, f, s, GemmModel::exact); });
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintTable();
  benchmark::Shutdown();
  return 0;
}
