// `fp4emu sample`: the bundled dump is exactly what the command writes; the
// generator is deterministic, its tensors independent of each other, and
// its values have the structure sample.hpp promises (hot channels, massive
// first token, heavier tails in down_in than in o_in).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "fp4emu/analysis/sample.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::TempDir;

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

float widen(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

std::vector<int64_t> ints(const std::string& csv) {
  std::vector<int64_t> v;
  std::stringstream s(csv);
  for (std::string x; std::getline(s, x, ',');) v.push_back(std::stoll(x));
  return v;
}

TEST(SampleCli, RegeneratesTheBundledDumpByteForByte) {
  TempDir dir;
  const auto r = run_cli(fmt::format("sample {}", (dir / "s.safetensors").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string bundled = read_bytes(std::string(FP4EMU_SOURCE_DIR) + "/data/sample_dump.safetensors");
  ASSERT_GT(bundled.size(), 1000u);
  EXPECT_LT(bundled.size(), 4u << 20);  // a few MB at most
  EXPECT_TRUE(read_bytes(dir / "s.safetensors") == bundled)
      << "data/sample_dump.safetensors is not what `fp4emu sample` writes; regenerate it";
}

TEST(Sample, LayoutAndMetadata) {
  SampleOptions o;
  o.layers = 2;
  o.tokens = 8;
  o.hidden = 96;
  const auto layout = sample_layout(o);
  ASSERT_EQ(layout.size(), 8u);
  EXPECT_EQ(sample_intermediate(o), 256);  // 96 * 8 / 3 = 256
  EXPECT_EQ(layout[0].name, "model.layers.0.self_attn.qkv_proj.input");
  EXPECT_EQ(layout[1].name, "model.layers.0.self_attn.o_proj.input");
  EXPECT_EQ(layout[2].name, "model.layers.0.mlp.gate_up_proj.input");
  EXPECT_EQ(layout[3].name, "model.layers.0.mlp.down_proj.input");
  EXPECT_EQ(layout[7].name, "model.layers.1.mlp.down_proj.input");
  EXPECT_EQ(layout[2].shape, (std::vector<int64_t>{8, 96}));
  EXPECT_EQ(layout[3].shape, (std::vector<int64_t>{8, 256}));
  const auto meta = sample_metadata(o);
  EXPECT_EQ(meta.at("seed"), "0");
  EXPECT_EQ(meta.at("intermediate"), "256");
  EXPECT_EQ(ints(meta.at("hot_channels_hidden")).size(), 4u);
  EXPECT_EQ(ints(meta.at("massive_dims_intermediate")).size(), 2u);
}

TEST(Sample, DeterministicAndEachTensorIndependentOfTheOthers) {
  SampleOptions a;
  a.layers = 4;
  a.tokens = 16;
  a.hidden = 128;
  SampleOptions b = a;
  b.layers = 2;
  b.tokens = 10;
  SampleOptions c = a;
  c.seed = 1;
  const auto la = sample_layout(a), lb = sample_layout(b);
  for (size_t i = 0; i < lb.size(); ++i) {
    const auto ta = generate_sample_tensor(a, la[i]);
    EXPECT_EQ(ta, generate_sample_tensor(a, la[i])) << la[i].name;
    // Fewer layers and fewer tokens: the same tensors, their first rows.
    const auto tb = generate_sample_tensor(b, lb[i]);
    EXPECT_TRUE(std::equal(tb.begin(), tb.end(), ta.begin())) << lb[i].name;
    EXPECT_NE(ta, generate_sample_tensor(c, la[i])) << la[i].name;
  }
  EXPECT_NE(generate_sample_tensor(a, la[0]), generate_sample_tensor(a, la[4]));  // layers differ
}

TEST(Sample, LooksLikeLinearLayerInputs) {
  const SampleOptions o;  // the bundled defaults
  const auto meta = sample_metadata(o);
  const std::vector<int64_t> hot_h = ints(meta.at("hot_channels_hidden")), massive_h = ints(meta.at("massive_dims_hidden"));
  const std::vector<int64_t> hot_d = ints(meta.at("hot_channels_intermediate")),
                             massive_d = ints(meta.at("massive_dims_intermediate"));
  ASSERT_EQ(hot_h.size(), static_cast<size_t>(o.outliers));
  auto kurtosis_of_body = [](const std::vector<float>& x, int64_t width, const std::vector<int64_t>& skip) {
    double s2 = 0, s4 = 0;
    int64_t n = 0;
    for (size_t i = static_cast<size_t>(width); i < x.size(); ++i) {  // token 0 left out
      if (std::find(skip.begin(), skip.end(), static_cast<int64_t>(i % width)) != skip.end()) continue;
      s2 += double(x[i]) * x[i];
      s4 += double(x[i]) * x[i] * x[i] * x[i];
      ++n;
    }
    return (s4 / n) / ((s2 / n) * (s2 / n));
  };
  for (const SampleTensor& t : sample_layout(o)) {
    SCOPED_TRACE(t.name);
    const std::vector<uint16_t> bits = generate_sample_tensor(o, t);
    std::vector<float> x(bits.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = widen(bits[i]);
    const int64_t w = t.shape[1];
    const bool down = t.kind == SampleKind::down_in;
    if (t.kind == SampleKind::o_in) {
      for (float v : x) EXPECT_LT(std::fabs(v), 12.0f);  // no outliers: Gaussian x lognormal(0.25)
      EXPECT_LT(kurtosis_of_body(x, w, {}), 6.0);
      continue;
    }
    const auto& hot = down ? hot_d : hot_h;
    const auto& massive = down ? massive_d : massive_h;
    // Hot channels: large in every token, with one sign per channel.
    for (int64_t c : hot) {
      for (int64_t tok = 1; tok < t.shape[0]; ++tok) {
        EXPECT_GT(std::fabs(x[tok * w + c]), 10.0f) << "channel " << c << " token " << tok;
        EXPECT_EQ(std::signbit(x[tok * w + c]), std::signbit(x[w + c])) << "channel " << c;
      }
    }
    // Massive activations in token 0 only.
    for (int64_t c : massive) {
      EXPECT_GT(std::fabs(x[c]), down ? 1500.0f : 150.0f) << "dim " << c;
      for (int64_t tok = 1; tok < t.shape[0]; ++tok) EXPECT_LT(std::fabs(x[tok * w + c]), 100.0f);
    }
    std::vector<int64_t> skip = hot;
    skip.insert(skip.end(), massive.begin(), massive.end());
    // Heavy-tailed bodies: above the Gaussian's 3 (down_in: silu(a) b is heavier still).
    EXPECT_GT(kurtosis_of_body(x, w, skip), down ? 8.0 : 4.0);
  }
}

TEST(SampleCli, BadOptionsExitWith2AndWriteNothing) {
  TempDir dir;
  const std::string out = (dir / "s.safetensors").string();
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {out + " --layers 0", "--layers 0 is out of range"},
           {out + " --tokens 0", "--tokens 0 is out of range"},
           {out + " --hidden 0", "--hidden 0 is out of range"},
           {out + " --intermediate -5", "--intermediate -5 is out of range"},
           {out + " --hidden 64 --outliers 70", "--outliers 70 is out of range; use 0..62"},
           {out + " --outliers -1", "--outliers -1 is out of range"},
           {out + " --tokens 16777216 --hidden 4096", "2^32 elements"},
           {(dir / "s.npy").string(), "*.safetensors"},
           {(dir / "no" / "s.safetensors").string(), "does not exist"},
           {out + " --seed banana", "seed"}}) {
    const auto r = run_cli("sample " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << args << "\n" << r.output;
    EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << args;
  }
  EXPECT_THROW(check_sample_options(SampleOptions{0, 0, 1, 1, 0, 0}), InputError);
}

}  // namespace
}  // namespace fp4emu
