// The fp4emu command-line tool: the specs' worked examples through
// `fp4emu fake-quant`, the packed round trip, and bad input (exit code 2, a
// message naming the problem, no output file).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::same_bits;
using testing::TempDir;

struct WorkedExample {
  const char* name;      // spec and example id
  const char* args;      // recipe selection and options
  int block;             // block length of the row
  std::vector<float> in;   // first elements of one block; the rest are 0
  std::vector<float> out;  // expected decoded values of those elements
};

const float kNan = std::numeric_limits<float>::quiet_NaN();

const std::vector<WorkedExample>& worked_examples() {
  static const std::vector<WorkedExample> examples = {
      // docs/spec/hif4.md §8
      {"hif4 EX1 V14", "--format hif4", 64,
       {7.0f, -3.0f, 0.625f, 0.09375f, 0.875f, 0.3125f, -0.5625f, 0, 1.5f, -2.5f, 0.25f, 3.0f, 0.125f, 0.375f, -1.0f, 0.625f},
       {7.0f, -3.0f, 1.0f, 0, 1.0f, 0.5f, -0.5f, 0, 1.5f, -2.5f, 0.5f, 3.0f, 0.25f, 0.5f, -1.0f, 0.75f}},
      {"hif4 EX1 A6", "--recipe hif4.a6", 64,
       {7.0f, -3.0f, 0.625f, 0.09375f, 0.875f, 0.3125f, -0.5625f, 0, 1.5f, -2.5f, 0.25f, 3.0f, 0.125f, 0.375f, -1.0f, 0.625f},
       {7.0f, -3.0f, 1.0f, 0, 1.0f, 0.5f, -0.5f, 0, 1.5f, -2.5f, 0, 3.0f, 0, 0.5f, -1.0f, 0.5f}},
      {"hif4 EX2 V14", "--format hif4 --recipe v14", 64, {10.0f, 3.734375f, 9.0f, -6.75f}, {10.5f, 3.0f, 9.0f, -7.5f}},
      {"hif4 EX2 AMCT", "--recipe hif4.amct", 64, {10.0f, 3.734375f, 9.0f, -6.75f}, {10.5f, 4.5f, 9.0f, -7.5f}},
      {"hif4 EX2 A6", "--recipe hif4.a6", 64, {10.0f, 3.734375f, 9.0f, -6.75f}, {10.5f, 3.0f, 9.0f, -6.0f}},
      {"hif4 EX2 V12", "--recipe hif4.v12_pow2", 64, {10.0f, 3.734375f, 9.0f, -6.75f}, {10.0f, 4.0f, 10.0f, -6.0f}},
      {"hif4 EX2' V14", "--recipe hif4.v14", 64, {10.0f, 3.74609375f, 9.0f, -6.75f}, {10.5f, 4.5f, 9.0f, -7.5f}},
      {"hif4 EX3 V14", "--recipe hif4.v14", 64, {1.0e6f, -3.0e5f, 1000.0f, 7.0f}, {344064.0f, -294912.0f, 0, 0}},
      {"hif4 EX4 V14", "--recipe hif4.v14", 64, {7.875f, 1.0f}, {7.0f, 1.0f}},
      {"hif4 EX5 V14", "--recipe hif4.v14", 64, {12, 0, 0, 0, 0, 0, 0, 0, 7, 1}, {12.25f, 0, 0, 0, 0, 0, 0, 0, 6.125f, 0.875f}},
      {"hif4 EX5 A6", "--recipe hif4.a6", 64, {12, 0, 0, 0, 0, 0, 0, 0, 7, 1}, {12.25f, 0, 0, 0, 0, 0, 0, 0, 7.0f, 1.75f}},
      {"hif4 EX6 V14", "--recipe hif4.v14", 64, {0, 0}, {0, 0}},
      {"hif4 EX6 noclip", "--recipe hif4.v14_noclip", 64, {0, 0}, {kNan, kNan}},
      {"hif4 EX7 V14", "--recipe hif4.v14", 64, {std::bit_cast<float>(0x40B6CB66u)}, {5.25f}},
      {"hif4 EX7 V14-numpy", "--recipe hif4.v14_f64", 64, {std::bit_cast<float>(0x40B6CB66u)}, {6.125f}},
      // docs/spec/mxfp4.md §8
      {"mxfp4 EX-M1 OCP", "--format mxfp4", 32, {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0, -3.0f, 0.2f},
       {3.0f, 1.0f, 0.5f, -0.0f, 2.0f, 0, -3.0f, 0.25f}},
      {"mxfp4 EX-M1 microxcaling", "--recipe mxfp4.microxcaling", 32, {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0, -3.0f, 0.2f},
       {3.0f, 1.5f, 0.5f, -0.25f, 2.0f, 0, -3.0f, 0.25f}},
      {"mxfp4 EX-M1 ggml", "--recipe mxfp4.ggml", 32, {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0, -3.0f, 0.2f},
       {3.0f, 1.0f, 0.25f, 0.0f, 2.0f, 0, -3.0f, 0.25f}},
      {"mxfp4 EX-M1 CEIL", "--recipe mxfp4.ceil", 32, {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0, -3.0f, 0.2f},
       {3.0f, 1.0f, 0.5f, -0.0f, 2.0f, 0, -3.0f, 0.0f}},
      {"mxfp4 EX-M1 RCEIL", "--recipe mxfp4.rceil", 32, {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0, -3.0f, 0.2f},
       {3.0f, 1.0f, 0.5f, -0.0f, 2.0f, 0, -3.0f, 0.25f}},
      {"mxfp4 EX-M1 EVEN", "--recipe mxfp4.even", 32, {3.0f, 1.25f, 0.375f, -0.125f, 2.4f, 0, -3.0f, 0.2f},
       {3.0f, 1.0f, 0.5f, -0.0f, 2.0f, 0, -3.0f, 0.25f}},
      {"mxfp4 EX-M2 OCP", "--recipe mxfp4.ocp", 32, {7.0f, -5.5f, 1.0f, 0.2f}, {6.0f, -6.0f, 1.0f, 0}},
      {"mxfp4 EX-M2 RCEIL", "--recipe mxfp4.rceil", 32, {7.0f, -5.5f, 1.0f, 0.2f}, {8.0f, -6.0f, 1.0f, 0}},
      {"mxfp4 EX-M2 EVEN", "--recipe mxfp4.even", 32, {7.0f, -5.5f, 1.0f, 0.2f}, {8.0f, -6.0f, 1.0f, 0}},
      {"mxfp4 EX-M2 CEIL", "--recipe mxfp4.ceil", 32, {7.0f, -5.5f, 1.0f, 0.2f}, {8.0f, -6.0f, 1.0f, 0}},
      {"mxfp4 EX-M2 ggml", "--recipe mxfp4.ggml", 32, {7.0f, -5.5f, 1.0f, 0.2f}, {6.0f, -6.0f, 1.0f, 0}},
      {"mxfp4 EX-M3", "--recipe mxfp4.ocp", 32, {0, 0}, {0, 0}},
      {"mxfp4 EX-M4 OCP", "--recipe mxfp4.ocp", 32, {std::ldexp(1.0f, -130), -std::ldexp(1.0f, -131)}, {0.0f, -0.0f}},
      {"mxfp4 EX-M4 ggml", "--recipe mxfp4.ggml", 32, {std::ldexp(1.0f, -130), -std::ldexp(1.0f, -131)}, {0.0f, 0.0f}},
      {"mxfp4 EX-M5 OCP", "--recipe mxfp4.ocp", 32, {std::bit_cast<float>(0x447FFFFFu)}, {768.0f}},
      {"mxfp4 EX-M5 log2f", "--recipe mxfp4.microxcaling", 32, {std::bit_cast<float>(0x447FFFFFu)}, {1024.0f}},
      {"mxfp4 EX-M5 RCEIL", "--recipe mxfp4.rceil", 32, {std::bit_cast<float>(0x447FFFFFu)}, {1024.0f}},
      // docs/spec/nvfp4.md §8 (G given so that S_enc = S_dec = 1)
      {"nvfp4 EX-N1 TE", "--format nvfp4 --global-amax 2688", 16, {12, 5, -1.5f, 0.5f, 7, 10, -0.25f, 3},
       {12, 4, -2, 0, 8, 8, -0.0f, 3}},
      {"nvfp4 EX-N1 torchao", "--recipe nvfp4.torchao --global-amax 2688", 16, {12, 5, -1.5f, 0.5f, 7, 10, -0.25f, 3},
       {12, 4, -2, 0, 8, 8, -0.0f, 3}},
      // ModelOpt's dequantize table holds +0 for code 0x8 (docs/formats.md).
      {"nvfp4 EX-N1 ModelOpt", "--recipe nvfp4.modelopt --global-amax 2688", 16, {12, 5, -1.5f, 0.5f, 7, 10, -0.25f, 3},
       {12, 4, -2, 0, 8, 8, 0.0f, 3}},
      {"nvfp4 EX-N1 CT", "--recipe nvfp4.ct --global-amax 2688", 16, {12, 5, -1.5f, 0.5f, 7, 10, -0.25f, 3},
       {12, 4, -2, 0, 8, 8, -0.0f, 3}},
      {"nvfp4 EX-N2 TE", "--recipe nvfp4.te --global-amax 2688", 16, {10, -4, 2, 1}, {9.75f, -3.25f, 1.625f, 0.8125f}},
      {"nvfp4 EX-N3 TE", "--recipe nvfp4.te --global-amax 2688", 16, {0, 0}, {0, 0}},
      {"nvfp4 EX-N4b TE", "--recipe nvfp4.te --global-amax 2688", 16, {0.06f, -0.02f, 0.01f},
       {0.05859375f, -0.01953125f, 0.009765625f}},
      {"nvfp4 EX-N4b torchao", "--recipe nvfp4.torchao --global-amax 2688", 16, {0.06f, -0.02f, 0.01f},
       {0.0625f, -0.0234375f, 0.0078125f}},
  };
  return examples;
}

TEST(Cli, FakeQuantReproducesTheWorkedExamples) {
  TempDir dir;
  for (const WorkedExample& ex : worked_examples()) {
    std::vector<float> row(ex.block, 0.0f);
    std::copy(ex.in.begin(), ex.in.end(), row.begin());
    const auto in = dir / "in.npy";
    const auto out = dir / "out.npy";
    io::write_npy(in, io::from_f32({1, ex.block}, row));
    const auto r = run_cli(fmt::format("fake-quant {} {} {}", in.string(), out.string(), ex.args));
    ASSERT_EQ(r.exit_code, 0) << ex.name << ": " << r.output;
    const std::vector<float> y = io::to_f32(io::read_npy(out));
    ASSERT_EQ(y.size(), row.size()) << ex.name;
    for (size_t i = 0; i < ex.out.size(); ++i)
      EXPECT_TRUE(same_bits(y[i], ex.out[i])) << ex.name << " element " << i << ": got " << y[i] << " expected "
                                              << ex.out[i];
    std::filesystem::remove(out);
  }
}

TEST(Cli, QuantizeDequantizeRoundTripEqualsFakeQuant) {
  TempDir dir;
  std::vector<float> x(3 * 80);
  std::mt19937_64 rng(42);
  for (float& v : x) v = testing::random_wide(rng);
  io::write_npy(dir / "x.npy", io::from_f32({3, 80}, x));
  for (const char* args : {"--format hif4", "--format mxfp4 --recipe ggml", "--format nvfp4 --axis 0",
                           "--recipe hif4.v14 --scale-bit-order msb_first --nibble-order high_first"}) {
    const std::string x_path = (dir / "x.npy").string();
    auto r = run_cli(fmt::format("quantize {} {} {}", x_path, (dir / "q.safetensors").string(), args));
    ASSERT_EQ(r.exit_code, 0) << args << ": " << r.output;
    r = run_cli(fmt::format("dequantize {} {}", (dir / "q.safetensors").string(), (dir / "dq.npy").string()));
    ASSERT_EQ(r.exit_code, 0) << args << ": " << r.output;
    std::string fq_args = args;
    for (const char* packing : {" --scale-bit-order msb_first", " --nibble-order high_first"}) {
      const auto pos = fq_args.find(packing);
      if (pos != std::string::npos) fq_args.erase(pos, std::string(packing).size());
    }
    r = run_cli(fmt::format("fake-quant {} {} {}", x_path, (dir / "fq.npy").string(), fq_args));
    ASSERT_EQ(r.exit_code, 0) << args << ": " << r.output;
    const auto a = io::to_f32(io::read_npy(dir / "dq.npy"));
    const auto b = io::to_f32(io::read_npy(dir / "fq.npy"));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_bits(a[i], b[i])) << args << " element " << i;
  }
  // The packed file is plain safetensors with codes, scales and metadata.
  const io::SafetensorsFile f = io::read_safetensors(dir / "q.safetensors");
  ASSERT_NE(f.find("codes"), nullptr);
  ASSERT_NE(f.find("scales"), nullptr);
  EXPECT_EQ(f.metadata.at("recipe"), "hif4.v14");
  EXPECT_EQ(f.metadata.at("scale_bit_order"), "msb_first");
}

TEST(Cli, Nvfp4RecordsTheGlobalAmaxUsed) {
  TempDir dir;
  io::write_npy(dir / "x.npy", io::from_f32({1, 16}, std::vector<float>{10, -4, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  auto r = run_cli(fmt::format("quantize {} {} --format nvfp4", (dir / "x.npy").string(), (dir / "a.safetensors").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(io::read_safetensors(dir / "a.safetensors").metadata.at("global_amax"), "0x1.4p+3");  // 10
  r = run_cli(fmt::format("quantize {} {} --format nvfp4 --global-amax 2688", (dir / "x.npy").string(),
                          (dir / "b.safetensors").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(io::read_safetensors(dir / "b.safetensors").metadata.at("global_amax"), "0x1.5p+11");  // 2688
}

TEST(Cli, FormatsListsEveryRecipe) {
  const auto r = run_cli("formats");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* id : {"hif4.v14", "hif4.v14_f64", "hif4.v14_noclip", "hif4.v14_special", "hif4.amct", "hif4.a6",
                         "hif4.v12_pow2", "mxfp4.ocp", "mxfp4.rceil", "mxfp4.ceil", "mxfp4.even",
                         "mxfp4.microxcaling", "mxfp4.ggml", "nvfp4.te", "nvfp4.te_2d", "nvfp4.te_4over6",
                         "nvfp4.torchao", "nvfp4.torchao_1l", "nvfp4.modelopt", "nvfp4.modelopt_fq", "nvfp4.ct",
                         "nvfp4.cutlass_epi", "nvfp4.cudnn", "nvfp4.ggml"})
    EXPECT_NE(r.output.find(id), std::string::npos) << id;
  const auto j = run_cli("formats --json");
  ASSERT_EQ(j.exit_code, 0);
  EXPECT_NE(j.output.find("\"id\": \"nvfp4.cudnn\""), std::string::npos);
  // Each recipe's bits version, in the JSON and in the listing.
  const nlohmann::json formats = nlohmann::json::parse(j.output);
  size_t listed = 0;
  for (const auto& f : formats)
    for (const auto& rj : f["recipes"]) {
      const Recipe* recipe = find_recipe(rj["id"].get<std::string>());
      ASSERT_NE(recipe, nullptr) << rj["id"];
      EXPECT_EQ(rj["bits_version"].get<int>(), recipe->bits_version) << recipe->id;
      EXPECT_NE(r.output.find(fmt::format("{:<20} {:<9} bits v{:<3}", recipe->id, recipe->is_default ? "[default]" : "",
                                            recipe->bits_version)),
                std::string::npos)
          << recipe->id;
      ++listed;
    }
  EXPECT_EQ(listed, all_recipes().size());
}

// The demo: every format on the bundled dump (made by `fp4emu sample`).
TEST(Cli, CompareOnTheBundledSample) {
  TempDir dir;
  const std::string sample = std::string(FP4EMU_SOURCE_DIR) + "/data/sample_dump.safetensors";
  const auto r = run_cli(fmt::format("compare {} --format hif4,mxfp4,nvfp4 --json {}", sample, (dir / "c.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"hif4.v14", "mxfp4.ocp", "nvfp4.te", "QSNR", "16 of 16 tensors", "model.layers.3.mlp.down_proj.input",
                        "pooled over 16 tensors"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
  EXPECT_TRUE(std::filesystem::exists(dir / "c.json"));
}

// Every usage or input error: exit code 2, a message naming the problem, and
// no output file left behind.
TEST(Cli, BadInputExitsWithCode2AndWritesNothing) {
  TempDir dir;
  const std::string x = (dir / "x.npy").string();
  io::write_npy(x, io::from_f32({2, 100}, std::vector<float>(200, 1.5f)));
  std::vector<float> not_bf16(64, 1.0f);
  not_bf16[3] = 1.0f + std::ldexp(1.0f, -20);
  io::write_npy(dir / "nb.npy", io::from_f32({1, 64}, not_bf16));
  io::write_npy(dir / "u8.npy", io::from_u8({4}, std::vector<uint8_t>{1, 2, 3, 4}));
  {
    std::ofstream garbage(dir / "garbage.npy");
    garbage << "this is not an npy file";
  }
  const std::string out = (dir / "out.npy").string();
  const std::string outs = (dir / "out.safetensors").string();
  struct Case {
    std::string args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"fake-quant " + x + " " + out, "no format given"},
      {"fake-quant " + x + " " + out + " --format fp8", "unknown format 'fp8'"},
      {"fake-quant " + x + " " + out + " --recipe hif4.nope", "unknown recipe 'hif4.nope'"},
      {"fake-quant " + x + " " + out + " --format mxfp4 --recipe hif4.v14", "belongs to hif4"},
      {"fake-quant " + x + " " + out + " --format hif4 --axis 2", "axis 2 is out of range"},
      {"fake-quant " + x + " " + out + " --format hif4 --tail error", "--tail pad"},
      {"fake-quant " + x + " " + out + " --recipe hif4.amct", "not a multiple"},
      {"fake-quant " + x + " " + out + " --format hif4 --tail sideways", "--tail 'sideways' is unknown"},
      {"fake-quant " + x + " " + out + " --format hif4 --round up", "--round 'up' is unknown"},
      {"fake-quant " + x + " " + out + " --format nvfp4 --global-amax -3", "--global-amax: '-3' is out of range"},
      {"fake-quant " + (dir / "nb.npy").string() + " " + out + " --recipe hif4.a6", "not exactly representable in bf16"},
      {"fake-quant " + (dir / "u8.npy").string() + " " + out + " --format hif4", "not a float input"},
      {"fake-quant " + (dir / "garbage.npy").string() + " " + out + " --format hif4", "garbage.npy"},
      {"fake-quant " + (dir / "missing.npy").string() + " " + out + " --format hif4", "missing.npy"},
      {"fake-quant " + x + " " + (dir / "out.txt").string() + " --format hif4", "*.npy"},
      {"fake-quant " + x + " " + out + " --format hif4 --bogus-flag", "bogus-flag"},
      {"quantize " + x + " " + outs + " --recipe nvfp4.modelopt_fq", "fake-quant only"},
      {"quantize " + x + " " + outs + " --format mxfp4 --scale-bit-order msb_first", "HiF4 scale words only"},
      {"quantize " + x + " " + outs + " --format mxfp4 --nibble-order diagonal", "--nibble-order 'diagonal'"},
      {"dequantize " + x + " " + out, "x.npy"},
      {"nonsense-command", "nonsense-command"},
  };
  for (const Case& c : cases) {
    const auto r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
    EXPECT_FALSE(std::filesystem::exists(outs)) << c.args;
  }
  // Nothing but the inputs is left in the directory (no temporaries).
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 4);
}

}  // namespace
}  // namespace fp4emu
