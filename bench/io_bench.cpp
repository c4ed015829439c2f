// Opening a .safetensors file whose header lists many tensors: parsing,
// validation, the duplicate-name and overlap checks. The time per file should
// grow linearly with the tensor count (the header of 1.5M tensors is about
// 100 MB). Each size's file is written once, to the temp directory.
//
// Names: open_safetensors/<tensors>.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "fp4emu/io/safetensors.hpp"

namespace {

namespace fs = std::filesystem;

// Tensor i: "model.layers.<i>.mlp.down_proj.input", one U8 byte.
fs::path many_tensor_file(int64_t tensors) {
  const fs::path p = fs::temp_directory_path() / fmt::format("fp4emu_io_bench_{}_{}.safetensors", ::getpid(), tensors);
  std::string header = "{\"__metadata__\": {\"format\": \"pt\"}";
  for (int64_t i = 0; i < tensors; ++i)
    header += fmt::format(
        ", \"model.layers.{}.mlp.down_proj.input\": {{\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [{}, {}]}}",
        i, i, i + 1);
  header += "}";
  std::ofstream f(p, std::ios::binary);
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  f << header << std::string(static_cast<size_t>(tensors), '\0');
  return p;
}

void BM_OpenSafetensors(benchmark::State& state) {
  const fs::path p = many_tensor_file(state.range(0));
  for (auto _ : state) {
    fp4emu::io::SafetensorsReader r(p);
    benchmark::DoNotOptimize(r.tensors().size());
  }
  state.counters["header_MB"] = static_cast<double>(fs::file_size(p)) / 1e6;
  state.SetItemsProcessed(state.iterations() * state.range(0));
  fs::remove(p);
}

BENCHMARK(BM_OpenSafetensors)->Name("open_safetensors")->Arg(10000)->Arg(200000)->Arg(1500000)
    ->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
