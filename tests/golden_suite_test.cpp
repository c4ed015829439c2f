// The golden suite generator: the checked-in golden/suite regenerates byte for
// byte; the bytes do not depend on the thread count; and each case family
// probes what it claims (every element code, every scale step), checked on the
// suite's own arrays against facts of the formats worked out by hand.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "fp4emu/error.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "test_util.hpp"

namespace fp4emu::golden {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kCheckedIn = fs::path(FP4EMU_SOURCE_DIR) / "golden" / "suite";

std::map<std::string, std::vector<char>> read_tree(const fs::path& root) {
  std::map<std::string, std::vector<char>> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    files[fs::relative(e.path(), root).generic_string()] =
        std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

// Compares two suite trees; returns a description of the differences.
std::string tree_diff(const fs::path& a, const fs::path& b) {
  const auto fa = read_tree(a), fb = read_tree(b);
  std::string diff;
  int shown = 0;
  for (const auto& [path, bytes] : fa) {
    const auto it = fb.find(path);
    if (it == fb.end()) {
      if (shown++ < 10) diff += "only in " + a.string() + ": " + path + "\n";
    } else if (it->second != bytes) {
      if (shown++ < 10) diff += "differs: " + path + "\n";
    }
  }
  for (const auto& [path, bytes] : fb)
    if (!fa.count(path) && shown++ < 10) diff += "only in " + b.string() + ": " + path + "\n";
  return diff;
}

json manifest_of(const fs::path& suite) {
  std::ifstream in(suite / "manifest.json");
  return json::parse(in);
}

const json& case_of(const json& m, const std::string& id) {
  for (const json& c : m["cases"])
    if (c["id"] == id) return c;
  throw std::runtime_error("no case " + id);
}

TEST(GoldenSuite, CheckedInSuiteRegeneratesByteForByte) {
  ASSERT_TRUE(fs::exists(kCheckedIn / "manifest.json")) << "golden/suite is missing";
  testing::TempDir dir;
  GenerateOptions o;  // the defaults: what golden/regenerate.sh runs
  generate_suite(dir / "suite", o);
  const std::string diff = tree_diff(kCheckedIn, dir / "suite");
  EXPECT_TRUE(diff.empty()) << diff
                            << "The checked-in suite no longer matches the generator. If the change is intended, "
                               "run golden/regenerate.sh and review the diff.";
}

TEST(GoldenSuite, BytesDoNotDependOnThreadCountOrDestination) {
  testing::TempDir dir;
  GenerateOptions o;
  o.recipes = {"nvfp4.te", "mxfp4.rceil"};
  o.threads = 1;
  generate_suite(dir / "one", o);
  o.threads = 2;
  generate_suite(dir / "sub" / "two", o);
  EXPECT_EQ(tree_diff(dir / "one", dir / "sub" / "two"), "");
  // Regenerating over a previous suite replaces it.
  o.recipes = {"nvfp4.te"};
  generate_suite(dir / "one", o);
  EXPECT_FALSE(fs::exists(dir / "one" / "mxfp4.rceil"));
}

TEST(GoldenSuite, SeedChangesOnlyRandomCases) {
  testing::TempDir dir;
  GenerateOptions o;
  o.recipes = {"nvfp4.te"};
  generate_suite(dir / "a", o);
  o.seed = 2;
  generate_suite(dir / "b", o);
  const auto fa = read_tree(dir / "a"), fb = read_tree(dir / "b");
  for (const auto& [path, bytes] : fa) {
    if (path.find("/random_") != std::string::npos || path.find("/layout_") != std::string::npos ||
        path.find("/tail_") != std::string::npos || path.find("/gemm_") != std::string::npos ||
        path.find("/sr_tail/") != std::string::npos || path.find("/sr_philox") != std::string::npos ||
        path == "manifest.json" || path == "SHA256SUMS")
      continue;
    EXPECT_EQ(bytes, fb.at(path)) << path << " depends on the seed";
  }
  EXPECT_NE(fa.at("nvfp4.te/random_gaussian_rows/input.npy"), fb.at("nvfp4.te/random_gaussian_rows/input.npy"));
  EXPECT_NE(fa.at("nvfp4.te/gemm_tail/A.npy"), fb.at("nvfp4.te/gemm_tail/A.npy"));
  EXPECT_NE(fa.at("nvfp4.te/sr_tail/rbits.npy"), fb.at("nvfp4.te/sr_tail/rbits.npy"));
  EXPECT_NE(fa.at("nvfp4.te/sr_philox_te/rbits.npy"), fb.at("nvfp4.te/sr_philox_te/rbits.npy"));
}

TEST(GoldenSuite, ManifestRecordsGeneratorAndEveryFamily) {
  const json m = manifest_of(kCheckedIn);
  EXPECT_EQ(m["schema"], kSchemaName);
  EXPECT_EQ(m["schema_version"], kSchemaVersion);
  EXPECT_EQ(m["generator"]["command"], generator_command(GenerateOptions{}));
  EXPECT_EQ(m["generator"]["level"], 1);
  EXPECT_EQ(m["generator"]["seed"], "1");
  EXPECT_EQ(m["generator"]["implementation"], "reference");
  std::map<std::string, std::multiset<std::string>> families;
  for (const json& c : m["cases"]) {
    families[c["recipe"]].insert(c["family"].get<std::string>());
    EXPECT_FALSE(c["probes"].get<std::string>().empty());
    for (const json& f : c["files"]) EXPECT_EQ(f["sha256"].get<std::string>().size(), 64u);
  }
  for (const char* r : kDefaultRecipes) {
    const auto& fam = families[r];
    const int block = std::string(r).rfind("hif4", 0) == 0 ? 64 : std::string(r).rfind("mxfp4", 0) == 0 ? 32 : 16;
    for (const char* f : {"codes", "scale_steps", "special", "tail_error", "random", "layout"})
      EXPECT_GE(fam.count(f), 1u) << r << " has no " << f << " case";
    EXPECT_EQ(fam.count("tail"), static_cast<size_t>(block - 1)) << r;
    EXPECT_EQ(fam.count("hif4_bits"), std::string(r).rfind("hif4", 0) == 0 ? 1u : 0u) << r;
    EXPECT_EQ(fam.count("gemm"), 4u) << r;  // gemm_scales, gemm_tail, gemm_layout, gemm_epilogue
    // sr_grid, sr_special, sr_tail, sr_philox_te, sr_philox_te_ptx, sr_philox_index for each recipe with SR
    const bool sr = find_recipe(r)->allowed_roundings & rounding_bit(Rounding::stochastic);
    EXPECT_EQ(fam.count("stochastic"), sr ? 6u : 0u) << r;
  }
}

// Stochastic rounding's integer rule (docs/formats.md "Stochastic rounding"),
// by a plain loop over every MXFP4 stochastic case: the magnitude x/X rounds
// away from zero iff floor(256·δ) + r >= 256, δ its position between grid
// neighbours, r its byte in rbits.npy; 6 and beyond saturate. X = 2^(E8M0 -
// 127) is a power of two, so x/X and δ are exact in double.
TEST(GoldenSuite, MxStochasticCasesFollowTheIntegerRule) {
  const json m = manifest_of(kCheckedIn);
  const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  int cases = 0;
  int64_t checked = 0, up_by_byte = 0, kept_by_byte = 0;
  for (const json& c : m["cases"]) {
    if (c["family"] != "stochastic" || c["format"] != "mxfp4") continue;
    ++cases;
    const fs::path d = kCheckedIn / c["id"].get<std::string>();
    const std::vector<float> x = io::to_f32(io::read_npy(d / "input.npy"));
    const std::vector<uint8_t> r = io::read_npy(d / "rbits.npy").bytes;
    const std::vector<uint8_t> codes = io::read_npy(d / "codes.npy").bytes;
    const std::vector<uint8_t> scales = io::read_npy(d / "scales.npy").bytes;
    ASSERT_EQ(c["options"]["nibble_order"], "low_first");
    const std::vector<int64_t> shape = c["shape"];
    const int axis = c["options"]["axis"];
    const int64_t len = shape[axis], padded = c["padded_len"], per_row = c["blocks_per_row"];
    int64_t inner = 1;
    for (size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
    ASSERT_EQ(r.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t k = (static_cast<int64_t>(i) / inner) % len;
      const int64_t row = static_cast<int64_t>(i) / inner / len * inner + static_cast<int64_t>(i) % inner;
      const uint8_t s = scales[row * per_row + k / 32];
      if (s == 0xFF) continue;  // a NaN block: its codes are a convention
      const double t = std::fabs(static_cast<double>(x[i])) / std::ldexp(1.0, s == 0 ? -127 : s - 127);
      int want = 7;
      if (t < 6) {
        int lo = 0;
        while (grid[lo + 1] <= t) ++lo;
        const int frac = static_cast<int>(256 * (t - grid[lo]) / (grid[lo + 1] - grid[lo]));
        want = frac + r[i] >= 256 ? lo + 1 : lo;
        if (frac > 0) (want > lo ? up_by_byte : kept_by_byte) += 1;
      }
      want |= std::signbit(x[i]) ? 8 : 0;
      const int got = (codes[row * padded / 2 + k / 2] >> (k % 2 ? 4 : 0)) & 0xF;
      EXPECT_EQ(got, want) << c["id"] << " element " << i << " x = " << x[i] << " r = " << int(r[i]);
      ++checked;
    }
  }
  EXPECT_EQ(cases, 12);  // six each for mxfp4.ocp and mxfp4.rceil
  EXPECT_GT(up_by_byte, 100);
  EXPECT_GT(kept_by_byte, 100);
  std::printf("%lld elements of %d cases: %lld off-grid rounded up by their byte, %lld kept\n",
              static_cast<long long>(checked), cases, static_cast<long long>(up_by_byte),
              static_cast<long long>(kept_by_byte));
}

// Nibbles of the real (unpadded) elements of a 2-D [n, L] low_first case.
std::set<int> codes_used(const fs::path& dir, const json& c) {
  const io::Array codes = io::read_npy(dir / "codes.npy");
  const int64_t len = c["shape"][1], padded = c["padded_len"];
  std::set<int> used;
  for (int64_t row = 0; row < c["shape"][0].get<int64_t>(); ++row)
    for (int64_t k = 0; k < len; ++k) {
      const uint8_t byte = codes.bytes[row * padded / 2 + k / 2];
      used.insert(k % 2 ? byte >> 4 : byte & 0xF);
    }
  return used;
}

TEST(GoldenSuite, CodesCaseReachesEveryElementCode) {
  const json m = manifest_of(kCheckedIn);
  for (const char* r : kDefaultRecipes) {
    const std::string id = std::string(r) + "/codes";
    const json& c = case_of(m, id);
    ASSERT_EQ(c["options"]["nibble_order"], "low_first");
    EXPECT_EQ(codes_used(kCheckedIn / id, c).size(), 16u) << id << " misses an element code";
  }
}

// Scale codes reachable from the input grid, worked out from the specs:
// MX OCP floor: amax 2^-149 .. FLT_MAX -> s = floor(log2 amax) - 2 clamped at
// -127 -> E8M0 0x00 .. 0xFC (127 - 2 + 127 = 252). RCEIL: ceil(log2(amax/6))
// reaches 126 -> 0x00 .. 0xFD. NVFP4 te with S_enc = 1: UE4M3 of amax/6,
// saturating at 448 -> 0x00 .. 0x7E. HiF4: E6M2 of the clamped bf16(M/7) ->
// 0x00 .. 0xFE (0xFF is NaN).
TEST(GoldenSuite, ScaleStepsCaseCrossesEveryScaleCode) {
  const json m = manifest_of(kCheckedIn);
  const std::map<std::string, int> top = {
      {"mxfp4.ocp", 0xFC}, {"mxfp4.rceil", 0xFD}, {"nvfp4.te", 0x7E}, {"hif4.v14", 0xFE}, {"hif4.a6", 0xFE}};
  for (const auto& [r, last] : top) {
    const std::string id = r + "/scale_steps";
    const json& c = case_of(m, id);
    const io::Array s = io::read_npy(kCheckedIn / id / "scales.npy");
    const int sb = r.rfind("hif4", 0) == 0 ? 4 : 1;
    std::vector<int> code(s.bytes.size() / sb);
    for (size_t i = 0; i < code.size(); ++i) code[i] = s.bytes[i * sb];  // E6M2 byte of a HiF4 word
    std::set<int> seen(code.begin(), code.end());
    for (int k = 0; k <= last; ++k) EXPECT_TRUE(seen.count(k)) << id << " never reaches scale code " << k;
    EXPECT_EQ(*seen.rbegin(), last) << id;
    // Blocks come in threes (amax one ulp below, at, one ulp above a step):
    // the code changes between the first two and not between the last two.
    ASSERT_EQ(code.size() % 3, 0u) << id;
    EXPECT_EQ(code.size() / 3, static_cast<size_t>(last)) << id << ": one triple per step";
    for (size_t i = 0; i < code.size(); i += 3) {
      EXPECT_NE(code[i], code[i + 1]) << id << " block " << i << " is not just below a step";
      EXPECT_EQ(code[i + 1], code[i + 2]) << id << " block " << i + 1;
    }
    EXPECT_TRUE(c["nan_scale_blocks"].empty()) << id;
  }
}

TEST(GoldenSuite, NanScaleBlocksAreListedAndDecodeToNan) {
  const json m = manifest_of(kCheckedIn);
  for (const char* r : kDefaultRecipes) {
    const std::string id = std::string(r) + "/special";
    const json& c = case_of(m, id);
    // NaN poisons MX and HiF4 blocks; NVFP4 te's fmaxf amax drops NaN
    // (docs/spec/nvfp4.md §4.1), so its blocks keep a finite scale.
    if (std::string(r).rfind("nvfp4", 0) != 0) {
      ASSERT_FALSE(c["nan_scale_blocks"].empty()) << id << ": NaN inputs should give NaN-scale blocks";
    }
    const io::Array dq = io::read_npy(kCheckedIn / id / "dequant.npy");
    const std::vector<float> v = io::to_f32(dq);
    const int block = c["block_size"];
    std::set<int64_t> nan_blocks;
    for (int64_t b : c["nan_scale_blocks"]) nan_blocks.insert(b);
    for (int64_t b = 0; b < static_cast<int64_t>(v.size()) / block; ++b) {
      bool all_nan = true;
      for (int j = 0; j < block; ++j) all_nan = all_nan && std::isnan(v[b * block + j]);
      EXPECT_EQ(all_nan, nan_blocks.count(b) == 1) << id << " block " << b;
    }
  }
}

// An independent decoder, written from the format definitions (docs/spec/mxfp4.md §0,
// docs/spec/nvfp4.md §0, docs/spec/hif4.md §4), applied to every case of the checked-in suite:
// dequant.npy must be what codes.npy and scales.npy (and global_scale.npy)
// say, element by element. This catches a generator that writes arrays out
// of order or mislabels a layout.
float e2m1_value(int c) {
  static const float v[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  return (c & 8 ? -1.0f : 1.0f) * v[c & 7];
}

TEST(GoldenSuite, DequantMatchesAnIndependentDecoder) {
  const json m = manifest_of(kCheckedIn);
  int64_t checked = 0;
  for (const json& c : m["cases"]) {
    if (c["expect"] != "output" || c["family"] == "gemm") continue;
    const std::string id = c["id"], format = c["format"];
    ASSERT_EQ(c["options"]["nibble_order"], "low_first") << id;
    if (format == "hif4") {
      ASSERT_EQ(c["options"]["scale_bit_order"], "lsb_first") << id;
    }
    const io::Array codes = io::read_npy(kCheckedIn / id / "codes.npy");
    const io::Array scales = io::read_npy(kCheckedIn / id / "scales.npy");
    const std::vector<float> dq = io::to_f32(io::read_npy(kCheckedIn / id / "dequant.npy"));
    float global_amax = 0.0f;
    if (format == "nvfp4") {
      ASSERT_EQ(c["recipe"], "nvfp4.te") << id << ": this decoder is TransformerEngine's";
      global_amax = io::to_f32(io::read_npy(kCheckedIn / id / "global_scale.npy"))[0];
    }
    const std::vector<int64_t> shape = c["shape"];
    const int axis = c["options"]["axis"], block = c["block_size"];
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    const int64_t len = shape[axis], padded = c["padded_len"], bpr = padded / block;
    for (int64_t row = 0; row < outer * inner; ++row)
      for (int64_t k = 0; k < len; ++k) {
        const uint8_t byte = codes.bytes[row * padded / 2 + k / 2];
        const int code = k % 2 ? byte >> 4 : byte & 0xF;
        const int64_t blk = row * bpr + k / block;
        float v;
        if (format == "mxfp4") {
          const int e = scales.bytes[blk];
          v = e == 0xFF ? NAN : std::ldexp(e2m1_value(code), e - 127);
        } else if (format == "nvfp4") {
          const int u = scales.bytes[blk] & 0x7F, e = u >> 3, mant = u & 7;
          const float scale = e == 0 ? std::ldexp(static_cast<float>(mant), -9) : std::ldexp(8.0f + mant, e - 10);
          // TransformerEngine decodes through the tensor amax G:
          // q * fp32(fp32(s * G) * fp32(1 / (6 * 448))) (docs/formats.md).
          const float factor = (scale * global_amax) * (1.0f / 2688.0f);
          v = u == 0x7F ? NAN : e2m1_value(code) * factor;
        } else {
          uint32_t w;
          std::memcpy(&w, scales.bytes.data() + 4 * blk, 4);
          const int j = static_cast<int>(k % block), e6m2 = w & 0xFF;
          const int shift = static_cast<int>((w >> (8 + j / 8)) & 1) + static_cast<int>((w >> (16 + j / 4)) & 1);
          const float s = std::ldexp(4.0f + (e6m2 & 3), (e6m2 >> 2) - 50);
          v = e6m2 == 0xFF ? NAN : (code & 8 ? -1.0f : 1.0f) * std::ldexp((code & 7) / 4.0f * s, shift);
        }
        const float got = dq[((row / inner) * len + k) * inner + row % inner];
        ASSERT_TRUE(testing::same_bits(v, got))
            << id << " row " << row << " element " << k << ": decoded " << v << ", dequant.npy " << got;
        ++checked;
      }
  }
  EXPECT_GT(checked, 100000);
}

TEST(GoldenSuite, TailErrorCaseHasOnlyItsInput) {
  const json m = manifest_of(kCheckedIn);
  const json& c = case_of(m, "mxfp4.ocp/tail_error");
  EXPECT_EQ(c["expect"], "error");
  EXPECT_NE(c["error"].get<std::string>().find("not a multiple"), std::string::npos);
  ASSERT_EQ(c["files"].size(), 1u);
  EXPECT_EQ(c["files"][0]["role"], "input");
}

TEST(GoldenSuite, BlocksTextHasOneLinePerBlock) {
  const json m = manifest_of(kCheckedIn);
  const json& c = case_of(m, "mxfp4.ocp/codes");
  std::ifstream in(kCheckedIn / "mxfp4.ocp/codes/blocks.txt");
  std::string line;
  int64_t blocks = 0;
  const io::Array input = io::read_npy(kCheckedIn / "mxfp4.ocp/codes/input.npy");
  const io::Array scales = io::read_npy(kCheckedIn / "mxfp4.ocp/codes/scales.npy");
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // "<index> <row> <block> | <32 words> | <scale> | <32 hex digits>"
    uint32_t first_word = 0;
    unsigned scale = 0;
    char codes[40] = {};
    int64_t idx = 0, row = 0, b = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%ld %ld %ld | %x", &idx, &row, &b, &first_word), 4) << line;
    const size_t bar = line.rfind('|'), bar2 = line.rfind('|', bar - 1);
    ASSERT_EQ(std::sscanf(line.c_str() + bar2 + 1, " %x | %39s", &scale, codes), 2) << line;
    EXPECT_EQ(idx, blocks);
    uint32_t expected_word;
    std::memcpy(&expected_word, input.bytes.data() + 4 * 32 * idx, 4);
    EXPECT_EQ(first_word, expected_word);
    EXPECT_EQ(scale, scales.bytes[idx]);
    EXPECT_EQ(std::string(codes).size(), 32u);
    ++blocks;
  }
  EXPECT_EQ(blocks, c["rows"].get<int64_t>());
}

TEST(GoldenSuite, GenerateRejectsBadOptionsAndForeignDirectories) {
  testing::TempDir dir;
  GenerateOptions o;
  o.level = 4;
  EXPECT_THROW(generate_suite(dir / "s", o), InputError);
  o.level = 1;
  o.recipes = {"mxfp4.nope"};
  EXPECT_THROW(generate_suite(dir / "s", o), InputError);
  o.recipes = {"nvfp4.modelopt_fq"};  // fake-quant only: no codes to compare
  EXPECT_THROW(generate_suite(dir / "s", o), InputError);
  o.recipes = {"hif4.v14"};
  o.formats = {"mxfp4"};
  EXPECT_THROW(generate_suite(dir / "s", o), InputError);
  o.formats.clear();
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other" / "notes.txt") << "keep me";
  EXPECT_THROW(generate_suite(dir / "other", o), InputError);
  EXPECT_TRUE(fs::exists(dir / "other" / "notes.txt"));
  EXPECT_FALSE(fs::exists(dir / "s"));
  // No staging directory is left behind.
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-golden"), std::string::npos) << e.path();
}

TEST(GoldenSuite, CliGenerateAndHelp) {
  testing::TempDir dir;
  auto r = testing::run_cli("golden generate --out " + (dir / "s").string() + " --recipes nvfp4.te --threads 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir / "s" / "manifest.json"));
  r = testing::run_cli("golden generate --out " + (dir / "t").string() + " --level 9");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--level"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("9"), std::string::npos) << r.output;
  r = testing::run_cli("golden generate --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("Example"), std::string::npos);
  r = testing::run_cli("golden verify --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("Example"), std::string::npos);
}

// The fma_fp32 C of every MXFP4/NVFP4 GEMM case, recomputed from the packed
// operand files with the decoder above and a plain fma loop (docs/gemm.md:
// acc = +0, acc = fma(fp32(a_k), fp32(b_k), acc) in increasing k, then
// C = fp32(alpha' · acc) with the manifest's alpha_used). This checks the
// operand files, their layout and alpha_used against C, not the GEMM against
// itself; the GEMM's own tests prove the models.
float mx_nv_element(const std::string& format, int code, int scale_byte) {
  if (format == "mxfp4") return scale_byte == 0xFF ? NAN : std::ldexp(e2m1_value(code), scale_byte - 127);
  const int u = scale_byte & 0x7F, e = u >> 3, mant = u & 7;
  const float scale = e == 0 ? std::ldexp(static_cast<float>(mant), -9) : std::ldexp(8.0f + mant, e - 10);
  return u == 0x7F ? NAN : e2m1_value(code) * scale;
}

TEST(GoldenSuite, GemmFmaFp32MatchesAnIndependentLoop) {
  const json m = manifest_of(kCheckedIn);
  int cases = 0, nan_cases = 0;
  for (const json& c : m["cases"]) {
    if (c["family"] != "gemm" || c["format"] == "hif4") continue;
    const std::string id = c["id"], format = c["format"];
    const int64_t rows = c["m"], cols = c["n"], k = c["k"], block = c["block_size"];
    const int64_t pad_a = c["a"]["padded_len"], pad_b = c["b"]["padded_len"];
    ASSERT_EQ(c["a"]["nibble_order"], "low_first") << id;
    const io::Array ac = io::read_npy(kCheckedIn / id / "a_codes.npy"), as = io::read_npy(kCheckedIn / id / "a_scales.npy");
    const io::Array bc = io::read_npy(kCheckedIn / id / "b_codes.npy"), bs = io::read_npy(kCheckedIn / id / "b_scales.npy");
    const std::vector<float> C = io::to_f32(io::read_npy(kCheckedIn / id / "C_fma_fp32.npy"));
    ASSERT_EQ(C.size(), static_cast<size_t>(rows * cols)) << id;
    // A: row i of m; B: column j of n, both k-contiguous (blocked along k).
    auto value = [&](const io::Array& codes, const io::Array& scales, int64_t padded, int64_t row, int64_t kk) {
      const uint8_t byte = codes.bytes[row * padded / 2 + kk / 2];
      return mx_nv_element(format, kk % 2 ? byte >> 4 : byte & 0xF, scales.bytes[row * (padded / block) + kk / block]);
    };
    std::optional<float> alpha;
    if (!c["alpha_used"].is_null()) alpha = std::strtof(c["alpha_used"].get<std::string>().c_str(), nullptr);
    // gemm_epilogue: D = fma(beta, C, fma(alpha', acc, bias)) (docs/gemm.md "Epilogue").
    std::vector<float> source, bias;
    float beta = 1.0f;
    if (!c["beta"].is_null()) {
      beta = std::strtof(c["beta"].get<std::string>().c_str(), nullptr);
      source = io::to_f32(io::read_npy(kCheckedIn / id / "c.npy"));
    }
    if (c["bias"] == true) bias = io::to_f32(io::read_npy(kCheckedIn / id / "bias.npy"));
    bool any_nan = false;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < k; ++kk) acc = std::fma(value(ac, as, pad_a, i, kk), value(bc, bs, pad_b, j, kk), acc);
        if (!bias.empty()) acc = std::fma(alpha.value_or(1.0f), acc, bias[j]);
        else if (alpha) acc = *alpha * acc;
        if (!source.empty()) acc = std::fma(beta, source[i * cols + j], acc);
        any_nan = any_nan || std::isnan(acc);
        ASSERT_TRUE(testing::same_bits(acc, C[i * cols + j]) || (std::isnan(acc) && std::isnan(C[i * cols + j])))
            << id << " C row " << i << " column " << j << ": loop " << acc << ", C_fma_fp32.npy " << C[i * cols + j];
      }
    ++cases;
    if (c["random_scales"] == true) {
      EXPECT_TRUE(any_nan) << id << ": a random-scale case must hold a NaN scale code";
      ++nan_cases;
    }
    for (const char* f : {"C_exact.npy", "C_block_fp32_bps1.npy"})
      EXPECT_TRUE(fs::exists(kCheckedIn / id / f)) << id << " has no " << f;
  }
  EXPECT_EQ(cases, 12);  // gemm_scales, gemm_tail, gemm_layout, gemm_epilogue of 3 MXFP4/NVFP4 recipes
  EXPECT_EQ(nan_cases, 3);
}

}  // namespace
}  // namespace fp4emu::golden
