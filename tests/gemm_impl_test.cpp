// The fast forms of the GEMM models against their scalar forms, bit for bit,
// on every compiled Highway target and several thread counts; the packed
// reading against dequantize(); the `fast` model; errors; the CLI.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/nibbles.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/reference.hpp"
#include "src/gemm/models.hpp"
#include "src/gemm/operand.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::same_bits;

Tensor random_tensor(std::vector<int64_t> shape, std::mt19937_64& rng) {
  Tensor t;
  t.shape = std::move(shape);
  t.data.resize(t.numel());
  for (float& v : t.data) v = testing::random_wide(rng);
  return t;
}

PackedTensor quantized(const std::string& recipe, std::vector<int64_t> shape, int axis, std::mt19937_64& rng) {
  QuantOptions o;
  o.recipe = recipe;
  o.axis = axis;
  o.tail = TailPolicy::pad;
  return quantize(random_tensor(std::move(shape), rng), o);
}

// Random scale bytes in [lo, hi] over a quantized tensor: wide spreads, NaN
// blocks and units that leave the exact-f fast path of block_fp32.
void scramble_scales(PackedTensor& p, int lo, int hi, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> scale(lo, hi);
  const size_t sb = p.format == Format::hif4 ? 4 : 1;
  for (size_t i = 0; i < p.scales.size(); i += sb) p.scales[i] = static_cast<uint8_t>(scale(rng));
}

int mismatches(const Tensor& got, const Tensor& want, const std::string& what) {
  int bad = 0;
  EXPECT_EQ(got.shape, want.shape) << what;
  for (size_t i = 0; i < want.data.size() && i < got.data.size(); ++i)
    if (!same_bits(got.data[i], want.data[i]) && ++bad <= 3)
      ADD_FAILURE() << what << " element " << i << ": " << got.data[i] << " vs scalar " << want.data[i];
  return bad;
}

struct Pair {
  std::string what;
  PackedTensor a, b;
};

std::vector<Pair> simd_cases() {
  std::mt19937_64 rng(21);
  std::vector<Pair> cases;
  // Sizes that are not multiples of the tile (4 rows × up to 32 columns) or
  // of the block; k long enough for several blocks.
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14", "mxfp4.ggml", "hif4.v12_pow2", "nvfp4.ggml"}) {
    const int block = block_size(find_recipe(recipe)->format);
    const int64_t k = 5 * block + 3;
    cases.push_back({std::string(recipe), quantized(recipe, {13, k}, 1, rng), quantized(recipe, {k, 37}, 0, rng)});
  }
  Pair wide{"mxfp4 scales 0..255", quantized("mxfp4.ocp", {9, 256}, 1, rng), quantized("mxfp4.ocp", {256, 70}, 0, rng)};
  scramble_scales(wide.a, 0, 255, rng);
  scramble_scales(wide.b, 0, 255, rng);
  cases.push_back(wide);
  Pair nv{"nvfp4 scales 0..255", quantized("nvfp4.te", {6, 128}, 1, rng), quantized("nvfp4.te", {128, 33}, 0, rng)};
  scramble_scales(nv.a, 0, 255, rng);
  scramble_scales(nv.b, 0, 255, rng);
  cases.push_back(nv);
  // Every unit within [2^-63, 2^56) (E8M0 65..183; unit = 2^(byte-128)),
  // where block_fp32 skips its per-block range check (and fuses the step
  // into one MulAdd), unit products from 2^-126 up to 2^110; and 64..184,
  // one step beyond on either side.
  Pair inside{"mxfp4 scales 65..183", quantized("mxfp4.ocp", {9, 256}, 1, rng), quantized("mxfp4.ocp", {256, 70}, 0, rng)};
  scramble_scales(inside.a, 65, 183, rng);
  scramble_scales(inside.b, 65, 183, rng);
  for (size_t i = 0; i < inside.a.scales.size(); i += 7) inside.a.scales[i] = i % 2 ? 65 : 183;
  for (size_t i = 0; i < inside.b.scales.size(); i += 5) inside.b.scales[i] = i % 2 ? 65 : 183;
  cases.push_back(inside);
  Pair edge{"mxfp4 scales 64..184", quantized("mxfp4.ocp", {9, 256}, 1, rng), quantized("mxfp4.ocp", {256, 70}, 0, rng)};
  scramble_scales(edge.a, 64, 184, rng);
  scramble_scales(edge.b, 64, 184, rng);
  cases.push_back(edge);
  // Exponent spreads of 0..13 per row and column (8 blocks: `exact` sums a
  // tile in double lanes up to a spread of 25 per output), so that some
  // tiles take the lanes and their neighbours the per-output path.
  Pair spread{"mxfp4 scales 120..133", quantized("mxfp4.ocp", {13, 256}, 1, rng),
              quantized("mxfp4.ocp", {256, 70}, 0, rng)};
  scramble_scales(spread.a, 120, 133, rng);
  scramble_scales(spread.b, 120, 133, rng);
  for (size_t i = 0; i < 4 * 8; ++i) spread.a.scales[i] = 127;  // rows 0..3: one exponent
  cases.push_back(spread);
  Pair hif{"hif4 scales 0..255", quantized("hif4.v14", {5, 192}, 1, rng), quantized("hif4.v14", {192, 17}, 0, rng)};
  scramble_scales(hif.a, 0, 255, rng);
  scramble_scales(hif.b, 0, 255, rng);
  cases.push_back(hif);
  return cases;
}

struct ModelCase {
  GemmModel model;
  int blocks_per_step;
};
const ModelCase kModels[] = {{GemmModel::exact, 1},      {GemmModel::block_fp32, 1}, {GemmModel::block_fp32, 2},
                             {GemmModel::block_fp32, 4}, {GemmModel::fma_fp32, 1}};

// The SIMD form of model mc (with o's other options) against the scalar
// form: every target on one thread; the best target on 2 and 3 threads
// (tiles and panels split across threads differently).
void expect_simd_matches_scalar(const PackedTensor& a, const PackedTensor& b, GemmOptions o, const ModelCase& mc,
                                const std::string& what_in) {
  o.model = mc.model;
  o.blocks_per_step = mc.blocks_per_step;
  o.impl = GemmImpl::scalar;
  const Tensor want = gemm(a, b, o);
  o.impl = GemmImpl::simd;
  const std::string what = fmt::format("{} {} x{}", what_in, to_string(mc.model), mc.blocks_per_step);
  o.threads = 1;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    mismatches(gemm(a, b, o), want, what + " target " + hwy::TargetName(target));
  }
  hwy::SetSupportedTargetsForTest(0);
  for (int threads : {2, 3}) {
    o.threads = threads;
    mismatches(gemm(a, b, o), want, what + " threads " + std::to_string(threads));
  }
}

TEST(GemmSimd, EveryTargetAndThreadCountMatchesTheScalarForm) {
  for (const Pair& c : simd_cases())
    for (const ModelCase& mc : kModels) expect_simd_matches_scalar(c.a, c.b, GemmOptions{}, mc, c.what);
}

// The byte products of the packed kernels (simd.cpp, kAOffset) at their
// bounds: every element at the format's largest magnitude (E2M1 ±6, so N =
// ±12; HiF4 S1P2 ±1.75 with every L2 and L3 micro-exponent bit set, N = ±28),
// in every lane, with both signs in every combination, ragged k, on every
// target and 1, 2 and 3 threads. A saturated pair sum or a wrapped int16 lane
// gives another integer than the scalar form's exact products.
TEST(GemmSimd, LargestElements) {
  std::mt19937_64 rng(27);
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14"}) {
    const Format format = find_recipe(recipe)->format;
    const int block = block_size(format);
    const auto magnitude = [&](uint8_t code) {
      return std::fabs(format == Format::hif4 ? s1p2_decode(code) : e2m1_decode(code));
    };
    uint8_t largest = 0;
    for (uint8_t code = 0; code < 8; ++code)
      if (magnitude(code) > magnitude(largest)) largest = code;
    const uint8_t negative = largest | 0x8;
    // Sign patterns of the elements: all +, all −, alternating, random.
    const auto fill = [&](PackedTensor& p, int pattern) {
      for (uint8_t& byte : p.codes) {
        uint8_t lo = largest, hi = largest;
        if (pattern == 1) lo = hi = negative;
        if (pattern == 2) hi = negative;
        if (pattern == 3) {
          lo = rng() & 1 ? negative : largest;
          hi = rng() & 1 ? negative : largest;
        }
        byte = static_cast<uint8_t>(lo | (hi << 4));
      }
      // HiF4: every L2 and L3 bit set (bytes 1..3 of each word, in either bit order).
      if (format == Format::hif4)
        for (size_t i = 0; i < p.scales.size(); i += 4) p.scales[i + 1] = p.scales[i + 2] = p.scales[i + 3] = 0xFF;
    };
    for (int64_t k : {int64_t{3} * block, int64_t{3} * block + 5})
      for (int pa = 0; pa < 4; ++pa)
        for (int pb = 0; pb < 4; ++pb) {
          PackedTensor a = quantized(recipe, {9, k}, 1, rng);
          PackedTensor b = quantized(recipe, {35, k}, 1, rng);
          fill(a, pa);
          fill(b, pb);
          for (const ModelCase& mc : kModels) {
            if (mc.model == GemmModel::fma_fp32) continue;
            GemmOptions o;
            o.b_layout = BLayout::nk;
            expect_simd_matches_scalar(a, b, o, mc, fmt::format("{} k {} signs {}/{}", recipe, k, pa, pb));
          }
        }
  }
}

// Tiny and ragged shapes: k below one quad and one block, single rows and
// columns, n just past a panel.
TEST(GemmSimd, RaggedShapes) {
  std::mt19937_64 rng(28);
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14"})
    for (int64_t k : {1, 2, 3, 5, 17, 67})
      for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {5, 33}}) {
        const PackedTensor a = quantized(recipe, {m, k}, 1, rng);
        const PackedTensor b = quantized(recipe, {k, n}, 0, rng);
        for (const ModelCase& mc : kModels)
          expect_simd_matches_scalar(a, b, GemmOptions{}, mc, fmt::format("{} {}x{}x{}", recipe, m, k, n));
      }
}

TEST(GemmSimd, LargerTiledProduct) {
  // Several column panels and row tiles per thread.
  std::mt19937_64 rng(22);
  const PackedTensor a = quantized("mxfp4.ocp", {67, 320}, 1, rng);
  const PackedTensor b = quantized("mxfp4.ocp", {320, 130}, 0, rng);
  for (const ModelCase& mc : kModels) expect_simd_matches_scalar(a, b, GemmOptions{}, mc, "67x320x130");
}

TEST(GemmSimd, DenseOperandsMatchTheScalarForm) {
  std::mt19937_64 rng(23);
  const Tensor x = random_tensor({7, 100}, rng);
  const PackedTensor w = quantized("nvfp4.te", {100, 19}, 0, rng);
  for (const ModelCase& mc : kModels) {
    GemmOptions o;
    o.model = mc.model;
    o.blocks_per_step = mc.blocks_per_step;
    o.impl = GemmImpl::scalar;
    const Tensor want = gemm(x, w, o);
    o.impl = GemmImpl::simd;
    o.threads = 2;
    mismatches(gemm(x, w, o), want, std::string("dense × nvfp4 ") + std::string(to_string(mc.model)));
  }
}

// ---------------------------------------------------------------------------
// The packed reading agrees with dequantize(): A · I (dense identity) under
// fma_fp32 is A's fp32 values, times the per-tensor scale for NVFP4
// (fp32(S_dec·(e2m1·s)) = dequantize's fp32(fp32(e2m1·s)·S_dec)).

Tensor identity(int64_t k) {
  Tensor t;
  t.shape = {k, k};
  t.data.assign(k * k, 0.0f);
  for (int64_t i = 0; i < k; ++i) t.data[i * k + i] = 1.0f;
  return t;
}

TEST(GemmOperands, EveryRecipeReadsItsDequantizedValues) {
  std::mt19937_64 rng(24);
  for (const Recipe& r : all_recipes()) {
    if (r.fake_quant_only) continue;
    for (std::optional<NibbleOrder> order : {std::optional<NibbleOrder>{}, std::optional{NibbleOrder::split_half}}) {
      const int64_t k = 2 * block_size(r.format) + 6;
      Tensor x = random_tensor({5, k}, rng);
      if (r.bf16_input_only)
        for (float& v : x.data) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
      QuantOptions o;
      o.recipe = std::string(r.id);
      o.axis = 1;
      o.tail = TailPolicy::pad;
      o.nibble_order = order;
      PackedTensor p = quantize(x, o);
      // Every scale byte, NaN included (V12's byte is a power of two: up to 2^127).
      if (r.format != Format::nvfp4) scramble_scales(p, 0, r.hif4.arithmetic == Hif4Arithmetic::pow2_v12 ? 175 : 255, rng);
      Tensor want = dequantize(p);
      // NVFP4: the GEMM multiplies q*s per element and applies S_dec after the
      // sum (docs/gemm.md), the fp32(fp32(q*s)*S_dec) order; the libraries'
      // own dequantize orders (docs/formats.md) can differ in the last bit.
      if (r.format == Format::nvfp4 && r.nv.rule != NvScaleRule::ggml && reference::nvfp4_decode_is_block_factor(r)) {
        Recipe gemm_order = r;
        gemm_order.nv.decode = NvDecode::code_times_scale_then_tensor;
        const reference::NvTensorScale ts{p.global_amax, p.global_encode_scale, p.global_decode_scale};
        const int64_t blocks = p.blocks_per_row();
        for (int64_t row = 0; row < 5; ++row)
          for (int64_t b = 0; b < blocks; ++b) {
            uint8_t codes[reference::kNvBlock];
            float out[reference::kNvBlock];
            for (int j = 0; j < reference::kNvBlock; ++j) {
              const NibbleSlot s = nibble_slot(p.nibble_order, reference::kNvBlock, b, j);
              codes[j] = static_cast<uint8_t>((p.codes[row * p.padded_len / 2 + s.byte] >> (s.high ? 4 : 0)) & 0xF);
            }
            reference::nvfp4_decode_block(gemm_order, ts, p.scales[row * blocks + b], codes, out);
            for (int j = 0; j < reference::kNvBlock && b * reference::kNvBlock + j < k; ++j)
              want.data[row * k + b * reference::kNvBlock + j] = out[j];
          }
      }
      GemmOptions g;
      g.model = GemmModel::fma_fp32;
      const Tensor got = gemm(p, identity(k), g);
      int bad = 0;
      for (size_t i = 0; i < want.data.size(); ++i) {
        // NaN anywhere in the row, or an Inf off the diagonal (Inf·0), gives NaN.
        const int64_t row = static_cast<int64_t>(i) / k, col = static_cast<int64_t>(i) % k;
        bool poisoned = false;
        for (int64_t kk = 0; kk < k; ++kk) {
          const float v = want.data[row * k + kk];
          poisoned = poisoned || std::isnan(v) || (std::isinf(v) && kk != col);
        }
        if (poisoned) {
          EXPECT_TRUE(std::isnan(got.data[i])) << r.id << " element " << i;
          continue;
        }
        // fma(-0, 1, +0) = +0: the sign of a zero element does not survive a sum.
        const bool ok = want.data[i] == 0.0f ? got.data[i] == 0.0f : same_bits(got.data[i], want.data[i]);
        if (!ok && ++bad <= 3)
          ADD_FAILURE() << r.id << " element " << i << ": gemm reads " << got.data[i] << ", dequantize gives "
                        << want.data[i];
      }
    }
  }
}

TEST(GemmOperands, PaddingBytesAreIgnored) {
  std::mt19937_64 rng(25);
  PackedTensor a = quantized("mxfp4.ocp", {3, 40}, 1, rng);  // 40 of 64 used
  const PackedTensor b = quantized("mxfp4.ocp", {40, 4}, 0, rng);
  GemmOptions o;
  const Tensor want = gemm(a, b, o);
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t byte = 20; byte < 32; ++byte) a.codes[r * 32 + byte] = 0x77;  // +6 in the tail
  mismatches(gemm(a, b, o), want, "garbage in the padding");
}

// unpack_row (a byte at a time for the position-local orders) against the
// definition, nibble_slot, for every order and block size.
TEST(GemmOperands, UnpackRowFollowsNibbleSlot) {
  std::mt19937_64 rng(27);
  for (NibbleOrder order : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::split_half})
    for (int block : {16, 32, 64}) {
      const int64_t padded = 5 * block;
      std::vector<uint8_t> bytes(padded / 2), codes(padded);
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
      unpack_row(bytes.data(), order, block, padded, codes.data());
      for (int64_t b = 0; b < padded / block; ++b)
        for (int j = 0; j < block; ++j) {
          const NibbleSlot slot = nibble_slot(order, block, b, j);
          ASSERT_EQ(codes[b * block + j], (bytes[slot.byte] >> (slot.high ? 4 : 0)) & 0xF)
              << "order " << static_cast<int>(order) << " block " << block << " element " << b * block + j;
        }
    }
}

// decode_fp32_operand (codes to fp32 in one pass, the operands of fma_fp32
// and fast) against the integer form's element_fp32 (to_fp32_rows of
// unpack_operand), bit for bit, on every compiled target and 1 and 3 threads:
// every recipe, every code (−0 and ggml's +0 included), every scale byte
// whose unit is finite (NaN blocks included), random HiF4 L2/L3 bits, every
// nibble order, ragged k, both sides and both B layouts.
TEST(GemmDecode, EveryTargetMatchesTheIntegerForm) {
  using namespace gemm_detail;
  std::mt19937_64 rng(26);
  int checked = 0;
  for (const Recipe& r : all_recipes()) {
    if (r.fake_quant_only) continue;
    const int block = block_size(r.format);
    for (int64_t k : {int64_t{7}, int64_t{3} * block + 5, int64_t{4} * block})
      for (std::optional<NibbleOrder> order : {std::optional<NibbleOrder>{}, std::optional{NibbleOrder::high_first},
                                               std::optional{NibbleOrder::split_half}})
        for (auto [side, layout] : {std::pair{Side::a, BLayout::kn}, {Side::b, BLayout::kn}, {Side::b, BLayout::nk}}) {
          const int axis = k_axis(side, layout);
          std::vector<int64_t> shape = {11, 11};
          shape[axis] = k;
          Tensor x = random_tensor(shape, rng);
          if (r.bf16_input_only)
            for (float& v : x.data) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
          QuantOptions o;
          o.recipe = std::string(r.id);
          o.axis = axis;
          o.tail = TailPolicy::pad;
          o.nibble_order = order;
          PackedTensor p = quantize(x, o);
          for (uint8_t& c : p.codes) c = static_cast<uint8_t>(rng());
          const ElementTables tables = checked_element_tables(p, side, layout);
          const int scale_bytes = r.format == Format::hif4 ? 4 : 1;
          for (int64_t i = 0; i < p.rows * p.blocks_per_row(); ++i) {
            const std::vector<uint8_t> before(p.scales.begin() + i * scale_bytes,
                                              p.scales.begin() + (i + 1) * scale_bytes);
            for (int s = 0; s < scale_bytes; ++s) p.scales[i * scale_bytes + s] = static_cast<uint8_t>(rng());
            if (std::isinf(tables.units[scale_word(p, i) & 0xFF]))  // refused by the reader: keep the quantizer's
              std::copy(before.begin(), before.end(), p.scales.begin() + i * scale_bytes);
          }
          const std::vector<float> want = to_fp32_rows(make_operand(p, side, layout, 1, OperandForm::integers));
          const std::string what = fmt::format("{} k {} side {} layout {} order {}", r.id, k, side_name(side),
                                               to_string(layout), static_cast<int>(p.nibble_order));
          const auto compare = [&](const DenseOperand& got, const std::string& where) {
            ASSERT_EQ(got.values.size(), want.size()) << what;
            int bad = 0;
            for (size_t i = 0; i < want.size(); ++i)
              if (!same_bits(got.values[i], want[i]) && ++bad <= 3)
                ADD_FAILURE() << what << where << " element " << i << ": decoded " << got.values[i]
                              << ", integer form " << want[i];
          };
          for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
            hwy::SetSupportedTargetsForTest(target);
            compare(decode_fp32_operand(p, side, layout, 1), std::string(" target ") + hwy::TargetName(target));
          }
          hwy::SetSupportedTargetsForTest(0);
          compare(decode_fp32_operand(p, side, layout, 3), " 3 threads");
          ++checked;
        }
  }
  EXPECT_GT(checked, 100);
}

// ---------------------------------------------------------------------------
// fast: Eigen, order undefined, so only close to exact.

TEST(GemmFast, CloseToExact) {
  std::mt19937_64 rng(26);
  const PackedTensor a = quantized("nvfp4.te", {20, 256}, 1, rng);
  const PackedTensor b = quantized("nvfp4.te", {256, 30}, 0, rng);
  GemmOptions o;
  const Tensor exact = gemm(a, b, o);
  o.model = GemmModel::fast;
  const Tensor fast = gemm(a, b, o);
  ASSERT_EQ(fast.shape, exact.shape);
  // Any fp32 summation order is within k·2^-24·Σ|a·b| of the exact sum.
  const Tensor da = dequantize(a), db = dequantize(b);
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t j = 0; j < 30; ++j) {
      double abs_sum = 0;
      for (int64_t kk = 0; kk < 256; ++kk) abs_sum += std::fabs(double{da.data[i * 256 + kk]} * db.data[kk * 30 + j]);
      EXPECT_NEAR(fast.data[i * 30 + j], exact.data[i * 30 + j], 256 * 0x1p-24 * abs_sum + 1e-30);
    }
}

// fast decodes a packed W 1024 rows at a time (gemm.cpp fast_gemm_over_panels):
// two whole panels and a ragged third, W as given (nk) and B as k×n (kn).
TEST(GemmFast, PanelsOfWCoverEveryColumn) {
  std::mt19937_64 rng(27);
  constexpr int64_t m = 3, k = 64, n = 2 * 1024 + 5;
  const PackedTensor a = quantized("mxfp4.ocp", {m, k}, 1, rng);
  const PackedTensor w = quantized("mxfp4.ocp", {n, k}, 1, rng);
  const PackedTensor bk = quantized("mxfp4.ocp", {k, n}, 0, rng);
  for (const auto& [b, layout] : {std::pair{&w, BLayout::nk}, std::pair{&bk, BLayout::kn}}) {
    GemmOptions o;
    o.b_layout = layout;
    const Tensor exact = gemm(a, *b, o);
    o.model = GemmModel::fast;
    const Tensor fast = gemm(a, *b, o);
    ASSERT_EQ(fast.shape, exact.shape);
    const Tensor da = dequantize(a), db = dequantize(*b);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double abs_sum = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const float bv = layout == BLayout::nk ? db.data[j * k + kk] : db.data[kk * n + j];
          abs_sum += std::fabs(double{da.data[i * k + kk]} * bv);
        }
        ASSERT_NEAR(fast.data[i * n + j], exact.data[i * n + j], k * 0x1p-24 * abs_sum + 1e-30)
            << "column " << j << " layout " << to_string(layout);
      }
  }
}

// Each sgemm `fast` can run (fast.cpp): Eigen for every compiled SIMD target
// (AVX-512 and AVX2 builds of its own, else the baseline ISA) and OpenBLAS,
// each on a ragged product into rows of C with a gap (ldc > n), against a
// double-precision sum; and the choice by product size.
TEST(GemmFast, EverySgemmOnEveryTarget) {
  constexpr int64_t m = 37, n = 45, k = 300, ldc = n + 3;
  std::mt19937_64 rng(28);
  std::normal_distribution<float> g;
  std::vector<float> a(m * k), bt(n * k);
  for (float& v : a) v = g(rng);
  for (float& v : bt) v = g(rng);
  const auto check = [&](const gemm_detail::FastSgemm& sgemm, int threads, const std::string& what) {
    std::vector<float> c(m * ldc, -7.0f);
    sgemm.run(a.data(), bt.data(), m, n, k, threads, c.data(), ldc);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, abs_sum = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          sum += double{a[i * k + kk]} * bt[j * k + kk];
          abs_sum += std::fabs(double{a[i * k + kk]} * bt[j * k + kk]);
        }
        ASSERT_NEAR(c[i * ldc + j], sum, k * 0x1p-24 * abs_sum) << what << " C[" << i << ", " << j << "]";
      }
      for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], -7.0f) << what << ": wrote past row " << i;
    }
  };
  int eigen_avx512 = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const gemm_detail::FastSgemm eigen = gemm_detail::eigen_sgemm_for_cpu();
    const std::string library = eigen.library;
    if (target <= HWY_AVX3) {  // AVX3 and its successors, the lower bits (x86 only here)
      EXPECT_EQ(library, "Eigen (AVX-512)");
      ++eigen_avx512;
    } else if (target == HWY_AVX2) {
      EXPECT_EQ(library, "Eigen (AVX2)");
    } else {
      EXPECT_EQ(library, "Eigen");
    }
    EXPECT_FALSE(eigen.own_threads);
    for (int threads : {1, 2}) check(eigen, threads, fmt::format("{} on {}, {} threads", library,
                                                                  hwy::TargetName(target), threads));
    // Small products take Eigen for the target.
    EXPECT_EQ(gemm_detail::fast_sgemm(m, n, k).run, eigen.run);
  }
  hwy::SetSupportedTargetsForTest(0);
  if (hwy::SupportedTargets() & ((HWY_AVX3 << 1) - 1)) EXPECT_GT(eigen_avx512, 0);
  const gemm_detail::FastSgemm blas = gemm_detail::openblas_sgemm_if_built();
  if (blas.run) {
    EXPECT_TRUE(blas.own_threads);
    check(blas, 2, "OpenBLAS");
    // Above 2^31 multiply-adds: OpenBLAS.
    EXPECT_EQ(gemm_detail::fast_sgemm(2048, 2048, 2048).run, blas.run);
    EXPECT_EQ(gemm_detail::fast_sgemm(1024, 2048, 1024).run, gemm_detail::eigen_sgemm_for_cpu().run);
  } else {
    EXPECT_EQ(gemm_detail::fast_sgemm(2048, 2048, 2048).run, gemm_detail::eigen_sgemm_for_cpu().run);
  }
}

// ---------------------------------------------------------------------------
// Errors: InputError naming the problem.

void expect_input_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no InputError (wanted one mentioning '" << needle << "')";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GemmErrors, BadOperandsAndOptions) {
  std::mt19937_64 rng(27);
  const PackedTensor a = quantized("mxfp4.ocp", {4, 64}, 1, rng);
  const PackedTensor b = quantized("mxfp4.ocp", {64, 3}, 0, rng);
  GemmOptions o;
  expect_input_error([&] { gemm(a, quantized("mxfp4.ocp", {96, 3}, 0, rng), o); }, "inner dimensions");
  expect_input_error([&] { gemm(a, quantized("mxfp4.ocp", {64, 3}, 1, rng), o); }, "blocked along k");
  expect_input_error([&] { gemm(quantized("mxfp4.ocp", {4, 64}, 0, rng), b, o); }, "--axis 1");
  expect_input_error([&] { gemm(a, quantized("nvfp4.te", {64, 3}, 0, rng), o); }, "one format");
  expect_input_error([&] { gemm(random_tensor({4, 64}, rng), random_tensor({64, 3}, rng), o); }, "both operands are dense");
  expect_input_error([&] { gemm(a, random_tensor({60, 3}, rng), o); }, "inner dimensions");
  o.blocks_per_step = 0;
  expect_input_error([&] { gemm(a, b, o); }, "at least 1");
  o.blocks_per_step = 2;
  expect_input_error([&] { gemm(a, b, o); }, "block_fp32 model only");
  o = GemmOptions{};
  PackedTensor damaged = a;
  damaged.codes.pop_back();
  expect_input_error([&] { gemm(damaged, b, o); }, "code bytes");
  damaged = a;
  damaged.recipe_id = "mxfp4.nope";
  expect_input_error([&] { gemm(damaged, b, o); }, "unknown recipe");
  PackedTensor v12 = quantized("hif4.v12_pow2", {2, 64}, 1, rng);
  v12.scales[0] = 200;  // 2^(200-48) is beyond fp32
  expect_input_error([&] { gemm(v12, quantized("hif4.v12_pow2", {64, 2}, 0, rng), o); }, "beyond fp32 range");
}

TEST(GemmErrors, EpilogueShapesAndBLayout) {
  std::mt19937_64 rng(30);
  const PackedTensor a = quantized("mxfp4.ocp", {3, 32}, 1, rng);
  const PackedTensor b = quantized("mxfp4.ocp", {32, 4}, 0, rng);
  Tensor c = random_tensor({4, 3}, rng), bias = random_tensor({3}, rng), bias2 = random_tensor({1, 4}, rng);
  GemmOptions o;
  o.c = &c;
  expect_input_error([&] { gemm(a, b, o); }, "C (the epilogue's source) has shape [4, 3]; D = alpha·(A·B) + "
                                             "beta·C needs [3, 4]");
  o.c = nullptr;
  o.bias = &bias;
  expect_input_error([&] { gemm(a, b, o); }, "bias has shape [3]; it must be [4]");
  o.bias = &bias2;
  expect_input_error([&] { gemm(a, b, o); }, "bias has shape [1, 4]");
  // W (n×k) must be blocked along its axis 1; B (k×n) given as W is refused.
  o = GemmOptions{};
  o.b_layout = BLayout::nk;
  expect_input_error([&] { gemm(a, b, o); }, "B must be blocked along k, its axis 1 (B is n×k, --b-layout nk)");
  expect_input_error([&] { gemm(a, quantized("mxfp4.ocp", {4, 64}, 1, rng), o); },
                     "A is 3×32 and B (W, --b-layout nk) is 4×64: the k dimensions differ");
  expect_input_error([&] { gemm(a, random_tensor({4, 40}, rng), o); }, "the k dimensions differ");
}

TEST(GemmModel, Names) {
  for (GemmModel m : {GemmModel::exact, GemmModel::block_fp32, GemmModel::fma_fp32, GemmModel::fast})
    EXPECT_EQ(parse_gemm_model(to_string(m)), m);
  EXPECT_FALSE(parse_gemm_model("kulisch").has_value());
  for (BLayout l : {BLayout::kn, BLayout::nk}) EXPECT_EQ(parse_b_layout(to_string(l)), l);
  EXPECT_FALSE(parse_b_layout("tn").has_value());
}

// ---------------------------------------------------------------------------
// B as users hold it: W n×k (BLayout::nk, nn.Linear's weight) is B's
// transpose read in place. Quantized along k, W has B's blocks, so every
// model gives the same bits either way.

Tensor transposed(const Tensor& t) {
  Tensor r;
  r.shape = {t.shape[1], t.shape[0]};
  r.data.resize(t.data.size());
  for (int64_t i = 0; i < t.shape[0]; ++i)
    for (int64_t j = 0; j < t.shape[1]; ++j) r.data[j * t.shape[0] + i] = t.data[i * t.shape[1] + j];
  return r;
}

TEST(GemmBLayout, NkEqualsKnOnTransposedDataForEveryModel) {
  std::mt19937_64 rng(31);
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14", "nvfp4.te_2d"}) {
    const int block = block_size(find_recipe(recipe)->format);
    const int64_t m = 9, n = 37, k = 3 * block + 5;
    const PackedTensor a = quantized(recipe, {m, k}, 1, rng);
    const Tensor bk = random_tensor({k, n}, rng), w = transposed(bk);
    QuantOptions q;
    q.recipe = recipe;
    q.tail = TailPolicy::pad;
    q.axis = 0;
    const PackedTensor pb = quantize(bk, q);
    q.axis = 1;
    const PackedTensor pw = quantize(w, q);
    std::vector<ModelCase> models(std::begin(kModels), std::end(kModels));
    models.push_back({GemmModel::fast, 1});
    for (const ModelCase& mc : models)
      for (GemmImpl impl : {GemmImpl::scalar, GemmImpl::simd})
        for (int threads : {1, 3}) {
          if (impl == GemmImpl::scalar && threads != 1) continue;
          if (mc.model == GemmModel::fast && threads != 1) continue;  // fast: its order may follow the threads
          GemmOptions o;
          o.model = mc.model;
          o.blocks_per_step = mc.blocks_per_step;
          o.impl = impl;
          o.threads = threads;
          const std::string what = fmt::format("{} {} x{} {} threads {}", recipe, to_string(mc.model),
                                               mc.blocks_per_step, impl == GemmImpl::simd ? "simd" : "scalar",
                                               threads);
          const Tensor kn = gemm(a, pb, o);
          const Tensor dense_kn = gemm(a, bk, o);
          o.b_layout = BLayout::nk;
          EXPECT_EQ(mismatches(gemm(a, pw, o), kn, what + " packed W"), 0);
          EXPECT_EQ(mismatches(gemm(a, w, o), dense_kn, what + " dense W"), 0);
        }
  }
}

TEST(GemmQuantized, OutputQuantizationIsQuantizeOfC) {
  std::mt19937_64 rng(28);
  const PackedTensor a = quantized("hif4.v14", {4, 128}, 1, rng);
  const PackedTensor b = quantized("hif4.v14", {128, 64}, 0, rng);
  GemmOptions o;
  QuantOptions q;
  q.recipe = "mxfp4";
  q.axis = 0;  // overridden: C is blocked along its last axis
  const PackedTensor c = gemm_quantized(a, b, o, q);
  q.axis = -1;
  const PackedTensor want = quantize(gemm(a, b, o), q);
  EXPECT_EQ(c.axis, 1);
  EXPECT_EQ(c.codes, want.codes);
  EXPECT_EQ(c.scales, want.scales);
}

// ---------------------------------------------------------------------------
// CLI.

Tensor read_f32(const std::filesystem::path& p) {
  const io::Array arr = io::read_npy(p);
  Tensor t;
  t.shape = arr.shape;
  t.data = io::to_f32(arr, p.string());
  return t;
}

TEST(GemmCli, MatchesTheLibraryAndRejectsBadInput) {
  testing::TempDir dir;
  std::mt19937_64 rng(29);
  const Tensor x = random_tensor({6, 100}, rng), w = random_tensor({100, 5}, rng);
  io::write_npy(dir / "a.npy", io::from_f32(x.shape, x.data));
  io::write_npy(dir / "b.npy", io::from_f32(w.shape, w.data));
  const std::string a = (dir / "a.npy").string(), b = (dir / "b.npy").string(), c = (dir / "c.npy").string();

  testing::CliResult r = testing::run_cli("gemm " + a + " " + b + " " + c +
                                          " --format nvfp4 --model block_fp32 --blocks-per-step 4 --alpha 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  QuantOptions qa, qb;
  qa.recipe = qb.recipe = "nvfp4";
  qa.axis = 1;
  qb.axis = 0;
  GemmOptions o;
  o.model = GemmModel::block_fp32;
  o.blocks_per_step = 4;
  o.alpha = 0.5f;
  mismatches(read_f32(c), gemm(quantize(x, qa), quantize(w, qb), o), "cli nvfp4 block_fp32");

  // Packed inputs, a dense operand, the scalar implementation.
  write_packed(dir / "w.safetensors", quantize(w, qb));
  r = testing::run_cli("gemm " + a + " " + (dir / "w.safetensors").string() + " " + c +
                       " --model exact --dense A --impl scalar");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  o = GemmOptions{};
  mismatches(read_f32(c), gemm(x, quantize(w, qb), o), "cli dense A × packed B");

  // Output quantization to a packed file.
  r = testing::run_cli("gemm " + a + " " + b + " " + (dir / "c.safetensors").string() +
                       " --format mxfp4 --model fma_fp32 --out-format hif4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_packed(dir / "c.safetensors").format, Format::hif4);

  // Bad input: exit 2, a message naming the fix, no output written.
  const std::string none = (dir / "none.npy").string();
  r = testing::run_cli("gemm " + a + " " + a + " " + none + " --format mxfp4 --model exact");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("inner dimensions"), std::string::npos) << r.output;
  r = testing::run_cli("gemm " + a + " " + b + " " + none + " --format mxfp4 --model kahan");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("exact, block_fp32, fma_fp32 or fast"), std::string::npos) << r.output;
  r = testing::run_cli("gemm " + a + " " + b + " " + none + " --model exact");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--format"), std::string::npos) << r.output;
  r = testing::run_cli("gemm " + a + " " + b + " " + none + " --format mxfp4 --model exact --blocks-per-step 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(none));

  r = testing::run_cli("gemm --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("Example: fp4emu gemm"), std::string::npos);
}

TEST(GemmCli, BLayoutAndEpilogue) {
  testing::TempDir dir;
  std::mt19937_64 rng(32);
  const Tensor x = random_tensor({6, 70}, rng), w = random_tensor({5, 70}, rng);  // W: n×k
  const Tensor c = random_tensor({6, 5}, rng), bias = random_tensor({5}, rng), bad = random_tensor({6}, rng);
  for (const auto& [name, t] : {std::pair{"x", &x}, {"w", &w}, {"c", &c}, {"bias", &bias}, {"bad", &bad}})
    io::write_npy(dir / (std::string(name) + ".npy"), io::from_f32(t->shape, t->data));
  io::write_npy(dir / "wt.npy", io::from_f32({70, 5}, transposed(w).data));
  const auto f = [&](const char* name) { return (dir / name).string(); };
  const std::string out = f("d.npy");

  // nn.Linear: y = x·Wᵀ·alpha + beta·C + b, W as given.
  testing::CliResult r = testing::run_cli("gemm " + f("x.npy") + " " + f("w.npy") + " " + out +
                                          " --format mxfp4 --model block_fp32 --b-layout nk --alpha 0.5 --c " +
                                          f("c.npy") + " --beta -2 --bias " + f("bias.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  QuantOptions q;
  q.recipe = "mxfp4";
  q.axis = 1;
  GemmOptions o;
  o.model = GemmModel::block_fp32;
  o.b_layout = BLayout::nk;
  o.alpha = 0.5f;
  o.c = &c;
  o.beta = -2.0f;
  o.bias = &bias;
  const Tensor want = gemm(quantize(x, q), quantize(w, q), o);
  EXPECT_EQ(mismatches(read_f32(out), want, "cli nk epilogue"), 0);
  // The same from B = Wᵀ (k×n), the default layout.
  r = testing::run_cli("gemm " + f("x.npy") + " " + f("wt.npy") + " " + f("d2.npy") +
                       " --format mxfp4 --model block_fp32 --alpha 0.5 --c " + f("c.npy") + " --beta -2 --bias " +
                       f("bias.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(mismatches(read_f32(f("d2.npy")), want, "cli kn epilogue"), 0);

  // Bad input: exit 2 naming the option and the fix, nothing written.
  const std::string none = f("none.npy");
  const std::string base = "gemm " + f("x.npy") + " " + f("w.npy") + " " + none + " --format mxfp4 --model exact ";
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"", "inner dimensions"},  // W without --b-layout nk
           {"--b-layout nk --bias " + f("bad.npy"), "--bias " + f("bad.npy") + ": bias has shape [6]; it must be [5]"},
           {"--b-layout nk --c " + f("bias.npy"), "--c " + f("bias.npy") + ": C (the epilogue's source)"},
           {"--b-layout nk --beta 2", "no --c FILE is given"},
           {"--b-layout tn", "--b-layout 'tn' is unknown; use kn"},
           {"--b-layout nk --c " + none, none}}) {
    r = testing::run_cli(base + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << ": " << r.output;
    EXPECT_FALSE(std::filesystem::exists(none)) << args;
  }
}

}  // namespace
}  // namespace fp4emu
