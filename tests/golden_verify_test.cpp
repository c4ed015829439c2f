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
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "fp4emu/error.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/npy.hpp"
#include "test_util.hpp"

namespace fp4emu::golden {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kSuite = fs::path(FP4EMU_SOURCE_DIR) / "golden" / "suite";

json manifest() {
  std::ifstream in(kSuite / "manifest.json");
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
void copy_outputs(const fs::path& to, const std::set<std::string>& only = {}) {
  const json m = manifest();
  for (const json& c : m["cases"])
    for (const json& f : c["files"]) {
      if (f["role"] != "output" || (!only.empty() && !only.count(c["id"]))) continue;
      const fs::path dst = to / f["path"].get<std::string>();
      fs::create_directories(dst.parent_path());
      fs::copy_file(kSuite / f["path"].get<std::string>(), dst);
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
  const VerifyReport r = verify_suite(kSuite, cand.path(), all_reported(false));
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
  EXPECT_EQ(r.total_mismatches, 0);
  EXPECT_EQ(r.failed(), 0);
  EXPECT_EQ(r.passed(), static_cast<int>(manifest()["cases"].size()));
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

  const VerifyReport r = verify_suite(kSuite, cand.path(), all_reported());
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
      io::Array in = io::read_npy(kSuite / "mxfp4.ocp/codes/input.npy");
      uint32_t w;
      std::memcpy(&w, in.bytes.data() + 4 * (3 * 32 + 11), 4);
      EXPECT_EQ(mm.input.substr(0, 10), fmt::format("0x{:08x}", w));
      EXPECT_EQ(mm.expected_scale, mm.actual_scale);
      EXPECT_NE(mm.expected, mm.actual);
    }
  }
  EXPECT_EQ(r.failed(), 7);  // faults 4 and 5 are in one case
  // mxfp4.ocp/special (untouched) and the tail_error cases, where no output is right.
  EXPECT_EQ(r.passed(), 1 + static_cast<int>(std::size(kDefaultRecipes)));

  // --max-report bounds the list, not the count.
  VerifyOptions few = all_reported();
  few.max_report = 2;
  const VerifyReport r2 = verify_suite(kSuite, cand.path(), few);
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
  VerifyReport r = verify_suite(kSuite, cand.path(), all_reported());
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
  EXPECT_EQ(r.total_mismatches, 0);

  VerifyOptions strict = all_reported();
  strict.strict = true;
  r = verify_suite(kSuite, cand.path(), strict);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_EQ(keys(r), (std::set<Key>{{"mxfp4.ocp/special/codes.npy", "code", nb, 0},
                                    {"hif4.v14/special/scales.npy", "scale", hb, -1}}))
      << report_text(r);

  // The E6M2 byte of a NaN block is always compared.
  flip(cand.path(), "hif4.v14/special/scales.npy", hb * 4, 0);
  r = verify_suite(kSuite, cand.path(), all_reported());
  EXPECT_EQ(keys(r), (std::set<Key>{{"hif4.v14/special/scales.npy", "scale", hb, -1}}));
}

TEST(GoldenVerify, SignOfZeroIsSignificant) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"nvfp4.te/special"});
  // Block 0 of the special case is all +0: +0 -> -0 in element 7.
  flip(cand.path(), "nvfp4.te/special/dequant.npy", 4 * 7 + 3, 7);
  const VerifyReport r = verify_suite(kSuite, cand.path(), all_reported());
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
  const io::Array before = io::read_npy(kSuite / file);
  // C row 2, column 3: bit 0 of its fp32 word (the lowest mantissa bit).
  const int64_t at = 2 * n + 3;
  flip(cand.path(), file, 4 * at, 0);
  // nvfp4.te/gemm_scales: row 1 of A holds the NaN scale code, so C row 1 is
  // NaN; flip a payload bit of C[1][0]: a mismatch too, NaN bits are part of
  // the GEMM models (docs/gemm.md "NaN").
  const std::string nan_file = "nvfp4.te/gemm_scales/C_exact.npy";
  const int64_t nan_at = case_of(m_all, "nvfp4.te/gemm_scales")["n"].get<int64_t>();
  ASSERT_TRUE(std::isnan(io::to_f32(io::read_npy(kSuite / nan_file))[nan_at]));
  flip(cand.path(), nan_file, 4 * nan_at, 0);

  const VerifyReport r = verify_suite(kSuite, cand.path(), all_reported());
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
    if (cr.id == "nvfp4.te/gemm_scales") EXPECT_EQ(cr.status, "fail");
}

TEST(GoldenVerify, OutputForARejectedInputFails) {
  testing::TempDir cand;
  copy_outputs(cand.path(), {"hif4.v14/codes"});
  fs::create_directories(cand / "hif4.v14/tail_error");
  io::write_npy(cand / "hif4.v14/tail_error/codes.npy", io::from_u8({1}, std::vector<uint8_t>{0}));
  const VerifyReport r = verify_suite(kSuite, cand.path(), all_reported());
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
  VerifyReport r = verify_suite(kSuite, cand.path(), all_reported(false));
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
  VerifyReport r = verify_suite(kSuite, cand.path(), o);
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
  EXPECT_GT(r.skipped(), 0);
  for (const CaseResult& c : r.cases)
    if (c.id.rfind("hif4.a6/", 0) == 0 && c.family != "tail_error") {
      EXPECT_EQ(c.status, "skipped") << c.id;
    }
  // An empty candidate compares nothing: that is an error, not a pass.
  testing::TempDir empty;
  r = verify_suite(kSuite, empty.path(), o);
  EXPECT_EQ(r.exit_code(), 2);
}

TEST(GoldenVerify, DamagedSuiteIsRejected) {
  testing::TempDir dir;
  const fs::path suite = dir / "suite";
  // A linked copy (cheap); the damaged file is unlinked and rewritten, so the
  // checked-in suite is never touched.
  try {
    fs::copy(kSuite, suite, fs::copy_options::recursive | fs::copy_options::create_hard_links);
  } catch (const fs::filesystem_error&) {
    fs::remove_all(suite);
    fs::copy(kSuite, suite, fs::copy_options::recursive);
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
      fmt::format("golden verify --suite {} --candidate {} --skip-missing", kSuite.string(), cand.path().string());
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

}  // namespace
}  // namespace fp4emu::golden
