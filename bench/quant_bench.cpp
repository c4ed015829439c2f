// Throughput of the quantizers, reported as elements per second beside the
// memory-bandwidth yardstick measured in the same run: a plain streaming loop
// y[i] = x[i] * c over the same 16M-element fp32 buffers (read 4 bytes, write
// 4 bytes per element, as fake-quant does).
//
// For each format's default recipe (and the hardware recipes hif4.a6,
// mxfp4.rceil): fake-quant of fp32 and bf16 tensors (a bf16 tensor is held as
// fp32 values exact in bf16, with the bf16 input dtype), quantize to the
// packed form, and dequantize, each by the reference, the fast path on one
// thread and the fast path on every thread (OpenMP's default:
// OMP_NUM_THREADS, else every core). Outputs are preallocated and reused,
// as the streaming loop's are.
//
// tools/bench_table.py turns `--benchmark_format=json` output into the ratio
// table of the README (fast/reference, fast/bandwidth).
//
// Names: <op>/<recipe>/<dtype>/<impl>, op in stream, fake_quant, quantize,
// dequantize; impl in reference, fast_1t, fast_all. FP4EMU_BENCH_TARGET names
// the Highway target to run the fast path on (default: the best one).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "src/quant/simd.hpp"
#include "fp4emu/threads.hpp"

namespace {

using namespace fp4emu;

constexpr int64_t kElements = int64_t{1} << 24;  // 16M

// LLM-activation-like values: a Gaussian body with rare large outliers.
const std::vector<float>& input_f32() {
  static const std::vector<float> data = [] {
    std::vector<float> v(kElements);
    std::mt19937_64 rng(42);
    std::normal_distribution<float> body(0.0f, 1.0f);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (float& x : v) x = u(rng) < 0.001f ? body(rng) * 100.0f : body(rng);
    return v;
  }();
  return data;
}

const Tensor& input_f32_tensor() {
  static const Tensor t = [] {
    Tensor x;
    x.shape = {kElements / 4096, 4096};
    x.data = input_f32();
    return x;
  }();
  return t;
}

const Tensor& input_bf16_tensor() {
  static const Tensor t = [] {
    Tensor x = input_f32_tensor();
    for (float& v : x.data) v = bf16_rne(v);
    return x;
  }();
  return t;
}

const Tensor& input(bool bf16) { return bf16 ? input_bf16_tensor() : input_f32_tensor(); }

struct Impl_ {
  const char* name;
  Impl impl;
  int threads;
};
const Impl_ kImpls[] = {{"reference", Impl::reference, 1}, {"fast_1t", Impl::fast, 1}, {"fast_all", Impl::fast, 0}};

int all_threads() { return fp4emu::thread_count(0); }

void set_counters(benchmark::State& state, int threads) {
  state.SetItemsProcessed(state.iterations() * kElements);
  state.SetBytesProcessed(state.iterations() * kElements * 8);
  state.counters["threads"] = threads;
}

void stream(benchmark::State& state, int threads) {
  const std::vector<float>& x = input_f32();
  std::vector<float> y(kElements);
  const float c = 1.0009765625f;
  for (auto _ : state) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < kElements; ++i) y[i] = x[i] * c;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, threads);
}

QuantOptions options_for(const std::string& recipe, bool bf16, const Impl_& impl) {
  QuantOptions o;
  o.recipe = recipe;
  o.input_dtype = bf16 ? InputDType::bf16 : InputDType::f32;
  o.impl = impl.impl;
  o.threads = impl.threads;
  return o;
}

void fake_quant_bench(benchmark::State& state, std::string recipe, bool bf16, Impl_ impl) {
  const Tensor& x = input(bf16);
  const QuantOptions o = options_for(recipe, bf16, impl);
  Tensor y;
  fake_quant(x, o, y);  // allocate and touch the output once
  for (auto _ : state) {
    fake_quant(x, o, y);
    benchmark::DoNotOptimize(y.data.data());
  }
  set_counters(state, impl.threads ? impl.threads : all_threads());
}

void quantize_bench(benchmark::State& state, std::string recipe, Impl_ impl) {
  const Tensor& x = input(false);
  const QuantOptions o = options_for(recipe, false, impl);
  PackedTensor p;
  quantize(x, o, p);
  for (auto _ : state) {
    quantize(x, o, p);
    benchmark::DoNotOptimize(p.codes.data());
  }
  set_counters(state, impl.threads ? impl.threads : all_threads());
}

void dequantize_bench(benchmark::State& state, std::string recipe, Impl_ impl) {
  QuantOptions o = options_for(recipe, false, impl);
  o.impl = Impl::automatic;
  const PackedTensor p = quantize(input(false), o);
  const DequantOptions d{impl.impl, impl.threads};
  Tensor y;
  dequantize(p, d, y);
  for (auto _ : state) {
    dequantize(p, d, y);
    benchmark::DoNotOptimize(y.data.data());
  }
  set_counters(state, impl.threads ? impl.threads : all_threads());
}

void register_all() {
  auto reg = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
  };
  reg("stream/-/f32/1t", [](benchmark::State& s) { stream(s, 1); });
  reg("stream/-/f32/all", [](benchmark::State& s) { stream(s, all_threads()); });
  // Default recipes, then the hardware recipes that are not defaults.
  const std::vector<std::pair<std::string, bool>> recipes = {
      {"hif4.v14", false}, {"mxfp4.ocp", false}, {"nvfp4.te", false}, {"hif4.a6", true}, {"mxfp4.rceil", false}};
  for (const auto& [recipe, bf16_only] : recipes) {
    for (bool bf16 : {false, true}) {
      if (bf16_only && !bf16) continue;
      for (const Impl_& impl : kImpls)
        reg("fake_quant/" + recipe + "/" + (bf16 ? "bf16/" : "f32/") + impl.name,
            [=](benchmark::State& s) { fake_quant_bench(s, recipe, bf16, impl); });
    }
  }
  for (const char* recipe : {"hif4.v14", "mxfp4.ocp", "nvfp4.te"}) {
    for (const Impl_& impl : kImpls) {
      const std::string r = recipe;
      reg("quantize/" + r + "/f32/" + impl.name, [=](benchmark::State& s) { quantize_bench(s, r, impl); });
    }
    for (const Impl_& impl : kImpls) {
      const std::string r = recipe;
      reg("dequantize/" + r + "/f32/" + impl.name, [=](benchmark::State& s) { dequantize_bench(s, r, impl); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // FP4EMU_BENCH_TARGET=AVX2 (SSE4, SCALAR, ...): run the fast path on that Highway target.
  if (const char* want = std::getenv("FP4EMU_BENCH_TARGET")) {
    bool found = false;
    for (int64_t t : fp4emu::simd::compiled_targets())
      if (fp4emu::simd::target_name(t) == want) {
        fp4emu::simd::force_target(t);
        found = true;
      }
    if (!found) {
      std::fprintf(stderr, "FP4EMU_BENCH_TARGET=%s is not a compiled target this CPU supports\n", want);
      return 2;
    }
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("simd_target", fp4emu::simd::dispatched_target());
  benchmark::AddCustomContext("threads_all", std::to_string(all_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
