// Many-file dumps (io::TensorSet): directories, globs, sharded indexes,
// unique names, `re:` selection, one duplicates rule; the studies on such a
// dump (same numbers as on one file, the same bytes for any thread count,
// rank-3 tensors in every summary); the edge-case definitions of
// docs/analysis.md (all-zero blocks, non-whole counts, `none`); and the
// double GEMM of resq against its scalar definition on every target.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <bit>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "fp4emu/analysis/gemm_f64.hpp"
#include "fp4emu/analysis/sparsity.hpp"
#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/io/tensor_set.hpp"
#include "io_test_util.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::read_bytes;
using testing::run_cli;
using testing::TempDir;

std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> v(n);
  for (float& x : v) x = g(rng) * scale;
  return v;
}

io::SafetensorsTensor tensor(const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return {name, io::from_f32(shape, gaussian(size_t(n), seed))};
}

// Two layers in two files; q/k/v of each layer are one input (k and v are
// copies), the down input of layer 1 is rank 3 (2 x 4 tokens).
void write_layers(const fs::path& dir) {
  fs::create_directories(dir);
  for (int l = 0; l < 2; ++l) {
    std::vector<io::SafetensorsTensor> ts;
    const io::SafetensorsTensor qkv = tensor("", {8, 64}, 10 + l);
    for (const char* p : {"q", "k", "v"})
      ts.push_back({fmt::format("model.layers.{}.self_attn.{}_proj.input", l, p), qkv.array});
    ts.push_back(tensor(fmt::format("model.layers.{}.self_attn.o_proj.input", l), {8, 64}, 20 + l));
    ts.push_back(tensor(fmt::format("model.layers.{}.mlp.down_proj.input", l),
                        l == 0 ? std::vector<int64_t>{8, 128} : std::vector<int64_t>{2, 4, 128}, 30 + l));
    io::write_safetensors(dir / fmt::format("layer_{}.safetensors", l), ts, {{"step", std::to_string(l)}});
  }
}

std::vector<std::string> names(const io::TensorSet& set) {
  std::vector<std::string> out;
  for (const auto& e : set.tensors()) out.push_back(e.info.name);
  return out;
}

TEST(DumpInputs, DirectoryGlobAndFilesGiveTheSameTensorsInOrder) {
  TempDir dir;
  write_layers(dir / "d");
  io::write_npy(dir / "d" / "extra.npy", io::from_f32({4, 32}, gaussian(128, 5)));
  std::ofstream(dir / "d" / "notes.txt") << "not a tensor file\n";
  const io::TensorSet from_dir(std::vector<std::string>{(dir / "d").string()});
  ASSERT_EQ(from_dir.files().size(), 3u);  // extra.npy, layer_0, layer_1: sorted, notes.txt left out
  EXPECT_EQ(from_dir.files()[0].filename(), "extra.npy");
  EXPECT_EQ(from_dir.tensors().size(), 11u);
  EXPECT_EQ(from_dir.tensors()[0].info.name, "extra.npy");
  EXPECT_EQ(from_dir.metadata(2).at("step"), "1");
  const io::TensorSet from_glob(std::vector<std::string>{(dir / "d" / "layer_*.safetensors").string()});
  const io::TensorSet from_files(std::vector<std::string>{(dir / "d" / "layer_0.safetensors").string(),
                                                          (dir / "d" / "layer_1.safetensors").string()});
  EXPECT_EQ(names(from_glob), names(from_files));
  EXPECT_EQ(from_glob.tensors().size(), 10u);
  // The .npy array is read when asked for, and equals what was written.
  const io::TensorBytes b = from_dir.bytes(0);
  EXPECT_EQ(b.bytes().size(), 128u * 4);
}

// A header of 0x380 bytes starts the file with 80 03, a pickle's PROTO 3
// opcode: still safetensors, since '{' follows at byte 8.
TEST(DumpInputs, HeaderLengthThatLooksLikeAPickleIsSafetensors) {
  TempDir dir;
  std::string json = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  json.resize(0x380, ' ');
  std::string file(8, '\0');
  file[0] = '\x80', file[1] = '\x03';
  file += json;
  file += std::string("\0\0\x80\x3f", 4);  // 1.0f
  testing::write_bytes(dir / "p.safetensors", file);
  const io::TensorSet set(std::vector<std::string>{(dir / "p.safetensors").string()});
  ASSERT_EQ(set.tensors().size(), 1u);
  EXPECT_EQ(set.tensors()[0].info.name, "x");
}

TEST(DumpInputs, ShardedIndexIsReadAndChecked) {
  TempDir dir;
  write_layers(dir / "m");
  nlohmann::json map;
  for (int l = 0; l < 2; ++l)
    for (const char* p : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.down_proj"})
      map[fmt::format("model.layers.{}.{}.input", l, p)] = fmt::format("layer_{}.safetensors", l);
  std::ofstream(dir / "m" / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  const io::TensorSet set(std::vector<std::string>{(dir / "m" / "model.safetensors.index.json").string()});
  EXPECT_EQ(set.files().size(), 2u);
  EXPECT_EQ(set.tensors().size(), 10u);

  // A tensor mapped to the wrong shard, a shard outside the folder, no map.
  map["model.layers.0.mlp.down_proj.input"] = "layer_1.safetensors";
  std::ofstream(dir / "m" / "bad.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  expect_input_error([&] { io::TensorSet s(std::vector<std::string>{(dir / "m" / "bad.index.json").string()}); },
                     {"bad.index.json", "weight_map", "model.layers.0.mlp.down_proj.input", "layer_1.safetensors"});
  std::ofstream(dir / "m" / "up.index.json") << R"({"weight_map": {"x": "../layer_0.safetensors"}})";
  expect_input_error([&] { io::TensorSet s(std::vector<std::string>{(dir / "m" / "up.index.json").string()}); },
                     {"up.index.json", "weight_map", "beside the index"});
  std::ofstream(dir / "m" / "none.index.json") << R"({"metadata": {}})";
  expect_input_error([&] { io::TensorSet s(std::vector<std::string>{(dir / "m" / "none.index.json").string()}); },
                     {"none.index.json", "'weight_map' is missing"});
  std::ofstream(dir / "m" / "junk.index.json") << "{not json";
  expect_input_error([&] { io::TensorSet s(std::vector<std::string>{(dir / "m" / "junk.index.json").string()}); },
                     {"junk.index.json", "not valid JSON"});
}

TEST(DumpInputs, NamesAreUniqueAndEachFileIsGivenOnce) {
  TempDir dir;
  write_layers(dir / "d");
  fs::copy_file(dir / "d" / "layer_0.safetensors", dir / "copy.safetensors");
  expect_input_error(
      [&] {
        io::TensorSet s(std::vector<std::string>{(dir / "d").string(), (dir / "copy.safetensors").string()});
      },
      {"is in both", "layer_0.safetensors", "copy.safetensors", "model.layers.0.self_attn.q_proj.input"});
  expect_input_error(
      [&] {
        io::TensorSet s(std::vector<std::string>{(dir / "d").string(), (dir / "d" / "layer_1.safetensors").string()});
      },
      {"layer_1.safetensors", "given twice"});
  fs::create_directories(dir / "empty");
  expect_input_error([&] { io::TensorSet s(std::vector<std::string>{(dir / "empty").string()}); },
                     {"empty", "no *.safetensors or *.npy"});
  expect_input_error([&] { io::TensorSet s(std::vector<std::string>{(dir / "d" / "nope_*.npy").string()}); },
                     {"nope_*.npy", "no file matches"});
  expect_input_error([&] { io::TensorSet s(std::vector<std::string>{(dir / "missing.safetensors").string()}); },
                     {"missing.safetensors"});
}

TEST(DumpInputs, RegexSelectionAndOneDuplicatesRule) {
  TempDir dir;
  write_layers(dir / "d");
  const io::TensorSet set(std::vector<std::string>{(dir / "d").string()});
  const std::vector<std::string> re = {"re:model\\.layers\\.1\\..*_proj\\.input"};
  EXPECT_EQ(io::select_tensors(set, re).size(), 5u);
  // The regex must match the whole name; a glob is still a glob.
  EXPECT_TRUE(io::select_tensors(set, std::vector<std::string>{"*.mlp.down_proj.input"}).size() == 2);
  expect_input_error([&] { io::select_tensors(set, std::vector<std::string>{"re:layers"}); },
                     {"no tensor matches", "re:layers"});
  expect_input_error([&] { io::select_tensors(set, std::vector<std::string>{"re:(unclosed"}); },
                     {"re:(unclosed", "not a valid regular expression"});
  // k and v repeat q in each layer: kept once, named as aliases.
  const std::vector<size_t> all = io::select_tensors(set, {});
  const io::Deduplicated d = io::deduplicate(set, all);
  EXPECT_EQ(d.kept.size(), 6u);
  ASSERT_EQ(d.aliases.size(), 4u);
  EXPECT_EQ(set.tensors()[d.aliases[0].first].info.name, "model.layers.0.self_attn.k_proj.input");
  EXPECT_EQ(set.tensors()[d.aliases[0].second].info.name, "model.layers.0.self_attn.q_proj.input");
}

// compare, underflow and resq pool a copy once and say so; a rank-3 tensor
// is in every summary, the heatmap included.
TEST(DumpInputs, StudiesPoolDuplicatesOnceAndKeepRank3Tensors) {
  TempDir dir;
  write_layers(dir / "d");
  const std::string d = (dir / "d").string();
  auto r = run_cli(fmt::format("compare {} --format mxfp4 --json {}", d, (dir / "c.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 duplicate(s) reported once"), std::string::npos) << r.output;
  const auto c = nlohmann::json::parse(read_bytes(dir / "c.json"));
  EXPECT_EQ(c["tensors"].size(), 6u);
  EXPECT_EQ(c["input"]["aliases"].size(), 4u);
  EXPECT_EQ(c["input"]["files"].size(), 2u);

  r = run_cli(fmt::format("underflow {} --format mxfp4 --out {}", d, (dir / "uf").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto u = nlohmann::json::parse(read_bytes(dir / "uf" / "summary.json"));
  EXPECT_EQ(u["tensors"].size(), 6u);
  EXPECT_EQ(u["aliases"].size(), 4u);
  bool rank3 = false;
  for (const auto& t : u["tensors"])
    if (t["tensor"] == "model.layers.1.mlp.down_proj.input") {
      rank3 = true;
      EXPECT_EQ(t["m"], 8);  // 2 x 4 rows
      EXPECT_EQ(t["shape"], nlohmann::json({2, 4, 128}));
      EXPECT_EQ(t["file"], (dir / "d" / "layer_1.safetensors").string());
    }
  EXPECT_TRUE(rank3);
  const std::string hm = read_bytes(dir / "uf" / "summary_heatmap.csv");
  EXPECT_NE(hm.find("mxfp4,mxfp4.ocp,none,down_in,1,"), std::string::npos) << hm;
  // The CSV takes phase/step from each tensor's own file.
  EXPECT_NE(read_bytes(dir / "uf" / "summary.csv").find("layer_1.safetensors,model.layers.1.mlp.down_proj.input,1,"
                                                         "down_in,down,,1,8,128,"),
            std::string::npos);

  r = run_cli(fmt::format("resq {} --format mxfp4 --pattern none,2:4 --out {}", d, (dir / "rq").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto q = nlohmann::json::parse(read_bytes(dir / "rq" / "resq.json"));
  EXPECT_EQ(q["aliases"].size(), 4u);
  EXPECT_EQ(q["results"][0]["pooled"][0]["tensors"], 6);
}

// The report bytes do not depend on --threads.
TEST(DumpInputs, ReportsAreTheSameBytesForAnyThreadCount) {
  TempDir dir;
  write_layers(dir / "d");
  const std::string d = (dir / "d").string();
  std::string uf_json, uf_csv, rq_json, rq_csv;
  for (int threads : {1, 2, 3}) {
    const fs::path uf = dir / fmt::format("uf{}", threads), rq = dir / fmt::format("rq{}", threads);
    auto r = run_cli(fmt::format("underflow {} --threads {} --transform none --transform rht --out {}", d, threads,
                                 uf.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_cli(fmt::format("resq {} --threads {} --n 40 --pattern none,dense,2:4,unstructured50 --out {}", d,
                            threads, rq.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    if (threads == 1) {
      uf_json = read_bytes(uf / "summary.json"), uf_csv = read_bytes(uf / "summary.csv");
      rq_json = read_bytes(rq / "resq.json"), rq_csv = read_bytes(rq / "resq.csv");
      continue;
    }
    EXPECT_EQ(read_bytes(uf / "summary.json"), uf_json) << threads;
    EXPECT_EQ(read_bytes(uf / "summary.csv"), uf_csv) << threads;
    EXPECT_EQ(read_bytes(uf / "detail_heatmap.csv"), read_bytes(dir / "uf1" / "detail_heatmap.csv")) << threads;
    EXPECT_EQ(read_bytes(rq / "resq.json"), rq_json) << threads;
    EXPECT_EQ(read_bytes(rq / "resq.csv"), rq_csv) << threads;
  }
}

TEST(DumpInputs, ProgressIsOneLinePerTensor) {
  TempDir dir;
  write_layers(dir / "d");
  const auto r = run_cli(fmt::format("underflow {} --format mxfp4 --progress always --out {}", (dir / "d").string(),
                                     (dir / "uf").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("underflow: 100% tensor 6/6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("elapsed"), std::string::npos) << r.output;
}

// ---- definitions (docs/analysis.md §2.1, §3.3) --------------------------------

TEST(StudyDefinitions, AllZeroBlocksCountInTheMedianAndNeverAsOutliers) {
  // 1 row, 4 MXFP4 blocks of 32: two all-zero, one of ones, one holding a 100.
  std::vector<float> x(128, 0.0f);
  for (int i = 64; i < 96; ++i) x[i] = 1.0f;
  for (int i = 96; i < 128; ++i) x[i] = 1.0f;
  x[100] = 100.0f;
  QuantOptions o;
  o.recipe = "mxfp4";
  const Tensor t{{1, 128}, x};
  const analysis::UnderflowStats s = analysis::study_underflow(t, o, analysis::TransformSpec{}, nullptr, nullptr, {});
  EXPECT_EQ(s.n_blocks, 4);
  EXPECT_EQ(s.n_blocks_nonzero, 2);
  // Median amax over all four blocks (0, 0, 1, 100) is 0.5: rule (b) at
  // 8 x 0.5 flags the block holding 100 (over the two nonzero blocks alone
  // the median would be 50.5 and nothing would count); ratios over all 4.
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_rel, 0.25);
  EXPECT_DOUBLE_EQ(s.outlier_block_ratio_abs, 0.25);  // only the block holding 100 >= 6
  // Crest only over blocks with rms > 0: the ones block has crest 1.
  EXPECT_DOUBLE_EQ(s.crest_median, (1.0 + 100.0 / std::sqrt((31.0 + 10000.0) / 32.0)) / 2.0);

  const Tensor zeros{{2, 64}, std::vector<float>(128, 0.0f)};
  const analysis::UnderflowStats z = analysis::study_underflow(zeros, o, analysis::TransformSpec{}, nullptr, nullptr, {});
  EXPECT_TRUE(std::isnan(z.crest_mean) && std::isnan(z.crest_max));
  EXPECT_EQ(z.underflow_ratio, 0.0);
  EXPECT_EQ(z.outlier_block_ratio_rel, 0.0);
}

TEST(StudyDefinitions, PercentOfANonWholeCountRoundsHalfUp) {
  EXPECT_EQ(analysis::kept_count(0.5, 5), 3);
  EXPECT_EQ(analysis::kept_count(0.5, 4), 2);
  EXPECT_EQ(analysis::kept_count(0.25, 6), 2);  // 1.5 -> 2
  EXPECT_EQ(analysis::kept_count(0.3, 5), 2);   // 0.3 x 5 is 1.5 in double
  const analysis::SparsityPattern p = analysis::parse_pattern("channel50", 0.5, 0);
  std::vector<float> v(3 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 5) + 1.0f;
  const std::vector<uint8_t> mask = analysis::sparsity_mask(p, v, 3, 5);
  int kept = 0;
  for (uint8_t k : mask) kept += k;
  EXPECT_EQ(kept, 3 * 3);  // 3 of 5 columns: the three largest (columns 2, 3, 4)
  EXPECT_EQ(mask[0], 0);
  EXPECT_EQ(mask[4], 1);
}

TEST(StudyDefinitions, NoneHasNoDropFields) {
  TempDir dir;
  write_layers(dir / "d");
  const auto r = run_cli(fmt::format("resq {} --format nvfp4 --pattern none,2:4 --n 16 --out {}",
                                     (dir / "d" / "layer_0.safetensors").string(), (dir / "rq").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("nan"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(read_bytes(dir / "rq" / "resq.json"));
  const auto& none = j["results"][0]["pooled"][0];
  ASSERT_EQ(none["pattern"], "none");
  for (const char* f : {"drop_res_mse", "drop_res_rmse", "drop_res_norm", "drop_prim_mse", "drop_prim_rmse",
                        "drop_prim_norm"}) {
    EXPECT_TRUE(none[f].is_null()) << f;
    EXPECT_TRUE(j["results"][0]["pooled"][1][f].is_number()) << f;
  }
  const std::string csv = read_bytes(dir / "rq" / "resq.csv");
  EXPECT_EQ(csv.find("nan"), std::string::npos);
}

// ---- the double GEMM of resq ----------------------------------------------------

TEST(GemmF64, EveryTargetAndThreadCountGivesTheScalarBits) {
  struct Shape {
    int64_t m, d, n;
  };
  // Named members, not a structured binding: clang 14 cannot capture those in the lambda below.
  for (const Shape& shape : {Shape{1, 1, 1}, Shape{5, 300, 7}, Shape{9, 513, 37}, Shape{16, 64, 64}}) {
    const int64_t m = shape.m, d = shape.d, n = shape.n;
    std::vector<double> a(size_t(m * d)), b(size_t(n * d));
    std::mt19937_64 rng(m * 1000 + d);
    std::normal_distribution<double> g;
    for (double& x : a) x = g(rng);
    for (double& x : b) x = g(rng) * 1e-3;
    const std::vector<double> want = analysis::gemm_abt_f64_scalar(a, b, m, d, n);
    auto same = [&](const std::vector<double>& got, const std::string& what) {
      ASSERT_EQ(got.size(), want.size());
      size_t bad = 0;
      for (size_t i = 0; i < got.size(); ++i) bad += std::bit_cast<uint64_t>(got[i]) != std::bit_cast<uint64_t>(want[i]);
      EXPECT_EQ(bad, 0u) << what << " " << m << "x" << d << "x" << n;
    };
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      same(analysis::gemm_abt_f64(a, b, m, d, n, 1), hwy::TargetName(target));
    }
    hwy::SetSupportedTargetsForTest(0);
    for (int threads : {2, 3}) same(analysis::gemm_abt_f64(a, b, m, d, n, threads), "threads");
  }
}

}  // namespace
}  // namespace fp4emu
