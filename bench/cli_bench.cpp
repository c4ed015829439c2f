// The CLI end to end, as most users meet it: `fp4emu fake-quant|quantize|
// dequantize` on a 4096 x 4096 fp32 .npy, each run as its own process, against
// the least any such command must do: read its input file and write a file of
// its output's size atomically (same fsyncs, write_file_atomic). The copy runs
// in a forked child right before each run of the command, with the command's
// own input and output sizes, so both see the same state of the machine.
//
// Counters: ratio_to_copy (the command's mean seconds / the paired copies'),
// copy_ms (the copies' mean), peak_MiB (the child's maximum resident set, from
// wait4) and io_MiB (input + output file bytes, the floor for peak memory).
//
// Names: cli/<command>/<recipe>.
#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
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

// In a forked child, for the same reason as input_npy: reads `in` whole and
// writes `out_bytes` bytes to `out` atomically, from one uninitialised buffer
// (the least a command can touch: the input's pages and the output's).
double copy_once(const fs::path& in, const fs::path& out, uintmax_t out_bytes) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const uintmax_t in_bytes = fs::file_size(in);
    const std::unique_ptr<uint8_t[]> buffer(new uint8_t[std::max(in_bytes, out_bytes)]);
    std::FILE* f = std::fopen(in.c_str(), "rb");
    if (f == nullptr || std::fread(buffer.get(), 1, in_bytes, f) != in_bytes) _exit(1);
    std::fclose(f);
    fp4emu::io::write_file_atomic(out, {buffer.get(), static_cast<size_t>(out_bytes)});
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1.0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// args: the command line after the program name, reading `in` and writing `out`.
void run_command(benchmark::State& state, const std::vector<std::string>& args, const fs::path& in,
                 const fs::path& out) {
  if (run_cli(args).seconds < 0) {  // once, for the output's size (and a warm page cache)
    state.SkipWithError(fmt::format("fp4emu {} failed", fmt::join(args, " ")).c_str());
    return;
  }
  const uintmax_t in_bytes = fs::file_size(in), out_bytes = fs::file_size(out);
  const fs::path copy_out = work_dir() / "copy.out";
  double total = 0.0, copy_total = 0.0, peak = 0.0;
  for (auto _ : state) {
    const double copy = copy_once(in, copy_out, out_bytes);
    const ChildRun r = run_cli(args);
    if (r.seconds < 0 || copy < 0) {
      state.SkipWithError(fmt::format("fp4emu {} or its copy baseline failed", fmt::join(args, " ")).c_str());
      return;
    }
    state.SetIterationTime(r.seconds);
    total += r.seconds;
    copy_total += copy;
    peak = std::max(peak, r.peak_mib);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["ratio_to_copy"] = total / copy_total;
  state.counters["copy_ms"] = 1e3 * copy_total / n;
  state.counters["peak_MiB"] = peak;
  state.counters["io_MiB"] = static_cast<double>(in_bytes + out_bytes) / (1 << 20);
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}

void register_command(const std::string& name, std::vector<std::string> args, fs::path in, fs::path out) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [args, in, out](benchmark::State& s) { run_command(s, args, in, out); })
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
}

void register_all() {
  const fs::path x = input_npy(), y = work_dir() / "y.npy", d = work_dir() / "d.npy";
  for (const char* recipe : {"mxfp4.ocp", "mxfp4.microxcaling", "nvfp4.te", "hif4.v14"})
    register_command(fmt::format("cli/fake-quant/{}", recipe),
                     {"fake-quant", x.string(), y.string(), "--recipe", recipe}, x, y);
  // Each quantize writes the packed file its dequantize then reads.
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14"}) {
    const fs::path packed = work_dir() / fmt::format("{}.safetensors", recipe);
    register_command(fmt::format("cli/quantize/{}", recipe),
                     {"quantize", x.string(), packed.string(), "--recipe", recipe}, x, packed);
    register_command(fmt::format("cli/dequantize/{}", recipe), {"dequantize", packed.string(), d.string()}, packed, d);
  }
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
