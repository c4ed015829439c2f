// `golden verify` against single-bit faults injected into a copy of the
// checked-in suite's outputs: it must report exactly the injected faults, at
// the block and element the test computes from the layouts itself, and
// nothing for the differences the format leaves undefined (NaN payloads,
// codes of NaN-scale blocks unless --strict). Bad candidates and damaged
// suites exit 2.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <tuple>

#include "fp4emu/error.hpp"
#include "fp4emu/golden/sha256.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "golden_case_util.hpp"
#include "test_util.hpp"

namespace fp4emu::golden {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The default level-1 suite, generated once per run by this fp4emu: the
// checked-in golden/suite lags a recipe's bits version until it is
// regenerated (and verify then rightly calls its cases stale).
const fs::path& suite_dir() {
  static testing::TempDir dir;
  static const fs::path path = [] {
    generate_suite(dir / "suite", GenerateOptions{});
    return dir / "suite";
  }();
  return path;
}

json manifest() {
  std::ifstream in(suite_dir() / "manifest.json");
  return json::parse(in);
}

const json& case_of(const json& m, const std::string& id) {
  for (const json& c : m["cases"])
    if (c["id"] == id) return c;
  throw std::runtime_error("no case " + id);
}

// A candidate that is a faithful copy of the output files of the suite: of
// every case, or of the cases listed (the tests then verify with
// --skip-missing; copying a thousand files is the slow part of these tests).
// A faithful kernel refuses the input of an expect-error case: error.txt.
void copy_outputs(const fs::path& to, const std::set<std::string>& only = {}, const fs::path& suite = suite_dir()) {
  std::ifstream in(suite / "manifest.json");
  const json m = json::parse(in);
  for (const json& c : m["cases"]) {
    if (!only.empty() && !only.count(c["id"])) continue;
    if (c["expect"] == "error") {
      fs::create_directories(to / c["id"].get<std::string>());
      std::ofstream(to / c["id"].get<std::string>() / "error.txt") << "tail length not a multiple of the block\n";
    }
    for (const json& f : c["files"]) {
      if (f["role"] != "output") continue;
      const fs::path dst = to / f["path"].get<std::string>();
      fs::create_directories(dst.parent_path());
      fs::copy_file(suite / f["path"].get<std::string>(), dst);
    }
  }
}

// Flips bit `bit` of data byte `byte` of a candidate .npy array.
void flip(const fs::path& candidate, const std::string& rel, int64_t byte, int bit) {
  io::Array a = io::read_npy(candidate / rel);
  ASSERT_LT(byte, static_cast<int64_t>(a.bytes.size())) << rel;
  a.bytes[byte] ^= static_cast<uint8_t>(1u << bit);
  io::write_npy(candidate / rel, a);
}

using Key = std::tuple<std::string, std::string, int64_t, int>;  // file, kind, block, element

std::set<Key> keys(const VerifyReport& r) {
  std::set<Key> k;
  for (const Mismatch& m : r.first) k.insert({m.file, m.kind, m.block, m.element});
  return k;
}

VerifyOptions all_reported(bool skip_missing = true) {
  VerifyOptions o;
  o.max_report = 1000;
  o.skip_missing = skip_missing;
  return o;
}

TEST(GoldenVerify, FaithfulCopyPasses) {
  testing::TempDir cand;
  copy_outputs(cand.path());
  const VerifyReport r = verify_suite(suite_dir(), cand.path(), all_reported(false));
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
  EXPECT_EQ(r.total_mismatches, 0);
  EXPECT_EQ(r.count(CaseStatus::fail), 0);
  EXPECT_EQ(r.count(CaseStatus::pass), static_cast<int>(manifest()["cases"].size()));
}

TEST(GoldenVerify, ReportsExactlyTheInjectedSingleBitFaults) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"mxfp4.ocp/codes", "hif4.v14/random_gaussian_rows", "nvfp4.te/random_llm_bf16",
                             "mxfp4.rceil/layout_rows", "hif4.a6/layout_cols", "nvfp4.te/special_global_nan",
                             "hif4.v14/tail_05", "mxfp4.ocp/special"});
  const json m = manifest();
  std::set<Key> expected;

  // 1. A code nibble: MX rows are 32 codes = 16 bytes; byte 5 bit 6 is the
  //    high nibble of byte 5 = element 11 of block 0 (low nibble first).
  flip(cand.path(), "mxfp4.ocp/codes/codes.npy", 16 * 3 + 5, 6);
  expected.insert({"mxfp4.ocp/codes/codes.npy", "code", 3, 11});

  // 2. A HiF4 scale word: word 3, bit 9 = L2 bit b_1.
  flip(cand.path(), "hif4.v14/random_gaussian_rows/scales.npy", 4 * 3 + 1, 1);
  expected.insert({"hif4.v14/random_gaussian_rows/scales.npy", "scale", 3, -1});

  // 3. A dequantized value of a [32, 64] NVFP4 tensor: value 100 is row 1,
  //    k = 36, i.e. block 1 * 4 + 2 = 6, element 4.
  flip(cand.path(), "nvfp4.te/random_llm_bf16/dequant.npy", 4 * 100, 0);
  expected.insert({"nvfp4.te/random_llm_bf16/dequant.npy", "dequant", 6, 4});

  // 4. The 128x4 swizzled scales of a [130, 160] MX tensor (R' = 256, C = 5,
  //    C' = 8): scale (129, 4) is at ((1*2 + 1)*512 + 1*16 + 0*4 + 0) = 1552,
  //    block 129 * 5 + 4.
  flip(cand.path(), "mxfp4.rceil/layout_rows/scales_swizzled_128x4.npy", 1552, 2);
  expected.insert({"mxfp4.rceil/layout_rows/scales_swizzled_128x4.npy", "scale", 129 * 5 + 4, -1});
  // 5. A padding byte of the same file: column 5 of row 0 lies in the pad,
  //    offset (0*2 + 1)*512 + 1 = 513.
  flip(cand.path(), "mxfp4.rceil/layout_rows/scales_swizzled_128x4.npy", 513, 0);
  expected.insert({"mxfp4.rceil/layout_rows/scales_swizzled_128x4.npy", "layout_padding", -1, -1});

  // 6. The HiF4 Cube layout of a B operand [K=256, N=24]: scale rows = 24,
  //    cols = 4; L3-low byte of scale (17, 2) sits in cell (1, 2) = 6 at
  //    6*64 + 32 + (17 % 16)*2 = 418; block 17 * 4 + 2.
  flip(cand.path(), "hif4.a6/layout_cols/scales_hif4_cube.npy", 418, 7);
  expected.insert({"hif4.a6/layout_cols/scales_hif4_cube.npy", "scale", 17 * 4 + 2, -1});

  // 7. The NVFP4 per-tensor scale (S_enc, value 1).
  flip(cand.path(), "nvfp4.te/special_global_nan/global_scale.npy", 4 * 1 + 2, 3);
  expected.insert({"nvfp4.te/special_global_nan/global_scale.npy", "global_scale", -1, -1});

  // 8. A padding code of a tail: HiF4 [2, 69] pads to 128, 64 bytes a row;
  //    the high nibble of the last byte of row 1 is element 127 = block 1,
  //    element 63, block index 1 * 2 + 1.
  flip(cand.path(), "hif4.v14/tail_05/codes.npy", 64 + 63, 4);
  expected.insert({"hif4.v14/tail_05/codes.npy", "code", 3, 63});

  const VerifyReport r = verify_suite(suite_dir(), cand.path(), all_reported());
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_EQ(r.total_mismatches, static_cast<int64_t>(expected.size())) << report_text(r);
  EXPECT_EQ(keys(r), expected) << report_text(r);
  for (const Mismatch& mm : r.first) {
    if (mm.kind == "code" && mm.file.find("tail_05") != std::string::npos) {
      EXPECT_EQ(mm.input, "pad");
      EXPECT_EQ(mm.row, 1);
      EXPECT_EQ(mm.block_in_row, 1);
    }
    if (mm.kind == "code" && mm.file.find("mxfp4.ocp/codes") != std::string::npos) {
      // The report carries the input word and both scales of the block.
      io::Array in = io::read_npy(suite_dir() / "mxfp4.ocp/codes/input.npy");
      uint32_t w;
      std::memcpy(&w, in.bytes.data() + 4 * (3 * 32 + 11), 4);
      EXPECT_EQ(mm.input.substr(0, 10), fmt::format("0x{:08x}", w));
      EXPECT_EQ(mm.expected_scale, mm.actual_scale);
      EXPECT_NE(mm.expected, mm.actual);
    }
  }
  EXPECT_EQ(r.count(CaseStatus::fail), 7);  // faults 4 and 5 are in one case
  // mxfp4.ocp/special (untouched); the cases not copied are not run, never passed.
  EXPECT_EQ(r.count(CaseStatus::pass), 1);
  EXPECT_EQ(r.count(CaseStatus::not_run), static_cast<int>(m["cases"].size()) - 8);

  // --max-report bounds the list, not the count.
  VerifyOptions few = all_reported();
  few.max_report = 2;
  const VerifyReport r2 = verify_suite(suite_dir(), cand.path(), few);
  EXPECT_EQ(r2.first.size(), 2u);
  EXPECT_EQ(r2.total_mismatches, 8);
}

TEST(GoldenVerify, UndefinedBitsAreNotMismatchesUnlessStrict) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"mxfp4.ocp/special", "hif4.v14/special"});
  const json m = manifest();
  // A NaN-scale MX block: its element codes are fp4emu's convention.
  const json& mx = case_of(m, "mxfp4.ocp/special");
  const int64_t nb = mx["nan_scale_blocks"][0];
  flip(cand.path(), "mxfp4.ocp/special/codes.npy", nb * 16, 0);
  // A NaN-scale HiF4 block: its L2/L3 bytes likewise (the E6M2 byte is checked).
  const json& hf = case_of(m, "hif4.v14/special");
  const int64_t hb = hf["nan_scale_blocks"][0];
  flip(cand.path(), "hif4.v14/special/scales.npy", hb * 4 + 2, 5);
  // A NaN payload in dequant: any NaN equals any NaN.
  {
    io::Array dq = io::read_npy(cand.path() / "mxfp4.ocp/special/dequant.npy");
    uint32_t w;
    std::memcpy(&w, dq.bytes.data() + 4 * nb * 32, 4);
    ASSERT_TRUE((w & 0x7F800000u) == 0x7F800000u && (w & 0x7FFFFFu)) << "expected a NaN";
    flip(cand.path(), "mxfp4.ocp/special/dequant.npy", 4 * nb * 32, 1);
  }
  VerifyReport r = verify_suite(suite_dir(), cand.path(), all_reported());
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
  EXPECT_EQ(r.total_mismatches, 0);

  VerifyOptions strict = all_reported();
  strict.strict = true;
  r = verify_suite(suite_dir(), cand.path(), strict);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_EQ(keys(r), (std::set<Key>{{"mxfp4.ocp/special/codes.npy", "code", nb, 0},
                                    {"hif4.v14/special/scales.npy", "scale", hb, -1}}))
      << report_text(r);

  // The E6M2 byte of a NaN block is always compared.
  flip(cand.path(), "hif4.v14/special/scales.npy", hb * 4, 0);
  r = verify_suite(suite_dir(), cand.path(), all_reported());
  EXPECT_EQ(keys(r), (std::set<Key>{{"hif4.v14/special/scales.npy", "scale", hb, -1}}));
}

TEST(GoldenVerify, SignOfZeroIsSignificant) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"nvfp4.te/special"});
  // Block 0 of the special case is all +0: +0 -> -0 in element 7.
  flip(cand.path(), "nvfp4.te/special/dequant.npy", 4 * 7 + 3, 7);
  const VerifyReport r = verify_suite(suite_dir(), cand.path(), all_reported());
  EXPECT_EQ(keys(r), (std::set<Key>{{"nvfp4.te/special/dequant.npy", "dequant", 0, 7}})) << report_text(r);
  ASSERT_EQ(r.first.size(), 1u);
  EXPECT_EQ(r.first[0].expected, "0x00000000 (0)");
  EXPECT_EQ(r.first[0].actual, "0x80000000 (-0)");
}

// A GEMM C file: a single-bit fault is reported at its C row and column with
// the model; a different NaN (payload) in a NaN entry is no mismatch.
TEST(GoldenVerify, ReportsAGemmCFaultAtItsRowAndColumn) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"mxfp4.ocp/gemm_tail", "nvfp4.te/gemm_scales"});
  const json m_all = manifest();
  const json& c = case_of(m_all, "mxfp4.ocp/gemm_tail");
  const int64_t n = c["n"];
  const std::string file = "mxfp4.ocp/gemm_tail/C_block_fp32_bps2.npy";
  const io::Array before = io::read_npy(suite_dir() / file);
  // C row 2, column 3: bit 0 of its fp32 word (the lowest mantissa bit).
  const int64_t at = 2 * n + 3;
  flip(cand.path(), file, 4 * at, 0);
  // nvfp4.te/gemm_scales: row 1 of A holds the NaN scale code, so C row 1 is
  // NaN; flip a payload bit of C[1][0]: a mismatch too, NaN bits are part of
  // the GEMM models (docs/gemm.md "NaN").
  const std::string nan_file = "nvfp4.te/gemm_scales/C_exact.npy";
  const int64_t nan_at = case_of(m_all, "nvfp4.te/gemm_scales")["n"].get<int64_t>();
  ASSERT_TRUE(std::isnan(io::to_f32(io::read_npy(suite_dir() / nan_file))[nan_at]));
  flip(cand.path(), nan_file, 4 * nan_at, 0);

  const VerifyReport r = verify_suite(suite_dir(), cand.path(), all_reported());
  ASSERT_EQ(r.total_mismatches, 2) << report_text(r);
  ASSERT_EQ(r.first.size(), 2u);
  EXPECT_EQ(r.first[1].file, nan_file);
  EXPECT_EQ(r.first[1].row, 1);
  EXPECT_EQ(r.first[1].column, 0);
  const Mismatch& m = r.first[0];
  EXPECT_EQ(m.case_id, "mxfp4.ocp/gemm_tail");
  EXPECT_EQ(m.file, file);
  EXPECT_EQ(m.kind, "gemm_c");
  EXPECT_EQ(m.row, 2);
  EXPECT_EQ(m.column, 3);
  EXPECT_EQ(m.input, "model block_fp32 blocks_per_step 2");
  uint32_t bits;
  std::memcpy(&bits, before.bytes.data() + 4 * at, 4);
  EXPECT_EQ(m.expected.substr(0, 10), fmt::format("0x{:08x}", bits));
  EXPECT_EQ(m.actual.substr(0, 10), fmt::format("0x{:08x}", bits ^ 1u));
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_NE(report_text(r).find("C row 2, column 3 (model block_fp32 blocks_per_step 2)"), std::string::npos)
      << report_text(r);
  for (const CaseResult& cr : r.cases)
    if (cr.id == "nvfp4.te/gemm_scales") {
      EXPECT_EQ(cr.status, CaseStatus::fail);
    }
}

TEST(GoldenVerify, OutputForARejectedInputFails) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"hif4.v14/codes"});
  fs::create_directories(cand / "hif4.v14/tail_error");
  io::write_npy(cand / "hif4.v14/tail_error/codes.npy", io::from_u8({1}, std::vector<uint8_t>{0}));
  const VerifyReport r = verify_suite(suite_dir(), cand.path(), all_reported());
  EXPECT_EQ(keys(r), (std::set<Key>{{"hif4.v14/tail_error/codes.npy", "unexpected_output", -1, -1}}));
  EXPECT_EQ(r.exit_code(), 1);
}

TEST(GoldenVerify, BadCandidateFilesExitTwo) {
  testing::TempDir cand;
  copy_outputs(cand.path());
  // Truncated file.
  fs::resize_file(cand / "mxfp4.ocp/codes/codes.npy", 20);
  // Wrong dtype.
  io::write_npy(cand / "nvfp4.te/codes/dequant.npy", io::from_u8({1}, std::vector<uint8_t>{0}));
  // Missing file.
  fs::remove(cand / "hif4.a6/special/scales.npy");
  VerifyReport r = verify_suite(suite_dir(), cand.path(), all_reported(false));
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_EQ(r.errors.size(), 3u) << report_text(r);
  const std::string text = report_text(r);
  EXPECT_NE(text.find("codes.npy"), std::string::npos);
  EXPECT_NE(text.find("is u8 [1], expected f32"), std::string::npos) << text;
  EXPECT_NE(text.find("--skip-missing"), std::string::npos);
}

TEST(GoldenVerify, SkipMissingComparesWhatTheCandidateHas) {
  testing::TempDir cand;
  copy_outputs(cand.path());
  const json m = manifest();
  for (const json& c : m["cases"])
    for (const json& f : c["files"])
      if (f["path"].get<std::string>().ends_with("/dequant.npy")) fs::remove(cand / f["path"].get<std::string>());
  fs::remove_all(cand / "hif4.a6");
  VerifyOptions o = all_reported();
  o.skip_missing = true;
  VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
  // A case without its dequant.npy is partial, never passed.
  EXPECT_GT(r.count(CaseStatus::partial), 0);
  for (const CaseResult& c : r.cases) {
    if (c.id.rfind("hif4.a6/", 0) == 0) EXPECT_EQ(c.status, CaseStatus::not_run) << c.id;
    else if (c.family == "gemm" || c.family == "tail_error") EXPECT_EQ(c.status, CaseStatus::pass) << c.id;
    else EXPECT_EQ(c.status, CaseStatus::partial) << c.id;
  }
  // An empty candidate compares nothing: that is an error, not a pass.
  testing::TempDir empty;
  r = verify_suite(suite_dir(), empty.path(), o);
  EXPECT_EQ(r.exit_code(), 2);
}

TEST(GoldenVerify, DamagedSuiteIsRejected) {
  testing::TempDir dir;
  const fs::path suite = dir / "suite";
  // A linked copy (cheap); the damaged file is unlinked and rewritten, so the
  // checked-in suite is never touched.
  try {
    fs::copy(suite_dir(), suite, fs::copy_options::recursive | fs::copy_options::create_hard_links);
  } catch (const fs::filesystem_error&) {
    fs::remove_all(suite);
    fs::copy(suite_dir(), suite, fs::copy_options::recursive);
  }
  testing::TempDir cand;
  copy_outputs(cand.path(), {"mxfp4.ocp/special"});
  const fs::path victim = suite / "mxfp4.ocp/special/input.npy";
  std::vector<char> bytes;
  {
    std::ifstream in(victim, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[200] ^= 0x01;
  fs::remove(victim);
  std::ofstream(victim, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  try {
    verify_suite(suite, cand.path(), all_reported());
    FAIL() << "a damaged suite was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mxfp4.ocp/special/input.npy"), std::string::npos) << e.what();
  }
  fs::remove(suite / "SHA256SUMS");
  EXPECT_THROW(verify_suite(suite, cand.path(), all_reported()), InputError);
}

TEST(GoldenVerify, CliExitCodesAndJson) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"nvfp4.te/codes"});
  const std::string args =
      fmt::format("golden verify --suite {} --candidate {} --skip-missing", suite_dir().string(), cand.path().string());
  auto r = testing::run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS    nvfp4.te/codes"), std::string::npos) << r.output;
  flip(cand.path(), "nvfp4.te/codes/codes.npy", 0, 0);
  r = testing::run_cli(args + " --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const json j = json::parse(r.output);
  EXPECT_EQ(j["total_mismatches"], 1);
  EXPECT_EQ(j["mismatches"][0]["case"], "nvfp4.te/codes");
  EXPECT_EQ(j["mismatches"][0]["element"], 0);
  r = testing::run_cli(args + " --max-report 0");
  EXPECT_EQ(r.exit_code, 1);
  r = testing::run_cli(fmt::format("golden verify --suite {} --candidate {}", (cand / "nope").string(),
                                   cand.path().string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// ---- hostile suites and candidates ------------------------------------------------

// A small suite generated here, whose manifest a test edits and re-hashes as
// anyone with sha256sum can: the verifier must not trust it.
class EditableSuite {
 public:
  explicit EditableSuite(std::vector<std::string> cases) {
    GenerateOptions o;
    o.recipes = {"mxfp4.ocp"};
    o.cases = std::move(cases);
    o.threads = 1;
    generate_suite(path(), o);
    std::ifstream in(path() / "manifest.json");
    m = json::parse(in);
  }
  fs::path path() const { return dir_ / "suite"; }
  json& case_(const std::string& id) {
    for (json& c : m["cases"])
      if (c["id"] == id) return c;
    throw std::runtime_error("no case " + id);
  }
  // manifest.json from `m`, and SHA256SUMS re-hashed to match, plus `extra`
  // lines.
  void save(const std::string& extra = "") {
    const std::string text = m.dump();
    std::ofstream(path() / "manifest.json", std::ios::binary) << text;
    std::string sums;
    for (const json& c : m["cases"])
      for (const json& f : c["files"])
        if (f["path"].is_string() && f["sha256"].is_string())
          sums += f["sha256"].get<std::string>() + "  " + f["path"].get<std::string>() + "\n";
    sums += sha256_hex({reinterpret_cast<const uint8_t*>(text.data()), text.size()}) + "  manifest.json\n";
    std::ofstream(path() / "SHA256SUMS", std::ios::binary) << sums << extra;
  }
  json m;

 private:
  testing::TempDir dir_;
};

// The InputError message of verifying `suite`; fails the test if it passes.
std::string rejection(const fs::path& suite, const fs::path& cand, const VerifyOptions& o = all_reported()) {
  try {
    verify_suite(suite, cand, o);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "verify accepted the suite";
  return {};
}

TEST(GoldenVerifyHostile, ManifestFieldsAreCheckedBeforeUse) {
  const std::string id = "mxfp4.ocp/codes";
  testing::TempDir cand;
  struct Edit {
    const char* what;  // the field the message must name
    std::function<void(json& m, json& c)> edit;
  };
  const Edit edits[] = {
      {"field 'block_size'", [](json&, json& c) { c["block_size"] = 0; }},  // divided by zero
      {"field 'block_size'", [](json&, json& c) { c["block_size"] = 16; }},
      {"field 'options.axis'", [](json&, json& c) { c["options"]["axis"] = 7; }},  // read outside shape
      {"field 'options.axis'", [](json&, json& c) { c["options"]["axis"] = -5; }},
      {"field 'options.axis'", [](json&, json& c) { c["options"]["axis"] = 4294967297.0; }},
      {"'shape'", [](json&, json& c) { c["shape"][0] = c["shape"][0].get<int64_t>() + 100; }},  // heap overflow
      {"field 'shape[0]'", [](json&, json& c) { c["shape"] = json::array({1e300, 4}); }},      // UB cast
      {"field 'shape[0]'", [](json&, json& c) { c["shape"][0] = -3; }},
      {"field 'shape[1]'", [](json&, json& c) { c["shape"][1] = "32"; }},
      {"field 'shape'", [](json&, json& c) { c["shape"] = json::array({4294967296LL, 4294967296LL, 64}); }},
      {"field 'cases'", [](json& m, json&) { m.erase("cases"); }},
      {"field 'files[1].role'", [](json&, json& c) { c["files"][1]["role"] = 5; }},
      {"field 'nan_scale_blocks[0]'", [](json&, json& c) { c["nan_scale_blocks"] = json::array({1000000000}); }},
      {"field 'recipe'", [](json&, json& c) { c["recipe"] = "mxfp4.nope"; }},
      {"field 'options.nibble_order'", [](json&, json& c) { c["options"].erase("nibble_order"); }},
      {"field 'files'", [](json&, json& c) { c["files"] = json::array({c["files"][0]}); }},  // outputs unlisted
  };
  for (const Edit& e : edits) {
    EditableSuite suite({id});
    copy_outputs(cand.path(), {}, suite.path());
    json& c = suite.case_(id);
    e.edit(suite.m, c);
    suite.save();
    const std::string msg = rejection(suite.path(), cand.path());
    EXPECT_NE(msg.find(e.what), std::string::npos) << e.what << "\n" << msg;
    EXPECT_NE(msg.find("manifest.json"), std::string::npos) << msg;
    fs::remove_all(cand.path());
    fs::create_directories(cand.path());
  }
}

// The random bits of a stochastic case (golden/README.md "Stochastic rounding
// cases") are an input a kernel reads: their file, key and map are checked
// like every other field before anything is read.
TEST(GoldenVerifyHostile, StochasticFieldsAreCheckedBeforeUse) {
  const std::string id = "mxfp4.ocp/sr_philox_te";
  testing::TempDir cand;
  struct Edit {
    const char* what;  // what the message must name
    std::function<void(json& c)> edit;
  };
  const auto drop_rbits_file = [](json& c) {
    json& files = c["files"];
    for (size_t i = 0; i < files.size(); ++i)
      if (files[i]["path"].get<std::string>().ends_with("/rbits.npy")) files.erase(i--);
  };
  const Edit edits[] = {
      {"field 'stochastic.seed' is -1, must be an integer in 0..", [](json& c) { c["stochastic"]["seed"] = -1; }},
      {"field 'stochastic.seed' is a non-integer number", [](json& c) { c["stochastic"]["seed"] = 1.5; }},
      {"field 'stochastic.seed' is a non-integer number",  // 2^64: beyond uint64, parsed as a double
       [](json& c) { c["stochastic"]["seed"] = 18446744073709551616.0; }},
      {"field 'stochastic.seed' is a string", [](json& c) { c["stochastic"]["seed"] = "7"; }},
      {"field 'stochastic.offset' is missing", [](json& c) { c["stochastic"].erase("offset"); }},
      {"field 'stochastic.rng' is 'philox-xyz', must be philox-te or philox-index",
       [](json& c) { c["stochastic"]["rng"] = "philox-xyz"; }},
      {"field 'stochastic.rbits_map' is 'le', must be te or ptx", [](json& c) { c["stochastic"]["rbits_map"] = "le"; }},
      {"field 'stochastic.rbits_map' is missing", [](json& c) { c["stochastic"].erase("rbits_map"); }},
      {"field 'stochastic.rbits_map' is given, but philox-index",
       [](json& c) { c["stochastic"]["rng"] = "philox-index"; }},
      {"field 'stochastic.seed' is given without 'rng'", [](json& c) { c["stochastic"].erase("rng"); }},
      {"field 'stochastic.rbits' is '../rbits.npy', must be a .npy file name inside",
       [](json& c) { c["stochastic"]["rbits"] = "../rbits.npy"; }},
      {"field 'stochastic.rbits' is 'codes.npy', the name of another file of the case",
       [](json& c) { c["stochastic"]["rbits"] = "codes.npy"; }},
      {"field 'stochastic.rbits' is 'input.npy', the name of another file",
       [](json& c) { c["stochastic"]["rbits"] = "input.npy"; }},
      {"field 'stochastic.rbits' names 'rbits.npy', which 'files' does not list", drop_rbits_file},
      {"gives rbits.npy as f32 [4, 70], but the case's 'shape' [4, 70] (axis 1, block_size 32) needs u8 [4, 70]",
       [](json& c) { c["files"][1]["dtype"] = "f32"; }},
      {"gives rbits.npy as u8 [4, 17]", [](json& c) { c["files"][1]["shape"] = json::array({4, 17}); }},
      {"field 'stochastic' is given, but options.rounding is rne", [](json& c) { c["options"]["rounding"] = "rne"; }},
      {"has options.rounding stochastic but no field 'stochastic'", [](json& c) { c.erase("stochastic"); }},
      {"field 'stochastic' is a string, must be a JSON object", [](json& c) { c["stochastic"] = "philox"; }},
  };
  for (const Edit& e : edits) {
    EditableSuite suite({id});
    json& c = suite.case_(id);
    ASSERT_EQ(c["files"][1]["path"], id + "/rbits.npy");
    e.edit(c);
    suite.save();
    const std::string msg = rejection(suite.path(), cand.path());
    EXPECT_NE(msg.find(e.what), std::string::npos) << e.what << "\n" << msg;
    EXPECT_NE(msg.find("manifest.json"), std::string::npos) << msg;
  }
}

TEST(GoldenVerifyHostile, GemmCaseWithoutOutputsIsRejected) {
  EditableSuite suite({"mxfp4.ocp/gemm_tail"});
  testing::TempDir cand;
  suite.case_("mxfp4.ocp/gemm_tail").erase("outputs");
  suite.save();
  EXPECT_NE(rejection(suite.path(), cand.path()).find("field 'outputs'"), std::string::npos);
}

// The epilogue's fields (docs/gemm.md "Epilogue"): beta must be a finite
// float, each input the case declares must be listed, with its shape.
TEST(GoldenVerifyHostile, GemmEpilogueFieldsAreChecked) {
  testing::TempDir cand;
  {
    EditableSuite suite({"mxfp4.ocp/gemm_epilogue"});
    json& c = suite.case_("mxfp4.ocp/gemm_epilogue");
    EXPECT_EQ(c["beta"], "-0x1p-1");
    EXPECT_EQ(c["bias"], true);
    c["beta"] = "half";
    suite.save();
    EXPECT_NE(rejection(suite.path(), cand.path()).find("must be a finite float (hex"),
              std::string::npos);
  }
  {
    EditableSuite suite({"mxfp4.ocp/gemm_epilogue"});
    json& files = suite.case_("mxfp4.ocp/gemm_epilogue")["files"];
    for (size_t i = 0; i < files.size(); ++i)
      if (files[i]["path"] == "mxfp4.ocp/gemm_epilogue/c.npy") files.erase(i--);
    suite.save();
    EXPECT_NE(rejection(suite.path(), cand.path()).find("has no c.npy, the source C that 'beta' scales"),
              std::string::npos);
  }
  {
    EditableSuite suite({"mxfp4.ocp/gemm_epilogue"});
    for (json& f : suite.case_("mxfp4.ocp/gemm_epilogue")["files"])
      if (f["path"] == "mxfp4.ocp/gemm_epilogue/bias.npy") f["shape"] = json::array({6});
    suite.save();
    EXPECT_NE(rejection(suite.path(), cand.path()).find("bias.npy"), std::string::npos);
  }
}

// A manifest whose every shape grew consistently (re-hashed): the arrays on
// disk are smaller than it says, and that is caught before any index.
TEST(GoldenVerifyHostile, FilesSmallerThanTheManifestSaysAreRejected) {
  const std::string id = "mxfp4.ocp/codes";
  EditableSuite suite({id});
  testing::TempDir cand;
  copy_outputs(cand.path(), {}, suite.path());
  json& c = suite.case_(id);
  ASSERT_EQ(c["options"]["axis"], 1);
  c["shape"][0] = c["shape"][0].get<int64_t>() + 1000;
  c["rows"] = c["rows"].get<int64_t>() + 1000;
  for (json& f : c["files"])
    if (f.contains("shape")) f["shape"][0] = f["shape"][0].get<int64_t>() + 1000;
  suite.save();
  const std::string msg = rejection(suite.path(), cand.path());
  EXPECT_NE(msg.find("manifest.json says"), std::string::npos) << msg;
  EXPECT_EQ(testing::run_cli(fmt::format("golden verify --suite {} --candidate {}", suite.path().string(),
                                         cand.path().string()))
                .exit_code,
            2);
}

TEST(GoldenVerifyHostile, PathsStayInsideTheSuite) {
  const std::string id = "mxfp4.ocp/codes";
  testing::TempDir cand, outside;
  const std::string hostname = "../../../../../../../../etc/hostname";
  struct Edit {
    const char* what;
    std::function<void(EditableSuite&)> edit;
  };
  const Edit edits[] = {
      {"'..' component", [&](EditableSuite& s) { s.save(fmt::format("{:064x}  {}\n", 0, hostname)); }},
      {"absolute path", [&](EditableSuite& s) { s.save(fmt::format("{:064x}  /etc/hostname\n", 0)); }},
      {"field 'files[0].path'",
       [&](EditableSuite& s) {
         s.case_(id)["files"][0]["path"] = hostname;
         s.save();
       }},
      {"absolute path",
       [&](EditableSuite& s) {
         s.case_(id)["files"][0]["path"] = "/etc/hostname";
         s.save();
       }},
      {"field 'id'",
       [&](EditableSuite& s) {
         s.case_(id)["id"] = "../../etc";
         s.save();
       }},
      {"empty component",
       [&](EditableSuite& s) {
         s.case_(id)["files"][0]["path"] = "mxfp4.ocp//codes/input.npy";
         s.save();
       }},
      // A file in the suite that the manifest does not list is never read.
      {"which manifest.json does not",
       [&](EditableSuite& s) { s.save(sha256_file_hex(s.path() / "mxfp4.ocp/codes/input.npy") + "  extra.npy\n"); }},
      // A symlink to an identical file outside: the digest would match.
      {"outside the suite folder",
       [&](EditableSuite& s) {
         const fs::path in = s.path() / "mxfp4.ocp/codes/input.npy";
         fs::copy_file(in, outside / "input.npy", fs::copy_options::overwrite_existing);
         fs::remove(in);
         fs::create_symlink(outside / "input.npy", in);
       }},
  };
  for (const Edit& e : edits) {
    EditableSuite suite({id});
    copy_outputs(cand.path(), {}, suite.path());
    e.edit(suite);
    const std::string msg = rejection(suite.path(), cand.path());
    EXPECT_NE(msg.find(e.what), std::string::npos) << e.what << "\n" << msg;
    // The digest of a file outside the suite is never computed or printed.
    if (fs::exists("/etc/hostname")) {
      EXPECT_EQ(msg.find(sha256_file_hex("/etc/hostname")), std::string::npos) << msg;
    }
    fs::remove_all(cand.path());
    fs::create_directories(cand.path());
  }
}

TEST(GoldenVerifyHostile, CandidateFifoAndOutsideSymlinkAreErrorsNotHangs) {
  const std::string id = "mxfp4.ocp/codes";
  EditableSuite suite({id});
  testing::TempDir cand, outside;
  copy_outputs(cand.path(), {}, suite.path());
  fs::remove(cand / (id + "/codes.npy"));
  ASSERT_EQ(mkfifo((cand / (id + "/codes.npy")).c_str(), 0600), 0);
  fs::copy_file(cand / (id + "/scales.npy"), outside / "scales.npy");
  fs::remove(cand / (id + "/scales.npy"));
  fs::create_symlink(outside / "scales.npy", cand / (id + "/scales.npy"));
  const VerifyReport r = verify_suite(suite.path(), cand.path(), all_reported(false));
  EXPECT_EQ(r.exit_code(), 2);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].status, CaseStatus::error);
  const std::string text = report_text(r);
  EXPECT_NE(text.find("is a FIFO, not a regular file"), std::string::npos) << text;
  EXPECT_NE(text.find("outside the candidate folder"), std::string::npos) << text;
}

TEST(GoldenVerifyHostile, MaxReportMustNotBeNegative) {
  testing::TempDir cand;
  VerifyOptions o = all_reported();
  o.max_report = -1;
  EXPECT_NE(rejection(suite_dir(), cand.path(), o).find("--max-report -1"), std::string::npos);
  const auto r = testing::run_cli(
      fmt::format("golden verify --suite {} --candidate {} --max-report -1", suite_dir().string(), cand.path().string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--max-report"), std::string::npos) << r.output;
}

TEST(GoldenGenerate, TrailingSlashThreadsAndCleanupOnFailure) {
  testing::TempDir dir;
  GenerateOptions o;
  o.recipes = {"mxfp4.ocp"};
  o.cases = {"mxfp4.ocp/tail_01"};
  // "DIR/" names DIR.
  const GenerateSummary s = generate_suite(dir.path().string() + "/out/", o);
  EXPECT_EQ(s.cases, 1);
  EXPECT_TRUE(fs::exists(dir / "out/manifest.json"));
  generate_suite(dir.path().string() + "/out/", o);  // replaces the previous suite
  for (const auto& e : fs::directory_iterator(dir.path())) EXPECT_EQ(e.path().filename(), "out");
  // A failure leaves neither the directories it would have created nor a
  // staging folder.
  o.cases = {"mxfp4.ocp/no_such_case"};
  EXPECT_THROW(generate_suite(dir.path().string() + "/new/deeper/out/", o), InputError);
  EXPECT_FALSE(fs::exists(dir / "new"));
  o.cases = {};
  for (int t : {-1, 100000}) {
    o.threads = t;
    EXPECT_THROW(generate_suite(dir / "t", o), InputError) << t;
  }
  EXPECT_FALSE(fs::exists(dir / "t"));
  for (const char* t : {"-1", "100000"}) {
    const auto r = testing::run_cli(fmt::format("golden generate --out {} --recipe mxfp4.ocp --threads {}",
                                                (dir / "t").string(), t));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("--threads"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "t"));
}

// ---- why: statuses, filters, root causes, JUnit, bits versions -------------------------

TEST(GoldenVerifyWhy, FiltersCountOtherCasesAsNotRun) {
  const json m = manifest();
  std::set<std::string> ocp;
  for (const json& c : m["cases"])
    if (c["recipe"] == "mxfp4.ocp") ocp.insert(c["id"]);
  testing::TempDir cand;
  copy_outputs(cand.path(), ocp);
  VerifyOptions o = all_reported(false);
  o.filter.recipes = {"mxfp4.ocp"};
  VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
  EXPECT_EQ(r.count(CaseStatus::pass), static_cast<int>(ocp.size()));
  EXPECT_EQ(r.count(CaseStatus::not_run), static_cast<int>(m["cases"].size() - ocp.size()));
  // Family and case globs narrow further (ANDed).
  o.filter.families = {"tail*"};
  o.filter.cases = {"*/tail_0?", "*/tail_error"};
  r = verify_suite(suite_dir(), cand.path(), o);
  EXPECT_EQ(r.count(CaseStatus::pass), 10);  // tail_01..tail_09 and tail_error
  // A filter that names nothing is refused.
  for (auto edit : std::vector<std::function<void(CaseFilter&)>>{
           [](CaseFilter& f) { f.recipes = {"mxfp4.nope"}; }, [](CaseFilter& f) { f.cases = {"zzz*"}; },
           [](CaseFilter& f) { f.families = {"nope"}; }, [](CaseFilter& f) { f.recipes = {"nvfp4.torchao"}; }}) {
    VerifyOptions bad = all_reported();
    edit(bad.filter);
    EXPECT_THROW(verify_suite(suite_dir(), cand.path(), bad), InputError);
  }
  const auto cli = testing::run_cli(fmt::format("golden verify --suite {} --candidate {} --recipe mxfp4.ocp",
                                                suite_dir().string(), cand.path().string()));
  EXPECT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_NE(cli.output.find(fmt::format("{} not run", m["cases"].size() - ocp.size())), std::string::npos)
      << cli.output;
}

// A case passes only on evidence: all its output files, or for an
// expect-error case the kernel's error.txt.
TEST(GoldenVerifyWhy, MissingFilesArePartialAndRefusalsNeedEvidence) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"nvfp4.te/codes", "mxfp4.ocp/tail_error"});
  fs::remove(cand / "nvfp4.te/codes/dequant.npy");
  VerifyOptions o = all_reported(true);
  o.filter.cases = {"nvfp4.te/codes", "mxfp4.ocp/tail_error"};
  VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
  for (const CaseResult& c : r.cases) {
    if (c.id == "nvfp4.te/codes") {
      EXPECT_EQ(c.status, CaseStatus::partial);
      EXPECT_EQ(c.compared, c.outputs - 1);
    }
    if (c.id == "mxfp4.ocp/tail_error") {
      EXPECT_EQ(c.status, CaseStatus::pass);
    }
  }
  // Without --skip-missing a missing file is an error (exit 2), still not a pass.
  r = verify_suite(suite_dir(), cand.path(), all_reported(false));
  EXPECT_EQ(r.exit_code(), 2);
  // An empty candidate: the tail_error case has no evidence of a refusal.
  testing::TempDir empty;
  o.filter.cases = {"mxfp4.ocp/tail_error"};
  r = verify_suite(suite_dir(), empty.path(), o);
  ASSERT_EQ(r.count(CaseStatus::not_run), static_cast<int>(manifest()["cases"].size()));
  EXPECT_EQ(r.exit_code(), 2);  // nothing compared
  o.skip_missing = false;
  r = verify_suite(suite_dir(), empty.path(), o);
  EXPECT_EQ(r.count(CaseStatus::error), 1);
  EXPECT_EQ(r.count(CaseStatus::pass), 0);
}

TEST(GoldenVerifyWhy, StaleBitsVersionIsNotAKernelBug) {
  const std::string id = "mxfp4.ocp/codes";
  EditableSuite suite({id});
  // The generator records each case's bits version.
  for (const json& c : suite.m["cases"])
    EXPECT_EQ(c["bits_version"], find_recipe(c["recipe"].get<std::string>())->bits_version);
  testing::TempDir cand;
  copy_outputs(cand.path(), {}, suite.path());
  flip(cand.path(), id + "/codes.npy", 0, 0);
  const int running = find_recipe("mxfp4.ocp")->bits_version;
  suite.case_(id)["bits_version"] = running + 1;
  suite.save();
  VerifyReport r = verify_suite(suite.path(), cand.path(), all_reported());
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].status, CaseStatus::stale);
  EXPECT_EQ(r.total_mismatches, 0);
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(report_text(r).find(fmt::format("suite made with mxfp4.ocp bits v{}, this fp4emu implements v{}: "
                                            "regenerate",
                                            running + 1, running)),
            std::string::npos)
      << report_text(r);
  // A suite without the field is bits v1.
  suite.case_(id).erase("bits_version");
  suite.save();
  r = verify_suite(suite.path(), cand.path(), all_reported());
  EXPECT_EQ(r.cases[0].status, running == 1 ? CaseStatus::fail : CaseStatus::stale);
}

// A lane whose x/X is an exact midpoint of E2M1, computed here from the
// E8M0 scale (X = 2^(s - 127)) and the E2M1 grid, independently of fp4emu.
TEST(GoldenVerifyWhy, TieRoundedAwayIsClassified) {
  const std::string id = "mxfp4.ocp/codes";
  const io::Array in = io::read_npy(suite_dir() / (id + "/input.npy"));
  const io::Array sc = io::read_npy(suite_dir() / (id + "/scales.npy"));
  const io::Array codes = io::read_npy(suite_dir() / (id + "/codes.npy"));
  const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const std::vector<float> x = io::to_f32(in);
  int64_t at = -1;
  int away = 0;
  for (size_t i = 0; i < x.size() && at < 0; ++i) {
    const int s = sc.bytes[i / 32];
    if (s == 0xFF || s < 10) continue;
    const double t = std::fabs(static_cast<double>(x[i])) / std::ldexp(1.0, s - 127);
    const int code = (codes.bytes[i / 2] >> (i % 2 ? 4 : 0)) & 7;
    for (int c = 0; c < 7; ++c)
      if (t == (grid[c] + grid[c + 1]) / 2 && code == c) {  // a tie the recipe rounded down (to even)
        at = static_cast<int64_t>(i);
        away = c + 1;
      }
  }
  ASSERT_GE(at, 0) << "the codes case has no tie rounded toward zero";
  testing::TempDir cand;
  copy_outputs(cand.path(), {id});
  io::Array c = codes;
  const int shift = at % 2 ? 4 : 0;
  c.bytes[at / 2] = static_cast<uint8_t>((c.bytes[at / 2] & ~(7 << shift)) | (away << shift));
  io::write_npy(cand / (id + "/codes.npy"), c);
  VerifyOptions o = all_reported();
  o.filter.cases = {id};
  const VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
  ASSERT_EQ(r.total_mismatches, 1) << report_text(r);
  EXPECT_NE(r.first[0].scaled.find("(tie of "), std::string::npos) << report_text(r);
  for (const CaseResult& cr : r.cases) {
    if (cr.id == id) {
      EXPECT_NE(cr.classification.find("ties rounded away from zero in 1 of 1 differing elements"), std::string::npos)
          << cr.classification;
    }
  }
}

// A kernel under test as a harness runs it on a stochastic case: the
// reference quantizer with the case's options, rounding with the random bytes
// of rbits.npy, or as `rounding` says; writes its outputs into `cand`.
void run_stochastic_case(const json& c, const fs::path& cand, Rounding rounding, std::optional<RbitsMap> map = {}) {
  const std::string id = c["id"];
  const Tensor x = testing::read_case_input(suite_dir() / id);
  QuantOptions o = testing::case_options(c);
  o.impl = Impl::reference;
  o.rounding = rounding;
  const std::vector<uint8_t> rbits = io::read_npy(suite_dir() / id / "rbits.npy").bytes;
  if (rounding == Rounding::stochastic && map) {  // regenerated from the key with another byte map
    o.stochastic.seed = c["stochastic"]["seed"].get<uint64_t>();
    o.stochastic.offset = c["stochastic"]["offset"].get<uint64_t>();
    o.stochastic.rng = SrRng::philox_te;
    o.stochastic.map = *map;
  } else if (rounding == Rounding::stochastic) {
    o.stochastic.bytes = rbits;
  }
  const PackedTensor p = quantize(x, o);
  const fs::path d = cand / id;
  fs::create_directories(d);
  io::write_npy(d / "codes.npy", io::from_u8(p.stored_shape(p.padded_len / 2), p.codes));
  if (p.format == Format::hif4) {
    std::vector<uint32_t> words(p.num_blocks());
    for (size_t i = 0; i < words.size(); ++i)
      for (int b = 0; b < 4; ++b) words[i] |= static_cast<uint32_t>(p.scales[4 * i + b]) << (8 * b);
    io::write_npy(d / "scales.npy", io::from_u32(p.stored_shape(p.blocks_per_row()), words));
  } else {
    io::write_npy(d / "scales.npy", io::from_u8(p.stored_shape(p.blocks_per_row()), p.scales));
  }
  if (p.format == Format::nvfp4) {
    const float g[3] = {p.global_amax, p.global_encode_scale, p.global_decode_scale};
    io::write_npy(d / "global_scale.npy", io::from_f32({3}, g));
  }
  const Tensor dq = dequantize(p, DequantOptions{.impl = Impl::reference, .threads = 1});
  io::write_npy(d / "dequant.npy", io::from_f32(dq.shape, dq.data));
}

// Every stochastic case of every SR recipe of the default suite: the kernel
// that rounds with the case's random bytes passes; one that rounds to
// nearest instead fails every case, each named as such, with the random
// byte of each listed element; a philox-te kernel reading its words in the
// other byte order fails and is named too.
TEST(GoldenVerifyWhy, StochasticCasesCatchRoundToNearestAndTheOtherByteMap) {
  const json m = manifest();
  std::vector<const json*> sr;
  std::set<std::string> recipes;
  for (const json& c : m["cases"])
    if (c["family"] == "stochastic") {
      sr.push_back(&c);
      recipes.insert(c["recipe"].get<std::string>());
    }
  EXPECT_EQ(recipes, (std::set<std::string>{"hif4.v14", "mxfp4.ocp", "mxfp4.rceil", "nvfp4.te"}));
  ASSERT_EQ(sr.size(), 6 * recipes.size());
  VerifyOptions o = all_reported();
  o.filter.families = {"stochastic"};
  {
    testing::TempDir cand;
    for (const json* c : sr) run_stochastic_case(*c, cand.path(), Rounding::stochastic);
    const VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
    EXPECT_EQ(r.exit_code(), 0) << report_text(r);
    EXPECT_EQ(r.count(CaseStatus::pass), static_cast<int>(sr.size()));
  }
  {
    testing::TempDir cand;
    for (const json* c : sr) run_stochastic_case(*c, cand.path(), Rounding::rne);
    const VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
    EXPECT_EQ(r.exit_code(), 1);
    EXPECT_EQ(r.count(CaseStatus::fail), static_cast<int>(sr.size())) << report_text(r);
    for (const CaseResult& cr : r.cases) {
      if (cr.family != "stochastic") continue;
      EXPECT_EQ(cr.status, CaseStatus::fail) << cr.id;
      EXPECT_NE(cr.classification.find("stochastic rounding: the codes are those of round-to-nearest-even"),
                std::string::npos)
          << cr.id << ": " << cr.classification;
    }
    ASSERT_FALSE(r.first.empty());
    for (const Mismatch& mm : r.first) {
      if (mm.kind == "code") {
        EXPECT_NE(mm.scaled.find("random byte r = 0x"), std::string::npos) << mm.scaled;
      }
    }
  }
  {
    testing::TempDir cand;
    int swapped = 0;
    for (const json* c : sr)
      if (c->at("stochastic").value("rbits_map", "") == "te") {
        run_stochastic_case(*c, cand.path(), Rounding::stochastic, RbitsMap::ptx);
        ++swapped;
      }
    ASSERT_EQ(swapped, static_cast<int>(recipes.size()));
    const VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
    EXPECT_EQ(r.count(CaseStatus::fail), swapped) << report_text(r);
    for (const CaseResult& cr : r.cases) {
      if (cr.status == CaseStatus::fail) {
        EXPECT_NE(cr.classification.find("the codes are those of rbits_map ptx"), std::string::npos)
            << cr.id << ": " << cr.classification;
      }
    }
  }
}

// The candidate's block scale `block` of case `id` one UE4M3 code smaller.
void lower_block_scale(const fs::path& cand, const std::string& id, int block) {
  io::Array sc = io::read_npy(cand / (id + "/scales.npy"));
  ASSERT_GT(sc.bytes[block], 1);
  sc.bytes[block] -= 1;
  io::write_npy(cand / (id + "/scales.npy"), sc);
}

// A truncated NVFP4 block scale, with the code and value it spoils, plus a
// code-only fault in a later block: the scale is listed first, with its
// context, and the case line names both causes.
TEST(GoldenVerifyWhy, RootCauseFirstPerBlock) {
  const std::string id = "nvfp4.te/random_llm_bf16";  // [32, 64]: 4 blocks a row
  testing::TempDir cand;
  copy_outputs(cand.path(), {id});
  ASSERT_NO_FATAL_FAILURE(lower_block_scale(cand.path(), id, 5));
  flip(cand.path(), id + "/dequant.npy", 4 * (1 * 64 + 16 + 3), 0);  // block 5, element 3
  flip(cand.path(), id + "/codes.npy", 1 * 32 + 8 + 1, 0);            // block 5, element 2
  flip(cand.path(), id + "/codes.npy", 2 * 32 + 0, 4);                // block 8, element 1
  VerifyOptions o = all_reported();
  o.filter.cases = {id};
  const VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
  ASSERT_EQ(r.first.size(), 4u) << report_text(r);
  EXPECT_EQ(r.first[0].kind, "scale");
  EXPECT_EQ(r.first[0].block, 5);
  EXPECT_NE(r.first[0].block_amax, "");
  EXPECT_NE(r.first[0].s_enc, "");
  EXPECT_EQ(r.first[0].before_rounding.rfind("amax/6*S_enc = ", 0), 0u) << r.first[0].before_rounding;
  EXPECT_EQ(r.first[1].kind, "code");
  EXPECT_EQ(r.first[2].kind, "dequant");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.first[i].cause, "scale");
  EXPECT_EQ(r.first[3].block, 8);
  EXPECT_EQ(r.first[3].cause, "codes");
  EXPECT_EQ(r.first[3].scaled.rfind("x/(s*S_dec) = ", 0), 0u) << r.first[3].scaled;
  for (const CaseResult& cr : r.cases)
    if (cr.id == id) {
      // The shared diagnosis: the block with the smaller scale is one block
      // difference; the code fault of block 8 one element difference.
      EXPECT_NE(cr.classification.find("block scale smaller than expected by one code step"), std::string::npos)
          << cr.classification;
      EXPECT_NE(cr.classification.find("in 1 of 1 differing blocks"), std::string::npos) << cr.classification;
      EXPECT_NE(cr.classification.find("in 1 of 1 differing elements"), std::string::npos) << cr.classification;
    }
}

// A block with more code mismatches than --max-report still lists its scale
// mismatch first: the codes are compared before the scales, so a per-block
// cap taken in arrival order would keep only code lines.
TEST(GoldenVerifyWhy, RootCauseSurvivesThePerBlockCap) {
  const std::string id = "nvfp4.te/random_llm_bf16";  // [32, 64]: 4 blocks a row
  testing::TempDir cand;
  copy_outputs(cand.path(), {id});
  ASSERT_NO_FATAL_FAILURE(lower_block_scale(cand.path(), id, 5));
  for (int byte = 0; byte < 4; ++byte) flip(cand.path(), id + "/codes.npy", 1 * 32 + 8 + byte, 0);  // block 5
  VerifyOptions o = all_reported();
  o.filter.cases = {id};
  o.max_report = 2;
  const VerifyReport r = verify_suite(suite_dir(), cand.path(), o);
  ASSERT_EQ(r.first.size(), 2u) << report_text(r);
  EXPECT_EQ(r.first[0].kind, "scale") << report_text(r);
  EXPECT_EQ(r.first[0].block, 5);
  EXPECT_EQ(r.first[1].kind, "code");
  EXPECT_EQ(r.first[1].block, 5);
}

TEST(GoldenVerifyWhy, JsonOmitsWhatDoesNotApplyAndJUnitHasOneTestcasePerCase) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"nvfp4.te/codes", "mxfp4.ocp/gemm_tail", "hif4.v14/special"});
  flip(cand.path(), "nvfp4.te/codes/codes.npy", 0, 0);
  flip(cand.path(), "mxfp4.ocp/gemm_tail/C_exact.npy", 0, 0);
  fs::remove(cand / "hif4.v14/special/dequant.npy");
  const fs::path junit = cand / "report.xml";
  const auto r = testing::run_cli(fmt::format("golden verify --suite {} --candidate {} --skip-missing --json --junit {}",
                                              suite_dir().string(), cand.path().string(), junit.string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const json j = json::parse(r.output);
  bool saw_gemm = false, saw_code = false;
  for (const json& m : j["mismatches"]) {
    if (m["kind"] == "gemm_c") {
      saw_gemm = true;
      EXPECT_TRUE(m.contains("column"));
      EXPECT_FALSE(m.contains("block"));
    } else {
      saw_code = true;
      EXPECT_FALSE(m.contains("column")) << m.dump();
      EXPECT_TRUE(m.contains("block"));
    }
  }
  EXPECT_TRUE(saw_gemm && saw_code);
  EXPECT_EQ(j["partial"], 1);
  ASSERT_TRUE(fs::exists(junit));
  // Well-formed XML with one testcase per case (Debian's Python parses it).
  const std::string check = fmt::format(
      "/usr/bin/python3 -c \"import sys, xml.etree.ElementTree as E; s = E.parse(sys.argv[1]).getroot()[0]; "
      "print(len(s.findall('testcase')), len(s.findall('testcase/failure')), len(s.findall('testcase/skipped')))\" {}",
      junit.string());
  FILE* p = popen(check.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256] = {};
  const size_t n = fread(buf, 1, sizeof buf - 1, p);
  pclose(p);
  const size_t cases = manifest()["cases"].size();
  EXPECT_EQ(std::string(buf, n), fmt::format("{} 2 {}\n", cases, cases - 2)) << buf;
  // A failure names its classification.
  std::ifstream in(junit);
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("<failure message=\"1 mismatches: "), std::string::npos) << xml;
  EXPECT_NE(xml.find("of 1 differing elements\" type=\"mismatch\">"), std::string::npos) << xml;
}

}  // namespace
}  // namespace fp4emu::golden
