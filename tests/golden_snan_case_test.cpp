// The level-1 signaling-NaN case of every default recipe (families.cpp
// snan_case): the suite's input really holds signaling NaNs (bit patterns
// kept through generation), and every recipe treats a signaling NaN exactly
// as a quiet NaN of the same sign: the expected codes and scales equal those
// of the input with each signaling NaN made quiet. A kernel whose max uses
// glibc's fmaxf (NaN for a signaling operand) fails this case; one using
// CUDA's fmaxf passes.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool is_signaling_f32(uint32_t w) { return (w & 0x7F800000u) == 0x7F800000u && (w & 0x007FFFFFu) && !(w & 0x00400000u); }

TEST(GoldenSnanCase, EveryDefaultRecipeTreatsSignalingNaNAsQuiet) {
  testing::TempDir dir;
  golden::GenerateOptions g;
  golden::generate_suite(dir / "suite", g);
  std::ifstream in(dir / "suite" / "manifest.json");
  const json m = json::parse(in);
  int found = 0;
  for (const char* recipe : golden::kDefaultRecipes) {
    const std::string id = std::string(recipe) + "/special_snan";
    const json* c = nullptr;
    for (const json& x : m.at("cases"))
      if (x.at("id") == id) c = &x;
    ASSERT_NE(c, nullptr) << id << " is missing from the level-1 suite";
    ++found;
    const io::Array input = io::read_npy(dir / "suite" / id / "input.npy");
    const bool bf16 = input.dtype == io::DType::bf16;
    Tensor x, quiet;
    x.shape = input.shape;
    const size_t n = input.bytes.size() / (bf16 ? 2 : 4);
    int signaling = 0;
    for (size_t i = 0; i < n; ++i) {
      uint32_t w = 0;
      if (bf16) {
        uint16_t h;
        std::memcpy(&h, input.bytes.data() + 2 * i, 2);
        w = static_cast<uint32_t>(h) << 16;
      } else {
        std::memcpy(&w, input.bytes.data() + 4 * i, 4);
      }
      signaling += is_signaling_f32(w);
      float v, q;
      std::memcpy(&v, &w, 4);
      const uint32_t wq = is_signaling_f32(w) ? w | 0x00400000u : w;  // quieted, payload and sign kept
      std::memcpy(&q, &wq, 4);
      x.data.push_back(v);
      quiet.data.push_back(q);
    }
    quiet.shape = x.shape;
    EXPECT_GT(signaling, 16) << id;
    QuantOptions o;
    o.recipe = recipe;
    o.axis = c->at("options").at("axis").get<int>();
    o.input_dtype = bf16 ? InputDType::bf16 : InputDType::f32;
    const PackedTensor ps = quantize(x, o), pq = quantize(quiet, o);
    EXPECT_EQ(ps.codes, pq.codes) << id;
    EXPECT_EQ(ps.scales, pq.scales) << id;
    EXPECT_EQ(ps.global_amax, pq.global_amax) << id;
    // The suite's expected codes are those of the quiet input.
    const io::Array codes = io::read_npy(dir / "suite" / id / "codes.npy");
    EXPECT_EQ(codes.bytes, pq.codes) << id;
  }
  EXPECT_EQ(found, 5);
}

}  // namespace
}  // namespace fp4emu
