// GEMM benchmark: fp4emu's GEMM models against plain Eigen sgemm on the
// dequantized operands, m = n = k in {512, 1024, 2048}, all in one run.
//
// The table printed at the end gives, per format and size, the throughput of
// each model as a ratio to Eigen's in the same run (targets, issue "GEMM":
// fast within 1.2× of Eigen, i.e. ratio >= 0.83; block_fp32 >= 0.5; exact is
// reported only). Each model's time includes everything gemm() does from the
// packed operands (unpacking, layout, epilogue); Eigen's does not include
// dequantization. Threads: OpenMP's default for both (OMP_NUM_THREADS).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <Eigen/Core>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/quant/quantize.hpp"

namespace {

using namespace fp4emu;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

const int kSizes[] = {512, 1024, 2048};
const char* const kFormats[] = {"mxfp4", "nvfp4", "hif4"};

struct Operands {
  PackedTensor a, b;
  RowMajor da, db;  // dequantized
};

Tensor random_tensor(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  Tensor t;
  t.shape = {rows, cols};
  t.data.resize(rows * cols);
  for (float& v : t.data) v = g(rng);
  return t;
}

// Built once per (format, size) and kept: quantizing 2048² takes a while.
const Operands& operands(const std::string& format, int n) {
  static std::map<std::pair<std::string, int>, Operands> cache;
  auto it = cache.find({format, n});
  if (it != cache.end()) return it->second;
  Operands o;
  QuantOptions q;
  q.recipe = format;
  q.axis = 1;
  o.a = quantize(random_tensor(n, n, 1), q);
  q.axis = 0;
  o.b = quantize(random_tensor(n, n, 2), q);
  const Tensor da = dequantize(o.a), db = dequantize(o.b);
  o.da = Eigen::Map<const RowMajor>(da.data.data(), n, n);
  o.db = Eigen::Map<const RowMajor>(db.data.data(), n, n);
  return cache.emplace(std::make_pair(format, n), std::move(o)).first->second;
}

void set_counters(benchmark::State& state, int n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_EigenSgemm(benchmark::State& state, std::string format, int n) {
  const Operands& o = operands(format, n);
  RowMajor c(n, n);
  for (auto _ : state) {
    c.noalias() = o.da * o.db;
    benchmark::DoNotOptimize(c.data());
  }
  set_counters(state, n);
}

void BM_Model(benchmark::State& state, std::string format, int n, GemmModel model) {
  const Operands& o = operands(format, n);
  GemmOptions g;
  g.model = model;
  for (auto _ : state) {
    Tensor c = gemm(o.a, o.b, g);
    benchmark::DoNotOptimize(c.data.data());
  }
  set_counters(state, n);
}

// Collects each run's time per iteration for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Iteration && r.iterations > 0)
        seconds_[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
  void PrintTable() const {
    fmt::print("\nThroughput relative to Eigen sgemm on the dequantized operands (same run; higher is faster)\n");
    fmt::print("| format | m=n=k | Eigen GFLOP/s | fast | block_fp32 | fma_fp32 | exact |\n|---|---|---|---|---|---|---|\n");
    for (const char* f : kFormats)
      for (int n : kSizes) {
        const auto t = [&](const std::string& name) {
          // Names carry suffixes such as "/min_time:0.500/real_time".
          const std::string prefix = fmt::format("{}/{}/{}", name, f, n);
          for (const auto& [key, s] : seconds_)
            if (key == prefix || key.rfind(prefix + "/", 0) == 0) return s;
          return 0.0;
        };
        const double eigen = t("eigen_sgemm");
        if (eigen <= 0) continue;
        const auto ratio = [&](const char* m) {
          const double s = t(m);
          return s > 0 ? fmt::format("{:.2f}", eigen / s) : std::string("-");
        };
        // Times are in the reporters' unit (ms, set below).
        fmt::print("| {} | {} | {:.1f} | {} | {} | {} | {} |\n", f, n, 2.0 * n * n * n / (eigen * 1e-3) * 1e-9,
                   ratio("fast"), ratio("block_fp32"), ratio("fma_fp32"), ratio("exact"));
      }
  }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
  for (const char* f : kFormats)
    for (int n : kSizes) {
      const std::string suffix = fmt::format("/{}/{}", f, n);
      const auto reg = [&](const std::string& name, auto fn) {
        benchmark::RegisterBenchmark((name + suffix).c_str(), fn)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(n >= 2048 ? 2.0 : 0.5);
      };
      reg("eigen_sgemm", [f, n](benchmark::State& s) { BM_EigenSgemm(s, f, n); });
      reg("fast", [f, n](benchmark::State& s) { BM_Model(s, f, n, GemmModel::fast); });
      reg("block_fp32", [f, n](benchmark::State& s) { BM_Model(s, f, n, GemmModel::block_fp32); });
      reg("fma_fp32", [f, n](benchmark::State& s) { BM_Model(s, f, n, GemmModel::fma_fp32); });
      reg("exact", [f, n](benchmark::State& s) { BM_Model(s, f, n, GemmModel::exact); });
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintTable();
  benchmark::Shutdown();
  return 0;
}
