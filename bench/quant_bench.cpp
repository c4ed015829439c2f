// Throughput of the quantizers, reported as elements per second beside the
// memory-bandwidth yardstick measured in the same run: a plain streaming loop
// y[i] = x[i] * c over the same 16M-element fp32 buffers (read 4 bytes, write
// 4 bytes per element, as fake-quant does).
//
// For every recipe of the registry: fake-quant (fp32 input; bf16 for the
// bf16-only recipes, and for each format's default recipe as well: a bf16
// tensor is held as fp32 values exact in bf16, with the bf16 input dtype),
// quantize to the packed form, and dequantize, each by the reference, the
// fast path on one thread, on two threads and on every thread (OpenMP's
// default: OMP_NUM_THREADS, else every core). Outputs are preallocated and
// reused, as the streaming loop's are.
//
// tools/bench_table.py turns `--benchmark_format=json` output into the ratio
// table of the README (fast/reference, fast/bandwidth).
//
// Stochastic rounding, for one recipe per format that offers it (mxfp4.ocp,
// nvfp4.te, hif4.v14): fake-quant and quantize with each kind of random-bit
// source (Philox in TransformerEngine's stream mapping, Philox by element
// index, given uint8 bytes), op fake_quant_sr_<source> or
// quantize_sr_<source>, beside the recipe's own rounding in the same run.
//
// Names: <op>/<recipe>/<dtype>/<impl>, op in stream, fake_quant, quantize,
// dequantize (and the _sr_ ops above); impl in reference, fast_1t, fast_2t,
// fast_all. FP4EMU_BENCH_TARGET
// names the Highway target to run the fast path on (default: the best one).
//
// Instruction counts (timings on a shared machine drift; instruction counts
// do not): `quant_bench --count <op>/<recipe>/<dtype>/<impl> [--elements N]`
// runs that operation once to allocate, then once more between callgrind's
// start and stop requests, on the first N (default 2^20) values of the same
// input. `valgrind --tool=callgrind --collect-atstart=no quant_bench --count ...`
// counts the instructions of the second call (tools/bench_table.py --count
// does this for every benchmark). Valgrind has no AVX-512: the fast path runs
// its AVX2 (or lower) target there.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <valgrind/callgrind.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/threads.hpp"
#include "src/quant/simd.hpp"

namespace {

using namespace fp4emu;

constexpr int64_t kElements = int64_t{1} << 24;  // 16M

// LLM-activation-like values: a Gaussian body with rare large outliers. The
// first n values of the one sequence (the generator is consumed in order), so
// --count builds only the values it counts, not all 16M under valgrind.
std::vector<float> make_input(int64_t n) {
  std::vector<float> v(n);
  std::mt19937_64 rng(42);
  std::normal_distribution<float> body(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (float& x : v) x = u(rng) < 0.001f ? body(rng) * 100.0f : body(rng);
  return v;
}

const std::vector<float>& input_f32() {
  static const std::vector<float> data = make_input(kElements);
  return data;
}

// The first n values as a [n / 4096, 4096] tensor (bf16: rounded to bf16).
Tensor make_tensor(std::vector<float> values, bool bf16) {
  Tensor x;
  x.shape = {static_cast<int64_t>(values.size()) / 4096, 4096};
  x.data = std::move(values);
  if (bf16)
    for (float& v : x.data) v = bf16_rne(v);
  return x;
}

const Tensor& input(bool bf16) {
  if (bf16) {
    static const Tensor t = make_tensor(input_f32(), true);
    return t;
  }
  static const Tensor t = make_tensor(input_f32(), false);
  return t;
}

struct Impl_ {
  const char* name;
  Impl impl;
  int threads;
};
const Impl_ kImpls[] = {
    {"reference", Impl::reference, 1}, {"fast_1t", Impl::fast, 1}, {"fast_2t", Impl::fast, 2}, {"fast_all", Impl::fast, 0}};

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

// Uniform random bytes, one per element (the given-bits source).
const std::vector<uint8_t>& random_bytes() {
  static const std::vector<uint8_t> data = [] {
    std::vector<uint8_t> v(kElements);
    std::mt19937_64 rng(7);
    for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
    return v;
  }();
  return data;
}

// sr: the stochastic-rounding bit source ("" for the recipe's own rounding);
// `elements` values are quantized.
QuantOptions options_for(const std::string& recipe, bool bf16, const Impl_& impl, const std::string& sr = "",
                         int64_t elements = kElements) {
  QuantOptions o;
  o.recipe = recipe;
  o.input_dtype = bf16 ? InputDType::bf16 : InputDType::f32;
  o.impl = impl.impl;
  o.threads = impl.threads;
  if (sr.empty()) return o;
  o.rounding = Rounding::stochastic;
  if (sr == "bytes") {
    o.stochastic.bytes = std::span<const uint8_t>(random_bytes()).first(static_cast<size_t>(elements));
  } else {
    o.stochastic.seed = 42;
    o.stochastic.rng = sr == "philox_te" ? SrRng::philox_te : SrRng::philox_index;
  }
  return o;
}

void fake_quant_bench(benchmark::State& state, std::string recipe, bool bf16, Impl_ impl, std::string sr) {
  const Tensor& x = input(bf16);
  const QuantOptions o = options_for(recipe, bf16, impl, sr);
  Tensor y;
  fake_quant(x, o, y);  // allocate and touch the output once
  for (auto _ : state) {
    fake_quant(x, o, y);
    benchmark::DoNotOptimize(y.data.data());
  }
  set_counters(state, impl.threads ? impl.threads : all_threads());
}

void quantize_bench(benchmark::State& state, std::string recipe, bool bf16, Impl_ impl, std::string sr) {
  const Tensor& x = input(bf16);
  const QuantOptions o = options_for(recipe, bf16, impl, sr);
  PackedTensor p;
  quantize(x, o, p);
  for (auto _ : state) {
    quantize(x, o, p);
    benchmark::DoNotOptimize(p.codes.data());
  }
  set_counters(state, impl.threads ? impl.threads : all_threads());
}

void dequantize_bench(benchmark::State& state, std::string recipe, bool bf16, Impl_ impl) {
  QuantOptions o = options_for(recipe, bf16, impl);
  o.impl = Impl::automatic;
  const PackedTensor p = quantize(input(bf16), o);
  const DequantOptions d{impl.impl, impl.threads};
  Tensor y;
  dequantize(p, d, y);
  for (auto _ : state) {
    dequantize(p, d, y);
    benchmark::DoNotOptimize(y.data.data());
  }
  set_counters(state, impl.threads ? impl.threads : all_threads());
}

// One benchmark: op, recipe, input dtype (bf16 or f32), implementation, and
// the random-bit source of stochastic rounding (empty: the recipe's rounding).
struct Case {
  std::string op, recipe;
  bool bf16;
  Impl_ impl;
  std::string sr;
  std::string name() const {
    return op + (sr.empty() ? "" : "_sr_" + sr) + "/" + recipe + "/" + (bf16 ? "bf16/" : "f32/") + impl.name;
  }
};

// Every recipe, every operation, every implementation (see the file comment).
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const Recipe& r : all_recipes()) {
    const std::string id(r.id);
    std::vector<bool> dtypes = {r.bf16_input_only};
    if (r.is_default) dtypes.push_back(true);
    for (bool bf16 : dtypes)
      for (const Impl_& impl : kImpls) cases.push_back({"fake_quant", id, bf16, impl, ""});
    if (r.fake_quant_only) continue;
    for (const char* op : {"quantize", "dequantize"})
      for (const Impl_& impl : kImpls) cases.push_back({op, id, r.bf16_input_only, impl, ""});
  }
  for (const char* id : {"mxfp4.ocp", "nvfp4.te", "hif4.v14"})
    for (const char* sr : {"philox_te", "philox_index", "bytes"})
      for (const char* op : {"fake_quant", "quantize"})
        for (const Impl_& impl : kImpls) cases.push_back({op, id, false, impl, sr});
  return cases;
}

void run_case(benchmark::State& state, const Case& c) {
  if (c.op == "fake_quant") return fake_quant_bench(state, c.recipe, c.bf16, c.impl, c.sr);
  if (c.op == "quantize") return quantize_bench(state, c.recipe, c.bf16, c.impl, c.sr);
  return dequantize_bench(state, c.recipe, c.bf16, c.impl);
}

void register_all() {
  auto reg = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
  };
  reg("stream/-/f32/1t", [](benchmark::State& s) { stream(s, 1); });
  reg("stream/-/f32/2t", [](benchmark::State& s) { stream(s, 2); });
  reg("stream/-/f32/all", [](benchmark::State& s) { stream(s, all_threads()); });
  for (const Case& c : all_cases()) reg(c.name(), [c](benchmark::State& s) { run_case(s, c); });
}

// --count: the instructions of one call, on the first `elements` values.
int count_one(const std::string& name, int64_t elements) {
  const Case* found = nullptr;
  const std::vector<Case> cases = all_cases();
  for (const Case& c : cases)
    if (c.name() == name) found = &c;
  if (!found || elements <= 0 || elements > kElements || elements % 4096 != 0) {
    std::fprintf(stderr, "--count: unknown benchmark '%s' or --elements not a multiple of 4096 up to %lld\n",
                 name.c_str(), static_cast<long long>(kElements));
    return 2;
  }
  const Case& c = *found;
  const Tensor x = make_tensor(make_input(elements), c.bf16);
  QuantOptions o = options_for(c.recipe, c.bf16, c.impl, c.sr, elements);
  auto run = [&](Tensor& y, PackedTensor& p, const PackedTensor& packed) {
    if (c.op == "fake_quant") fake_quant(x, o, y);
    if (c.op == "quantize") quantize(x, o, p);
    if (c.op == "dequantize") dequantize(packed, DequantOptions{c.impl.impl, c.impl.threads}, y);
  };
  QuantOptions auto_o = o;
  auto_o.impl = Impl::automatic;
  const PackedTensor packed = c.op == "dequantize" ? quantize(x, auto_o) : PackedTensor{};
  Tensor y;
  PackedTensor p;
  run(y, p, packed);  // allocates the outputs and resolves the dispatch
  CALLGRIND_START_INSTRUMENTATION;
  CALLGRIND_TOGGLE_COLLECT;
  run(y, p, packed);
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_STOP_INSTRUMENTATION;
  std::printf("%s elements=%lld target=%s\n", name.c_str(), static_cast<long long>(elements),
              fp4emu::simd::dispatched_target().c_str());
  return 0;
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
  if (argc >= 3 && std::string(argv[1]) == "--count") {
    int64_t elements = int64_t{1} << 20;
    if (argc == 5 && std::string(argv[3]) == "--elements") elements = std::atoll(argv[4]);
    return count_one(argv[2], elements);
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
