// The SIMD codec ops (src/quant/simd/codec-inl.h: RoundToGrid, CodeOf,
// ValueOf from the minifloat traits) on their own, on every Highway target
// compiled in and supported here, against the scalar codec (encode/decode of
// fp4emu/codec/minifloat.hpp): every non-negative bf16 value, and fp32
// values at and next to every code and every midpoint of each format, as
// Highway's own tests check each op per target. The whole-tensor kernels are
// tested in simd_quant_test.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "src/quant/simd.hpp"
#include "src/quant/simd/kernels.hpp"

namespace fp4emu {
namespace {

using simd::CodecOp;

using simd::ForcedTarget;

uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }

// Every value of `t` (magnitude codes that are not NaN).
std::vector<uint32_t> magnitude_codes(const MinifloatTraits& t) {
  std::vector<uint32_t> codes;
  const uint32_t count = 1u << (t.exp_bits + t.man_bits);
  for (uint32_t c = 0; c < count; ++c)
    if (!is_nan_code(t, c) && std::isfinite(decode(t, c))) codes.push_back(c);
  return codes;
}

// Non-negative inputs: every bf16 pattern that is not NaN, and every code of
// `t`, every midpoint between neighbouring codes, each with 3 fp32 neighbours
// on each side.
std::vector<float> inputs(const MinifloatTraits& t) {
  std::vector<float> v;
  for (uint32_t b = 0; b <= 0x7F80u; ++b) v.push_back(std::bit_cast<float>(b << 16));
  const std::vector<uint32_t> codes = magnitude_codes(t);
  auto around = [&](double x) {
    const float f = static_cast<float>(x);
    if (!(f <= 3.0e38f)) return;
    for (int k = -3; k <= 3; ++k) {
      const int64_t b = static_cast<int64_t>(bits_of(f)) + k;
      if (b >= 0 && b < 0x7F800000) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
    }
  };
  for (size_t i = 0; i < codes.size(); ++i) {
    around(decode(t, codes[i]));
    if (i + 1 < codes.size()) around((decode(t, codes[i]) + decode(t, codes[i + 1])) / 2);
  }
  while (v.size() % 16) v.push_back(0.0f);
  return v;
}

std::vector<float> run(CodecOp op, Rounding r, const std::vector<float>& in) {
  std::vector<float> out(in.size());
  simd::codec_op(op, r, in.data(), out.data(), static_cast<int64_t>(in.size()));
  return out;
}

struct GridCase {
  const char* name;
  const MinifloatTraits* traits;
  CodecOp grid, code, value;
  std::vector<Rounding> roundings;
};

std::vector<GridCase> grid_cases() {
  const std::vector<Rounding> nearest_and_directed = {Rounding::rne, Rounding::rha, Rounding::rtz,
                                                      Rounding::ties_to_zero};
  return {
      {"e2m1", &kE2M1, CodecOp::e2m1_grid, CodecOp::e2m1_code, CodecOp::e2m1_value, nearest_and_directed},
      {"s1p2", &kS1P2, CodecOp::s1p2_grid, CodecOp::s1p2_code, CodecOp::s1p2_value, nearest_and_directed},
      {"ue4m3", &kUE4M3, CodecOp::ue4m3_grid, CodecOp::ue4m3_code, CodecOp::ue4m3_value, {Rounding::rne}},
      {"e6m2", &kE6M2, CodecOp::e6m2_grid, CodecOp::e6m2_code, CodecOp::e6m2_value, {Rounding::rne}},
  };
}

// RoundToGrid = decode(encode(x, rounding, saturate)) bit for bit.
TEST(SimdCodec, RoundToGridEqualsTheScalarCodecOnEveryTarget) {
  for (const GridCase& g : grid_cases()) {
    const std::vector<float> in = inputs(*g.traits);
    for (Rounding r : g.roundings) {
      std::vector<float> expected(in.size());
      for (size_t i = 0; i < in.size(); ++i)
        expected[i] = static_cast<float>(decode(*g.traits, encode(*g.traits, in[i], r, Overflow::saturate)));
      for (int64_t target : simd::compiled_targets()) {
        ForcedTarget forced(target);
        const std::vector<float> got = run(g.grid, r, in);
        int mismatches = 0;
        for (size_t i = 0; i < in.size(); ++i)
          if (bits_of(got[i]) != bits_of(expected[i]) && mismatches++ < 3)
            ADD_FAILURE() << g.name << " " << to_string(r) << " on " << simd::target_name(target) << ": "
                          << std::hexfloat << in[i] << " -> " << got[i] << ", codec " << expected[i];
        EXPECT_EQ(mismatches, 0) << g.name << " " << to_string(r) << " on " << simd::target_name(target);
      }
    }
  }
}

// Stochastic rounding (RoundToQuantum's cvt.rs rule) = encode_stochastic for
// E2M1 and S1P2: every non-negative bf16 value, the codes and midpoints with
// their neighbours (inputs()), and the two edges and the middle of every
// offset class floor(256 frac) of every grid interval, each with all 256
// random bytes, on every target.
TEST(SimdCodec, StochasticRoundingEqualsTheScalarCodecForEveryByteOnEveryTarget) {
  for (const GridCase& g : grid_cases()) {
    if (g.traits != &kE2M1 && g.traits != &kS1P2) continue;
    std::vector<float> values = inputs(*g.traits);
    const std::vector<uint32_t> codes = magnitude_codes(*g.traits);
    for (size_t i = 0; i + 1 < codes.size(); ++i) {
      const double lo = decode(*g.traits, codes[i]), step = decode(*g.traits, codes[i + 1]) - lo;
      for (int c = 0; c < 256; ++c) {
        values.push_back(static_cast<float>(lo + step * c / 256));
        values.push_back(std::nextafter(static_cast<float>(lo + step * (c + 1) / 256), 0.0f));
        values.push_back(static_cast<float>(lo + step * (c + 0.5) / 256));
      }
    }
    while (values.size() % 16) values.push_back(0.0f);
    std::vector<float> in;
    std::vector<uint8_t> rbits;
    in.reserve(values.size() * 256);
    for (int r = 0; r < 256; ++r)
      for (float v : values) {
        in.push_back(v);
        rbits.push_back(static_cast<uint8_t>(r));
      }
    std::vector<float> expected(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      expected[i] = static_cast<float>(decode(*g.traits, encode_stochastic(*g.traits, in[i], rbits[i], Overflow::saturate)));
    for (int64_t target : simd::compiled_targets()) {
      ForcedTarget forced(target);
      std::vector<float> got(in.size());
      simd::codec_op(g.grid, Rounding::stochastic, in.data(), got.data(), static_cast<int64_t>(in.size()),
                     rbits.data());
      int mismatches = 0;
      for (size_t i = 0; i < in.size(); ++i)
        if (bits_of(got[i]) != bits_of(expected[i]) && mismatches++ < 3)
          ADD_FAILURE() << g.name << " stochastic on " << simd::target_name(target) << ": " << std::hexfloat << in[i]
                        << " r=" << std::dec << int{rbits[i]} << " -> " << std::hexfloat << got[i] << ", codec "
                        << expected[i];
      EXPECT_EQ(mismatches, 0) << g.name << " on " << simd::target_name(target);
    }
  }
}

// CodeOf and ValueOf are each other's inverse and the codec's, on every code.
TEST(SimdCodec, CodeOfAndValueOfMatchTheScalarCodecOnEveryTarget) {
  for (const GridCase& g : grid_cases()) {
    std::vector<float> values, codes;
    for (uint32_t c : magnitude_codes(*g.traits)) {
      codes.push_back(static_cast<float>(c));
      values.push_back(static_cast<float>(decode(*g.traits, c)));
    }
    while (codes.size() % 16) {
      codes.push_back(codes[0]);
      values.push_back(values[0]);
    }
    for (int64_t target : simd::compiled_targets()) {
      ForcedTarget forced(target);
      const std::vector<float> got_codes = run(g.code, Rounding::rne, values);
      const std::vector<float> got_values = run(g.value, Rounding::rne, codes);
      for (size_t i = 0; i < codes.size(); ++i) {
        EXPECT_EQ(got_codes[i], codes[i]) << g.name << " value " << values[i] << " on " << simd::target_name(target);
        EXPECT_EQ(bits_of(got_values[i]), bits_of(values[i]))
            << g.name << " code " << codes[i] << " on " << simd::target_name(target);
      }
    }
  }
}

// bf16: RNE with IEEE overflow to Inf, for every fp32 sign-and-exponent with
// the mantissas that decide the rounding (ties, their neighbours, the top).
TEST(SimdCodec, Bf16RoundingEqualsTheScalarCodecOnEveryTarget) {
  std::vector<float> in;
  for (uint32_t top = 0; top < 0x1FF; ++top) {  // sign and exponent, Inf/NaN excluded
    if ((top & 0xFF) == 0xFF) continue;
    for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x18000u, 0x17FFFu, 0x7F8000u,
                         0x7FFFFFu, 0x7F7FFFu})
      in.push_back(std::bit_cast<float>(top << 23 | (low & 0x7FFFFFu)));
  }
  in.push_back(std::numeric_limits<float>::infinity());
  in.push_back(-std::numeric_limits<float>::infinity());
  while (in.size() % 16) in.push_back(0.0f);
  for (int64_t target : simd::compiled_targets()) {
    ForcedTarget forced(target);
    const std::vector<float> got = run(CodecOp::bf16_grid, Rounding::rne, in);
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(bits_of(got[i]), bits_of(bf16_rne(in[i])))
          << std::hexfloat << in[i] << " on " << simd::target_name(target);
  }
}

}  // namespace
}  // namespace fp4emu
