// `fp4emu compare` end to end: on a crafted safetensors file the table, the
// JSON and the CSV carry the numbers of an independent computation (plain
// double loops here over the fake-quantized values); every bad input is an
// exit code 2 with a message naming file, tensor and field, and no output.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::TempDir;

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

struct Crafted {
  std::string name;
  std::vector<int64_t> shape;
  io::DType dtype;
  std::vector<float> x;  // the values the file holds, exactly
};

// Three tensors in three dtypes: a padded tail for HiF4 (96), NaN/Inf
// values, rank 3, outliers and exact zeros.
std::vector<Crafted> crafted() {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> n01(0.0, 1.0);
  std::vector<Crafted> c;
  Crafted a{"model.layers.0.mlp.down_proj.input", {16, 96}, io::DType::bf16, {}};
  for (int i = 0; i < 16 * 96; ++i) {
    const double v = (i % 96 == 7 ? 40.0 : 1.0) * n01(rng) * (i % 11 == 0 ? 0.0 : 1.0);
    a.x.push_back(bf16_decode(bf16_encode(v)));  // a bf16 value
  }
  Crafted b{"model.layers.0.self_attn.o_proj.input", {8, 64}, io::DType::f32, {}};
  for (int i = 0; i < 8 * 64; ++i) b.x.push_back(static_cast<float>(n01(rng) * 3.0));
  b.x[5] = kNan;
  b.x[70] = kInf;
  b.x[300] = -kInf;
  Crafted d{"model.layers.1.mlp.down_proj.input", {4, 3, 32}, io::DType::f16, {}};
  for (int i = 0; i < 4 * 3 * 32; ++i) d.x.push_back(static_cast<float>((i * 7 % 23) - 11) * 0.125f);  // exact in f16
  c.push_back(a);
  c.push_back(b);
  c.push_back(d);
  return c;
}

void write_crafted(const std::filesystem::path& path, const std::vector<Crafted>& tensors) {
  std::vector<io::SafetensorsTensor> out;
  for (const Crafted& t : tensors) {
    io::Array a;
    if (t.dtype == io::DType::f32) {
      a = io::from_f32(t.shape, t.x);
    } else {
      std::vector<uint16_t> bits;
      for (float v : t.x) bits.push_back(t.dtype == io::DType::bf16 ? bf16_encode(v) : fp16_encode(v));
      a = t.dtype == io::DType::bf16 ? io::from_bf16_bits(t.shape, bits) : io::from_f16_bits(t.shape, bits);
    }
    out.push_back({t.name, a});
  }
  io::write_safetensors(path, out, {{"step", "7"}});
}

// The metrics, the obvious way, over the fake-quantized values.
struct Expected {
  int64_t n = 0, nonzero = 0, underflow = 0, zero_after = 0, nan_in = 0, inf_in = 0, nonfinite_out = 0;
  double sx2 = 0, se2 = 0, sq2 = 0, sxq = 0, max_err = 0;
  double qsnr() const { return 10.0 * std::log10(sx2 / se2); }
  double nmse() const { return se2 / sx2; }
  double cosine() const { return sxq / std::sqrt(sx2 * sq2); }
  void add(const Expected& o) {
    n += o.n, nonzero += o.nonzero, underflow += o.underflow, zero_after += o.zero_after;
    nan_in += o.nan_in, inf_in += o.inf_in, nonfinite_out += o.nonfinite_out;
    sx2 += o.sx2, se2 += o.se2, sq2 += o.sq2, sxq += o.sxq, max_err = std::max(max_err, o.max_err);
  }
};

Expected expected(const Crafted& t, const char* recipe) {
  QuantOptions o;
  o.recipe = recipe;
  o.input_dtype = t.dtype == io::DType::bf16 ? InputDType::bf16 : t.dtype == io::DType::f16 ? InputDType::f16 : InputDType::f32;
  const std::vector<float> q = fake_quant(Tensor{t.shape, t.x}, o).data;
  Expected e;
  for (size_t i = 0; i < t.x.size(); ++i) {
    const double a = t.x[i], b = q[i];
    if (std::isnan(a)) {
      e.nan_in++;
      continue;
    }
    if (std::isinf(a)) {
      e.inf_in++;
      continue;
    }
    if (!std::isfinite(b)) {
      e.nonfinite_out++;
      continue;
    }
    e.n++;
    e.nonzero += a != 0;
    e.underflow += a != 0 && b == 0;
    e.zero_after += b == 0;
    e.sx2 += a * a;
    e.se2 += (a - b) * (a - b);
    e.sq2 += b * b;
    e.sxq += a * b;
    e.max_err = std::max(e.max_err, std::fabs(a - b));
  }
  return e;
}

void near(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-12 * std::fabs(want)) << what;
}

// One row of a CSV file as column name -> field.
std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string line;
  std::getline(f, line);
  std::vector<std::string> header;
  std::stringstream hs(line);
  for (std::string h; std::getline(hs, h, ',');) header.push_back(h);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(f, line)) {
    std::map<std::string, std::string> row;
    size_t start = 0;
    for (size_t i = 0; i < header.size(); ++i) {
      const size_t comma = line.find(',', start);
      row[header[i]] = line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? line.size() : comma + 1;
    }
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), static_cast<long>(header.size() - 1)) << line;
    rows.push_back(row);
  }
  return rows;
}

// The table section of one tensor (from its name line to the blank line).
std::string table_of(const std::string& out, const std::string& heading) {
  const size_t at = out.find("\n" + heading);
  if (at == std::string::npos) return "";
  const size_t end = out.find("\n\n", at + 1);
  return out.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

std::string row_of(const std::string& table, const std::string& recipe) {
  const size_t at = table.find("\n  " + recipe + " ");
  if (at == std::string::npos) return "";
  return table.substr(at + 1, table.find('\n', at + 1) - at - 1);
}

const char* const kRecipes[] = {"hif4.v14", "mxfp4.ocp", "nvfp4.te"};

TEST(CompareCli, TableJsonAndCsvCarryTheIndependentNumbers) {
  TempDir dir;
  const std::vector<Crafted> tensors = crafted();
  write_crafted(dir / "d.safetensors", tensors);
  const auto r = run_cli(fmt::format("compare {} --format hif4,mxfp4,nvfp4 --json {} --csv {}",
                                     (dir / "d.safetensors").string(), (dir / "c.json").string(),
                                     (dir / "c.csv").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // NaN/Inf values are reported, never fatal.
  EXPECT_NE(r.output.find("warning: '" + (dir / "d.safetensors").string() +
                          "': tensor 'model.layers.0.self_attn.o_proj.input' holds 1 NaN and 2 Inf values"),
            std::string::npos)
      << r.output;

  std::ifstream jf(dir / "c.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["input"]["metadata"]["step"], "7");
  ASSERT_EQ(j["tensors"].size(), 3u);
  const auto csv = read_csv(dir / "c.csv");
  ASSERT_EQ(csv.size(), 3u * 3u + 3u);  // tensor rows, then one pooled row per recipe

  std::map<std::string, Expected> pooled;
  std::map<std::string, double> sum_db;
  std::map<std::string, int> db_terms;  // tensors with a defined dB
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Crafted& c = tensors[t];
    const nlohmann::json& jt = j["tensors"][t];
    EXPECT_EQ(jt["name"], c.name);
    EXPECT_EQ(jt["shape"], c.shape);
    const std::string table = table_of(r.output, c.name);
    ASSERT_FALSE(table.empty()) << c.name << "\n" << r.output;
    for (size_t k = 0; k < 3; ++k) {
      const std::string what = c.name + " " + kRecipes[k];
      const Expected e = expected(c, kRecipes[k]);
      pooled[kRecipes[k]].add(e);

      const nlohmann::json& m = jt["results"][k];
      EXPECT_EQ(m["recipe"], kRecipes[k]);
      EXPECT_EQ(m["n"], e.n) << what;
      EXPECT_EQ(m["nonfinite_out"], e.nonfinite_out) << what;
      if (e.n == 0) {
        // TransformerEngine dequantizes through the tensor amax G: an Inf
        // input makes G = Inf and no output finite (docs/formats.md, NVFP4).
        // No pair to measure: the dB is undefined and left out of the mean.
        EXPECT_TRUE(m["qsnr_db"].is_null()) << what;
        EXPECT_EQ(e.nonfinite_out, static_cast<int64_t>(c.x.size()) - e.nan_in - e.inf_in) << what;
        continue;
      }
      sum_db[kRecipes[k]] += e.qsnr();
      ++db_terms[kRecipes[k]];
      EXPECT_EQ(m["n_nonzero"], e.nonzero) << what;
      EXPECT_EQ(m["n_underflow"], e.underflow) << what;
      EXPECT_EQ(m["n_zero_after"], e.zero_after) << what;
      EXPECT_EQ(m["nan_in"], e.nan_in) << what;
      EXPECT_EQ(m["inf_in"], e.inf_in) << what;
      EXPECT_EQ(m["nonfinite_out"], e.nonfinite_out) << what;
      near(m["qsnr_db"], e.qsnr(), what + " qsnr");
      near(m["nmse"], e.nmse(), what + " nmse");
      near(m["rel_l2"], std::sqrt(e.nmse()), what + " rel_l2");
      near(m["cosine"], e.cosine(), what + " cosine");
      EXPECT_EQ(m["max_abs_error"].get<double>(), e.max_err) << what;
      EXPECT_EQ(m["underflow_ratio"].get<double>(), double(e.underflow) / double(e.nonzero)) << what;
      EXPECT_EQ(m["zero_ratio_after"].get<double>(), double(e.zero_after) / double(e.n)) << what;
      ASSERT_TRUE(m["n_saturated"].is_number_integer()) << what;

      // The CSV row holds the same numbers at full precision.
      const auto& row = csv[t * 3 + k];
      EXPECT_EQ(row.at("scope"), "tensor");
      EXPECT_EQ(row.at("tensor"), c.name);
      EXPECT_EQ(row.at("recipe"), kRecipes[k]);
      EXPECT_EQ(std::stoll(row.at("n")), e.n) << what;
      EXPECT_EQ(std::stoll(row.at("n_underflow")), e.underflow) << what;
      EXPECT_EQ(std::stoll(row.at("n_saturated")), m["n_saturated"].get<int64_t>()) << what;
      EXPECT_EQ(std::stoll(row.at("nan_in")) + std::stoll(row.at("inf_in")), e.nan_in + e.inf_in) << what;
      EXPECT_EQ(std::stod(row.at("qsnr_db")), m["qsnr_db"].get<double>()) << what;
      EXPECT_EQ(std::stod(row.at("nmse")), m["nmse"].get<double>()) << what;
      EXPECT_EQ(std::stod(row.at("cosine")), m["cosine"].get<double>()) << what;
      EXPECT_EQ(std::stod(row.at("max_abs_error")), e.max_err) << what;
      EXPECT_EQ(std::stod(row.at("bits_per_element")), m["bits_per_element"].get<double>()) << what;

      // The table shows them rounded.
      const std::string line = row_of(table, kRecipes[k]);
      ASSERT_FALSE(line.empty()) << what << "\n" << table;
      EXPECT_NE(line.find(fmt::format(" {:.2f} ", e.qsnr())), std::string::npos) << line;
      EXPECT_NE(line.find(fmt::format(" {:.2f}%", 100.0 * e.underflow / e.nonzero)), std::string::npos) << line;
      EXPECT_NE(line.find(fmt::format(" {:.6f} ", e.cosine())), std::string::npos) << line;
    }
  }
  // HiF4 pads the 96-wide rows to 128: (4 * 128 + 32 / 64 * 128) bits over 96 elements.
  EXPECT_DOUBLE_EQ(j["tensors"][0]["results"][0]["bits_per_element"].get<double>(), (4.0 * 128 + 64) / 96);
  // The bf16 tensor's MXFP4 saturation agrees with the OCP closed form.
  {
    const Crafted& c = tensors[0];
    int64_t sat = 0;
    for (int64_t row = 0; row < 16; ++row)
      for (int64_t b = 0; b < 96; b += 32) {
        double amax = 0;
        for (int64_t k = b; k < b + 32; ++k) amax = std::max(amax, std::fabs(double(c.x[row * 96 + k])));
        if (amax == 0) continue;
        for (int64_t k = b; k < b + 32; ++k) sat += std::fabs(c.x[row * 96 + k]) / std::ldexp(1.0, std::ilogb(amax) - 2) > 6;
      }
    EXPECT_EQ(j["tensors"][0]["results"][1]["n_saturated"], sat);
  }
  // Pooled: ratio of sums and mean of dB, in JSON, CSV and the table.
  const std::string pooled_table = table_of(r.output, "pooled over 3 tensors");
  ASSERT_FALSE(pooled_table.empty()) << r.output;
  for (size_t k = 0; k < 3; ++k) {
    const Expected& e = pooled[kRecipes[k]];
    ASSERT_GT(e.n, 0) << kRecipes[k];
    ASSERT_GT(db_terms[kRecipes[k]], 0) << kRecipes[k];
    const nlohmann::json& p = j["pooled"][k];
    EXPECT_EQ(p["recipe"], kRecipes[k]);
    EXPECT_EQ(p["tensors"], 3);
    EXPECT_EQ(p["n"], e.n);
    EXPECT_EQ(p["n_underflow"], e.underflow);
    EXPECT_EQ(p["nonfinite_out"], e.nonfinite_out);
    near(p["qsnr_db"], e.qsnr(), "pooled qsnr");
    near(p["cosine"], e.cosine(), "pooled cosine");
    const double mean_db = sum_db[kRecipes[k]] / db_terms[kRecipes[k]];
    near(p["mean_qsnr_db"], mean_db, "pooled mean dB");
    EXPECT_EQ(p["max_abs_error"].get<double>(), e.max_err);
    const auto& row = csv[9 + k];
    EXPECT_EQ(row.at("scope"), "pooled");
    EXPECT_EQ(std::stod(row.at("qsnr_db")), p["qsnr_db"].get<double>());
    EXPECT_EQ(std::stod(row.at("mean_qsnr_db")), p["mean_qsnr_db"].get<double>());
    const std::string line = row_of(pooled_table, kRecipes[k]);
    EXPECT_NE(line.find(fmt::format("{:.2f} [{:.2f}]", e.qsnr(), mean_db)), std::string::npos)
        << line;
  }
}

TEST(CompareCli, SelectsTensorsByGlobAndReadsNpy) {
  TempDir dir;
  const std::vector<Crafted> tensors = crafted();
  write_crafted(dir / "d.safetensors", tensors);
  auto r = run_cli(fmt::format("compare {} --tensor 'model.layers.*.mlp.down_proj.input' --recipe mxfp4.rceil,nvfp4",
                               (dir / "d.safetensors").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 of 3 tensors"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nmodel.layers.1.mlp.down_proj.input"), std::string::npos);
  EXPECT_EQ(r.output.find("o_proj"), std::string::npos);
  EXPECT_NE(r.output.find("mxfp4.rceil"), std::string::npos);
  EXPECT_EQ(r.output.find("hif4.v14"), std::string::npos);

  // --format with short recipe ids, and 'all'.
  r = run_cli(fmt::format("compare {} -t model.layers.1.mlp.down_proj.input --format mxfp4 --recipe ocp,even",
                          (dir / "d.safetensors").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("mxfp4.even"), std::string::npos);
  r = run_cli(fmt::format("compare {} -t model.layers.1.mlp.down_proj.input --format nvfp4 --recipe all",
                          (dir / "d.safetensors").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const Recipe& rec : nvfp4_recipes()) EXPECT_NE(r.output.find(rec.id), std::string::npos) << rec.id;

  // One .npy tensor: the same numbers as the same tensor in safetensors.
  io::write_npy(dir / "x.npy", io::from_f32(tensors[1].shape, tensors[1].x));
  r = run_cli(fmt::format("compare {} --format mxfp4 --json {}", (dir / "x.npy").string(), (dir / "n.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream jf(dir / "n.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["tensors"][0]["name"], "x.npy");
  const Expected e = expected(tensors[1], "mxfp4.ocp");
  ASSERT_GT(e.n, 0);
  near(j["tensors"][0]["results"][0]["qsnr_db"], e.qsnr(), "npy qsnr");

  // '<u2' bit patterns with --bf16-bits.
  std::vector<uint16_t> bits;
  for (float v : tensors[0].x) bits.push_back(bf16_encode(v));
  io::write_npy(dir / "u.npy", io::from_u16(tensors[0].shape, bits));
  r = run_cli(fmt::format("compare {} --format mxfp4", (dir / "u.npy").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--bf16-bits"), std::string::npos) << r.output;
  r = run_cli(fmt::format("compare {} --format mxfp4 --bf16-bits --json {}", (dir / "u.npy").string(),
                          (dir / "u.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream uf(dir / "u.json");
  near(nlohmann::json::parse(uf)["tensors"][0]["results"][0]["qsnr_db"], expected(tensors[0], "mxfp4.ocp").qsnr(),
       "bf16 bits qsnr");
}

TEST(CompareCli, ProgressGoesToStderrOnlyWhenAskedOrOnATerminal) {
  TempDir dir;
  write_crafted(dir / "d.safetensors", crafted());
  const std::string f = (dir / "d.safetensors").string();
  // stderr alone (through a pipe; stdout discarded)
  auto r = run_cli("compare " + f + " --progress always 2>&1 >/dev/null | cat");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("compare ["), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("100%"), std::string::npos) << r.output;
  r = run_cli("compare " + f + " --progress always 2>/dev/null | cat");  // stdout alone: no bar in it
  EXPECT_NE(r.output.find("pooled over 3 tensors"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("compare ["), std::string::npos);
  r = run_cli("compare " + f);  // auto, stderr is a pipe here
  EXPECT_EQ(r.output.find("compare ["), std::string::npos);
}

// The issue's list of bad inputs, one crafted file each.
TEST(CompareCli, EveryBadInputExitsWith2NamingFileTensorAndFieldAndWritesNothing) {
  TempDir dir;
  auto raw = [&](const std::string& name, const std::string& header, const std::string& data) {
    std::string bytes;
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) bytes += static_cast<char>((n >> (8 * i)) & 0xFF);
    std::ofstream(dir / name, std::ios::binary) << bytes << header << data;
    return (dir / name).string();
  };
  const std::string zeros64(64 * 4, '\0');
  const std::string ok = R"({"x": {"dtype": "F32", "shape": [1, 64], "data_offsets": [0, 256]}})";
  struct Case {
    std::string what, args;
    std::vector<std::string> expect;
  };
  std::vector<Case> cases = {
      {"truncated file", raw("trunc.safetensors", ok, zeros64.substr(0, 100)),
       {"trunc.safetensors", "tensor 'x'", "'data_offsets'", "truncated"}},
      {"header length beyond the file", "", {"hlen.safetensors", "header length", "only"}},
      {"invalid JSON", raw("json.safetensors", R"({"x": {"dtype": "F32", "shape": [1, 64],)", zeros64),
       {"json.safetensors", "header is not valid JSON"}},
      {"unknown dtype", raw("dtype.safetensors", R"({"x": {"dtype": "F8_E4M3", "shape": [1, 64], "data_offsets": [0, 64]}})", zeros64),
       {"dtype.safetensors", "tensor 'x'", "'dtype'", "F8_E4M3", "unsupported"}},
      {"overlapping offsets",
       raw("overlap.safetensors",
           R"({"x": {"dtype": "F32", "shape": [1, 32], "data_offsets": [0, 128]}, "y": {"dtype": "F32", "shape": [1, 32], "data_offsets": [64, 192]}})",
           zeros64),
       {"overlap.safetensors", "tensor 'y'", "'data_offsets'", "overlaps tensor 'x'"}},
      {"offsets out of range", raw("range.safetensors", R"({"x": {"dtype": "F32", "shape": [1, 64], "data_offsets": [256, 512]}})", zeros64),
       {"range.safetensors", "tensor 'x'", "'data_offsets'", "past the data buffer"}},
      {"shape product overflowing 64 bits",
       raw("overflow.safetensors", R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 256]}})", zeros64),
       {"overflow.safetensors", "tensor 'x'", "'shape'", "overflows 64 bits"}},
      {"rank 0", raw("rank0.safetensors", R"({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}})", zeros64),
       {"rank0.safetensors", "tensor 's'", "'shape' is []", "rank 0"}},
      {"zero-size dims", raw("empty.safetensors", R"({"e": {"dtype": "BF16", "shape": [4, 0], "data_offsets": [0, 0]}})", ""),
       {"empty.safetensors", "tensor 'e'", "'shape' is [4, 0]", "size 0"}},
      {"axis out of range", raw("axis.safetensors", ok, zeros64) + " --axis 2",
       {"axis.safetensors", "tensor 'x'", "axis 2 is out of range", "rank 2"}},
      {"tensor that does not exist", raw("name.safetensors", ok, zeros64) + " --tensor model.layers.0.mlp.up_proj.input",
       {"name.safetensors", "no tensor named 'model.layers.0.mlp.up_proj.input'", "x"}},
      {"glob that matches nothing", raw("glob.safetensors", ok, zeros64) + " --tensor 'model.*'",
       {"glob.safetensors", "no tensor matches --tensor 'model.*'"}},
      {"non-multiple-of-block axis with --tail error",
       raw("tail.safetensors", R"({"x": {"dtype": "F32", "shape": [2, 40], "data_offsets": [0, 320]}})", std::string(320, '\0')) +
           " --tail error",
       {"tail.safetensors", "tensor 'x'", "axis 1 has length 40", "not a multiple", "--tail pad"}},
      {"integer tensor", raw("codes.safetensors", R"({"c": {"dtype": "U8", "shape": [1, 64], "data_offsets": [0, 64]}})", zeros64),
       {"codes.safetensors", "tensor 'c'", "'dtype' is u8", "--tensor"}},
      {"PyTorch pickle", "", {"model.pt", "PyTorch", "safetensors.torch.save_file"}},
      {"missing file", (dir / "missing.safetensors").string(), {"missing.safetensors"}},
      {"unknown format", raw("f.safetensors", ok, zeros64) + " --format fp8", {"--format 'fp8' is unknown"}},
      {"unknown recipe", raw("r.safetensors", ok, zeros64) + " --recipe mxfp4.nope", {"--recipe 'mxfp4.nope' is unknown"}},
      {"recipe outside --format", raw("rf.safetensors", ok, zeros64) + " --format mxfp4 --recipe nvfp4.te",
       {"nvfp4.te belongs to nvfp4"}},
      {"unknown tail", raw("t2.safetensors", ok, zeros64) + " --tail sideways", {"--tail 'sideways' is unknown"}},
      {"unknown progress mode", raw("p.safetensors", ok, zeros64) + " --progress sometimes", {"--progress 'sometimes'"}},
  };
  // Header length field larger than the file.
  {
    std::string bytes(8, '\0');
    bytes[0] = static_cast<char>(200);
    std::ofstream(dir / "hlen.safetensors", std::ios::binary) << bytes << "{}";
    cases[1].args = (dir / "hlen.safetensors").string();
  }
  {
    std::ofstream(dir / "model.pt", std::ios::binary) << std::string("\x80\x02}q\x00(X", 7);
    cases[14].args = (dir / "model.pt").string();
  }
  const std::string json_out = (dir / "out.json").string(), csv_out = (dir / "out.csv").string();
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  for (const Case& c : cases) {
    const auto r = run_cli(fmt::format("compare {} --json {} --csv {}", c.args, json_out, csv_out));
    EXPECT_EQ(r.exit_code, 2) << c.what << "\n" << r.output;
    for (const std::string& s : c.expect) EXPECT_NE(r.output.find(s), std::string::npos) << c.what << ": lacks '" << s << "'\n" << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << c.what;
    EXPECT_FALSE(std::filesystem::exists(json_out)) << c.what;
    EXPECT_FALSE(std::filesystem::exists(csv_out)) << c.what;
  }
  // Output paths are checked before any work.
  const std::string good = raw("good.safetensors", ok, zeros64);
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {" --json " + (dir / "nodir" / "o.json").string(), "does not exist"},
           {" --csv " + good, "is the same file as the input"},
           {" --json " + json_out + " --csv " + json_out, "give two files"},
           {" --csv " + dir.path().string(), "is a directory"}}) {
    const auto r = run_cli("compare " + good + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(json_out)) << args;
  }
  size_t after = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) after += e.is_regular_file();
  EXPECT_EQ(after, files + 1);  // only good.safetensors was added: no outputs, no temporaries
}

}  // namespace
}  // namespace fp4emu
