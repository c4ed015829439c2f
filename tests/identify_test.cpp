// `fp4emu identify` (fp4emu/analysis/identify.hpp): every recipe fed its own
// output is named, and a planted deviation of each class is named with the
// recipe it was planted into. Expectations come from the library's current
// quantizers (the kernel outputs below are fp4emu's own output of a recipe,
// then changed by hand), never from hard-coded recipe bits.
#include "fp4emu/analysis/identify.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/nibbles.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using analysis::IdentifyResult;
using analysis::KernelOutput;
using diagnose::Kind;

// 200 values per row: three whole blocks of HiF4 and a tail, for every format.
constexpr int64_t kCols = 200;

float bf16_round(double v) { return bf16_rne(v); }

// An input on which the recipes of a format differ from one another (and
// from their rounding and packing variants) in many blocks: each feature
// that sets one recipe apart repeats over several rows.
//   kind 0  random values over several binades
//   kind 1  exact ties of the E2M1 grid under a power-of-two scale
//   kind 2  block amax just below a power of two (log2f rounds it up)
//   kind 3  amax significands spread over [1, 2) (EVEN, RCEIL, CEIL, 4over6)
//   kind 4  values near the top of the range (saturation, overflow rules)
//   kind 5  subnormal and tiny values under a large block amax (a negative
//           product that underflows: the sign of a zero code)
//   kind 6  a NaN lane (recipes drop or propagate it in the amax)
//   kind 7  an Inf lane
// HiF4 values are exact in bf16 so that hif4.a6 (defined on bf16) runs.
// NVFP4 runs with the per-tensor amax given (global_amax_of), so that a NaN
// lane changes its block only, not every block through the tensor amax.
Tensor discriminating_input(Format f, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), sig(1.0, 2.0);
  const int64_t rows = 32;
  Tensor x;
  x.shape = {rows, kCols};
  const bool bf16 = f == Format::hif4;
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = static_cast<int>(r % 8);
    for (int64_t k = 0; k < kCols; ++k) {
      double v = 0.0;
      switch (kind) {
        case 0: v = u(rng) * std::ldexp(1.0, static_cast<int>(r % 13) - 6); break;
        case 1: {
          static constexpr double kTies[] = {6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.1, 2.2};
          v = kTies[k % 10] * ((k / 10) % 2 ? -1.0 : 1.0) * std::ldexp(1.0, static_cast<int>(r % 5) - 2);
          break;
        }
        case 2:
          v = (k % 16 == 0) ? (bf16 ? 1.9921875 : std::nextafter(2.0f, 0.0f)) * std::ldexp(1.0, static_cast<int>(r % 6))
                            : u(rng) * std::ldexp(1.0, static_cast<int>(r % 6));
          break;
        case 3: v = (k % 16 == 0 ? sig(rng) : u(rng)) * std::ldexp(1.0, static_cast<int>(k % 7) - 3); break;
        case 4: v = u(rng) * (f == Format::nvfp4 ? 3.0e38 : std::ldexp(1.9, 127)); break;
        case 5:
          v = k % 32 == 3 ? 1024.0 : u(rng) * std::ldexp(1.0, -120 - static_cast<int>(k % 30));
          break;
        case 6:
          v = k == 70 ? std::numeric_limits<double>::quiet_NaN() : u(rng) * std::ldexp(1.0, static_cast<int>(r % 9) - 2);
          break;
        case 7:
          v = k == 5 ? -std::numeric_limits<double>::infinity() : u(rng) * std::ldexp(1.0, static_cast<int>(r % 11) - 8);
          break;
      }
      x.data.push_back(bf16 ? bf16_round(v) : static_cast<float>(v));
    }
  }
  return x;
}

// NVFP4: the largest finite |x|, given to every recipe as the per-tensor amax.
std::optional<float> global_amax_of(const Tensor& x, Format f) {
  if (f != Format::nvfp4) return std::nullopt;
  float g = 0.0f;
  for (float v : x.data)
    if (std::isfinite(v)) g = std::max(g, std::fabs(v));
  return g;
}

QuantOptions options_for(const Recipe& r, const Tensor& x) {
  QuantOptions o;
  o.recipe = std::string(r.id);
  o.tail = TailPolicy::pad;
  o.global_amax = global_amax_of(x, r.format);
  return o;
}

// A kernel that implements `r` exactly: its codes, scales and values.
KernelOutput kernel_of(const Tensor& x, const Recipe& r, bool with_values, PackedTensor* packed = nullptr) {
  const PackedTensor p = quantize(x, options_for(r, x));
  KernelOutput k;
  k.codes = p.codes;
  k.scales = p.scales;
  if (with_values) k.values = dequantize(p).data;
  if (packed) *packed = p;
  return k;
}

analysis::IdentifyOptions id_options(Format f, const Tensor& x) {
  analysis::IdentifyOptions o;
  o.format = f;
  o.global_amax = global_amax_of(x, f);
  return o;
}

// Position of a candidate in the documented tie-break order: recipe table,
// then own rounding first, then own nibble order, then own scale bit order.
std::tuple<size_t, int, int, int> tie_break_key(const analysis::Candidate& c) {
  size_t table = 0;
  for (const Recipe& r : all_recipes()) {
    if (&r == c.recipe) break;
    ++table;
  }
  const auto rank = [](auto own, auto v) { return v == own ? -1 : static_cast<int>(v); };
  return {table, rank(c.recipe->element_rounding, c.rounding), rank(c.recipe->nibble_order, c.nibble_order),
          rank(c.recipe->scale_bit_order, c.scale_bit_order)};
}

bool agree_equally(const diagnose::Agreement& a, const diagnose::Agreement& b) {
  return a.blocks_equal == b.blocks_equal && a.codes_equal + a.values_equal == b.codes_equal + b.values_equal &&
         a.scales_equal == b.scales_equal;
}

// Candidates that agree equally keep the documented order.
void expect_tie_break_order(const IdentifyResult& r) {
  for (size_t i = 1; i < r.ranked.size(); ++i) {
    const auto& a = r.ranked[i - 1];
    const auto& b = r.ranked[i];
    if (agree_equally(a.diagnosis.agreement, b.diagnosis.agreement)) {
      EXPECT_LT(tie_break_key(a), tie_break_key(b)) << a.label() << " before " << b.label();
    }
  }
}

class PerFormat : public ::testing::TestWithParam<Format> {};
INSTANTIATE_TEST_SUITE_P(Formats, PerFormat, ::testing::Values(Format::hif4, Format::mxfp4, Format::nvfp4),
                         [](const auto& info) { return std::string(format_name(info.param)); });

// Recipes that cannot be told apart on the inputs here: nvfp4.modelopt_fq
// (fake-quant only, ModelOpt's Triton path) reproduces nvfp4.modelopt's values
// on every block with a finite amax, and it has no codes or scales to compare.
// NVFP4 recipes that differ only in device semantics or in the
// compressed-tensors release (docs/formats.md "Device semantics") agree on
// every input that avoids those few roundings and guards.
bool values_twins(std::string_view a, std::string_view b) {
  if ((a == "nvfp4.modelopt" && b == "nvfp4.modelopt_fq") || (a == "nvfp4.modelopt_fq" && b == "nvfp4.modelopt"))
    return true;
  const Recipe* ra = find_recipe(a);
  const Recipe* rb = find_recipe(b);
  if (!ra || !rb || ra->format != Format::nvfp4 || rb->format != Format::nvfp4 || ra == rb) return false;
  const NvParams &pa = ra->nv, &pb = rb->nv;
  return pa.rule == pb.rule && pa.decode == pb.decode && pa.tile_2d == pb.tile_2d &&
         pa.ct_bf16_quotient == pb.ct_bf16_quotient && ra->fake_quant_only == rb->fake_quant_only;
}

// Every recipe fed its own output is the one exact match, ranked first.
TEST_P(PerFormat, EveryRecipeIdentifiesItself) {
  const Format f = GetParam();
  const Tensor x = discriminating_input(f);
  for (const Recipe& r : all_recipes()) {
    if (r.format != f) continue;
    SCOPED_TRACE(r.id);
    KernelOutput k;
    if (r.fake_quant_only) {
      k.values = fake_quant(x, options_for(r, x)).data;
    } else {
      k = kernel_of(x, r, true);
    }
    const IdentifyResult res = analysis::identify(x, k, id_options(f, x));
    ASSERT_FALSE(res.ranked.empty());
    EXPECT_TRUE(res.exact());
    // A values-only twin ranks after the packed recipe (table order and fewer parts compared).
    const std::string first = res.ranked[0].label();
    if (values_twins(first, r.id)) {
      bool found = false;
      for (const analysis::Candidate& c : res.ranked) found |= c.label() == r.id && c.diagnosis.identical();
      EXPECT_TRUE(found);
    } else {
      EXPECT_EQ(first, r.id);
    }
    // The input discriminates: no other candidate is exact.
    for (const analysis::Candidate& c : res.ranked) {
      if (c.label() == r.id || !c.diagnosis.identical()) continue;
      EXPECT_TRUE(values_twins(c.label(), r.id)) << c.label() << " coincides with " << r.id;
    }
    expect_tie_break_order(res);
    const std::string text = analysis::identify_text(res);
    EXPECT_NE(text.find(fmt::format("exact match: {} (every block identical)", first)), std::string::npos) << text;
  }
}

// Codes only, scales only and values only each name the recipe too.
TEST_P(PerFormat, DefaultRecipeFromEachPartAlone) {
  const Format f = GetParam();
  const Tensor x = discriminating_input(f);
  const Recipe& r = default_recipe(f);
  const KernelOutput full = kernel_of(x, r, true);
  for (int part = 0; part < 3; ++part) {
    KernelOutput k;
    if (part == 0) k.codes = full.codes;
    if (part == 1) k.scales = full.scales;
    if (part == 2) k.values = full.values;
    const IdentifyResult res = analysis::identify(x, k, id_options(f, x));
    ASSERT_TRUE(res.exact()) << part;
    EXPECT_EQ(res.ranked[0].recipe, &r) << part;
    expect_tie_break_order(res);
  }
}

// A row-0 block holding ordinary random values: where the deviations go.
constexpr int64_t kPlantRow = 8;  // kind 0

int64_t code_byte(const PackedTensor& p, int64_t row, int64_t k) { return row * p.padded_len / 2 + k / 2; }

// One planted deviation of each class in every recipe's own output: the
// recipe stays the closest candidate and the diagnosis names the class.
TEST_P(PerFormat, PlantedDeviationsAreNamedWithTheirRecipe) {
  const Format f = GetParam();
  const Tensor x = discriminating_input(f);
  const int sb = scale_bytes_per_block(f);
  for (const Recipe& r : all_recipes()) {
    if (r.format != f || r.fake_quant_only) continue;
    SCOPED_TRACE(r.id);
    PackedTensor p;
    const KernelOutput own = kernel_of(x, r, false, &p);
    const int64_t blocks = p.blocks_per_row();

    struct Plant {
      const char* name;
      Kind kind;
      KernelOutput k;
    };
    std::vector<Plant> plants;
    {  // the scale of one ordinary block one code step up (HiF4: the E6M2 byte)
      KernelOutput k = own;
      k.scales[(kPlantRow * blocks + 1) * sb] += 1;
      plants.push_back({"scale one step up", Kind::scale_up, k});
    }
    {  // one padding lane's code
      KernelOutput k = own;
      const int64_t lane = p.padded_len - 1;
      if (r.nibble_order == NibbleOrder::split_half) {
        k.codes[kPlantRow * p.padded_len / 2 + p.padded_len / 2 - 1] ^= 0x10;  // last element of the last block
      } else {
        k.codes[code_byte(p, kPlantRow, lane)] ^= (lane & 1) ? 0x10 : 0x01;
      }
      plants.push_back({"padding lane", Kind::tail, k});
    }
    {  // the sign of one zero code in an ordinary block
      KernelOutput k = own;
      const Tensor v = dequantize(p);
      bool planted = false;
      for (int64_t j = 0; j < p.axis_len && !planted; ++j) {
        const int64_t b = j / p.block_size, e = j % p.block_size;
        const NibbleSlot s = nibble_slot(p.nibble_order, p.block_size, b, static_cast<int>(e));
        uint8_t& byte = k.codes[kPlantRow * p.padded_len / 2 + s.byte];
        const int code = (byte >> (s.high ? 4 : 0)) & 0xF;
        if ((code & 7) != 0) continue;
        byte ^= static_cast<uint8_t>(0x8 << (s.high ? 4 : 0));
        planted = true;
      }
      if (planted) plants.push_back({"sign of a zero code", Kind::negative_zero, k});
    }
    {  // one code in the block holding row 6's NaN lane (k = 70)
      KernelOutput k = own;
      const int64_t b = 70 / p.block_size;
      k.codes[6 * p.padded_len / 2 + b * p.block_size / 2] ^= 0x01;
      plants.push_back({"code in a NaN block", Kind::nan_block, k});
    }
    if (f == Format::hif4) {  // every scale word in the other L2/L3 bit order
      KernelOutput k = own;
      for (size_t i = 0; i < k.scales.size(); ++i)
        if (i % 4) k.scales[i] = static_cast<uint8_t>(
                       ((k.scales[i] * 0x0202020202ULL & 0x010884422010ULL) % 1023) & 0xFF);  // bit reverse
      plants.push_back({"scale bit order", Kind::scale_bit_order, k});
    }

    for (const Plant& plant : plants) {
      SCOPED_TRACE(plant.name);
      const IdentifyResult res = analysis::identify(x, plant.k, id_options(f, x));
      ASSERT_FALSE(res.ranked.empty());
      const analysis::Candidate& best = res.ranked[0];
      if (plant.kind == Kind::scale_bit_order) {
        // Read in the other order, the words are the recipe's own: an exact match.
        EXPECT_TRUE(res.exact());
        EXPECT_EQ(best.recipe, &r);
        EXPECT_NE(best.scale_bit_order, r.scale_bit_order);
        continue;
      }
      EXPECT_FALSE(res.exact());
      EXPECT_TRUE(best.label() == r.id || values_twins(best.label(), r.id)) << best.label();
      const diagnose::Diagnosis& d = best.diagnosis;
      for (int i = 0; i < diagnose::kKinds; ++i)
        EXPECT_EQ(d.count(static_cast<Kind>(i)), static_cast<Kind>(i) == plant.kind ? 1 : 0)
            << diagnose::to_string(static_cast<Kind>(i)) << ": " << d.summary();
      const std::string text = analysis::identify_text(res);
      EXPECT_NE(text.find(fmt::format("no exact match; closest: {}:", best.label())), std::string::npos) << text;
    }
  }
}

// Nibble order: a kernel writing element 2i in the high nibble is the recipe
// read high_first, and says so.
TEST(Identify, SwappedNibblesAreTheOtherNibbleOrder) {
  const Tensor x = discriminating_input(Format::mxfp4);
  const Recipe& r = *find_recipe("mxfp4.rceil");
  KernelOutput k = kernel_of(x, r, false);
  for (uint8_t& b : k.codes) b = static_cast<uint8_t>((b >> 4) | (b << 4));
  const IdentifyResult res = analysis::identify(x, k, id_options(Format::mxfp4, x));
  ASSERT_TRUE(res.exact());
  EXPECT_EQ(res.ranked[0].label(), "mxfp4.rceil --nibble-order high_first");
}

// A kernel that rounds ties away from zero: an MXFP4 recipe that allows the
// override is named with it; NVFP4 (no such override) is named with the class.
TEST(Identify, TiesAwayFromZero) {
  const Tensor xm = discriminating_input(Format::mxfp4);
  QuantOptions o = options_for(*find_recipe("mxfp4.rceil"), xm);
  o.rounding = Rounding::rha;
  const PackedTensor pm = quantize(xm, o);
  const IdentifyResult rm = analysis::identify(xm, KernelOutput{pm.codes, pm.scales, {}}, id_options(Format::mxfp4, xm));
  ASSERT_TRUE(rm.exact());
  EXPECT_EQ(rm.ranked[0].label(), "mxfp4.rceil --round rha");

  // NVFP4 with S_enc = 1 (G = 2688): ties of x/X are exact ties of the
  // element grid; plant half-away rounding on them by hand.
  Tensor x;
  x.shape = {8, 16};
  const float lanes[16] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                           -0.25f, -1.25f, -2.5f, -5.0f, 0.3f, 1.1f, -4.4f, 0.0f};
  for (int r = 0; r < 8; ++r)
    for (float v : lanes) x.data.push_back(v * static_cast<float>(1 << r));
  const Recipe& te = default_recipe(Format::nvfp4);
  QuantOptions q = options_for(te, x);
  q.global_amax = 2688.0f;
  PackedTensor p = quantize(x, q);
  int64_t planted = 0;
  for (int r = 0; r < 8; ++r) {
    const double X = ue4m3_decode(p.scales[r]);
    for (int j = 0; j < 16; ++j) {
      const double y = x.data[r * 16 + j] / X, a = std::fabs(y);
      // E2M1 midpoints and the magnitude code above each.
      static constexpr double kMid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
      for (int m = 0; m < 7; ++m) {
        if (a != kMid[m]) continue;
        uint8_t& byte = p.codes[r * 8 + j / 2];
        const int shift = (j & 1) ? 4 : 0;
        const int want = (m + 1) | (y < 0 ? 8 : 0);
        if (((byte >> shift) & 0xF) != want) ++planted;
        byte = static_cast<uint8_t>((byte & ~(0xF << shift)) | (want << shift));
      }
    }
  }
  ASSERT_GT(planted, 0);
  analysis::IdentifyOptions io = id_options(Format::nvfp4, x);
  io.global_amax = 2688.0f;
  const IdentifyResult rn = analysis::identify(x, KernelOutput{p.codes, p.scales, {}}, io);
  ASSERT_FALSE(rn.exact());
  EXPECT_EQ(rn.ranked[0].recipe, &te);
  EXPECT_EQ(rn.ranked[0].diagnosis.summary(),
            fmt::format("ties rounded away from zero in {} of {} differing elements", planted, planted));
}

// Tie-break: on an input that does not tell recipes apart (all zeros), every
// candidate is exact and the format's default recipe comes first.
TEST(Identify, TieBreakOnAnInputThatTellsNothing) {
  Tensor x;
  x.shape = {2, 32};
  x.data.assign(64, 0.0f);
  const Recipe& ocp = default_recipe(Format::mxfp4);
  const KernelOutput k = kernel_of(x, ocp, false);
  const IdentifyResult res = analysis::identify(x, k, id_options(Format::mxfp4, x));
  ASSERT_TRUE(res.exact());
  EXPECT_EQ(res.ranked[0].label(), "mxfp4.ocp");
  expect_tie_break_order(res);
  EXPECT_NE(analysis::identify_text(res).find("equally exact on this input"), std::string::npos);
}

TEST(Identify, OutputsThatDoNotFitAreInputErrors) {
  const Tensor x = discriminating_input(Format::mxfp4);
  KernelOutput k = kernel_of(x, default_recipe(Format::mxfp4), false);
  k.codes.pop_back();
  EXPECT_THROW(analysis::identify(x, k, id_options(Format::mxfp4, x)), InputError);
  EXPECT_THROW(analysis::identify(x, KernelOutput{}, id_options(Format::mxfp4, x)), InputError);
  KernelOutput v;
  v.values.assign(7, 0.0f);
  EXPECT_THROW(analysis::identify(x, v, id_options(Format::mxfp4, x)), InputError);
}

// ---- command line -------------------------------------------------------------

using testing::run_cli;
using testing::TempDir;

TEST(IdentifyCli, ExactMatchFromCodesAndScalesFiles) {
  TempDir dir;
  const Tensor x = discriminating_input(Format::nvfp4);
  io::write_npy(dir / "x.npy", io::from_f32(x.shape, x.data));
  PackedTensor p;
  kernel_of(x, *find_recipe("nvfp4.torchao"), false, &p);
  io::write_npy(dir / "codes.npy", io::from_u8(p.stored_shape(p.padded_len / 2), p.codes));
  io::write_npy(dir / "scales.npy", io::from_u8(p.stored_shape(p.blocks_per_row()), p.scales));
  const auto r = run_cli(fmt::format(
      "identify --input {} --codes {} --scales {} --format nvfp4 --global-amax {} --json {}", (dir / "x.npy").string(),
      (dir / "codes.npy").string(), (dir / "scales.npy").string(), *global_amax_of(x, Format::nvfp4),
      (dir / "id.json").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("exact match: nvfp4.torchao (every block identical)"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "id.json"));
}

TEST(IdentifyCli, NoMatchNamesTheClosestAndTheClass) {
  TempDir dir;
  const Tensor x = discriminating_input(Format::mxfp4);
  io::write_npy(dir / "x.npy", io::from_f32(x.shape, x.data));
  PackedTensor p;
  kernel_of(x, *find_recipe("mxfp4.ocp"), false, &p);
  p.scales[kPlantRow * p.blocks_per_row()] += 1;
  write_packed(dir / "k.safetensors", p);
  const auto r = run_cli(fmt::format("identify --input {} --packed {} --format mxfp4", (dir / "x.npy").string(),
                                     (dir / "k.safetensors").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no exact match; closest: mxfp4.ocp:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("block scale larger than expected by one code step in 1 of 1 differing blocks"),
            std::string::npos)
      << r.output;
}

TEST(IdentifyCli, BadInputsExitTwoNamingTheFile) {
  TempDir dir;
  const Tensor x = discriminating_input(Format::mxfp4);
  io::write_npy(dir / "x.npy", io::from_f32(x.shape, x.data));
  std::vector<float> wrong(10, 0.0f);
  io::write_npy(dir / "y.npy", io::from_f32({10}, wrong));
  std::vector<uint8_t> bytes(10, 0);
  io::write_npy(dir / "c.npy", io::from_u8({10}, bytes));
  const std::string in = (dir / "x.npy").string();
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {fmt::format("--input {} --output {} --format mxfp4", in, (dir / "y.npy").string()), "y.npy"},
      {fmt::format("--input {} --codes {} --format mxfp4", in, (dir / "c.npy").string()), "c.npy: codes must be uint8"},
      {fmt::format("--input {} --scales {} --format mxfp4", in, (dir / "y.npy").string()), "y.npy: mxfp4 scales"},
      {fmt::format("--input {} --format mxfp4", in), "no kernel output given"},
      {fmt::format("--input {} --output {} --format fp8", in, in), "--format 'fp8' is unknown"},
      {fmt::format("--input {} --output {} --format mxfp4 --axis 5", in, in), "axis"},
      {fmt::format("--input {} --output {} --format mxfp4 --global-amax 2", in, in), "NVFP4 only"},
      {fmt::format("--input {} --output {} --format mxfp4", (dir / "missing.npy").string(), in), "--input: "},
      {fmt::format("--input {} --output {} --format mxfp4", (dir / "x.txt").string(), in), "--input: "},
  };
  for (const Case& c : cases) {
    const auto r = run_cli("identify " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace fp4emu
