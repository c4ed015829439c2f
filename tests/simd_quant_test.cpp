// The fast path (src/quant/simd) against the scalar reference, bit for bit,
// on every Highway target compiled in and supported by this CPU (the scalar
// fallback included): fake-quant values, packed codes, scales and per-tensor
// fields, and dequantized values. The reference is the oracle; the inputs are
// chosen to sit on the places a kernel can get wrong: every bf16 value at
// every block position, element ties and their neighbours, amax at every
// scale-code boundary, saturation, zero/NaN/Inf blocks, -0, subnormals,
// ragged tails, other axes, 40 binades of random values. Stochastic rounding
// runs the same inputs with each source of random bits (given bytes, given
// words in both byte maps, Philox in both mappings).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/reference.hpp"
#include "src/quant/simd.hpp"
#include "src/quant/simd/kernels.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::random_wide;

// Where stochastic rounding's random bits come from (stochastic.hpp).
enum class Bits { none, bytes, words_te, words_ptx, philox_te, philox_te_ptx, philox_index };
const char* bits_name(Bits b) {
  switch (b) {
    case Bits::none: return "";
    case Bits::bytes: return "_bytes";
    case Bits::words_te: return "_words_te";
    case Bits::words_ptx: return "_words_ptx";
    case Bits::philox_te: return "_philox_te";
    case Bits::philox_te_ptx: return "_philox_te_ptx";
    case Bits::philox_index: return "_philox_index";
  }
  return "";
}
constexpr Bits kAllBits[] = {Bits::bytes, Bits::words_te, Bits::words_ptx, Bits::philox_te, Bits::philox_te_ptx,
                             Bits::philox_index};
constexpr Rounding kElementRoundings[] = {Rounding::rne, Rounding::rha, Rounding::rtz, Rounding::ties_to_zero,
                                          Rounding::stochastic};

// nvfp4.te_4over6 choosing by the squared error (no registered recipe does):
// a handle with the registered id, so that its packed tensors decode.
const Recipe& te_4over6_mse() {
  static const Recipe r = [] {
    Recipe m = recipe("nvfp4.te_4over6");
    m.nv.select_metric = NvSelectMetric::mse;
    return m;
  }();
  return r;
}

struct Config {
  const Recipe* recipe;
  Rounding rounding;
  Bits bits = Bits::none;
  std::string name() const {
    std::string n = std::string(recipe->id) + (recipe == &te_4over6_mse() ? "_mse" : "") + "_" +
                    std::string(to_string(rounding)) + bits_name(bits);
    std::replace(n.begin(), n.end(), '.', '_');
    return n;
  }
};

void PrintTo(const Config& c, std::ostream* os) { *os << c.name(); }

// Every (recipe, element rounding) the fast path covers, read from the
// dispatcher; stochastic rounding once per source of random bits. Also
// te_4over6_mse, the other branch of the 4over6 kernel.
std::vector<Config> fast_configs() {
  std::vector<Config> configs;
  std::vector<const Recipe*> recipes;
  for (const Recipe& r : all_recipes()) recipes.push_back(&r);
  recipes.push_back(&te_4over6_mse());
  for (const Recipe* rp : recipes) {
    const Recipe& r = *rp;
    for (Rounding rounding : kElementRoundings) {
      if (!(r.allowed_roundings & rounding_bit(rounding))) continue;
      QuantOptions q;
      q.recipe = r;
      q.rounding = rounding;
      q.tail = TailPolicy::pad;
      if (rounding == Rounding::stochastic) q.stochastic.seed = 1;
      if (!simd::fast_path_gap(resolve_options(q, {block_size(r.format)}), simd::Operation::fake_quant).empty())
        continue;
      if (rounding != Rounding::stochastic) {
        configs.push_back({&r, rounding});
        continue;
      }
      for (Bits b : kAllBits) configs.push_back({&r, rounding, b});
    }
  }
  return configs;
}

using simd::ForcedTarget;

uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
float bf16_round(float v) { return std::isnan(v) ? v : bf16_rne(v); }

// The options of a config; given random bits are attached per tensor (GivenBits).
QuantOptions options_for(const Config& c, int axis = -1) {
  QuantOptions o;
  o.recipe = *c.recipe;
  o.rounding = c.rounding;
  o.tail = TailPolicy::pad;
  o.axis = axis;
  if (c.recipe->bf16_input_only) o.input_dtype = InputDType::bf16;
  switch (c.bits) {
    case Bits::philox_te:
    case Bits::philox_te_ptx:
    case Bits::philox_index:
      o.stochastic.seed = 0x9E3779B97F4A7C15ull;
      o.stochastic.offset = 3;
      o.stochastic.rng = c.bits == Bits::philox_index ? SrRng::philox_index : SrRng::philox_te;
      o.stochastic.map = c.bits == Bits::philox_te_ptx ? RbitsMap::ptx : RbitsMap::te;
      break;
    case Bits::words_ptx: o.stochastic.map = RbitsMap::ptx; break;
    default: break;
  }
  return o;
}

// Given random bits (uniform bytes, fixed seed) for a tensor of `shape`,
// attached to the options while this object lives.
class GivenBits {
 public:
  GivenBits(Bits b, const std::vector<int64_t>& shape, QuantOptions& o) {
    if (b != Bits::bytes && b != Bits::words_te && b != Bits::words_ptx) return;
    const int rank = static_cast<int>(shape.size());
    const int axis = o.axis < 0 ? o.axis + rank : o.axis;
    std::vector<int64_t> s = shape;
    if (b != Bits::bytes) s[axis] = (s[axis] + 3) / 4;
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    std::mt19937_64 rng(static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(axis));
    if (b == Bits::bytes) {
      bytes_.resize(n);
      for (uint8_t& v : bytes_) v = static_cast<uint8_t>(rng());
      o.stochastic.bytes = bytes_;
    } else {
      words_.resize(n);
      for (uint32_t& v : words_) v = static_cast<uint32_t>(rng());
      o.stochastic.words = words_;
    }
  }
  GivenBits(const GivenBits&) = delete;
  GivenBits& operator=(const GivenBits&) = delete;

 private:
  std::vector<uint8_t> bytes_;
  std::vector<uint32_t> words_;
};

// First difference of two float arrays, bit for bit (NaN payloads and signs included).
std::string first_mismatch(const Tensor& x, const std::vector<float>& expected, const std::vector<float>& actual) {
  if (expected.size() != actual.size()) return "sizes differ";
  int count = 0;
  size_t first = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (bits_of(expected[i]) != bits_of(actual[i])) {
      if (count++ == 0) first = i;
    }
  }
  if (count == 0) return {};
  char buf[256];
  std::snprintf(buf, sizeof buf, "%d mismatches; first at %zu: input %a (0x%08x), reference %a (0x%08x), fast %a (0x%08x)",
                count, first, x.data[first], bits_of(x.data[first]), expected[first], bits_of(expected[first]),
                actual[first], bits_of(actual[first]));
  return buf;
}

std::string packed_mismatch(const PackedTensor& e, const PackedTensor& a) {
  if (e.codes.size() != a.codes.size() || e.scales.size() != a.scales.size()) return "packed sizes differ";
  for (size_t i = 0; i < e.codes.size(); ++i)
    if (e.codes[i] != a.codes[i])
      return "code byte " + std::to_string(i) + ": reference " + std::to_string(e.codes[i]) + ", fast " +
             std::to_string(a.codes[i]);
  for (size_t i = 0; i < e.scales.size(); ++i)
    if (e.scales[i] != a.scales[i])
      return "scale byte " + std::to_string(i) + " (block " + std::to_string(i / scale_bytes_per_block(e.format)) +
             "): reference " + std::to_string(e.scales[i]) + ", fast " + std::to_string(a.scales[i]);
  if (bits_of(e.global_amax) != bits_of(a.global_amax) ||
      bits_of(e.global_encode_scale) != bits_of(a.global_encode_scale) ||
      bits_of(e.global_decode_scale) != bits_of(a.global_decode_scale))
    return "per-tensor scale differs";
  return {};
}

// fake_quant and quantize (and dequantize of the result) of `x` through the
// reference, then through the fast path on every target, compared bit for bit.
void expect_fast_equals_reference(const Tensor& x, QuantOptions o, const std::string& what, bool packed = true,
                                  Bits bits = Bits::none) {
  const GivenBits given(bits, x.shape, o);
  o.impl = Impl::reference;
  const Tensor ref = fake_quant(x, o);
  const bool has_packed = packed && !o.recipe.get().fake_quant_only;
  PackedTensor ref_packed;
  Tensor ref_decoded;
  if (has_packed) {
    ref_packed = quantize(x, o);
    ref_decoded = dequantize(ref_packed, {Impl::reference, 0});
  }
  const std::vector<int64_t> targets = simd::compiled_targets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    ForcedTarget forced(target);
    const std::string where = what + " on " + simd::target_name(target);
    // The dispatch really runs this target (else the loop would test one target many times).
    ASSERT_EQ(simd::dispatched_target(), simd::target_name(target)) << where;
    QuantOptions f = o;
    f.impl = Impl::fast;
    f.threads = 2;
    const Tensor fast = fake_quant(x, f);
    ASSERT_EQ(fast.shape, ref.shape) << where;
    const std::string m = first_mismatch(x, ref.data, fast.data);
    ASSERT_TRUE(m.empty()) << "fake_quant " << where << ": " << m;
    if (!has_packed) continue;
    const PackedTensor fast_packed = quantize(x, f);
    const std::string pm = packed_mismatch(ref_packed, fast_packed);
    ASSERT_TRUE(pm.empty()) << "quantize " << where << ": " << pm;
    const Tensor fast_decoded = dequantize(ref_packed, {Impl::fast, 2});
    const std::string dm = first_mismatch(x, ref_decoded.data, fast_decoded.data);
    ASSERT_TRUE(dm.empty()) << "dequantize " << where << ": " << dm;
  }
}

Tensor make_tensor(std::vector<int64_t> shape, std::vector<float> data, bool bf16_only) {
  if (bf16_only)
    for (float& v : data) v = bf16_round(v);
  Tensor t;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

// Blocks (each `block` values) as a [blocks, block] tensor.
Tensor blocks_tensor(const std::vector<std::vector<float>>& blocks, int block, bool bf16_only) {
  std::vector<float> data;
  for (const auto& b : blocks) {
    std::vector<float> padded = b;
    padded.resize(block, 0.0f);
    data.insert(data.end(), padded.begin(), padded.end());
  }
  return make_tensor({static_cast<int64_t>(blocks.size()), block}, std::move(data), bf16_only);
}

// v and its `k` neighbours on each side (fp32 steps, or bf16 steps for bf16-only recipes).
void push_neighbours(std::vector<float>& out, float v, int k, bool bf16_only) {
  if (!std::isfinite(v)) return;
  const float a = std::fabs(bf16_only ? bf16_round(v) : v);
  const int32_t step = bf16_only ? 0x10000 : 1;
  const int32_t bits = static_cast<int32_t>(bits_of(a));
  for (int i = -k; i <= k; ++i) {
    const int64_t b = static_cast<int64_t>(bits) + static_cast<int64_t>(i) * step;
    if (b < 0 || b > 0x7F7FFFFF) continue;
    out.push_back(from_bits(static_cast<uint32_t>(b)));
  }
}

// The scale-code boundaries of each format: block amax values at and next to
// every point where the scale code changes (and the products of the recipes'
// scale steps that round there).
std::vector<float> amax_boundaries(const Config& c) {
  const bool bf16 = c.recipe->bf16_input_only;
  std::vector<float> a;
  switch (c.recipe->format) {
    case Format::mxfp4:
      for (int e = -149; e <= 127; ++e) {
        const float p = std::ldexp(1.0f, e);
        push_neighbours(a, p, 2, bf16);                  // ocp/ceil: powers of two
        push_neighbours(a, 1.75f * p, 2, bf16);          // even: 1.75 * 2^e rounds up
        push_neighbours(a, p / 0x1.555556p-3f, 3, bf16);  // rceil: fp32(amax/6) at a power of two
        // log2f_floor (microxcaling, ggml): log2f rounds up to e from J ulps
        // below 2^e, J up to 88 (mxfp4.cpp kLog2fRoundUpJmax): each Jmax and Jmax + 1.
        if (!bf16 && e > -126 && c.recipe->mx.scale_rule == MxScaleRule::log2f_floor)
          for (int j : {3, 5, 6, 11, 12, 22, 23, 44, 45, 88, 89})
            a.push_back(std::bit_cast<float>(std::bit_cast<uint32_t>(p) - static_cast<uint32_t>(j)));
      }
      break;
    case Format::nvfp4:
      // p = a * fp32(S_enc/6) at every UE4M3 midpoint, with S_enc = 1 (G = 2688, see below).
      for (uint32_t code = 0; code < 0x7E; ++code) {
        const float mid = static_cast<float>((ue4m3_decode(code) + static_cast<double>(ue4m3_decode(code + 1))) / 2);
        push_neighbours(a, mid / (1.0f / 6.0f), 3, bf16);
        push_neighbours(a, ue4m3_decode(code + 1) / (1.0f / 6.0f), 1, bf16);
      }
      push_neighbours(a, 464.0f * 6.0f, 3, bf16);
      break;
    case Format::hif4:
      if (c.recipe->hif4.arithmetic == Hif4Arithmetic::pow2_v12) {
        // V12: floor(log2(m4 + 2^-45)) changes at powers of two.
        for (int e = -149; e <= 127; ++e) push_neighbours(a, std::ldexp(1.0f, e), 2, bf16);
        break;
      }
      // s0 = bf16(M * c7) at every E6M2 midpoint, and at the bf16 rounding edges around it.
      for (uint32_t code = 0; code < 0xFE; ++code) {
        const double mid = (e6m2_decode(code) + static_cast<double>(e6m2_decode(code + 1))) / 2;
        const double half_bf16_ulp = std::ldexp(1.0, std::ilogb(mid) - 8);
        for (double target : {mid, mid - half_bf16_ulp, mid + half_bf16_ulp, static_cast<double>(e6m2_decode(code))})
          push_neighbours(a, static_cast<float>(target / 0.142578125), 2, bf16);
      }
      break;
  }
  return a;
}

// Element values at and next to the rounding ties of a block whose amax is `amax`.
std::vector<float> tie_values(const Config& c, float amax) {
  const bool bf16 = c.recipe->bf16_input_only;
  std::vector<float> v;
  switch (c.recipe->format) {
    case Format::mxfp4:
    case Format::nvfp4:
      for (float t : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f}) {
        push_neighbours(v, amax * t / 4.0f, 1, bf16);  // ties when X = amax / 4
        push_neighbours(v, amax * t / 6.0f, 1, bf16);  // ties when X = amax / 6
      }
      break;
    case Format::hif4: {
      if (c.recipe->hif4.arithmetic == Hif4Arithmetic::pow2_v12) {
        // t = a * 2^-(B+b+c): ties at (2q + 1)/8 * 2^(B+b+c), B = clamp(floor(log2 amax) - 2, -46, 16).
        const int b_exp = std::clamp(std::ilogb(amax + 0x1p-45f) - 2, -46, 16);
        for (int q = 0; q < 8; ++q)
          for (int bc = 0; bc <= 2; ++bc) push_neighbours(v, std::ldexp((2 * q + 1) / 8.0f, b_exp + bc), 1, bf16);
        break;
      }
      // t = a * 2^-(b+c) * r with r = bf16(1/S): ties at 4t + 1/2 = q + 1/2 ... on the q/4 grid.
      float s0 = bf16_rne(static_cast<double>(amax) * 0.142578125);
      s0 = std::clamp(s0, 0x1p-48f, 49152.0f);
      const float r = e6m2_reciprocal_bf16(e6m2_encode(s0, Rounding::rne, Overflow::saturate));
      for (int q = 0; q < 8; ++q)
        for (int bc = 0; bc <= 2; ++bc) {
          push_neighbours(v, std::ldexp((2 * q + 1) / 8.0f / r, bc), 1, bf16);
          push_neighbours(v, std::ldexp((4 * q + 1) / 16.0f / r, bc), 1, bf16);  // 4t + 1/2 rounding edge
        }
      for (float level : {2.0f, 4.0f, 8.0f}) push_neighbours(v, level / r, 1, bf16);  // L2/L3 thresholds
      break;
    }
  }
  return v;
}

class SimdVsReference : public ::testing::TestWithParam<Config> {};

TEST(SimdCoverage, EveryRecipeHasAFastPath) {
  const std::vector<Config> configs = fast_configs();
  std::vector<const Recipe*> required;
  for (const Recipe& r : all_recipes()) required.push_back(&r);
  for (const Recipe* r : required) {
    ASSERT_NE(r, nullptr);
    // Every element rounding the recipe allows, stochastic included.
    for (Rounding rounding : kElementRoundings) {
      if (!(r->allowed_roundings & rounding_bit(rounding))) continue;
      const bool found = std::any_of(configs.begin(), configs.end(), [&](const Config& c) {
        return c.recipe == r && c.rounding == rounding;
      });
      EXPECT_TRUE(found) << r->id << " with rounding " << to_string(rounding) << " has no fast path";
    }
    // ... and a fast decoder.
    if (r->fake_quant_only) continue;
    PackedTensor p;
    p.recipe_id = std::string(r->id);
    EXPECT_TRUE(simd::fast_dequantize_gap(p).empty()) << r->id << ": " << simd::fast_dequantize_gap(p);
  }
  // The scalar fallback is among the compiled targets, and more than one target
  // runs here (the checked builds of tools/test.sh compile the baseline only).
#ifndef HWY_COMPILE_ONLY_STATIC
  const std::vector<int64_t> targets = simd::compiled_targets();
  EXPECT_GE(targets.size(), 2u);
  EXPECT_TRUE(std::any_of(targets.begin(), targets.end(), [](int64_t t) {
    const std::string n = simd::target_name(t);
    return n == "SCALAR" || n == "EMU128";
  }));
#endif
}

// Every bf16 bit pattern at every position of a block: block (base, r) holds
// the patterns base*B + ((j + r) mod B), so neighbouring patterns share a
// block (meaningful scales) and each visits all B positions. A second layout
// scatters the patterns (multiplication by an odd constant mod 2^16) so that
// blocks mix magnitudes, NaN and Inf.
TEST_P(SimdVsReference, EveryBf16ValueAtEveryBlockPosition) {
  const Config c = GetParam();
  const int block = block_size(c.recipe->format);
  // Rotations: all B for each recipe's own rounding, two for the overrides (time).
  const int rotation_step = c.rounding == c.recipe->element_rounding ? 1 : block / 2;
  std::vector<float> data;
  for (int r = 0; r < block; r += rotation_step)
    for (uint32_t base = 0; base < 65536u / block; ++base)
      for (int j = 0; j < block; ++j) data.push_back(bf16_decode(static_cast<uint16_t>(base * block + (j + r) % block)));
  for (uint32_t i = 0; i < 65536u; ++i) data.push_back(bf16_decode(static_cast<uint16_t>(i * 40503u)));
  const int64_t rows = static_cast<int64_t>(data.size()) / block;
  expect_fast_equals_reference(make_tensor({rows, block}, std::move(data), false), options_for(c), "every bf16", true,
                               c.bits);
}

TEST_P(SimdVsReference, AmaxAtEveryScaleBoundaryWithTiesAndNearTies) {
  const Config c = GetParam();
  const bool bf16 = c.recipe->bf16_input_only;
  const int block = block_size(c.recipe->format);
  std::mt19937_64 rng(7);
  std::vector<std::vector<float>> blocks;
  for (float amax : amax_boundaries(c)) {
    std::vector<float> ties = tie_values(c, amax);
    std::shuffle(ties.begin(), ties.end(), rng);
    std::vector<float> b;
    b.push_back(amax);
    for (float t : ties) {
      if (static_cast<int>(b.size()) == block) {
        blocks.push_back(b);
        b.assign(1, amax);  // the amax leads every block that carries its ties
      }
      if (!(t <= amax)) continue;
      b.push_back(rng() & 1 ? -t : t);
    }
    std::shuffle(b.begin(), b.end(), rng);  // amax at any position
    blocks.push_back(b);
  }
  QuantOptions o = options_for(c);
  if (c.recipe->format == Format::nvfp4) o.global_amax = 2688.0f;  // S_enc = 1: the boundaries above are exact
  expect_fast_equals_reference(blocks_tensor(blocks, block, bf16), o, "scale boundaries and ties", true, c.bits);
  if (c.recipe->format == Format::nvfp4) {
    // Other per-tensor scales: S_enc far from 1, near FLT_MAX (the smallest G
    // the library accepts, docs/spec/nvfp4.md §2.2) and 1 (G = 0).
    const float tiny_g = std::nextafter(2688.0f / std::numeric_limits<float>::max(), 1.0f);
    for (float g : {0.001f, 3.0e4f, tiny_g, 0.0f}) {
      o.global_amax = g;
      expect_fast_equals_reference(blocks_tensor(blocks, block, bf16), o, "global amax " + std::to_string(g), true,
                                   c.bits);
    }
  }
}

TEST_P(SimdVsReference, SpecialBlocks) {
  const Config c = GetParam();
  const bool bf16 = c.recipe->bf16_input_only;
  const int block = block_size(c.recipe->format);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937_64 rng(11);
  auto random_block = [&](int lo, int hi) {
    std::uniform_int_distribution<int> e(lo, hi);
    std::uniform_real_distribution<float> m(1.0f, 2.0f);
    std::vector<float> b(block);
    for (float& v : b) {
      // One draw per statement: argument order is the compiler's (test_util.hpp random_wide).
      const bool negative = rng() & 1;
      const int exponent = e(rng);
      v = std::ldexp(m(rng), exponent) * (negative ? -1.0f : 1.0f);
    }
    return b;
  };
  std::vector<std::vector<float>> blocks;
  blocks.push_back(std::vector<float>(block, 0.0f));   // all zero
  blocks.push_back(std::vector<float>(block, -0.0f));  // all -0
  for (float s : {nan, -nan, inf, -inf, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), 0x1p-126f, 1e30f, -0.0f}) {
    for (int j = 0; j < block; ++j) {  // the special value at every position of a normal block
      std::vector<float> b = random_block(-3, 3);
      b[j] = s;
      blocks.push_back(b);
      std::vector<float> z(block, -0.0f);  // ... and of a -0 block
      z[j] = s;
      blocks.push_back(z);
    }
    blocks.push_back(std::vector<float>(block, s));
  }
  // NaN and Inf together, and Inf with large finite values.
  std::vector<float> mixed = random_block(100, 127);
  mixed[1] = nan;
  mixed[block - 1] = -inf;
  blocks.push_back(mixed);
  mixed[1] = 2.0f;
  blocks.push_back(mixed);
  // Saturation: values far above the block scale cannot be produced by the
  // amax rule itself; huge dynamic range inside a block and blocks near FLT_MAX.
  for (int i = 0; i < 8; ++i) blocks.push_back(random_block(100, 127));
  for (int i = 0; i < 8; ++i) blocks.push_back(random_block(-149, -120));  // subnormals and tiny normals
  for (int i = 0; i < 8; ++i) blocks.push_back(random_block(-149, 127));   // every binade
  for (int i = 0; i < 8; ++i) {
    std::vector<float> b = random_block(-149, -127);  // subnormal-only (and a normal neighbour)
    if (i & 1) b[i] = 0x1p-126f;
    blocks.push_back(b);
  }
  // The largest bf16 value with the smallest bf16 subnormals of both signs:
  // their products with the block scale underflow to signed zeros (hif4.a6
  // takes the sign of a zero code from that product).
  std::vector<float> underflow(block, 0x1p-133f);
  for (int j = 0; j < block; j += 2) underflow[j] = -0x1p-133f;
  underflow[block / 2 + 1] = 0x1.fep127f;
  blocks.push_back(underflow);
  Tensor rows = blocks_tensor(blocks, block, bf16);
  if (bf16) {
    // Declared bf16 but holding other values (nonzero low 16 bits: only the
    // top or only the bottom one, at every position; a NaN payload there):
    // the reference defines these blocks too, and the fast path must match it.
    for (int j = 0; j < block; ++j) {
      std::vector<float> b = random_block(-3, 3);
      for (float& v : b) v = bf16_round(v);
      b[j] = from_bits(bits_of(b[j]) | (j % 2 ? 0x0001u : 0x8000u));
      rows.data.insert(rows.data.end(), b.begin(), b.end());
      ++rows.shape[0];
    }
    std::vector<float> payload(block, 1.0f);
    payload[5] = from_bits(0x7FC00001u);
    rows.data.insert(rows.data.end(), payload.begin(), payload.end());
    ++rows.shape[0];
  }
  expect_fast_equals_reference(rows, options_for(c), "special blocks", true, c.bits);
  // The same blocks as columns, quantized along axis 0: the driver's gathered
  // tile path, where a kernel must not read an input it has already overwritten.
  Tensor columns;
  const int64_t count = rows.shape[0];
  columns.shape = {block, count};
  columns.data.resize(rows.data.size());
  for (int64_t b = 0; b < count; ++b)
    for (int j = 0; j < block; ++j) columns.data[j * count + b] = rows.data[b * block + j];
  expect_fast_equals_reference(columns, options_for(c, 0), "special blocks along axis 0", true, c.bits);
}

TEST_P(SimdVsReference, RaggedTailsOfEveryLength) {
  const Config c = GetParam();
  const bool bf16 = c.recipe->bf16_input_only;
  const int block = block_size(c.recipe->format);
  std::mt19937_64 rng(13);
  for (int len = 1; len <= 2 * block; ++len) {
    std::vector<float> data(3 * len);
    for (float& v : data) v = random_wide(rng);
    expect_fast_equals_reference(make_tensor({3, len}, std::move(data), bf16), options_for(c),
                                 "tail length " + std::to_string(len), true, c.bits);
  }
}

// The NVFP4 tensor amax G under every NaN rule (propagate, drop, maxnum) is
// reduced in chunks with a NaN-free fast pass: a NaN first, in the middle,
// last (in the vector loops or the scalar tail), NaN with Inf, a tensor of
// NaN only, and (NVFP4) two amax chunks of which one is all NaN.
TEST_P(SimdVsReference, TensorAmaxWithNanAnywhereOrEverywhere) {
  const Config c = GetParam();
  const bool bf16 = c.recipe->bf16_input_only;
  const int block = block_size(c.recipe->format);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937_64 rng(19);
  auto random_data = [&](int64_t n) {
    std::vector<float> data(n);
    for (float& v : data) v = random_wide(rng);
    return data;
  };
  for (int64_t len : {int64_t{3}, int64_t{block}, int64_t{5 * block + 3}}) {
    const int64_t n = 3 * len;
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      std::vector<float> data = random_data(n);
      data[at] = nan;
      expect_fast_equals_reference(make_tensor({3, len}, data, bf16), options_for(c),
                                   "one NaN at " + std::to_string(at) + " of " + std::to_string(n), true, c.bits);
      data[(at + 1) % n] = -std::numeric_limits<float>::infinity();
      expect_fast_equals_reference(make_tensor({3, len}, data, bf16), options_for(c),
                                   "NaN and -Inf at " + std::to_string(at) + " of " + std::to_string(n), true,
                                   c.bits);
    }
    expect_fast_equals_reference(make_tensor({3, len}, std::vector<float>(n, -nan), bf16), options_for(c),
                                 "all NaN, " + std::to_string(n), true, c.bits);
  }
  if (c.recipe->format != Format::nvfp4) return;
  constexpr int64_t kChunk = 1 << 16;  // driver.cpp kAmaxChunk
  for (int nan_row = 0; nan_row < 2; ++nan_row) {
    std::vector<float> data = random_data(2 * kChunk);
    std::fill(data.begin() + nan_row * kChunk, data.begin() + (nan_row + 1) * kChunk, nan);
    expect_fast_equals_reference(make_tensor({2, kChunk}, std::move(data), bf16), options_for(c),
                                 "amax chunk " + std::to_string(nan_row) + " all NaN", true, c.bits);
  }
}

TEST_P(SimdVsReference, RandomTensorsOverFortyBinadesOnEveryAxis) {
  const Config c = GetParam();
  const bool bf16 = c.recipe->bf16_input_only;
  const int block = block_size(c.recipe->format);
  std::mt19937_64 rng(17);
  const std::vector<std::vector<int64_t>> shapes = {
      {64, 5 * block}, {3, 2 * block + 5, 19}, {2 * block + 1, 37}, {5, 3, block}, {40 * block + 7}};
  for (const auto& shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> data(n);
    for (float& v : data) v = random_wide(rng);
    const Tensor x = make_tensor(shape, std::move(data), bf16);
    for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis)
      expect_fast_equals_reference(x, options_for(c, axis), "random, axis " + std::to_string(axis), true, c.bits);
  }
}

TEST_P(SimdVsReference, OutputDoesNotDependOnTheThreadCount) {
  const Config c = GetParam();
  const int block = block_size(c.recipe->format);
  std::mt19937_64 rng(19);
  // Enough values for 8 threads to get work (the driver keeps >= 2^16 values per thread), a ragged end.
  std::vector<float> data(static_cast<size_t>(block) * (8 * 65536 / block + 3) + 5);
  for (float& v : data) v = random_wide(rng);
  const int64_t n = static_cast<int64_t>(data.size());
  const Tensor x = make_tensor({n}, std::move(data), c.recipe->bf16_input_only);
  QuantOptions o = options_for(c);
  const GivenBits given(c.bits, x.shape, o);
  o.impl = Impl::fast;
  o.threads = 1;
  const Tensor one = fake_quant(x, o);
  const bool packed = !c.recipe->fake_quant_only;
  const PackedTensor one_packed = packed ? quantize(x, o) : PackedTensor{};
  for (int threads : {2, 3, 8}) {
    o.threads = threads;
    EXPECT_TRUE(first_mismatch(x, one.data, fake_quant(x, o).data).empty()) << threads << " threads";
    if (packed) { EXPECT_TRUE(packed_mismatch(one_packed, quantize(x, o)).empty()) << threads << " threads"; }
  }
  o.impl = Impl::reference;
  EXPECT_TRUE(first_mismatch(x, fake_quant(x, o).data, one.data).empty());
}

INSTANTIATE_TEST_SUITE_P(FastRecipes, SimdVsReference, ::testing::ValuesIn(fast_configs()),
                         [](const ::testing::TestParamInfo<Config>& info) { return info.param.name(); });

// nvfp4.te_4over6 where its choice is close: blocks whose two candidates'
// errors tie (both exact: s6 must be kept), whose MAE and MSE disagree, and
// of values on and near both candidates' grids, whose error sums tie or
// differ in their last bits (the sum order decides the pick).
// G = 1536 makes S_enc = S_dec = 1 (M = 256).
TEST(SimdNvFourOverSix, TiesNearTiesAndBothMetrics) {
  constexpr int kBlock = 16;
  std::mt19937_64 rng(23);
  std::vector<std::vector<float>> blocks;
  for (float unit : {1.0f, 0.25f, 8.0f, 0x1p-6f}) {
    auto scaled = [unit](std::vector<float> b) {
      for (float& v : b) v *= unit;
      return b;
    };
    // Both candidates exact (s6 = unit, s4 = 1.5 unit): the tie keeps s6.
    blocks.push_back(scaled({6, 3, 1.5f, 0, -6, -3, -1.5f, 0, 3, 6, 1.5f, 3, 0, -0.0f, 6, 1.5f}));
    blocks.push_back(scaled({3}));
    // MAE keeps s6, MSE s4 (nvfp4_reference_test MaeAndMseCanDisagree).
    blocks.push_back(scaled({-1, -0.5f, 0.5f, -1, -4.5f, 5.5f, -4, 3.5f, 4, 2.5f, 6, 4, -2.5f, -5, 2.5f, 0}));
    // Multiples of unit / 8 up to 6 unit: exact ties and near ties between the sums.
    for (int n = 0; n < 2000; ++n) {
      std::vector<float> b(kBlock);
      for (float& v : b) v = static_cast<float>(static_cast<int>(rng() % 97) - 48) * 0.125f * unit;
      b[rng() % kBlock] = (rng() & 1 ? -6.0f : 6.0f) * unit;
      blocks.push_back(b);
    }
    // The same near the grids: a few ulps off.
    for (int n = 0; n < 2000; ++n) {
      std::vector<float> b(kBlock);
      for (float& v : b) {
        const float g = static_cast<float>(static_cast<int>(rng() % 97) - 48) * 0.125f * unit;
        v = std::bit_cast<float>(std::bit_cast<uint32_t>(g) + static_cast<uint32_t>(rng() % 5) - 2u);
      }
      blocks.push_back(b);
    }
  }
  for (const Recipe* r : {&recipe("nvfp4.te_4over6"), &te_4over6_mse()}) {
    for (Rounding rounding : {Rounding::rne, Rounding::rtz}) {
      const Config c{r, rounding};
      QuantOptions o = options_for(c);
      o.global_amax = 1536.0f;
      expect_fast_equals_reference(blocks_tensor(blocks, kBlock, false), o, "4over6 ties, " + c.name());
    }
  }
}

// nvfp4.te_2d with the tensor amax G under each NaN rule (the registered
// recipe drops NaN; the others are copies that differ only there, under the
// same id: the decode reads no amax rule). The one pass of driver.cpp
// nv_tile_amax gives both the tiles' NaN-dropping amaxes and G.
std::vector<Recipe> te_2d_with_each_tensor_amax_rule() {
  std::vector<Recipe> out;
  for (NvAmaxNan rule : {NvAmaxNan::drop, NvAmaxNan::propagate, NvAmaxNan::maxnum}) {
    Recipe r = *find_recipe("nvfp4.te_2d");
    r.nv.tensor_amax_nan = rule;
    out.push_back(r);
  }
  return out;
}

std::string amax_rule_name(NvAmaxNan rule) {
  switch (rule) {
    case NvAmaxNan::drop: return "drop";
    case NvAmaxNan::propagate: return "propagate";
    case NvAmaxNan::maxnum: return "maxnum";
  }
  return "?";
}

// fake_quant and quantize of a view through the reference and the fast path
// on every target, bit for bit; `values` (row-major) for the messages.
void expect_fast_view_equals_reference(const TensorView& x, const Tensor& values, QuantOptions o,
                                       const std::string& what) {
  const int64_t n = values.numel();
  o.impl = Impl::reference;
  std::vector<float> ref(n);
  fake_quant(x, o, OutputView{ref.data(), {}});
  const PackedTensor ref_packed = quantize(x, o);
  for (int64_t target : simd::compiled_targets()) {
    ForcedTarget forced(target);
    const std::string where = what + " on " + simd::target_name(target);
    QuantOptions f = o;
    f.impl = Impl::fast;
    f.threads = 2;
    std::vector<float> fast(n);
    fake_quant(x, f, OutputView{fast.data(), {}});
    const std::string m = first_mismatch(values, ref, fast);
    ASSERT_TRUE(m.empty()) << "fake_quant " << where << ": " << m;
    const std::string pm = packed_mismatch(ref_packed, quantize(x, f));
    ASSERT_TRUE(pm.empty()) << "quantize " << where << ": " << pm;
  }
}

// NaN in a tile, tiles of NaN (a ragged one too), NaN beside -Inf, NaN first
// and last (with payloads: propagate keeps the first), every value NaN; 37
// rows (tiles of 16, 16 and 5 rows) of 87 values (a ragged last block); along
// the last axis, along axis 0 (the transposed tensor), through a column-major
// view (strided runs) and a bf16 view.
TEST(SimdNvTiles, OnePassGivesTileAndTensorAmaxWithNanUnderEveryRule) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float payload_nan = from_bits(0xFFC01234u), other_nan = from_bits(0x7FC00077u);
  constexpr int64_t kRows = 37, kLen = 5 * 16 + 7;
  std::mt19937_64 rng(29);
  std::vector<float> base(kRows * kLen);
  for (float& v : base) v = random_wide(rng);
  struct Case {
    std::string what;
    std::vector<float> data;
  };
  std::vector<Case> cases;
  auto with = [&](std::string what, auto&& edit) {
    std::vector<float> d = base;
    edit([&](int64_t r, int64_t k) -> float& { return d[r * kLen + k]; });
    cases.push_back({std::move(what), std::move(d)});
  };
  with("no NaN", [](auto) {});
  with("one NaN in a tile", [&](auto at) { at(3, 20) = payload_nan; });
  with("a tile of NaN", [&](auto at) {
    for (int64_t r = 16; r < 32; ++r)
      for (int64_t k = 32; k < 48; ++k) at(r, k) = (r + k) % 3 ? nan : payload_nan;
  });
  with("a ragged tile of NaN", [&](auto at) {
    for (int64_t r = 32; r < kRows; ++r)
      for (int64_t k = 80; k < kLen; ++k) at(r, k) = -nan;
  });
  with("NaN and -Inf in a tile", [&](auto at) {
    at(20, 5) = other_nan;
    at(27, 9) = -inf;
    at(30, 70) = payload_nan;
  });
  with("NaN first and last", [&](auto at) {
    at(0, 0) = payload_nan;
    at(kRows - 1, kLen - 1) = other_nan;
  });
  cases.push_back({"all NaN", std::vector<float>(kRows * kLen, payload_nan)});
  for (const Recipe& r : te_2d_with_each_tensor_amax_rule()) {
    QuantOptions o;
    o.recipe = r;  // by handle
    o.tail = TailPolicy::pad;
    for (const Case& c : cases) {
      const std::string what = c.what + ", tensor amax " + amax_rule_name(r.nv.tensor_amax_nan);
      const Tensor x = make_tensor({kRows, kLen}, c.data, false);
      expect_fast_equals_reference(x, o, what);
      std::vector<float> transposed(c.data.size());
      for (int64_t i = 0; i < kRows; ++i)
        for (int64_t k = 0; k < kLen; ++k) transposed[k * kRows + i] = c.data[i * kLen + k];
      QuantOptions along0 = o;
      along0.axis = 0;
      expect_fast_equals_reference(make_tensor({kLen, kRows}, transposed, false), along0, what + ", axis 0");
      // x itself, laid out column-major: rows read at stride kRows.
      expect_fast_view_equals_reference(TensorView{transposed.data(), InputDType::f32, {kRows, kLen}, {1, kRows}}, x,
                                        o, what + ", column-major view");
      std::vector<uint16_t> bf16(c.data.size());
      for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = bf16_encode(c.data[i]);
      expect_fast_view_equals_reference(bf16_view(bf16, {kRows, kLen}), x, o, what + ", bf16 view");
    }
  }
}

// The tile pass splits 16-row groups over threads and merges their parts of
// G in any order: the same bits as the reference on 1, 2, 3 and 8 threads,
// with NaN (payloads) in tiles that different threads take. 661 rows (41
// groups of 16 and one of 5) of 803 values: enough for 8 threads (the driver
// keeps >= 2^16 values per thread).
TEST(SimdNvTiles, TilePassDoesNotDependOnTheThreadCount) {
  constexpr int64_t kRows = 16 * 41 + 5, kLen = 16 * 50 + 3;
  std::mt19937_64 rng(31);
  std::vector<float> finite(kRows * kLen);
  for (float& v : finite) v = random_wide(rng);
  std::vector<float> with_nan = finite;
  for (int64_t row : {int64_t{17}, int64_t{300}, int64_t{650}})
    with_nan[row * kLen + row % kLen] = from_bits(0x7FC00000u | static_cast<uint32_t>(row));
  for (const Recipe& r : te_2d_with_each_tensor_amax_rule()) {
    for (bool nan : {false, true}) {
      const Tensor x = make_tensor({kRows, kLen}, nan ? with_nan : finite, false);
      const std::string what =
          std::string(nan ? "NaN" : "finite") + ", tensor amax " + amax_rule_name(r.nv.tensor_amax_nan);
      QuantOptions o;
      o.recipe = r;
      o.tail = TailPolicy::pad;
      o.impl = Impl::reference;
      const Tensor ref = fake_quant(x, o);
      const PackedTensor ref_packed = quantize(x, o);
      o.impl = Impl::fast;
      for (int threads : {1, 2, 3, 8}) {
        o.threads = threads;
        EXPECT_TRUE(first_mismatch(x, ref.data, fake_quant(x, o).data).empty()) << what << ", " << threads;
        EXPECT_TRUE(packed_mismatch(ref_packed, quantize(x, o)).empty()) << what << ", " << threads;
      }
    }
  }
}

// Packing options the recipes do not use by default: every nibble order and
// HiF4 scale-bit order, fast against reference.
TEST(SimdPacking, EveryNibbleAndScaleBitOrder) {
  std::mt19937_64 rng(23);
  for (const char* id : {"hif4.v14", "hif4.a6", "hif4.amct", "hif4.v12_pow2", "mxfp4.ocp", "mxfp4.ggml",
                         "nvfp4.te"}) {
    const Recipe& r = *find_recipe(id);
    const int block = block_size(r.format);
    std::vector<float> data(7 * (3 * block + 9));
    for (float& v : data) v = random_wide(rng);
    const Tensor x = make_tensor({7, 3 * block + 9}, std::move(data), r.bf16_input_only);
    for (NibbleOrder n : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::split_half}) {
      for (ScaleBitOrder s : {ScaleBitOrder::lsb_first, ScaleBitOrder::msb_first}) {
        QuantOptions o = options_for({&r, r.element_rounding});
        o.nibble_order = n;
        if (r.format == Format::hif4) o.scale_bit_order = s;
        expect_fast_equals_reference(x, o, std::string(id) + " " + std::string(to_string(n)) + " " +
                                               std::string(to_string(s)));
        if (r.format != Format::hif4) break;
      }
    }
  }
}

// The packing of codes held in vectors (pack-inl.h PackCodeVectors) for
// every nibble order: each byte value 0x00..0xFF (each pair of codes) at
// every byte position of a block, checked to be there in the reference's
// packed bytes, so that the test cannot pass with a pairing it never
// exercised; ragged rows (3 blocks + 9 values: an odd count, the last byte
// half empty). Byte k of a block pairs elements 2k, 2k+1 (rows laid out for
// low_first / high_first) or k, k + block/2 (for split_half); row t gives
// byte k the codes (t + k) mod 256, but one byte per block holds the
// block's largest value twice (an anchor that fixes the scale at 1), at
// byte 0 in half of the rows and byte 1 in the others. HiF4 scales small
// groups of 4 and 16 values up (§6.1's one-bit exponents), so a pair is
// written as given only beside larger codes: its rows also give byte k the
// codes (t + s·k) mod 256 for a few odd strides s. Recipes whose -0 is
// code 0x8 (microxcaling's, ggml's and hif4.a6's are 0x0; their packing is
// the same code, checked by EveryNibbleAndScaleBitOrder).
TEST(SimdPacking, EveryCodePairAtEveryBytePositionInEveryNibbleOrder) {
  for (const char* id : {"mxfp4.ocp", "nvfp4.te", "nvfp4.torchao", "nvfp4.cudnn", "hif4.v14"}) {
    const Recipe& r = *find_recipe(id);
    const int block = block_size(r.format);
    const int half = block / 2;
    // The element values of codes 0..15 at scale 1 (HiF4: q/4; E2M1 otherwise).
    std::vector<float> values;
    for (int sign : {1, -1})
      for (int q = 0; q < 8; ++q)
        values.push_back(static_cast<float>(sign) *
                         (r.format == Format::hif4 ? static_cast<float>(q) / 4.0f : e2m1_decode(static_cast<uint8_t>(q))));
    const int64_t width = 3 * block + 9;
    const std::vector<int> strides =
        r.format == Format::hif4 ? std::vector<int>{1, 0x35, 0x63, 0x9B, 0xC7} : std::vector<int>{1};
    std::vector<float> data;
    for (bool split : {false, true})
      for (int anchor = 0; anchor < 2; ++anchor)
        for (int stride : strides)
          for (int t = 0; t < 256; ++t)
            for (int64_t i = 0; i < width; ++i) {
              const int j = static_cast<int>(i % block);
              const int k = split ? j % half : j / 2;           // the byte
              const bool high = split ? j >= half : j % 2 == 1;  // its second code
              const int pair = k == anchor ? 0x77 : (t + stride * k) % 256;
              data.push_back(values[static_cast<size_t>(high ? pair >> 4 : pair & 15)]);
            }
    const int64_t rows = static_cast<int64_t>(data.size()) / width;
    const Tensor x = make_tensor({rows, width}, std::move(data), r.bf16_input_only);
    for (NibbleOrder n : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::split_half}) {
      QuantOptions o = options_for({&r, r.element_rounding});
      o.nibble_order = n;
      o.impl = Impl::reference;
      const PackedTensor ref = quantize(x, o);
      std::vector<std::vector<bool>> seen(static_cast<size_t>(half), std::vector<bool>(256, false));
      const int64_t row_bytes = ref.padded_len / 2;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t b = 0; b < width / block; ++b)
          for (int k = 0; k < half; ++k)
            seen[static_cast<size_t>(k)][ref.codes[static_cast<size_t>(row * row_bytes + b * half + k)]] = true;
      for (int k = 0; k < half; ++k)
        ASSERT_EQ(std::count(seen[static_cast<size_t>(k)].begin(), seen[static_cast<size_t>(k)].end(), true), 256)
            << id << " " << to_string(n) << ": byte " << k << " of a block does not take every value";
      expect_fast_equals_reference(x, o, std::string(id) + " every code pair " + std::string(to_string(n)));
    }
  }
}

// ggml's argmin (nvfp4.ggml, mxfp4.ggml) compares |x| with thresholds
// derived per unit d, half the block scale (driver.cpp ggml_argmin_row,
// ggml-inl.h GgmlArgmin). For every scale code the recipe's encoder gives a
// finite amax: every fp32 |x|, both signs, within a window of ulps of each
// real midpoint between neighbouring candidates (where ggml's fp32 comparison
// switches) and of each place where the kernel's estimate of |x| / d changes.
// Then the blocks the thresholds do not cover, which take the literal argmin:
// nvfp4's saturated scale (d = 224) on both sides of the limit 2^20 d; for
// mxfp4, amax at the top of fp32 (log2f rounds to 128: scale code 253, d =
// 2^125, whose candidates 6d, 8d and 12d overflow), blocks that hold Inf
// (scale code 0x00: the candidates' errors merge) or NaN (the scale of the
// other values), and tiny blocks whose scale code wrapped (232..255, units up
// to 2^127: thresholds far above every value).
TEST(SimdGgmlArgmin, EveryScaleAroundEveryThresholdAndTheLiteralPath) {
  constexpr double kMagnitudes[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* id : {"nvfp4.ggml", "mxfp4.ggml"}) {
    const Recipe& r = *find_recipe(id);
    const int block = block_size(r.format);
    std::vector<std::vector<float>> blocks;
    // Blocks led by amax (which sets the scale) holding the fp32 values
    // within `window` ulps of center, both signs, that do not exceed it.
    auto add_window = [&](float amax, double center, int window) {
      std::vector<float> b{amax};
      const auto c = static_cast<int64_t>(bits_of(static_cast<float>(center)));
      for (int64_t i = -window; i <= window; ++i)
        for (float sign : {1.0f, -1.0f}) {
          const float v = from_bits(static_cast<uint32_t>(c + i));
          if (!(v <= amax)) continue;
          b.push_back(sign * v);
          if (static_cast<int>(b.size()) == block) {
            blocks.push_back(b);
            b.assign(1, amax);
          }
        }
      blocks.push_back(b);
    };
    auto add_thresholds = [&](float amax, double d, int window) {
      for (int k = 1; k < 8; ++k) add_window(amax, (kMagnitudes[k - 1] + kMagnitudes[k]) / 2 * d, window);
      for (double z : {1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0}) add_window(amax, (z - 0.75) / 0.79 * d, window);
    };
    int scales = 0;
    if (r.format == Format::nvfp4) {
      for (int s = 1; s < 0x7F; ++s) {
        const float raw = 2.0f * reference::ggml_ue4m3_to_fp32(static_cast<uint8_t>(s));  // the UE4M3 value
        if (reference::ggml_fp32_to_ue4m3(raw) != s) continue;  // codes the encoder never gives
        ++scales;
        add_thresholds(6.0f * raw, raw / 2.0, 512);  // amax / 6 = raw exactly, so the block's scale is s
      }
      EXPECT_GE(scales, 100);
      // Scale 0x7E (every amax / 6 >= 256): the literal argmin takes over at 2^20 d, d = 224.
      const float limit = std::ldexp(224.0f, 20);
      for (int64_t i = -3; i <= 3; ++i) {
        const float amax = from_bits(static_cast<uint32_t>(static_cast<int64_t>(bits_of(limit)) + i));
        for (int k = 1; k < 8; ++k) add_window(amax, (kMagnitudes[k - 1] + kMagnitudes[k]) / 2 * 224.0, 512);
        add_window(amax, 10.0 * 224.0 * 1024.0, 512);  // far above 12 d, below the limit
        add_window(amax, amax, 512);
      }
    } else {
      // Scale code c from amax = 12 d = 1.5 * 2^(c-125): floor(log2f) - 2 + 127 = c,
      // d = 2^(c-128). Wider windows where d is subnormal or near the top.
      for (int c = 0; c <= 252; ++c) {
        const double d = std::ldexp(1.0, c - 128);
        ++scales;
        add_thresholds(static_cast<float>(12.0 * d), d, c < 8 || c > 244 ? 512 : 64);
      }
      EXPECT_EQ(scales, 253);
      // The top of fp32: scale code 253, literal (a window's center at or
      // above 2^128 is Inf, and its values are dropped).
      for (int64_t i = 0; i < 48; i += 3)
        add_thresholds(from_bits(static_cast<uint32_t>(0x7F7FFFFF - i)), 0x1p125, 4);
      // Inf (scale code 0x00) and NaN (the NaN-skipping amax's code) beside
      // values around the thresholds of a few units, in every block position.
      for (float special : {inf, -inf, nan})
        for (int c : {0, 1, 2, 100, 127, 200, 252}) {
          const double d = std::ldexp(1.0, c - 128);
          const size_t first = blocks.size();
          add_thresholds(static_cast<float>(12.0 * d), d, 2);
          for (size_t b = first; b < blocks.size(); ++b) {
            blocks[b].resize(static_cast<size_t>(block), 0.0f);
            blocks[b][(b - first) % static_cast<size_t>(block)] = special;
          }
        }
      // Wrapped scale codes (amax below 2^-125): every binade's bottom, middle
      // and top, with smaller values of both signs and -0.
      for (int e = -149; e <= -125; ++e)
        for (float amax : {std::ldexp(1.0f, e), std::ldexp(1.5f, e), std::nextafter(std::ldexp(1.0f, e + 1), 0.0f)}) {
          std::vector<float> b{amax, -amax, -0.0f, 0.0f};
          for (int i = 1; static_cast<int>(b.size()) < block; ++i) {
            const float v = from_bits(static_cast<uint32_t>(static_cast<int64_t>(bits_of(amax)) * i / block));
            b.push_back(i % 2 ? v : -v);
          }
          blocks.push_back(b);
        }
    }
    expect_fast_equals_reference(blocks_tensor(blocks, block, false), options_for({&r, r.element_rounding}),
                                 std::string(id) + " thresholds");
  }
}

// nvfp4.ggml tests a group once against nvfp4_ggml_literal_bits (driver.cpp)
// and skips its blocks' row limits below it: no amax below it reaches the
// limit of its own scale code's row (every such fp32 amax, about 1.3 * 10^9,
// a few seconds), and the bits themselves do (the bound is tight).
TEST(SimdGgmlArgmin, Nvfp4GroupLiteralBitsAreBelowEveryLimitAndTight) {
  const simd::GgmlArgminRow* rows = simd::ggml_argmin_table(Format::nvfp4);
  const uint32_t from = simd::nvfp4_ggml_literal_bits();
  auto limit_of = [&](uint32_t b) {
    return rows[reference::ggml_fp32_to_ue4m3(std::bit_cast<float>(b) / 6.0f)].limit_bits;
  };
  ASSERT_LE(from, 0x7F800000u);
  if (from < 0x7F800000u) EXPECT_GE(from, limit_of(from)) << "the bound is not tight: 0x" << std::hex << from;
  uint64_t reached = 0;
  uint32_t first = from;
  for (uint32_t b = 0; b < from; ++b)
    if (b >= limit_of(b) && reached++ == 0) first = b;
  EXPECT_EQ(reached, 0u) << "amax bits reach their row's limit below the bound 0x" << std::hex << from
                         << ", first at 0x" << first;
}

// Dequantize of arbitrary bytes (every scale byte, NaN scales, any code, odd
// per-tensor decode scales) for every recipe with a fast decoder.
TEST(SimdDequantize, ArbitraryPackedBytesDecodeLikeTheReference) {
  std::mt19937_64 rng(29);
  int decoders = 0;
  for (const Recipe& r : all_recipes()) {
    if (r.fake_quant_only) continue;
    QuantOptions o;
    o.recipe = std::string(r.id);
    o.tail = TailPolicy::pad;
    const int block = block_size(r.format);
    std::vector<float> data(256 * block + 7);
    for (float& v : data) v = r.bf16_input_only ? bf16_round(random_wide(rng)) : random_wide(rng);
    Tensor x;
    x.shape = {1, 256 * block + 7};
    x.data = std::move(data);
    PackedTensor p = quantize(x, o);
    if (!simd::fast_dequantize_gap(p).empty()) continue;
    ++decoders;
    for (uint8_t& b : p.codes) b = static_cast<uint8_t>(rng());
    const int sb = scale_bytes_per_block(r.format);
    for (size_t i = 0; i < p.scales.size(); ++i)
      p.scales[i] = i % sb == 0 ? static_cast<uint8_t>(i / sb) : static_cast<uint8_t>(rng());  // every scale byte
    std::vector<float> decode_scales = {p.global_decode_scale};
    if (r.format == Format::nvfp4)
      decode_scales = {p.global_decode_scale, 0x1p-140f, 3.0e38f, 0.0f, std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN()};
    for (float s_dec : decode_scales) {
      p.global_decode_scale = s_dec;
      const Tensor ref = dequantize(p, {Impl::reference, 0});
      for (int64_t target : simd::compiled_targets()) {
        ForcedTarget forced(target);
        const std::string m = first_mismatch(ref, ref.data, dequantize(p, {Impl::fast, 2}).data);
        ASSERT_TRUE(m.empty()) << r.id << " on " << simd::target_name(target) << " S_dec " << s_dec << ": " << m;
      }
    }
  }
  EXPECT_GE(decoders, 20);  // every HiF4 and MXFP4 recipe (SimdCoverage names them) and most NVFP4 ones
}

// A recipe and deterministic element rounding the fast path does not cover
// (read from the dispatcher), with the dispatcher's reason.
struct Uncovered {
  const Recipe* recipe = nullptr;
  Rounding rounding = Rounding::rne;
  std::string gap;
};
Uncovered uncovered_config() {
  for (const Recipe& r : all_recipes())
    for (Rounding rounding : {Rounding::rne, Rounding::rha, Rounding::rtz, Rounding::ties_to_zero}) {
      if (!(r.allowed_roundings & rounding_bit(rounding))) continue;
      QuantOptions q;
      q.recipe = r;
      q.rounding = rounding;
      q.tail = TailPolicy::pad;
      const std::string gap = simd::fast_path_gap(resolve_options(q, {block_size(r.format)}), simd::Operation::fake_quant);
      if (!gap.empty()) return {&r, rounding, gap};
    }
  return {};
}

TEST(SimdDispatch, ImplChoiceIsHonouredAndExplained) {
  Tensor x;
  x.shape = {64};
  x.data.assign(64, 1.5f);
  QuantOptions o;
  // Forcing the fast path where it has no kernel fails with the reason; auto falls back.
  // (Skipped when every configuration has a kernel; the decoder below is then the refusal tested.)
  if (const Uncovered u = uncovered_config(); u.recipe) {
    o.recipe = std::string(u.recipe->id);
    o.rounding = u.rounding;
    o.impl = Impl::fast;
    try {
      fake_quant(x, o);
      FAIL() << "forcing the fast path where it has no kernel must fail";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(u.gap), std::string::npos) << e.what();
    }
    o.impl = Impl::automatic;
    EXPECT_NO_THROW(fake_quant(x, o));
  }
  o = QuantOptions{};
  o.recipe = "mxfp4";
  o.threads = -1;
  EXPECT_THROW(fake_quant(x, o), InputError);
  // A decoder the fast path lacks: a packed tensor naming nvfp4.modelopt_fq
  // (fake-quant only, so made from nvfp4.modelopt's, the same layout).
  o = QuantOptions{};
  o.recipe = "nvfp4.modelopt";
  PackedTensor p = quantize(x, o);
  p.recipe_id = "nvfp4.modelopt_fq";
  try {
    dequantize(p, {Impl::fast, 0});
    FAIL() << "forcing the fast decoder of nvfp4.modelopt_fq must fail";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no fast decoder"), std::string::npos) << e.what();
  }
  // hif4.a6 declared bf16 but holding other values: the fast path takes
  // them too (the reference's bits for those blocks: SpecialBlocks).
  o = QuantOptions{};
  o.recipe = "hif4.a6";
  o.input_dtype = InputDType::bf16;
  x.data[3] = 1.0f + 0x1p-20f;
  o.impl = Impl::fast;
  const Tensor fast = fake_quant(x, o);
  o.impl = Impl::reference;
  EXPECT_EQ(fast.data, fake_quant(x, o).data);
  EXPECT_EQ(parse_impl("auto"), Impl::automatic);
  EXPECT_EQ(parse_impl("fast"), Impl::fast);
  EXPECT_EQ(parse_impl("reference"), Impl::reference);
  EXPECT_FALSE(parse_impl("simd").has_value());
}

// The CLI flags: --impl fast and --threads give the reference's bytes.
TEST(SimdCli, ImplAndThreadsFlags) {
  testing::TempDir dir;
  Tensor x;
  x.shape = {8, 100};
  std::mt19937_64 rng(31);
  for (int i = 0; i < 800; ++i) x.data.push_back(random_wide(rng));
  const std::string in = (dir / "x.npy").string();
  io::write_npy(in, io::from_f32(x.shape, x.data));
  auto read_all = [](const std::string& path) {
    std::string s;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
    return s;
  };
  for (const char* fmt : {"hif4", "mxfp4", "nvfp4"}) {
    const std::string ref = (dir / "ref.npy").string(), fast = (dir / "fast.npy").string();
    const std::string packed = (dir / "p.safetensors").string(), dq_ref = (dir / "dq_ref.npy").string(),
                      dq_fast = (dir / "dq_fast.npy").string();
    ASSERT_EQ(testing::run_cli("fake-quant " + in + " " + ref + " --format " + std::string(fmt) + " --impl reference")
                  .exit_code, 0);
    ASSERT_EQ(testing::run_cli("fake-quant " + in + " " + fast + " --format " + std::string(fmt) +
                               " --impl fast --threads 2").exit_code, 0);
    EXPECT_EQ(read_all(ref), read_all(fast)) << fmt;
    ASSERT_EQ(testing::run_cli("quantize " + in + " " + packed + " --format " + std::string(fmt) + " --impl fast")
                  .exit_code, 0);
    ASSERT_EQ(testing::run_cli("dequantize " + packed + " " + dq_ref + " --impl reference").exit_code, 0);
    ASSERT_EQ(testing::run_cli("dequantize " + packed + " " + dq_fast + " --impl fast --threads 3").exit_code, 0);
    EXPECT_EQ(read_all(dq_ref), read_all(dq_fast)) << fmt;
    EXPECT_EQ(read_all(dq_ref), read_all(ref)) << fmt;
  }
  if (const Uncovered u = uncovered_config(); u.recipe) {
    const testing::CliResult bad = testing::run_cli(
        "fake-quant " + in + " " + (dir / "y.npy").string() + " --format " + std::string(format_name(u.recipe->format)) +
        " --recipe " + std::string(u.recipe->id) + " --round " + std::string(to_string(u.rounding)) + " --impl fast");
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.output.find(u.gap), std::string::npos) << bad.output;
  }
  EXPECT_EQ(testing::run_cli("fake-quant " + in + " " + (dir / "y.npy").string() + " --format mxfp4 --impl simd")
                .exit_code, 2);
  EXPECT_EQ(testing::run_cli("fake-quant " + in + " " + (dir / "y.npy").string() + " --format mxfp4 --threads -2")
                .exit_code, 2);
}

}  // namespace
}  // namespace fp4emu

namespace fp4emu {
namespace {

// Found by the every-bf16 differential test: the reference's fmaxf-style
// amax (NvAmaxNan::drop) let a *signaling* NaN through, because glibc's
// fmaxf returns NaN for one (IEEE 754-2008 maxNum). The kernels' fmaxf drops
// every NaN; so must the reference.
TEST(ReferenceRegression, Nvfp4DroppingAmaxSkipsSignalingNan) {
  const Recipe& te = *find_recipe("nvfp4.te");
  std::vector<float> x(16, 0.5f);
  x[2] = -3.0f;
  x[5] = std::bit_cast<float>(0x7F810000u);  // signaling NaN (bf16 0x7F81)
  x[9] = std::bit_cast<float>(0xFFC00000u);  // quiet NaN, negative
  EXPECT_EQ(std::bit_cast<uint32_t>(reference::nvfp4_block_amax(te, x.data(), 16)), std::bit_cast<uint32_t>(3.0f));
  EXPECT_EQ(std::bit_cast<uint32_t>(reference::nvfp4_global_amax(te, x)), std::bit_cast<uint32_t>(3.0f));
}

}  // namespace
}  // namespace fp4emu
