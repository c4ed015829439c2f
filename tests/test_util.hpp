#pragma once
// Small helpers shared by the tests: temp directories, running the CLI,
// bit-exact float comparison.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace fp4emu::testing {

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("fp4emu_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct CliResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs the fp4emu binary with `args` (already shell-quoted where needed).
// Runs a shell command line, stderr folded into the output.
inline CliResult run_shell(const std::string& command_line) {
  const std::string cmd = command_line + " 2>&1";
  CliResult r{-1, {}};
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CliResult run_cli(const std::string& args) { return run_shell(std::string(FP4EMU_CLI_PATH) + " " + args); }

// Bit-identical, except that any NaN equals any NaN.
inline bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// Random fp32 values over ~40 binades, both signs, with exact zeros.
inline float random_wide(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> exp(-20, 20);
  std::uniform_int_distribution<int> coin(0, 15);
  const int c = coin(rng);
  if (c == 0) return 0.0f;
  // Two draws in one call's arguments would be taken in a compiler-chosen
  // order (GCC right to left, clang left to right): the tensors, and the
  // tests' outcomes, would depend on the compiler. Exponent first, as GCC did.
  const int e = exp(rng);
  const float v = static_cast<float>(std::ldexp(mant(rng), e));
  return (c & 1) ? -v : v;
}

}  // namespace fp4emu::testing
