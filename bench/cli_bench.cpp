// The CLI end to end, as most users meet it: `fp4emu fake-quant|quantize|
// dequantize` on a 4096 x 4096 fp32 .npy, each run as its own process, against
// the least any such command must do: read the .npy and write a file of the
// output's size atomically (same fsyncs, write_file_atomic), in process.
//
// Counters: ratio_to_copy (seconds / the copy baseline's seconds, measured
// first in the same run), peak_MiB (the child's maximum resident set, from
// wait4) and io_MiB (input + output bytes, the floor for peak memory).
//
// Names: copy_baseline, cli/<command>/<recipe>.
#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/npy.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
constexpr int64_t kRows = 4096, kCols = 4096;

const fs::path& work_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / fmt::format("fp4emu_cli_bench_{}", ::getpid());
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Seeded normal activations with a few outliers, written once, a row at a
// time: a child started with posix_spawn inherits this process's peak
// resident set (kept across exec), so this process never holds a tensor.
const fs::path& input_npy() {
  static const fs::path p = [] {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const fs::path path = work_dir() / "x.npy";
    const int64_t shape[] = {kRows, kCols};
    const std::string header = fp4emu::io::encode_npy_header(fp4emu::io::DType::f32, shape);
    fp4emu::io::AtomicFileWriter out(path);
    out.write({reinterpret_cast<const uint8_t*>(header.data()), header.size()});
    std::vector<float> row(kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) row[c] = normal(rng) * ((r * kCols + c) % 997 == 0 ? 50.0f : 1.0f);
      out.write({reinterpret_cast<const uint8_t*>(row.data()), row.size() * sizeof(float)});
    }
    out.commit();
    return path;
  }();
  return p;
}

const fs::path& packed_input() {
  static const fs::path p = work_dir() / "packed.safetensors";
  return p;
}

double g_copy_seconds = 0.0;

struct ChildRun {
  double seconds;
  double peak_mib;
};

ChildRun run_cli(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string cli = FP4EMU_CLI_PATH;
  argv.push_back(cli.data());
  std::vector<std::string> owned = args;
  for (std::string& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, cli.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return {-1.0, 0.0};
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {-1.0, 0.0};
  return {seconds, static_cast<double>(usage.ru_maxrss) / 1024.0};  // ru_maxrss is in KiB on Linux
}

// In a forked child, for the same reason as input_npy.
double copy_once(const fs::path& in, const fs::path& out) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const fp4emu::io::Array a = fp4emu::io::read_npy(in);
    // An fp32 output of the input's shape: header + 4 bytes per element.
    std::vector<uint8_t> bytes(fp4emu::io::encode_npy_header(fp4emu::io::DType::f32, a.shape).size() +
                               a.bytes.size());
    fp4emu::io::write_file_atomic(out, bytes);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1.0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BM_CopyBaseline(benchmark::State& state) {
  const fs::path in = input_npy();
  const fs::path out = work_dir() / "copy.npy";
  double total = 0.0;
  for (auto _ : state) {
    const double s = copy_once(in, out);
    if (s < 0) {
      state.SkipWithError("the copy baseline failed");
      return;
    }
    state.SetIterationTime(s);
    total += s;
  }
  g_copy_seconds = total / static_cast<double>(state.iterations());
  state.counters["io_MiB"] = 2.0 * kRows * kCols * 4 / (1 << 20);
}

// args: the command line after the program name; io_bytes: input + output.
void run_command(benchmark::State& state, const std::vector<std::string>& args, double io_bytes) {
  double total = 0.0, peak = 0.0;
  for (auto _ : state) {
    const ChildRun r = run_cli(args);
    if (r.seconds < 0) {
      state.SkipWithError(fmt::format("fp4emu {} failed", fmt::join(args, " ")).c_str());
      return;
    }
    state.SetIterationTime(r.seconds);
    total += r.seconds;
    peak = std::max(peak, r.peak_mib);
  }
  const double mean = total / static_cast<double>(state.iterations());
  if (g_copy_seconds > 0) state.counters["ratio_to_copy"] = mean / g_copy_seconds;
  state.counters["peak_MiB"] = peak;
  state.counters["io_MiB"] = io_bytes / (1 << 20);
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}

constexpr double kElems = static_cast<double>(kRows * kCols);

void register_all() {
  benchmark::RegisterBenchmark("copy_baseline", BM_CopyBaseline)->UseManualTime()->Unit(benchmark::kMillisecond)
      ->Iterations(5);
  for (const char* recipe : {"mxfp4.ocp", "mxfp4.microxcaling", "nvfp4.te", "hif4.v14"}) {
    benchmark::RegisterBenchmark(fmt::format("cli/fake-quant/{}", recipe).c_str(),
                                 [recipe](benchmark::State& s) {
                                   run_command(s, {"fake-quant", input_npy().string(),
                                                   (work_dir() / "y.npy").string(), "--recipe", recipe},
                                               8.0 * kElems);
                                 })
        ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
  }
  benchmark::RegisterBenchmark("cli/quantize/nvfp4.te", [](benchmark::State& s) {
    run_command(s, {"quantize", input_npy().string(), packed_input().string(), "--recipe", "nvfp4.te"},
                4.5 * kElems);
  })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
  benchmark::RegisterBenchmark("cli/dequantize/nvfp4.te", [](benchmark::State& s) {
    run_command(s, {"dequantize", packed_input().string(), (work_dir() / "d.npy").string()}, 4.5 * kElems);
  })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fs::remove_all(work_dir());
  return 0;
}
