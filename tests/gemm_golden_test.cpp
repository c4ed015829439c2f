// GEMM cases of golden suites (docs/gemm.md "Golden GEMM cases"): alpha' in
// alpha.npy, the operand scales also in the format's kernel layout (checked
// against the layouts' byte maps written out here), and `golden verify`
// comparing C's NaNs by the models' rule (every NaN is 0x7fffffff).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/npy.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

std::vector<json> gemm_cases(const fs::path& suite) {
  std::ifstream in(suite / "manifest.json");
  const json m = json::parse(in);
  std::vector<json> out;
  for (const json& c : m.at("cases"))
    if (c.at("family") == "gemm") out.push_back(c);
  return out;
}

uint32_t f32_bits_at(const io::Array& a, int64_t i) {
  uint32_t b;
  std::memcpy(&b, a.bytes.data() + 4 * i, 4);
  return b;
}

// golden/README.md, "Kernel-ready scale layouts": swizzled_128x4 byte of
// scale (r, c), and the hif4_cube bytes of row r, block c (4 bytes of the
// scale word in stored order: E6M2, L2, L3 low, L3 high).
int64_t swizzled_offset(int64_t r, int64_t c, int64_t cols) {
  const int64_t cp = (cols + 3) / 4 * 4;
  return ((r / 128) * (cp / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}
int64_t cube_offset(int64_t r, int64_t c, int byte, int64_t cols) {
  const int64_t cell = ((r / 16) * cols + c) * 64;
  return cell + (byte < 2 ? 0 : 32) + 2 * (r % 16) + byte % 2;
}

TEST(GemmGolden, AlphaFileAndKernelLayoutOperandScales) {
  TempDir dir;
  golden::GenerateOptions g;
  g.recipes = {"hif4.v14", "mxfp4.ocp", "nvfp4.te"};
  golden::generate_suite(dir / "suite", g);
  int layout_cases = 0;
  const std::vector<json> cases = gemm_cases(dir / "suite");
  ASSERT_EQ(cases.size(), 12u);  // four level-1 GEMM cases per recipe
  for (const json& c : cases) {
    const std::string id = c.at("id");
    const fs::path d = dir / "suite" / id;
    // alpha.npy holds alpha_used, or 1 where nothing multiplies.
    const io::Array alpha = io::read_npy(d / "alpha.npy");
    ASSERT_EQ(alpha.shape, (std::vector<int64_t>{1})) << id;
    const float want = c.at("alpha_used").is_null() ? 1.0f : std::strtof(c.at("alpha_used").get<std::string>().c_str(), nullptr);
    EXPECT_EQ(f32_bits_at(alpha, 0), std::bit_cast<uint32_t>(want)) << id;
    if (id.starts_with("nvfp4.te/")) {
      EXPECT_FALSE(c.at("alpha_used").is_null()) << id;  // TE's alpha' always
    }
    // Operand scales in the kernel layout, byte for byte from the linear ones.
    const bool hif4 = c.at("format") == "hif4";
    const std::string layout = hif4 ? "hif4_cube" : "swizzled_128x4";
    for (const char* side : {"a", "b"}) {
      const json& o = c.at(side);
      EXPECT_EQ(o.at("scale_layouts"), json({"linear", layout})) << id;
      const io::Array linear = io::read_npy(d / (std::string(side) + "_scales.npy"));
      const io::Array stored = io::read_npy(d / (std::string(side) + "_scales_" + layout + ".npy"));
      const int64_t rows = linear.shape[0], cols = linear.shape[1];
      EXPECT_EQ(rows, side[0] == 'a' ? c.at("m").get<int64_t>() : c.at("n").get<int64_t>()) << id;
      std::vector<uint8_t> expect(stored.bytes.size(), 0);  // padding is zero
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) {
          if (hif4)
            for (int byte = 0; byte < 4; ++byte)
              expect[cube_offset(r, k, byte, cols)] = linear.bytes[(r * cols + k) * 4 + byte];
          else
            expect[swizzled_offset(r, k, cols)] = linear.bytes[r * cols + k];
        }
      EXPECT_EQ(stored.bytes, expect) << id << " " << side;
    }
    // The epilogue case's inputs (docs/gemm.md "Golden GEMM cases").
    if (id.ends_with("/gemm_epilogue")) {
      EXPECT_EQ(io::read_npy(d / "c.npy").shape, (std::vector<int64_t>{c.at("m"), c.at("n")})) << id;
      EXPECT_EQ(io::read_npy(d / "bias.npy").shape, (std::vector<int64_t>{c.at("n")})) << id;
      EXPECT_EQ(c.at("beta"), "-0x1p-1") << id;
    } else {
      EXPECT_TRUE(c.at("beta").is_null()) << id;
      EXPECT_FALSE(fs::exists(d / "c.npy")) << id;
    }
    if (id.ends_with("/gemm_layout")) {
      ++layout_cases;
      EXPECT_EQ(c.at("m"), 130) << id;  // two tiles of rows in either layout
    }
  }
  EXPECT_EQ(layout_cases, 3);
}

// Replaces every NaN of an f32 .npy in place by `bits`; returns how many.
int replace_nans(const fs::path& p, uint32_t bits) {
  io::Array a = io::read_npy(p);
  int count = 0;
  for (size_t i = 0; i < a.bytes.size() / 4; ++i) {
    float v;
    std::memcpy(&v, a.bytes.data() + 4 * i, 4);
    if (!std::isnan(v)) continue;
    std::memcpy(a.bytes.data() + 4 * i, &bits, 4);
    ++count;
  }
  io::write_npy(p, a);
  return count;
}

int64_t gemm_mismatches(const golden::VerifyReport& r) {
  int64_t n = 0;
  for (const golden::Mismatch& m : r.first) n += m.kind == "gemm_c";
  return n;
}

TEST(GemmGolden, VerifyComparesNaNByTheModelsRule) {
  // The random-scale case has NaN rows and columns in C. The suite's NaNs are
  // 0x7fffffff; a candidate with x86's default NaN 0xffc00000 (or a quiet
  // NaN 0x7fc00000) there fails, one mismatch per NaN.
  TempDir dir;
  golden::GenerateOptions g;
  g.recipes = {"mxfp4.ocp"};
  g.families = {"gemm"};  // a full copy of the suite is the candidate: only cases with outputs
  golden::generate_suite(dir / "suite", g);
  const std::string c_file = "mxfp4.ocp/gemm_scales/C_fma_fp32.npy";
  {
    const io::Array c = io::read_npy(dir / "suite" / c_file);
    int nans = 0;
    for (size_t i = 0; i < c.bytes.size() / 4; ++i)
      if (std::isnan(std::bit_cast<float>(f32_bits_at(c, i)))) {
        ++nans;
        EXPECT_EQ(f32_bits_at(c, i), kGemmNaNBits);
      }
    ASSERT_GT(nans, 0);
  }
  fs::copy(dir / "suite", dir / "cand", fs::copy_options::recursive);
  golden::VerifyOptions o;
  o.max_report = 100000;
  const golden::VerifyReport same = golden::verify_suite(dir / "suite", dir / "cand", o);
  EXPECT_EQ(gemm_mismatches(same), 0);
  for (uint32_t other : {0xFFC00000u, 0x7FC00000u}) {
    const int replaced = replace_nans(dir / "cand" / c_file, other);
    ASSERT_GT(replaced, 0);
    const golden::VerifyReport r = golden::verify_suite(dir / "suite", dir / "cand", o);
    EXPECT_EQ(gemm_mismatches(r), replaced) << std::hex << other;
    EXPECT_EQ(r.exit_code(), 1);
  }
  replace_nans(dir / "cand" / c_file, kGemmNaNBits);
  EXPECT_EQ(gemm_mismatches(golden::verify_suite(dir / "suite", dir / "cand", o)), 0);
}

}  // namespace
}  // namespace fp4emu
