// The suite used as intended: a kernel harness that reads only the manifest
// and the inputs runs fp4emu's fast path (the SIMD kernels) on every case of
// the checked-in suite, writes the candidate, and `golden verify` must pass
// it. The golden side is the reference; this is the fast path checked
// against it through the files a kernel team would use; GEMM cases likewise
// run the SIMD GEMM on the packed operand files against the scalar GEMM's C.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "fp4emu/error.hpp"
#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/scale_layout.hpp"
#include "golden_case_util.hpp"
#include "test_util.hpp"

namespace fp4emu::golden {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kSuite = fs::path(FP4EMU_SOURCE_DIR) / "golden" / "suite";


// A plain write: io::write_npy fsyncs every file, which is slow for the
// thousand files of a candidate and buys nothing in a temporary directory.
void save(const fs::path& path, const io::Array& a) {
  const std::vector<uint8_t> bytes = io::encode_npy(a);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
}

// A GEMM case as a GEMM kernel's harness would run it: the operands are the
// packed files (the container PackedTensor comes from quantizing the input
// with the fast path, then its codes, scales and per-tensor scales are
// replaced by the files' bytes), C from the SIMD GEMM of each listed model.
PackedTensor load_operand(const json& c, const std::string& side, const std::string& input, int axis) {
  const std::string id = c["id"];
  const io::Array in = io::read_npy(kSuite / id / input);
  Tensor x;
  x.shape = in.shape;
  x.data = io::to_f32(in);
  QuantOptions o;
  o.recipe = c["recipe"].get<std::string>();
  o.axis = axis;
  o.tail = TailPolicy::pad;
  o.input_dtype = c["input_dtype"] == "bf16" ? InputDType::bf16 : InputDType::f32;
  o.impl = Impl::fast;
  o.threads = 1;
  PackedTensor p = quantize(x, o);
  p.codes = io::read_npy(kSuite / id / (side + "_codes.npy")).bytes;
  p.scales = io::read_npy(kSuite / id / (side + "_scales.npy")).bytes;  // u32 words little-endian = scale bytes
  if (p.format == Format::nvfp4) {
    const std::vector<float> g = io::to_f32(io::read_npy(kSuite / id / (side + "_global_scale.npy")));
    p.global_amax = g[0];
    p.global_encode_scale = g[1];
    p.global_decode_scale = g[2];
  }
  return p;
}

void run_gemm_case(const json& c, const fs::path& out) {
  const std::string id = c["id"];
  const PackedTensor a = load_operand(c, "a", "A.npy", 1), b = load_operand(c, "b", "B.npy", 0);
  fs::create_directories(out / id);
  // The epilogue's inputs, where the case has them (gemm_epilogue).
  std::optional<Tensor> source, bias;
  const auto load_f32 = [&](const std::string& name) {
    const io::Array arr = io::read_npy(kSuite / id / name);
    Tensor t;
    t.shape = arr.shape;
    t.data = io::to_f32(arr);
    return t;
  };
  if (fs::exists(kSuite / id / "c.npy")) source = load_f32("c.npy");
  if (c.value("bias", false)) bias = load_f32("bias.npy");
  for (const json& o : c["outputs"]) {
    GemmOptions g;
    if (source) {
      g.c = &*source;
      g.beta = std::strtof(c["beta"].get<std::string>().c_str(), nullptr);
    }
    if (bias) g.bias = &*bias;
    g.model = *parse_gemm_model(o["model"].get<std::string>());
    g.blocks_per_step = o["blocks_per_step"];
    if (!c["alpha"].is_null()) g.alpha = std::strtof(c["alpha"].get<std::string>().c_str(), nullptr);
    g.threads = 1;
    g.impl = GemmImpl::simd;
    const Tensor C = gemm(a, b, g);
    save(out / id / o["file"].get<std::string>(), io::from_f32(C.shape, C.data));
  }
}

// Runs one case the way an external harness would: options from the manifest.
void run_case(const json& c, const fs::path& out) {
  const std::string id = c["id"];
  if (c["family"] == "gemm") return run_gemm_case(c, out);
  const Tensor x = testing::read_case_input(kSuite / id);
  QuantOptions o = testing::case_options(c);
  o.impl = Impl::fast;
  o.threads = 1;  // small tensors; OpenMP spinning on a loaded machine costs more than it gives
  // A stochastic case's kernel reads its random bytes, as a hardware kernel
  // feeds them to cvt.rs (golden/README.md "Stochastic rounding cases").
  std::vector<uint8_t> rbits;
  if (c["options"]["rounding"] == "stochastic") {
    o.rounding = Rounding::stochastic;
    rbits = io::read_npy(kSuite / id / c["stochastic"]["rbits"].get<std::string>()).bytes;
    o.stochastic.bytes = rbits;
  }
  if (c["expect"] == "error") {
    EXPECT_THROW(quantize(x, o), InputError) << id;
    // The refusal is the case's evidence for verify (golden/README.md).
    fs::create_directories(out / id);
    std::ofstream(out / id / "error.txt") << "rejected\n";
    return;
  }
  const PackedTensor p = quantize(x, o);
  const Tensor dq = dequantize(p, DequantOptions{.impl = Impl::fast, .threads = 1});
  const fs::path d = out / id;
  fs::create_directories(d);
  save(d / "codes.npy", io::from_u8(p.stored_shape(p.padded_len / 2), p.codes));
  if (p.format == Format::hif4) {
    std::vector<uint32_t> words(p.num_blocks());
    for (size_t i = 0; i < words.size(); ++i)
      for (int b = 0; b < 4; ++b) words[i] |= static_cast<uint32_t>(p.scales[4 * i + b]) << (8 * b);
    save(d / "scales.npy", io::from_u32(p.stored_shape(p.blocks_per_row()), words));
  } else {
    save(d / "scales.npy", io::from_u8(p.stored_shape(p.blocks_per_row()), p.scales));
  }
  for (const json& l : c["options"]["scale_layouts"]) {
    const auto layout = parse_stored_scale_layout(l.get<std::string>());
    ASSERT_TRUE(layout) << id;
    if (*layout == StoredScaleLayout::linear) continue;
    save(d / ("scales_" + l.get<std::string>() + ".npy"),
                  io::from_u8(stored_scales_shape(p, *layout), store_scales(p, *layout)));
  }
  if (p.format == Format::nvfp4) {
    const float g[3] = {p.global_amax, p.global_encode_scale, p.global_decode_scale};
    save(d / "global_scale.npy", io::from_f32({3}, g));
  }
  save(d / "dequant.npy", io::from_f32(dq.shape, dq.data));
}

TEST(GoldenFastPath, FastPathPassesTheCheckedInSuite) {
  std::ifstream in(kSuite / "manifest.json");
  const json m = json::parse(in);
  testing::TempDir cand;
  int stochastic = 0;
  for (const json& c : m["cases"]) {
    run_case(c, cand.path());
    stochastic += c["family"] == "stochastic";
  }
  EXPECT_GE(stochastic, 4 * 6) << "every SR recipe of the suite has its stochastic cases";
  VerifyOptions o;
  o.max_report = 10;
  const VerifyReport r = verify_suite(kSuite, cand.path(), o);
  EXPECT_EQ(r.exit_code(), 0) << report_text(r);
}

// A kernel that draws its own bits: every Philox case's key (seed, offset,
// stream, byte map) run through the fast path gives the suite's codes, so
// the key in the manifest regenerates rbits.npy.
TEST(GoldenFastPath, PhiloxKeysRegenerateTheStochasticCases) {
  std::ifstream in(kSuite / "manifest.json");
  const json m = json::parse(in);
  int keyed = 0;
  for (const json& c : m["cases"]) {
    if (!c.contains("stochastic") || !c["stochastic"].contains("rng")) continue;
    const std::string id = c["id"];
    const json& k = c["stochastic"];
    const Tensor x = testing::read_case_input(kSuite / id);
    QuantOptions o = testing::case_options(c);
    o.rounding = Rounding::stochastic;
    o.stochastic.seed = k["seed"].get<uint64_t>();
    o.stochastic.offset = k["offset"].get<uint64_t>();
    o.stochastic.rng = *parse_sr_rng(k["rng"].get<std::string>());
    if (k.contains("rbits_map")) o.stochastic.map = *parse_rbits_map(k["rbits_map"].get<std::string>());
    o.impl = Impl::fast;
    o.threads = 2;
    const PackedTensor p = quantize(x, o);
    EXPECT_EQ(p.codes, io::read_npy(kSuite / id / "codes.npy").bytes) << id;
    EXPECT_EQ(p.stochastic, describe(o.stochastic)) << id;  // the key is recorded with the codes
    ++keyed;
  }
  EXPECT_GE(keyed, 3 * 4) << "each SR recipe has its philox-te, philox-te ptx and philox-index cases";
}

}  // namespace
}  // namespace fp4emu::golden
