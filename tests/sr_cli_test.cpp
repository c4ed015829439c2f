// Stochastic rounding on the commands that quantize many tensors (compare,
// underflow, resq, gemm) through the one SR option group, and compare's bias
// and standard error (docs/analysis.md §5.1): the numbers against a hand
// computation and against plain loops over `fake-quant` with the same key;
// the key recorded in every report; --rbits refused with a reason.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::TempDir;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string write_npy(const TempDir& dir, const std::string& name, std::vector<int64_t> shape,
                      const std::vector<float>& x) {
  const std::string path = (dir / name).string();
  io::write_npy(path, io::from_f32(shape, x));
  return path;
}

std::vector<float> gaussian(size_t n, uint64_t seed, double sigma) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(d(rng));
  return x;
}

// The CSV row of `scope` (tensor or pooled) and `recipe`, split at commas (no
// quoted fields in these tests), keyed by the header.
std::map<std::string, std::string> csv_row(const std::string& csv, const std::string& scope, const std::string& tensor) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  auto split = [](const std::string& l) {
    std::vector<std::string> v;
    std::string item;
    std::istringstream s(l);
    while (std::getline(s, item, ',')) v.push_back(item);
    if (!l.empty() && l.back() == ',') v.push_back("");
    return v;
  };
  const std::vector<std::string> header = split(line);
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line);
    if (f.size() != header.size()) continue;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < f.size(); ++i) row[header[i]] = f[i];
    if (row["scope"] == scope && row["tensor"] == tensor) return row;
  }
  return {};
}

// One MXFP4 block by hand: amax 6 makes the scale 1 (docs/formats.md), 2.5
// rounds to nearest even 2, every other element is exact. e = Q(x) - x is
// -0.5 once and 0 31 times: bias = -0.5/32; s^2 = (0.25 - 0.25/32)/31 =
// 0.25/32; SE = sqrt(s^2/32) = 0.5/32.
TEST(CompareBias, OneBlockByHand) {
  TempDir dir;
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f, x[1] = 2.5f, x[2] = -3.0f, x[3] = 0.5f;
  const std::string in = write_npy(dir, "x.npy", {1, 32}, x);
  const std::string json = (dir / "c.json").string(), csv = (dir / "c.csv").string();
  const auto r = run_cli(fmt::format("compare {} --recipe mxfp4.ocp --round rne --json {} --csv {}", in, json, csv));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(slurp(json));
  const auto& res = j["tensors"][0]["results"][0];
  EXPECT_EQ(res["error_sum"].get<double>(), -0.5);
  EXPECT_EQ(res["bias"].get<double>(), -0.5 / 32);
  EXPECT_EQ(res["bias_se"].get<double>(), 0.5 / 32);
  EXPECT_EQ(j["options"]["rounding"]["round"], "rne");
  EXPECT_TRUE(j["options"]["rounding"]["random_bits"].is_null());
  const auto row = csv_row(slurp(csv), "tensor", "x.npy");
  ASSERT_FALSE(row.empty()) << slurp(csv);
  EXPECT_EQ(std::stod(row.at("bias")), -0.5 / 32);
  EXPECT_EQ(std::stod(row.at("bias_se")), 0.5 / 32);
  EXPECT_EQ(row.at("rounding"), "rne");
  EXPECT_EQ(row.at("random_bits"), "");
  EXPECT_NE(r.output.find("-1.56e-02 (1.6e-02)"), std::string::npos) << r.output;
}

// Bias and SE under every rounding compare reports, per tensor and pooled,
// against plain double loops over `fake-quant` with the same options (and,
// under stochastic rounding, the same Philox key).
TEST(CompareBias, MatchesFakeQuantLoopsPerTensorAndPooled) {
  TempDir dir;
  const std::string a = write_npy(dir, "a.npy", {16, 64}, gaussian(16 * 64, 3, 1.0));
  const std::string b = write_npy(dir, "b.npy", {8, 64}, gaussian(8 * 64, 4, 0.01));
  struct Case {
    const char* recipe;
    const char* round;
  };
  for (const Case c : {Case{"mxfp4.ocp", "--round rne"}, Case{"mxfp4.ocp", "--round stochastic --seed 9 --offset 2"},
                       Case{"nvfp4.te", "--round stochastic --seed 5 --rng philox-index"},
                       Case{"hif4.v14", "--round stochastic --seed 1"}, Case{"nvfp4.te", ""}}) {
    SCOPED_TRACE(fmt::format("{} {}", c.recipe, c.round));
    const std::string json = (dir / "c.json").string();
    const auto r = run_cli(fmt::format("compare {} {} --recipe {} {} --json {}", a, b, c.recipe, c.round, json));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(slurp(json));
    double sum_all = 0, sq_all = 0;
    int64_t n_all = 0;
    for (const auto& [file, k] : {std::pair{a, 0}, {b, 1}}) {
      const std::string out = (dir / "q.npy").string();
      const auto f = run_cli(fmt::format("fake-quant {} {} --recipe {} {}", file, out, c.recipe, c.round));
      ASSERT_EQ(f.exit_code, 0) << f.output;
      const std::vector<float> x = io::to_f32(io::read_npy(file), file), q = io::to_f32(io::read_npy(out), out);
      double sum = 0, sq = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double e = static_cast<double>(q[i]) - static_cast<double>(x[i]);
        sum += e, sq += e * e;
      }
      const double n = static_cast<double>(x.size());
      const double bias = sum / n, se = std::sqrt((sq - sum * sum / n) / (n - 1) / n);
      const auto& res = j["tensors"][k]["results"][0];
      EXPECT_DOUBLE_EQ(res["bias"].get<double>(), bias);
      EXPECT_DOUBLE_EQ(res["bias_se"].get<double>(), se);
      sum_all += sum, sq_all += sq, n_all += static_cast<int64_t>(x.size());
    }
    const double n = static_cast<double>(n_all);
    const auto& pooled = j["pooled"][0];
    EXPECT_DOUBLE_EQ(pooled["bias"].get<double>(), sum_all / n);
    EXPECT_DOUBLE_EQ(pooled["bias_se"].get<double>(), std::sqrt((sq_all - sum_all * sum_all / n) / (n - 1) / n));
  }
}

// The key is recorded in the JSON options and in every CSV row.
TEST(SrCli, CompareRecordsTheKey) {
  TempDir dir;
  const std::string a = write_npy(dir, "a.npy", {4, 32}, gaussian(128, 1, 1.0));
  const std::string json = (dir / "c.json").string(), csv = (dir / "c.csv").string();
  const auto r = run_cli(fmt::format("compare {} --recipe mxfp4.rceil --round stochastic --seed 77 --offset 5 "
                                     "--rbits-map ptx --json {} --csv {}",
                                     a, json, csv));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(slurp(json));
  const auto& bits = j["options"]["rounding"]["random_bits"];
  EXPECT_EQ(j["options"]["rounding"]["round"], "stochastic");
  EXPECT_EQ(bits["source"], "philox-te");
  EXPECT_EQ(bits["seed"], 77);
  EXPECT_EQ(bits["offset"], 5);
  EXPECT_EQ(bits["map"], "ptx");
  EXPECT_EQ(j["recipes"][0]["rounding"], "stochastic");
  const auto row = csv_row(slurp(csv), "pooled", "");
  EXPECT_EQ(row.at("rounding"), "stochastic");
  EXPECT_EQ(row.at("random_bits"), "philox-te seed=77 offset=5 map=ptx");
}

// underflow and resq: the Philox seed is --sr-seed (their --seed seeds the
// synthetic weights); the key lands in the JSON options and the CSV rows, and
// the quantized tensor is fake-quant's with that key.
TEST(SrCli, StudiesTakeSrSeedAndRecordIt) {
  TempDir dir;
  const std::vector<float> x = gaussian(8 * 64, 2, 1.0);
  const std::string a = write_npy(dir, "model.layers.0.mlp.down_proj.input.npy", {8, 64}, x);
  const auto uf = run_cli(fmt::format("underflow {} --recipe mxfp4.ocp --round stochastic --sr-seed 11 --seed 3 "
                                      "--out {} --progress never",
                                      a, (dir / "uf").string()));
  ASSERT_EQ(uf.exit_code, 0) << uf.output;
  const auto uj = nlohmann::json::parse(slurp(dir / "uf" / "summary.json"));
  EXPECT_EQ(uj["options"]["seed"], 3);
  EXPECT_EQ(uj["options"]["rounding"]["random_bits"]["seed"], 11);
  EXPECT_NE(slurp(dir / "uf" / "summary.csv").find(",stochastic,philox-te seed=11 offset=0 map=te\n"),
            std::string::npos);
  // Its QSNR is that of fake-quant under the same key.
  const std::string q = (dir / "q.npy").string();
  ASSERT_EQ(run_cli(fmt::format("fake-quant {} {} --recipe mxfp4.ocp --round stochastic --seed 11", a, q)).exit_code, 0);
  const std::vector<float> y = io::to_f32(io::read_npy(q), q);
  double sig = 0, err = 0;
  for (size_t i = 0; i < x.size(); ++i) sig += double(x[i]) * x[i], err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  EXPECT_DOUBLE_EQ(uj["tensors"][0]["qsnr_db"].get<double>(), 10.0 * std::log10(sig / err));

  const auto rq = run_cli(fmt::format("resq {} --recipe nvfp4.te --round stochastic --sr-seed 12 --offset 1 "
                                      "--rng philox-index --pattern dense --out {} --progress never",
                                      a, (dir / "rq").string()));
  ASSERT_EQ(rq.exit_code, 0) << rq.output;
  const auto rj = nlohmann::json::parse(slurp(dir / "rq" / "resq.json"));
  EXPECT_EQ(rj["options"]["rounding"]["random_bits"]["source"], "philox-index");
  EXPECT_EQ(rj["options"]["rounding"]["random_bits"]["offset"], 1);
  EXPECT_NE(slurp(dir / "rq" / "resq.csv").find(",stochastic,philox-index seed=12 offset=1\n"), std::string::npos);
}

// gemm: the operands quantized here under SR are those `quantize` writes
// with the same key (A along axis 1, B along axis 0): the same C, bit for bit.
TEST(SrCli, GemmOperandsAreQuantizesWithTheSameKey) {
  TempDir dir;
  const std::string a = write_npy(dir, "a.npy", {4, 64}, gaussian(4 * 64, 5, 1.0));
  const std::string b = write_npy(dir, "b.npy", {64, 3}, gaussian(64 * 3, 6, 1.0));
  const std::string sr = "--round stochastic --seed 21 --offset 4";
  const std::string c1 = (dir / "c1.npy").string(), c2 = (dir / "c2.npy").string(), c0 = (dir / "c0.npy").string();
  auto r = run_cli(fmt::format("gemm {} {} {} --recipe nvfp4.te --model exact {}", a, b, c1, sr));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string pa = (dir / "a.safetensors").string(), pb = (dir / "b.safetensors").string();
  ASSERT_EQ(run_cli(fmt::format("quantize {} {} --recipe nvfp4.te --axis 1 {}", a, pa, sr)).exit_code, 0);
  ASSERT_EQ(run_cli(fmt::format("quantize {} {} --recipe nvfp4.te --axis 0 {}", b, pb, sr)).exit_code, 0);
  r = run_cli(fmt::format("gemm {} {} {} --model exact", pa, pb, c2));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(io::read_npy(c1).bytes, io::read_npy(c2).bytes);
  // And SR changes the result (the option reaches the operands).
  ASSERT_EQ(run_cli(fmt::format("gemm {} {} {} --recipe nvfp4.te --model exact", a, b, c0)).exit_code, 0);
  EXPECT_NE(io::read_npy(c0).bytes, io::read_npy(c1).bytes);
}

// Bad SR options: exit 2, a message naming the option and the fix, no output.
TEST(SrCli, Refusals) {
  TempDir dir;
  const std::string a = write_npy(dir, "a.npy", {4, 64}, gaussian(256, 7, 1.0));
  const std::string b = write_npy(dir, "b.npy", {64, 2}, gaussian(128, 8, 1.0));
  const std::string bits = (dir / "r.npy").string();
  io::write_npy(bits, io::Array{io::DType::u8, {4, 64}, std::vector<uint8_t>(256, 7)});
  const std::string uf = (dir / "uf").string(), json = (dir / "c.json").string(), c = (dir / "c.npy").string();
  struct Bad {
    std::string args, message;
  };
  const Bad cases[] = {
      {fmt::format("compare {} --format mxfp4 --round stochastic --json {}", a, json), "needs its random bits: --seed"},
      {fmt::format("compare {} --format mxfp4 --seed 1 --json {}", a, json), "--seed applies to --round stochastic"},
      {fmt::format("compare {} --format mxfp4 --round stochastic --rbits {} --json {}", a, bits, json),
       "--rbits is refused here: this command quantizes many tensors"},
      {fmt::format("compare {} --format mxfp4 --round sometimes --json {}", a, json),
       "--round 'sometimes' is unknown; use rne, rha, rtz, tiesToZero, rtp, stochastic"},
      {fmt::format("compare {} --recipe nvfp4.torchao --round stochastic --seed 1 --json {}", a, json), "stochastic"},
      {fmt::format("underflow {} --format mxfp4 --round stochastic --out {}", a, uf), "needs its random bits: --sr-seed"},
      {fmt::format("underflow {} --format mxfp4 --sr-seed 4 --out {}", a, uf), "--sr-seed applies to --round stochastic"},
      {fmt::format("resq {} --format mxfp4 --round stochastic --sr-seed 1 --rbits {} --out {}", a, bits, uf),
       "--rbits is refused here"},
      {fmt::format("gemm {} {} {} --format mxfp4 --model exact --round stochastic --rbits {}", a, b, c, bits),
       "gemm quantizes two operands"},
      {fmt::format("gemm {} {} {} --format mxfp4 --model exact --offset 3", a, b, c), "--offset applies to --round"},
  };
  for (const Bad& bad : cases) {
    const auto r = run_cli(bad.args);
    EXPECT_EQ(r.exit_code, 2) << bad.args << "\n" << r.output;
    EXPECT_NE(r.output.find(bad.message), std::string::npos) << bad.args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(json) || std::filesystem::exists(uf) || std::filesystem::exists(c))
        << bad.args;
  }
}

// README "Stochastic rounding, step by step": each sh block (one per
// random-bit source) runs as written in an empty directory, with fp4emu and
// Debian's python3 (numpy) first on PATH, and prints every "# prints:" text.
TEST(SrCli, ReadmeExamples) {
  const std::string readme = slurp(std::filesystem::path(FP4EMU_SOURCE_DIR) / "README.md");
  const size_t section = readme.find("\n### Stochastic rounding, step by step\n");
  ASSERT_NE(section, std::string::npos);
  const size_t section_end = readme.find("\n### ", section + 1);
  std::vector<std::string> blocks;
  for (size_t at = readme.find("```sh\n", section); at < section_end; at = readme.find("```sh\n", at)) {
    const size_t end = readme.find("```\n", at + 6);
    blocks.push_back(readme.substr(at + 6, end - at - 6));
    at = end + 4;
  }
  ASSERT_EQ(blocks.size(), 2u) << "one example per random-bit source: given bits, Philox";
  for (const std::string& block : blocks) {
    TempDir dir;
    const std::filesystem::path bin = dir / "bin";
    std::filesystem::create_directories(bin);
    std::filesystem::create_symlink(FP4EMU_CLI_PATH, bin / "fp4emu");
    std::filesystem::create_symlink("/usr/bin/python3", bin / "python3");
    std::ofstream(dir / "example.sh") << "set -e\n" << block;
    const auto r = testing::run_shell(fmt::format("cd '{}' && PATH='{}':\"$PATH\" sh example.sh", dir.path().string(),
                                                  bin.string()));
    ASSERT_EQ(r.exit_code, 0) << block << "\n" << r.output;
    size_t expected = 0;
    for (size_t at = block.find("# prints: "); at != std::string::npos; at = block.find("# prints: ", at + 1)) {
      const size_t start = at + 10, end = block.find('\n', start);
      const std::string want = block.substr(start, end - start);
      EXPECT_NE(r.output.find(want + "\n"), std::string::npos) << "README promises '" << want << "'\n" << r.output;
      ++expected;
    }
    EXPECT_GE(expected, 1u) << block;
  }
}

}  // namespace
}  // namespace fp4emu
