// `fp4emu underflow` and `fp4emu resq` end to end on a crafted dump: files
// written, numbers equal to plain-loop recomputations, duplicates of shared
// inputs skipped, bad input refused with exit code 2 and no output.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::TempDir;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Tensor random_tensor(int64_t m, int64_t d, uint32_t seed, float hot) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  Tensor t{{m, d}, std::vector<float>(size_t(m * d))};
  for (float& v : t.data) v = g(rng);
  for (int64_t r = 0; r < m; ++r) t.data[r * d + 3] *= hot;
  return t;
}

// Two layers: q/k/v carry the same tensor (two of them are duplicates), o and
// down differ.
std::filesystem::path write_dump(const TempDir& dir, Tensor* down0) {
  std::vector<io::SafetensorsTensor> ts;
  for (int l = 0; l < 2; ++l) {
    const Tensor qkv = random_tensor(8, 64, 10 + l, 20.0f);
    for (const char* p : {"q", "k", "v"})
      ts.push_back({fmt::format("model.layers.{}.self_attn.{}_proj.input", l, p), io::from_f32(qkv.shape, qkv.data)});
    const Tensor o = random_tensor(8, 64, 20 + l, 1.0f);
    ts.push_back({fmt::format("model.layers.{}.self_attn.o_proj.input", l), io::from_f32(o.shape, o.data)});
    const Tensor down = random_tensor(8, 128, 30 + l, 50.0f);
    if (l == 0) *down0 = down;
    ts.push_back({fmt::format("model.layers.{}.mlp.down_proj.input", l), io::from_f32(down.shape, down.data)});
  }
  const auto path = dir / "dump.safetensors";
  io::write_safetensors(path, ts, {{"phase", "decode"}, {"step", "7"}});
  return path;
}

TEST(UnderflowCli, WritesTablesAndHeatmapsWithPlainLoopNumbers) {
  TempDir dir;
  Tensor down0;
  const auto dump = write_dump(dir, &down0);
  const auto out = dir / "uf";
  const auto r = run_cli(fmt::format("underflow {} --format mxfp4,nvfp4 --transform none --transform rht --out {}",
                                     dump.string(), out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"summary.csv", "summary.json", "summary_heatmap.png", "summary_heatmap.csv",
                        "detail_heatmap.png", "detail_heatmap.csv"})
    EXPECT_TRUE(std::filesystem::exists(out / f)) << f;
  EXPECT_EQ(slurp(out / "summary_heatmap.png").substr(1, 3), "PNG");

  const auto j = nlohmann::json::parse(slurp(out / "summary.json"));
  EXPECT_EQ(j["aliases"].size(), 4u);  // k and v of two layers
  EXPECT_EQ(j["tensors"].size(), 6u * 2 * 2);  // 3 tensors x 2 layers x 2 formats x 2 transforms
  // The down_proj of layer 0 under MXFP4, no transform: UR by plain loops.
  QuantOptions o;
  o.recipe = "mxfp4";
  const Tensor q = fake_quant(down0, o);
  int64_t nz = 0, fl = 0;
  for (size_t i = 0; i < q.data.size(); ++i)
    if (down0.data[i] != 0) ++nz, fl += q.data[i] == 0;
  bool found = false;
  for (const auto& t : j["tensors"])
    if (t["tensor"] == "model.layers.0.mlp.down_proj.input" && t["recipe"] == "mxfp4.ocp" && t["transform"] == "none") {
      found = true;
      EXPECT_EQ(t["n_nonzero"], nz);
      EXPECT_EQ(t["n_underflow"], fl);
      EXPECT_EQ(t["layer"], 0);
      EXPECT_EQ(t["kind"], "down_in");
      EXPECT_EQ(t["token_ur"].size(), 8u);
      EXPECT_EQ(t["channel_ur"].size(), 128u);
    }
  EXPECT_TRUE(found);
  // The CSV carries the same count, and the dump's phase and step.
  const std::string csv = slurp(out / "summary.csv");
  EXPECT_NE(csv.find(fmt::format("model.layers.0.mlp.down_proj.input,0,down_in,down,decode,7,8,128,mxfp4,mxfp4.ocp,"
                                 "none,32,1024,{},{},",
                                 nz, fl)),
            std::string::npos)
      << csv.substr(0, 600);
  // Summary heatmap matrix: one row per (format, transform, kind, layer) with data.
  const std::string hm = slurp(out / "summary_heatmap.csv");
  EXPECT_NE(hm.find(fmt::format("mxfp4,mxfp4.ocp,none,down_in,0,{},{},", nz, fl)), std::string::npos) << hm;
}

TEST(UnderflowCli, BadInputIsExitTwoWithoutOutput) {
  TempDir dir;
  Tensor down0;
  const auto dump = write_dump(dir, &down0);
  const auto out = dir / "none";
  for (const std::string& args :
       {"underflow " + (dir / "missing.safetensors").string() + " --out " + out.string(),
        "underflow " + dump.string() + " --tensor 'nope.*' --out " + out.string(),
        "underflow " + dump.string() + " --format fp8 --out " + out.string(),
        "underflow " + dump.string() + " --transform rht:b=48 --out " + out.string(),
        "underflow " + dump.string() + " --transform rht:b=256 --out " + out.string(),  // d = 64 is not a multiple
        "underflow " + dump.string() + " --detail no.such.tensor --out " + out.string(),
        "resq " + dump.string() + " --pattern 3:3 --out " + out.string(),
        "resq " + dump.string() + " --order xy --out " + out.string(),
        "resq " + dump.string() + " --transform occ --out " + out.string(),
        "resq " + dump.string() + " --weights " + dump.string() + " --out " + out.string()}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(out / "summary.csv")) << args;
    EXPECT_FALSE(std::filesystem::exists(out / "resq.csv")) << args;
  }
}

TEST(ResqCli, WritesTablesAndChartsWithWeights) {
  TempDir dir;
  Tensor down0;
  const auto dump = write_dump(dir, &down0);
  // Weights for every projection: the qkv_in row stacks q, k and v.
  std::vector<io::SafetensorsTensor> ws;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 0.125f);
  auto weight = [&](int64_t n, int64_t d) {
    std::vector<float> v(size_t(n * d));
    for (float& x : v) x = g(rng);
    return io::from_f32({n, d}, v);
  };
  for (int l = 0; l < 2; ++l) {
    for (const char* p : {"q", "k", "v", "o"})
      ws.push_back({fmt::format("model.layers.{}.self_attn.{}_proj.weight", l, p), weight(16, 64)});
    ws.push_back({fmt::format("model.layers.{}.mlp.down_proj.weight", l), weight(64, 128)});
  }
  io::write_safetensors(dir / "w.safetensors", ws);
  const auto out = dir / "rq";
  const auto r = run_cli(fmt::format("resq {} --weights {} --format nvfp4 --pattern none,dense,2:4,4:8,channel50 --out {}",
                                     dump.string(), (dir / "w.safetensors").string(), out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out / "resq.csv"));
  EXPECT_TRUE(std::filesystem::exists(out / "resq_nvfp4_te.png"));
  const auto j = nlohmann::json::parse(slurp(out / "resq.json"));
  const auto& res = j["results"][0];
  EXPECT_EQ(res["chart"], "resq_nvfp4_te.png");
  EXPECT_EQ(res["pooled"].size(), 5u);
  EXPECT_EQ(res["tensors"].size(), 6u * 5);
  for (const auto& t : res["tensors"]) {
    if (t["tensor"] == "model.layers.0.self_attn.q_proj.input") {
      EXPECT_EQ(t["n"], 48);  // q, k, v stacked
    }
  }
  for (const auto& p : res["pooled"]) {
    if (p["pattern"] == "2:4") {
      EXPECT_NEAR(p["speedup_vs_fp16"].get<double>(), 2.0 / 0.75, 1e-12);
      EXPECT_LT(p["drop_res_mse"].get<double>(), p["drop_prim_mse"].get<double>());
    }
    if (p["pattern"] == "none") {
      EXPECT_TRUE(p["drop_res_mse"].is_null());
    }
  }
  // Synthetic weights when none are given; every default pattern present.
  const auto r2 = run_cli(fmt::format("resq {} --format mxfp4 --n 16 --out {}", dump.string(), (dir / "rq2").string()));
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  const std::string csv = slurp(dir / "rq2" / "resq.csv");
  for (const char* p : {",none,", ",dense,", ",2:4,", ",4:8,", ",1:4,", ",channel50,", ",block32x64,",
                        ",unstructured50,", ",random50,", ",row50,"})
    EXPECT_NE(csv.find(p), std::string::npos) << p;
}

}  // namespace
}  // namespace fp4emu
