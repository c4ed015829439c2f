// HiFloat4 (HiF4) scalar reference quantizer: docs/spec/hif4.md in code.
//
// One 64-element block at a time, for every recipe of the variant map
// (docs/spec/hif4.md §6.0). The recipe's Hif4Params select the steps; every rounding is
// a named call. Arithmetic follows the spec literally:
//   - `float` where the spec says fp32: the build uses -ffp-contract=off, so
//     each float `a * b` or `a + b` is one IEEE binary32 rounding (RNE);
//   - `double` where it says exact / float64: a product of two fp32 values is
//     exact in double;
//   - bf16_rne(v) where it says bf16(v); e6m2_encode(...) for E6M2 rounding;
//     s1p2_encode(...) where an element is rounded exactly on the q/4 grid.
//
// Block anatomy (docs/spec/hif4.md §3): element i belongs to L2 group i/8 and to L3
// group i/4 (adjacent, not strided). The scale word is canonical LSB-first
// (§5.2): bits 7..0 scale code, bit 8+j = b_j, bit 16+k = c_k.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/reference.hpp"

namespace fp4emu::reference {
namespace {

constexpr int kL2Groups = 8;   // one L2 bit per 8 elements
constexpr int kL3Groups = 16;  // one L3 bit per 4 elements
static_assert(kHif4Block == kL2Groups * 8 && kHif4Block == kL3Groups * 4);

// c7 = bf16(1/7) = 73/512 = 0.142578125, bf16 bits 0x3E12 (docs/spec/hif4.md notation).
constexpr float kC7 = 0.142578125f;
// E6M2 range (docs/spec/hif4.md §2): 0x00 = 2^-48, 0xFE = 1.5 * 2^15 = 49152; 0xFF is NaN.
constexpr float kScaleMin = 0x1p-48f;
constexpr float kScaleMax = 49152.0f;
constexpr uint8_t kNanScale = 0xFF;

// V12 (docs/spec/hif4.md §6.6): the E6M2 byte of the scale word holds the block
// exponent as B + 48. B is clamped to [-46, 16], so the byte is 2..64 and is
// never 0xFF for a finite block. Decode: (q/4) * 2^(b+c) * 2^B.
constexpr int kV12ExponentOffset = 48;
constexpr int kV12MinExponent = -46;
constexpr int kV12MaxExponent = 16;
// quant_hifxv12's fp32 guard term in floor(log2(m4 + tiny)) (docs/spec/hif4.md §6.6 step 1).
constexpr float kV12Tiny = 0x1p-45f;

// V14-noclip / V14-special round s0 on the E6M2 mantissa grid with no exponent
// limit (the torch floor(log2) + round emulation, docs/spec/hif4.md §6.3); the result is
// then checked against the E6M2 range. Same codec, wider exponent field.
constexpr MinifloatTraits kE6M2AnyExponent{"e6m2_any_exponent", 11, 2, 1023, false, false,
                                           SpecialCodes::none};

constexpr int l2_group(int i) { return i / 8; }
constexpr int l3_group(int i) { return i / 4; }

template <typename Real>
Real pow2(int e) {
  return std::ldexp(Real(1), e);
}

// What the steps produce for one block, before it becomes codes or values.
struct BlockSteps {
  uint8_t scale_code = 0;              // E6M2 code (V12: B + 48); 0xFF = NaN block
  std::array<uint8_t, kL2Groups> l2{};  // b_j
  std::array<uint8_t, kL3Groups> l3{};  // c_k
  std::array<uint8_t, kHif4Block> q{};  // magnitude codes 0..7
  std::array<bool, kHif4Block> negative{};  // sign bit of each code
};

// ---------------------------------------------------------------------------
// Non-finite inputs (docs/spec/hif4.md §6.1 "Special inputs", §6.3, §6.4 step 1, §10.5).
// ---------------------------------------------------------------------------
struct Lanes {
  std::array<float, kHif4Block> v{};  // the values the steps see
  bool nan_block = false;             // force the scale byte to 0xFF at the end
};

// SIMD twin: src/quant/simd/hif4-inl.h Hif4GroupMaxima (the block test) and Hif4CleanLanes.
Lanes prepare_lanes(NonFinitePolicy policy, const float* x) {
  Lanes lanes;
  for (int i = 0; i < kHif4Block; ++i) {
    const float xi = x[i];
    lanes.v[i] = xi;
    if (std::isfinite(xi)) continue;
    switch (policy) {
      case NonFinitePolicy::torch:
        // Decision (docs/spec/hif4.md §6.1 "Special inputs", §10.5): the torch V14
        // reference. torch.max propagates NaN, so the block is NaN; to give
        // the NaN block one defined form its bits and codes are computed with
        // the NaN lanes as +0 (the AMCT rule). +-Inf stays: a huge value, the
        // scale clamps to 49152 and the Inf lane saturates to +-344064.
        if (std::isnan(xi)) {
          lanes.v[i] = 0.0f;
          lanes.nan_block = true;
        }
        break;
      case NonFinitePolicy::poison:
        // docs/spec/hif4.md §6.4 step 1 (AMCT; decision: A6 too): any NaN or +-Inf makes
        // the block NaN; finite lanes are computed with these lanes as 0.
        lanes.v[i] = 0.0f;
        lanes.nan_block = true;
        break;
      case NonFinitePolicy::passthrough:
        // docs/spec/hif4.md §6.3 (V14-special): non-finite lanes count as 0 for the
        // scale; their codes are computed as 0 (quantize cannot represent
        // them); fake-quant copies the input through.
        lanes.v[i] = 0.0f;
        break;
    }
  }
  return lanes;
}

// ---------------------------------------------------------------------------
// docs/spec/hif4.md §6.1 step 1 (§6.5 step 1, §6.6 step 1): magnitudes and block maxima.
// ---------------------------------------------------------------------------
struct Maxima {
  std::array<float, kL3Groups> m4{};  // max |x| over 4k..4k+3
  std::array<float, kL2Groups> m8{};  // max(m4[2j], m4[2j+1])
  float M = 0.0f;                     // max over the block
};

// SIMD twin: src/quant/simd/hif4-inl.h Hif4GroupMax4 and Hif4L2Max.
Maxima block_maxima(const std::array<float, kHif4Block>& v) {
  Maxima mx;
  for (int k = 0; k < kL3Groups; ++k) {
    float m = 0.0f;
    for (int i = 4 * k; i < 4 * k + 4; ++i) m = std::max(m, std::fabs(v[i]));
    mx.m4[k] = m;
  }
  for (int j = 0; j < kL2Groups; ++j) {
    mx.m8[j] = std::max(mx.m4[2 * j], mx.m4[2 * j + 1]);
    mx.M = std::max(mx.M, mx.m8[j]);
  }
  return mx;
}

// Sign bit of a code (docs/spec/hif4.md §6.1 step 8, §10.6).
// SIMD twin: src/quant/simd/hif4-inl.h Hif4Negative.
bool code_is_negative(ZeroSign rule, float v) {
  return rule == ZeroSign::sign_bit ? std::signbit(v) : v < 0.0f;
}

// Element rounding of the V14 family and V12 (docs/spec/hif4.md §6.1 step 7).
// The recipes' own rounding, rha, is the literal u = Real(4t + 1/2) (4t is
// exact, the addition rounds once), q = floor(u), q >= 8 -> 7. It differs
// from an exact half-away rounding of 4t only at 4t = 0.5 - 2^-25 in fp32,
// where u rounds up to 1.0 and q = 1 (docs/spec/hif4.md §6.1 step 7).
// The other allowed roundings are research overrides: 4t rounded exactly on
// the q/4 grid, saturating at 1.75; stochastic (fp4emu's own definition, no
// HiF4 library has one) is the integer rule of E2M1's cvt.rs on that grid,
// with the element's random byte r.
template <typename Real>
// SIMD twin: src/quant/simd/hif4-inl.h Hif4Q (v14_f64: S1p2GridOfExact, S1p2QuarterOfExactFma).
uint8_t round_element(Real t, Rounding rounding, uint8_t r) {
  if (rounding == Rounding::stochastic) return static_cast<uint8_t>(s1p2_encode_sr(static_cast<double>(t), r) & 0x7);
  if (rounding == Rounding::rha) {
    const Real u = Real(4) * t + Real(0.5);
    if (!(u < Real(8))) return 7;  // q >= 8 -> 7 (also +Inf)
    return static_cast<uint8_t>(std::floor(u));
  }
  return static_cast<uint8_t>(s1p2_encode(static_cast<double>(t), rounding) & 0x7);
}

// V14-noclip / V14-special scale: E6M2 RNE of s0 with no exponent limit,
// accepted only when it lies in [2^-48, 49152] (the packed form has no code
// for anything else). Returns the E6M2 code, or nothing for a NaN block.
// SIMD twin: the unclamped ranges of src/quant/simd/hif4-inl.h Hif4Scale.
std::optional<uint8_t> e6m2_encode_unclamped(float s0) {
  if (!std::isfinite(s0) || s0 <= 0.0f) return std::nullopt;
  const uint32_t wide = encode(kE6M2AnyExponent, s0, Rounding::rne, Overflow::saturate);
  const double s = decode(kE6M2AnyExponent, wide);
  if (!(s >= kScaleMin && s <= kScaleMax)) return std::nullopt;
  return e6m2_encode(s, Rounding::rne, Overflow::saturate);  // exact: s is on the E6M2 grid
}

// ---------------------------------------------------------------------------
// V14 family (docs/spec/hif4.md §6.1; §6.2 with Real = double; §6.3; §6.4).
// Real = float: fp32 products (V14, noclip, special, AMCT).
// Real = double: exact products (V14-numpy, `hif4.v14_f64`).
// ---------------------------------------------------------------------------
template <typename Real>
// SIMD twin: src/quant/simd/hif4-inl.h Hif4Scale (steps 1-4), Hif4GroupBits (5-6), Hif4Q (7).
void v14_steps(const Hif4Params& p, Rounding rounding, const uint8_t* rbits, const Lanes& lanes,
               BlockSteps& out) {
  // docs/spec/hif4.md §6.1 step 1
  const Maxima mx = block_maxima(lanes.v);

  // docs/spec/hif4.md §6.1 step 2: p = fp32(M * c7) (V14-numpy: exact), s0 = bf16(p).
  const Real product = Real(mx.M) * Real(kC7);
  float s0 = bf16_rne(product);

  // docs/spec/hif4.md §6.1 steps 2-3: range, then E6M2 RNE (4.5 -> 4, 5.5 -> 6, 6.5 -> 6,
  // 7.5 -> 8 carrying into the next binade).
  uint8_t scale_code = 0;
  switch (p.scale_range) {
    case Hif4ScaleRange::clamp:
      // torch rounds then clamps, CUDA clamps then rounds: identical, both
      // bounds are E6M2 values. A zero block gets 2^-48 (code 0x00).
      s0 = std::clamp(s0, kScaleMin, kScaleMax);
      scale_code = e6m2_encode(s0, Rounding::rne, Overflow::saturate);
      break;
    case Hif4ScaleRange::saturate_e6m2:
      scale_code = e6m2_encode(s0, Rounding::rne, Overflow::saturate);
      break;
    case Hif4ScaleRange::unclamped:
    case Hif4ScaleRange::unclamped_zero_min: {
      // docs/spec/hif4.md §6.3. noclip: an all-zero block gives NaN (log2 of 0).
      // special: an all-zero block gets 2^-48 (code 0x00).
      // Decision: an s0 whose E6M2 rounding is outside [2^-48, 49152] has no
      // code; the block is NaN (scale 0xFF), L2/L3 bits 0 and codes 0x0.
      std::optional<uint8_t> code;
      if (mx.M == 0.0f && p.scale_range == Hif4ScaleRange::unclamped_zero_min) {
        code = 0x00;
      } else {
        code = e6m2_encode_unclamped(s0);
      }
      if (!code) {
        out.scale_code = kNanScale;
        return;
      }
      scale_code = *code;
      break;
    }
  }
  out.scale_code = scale_code;

  // docs/spec/hif4.md §6.1 step 4: r = bf16(fp32(1/s)) = the §2 RCPE6M2 table.
  const float r = e6m2_reciprocal_bf16(scale_code);

  // docs/spec/hif4.md §6.1 step 5: b_j = [fp32(m8[j] * r) >= 4].
  for (int j = 0; j < kL2Groups; ++j) out.l2[j] = Real(mx.m8[j]) * Real(r) >= Real(4) ? 1 : 0;

  // docs/spec/hif4.md §6.1 step 6: c_k = [fp32(m4[k] * r) / 2^b >= 2] (dividing by a
  // power of two first, as CUDA does, is the same).
  for (int k = 0; k < kL3Groups; ++k) {
    const Real ratio = Real(mx.m4[k]) * Real(r);
    out.l3[k] = ratio / pow2<Real>(out.l2[k / 2]) >= Real(2) ? 1 : 0;
  }

  // docs/spec/hif4.md §6.1 step 7: t = fp32(a * 2^-(b+c) * r), q = floor(fp32(4t + 1/2)),
  // q >= 8 -> 7. AMCT (§6.4 step 4) rounds the ratio to bf16 first; its
  // a * r * 2^-(b+c) order is the same value (power-of-two scaling is exact
  // wherever q can be nonzero).
  for (int i = 0; i < kHif4Block; ++i) {
    const int bc = out.l2[l2_group(i)] + out.l3[l3_group(i)];
    const Real a = std::fabs(Real(lanes.v[i]));
    Real t = a * pow2<Real>(-bc) * Real(r);
    if (p.bf16_element_ratio) t = bf16_rne(t);
    out.q[i] = round_element<Real>(t, rounding, rbits ? rbits[i] : 0);
    // docs/spec/hif4.md §6.1 step 8: the sign of the code comes from x.
    out.negative[i] = code_is_negative(p.zero_sign, lanes.v[i]);
  }
}

// ---------------------------------------------------------------------------
// A6-HW (docs/spec/hif4.md §6.5): every intermediate is a bf16 value.
// ---------------------------------------------------------------------------

// A bf16 vector multiply: the exact product (exact in double) rounded once to bf16.
float bf16_mul(float a, float b) { return bf16_rne(static_cast<double>(a) * static_cast<double>(b)); }

// SIMD twin: src/quant/simd/hif4-inl.h Hif4Scale, Hif4GroupBits and Hif4A6Product with Hif4Elements::a6.
void a6_steps(const Hif4Params& p, Rounding rounding, const Lanes& lanes, BlockSteps& out) {
  // docs/spec/hif4.md §6.5 step 1: Mc, Mb, Ma (exact in bf16 for bf16 inputs; the
  // recipe is bf16_input_only and the tensor driver checks that).
  const Maxima mx = block_maxima(lanes.v);

  // docs/spec/hif4.md §6.5 step 2: t = bf16(Ma * c7); Ea = bf16->E6M2 RNE, saturating:
  // 0 and anything below 2^-48 -> 0x00 (the golden: zero -> 0x00, exponent
  // clamped at -48), overflow and 0xFF -> 0xFE.
  const float t = bf16_mul(mx.M, kC7);
  const uint8_t ea = e6m2_encode(t, Rounding::rne, Overflow::saturate);
  out.scale_code = ea;

  // docs/spec/hif4.md §6.5 step 3: Ea_rec = bf16(1/E6M2(Ea)).
  // Decision (§6.5 step 9, §10.4): code 0x00 is 2^-48 (PTO spec), so its
  // reciprocal is 2^48. The pto-isa golden treats 0x00 as 0 here, which
  // quantizes blocks with 2^-48 <= Ma*c7 < 1.125*2^-48 to all zeros.
  const float ea_rec = e6m2_reciprocal_bf16(ea);

  // docs/spec/hif4.md §6.5 step 4: Eb = [bf16(Mb * Ea_rec) >= 4] (the bf16 rounding can
  // set a bit V14 leaves clear, EX5).
  for (int j = 0; j < kL2Groups; ++j) out.l2[j] = bf16_mul(mx.m8[j], ea_rec) >= 4.0f ? 1 : 0;

  // docs/spec/hif4.md §6.5 step 5: Ec = [bf16(bf16(Mc * Ea_rec) * 2^-Eb) >= 2].
  for (int k = 0; k < kL3Groups; ++k) {
    const float ratio = bf16_mul(mx.m4[k], ea_rec);
    out.l3[k] = bf16_mul(ratio, pow2<float>(-out.l2[k / 2])) >= 2.0f ? 1 : 0;
  }

  for (int i = 0; i < kHif4Block; ++i) {
    const int eb = out.l2[l2_group(i)];
    const int ec = out.l3[l3_group(i)];
    // docs/spec/hif4.md §6.5 step 6: scale = bf16(Ea_rec * bf16(2^-Eb * 2^-Ec)).
    const float scale = bf16_mul(ea_rec, bf16_rne(pow2<double>(-eb) * pow2<double>(-ec)));
    // docs/spec/hif4.md §6.5 step 7: y = bf16(x * scale), then bf16->E1M2 with RNE (ties
    // to the even code; rha override: the document's ROUND_A), saturating at 1.75.
    const float y = bf16_mul(lanes.v[i], scale);
    out.q[i] = static_cast<uint8_t>(s1p2_encode(std::fabs(y), rounding) & 0x7);
    // The sign comes from the product, y < 0 (pto-isa 3186c381
    // tests/npu/a6/src/st/testcase/tload_hif4/gen_data.py:95 in bf16_to_e1m2,
    // fed with y at :149-150): -0.0 and a negative x whose product underflows
    // to -0 get 0x0.
    out.negative[i] = code_is_negative(p.zero_sign, y);
  }
}

// ---------------------------------------------------------------------------
// V12, legacy power-of-two level-1 scale (docs/spec/hif4.md §6.6, quant_hifxv12).
// ---------------------------------------------------------------------------

// Exact floor(log2(a)) of a positive fp32 value from its exponent (subnormals
// included); +Inf -> 128, above every finite fp32 exponent. The torch code
// takes floor(torch.log2(.)) in fp32, which rounds up to the next integer just
// below a power of two (e.g. log2f(2^41 * (1 - 2^-24)) = 41.0f); we use the
// exact exponent instead.
int floor_log2(float a) {
  if (std::isinf(a)) return 128;
  return std::ilogb(a);
}

// SIMD twin: src/quant/simd/hif4-inl.h Hif4Scale, Hif4GroupBits and Hif4Q with Hif4Elements::pow2.
void v12_steps(const Hif4Params& p, Rounding rounding, const uint8_t* rbits, const Lanes& lanes,
               BlockSteps& out) {
  const Maxima mx = block_maxima(lanes.v);

  // docs/spec/hif4.md §6.6 step 1: e4[k] = floor(log2(m4[k] + tiny)), the sum in fp32.
  std::array<int, kL3Groups> e4{};
  for (int k = 0; k < kL3Groups; ++k) e4[k] = floor_log2(mx.m4[k] + kV12Tiny);

  // docs/spec/hif4.md §6.6 step 2: e8[j] = max(e4[2j], e4[2j+1]), E = max e8.
  std::array<int, kL2Groups> e8{};
  int E = e4[0];
  for (int j = 0; j < kL2Groups; ++j) {
    e8[j] = std::max(e4[2 * j], e4[2 * j + 1]);
    E = std::max(E, e8[j]);
  }

  // docs/spec/hif4.md §6.6 step 3: B = E - 2, clamped to [-46, 16] (quant_hifxv12).
  const int B = std::clamp(E - 2, kV12MinExponent, kV12MaxExponent);
  out.scale_code = static_cast<uint8_t>(B + kV12ExponentOffset);

  // docs/spec/hif4.md §6.6 step 4: b_j = clamp(e8[j] - B - 1, 0, 1), c_k = clamp(e4[k] - B - b, 0, 1).
  for (int j = 0; j < kL2Groups; ++j) out.l2[j] = static_cast<uint8_t>(std::clamp(e8[j] - B - 1, 0, 1));
  for (int k = 0; k < kL3Groups; ++k)
    out.l3[k] = static_cast<uint8_t>(std::clamp(e4[k] - B - out.l2[k / 2], 0, 1));

  // docs/spec/hif4.md §6.6 step 5: q = floor(4a / 2^(B+b+c) + 1/2) in fp32, q >= 8 -> 7
  // (the to_HiFX rule; with the exponent clamps q can exceed 8).
  for (int i = 0; i < kHif4Block; ++i) {
    const int shift = B + out.l2[l2_group(i)] + out.l3[l3_group(i)];
    const float t = std::ldexp(std::fabs(lanes.v[i]), -shift);  // exact unless below 2^-126 (q = 0 then)
    out.q[i] = round_element<float>(t, rounding, rbits ? rbits[i] : 0);
    out.negative[i] = code_is_negative(p.zero_sign, lanes.v[i]);
  }
}

// ---------------------------------------------------------------------------
// All recipes: non-finite policy, the recipe's steps, then the NaN override.
// ---------------------------------------------------------------------------
BlockSteps run_steps(const Recipe& recipe, Rounding rounding, const float* x, const uint8_t* rbits) {
  if (recipe.format != Format::hif4)
    throw InputError("hif4 reference: recipe '" + std::string(recipe.id) + "' is not a hif4 recipe");
  check_rounding(recipe, rounding);
  if (rounding == Rounding::stochastic && rbits == nullptr)
    throw InputError("hif4 reference: stochastic rounding needs one random byte per element");

  const Hif4Params& p = recipe.hif4;
  const Lanes lanes = prepare_lanes(p.non_finite, x);
  BlockSteps steps;
  switch (p.arithmetic) {
    case Hif4Arithmetic::fp32: v14_steps<float>(p, rounding, rbits, lanes, steps); break;
    case Hif4Arithmetic::exact: v14_steps<double>(p, rounding, rbits, lanes, steps); break;
    case Hif4Arithmetic::bf16: a6_steps(p, rounding, lanes, steps); break;
    case Hif4Arithmetic::pow2_v12: v12_steps(p, rounding, rbits, lanes, steps); break;
  }
  if (lanes.nan_block) steps.scale_code = kNanScale;
  return steps;
}

uint32_t pack_word(const BlockSteps& s) {
  uint32_t word = s.scale_code;
  for (int j = 0; j < kL2Groups; ++j) word |= static_cast<uint32_t>(s.l2[j]) << (8 + j);
  for (int k = 0; k < kL3Groups; ++k) word |= static_cast<uint32_t>(s.l3[k]) << (16 + k);
  return word;
}

// Value of the scale byte (never 0xFF here).
double scale_value(const Recipe& recipe, uint8_t scale_code) {
  if (recipe.hif4.arithmetic == Hif4Arithmetic::pow2_v12)
    return std::ldexp(1.0, static_cast<int>(scale_code) - kV12ExponentOffset);
  return e6m2_decode(scale_code);
}


}  // namespace

// SIMD twin: src/quant/simd/hif4-inl.h Hif4QuantizeBlock.
uint32_t hif4_quantize_block(const Recipe& recipe, Rounding rounding, const float* x, uint8_t* codes,
                             const uint8_t* rbits) {
  const BlockSteps s = run_steps(recipe, rounding, x, rbits);
  for (int i = 0; i < kHif4Block; ++i) codes[i] = static_cast<uint8_t>((s.negative[i] ? 0x8 : 0x0) | s.q[i]);
  return pack_word(s);
}

// docs/spec/hif4.md §4: x = (-1)^sign (q/4) 2^(b+c) S, exact in double (at most 6
// significant bits, within [2^-50, 458752]), so the cast to float is exact.
// SIMD twin: src/quant/simd/hif4-inl.h Hif4DecodeBlock.
void hif4_decode_block(const Recipe& recipe, uint32_t word, const uint8_t* codes, float* out) {
  const uint8_t scale_code = static_cast<uint8_t>(word & 0xFF);
  if (scale_code == kNanScale) {
    std::fill(out, out + kHif4Block, std::nanf(""));
    return;
  }
  const double s = scale_value(recipe, scale_code);
  for (int i = 0; i < kHif4Block; ++i) {
    const int b = (word >> (8 + l2_group(i))) & 1;
    const int c = (word >> (16 + l3_group(i))) & 1;
    const double element = s1p2_decode(codes[i]);  // (-1)^sign q/4, -0.0 for 0x8
    out[i] = static_cast<float>(element * std::ldexp(1.0, b + c) * s);
  }
}

// The references fake-quantize without materialising codes (docs/spec/hif4.md §6.1
// step 8): the value is formed from q, b, c and s directly.
// SIMD twin: src/quant/simd/hif4-inl.h Hif4FakeQuantBlock.
void hif4_fake_quant_block(const Recipe& recipe, Rounding rounding, const float* x, float* out,
                           const uint8_t* rbits) {
  const BlockSteps s = run_steps(recipe, rounding, x, rbits);
  if (s.scale_code == kNanScale) {
    std::fill(out, out + kHif4Block, std::nanf(""));
  } else {
    const double scale = scale_value(recipe, s.scale_code);
    for (int i = 0; i < kHif4Block; ++i) {
      const int bc = s.l2[l2_group(i)] + s.l3[l3_group(i)];
      const double magnitude = (s.q[i] / 4.0) * std::ldexp(1.0, bc) * scale;
      out[i] = static_cast<float>(s.negative[i] ? -magnitude : magnitude);
    }
  }
  // docs/spec/hif4.md §6.3 (V14-special): NaN, +Inf and -Inf inputs are copied to the output.
  if (recipe.hif4.non_finite == NonFinitePolicy::passthrough) {
    for (int i = 0; i < kHif4Block; ++i)
      if (!std::isfinite(x[i])) out[i] = x[i];
  }
}

}  // namespace fp4emu::reference
