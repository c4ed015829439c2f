// `fp4emu inspect`: the listing and its value statistics against plain loops
// here; header-only mode; bad input.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::TempDir;

TEST(InspectCli, ListsTensorsWithStatisticsFromPlainLoops) {
  TempDir dir;
  std::vector<float> a(3 * 1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(std::sin(0.37 * i) * (i % 97 == 0 ? 50 : 1));
  a[10] = 0.0f;
  a[11] = std::numeric_limits<float>::quiet_NaN();
  a[12] = -std::numeric_limits<float>::infinity();
  const std::vector<uint16_t> b_bits = {0x3F80, 0xC040, 0x0000, 0x8000};  // bf16 1, -3, 0, -0
  io::write_safetensors(dir / "d.safetensors",
                        {{"acts", io::from_f32({3, 1000}, a)},
                         {"b", io::from_bf16_bits({2, 2}, b_bits)},
                         {"codes", io::from_u8({4}, std::vector<uint8_t>{1, 2, 3, 4})}},
                        {{"phase", "decode"}});
  const auto r = run_cli(fmt::format("inspect {} --json {}", (dir / "d.safetensors").string(), (dir / "i.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("metadata phase = decode"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("3 tensors"), std::string::npos);
  EXPECT_NE(r.output.find("[3, 1000]"), std::string::npos);
  EXPECT_NE(r.output.find("not a float tensor"), std::string::npos);
  EXPECT_NE(r.output.find("holds 1 NaN and 1 Inf"), std::string::npos);

  double mn = 1e300, mx = -1e300, amax = 0, ss = 0;
  int64_t finite = 0, zeros = 0;
  for (float v : a) {
    if (!std::isfinite(v)) continue;
    ++finite;
    zeros += v == 0;
    mn = std::min(mn, double(v));
    mx = std::max(mx, double(v));
    amax = std::max(amax, std::fabs(double(v)));
    ss += double(v) * v;
  }
  std::ifstream f(dir / "i.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["tensors"].size(), 3u);
  const nlohmann::json& t = j["tensors"][0];
  EXPECT_EQ(t["name"], "acts");
  EXPECT_EQ(t["bytes"], 12000);
  EXPECT_EQ(t["min"].get<double>(), mn);
  EXPECT_EQ(t["max"].get<double>(), mx);
  EXPECT_EQ(t["amax"].get<double>(), amax);
  EXPECT_NEAR(t["rms"].get<double>(), std::sqrt(ss / finite), 1e-12 * std::sqrt(ss / finite));
  EXPECT_EQ(t["nan"], 1);
  EXPECT_EQ(t["inf"], 1);
  EXPECT_EQ(t["zeros"], zeros);
  EXPECT_EQ(t["finite"], finite);
  const nlohmann::json& b = j["tensors"][1];
  EXPECT_EQ(b["min"].get<double>(), -3.0);
  EXPECT_EQ(b["max"].get<double>(), 1.0);
  EXPECT_EQ(b["zeros"], 2);
  EXPECT_NEAR(b["rms"].get<double>(), std::sqrt(10.0 / 4), 1e-15);
  EXPECT_FALSE(j["tensors"][2].contains("min"));
}

TEST(InspectCli, HeaderOnlyAndSelection) {
  TempDir dir;
  io::write_safetensors(dir / "d.safetensors", {{"model.layers.0.x", io::from_f32({2}, std::vector<float>{1, 2})},
                                                 {"model.layers.1.x", io::from_f32({2}, std::vector<float>{3, 4})}});
  auto r = run_cli(fmt::format("inspect {} --header-only --tensor 'model.layers.1.*'", (dir / "d.safetensors").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.layers.1.x"), std::string::npos);
  EXPECT_EQ(r.output.find("model.layers.0.x"), std::string::npos);
  EXPECT_EQ(r.output.find("rms"), std::string::npos);
  io::write_npy(dir / "x.npy", io::from_f32({2, 2}, std::vector<float>{-1, 0, 5, 2}));
  r = run_cli(fmt::format("inspect {}", (dir / "x.npy").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("npy, 1 tensor"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("x.npy"), std::string::npos);
}

TEST(InspectCli, BadInputExitsWith2) {
  TempDir dir;
  io::write_safetensors(dir / "d.safetensors", {{"x", io::from_f32({2}, std::vector<float>{1, 2})}});
  {
    std::ofstream(dir / "bad.safetensors", std::ios::binary) << std::string("\x10\0\0\0\0\0\0\0{\"x\":", 13);
  }
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {(dir / "d.safetensors").string() + " --tensor y", "no tensor named 'y'"},
           {(dir / "bad.safetensors").string(), "header length field is 16"},
           {(dir / "none.safetensors").string(), "none.safetensors"},
           {(dir / "d.safetensors").string() + " --json " + (dir / "d.safetensors").string(), "is the same file as the input"},
           {(dir / "d.safetensors").string() + " --json " + (dir / "no" / "i.json").string(), "does not exist"}}) {
    const auto r = run_cli("inspect " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace fp4emu
