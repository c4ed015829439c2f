// --threads on compare and inspect: the one thread rule (fp4emu/threads.hpp,
// 0 = every hardware thread, 1..1024), and reports that do not depend on it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "fp4emu/io/safetensors.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CliThreads, CompareAndInspectGiveTheSameReportForAnyThreadCount) {
  testing::TempDir dir;
  std::vector<io::SafetensorsTensor> ts;
  for (int l = 0; l < 5; ++l) {
    std::vector<float> x(16 * 256);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.37 * double(i) + l) * std::ldexp(1.0, int(i % 9) - 4));
    ts.push_back({fmt::format("model.layers.{}.mlp.down_proj.input", l), io::from_f32({16, 256}, x)});
  }
  const auto dump = dir / "d.safetensors";
  io::write_safetensors(dump, ts, {});
  for (const char* cmd : {"compare", "inspect"}) {
    std::string first;
    for (int threads : {1, 2, 3, 0}) {
      const auto json = dir / fmt::format("{}_{}.json", cmd, threads);
      const auto r = testing::run_cli(fmt::format("{} {} --threads {} --json {}", cmd, dump.string(), threads,
                                                  json.string()));
      ASSERT_EQ(r.exit_code, 0) << cmd << " --threads " << threads << "\n" << r.output;
      if (first.empty()) first = slurp(json);
      else EXPECT_EQ(slurp(json), first) << cmd << " --threads " << threads;
    }
    for (const char* bad : {"-1", "1025", "two"}) {
      const auto r = testing::run_cli(fmt::format("{} {} --threads {}", cmd, dump.string(), bad));
      EXPECT_EQ(r.exit_code, 2) << cmd << " --threads " << bad << "\n" << r.output;
      EXPECT_NE(r.output.find("--threads"), std::string::npos) << r.output;
    }
  }
}

}  // namespace
}  // namespace fp4emu
