// `fp4emu quantize --scale-layout`: the stored `scales` tensor holds the
// linear scales moved by the layout's byte map (written out here from
// golden/README.md, not taken from scale_layout.cpp), `dequantize` reads every
// layout back to the same values, and a layout of another format or an
// unknown name is a usage error (exit 2, no output file).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "io_test_util.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::TempDir;


// golden/README.md "Kernel-ready scale layouts".
int64_t swizzled_offset(int64_t r, int64_t c, int64_t cols) {
  const int64_t cp = (cols + 3) / 4 * 4;
  return ((r / 128) * (cp / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}
int64_t cube_offset(int64_t r, int64_t c, int byte, int64_t cols) {
  return ((r / 16) * cols + c) * 64 + (byte < 2 ? 0 : 32) + 2 * (r % 16) + byte % 2;
}

TEST(QuantizeScaleLayout, EveryLayoutRoundTripsWithItsByteMap) {
  TempDir dir;
  std::mt19937_64 rng(41);
  std::normal_distribution<float> g(0.0f, 2.0f);
  struct Case {
    const char* recipe;
    const char* layout;
    std::vector<int64_t> shape;
    int axis;
  };
  // Rows past one tile, block counts per row not a multiple of 4; B-style
  // operands blocked along axis 0 (scale rows = the other dim).
  const Case cases[] = {{"mxfp4.ocp", "swizzled_128x4", {130, 5 * 32 + 3}, 1},
                        {"nvfp4.te", "swizzled_128x4", {3 * 16, 136}, 0},
                        {"hif4.v14", "hif4_cube", {40, 3 * 64}, 1},
                        {"hif4.amct", "hif4_cube", {2 * 64, 20}, 0}};
  for (const Case& c : cases) {
    const std::string what = fmt::format("{} {}", c.recipe, c.layout);
    std::vector<float> x(c.shape[0] * c.shape[1]);
    for (float& v : x) v = g(rng);
    const auto in = dir / "x.npy", lin = dir / "lin.safetensors", lay = dir / "lay.safetensors";
    io::write_npy(in, io::from_f32(c.shape, x));
    auto q = [&](const std::filesystem::path& out, const std::string& extra) {
      const testing::CliResult r = run_cli(fmt::format("quantize {} {} {}", in.string(), out.string(),
                                                       fmt::format("--recipe {} --axis {} {}", c.recipe, c.axis, extra)));
      ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
    };
    q(lin, "");
    q(lay, std::string("--scale-layout ") + c.layout);
    const io::SafetensorsFile fl = io::read_safetensors(lin), fs = io::read_safetensors(lay);
    const io::Array& linear = fl.find("scales")->array;
    const io::Array& stored = fs.find("scales")->array;
    EXPECT_EQ(fl.find("codes")->array.bytes, fs.find("codes")->array.bytes) << what;
    // Linear scales are [rows, blocks] (HiF4: u32 words, little-endian bytes).
    const bool hif4 = std::string(c.layout) == "hif4_cube";
    const int word = hif4 ? 4 : 1;
    const int64_t cols = linear.shape.back();
    const int64_t rows = static_cast<int64_t>(linear.bytes.size()) / word / cols;
    const int64_t padded_rows = hif4 ? (rows + 15) / 16 * 16 : (rows + 127) / 128 * 128;
    const int64_t padded_cols = hif4 ? cols : (cols + 3) / 4 * 4;
    std::vector<uint8_t> expect(padded_rows * padded_cols * word, 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k)
        for (int b = 0; b < word; ++b)
          expect[hif4 ? cube_offset(r, k, b, cols) : swizzled_offset(r, k, cols)] =
              linear.bytes[(r * cols + k) * word + b];
    EXPECT_EQ(stored.bytes, expect) << what;
    // dequantize undoes the layout.
    const auto dl = dir / "dl.npy", ds = dir / "ds.npy";
    ASSERT_EQ(run_cli(fmt::format("dequantize {} {}", lin.string(), dl.string())).exit_code, 0);
    ASSERT_EQ(run_cli(fmt::format("dequantize {} {}", lay.string(), ds.string())).exit_code, 0);
    EXPECT_EQ(testing::read_bytes(dl), testing::read_bytes(ds)) << what;
    // linear spelled out is the default.
    const auto lin2 = dir / "lin2.safetensors";
    q(lin2, "--scale-layout linear");
    EXPECT_EQ(io::read_safetensors(lin2).find("scales")->array.bytes, linear.bytes) << what;
  }
  // Usage errors: a layout of another format, an unknown name; no output.
  const auto in = dir / "x.npy", out = dir / "bad.safetensors";
  for (const char* bad : {"--recipe mxfp4.ocp --scale-layout hif4_cube", "--recipe hif4.v14 --scale-layout swizzled_128x4",
                          "--recipe nvfp4.te --scale-layout swizzled"}) {
    const testing::CliResult r = run_cli(fmt::format("quantize {} {} --axis 0 {}", in.string(), out.string(), bad));
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--scale-layout"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << bad;
  }
}

}  // namespace
}  // namespace fp4emu
