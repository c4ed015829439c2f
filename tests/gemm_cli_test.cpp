// `fp4emu gemm` on .npy operands: it quantizes each one exactly as
// `fp4emu quantize` does with the same recipe, the block axis along k (A: 1,
// B: 0) and the same global amax (NVFP4: the tensor's own amax unless one is
// given), so its C is byte-identical to `fp4emu gemm` of the packed files
// (docs/gemm.md "Operands").
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "io_test_util.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::TempDir;


// Gaussian values with a few outliers, rows at different magnitudes.
std::vector<float> operand_values(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = std::ldexp(g(rng), static_cast<int>(r % 5) - 2);
  v[3] = 37.5f;
  return v;
}

void write_f32(const std::filesystem::path& p, std::vector<int64_t> shape, const std::vector<float>& v) {
  io::write_npy(p, io::from_f32(std::move(shape), v));
}

void write_bf16(const std::filesystem::path& p, std::vector<int64_t> shape, std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    bits[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(v[i]) >> 16);  // truncation: any bf16 value will do
    v[i] = std::bit_cast<float>(static_cast<uint32_t>(bits[i]) << 16);
  }
  io::write_npy(p, io::from_bf16_bits(std::move(shape), bits));
}

void run_ok(const std::string& args) {
  const testing::CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.output;
}

TEST(GemmCli, NpyOperandsAreQuantizedAsFp4emuQuantize) {
  TempDir dir;
  std::mt19937_64 rng(31);
  const int64_t m = 6, k = 70, n = 5;
  std::vector<float> a = operand_values(m, k, rng), b = operand_values(k, n, rng);
  const auto A = dir / "A.npy", B = dir / "B.npy", Abf = dir / "A_bf16.npy";
  write_f32(A, {m, k}, a);
  write_f32(B, {k, n}, b);
  std::vector<float> a_bf16 = a;
  write_bf16(Abf, {m, k}, a_bf16);
  for (const char* recipe : {"mxfp4.ocp", "mxfp4.rceil", "nvfp4.te", "nvfp4.torchao", "nvfp4.te_4over6", "hif4.v14"})
    for (const auto& lhs : {A, Abf}) {
      const std::string what = fmt::format("{} {}", recipe, lhs.filename().string());
      const auto pa = dir / "A.safetensors", pb = dir / "B.safetensors";
      run_ok(fmt::format("quantize {} {} --recipe {} --axis 1", lhs.string(), pa.string(), recipe));
      run_ok(fmt::format("quantize {} {} --recipe {} --axis 0", B.string(), pb.string(), recipe));
      // The packed NVFP4 operand records the tensor's own amax.
      const std::vector<float>& av = lhs == Abf ? a_bf16 : a;
      float amax = 0.0f;
      for (float v : av) amax = std::max(amax, std::fabs(v));
      if (std::string(recipe).starts_with("nvfp4")) {
        EXPECT_EQ(read_packed(pa).global_amax, amax) << what;
      }
      for (const char* model : {"exact", "block_fp32", "fma_fp32"}) {
        const auto c_npy = dir / "C_npy.npy", c_packed = dir / "C_packed.npy";
        run_ok(fmt::format("gemm {} {} {} --recipe {} --model {}", lhs.string(), B.string(), c_npy.string(), recipe,
                           model));
        run_ok(fmt::format("gemm {} {} {} --model {}", pa.string(), pb.string(), c_packed.string(), model));
        EXPECT_EQ(testing::read_bytes(c_npy), testing::read_bytes(c_packed)) << what << " model " << model;
      }
      // The same amax given to quantize explicitly gives the same operand.
      if (std::string(recipe).starts_with("nvfp4")) {
        const auto pg = dir / "A_g.safetensors";
        run_ok(fmt::format("quantize {} {} --recipe {} --axis 1 --global-amax {:.9g}", lhs.string(), pg.string(),
                           recipe, amax));
        const PackedTensor x = read_packed(pa), y = read_packed(pg);
        EXPECT_EQ(x.codes, y.codes) << what;
        EXPECT_EQ(x.scales, y.scales) << what;
        EXPECT_EQ(x.global_decode_scale, y.global_decode_scale) << what;
      }
    }
}

}  // namespace
}  // namespace fp4emu
