// --threads on compare, inspect, resq, sample and golden verify: the one thread rule
// (fp4emu/threads.hpp, 0 = every hardware thread, 1..1024), and outputs that
// do not depend on it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include <nlohmann/json.hpp>
#include "test_util.hpp"

namespace fp4emu {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Bad counts are refused with exit 2 and a message naming --threads.
void expect_bad_counts_refused(const std::string& command) {
  for (const char* bad : {"-1", "1025", "two"}) {
    const auto r = testing::run_cli(fmt::format("{} --threads {}", command, bad));
    EXPECT_EQ(r.exit_code, 2) << command << " --threads " << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--threads"), std::string::npos) << r.output;
  }
}

// A dump of `layers` down-projection inputs of rows x cols, wave-shaped over
// several binades (`freq` and `binades` vary the values between tests).
std::filesystem::path write_dump(const testing::TempDir& dir, int layers, int64_t rows, int64_t cols, double freq,
                                 int binades) {
  std::vector<io::SafetensorsTensor> ts;
  for (int l = 0; l < layers; ++l) {
    std::vector<float> x(size_t(rows * cols));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float(std::sin(freq * double(i) + l) * std::ldexp(1.0, int(i % binades) - binades / 2));
    ts.push_back({fmt::format("model.layers.{}.mlp.down_proj.input", l), io::from_f32({rows, cols}, x)});
  }
  const auto dump = dir / "d.safetensors";
  io::write_safetensors(dump, ts, {});
  return dump;
}

TEST(CliThreads, CompareAndInspectGiveTheSameReportForAnyThreadCount) {
  testing::TempDir dir;
  const auto dump = write_dump(dir, 5, 16, 256, 0.37, 9);
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
    expect_bad_counts_refused(fmt::format("{} {}", cmd, dump.string()));
  }
}

// resq's output-error products go through the build's sgemm (--output-gemm
// fast, the default), which splits C among its threads but not the sums:
// the report is the same bytes for any thread count, as with f64.
TEST(CliThreads, ResqGivesTheSameReportForAnyThreadCount) {
  testing::TempDir dir;
  const auto dump = write_dump(dir, 2, 96, 512, 0.61, 7);
  for (const char* gemm : {"fast", "f64"}) {
    std::string first;
    for (int threads : {1, 2, 3, 0}) {
      const auto out = dir / fmt::format("rq_{}_{}", gemm, threads);
      const auto r = testing::run_cli(fmt::format("resq {} --format mxfp4,nvfp4 --pattern none,dense,2:4 --n 384 "
                                                  "--output-gemm {} --threads {} --out {}",
                                                  dump.string(), gemm, threads, out.string()));
      ASSERT_EQ(r.exit_code, 0) << gemm << " --threads " << threads << "\n" << r.output;
      if (first.empty()) first = slurp(out / "resq.json");
      else EXPECT_EQ(slurp(out / "resq.json"), first) << "resq --output-gemm " << gemm << " --threads " << threads;
    }
  }
}

TEST(CliThreads, SampleWritesTheSameBytesForAnyThreadCount) {
  testing::TempDir dir;
  // 3 layers = 12 tensors: batches of 1, 2 (even), 3 (a last partial batch)
  // and every thread.
  const std::string options = "--layers 3 --tokens 8 --hidden 128 --seed 5 --progress never";
  std::string first;
  for (int threads : {1, 2, 5, 0}) {
    const auto out = dir / fmt::format("s{}.safetensors", threads);
    const auto r = testing::run_cli(fmt::format("sample {} {} --threads {}", out.string(), options, threads));
    ASSERT_EQ(r.exit_code, 0) << "--threads " << threads << "\n" << r.output;
    if (first.empty()) first = slurp(out);
    else EXPECT_EQ(slurp(out), first) << "sample --threads " << threads;
  }
  expect_bad_counts_refused(fmt::format("sample {} {}", (dir / "bad.safetensors").string(), options));
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.safetensors"));
}

TEST(CliThreads, GoldenVerifyGivesTheSameReportForAnyThreadCount) {
  testing::TempDir dir;
  const auto suite = dir / "suite", cand = dir / "cand";
  ASSERT_EQ(testing::run_cli(fmt::format("golden generate --out {} --recipe mxfp4.ocp,nvfp4.te --family codes "
                                         "--family special --family scale_steps --threads 1",
                                         suite.string()))
                .exit_code,
            0);
  // The candidate: the suite's outputs, with one code flipped in every
  // codes.npy, so that several cases fail and --max-report cuts the listing
  // in the middle of a case.
  const auto m = nlohmann::json::parse(slurp(suite / "manifest.json"));
  int flipped = 0;
  for (const auto& c : m["cases"])
    for (const auto& f : c["files"]) {
      if (f["role"] != "output") continue;
      const auto to = cand / f["path"].get<std::string>();
      std::filesystem::create_directories(to.parent_path());
      std::filesystem::copy_file(suite / f["path"].get<std::string>(), to);
      if (to.filename() != "codes.npy") continue;
      io::Array codes = io::read_npy(to);
      codes.bytes[codes.bytes.size() / 2] ^= 0x11;
      io::write_npy(to, codes);
      ++flipped;
    }
  ASSERT_GE(flipped, 3);
  std::string first;
  for (int threads : {1, 2, 3, 0}) {
    const auto r = testing::run_cli(fmt::format("golden verify --suite {} --candidate {} --max-report 7 --json "
                                                "--threads {}",
                                                suite.string(), cand.string(), threads));
    ASSERT_EQ(r.exit_code, 1) << "--threads " << threads << "\n" << r.output;
    if (first.empty()) first = r.output;
    else EXPECT_EQ(r.output, first) << "golden verify --threads " << threads;
  }
  const auto report = nlohmann::json::parse(first);
  EXPECT_EQ(report["mismatches"].size(), 7u) << first;
  expect_bad_counts_refused(fmt::format("golden verify --suite {} --candidate {}", suite.string(), cand.string()));
}

}  // namespace
}  // namespace fp4emu
