// The GEMM accumulation models against independent oracles (docs/gemm.md):
// - `exact` against MPFR: every element value decoded from the packed bytes
//   with the spec tables (oracle.hpp, sharing no code with src/), products
//   and sums exact at 2048 bits, one rounding to fp32 by MPFR;
// - `block_fp32` and `fma_fp32` against naive scalar loops over the same
//   oracle values (MPFR for each step's exact sum, std::fma for the CUTLASS
//   order);
// - the Kulisch accumulator itself against MPFR on wide and clustered terms.
// Cases: quantized random tensors, random codes with random scale bytes over
// each format's whole range (NaN codes included), subnormal results,
// cancellation, dense operands with Inf/NaN, every packing option.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mpfr.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../src/gemm/exact_sum.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "oracle.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::same_bits;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The canonical NaN of NVIDIA GPUs (CUDA's CUDART_NAN_F), written out here.
const float kGemmNaN = std::bit_cast<float>(0x7FFFFFFFu);

// ---------------------------------------------------------------------------
// Oracle: exact element values from the packed bytes (spec tables only).

// Rows along k: A's rows, or B's columns. NaN marks a NaN block.
struct ExactMatrix {
  int64_t rows = 0, k = 0;
  std::vector<double> v;
  double at(int64_t r, int64_t kk) const { return v[r * k + kk]; }
};

// Element code kk of a packed row (packed_tensor.hpp, docs/spec/mxfp4.md §6.1).
uint32_t code_at(const PackedTensor& p, int64_t row, int64_t kk) {
  const uint8_t* bytes = p.codes.data() + row * (p.padded_len / 2);
  switch (p.nibble_order) {
    case NibbleOrder::low_first: return (kk & 1) ? bytes[kk / 2] >> 4 : bytes[kk / 2] & 0xF;
    case NibbleOrder::high_first: return (kk & 1) ? bytes[kk / 2] & 0xF : bytes[kk / 2] >> 4;
    case NibbleOrder::split_half: {
      const int64_t half = p.block_size / 2, b = kk / p.block_size, j = kk % p.block_size;
      const uint8_t byte = bytes[b * half + j % half];
      return j >= half ? byte >> 4 : byte & 0xF;
    }
  }
  return 0;
}

// docs/spec/hif4.md §5.2: bit g of the L2 byte (1) or of the L3 bytes (2, 3).
int hif4_bit(const uint8_t* word, int byte, int g, ScaleBitOrder order) {
  const int bit = order == ScaleBitOrder::lsb_first ? g % 8 : 7 - g % 8;
  return (word[byte + g / 8] >> bit) & 1;
}

ExactMatrix oracle_values(const PackedTensor& p) {
  ExactMatrix x;
  x.rows = p.rows;
  x.k = p.axis_len;
  x.v.resize(x.rows * x.k);
  const int sb = p.format == Format::hif4 ? 4 : 1;
  const int64_t blocks = p.padded_len / p.block_size;
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t kk = 0; kk < x.k; ++kk) {
      const uint8_t* s = p.scales.data() + (r * blocks + kk / p.block_size) * sb;
      const uint32_t c = code_at(p, r, kk);
      double v = kNaN;
      switch (p.format) {
        case Format::mxfp4:  // docs/spec/mxfp4.md §0: e2m1 · 2^(c-127), 0xFF NaN
          v = oracle::oracle_decode(oracle::e2m1(), c) * oracle::oracle_decode(oracle::e8m0(), s[0]);
          break;
        case Format::nvfp4:  // docs/spec/nvfp4.md §0 without S_dec (applied by alpha'): e2m1 · ue4m3
          v = oracle::oracle_decode(oracle::e2m1(), c) * oracle::oracle_decode(oracle::ue4m3(), s[0] & 0x7F);
          break;
        case Format::hif4: {  // docs/spec/hif4.md §4: s1p2 · 2^(b+c) · E6M2
          const int j = static_cast<int>(kk % 64);
          const int e = hif4_bit(s, 1, j / 8, p.scale_bit_order) + hif4_bit(s, 2, j / 4, p.scale_bit_order);
          v = oracle::oracle_decode(oracle::s1p2(), c) * std::ldexp(1.0, e) *
              oracle::oracle_decode(oracle::e6m2(), s[0]);
          break;
        }
      }
      x.v[r * x.k + kk] = v;
    }
  return x;
}

ExactMatrix dense_values(const Tensor& t, bool is_b) {
  ExactMatrix x;
  x.rows = is_b ? t.shape[1] : t.shape[0];
  x.k = is_b ? t.shape[0] : t.shape[1];
  x.v.resize(x.rows * x.k);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t kk = 0; kk < x.k; ++kk) x.v[r * x.k + kk] = is_b ? t.data[kk * x.rows + r] : t.data[r * x.k + kk];
  return x;
}

// ---------------------------------------------------------------------------
// MPFR: exact sums, one rounding to fp32.

class Mpfr {
 public:
  explicit Mpfr(mpfr_prec_t prec) { mpfr_init2(x_, prec); mpfr_set_zero(x_, 1); }
  ~Mpfr() { mpfr_clear(x_); }
  Mpfr(const Mpfr&) = delete;
  Mpfr& operator=(const Mpfr&) = delete;
  mpfr_ptr get() { return x_; }

 private:
  mpfr_t x_;
};

// Σ a[k]·b[k] over [k0, k1), IEEE specials as in the elementwise products,
// rounded once to fp32 by MPFR (correct rounding, subnormals, overflow).
// The sum starts at −0, the identity of IEEE addition, and MPFR adds with
// IEEE's signs of zero (mpfr_add: +0 unless both are −0, in RNDN), so an
// exact zero is −0 only when every product is −0.
float mpfr_dot(const ExactMatrix& a, int64_t i, const ExactMatrix& b, int64_t j, int64_t k0, int64_t k1) {
  bool nan = false, pinf = false, ninf = false;
  Mpfr sum(2048), prod(128);
  mpfr_set_zero(sum.get(), -1);
  for (int64_t kk = k0; kk < k1; ++kk) {
    const double x = a.at(i, kk), y = b.at(j, kk);
    if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) {
      const double p = x * y;  // IEEE's rule for the special (Inf·0 = NaN)
      if (std::isnan(p)) nan = true;
      else (p > 0 ? pinf : ninf) = true;
      continue;
    }
    mpfr_set_d(prod.get(), x, MPFR_RNDN);
    mpfr_mul_d(prod.get(), prod.get(), y, MPFR_RNDN);  // 106 bits: exact
    mpfr_add(sum.get(), sum.get(), prod.get(), MPFR_RNDN);  // exact at 2048 bits
  }
  if (nan || (pinf && ninf)) return std::numeric_limits<float>::quiet_NaN();
  if (pinf) return std::numeric_limits<float>::infinity();
  if (ninf) return -std::numeric_limits<float>::infinity();
  return mpfr_get_flt(sum.get(), MPFR_RNDN);
}

// The oracle of each model for C[i, j], before the epilogue.
float oracle_model(GemmModel model, const ExactMatrix& a, int64_t i, const ExactMatrix& b, int64_t j, int block,
                   int blocks_per_step) {
  switch (model) {
    case GemmModel::exact: return mpfr_dot(a, i, b, j, 0, a.k);
    case GemmModel::block_fp32: {
      float acc = 0.0f;
      const int64_t step = int64_t{block} * blocks_per_step;
      for (int64_t k0 = 0; k0 < a.k; k0 += step) acc += mpfr_dot(a, i, b, j, k0, std::min(a.k, k0 + step));
      return acc;
    }
    case GemmModel::fma_fp32: {
      float acc = 0.0f;
      for (int64_t kk = 0; kk < a.k; ++kk)
        acc = std::fma(static_cast<float>(a.at(i, kk)), static_cast<float>(b.at(j, kk)), acc);
      return acc;
    }
    case GemmModel::fast: break;
  }
  ADD_FAILURE() << "no oracle for fast";
  return 0.0f;
}

// docs/spec/nvfp4.md §7.1 (TE): fp32(fp32(fp32(alpha·G_A)·G_B)·fp32(1/(36·448·448))),
// written out here from the spec text.
float te_alpha(float alpha, float ga, float gb, float ma = 448.0f, float mb = 448.0f) {
  const float constant = static_cast<float>(1.0 / (36.0 * static_cast<double>(ma) * mb));
  volatile float t = alpha * ga;
  volatile float u = t * gb;
  return u * constant;
}

// ---------------------------------------------------------------------------
// Operands.

Tensor random_tensor(std::vector<int64_t> shape, std::mt19937_64& rng, double sigma = 1.0) {
  Tensor t;
  t.shape = std::move(shape);
  t.data.resize(t.numel());
  std::normal_distribution<float> g(0.0f, static_cast<float>(sigma));
  std::uniform_int_distribution<int> outlier(0, 40);
  for (float& v : t.data) {
    const float gain = outlier(rng) == 0 ? 50.0f : 1.0f;  // one draw per statement: operand order is the compiler's
    v = g(rng) * gain;
  }
  return t;
}

PackedTensor quantized(const std::string& recipe, std::vector<int64_t> shape, int axis, std::mt19937_64& rng) {
  QuantOptions o;
  o.recipe = recipe;
  o.axis = axis;
  o.tail = TailPolicy::pad;
  return quantize(random_tensor(std::move(shape), rng), o);
}

// A packed tensor with random codes (padding included: the GEMM must ignore
// it) and random scale bytes drawn from [lo, hi], for HiF4 with random
// L2/L3 bits.
PackedTensor crafted(const std::string& recipe, std::vector<int64_t> shape, int axis, int lo, int hi,
                     std::mt19937_64& rng) {
  Tensor zeros;
  zeros.shape = std::move(shape);
  zeros.data.assign(zeros.numel(), 0.0f);
  QuantOptions o;
  o.recipe = recipe;
  o.axis = axis;
  o.tail = TailPolicy::pad;
  if (recipe.rfind("nvfp4", 0) == 0) o.global_amax = 1.0f;
  PackedTensor p = quantize(zeros, o);
  std::uniform_int_distribution<int> byte(0, 255), scale(lo, hi);
  for (uint8_t& c : p.codes) c = static_cast<uint8_t>(byte(rng));
  const int sb = p.format == Format::hif4 ? 4 : 1;
  for (size_t i = 0; i < p.scales.size(); ++i)
    p.scales[i] = static_cast<uint8_t>(i % sb == 0 ? scale(rng) : byte(rng));
  return p;
}

struct ModelCase {
  GemmModel model;
  int blocks_per_step;
};
const ModelCase kModels[] = {{GemmModel::exact, 1},      {GemmModel::block_fp32, 1}, {GemmModel::block_fp32, 2},
                             {GemmModel::block_fp32, 3}, {GemmModel::fma_fp32, 1}};

// The epilogue's other inputs (GemmOptions::c, beta, bias).
struct EpilogueInputs {
  const Tensor* c = nullptr;
  float beta = 1.0f;
  const Tensor* bias = nullptr;
};

// fma(x, y, z) as one rounding of the exact x·y + z: MPFR, with IEEE's signs
// of zero (mpfr_mul: the signs' exclusive or; mpfr_add in RNDN: +0 unless
// both are −0). Specials in double, where x·y is exact and IEEE gives the
// same Inf or NaN.
float oracle_fma(float x, float y, float z) {
  if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(z))
    return static_cast<float>(static_cast<double>(x) * y + z);
  Mpfr p(1024), t(64);
  mpfr_set_flt(p.get(), x, MPFR_RNDN);
  mpfr_mul_d(p.get(), p.get(), y, MPFR_RNDN);  // 48 significant bits: exact
  mpfr_set_flt(t.get(), z, MPFR_RNDN);
  mpfr_add(p.get(), p.get(), t.get(), MPFR_RNDN);  // exact at 1024 bits
  return mpfr_get_flt(p.get(), MPFR_RNDN);
}

// docs/gemm.md "Epilogue", written from CUTLASS's Sm90LinCombPerColBias:
// T = fma(alpha', acc, bias), or alpha'·acc without a bias (acc without
// either); D = fma(beta, C, T) when C is given.
float oracle_epilogue(float acc, std::optional<float> alpha, const EpilogueInputs& e, int64_t i, int64_t j,
                      int64_t n) {
  float t = acc;
  if (e.bias) t = oracle_fma(alpha.value_or(1.0f), acc, e.bias->data[j]);
  else if (alpha) t = static_cast<float>(static_cast<double>(*alpha) * acc);  // exact in double, one rounding
  if (e.c) t = oracle_fma(e.beta, e.c->data[i * n + j], t);
  return t;
}

// Checks every model, both implementations, against the oracles.
// `alpha` is the option passed to gemm(), `epilogue` the alpha' expected;
// `inputs` the epilogue's source C and bias.
void expect_models_match_oracle(const GemmOperand& a, const GemmOperand& b, const ExactMatrix& ea,
                                const ExactMatrix& eb, int block, std::optional<float> alpha,
                                std::optional<float> epilogue, const std::string& what,
                                const EpilogueInputs& inputs = {}) {
  for (const ModelCase& mc : kModels)
    for (GemmImpl impl : {GemmImpl::scalar, GemmImpl::simd}) {
      GemmOptions o;
      o.model = mc.model;
      o.blocks_per_step = mc.blocks_per_step;
      o.impl = impl;
      o.alpha = alpha;
      o.c = inputs.c;
      o.beta = inputs.beta;
      o.bias = inputs.bias;
      const Tensor c = gemm(a, b, o);
      ASSERT_EQ(c.shape, (std::vector<int64_t>{ea.rows, eb.rows}));
      int failures = 0;
      for (int64_t i = 0; i < ea.rows; ++i)
        for (int64_t j = 0; j < eb.rows; ++j) {
          float want = oracle_model(mc.model, ea, i, eb, j, block, mc.blocks_per_step);
          want = oracle_epilogue(want, epilogue, inputs, i, j, eb.rows);
          if (std::isnan(want)) want = kGemmNaN;  // docs/gemm.md "NaN": one NaN, 0x7fffffff
          const float got = c.data[i * eb.rows + j];
          if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want) && ++failures <= 3)
            ADD_FAILURE() << what << " model " << to_string(mc.model) << " x" << mc.blocks_per_step
                          << (impl == GemmImpl::simd ? " simd" : " scalar") << " C[" << i << "," << j
                          << "] = " << got << " (" << std::hexfloat << got << "), oracle " << want
                          << std::defaultfloat;
        }
    }
}

void check_packed_pair(const PackedTensor& a, const PackedTensor& b, const std::string& what) {
  expect_models_match_oracle(a, b, oracle_values(a), oracle_values(b), a.block_size, std::nullopt,
                             gemm_alpha(a, b, std::nullopt), what);
}

const char* const kRecipes[] = {"hif4.v14", "hif4.amct", "mxfp4.ocp", "mxfp4.rceil", "nvfp4.te", "nvfp4.torchao"};

// ---------------------------------------------------------------------------
// The oracle's own rounding (a failure here would void the rest).

TEST(GemmOracle, MpfrRoundsToFp32WithSubnormalsAndOverflow) {
  auto round = [](double hi, double lo, double lo2 = 0.0) {
    Mpfr s(2048), t(64);
    mpfr_set_d(s.get(), hi, MPFR_RNDN);
    for (double v : {lo, lo2}) {
      mpfr_set_d(t.get(), v, MPFR_RNDN);
      mpfr_add(s.get(), s.get(), t.get(), MPFR_RNDN);
    }
    return mpfr_get_flt(s.get(), MPFR_RNDN);
  };
  EXPECT_EQ(round(std::ldexp(1.0, -150), 0), 0.0f);                                     // tie to even (0)
  EXPECT_EQ(round(3 * std::ldexp(1.0, -150), 0), std::ldexp(1.0f, -148));             // tie to even (2·2^-149)
  EXPECT_EQ(round(std::ldexp(1.0, -150), std::ldexp(1.0, -400)), std::ldexp(1.0f, -149));  // sticky bit
  EXPECT_EQ(round(1.0, std::ldexp(1.0, -24)), 1.0f);                                    // tie to even
  EXPECT_EQ(round(1.0, std::ldexp(1.0, -24), std::ldexp(1.0, -300)), 1.0f + 0x1p-23f);
  const double max_plus_half_ulp = static_cast<double>(std::numeric_limits<float>::max()) + std::ldexp(1.0, 103);
  EXPECT_TRUE(std::isinf(round(max_plus_half_ulp, 0)));                                 // tie goes to 2^128
  EXPECT_EQ(round(max_plus_half_ulp, -std::ldexp(1.0, -500)), std::numeric_limits<float>::max());
}

TEST(GemmOracle, TeAlphaMatchesTheSpecExample) {
  // docs/spec/nvfp4.md §7.1: G_A = 1000, G_B = 10 gives 0.00138401717 (not S_dec,A·S_dec,B).
  EXPECT_NEAR(te_alpha(1.0f, 1000.0f, 10.0f), 0.00138401717, 5e-12);
  // The constant is the correctly rounded fp32(1/(36·448²)).
  Mpfr q(256);
  mpfr_set_ui(q.get(), 1, MPFR_RNDN);
  mpfr_div_ui(q.get(), q.get(), 36UL * 448 * 448, MPFR_RNDN);
  EXPECT_EQ(static_cast<float>(1.0 / (36.0 * 448 * 448)), mpfr_get_flt(q.get(), MPFR_RNDN));
}

// ---------------------------------------------------------------------------
// The Kulisch accumulator.

TEST(GemmExactSum, RandomTermsAgainstMpfr) {
  using gemm_detail::Term;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> mant(-(int64_t{1} << 31) + 1, (int64_t{1} << 31) - 1);
  for (int trial = 0; trial < 3000; ++trial) {
    const int count = 1 + static_cast<int>(rng() % 70);
    // Spread from none (the int64 path) to the whole range (the Kulisch path),
    // and centres from deep subnormal to overflow.
    const int spread = std::vector<int>{0, 5, 20, 40, 200, 600}[trial % 6];
    const int centre = static_cast<int>(rng() % 560) - 300;
    std::uniform_int_distribution<int> ex(std::max(-320, centre - spread / 2),
                                          std::min(gemm_detail::ExactSum::kMaxTermExponent - 40, centre + spread / 2));
    std::vector<Term> terms(count);
    Mpfr sum(4096), t(64);
    for (int i = 0; i < count; ++i) {
      Term& term = terms[i];
      term = {mant(rng) >> (rng() % 31), ex(rng)};
      if (trial % 5 == 0 && (i & 1)) term = {-terms[i - 1].t, terms[i - 1].e};  // cancelling pairs
      mpfr_set_si_2exp(t.get(), term.t, term.e, MPFR_RNDN);
      mpfr_add(sum.get(), sum.get(), t.get(), MPFR_RNDN);
    }
    const float want = mpfr_get_flt(sum.get(), MPFR_RNDN);
    const float got = gemm_detail::sum_terms_to_fp32(terms.data(), count);
    gemm_detail::ExactSum s;
    for (const Term& term : terms) s.add(term.t, term.e);
    ASSERT_TRUE(same_bits(got, want)) << "trial " << trial << ": " << got << " vs " << want;
    ASSERT_TRUE(same_bits(s.round_to_fp32(), want)) << "trial " << trial;
  }
}

TEST(GemmExactSum, ScaledInt64AndSpecials) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t m = static_cast<int64_t>(rng()) >> (rng() % 40);  // beyond 2^53 too
    const int e = static_cast<int>(rng() % 500) - 320;
    Mpfr x(128);
    mpfr_set_sj_2exp(x.get(), m, e, MPFR_RNDN);
    ASSERT_TRUE(same_bits(gemm_detail::round_scaled_to_fp32(m, e), mpfr_get_flt(x.get(), MPFR_RNDN)))
        << m << " * 2^" << e;
  }
  gemm_detail::ExactSum s;
  EXPECT_EQ(std::bit_cast<uint32_t>(s.round_to_fp32()), 0u);  // empty sum: +0
  s.add(5, -3);
  s.add(-5, -3);
  EXPECT_EQ(std::bit_cast<uint32_t>(s.round_to_fp32()), 0u);  // exact cancellation: +0
  s.add(-1, -400 + 80);
  EXPECT_EQ(std::bit_cast<uint32_t>(s.round_to_fp32()), 0x80000000u);  // negative underflow: -0
  // IEEE 754 §6.3 over many addends: −0 only when every addend is −0.
  gemm_detail::ExactSum z;
  z.add_zero(true);
  z.add_zero(true);
  EXPECT_EQ(std::bit_cast<uint32_t>(z.round_to_fp32()), 0x80000000u);
  z.add_zero(false);
  EXPECT_EQ(std::bit_cast<uint32_t>(z.round_to_fp32()), 0u);
  z.clear();
  z.add_zero(true);
  z.add(3, 0);
  z.add(-3, 0);
  z.add_zero(true);
  EXPECT_EQ(std::bit_cast<uint32_t>(z.round_to_fp32()), 0u);  // a cancelled pair is not −0
  s.add_inf(false);
  EXPECT_EQ(s.round_to_fp32(), std::numeric_limits<float>::infinity());
  s.add_inf(true);
  EXPECT_TRUE(std::isnan(s.round_to_fp32()));
}

// ---------------------------------------------------------------------------
// The models against the oracles.

TEST(GemmModels, QuantizedRandomOperands) {
  std::mt19937_64 rng(1);
  for (const char* recipe : kRecipes) {
    const int block = block_size(find_recipe(recipe)->format);
    for (int64_t k : {int64_t{block}, int64_t{3 * block + 5}}) {
      const PackedTensor a = quantized(recipe, {5, k}, 1, rng);
      const PackedTensor b = quantized(recipe, {k, 7}, 0, rng);
      check_packed_pair(a, b, std::string(recipe) + " k=" + std::to_string(k));
    }
  }
}

TEST(GemmModels, RandomCodesOverTheWholeScaleRange) {
  // Scale spread of the whole format: products from 2^-256 to 2^270 (MXFP4),
  // overflow to Inf, underflow to zero and subnormals, NaN scale codes
  // (E8M0/E6M2 0xFF, UE4M3 0x7F and 0xFF) poisoning their products.
  std::mt19937_64 rng(2);
  for (const char* recipe : kRecipes)
    for (int rep = 0; rep < 3; ++rep) {
      const int block = block_size(find_recipe(recipe)->format);
      const int64_t k = 4 * block + (rep == 2 ? 3 : 0);
      const PackedTensor a = crafted(recipe, {4, k}, 1, 0, 255, rng);
      const PackedTensor b = crafted(recipe, {k, 6}, 0, 0, 255, rng);
      check_packed_pair(a, b, std::string(recipe) + " full range");
    }
}

TEST(GemmModels, NoNaNWideSpreadAndSubnormalResults) {
  std::mt19937_64 rng(3);
  // MXFP4 scale bytes 40..80 put products near 2^-150..2^-90: subnormal fp32
  // block sums and partial sums; 0..254 (no NaN) spreads them over everything.
  for (auto [lo, hi] : {std::pair{40, 80}, std::pair{0, 254}, std::pair{100, 154}}) {
    const PackedTensor a = crafted("mxfp4.ocp", {6, 160}, 1, lo, hi, rng);
    const PackedTensor b = crafted("mxfp4.ocp", {160, 5}, 0, lo, hi, rng);
    check_packed_pair(a, b, "mxfp4 scales " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  for (auto [lo, hi] : {std::pair{0, 0x7E}, std::pair{1, 7}}) {  // UE4M3 incl. subnormal scales
    const PackedTensor a = crafted("nvfp4.te", {5, 96}, 1, lo, hi, rng);
    const PackedTensor b = crafted("nvfp4.te", {96, 6}, 0, lo, hi, rng);
    check_packed_pair(a, b, "nvfp4 scales");
  }
  const PackedTensor a = crafted("hif4.v14", {3, 192}, 1, 0, 254, rng);
  const PackedTensor b = crafted("hif4.v14", {192, 4}, 0, 0, 254, rng);
  check_packed_pair(a, b, "hif4 scales 0..254");
}

// Sets element kk of packed row `row` (low_first) and the scale byte of its block.
void set_element(PackedTensor& p, int64_t row, int64_t kk, uint8_t code, uint8_t scale) {
  uint8_t& byte = p.codes[row * (p.padded_len / 2) + kk / 2];
  byte = static_cast<uint8_t>((kk & 1) ? (byte & 0x0F) | (code << 4) : (byte & 0xF0) | code);
  p.scales[row * (p.padded_len / p.block_size) + kk / p.block_size] = scale;
}

TEST(GemmModels, CancellationAcrossBlocks) {
  // Row of A · column of B over three MXFP4 blocks: +36·2^80, a tiny 2^-42,
  // then -36·2^80. The exact sum is the tiny term; block_fp32 loses it
  // (big + tiny = big), block_fp32 with 3 blocks per step keeps it.
  auto zeros = [](std::vector<int64_t> shape, int axis) {
    Tensor t;
    t.shape = std::move(shape);
    t.data.assign(t.numel(), 0.0f);
    QuantOptions o;
    o.recipe = "mxfp4.ocp";
    o.axis = axis;
    return quantize(t, o);
  };
  PackedTensor a = zeros({1, 96}, 1), b = zeros({96, 1}, 0);
  set_element(a, 0, 0, 0x7, 127 + 40);   // 6·2^40
  set_element(b, 0, 0, 0x7, 127 + 40);
  set_element(a, 0, 32, 0x1, 127 - 20);  // 0.5·2^-20
  set_element(b, 0, 32, 0x1, 127 - 20);
  set_element(a, 0, 64, 0xF, 127 + 40);  // -6·2^40
  set_element(b, 0, 64, 0x7, 127 + 40);
  check_packed_pair(a, b, "cancellation");
  GemmOptions o;
  o.model = GemmModel::exact;
  EXPECT_EQ(gemm(a, b, o).data[0], std::ldexp(1.0f, -42));
  o.model = GemmModel::block_fp32;
  EXPECT_EQ(gemm(a, b, o).data[0], 0.0f);
  o.blocks_per_step = 3;
  EXPECT_EQ(gemm(a, b, o).data[0], std::ldexp(1.0f, -42));
}

TEST(GemmModels, NvfpTwoLevelAlpha) {
  // TE's alpha' after accumulation; a user alpha goes in front of G_A.
  std::mt19937_64 rng(4);
  const PackedTensor a = quantized("nvfp4.te", {4, 64}, 1, rng);
  PackedTensor b = quantized("nvfp4.te", {64, 5}, 0, rng);
  const float want = te_alpha(0.75f, a.global_amax, b.global_amax);
  ASSERT_EQ(gemm_alpha(a, b, 0.75f), want);
  expect_models_match_oracle(a, b, oracle_values(a), oracle_values(b), 16, 0.75f, want, "nvfp4 alpha");
  // Spec example values for the global amaxes.
  PackedTensor a2 = a, b2 = b;
  a2.global_amax = 1000.0f;
  b2.global_amax = 10.0f;
  EXPECT_EQ(gemm_alpha(a2, b2, std::nullopt), te_alpha(1.0f, 1000.0f, 10.0f));
  // te_4over6 (M = 256) with te: the constant is 1/(36·256·448).
  const PackedTensor c = quantized("nvfp4.te_4over6", {4, 64}, 1, rng);
  EXPECT_EQ(gemm_alpha(c, b, std::nullopt), te_alpha(1.0f, c.global_amax, b.global_amax, 256.0f, 448.0f));
  // Other two-level recipes: fp32(fp32(alpha·S_dec,A)·S_dec,B).
  const PackedTensor t = quantized("nvfp4.torchao", {64, 5}, 0, rng);
  volatile float s = 2.0f * a.global_decode_scale;
  EXPECT_EQ(gemm_alpha(a, t, 2.0f), s * t.global_decode_scale);
  // Single-level and other formats: alpha as given, or none.
  const PackedTensor g = quantized("nvfp4.torchao_1l", {4, 64}, 1, rng);
  const PackedTensor h = quantized("nvfp4.torchao_1l", {64, 5}, 0, rng);
  EXPECT_FALSE(gemm_alpha(g, h, std::nullopt).has_value());
  EXPECT_EQ(gemm_alpha(g, h, 3.0f), 3.0f);
}

TEST(GemmModels, DenseOperandsWithSpecials) {
  // W4A16: dense bf16 activations (A) times packed weights (B), and the
  // mirror; dense Inf and NaN follow IEEE (Inf·0 = NaN, +Inf + -Inf = NaN).
  std::mt19937_64 rng(5);
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14"}) {
    const int block = block_size(find_recipe(recipe)->format);
    const int64_t k = 2 * block + 7;
    Tensor x = random_tensor({5, k}, rng, 3.0);
    for (float& v : x.data) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);  // bf16 values
    x.data[3] = std::numeric_limits<float>::infinity();
    x.data[k + 1] = -std::numeric_limits<float>::infinity();
    x.data[2 * k + 4] = std::numeric_limits<float>::quiet_NaN();
    x.data[3 * k + 2] = std::ldexp(1.0f, -140);  // subnormal input
    const PackedTensor w = quantized(recipe, {k, 6}, 0, rng);
    expect_models_match_oracle(x, w, dense_values(x, false), oracle_values(w), block, std::nullopt,
                               gemm_alpha(x, w, std::nullopt), std::string("dense A × ") + recipe);
    const PackedTensor a = quantized(recipe, {4, k}, 1, rng);
    Tensor y = random_tensor({k, 3}, rng);
    y.data[5] = std::numeric_limits<float>::infinity();
    expect_models_match_oracle(a, y, oracle_values(a), dense_values(y, true), block, std::nullopt,
                               gemm_alpha(a, y, std::nullopt), std::string(recipe) + " × dense B");
  }
}

TEST(GemmModels, EveryPackingReadsTheSameValues) {
  // Nibble orders and HiF4 scale-bit orders change bytes, not values: the
  // oracle decodes each packing itself, and the GEMM must agree with it.
  std::mt19937_64 rng(6);
  for (NibbleOrder order : {NibbleOrder::high_first, NibbleOrder::split_half}) {
    QuantOptions o;
    o.recipe = "mxfp4.ocp";
    o.nibble_order = order;
    o.axis = 1;
    const PackedTensor a = quantize(random_tensor({3, 64}, rng), o);
    o.axis = 0;
    const PackedTensor b = quantize(random_tensor({64, 4}, rng), o);
    check_packed_pair(a, b, "nibble order " + std::string(to_string(order)));
  }
  QuantOptions o;
  o.recipe = "hif4.v14";
  o.scale_bit_order = ScaleBitOrder::msb_first;
  o.axis = 1;
  const PackedTensor a = quantize(random_tensor({3, 128}, rng), o);
  o.axis = 0;
  const PackedTensor b = quantize(random_tensor({128, 4}, rng), o);
  check_packed_pair(a, b, "hif4 msb_first");
}

// ---------------------------------------------------------------------------
// Sign of zero and NaN bits (docs/gemm.md "Sign of zero", "NaN").

TEST(GemmSignOfZero, RandomCodesUnderflowingIntoNegativeZeroCodes) {
  // MXFP4 random codes (1 in 16 is 0x8 = −0) under the smallest scales:
  // every product underflows fp32, so fma_fp32's chain is a run of ±0 whose
  // sign depends on each −0 element (CUTLASS's a' = fp32(a)·fp32(sf) keeps
  // it). The oracle decodes 0x8 as −0 from the spec table.
  std::mt19937_64 rng(21);
  int negative_zeros = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const PackedTensor a = crafted("mxfp4.ocp", {8, 67}, 1, 0, 24, rng);
    const PackedTensor b = crafted("mxfp4.ocp", {67, 9}, 0, 0, 24, rng);
    check_packed_pair(a, b, "mxfp4 tiny scales");
    GemmOptions o;
    o.model = GemmModel::fma_fp32;
    for (float v : gemm(a, b, o).data) negative_zeros += std::bit_cast<uint32_t>(v) == 0x80000000u;
  }
  EXPECT_GT(negative_zeros, 20);  // the case does probe −0 results
}

TEST(GemmSignOfZero, AllNegativeZeroProducts) {
  // Row 0 of A holds only −0 (code 0x8) and +0 codes, row 1 only −0;
  // columns of B: positive, −0, negative, mixed. Every product of row 1 with
  // column 0 is −0: `exact` gives −0; block_fp32 and fma_fp32 start from +0
  // and give +0. Row 0 has +0 products: +0 everywhere.
  auto packed = [](std::vector<int64_t> shape, int axis) {
    Tensor t;
    t.shape = std::move(shape);
    t.data.assign(t.numel(), 0.0f);
    QuantOptions o;
    o.recipe = "mxfp4.ocp";
    o.axis = axis;
    return quantize(t, o);
  };
  const int64_t k = 70;  // three blocks, the last one partial
  PackedTensor a = packed({2, k}, 1), b = packed({k, 4}, 0);
  for (int64_t kk = 0; kk < k; ++kk) {
    set_element(a, 0, kk, kk % 3 ? 0x8 : 0x0, 120);
    set_element(a, 1, kk, 0x8, static_cast<uint8_t>(100 + kk % 7));
    set_element(b, 0, kk, 0x1 + kk % 7, 130);
    set_element(b, 1, kk, 0x8, 127);
    set_element(b, 2, kk, 0x9 + kk % 7, 140);
    set_element(b, 3, kk, kk % 2 ? 0x3 : 0x8, 127);
  }
  check_packed_pair(a, b, "all −0 products");
  for (GemmImpl impl : {GemmImpl::scalar, GemmImpl::simd}) {
    GemmOptions o;
    o.impl = impl;
    o.model = GemmModel::exact;
    const std::vector<uint32_t> exact_bits = {0, 0, 0, 0, 0x80000000u, 0, 0, 0};
    const Tensor c = gemm(a, b, o);
    for (size_t i = 0; i < c.data.size(); ++i) EXPECT_EQ(std::bit_cast<uint32_t>(c.data[i]), exact_bits[i]) << i;
    // A negative alpha flips the sign of every zero.
    o.alpha = -2.0f;
    EXPECT_EQ(std::bit_cast<uint32_t>(gemm(a, b, o).data[4]), 0u);
    EXPECT_EQ(std::bit_cast<uint32_t>(gemm(a, b, o).data[0]), 0x80000000u);
    o.alpha.reset();
    for (GemmModel m : {GemmModel::block_fp32, GemmModel::fma_fp32}) {
      o.model = m;
      for (float v : gemm(a, b, o).data) EXPECT_EQ(std::bit_cast<uint32_t>(v), 0u) << to_string(m);
    }
  }
}

TEST(GemmSignOfZero, QuantizedNegativeZerosInEveryFormat) {
  // A = [1, −tiny, −tiny, ...], B = [−tiny, 1, 1, ...]: −tiny quantizes to
  // code 0x8 (−0), so every product is −0 (1·−0, −0·1): `exact` gives −0.
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14", "hif4.amct"}) {
    const int64_t k = block_size(find_recipe(recipe)->format);  // one block: its amax is the 1
    Tensor x, y;
    x.shape = {1, k};
    y.shape = {k, 1};
    x.data.assign(k, -1e-10f);
    y.data.assign(k, 1.0f);
    x.data[0] = 1.0f;
    y.data[0] = -1e-10f;
    QuantOptions o;
    o.recipe = recipe;
    o.axis = 1;
    const PackedTensor a = quantize(x, o);
    o.axis = 0;
    const PackedTensor b = quantize(y, o);
    ASSERT_EQ(a.codes[0] >> 4, 0x8) << recipe;  // element 1 of A is −0
    ASSERT_EQ(b.codes[0] & 0xF, 0x8) << recipe;  // element 0 of B is −0
    check_packed_pair(a, b, std::string(recipe) + " −0 codes");
    for (GemmImpl impl : {GemmImpl::scalar, GemmImpl::simd}) {
      GemmOptions g;
      g.impl = impl;
      EXPECT_EQ(std::bit_cast<uint32_t>(gemm(a, b, g).data[0]), 0x80000000u) << recipe;
    }
  }
}

TEST(GemmSignOfZero, DenseNegativeZerosAndRecipeDecoders) {
  // A dense −0 is −0; a recipe whose decoder reads code 0x8 as +0 (ggml's
  // integer table kvalues_mxfp4) gives +0 products.
  Tensor x;
  x.shape = {2, 32};
  x.data.assign(64, -0.0f);
  x.data[32] = 0.0f;
  Tensor y;
  y.shape = {32, 1};
  y.data.assign(32, 1.5f);
  QuantOptions o;
  o.recipe = "mxfp4.ocp";
  o.axis = 0;
  const PackedTensor w = quantize(y, o);
  expect_models_match_oracle(x, w, dense_values(x, false), oracle_values(w), 32, std::nullopt, std::nullopt,
                             "dense −0");
  GemmOptions g;
  const Tensor c = gemm(x, w, g);
  EXPECT_EQ(std::bit_cast<uint32_t>(c.data[0]), 0x80000000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(c.data[1]), 0u);  // row 1 has one +0

  Tensor z;
  z.shape = {1, 32};
  z.data.assign(32, 0.0f);
  o.axis = 1;
  for (const char* recipe : {"mxfp4.ocp", "mxfp4.ggml"}) {
    o.recipe = recipe;
    PackedTensor za = quantize(z, o);
    for (int64_t kk = 0; kk < 32; ++kk) set_element(za, 0, kk, 0x8, 127);
    for (GemmImpl impl : {GemmImpl::scalar, GemmImpl::simd}) {
      g.impl = impl;
      const float v = gemm(za, w, g).data[0];
      EXPECT_EQ(std::bit_cast<uint32_t>(v), std::string(recipe) == "mxfp4.ggml" ? 0u : 0x80000000u) << recipe;
    }
  }
}

TEST(GemmNaN, EveryModelWritesTheCanonicalNaN) {
  // NaNs made four ways: a NaN scale (E8M0 0xFF), Inf·0 and Inf − Inf with
  // dense infinities, a dense NaN input with a payload and its sign set, and
  // MXFP4 elements beyond fp32 range (6·2^127·2 = Inf in fma_fp32) meeting
  // their negatives. Every NaN is 0x7fffffff, in every model and impl.
  Tensor x;
  x.shape = {4, 32};
  x.data.assign(128, 1.0f);
  x.data[0] = std::numeric_limits<float>::infinity();              // row 0: Inf·0 with column 0
  x.data[33] = std::numeric_limits<float>::infinity();             // row 1: Inf − Inf
  x.data[34] = -std::numeric_limits<float>::infinity();
  x.data[64] = std::bit_cast<float>(0xFFA00001u);                  // row 2: a signaling NaN, sign set
  x.data[96] = std::bit_cast<float>(0x7FC00123u);                  // row 3: a quiet NaN with a payload
  Tensor y;
  y.shape = {32, 2};
  y.data.assign(64, 1.0f);
  y.data[0] = 0.0f;
  QuantOptions o;
  o.recipe = "mxfp4.ocp";
  o.axis = 0;
  PackedTensor w = quantize(y, o);
  w.scales[1] = 0xFF;  // column 1: a NaN block
  int nans = 0;
  for (GemmModel m : {GemmModel::exact, GemmModel::block_fp32, GemmModel::fma_fp32, GemmModel::fast})
    for (GemmImpl impl : {GemmImpl::scalar, GemmImpl::simd}) {
      GemmOptions g;
      g.model = m;
      g.impl = impl;
      for (float v : gemm(x, w, g).data)
        if (std::isnan(v)) {
          ++nans;
          EXPECT_EQ(std::bit_cast<uint32_t>(v), kGemmNaNBits) << to_string(m);
        }
    }
  EXPECT_EQ(nans, 8 * 8);  // column 1 (4 rows) and rows 0..3 of column 0
  // Packed × packed: MXFP4 elements ±6·2^127 (scale byte 0xFE) are ±Inf as
  // fp32 operands of fma_fp32, then Inf − Inf.
  Tensor zeros;
  zeros.shape = {1, 32};
  zeros.data.assign(32, 0.0f);
  o.axis = 1;
  PackedTensor pa = quantize(zeros, o);
  set_element(pa, 0, 0, 0x7, 0xFE);
  set_element(pa, 0, 1, 0xF, 0xFE);
  zeros.shape = {32, 1};
  o.axis = 0;
  PackedTensor pb = quantize(zeros, o);
  set_element(pb, 0, 0, 0x7, 127);
  set_element(pb, 0, 1, 0x7, 127);
  check_packed_pair(pa, pb, "Inf − Inf");
  for (GemmImpl impl : {GemmImpl::scalar, GemmImpl::simd}) {
    GemmOptions g;
    g.model = GemmModel::fma_fp32;
    g.impl = impl;
    EXPECT_EQ(std::bit_cast<uint32_t>(gemm(pa, pb, g).data[0]), kGemmNaNBits);
  }
}

// ---------------------------------------------------------------------------
// The epilogue D = alpha'·acc + beta·C + bias (docs/gemm.md "Epilogue").

Tensor epilogue_tensor(std::vector<int64_t> shape, std::mt19937_64& rng) {
  Tensor t = random_tensor(std::move(shape), rng, 4.0);
  // Values that make the order of roundings visible: zeros of both signs,
  // a subnormal, and (in larger tensors) an Inf and a NaN.
  const float specials[] = {-0.0f, 0.0f, std::ldexp(1.0f, -140), std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < std::size(specials) && 3 * i + 1 < t.data.size(); ++i) {
    if (t.data.size() < 20 && i >= 3) break;
    t.data[3 * i + 1] = specials[i];
  }
  return t;
}

TEST(GemmEpilogue, SourceBetaAndBiasAgainstTheOracle) {
  std::mt19937_64 rng(21);
  for (const char* recipe : {"mxfp4.ocp", "nvfp4.te", "hif4.v14", "nvfp4.torchao_1l"}) {
    const int block = block_size(find_recipe(recipe)->format);
    const int64_t m = 5, n = 7, k = 2 * block + 3;
    const PackedTensor a = quantized(recipe, {m, k}, 1, rng);
    const PackedTensor b = quantized(recipe, {k, n}, 0, rng);
    const Tensor c = epilogue_tensor({m, n}, rng), bias = epilogue_tensor({n}, rng);
    for (std::optional<float> alpha : {std::optional<float>{}, std::optional<float>{0.75f}})
      for (float beta : {1.0f, -0.5f, 0.0f, 3.0f}) {
        const std::string what = fmt::format("{} alpha {} beta {}", recipe, alpha ? *alpha : -1.0f, beta);
        const std::optional<float> used = gemm_alpha(a, b, alpha);
        expect_models_match_oracle(a, b, oracle_values(a), oracle_values(b), block, alpha, used, what + " C+bias",
                                   {&c, beta, &bias});
        expect_models_match_oracle(a, b, oracle_values(a), oracle_values(b), block, alpha, used, what + " C",
                                   {&c, beta, nullptr});
      }
    expect_models_match_oracle(a, b, oracle_values(a), oracle_values(b), block, 2.5f, gemm_alpha(a, b, 2.5f),
                               std::string(recipe) + " bias", {nullptr, 1.0f, &bias});
  }
  // Dense A (W4A16) with a bias: the epilogue does not care where acc came from.
  const Tensor x = random_tensor({3, 40}, rng);
  const PackedTensor w = quantized("mxfp4.ocp", {40, 4}, 0, rng);
  const Tensor bias = epilogue_tensor({4}, rng);
  expect_models_match_oracle(x, w, dense_values(x, false), oracle_values(w), 32, std::nullopt, std::nullopt,
                             "dense A bias", {nullptr, 1.0f, &bias});
}

TEST(GemmEpilogue, EachStepIsOneFusedRounding) {
  // The oracle tests above could pass with a separately rounded multiply and
  // add only if the data never told them apart: here they differ, so the test
  // sees which order gemm() uses.
  std::mt19937_64 rng(22);
  const int64_t m = 16, n = 16, k = 64;
  const PackedTensor a = quantized("mxfp4.ocp", {m, k}, 1, rng);
  const PackedTensor b = quantized("mxfp4.ocp", {k, n}, 0, rng);
  Tensor bias = random_tensor({n}, rng), c = random_tensor({m, n}, rng);
  GemmOptions o;
  o.model = GemmModel::exact;
  const Tensor acc = gemm(a, b, o);
  o.alpha = 0.3f;
  o.bias = &bias;
  o.c = &c;
  o.beta = 0.7f;
  const Tensor d = gemm(a, b, o);
  int fused_differs = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float want = oracle_epilogue(acc.data[i * n + j], 0.3f, {&c, 0.7f, &bias}, i, j, n);
      ASSERT_TRUE(same_bits(d.data[i * n + j], want)) << i << "," << j;
      volatile float t = 0.3f * acc.data[i * n + j];
      volatile float t2 = t + bias.data[j];
      volatile float x = 0.7f * c.data[i * n + j];
      volatile float unfused = x + t2;
      fused_differs += !same_bits(unfused, want);
    }
  EXPECT_GT(fused_differs, 0) << "no output tells a fused epilogue from an unfused one";
}

TEST(GemmEpilogue, FastModelUsesTheSameEpilogue) {
  // `fast` has no defined summation order, but its epilogue is the same:
  // one thread, the same product twice, with and without the epilogue.
  std::mt19937_64 rng(23);
  const Tensor c = epilogue_tensor({6, 5}, rng), bias = epilogue_tensor({5}, rng);
  GemmOptions o;
  o.model = GemmModel::fast;
  o.threads = 1;
  // MXFP4 without alpha: gemm() returns the bare accumulator.
  const PackedTensor a2 = quantized("mxfp4.ocp", {6, 64}, 1, rng);
  const PackedTensor b2 = quantized("mxfp4.ocp", {64, 5}, 0, rng);
  const Tensor bare = gemm(a2, b2, o);
  o.alpha = -1.5f;
  o.c = &c;
  o.beta = 0.25f;
  o.bias = &bias;
  const Tensor d = gemm(a2, b2, o);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      float want = oracle_epilogue(bare.data[i * 5 + j], -1.5f, {&c, 0.25f, &bias}, i, j, 5);
      if (std::isnan(want)) want = kGemmNaN;
      EXPECT_TRUE(same_bits(d.data[i * 5 + j], want)) << i << "," << j;
    }
}

}  // namespace
}  // namespace fp4emu
