// The file commands hold the input and the output and nothing else of their
// size (docs/architecture.md §7.4): a 64 MiB fp32 input must not make the
// process grow by a third (or fourth) input-sized buffer.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/npy.hpp"
#include "test_util.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using fp4emu::testing::TempDir;

// Exit status and peak resident set (MiB) of the CLI run with `args`.
std::pair<int, double> run_measured(std::vector<std::string> args) {
  std::string cli = FP4EMU_CLI_PATH;
  std::vector<char*> argv{cli.data()};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, cli.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return {-1, 0.0};
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, static_cast<double>(usage.ru_maxrss) / 1024.0};
}

constexpr int64_t kRows = 4096, kCols = 4096;  // 64 MiB of fp32
constexpr double kTensorMiB = kRows * kCols * 4.0 / (1 << 20);
// The program, its libraries, OpenMP stacks and per-thread tiles, with the
// commands run on two threads so that the bound does not grow with the
// machine: measured 13-15 MiB. A copy of the packed codes (8 MiB) or a third
// input-sized buffer would exceed it.
constexpr double kOverheadMiB = 24.0;
constexpr double kMiB = 1 << 20;

// AddressSanitizer's shadow memory and quarantine add tens of MiB that are
// not the program's buffers: under it the bound says nothing.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Written a row at a time. A child started with posix_spawn (vfork) inherits
// this process's peak resident set, which the kernel keeps across exec: the
// test itself must never hold the tensor.
fs::path write_input(const TempDir& dir) {
  const fs::path p = dir / "x.npy";
  const int64_t shape[] = {kRows, kCols};
  const std::string header = fp4emu::io::encode_npy_header(fp4emu::io::DType::f32, shape);
  fp4emu::io::AtomicFileWriter out(p);
  out.write({reinterpret_cast<const uint8_t*>(header.data()), header.size()});
  std::vector<float> row(kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c)
      row[c] = static_cast<float>(static_cast<int>((r * kCols + c) % 1013) - 506) * 0.01f;
    out.write({reinterpret_cast<const uint8_t*>(row.data()), row.size() * sizeof(float)});
  }
  out.commit();
  return p;
}

TEST(CliMemory, FakeQuantHoldsOnlyInputAndOutput) {
  if (kSanitized) GTEST_SKIP() << "peak memory is not measurable under AddressSanitizer";
  TempDir dir;
  const fs::path in = write_input(dir);
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14"}) {
    const auto [code, peak] =
        run_measured({"fake-quant", in.string(), (dir / "y.npy").string(), "--recipe", recipe, "--threads", "2"});
    ASSERT_EQ(code, 0) << recipe;
    EXPECT_LT(peak, 2 * kTensorMiB + kOverheadMiB) << recipe << ": peak " << peak << " MiB";
  }
}

TEST(CliMemory, QuantizeAndDequantizeHoldOnlyInputAndOutput) {
  if (kSanitized) GTEST_SKIP() << "peak memory is not measurable under AddressSanitizer";
  TempDir dir;
  const fs::path in = write_input(dir);
  const fs::path packed = dir / "p.safetensors";
  // quantize: the input and the packed output (about an eighth of it).
  const auto [qcode, qpeak] =
      run_measured({"quantize", in.string(), packed.string(), "--recipe", "nvfp4.te", "--threads", "2"});
  ASSERT_EQ(qcode, 0);
  const double packed_mib = static_cast<double>(fs::file_size(packed)) / kMiB;
  EXPECT_LT(qpeak, kTensorMiB + packed_mib + kOverheadMiB) << "quantize peak " << qpeak << " MiB";
  // dequantize: the packed input and the fp32 output.
  const auto [dcode, dpeak] =
      run_measured({"dequantize", packed.string(), (dir / "d.npy").string(), "--threads", "2"});
  ASSERT_EQ(dcode, 0);
  EXPECT_LT(dpeak, packed_mib + kTensorMiB + kOverheadMiB) << "dequantize peak " << dpeak << " MiB";
}

}  // namespace
