#pragma once
// Independent oracles for the tests (TestFloat's SlowFloat idea): slow and
// obvious, sharing no code with src/codec.
//
// Each format is a list of its representable values, built by decoding every
// code with a decoder written from the spec tables (docs/spec/mxfp4.md §1.1, §2;
// docs/spec/nvfp4.md §2.1; docs/spec/hif4.md §1, §2), sorted, and searched. Rounding an input is
// a binary search for its two neighbours on that grid plus exact comparisons
// in double: every fp32/bf16/fp16 input is a double, and the midpoint of two
// neighbouring values of these formats (at most 11 significant bits) is exact
// in double.
//
// The oracle uses only the Rounding enum (a name list, no code) from fp4emu;
// it deliberately does not include fp4emu/codec/minifloat.hpp.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/codec/rounding.hpp"

namespace oracle {

using fp4emu::Rounding;

// Mirrors fp4emu::Overflow by meaning (the tests map one onto the other).
enum class OnOverflow : uint8_t {
  saturate,    // largest finite magnitude, sign kept
  to_special,  // IEEE: Inf (largest finite when rounding toward zero); NaN-only formats: NaN
};

struct OracleFormat {
  std::string name;
  int code_bits = 0;  // sign included when signed
  bool is_signed = false;
  bool has_zero = true;   // false: E8M0, E6M2 (code 0 is the smallest value)
  bool has_inf = false;   // IEEE formats (BF16, FP16)
  bool has_nan = false;
  uint32_t inf_code = 0;  // positive Inf
  uint32_t nan_code = 0;  // canonical positive NaN
  uint32_t max_code = 0;  // largest finite magnitude (sign clear)
  double max_value = 0;
  // The value the code after max_code would have if the format's grid went on
  // (480 for E4M3, 2^128 for BF16, 8 for E2M1...). Rounding treats
  // [max_value, next_above_max] as an ordinary interval: a result equal to it
  // is an overflow (IEEE 754 overflow: "would exceed the largest finite number
  // had the exponent range been unbounded").
  double next_above_max = 0;
  // RNE tie rule: true when the tie between two grid neighbours goes up iff the
  // lower code is odd (every format with mantissa bits: the mantissa LSB is
  // code bit 0, zero is even). E8M0 has no mantissa bit; its tie 1.5*2^k goes
  // up to 2^(k+1) (ml_dtypes float8_e8m0fnu: "the implicit bit counts as odd").
  bool ties_by_code_parity = true;

  std::vector<double> value_of_code;  // 2^code_bits entries; NaN for NaN codes
  // Sorted non-negative finite magnitudes (+0 first for formats with zero) and
  // the positive code of each. grid.back() == max_value.
  std::vector<double> grid;
  std::vector<uint32_t> grid_code;

  uint32_t sign_bit() const { return is_signed ? (1u << (code_bits - 1)) : 0u; }
  uint32_t num_codes() const { return 1u << code_bits; }
};

const OracleFormat& e2m1();
const OracleFormat& s1p2();
const OracleFormat& e4m3();
const OracleFormat& ue4m3();
const OracleFormat& e8m0();
const OracleFormat& e6m2();
const OracleFormat& bf16();
const OracleFormat& fp16();
// Every format above, in that order.
const std::vector<const OracleFormat*>& all_formats();

double oracle_decode(const OracleFormat& f, uint32_t code);
bool oracle_is_nan_code(const OracleFormat& f, uint32_t code);

// x rounded onto f's grid per r, with the header contract of
// fp4emu/codec/minifloat.hpp: unsigned formats ignore the sign; formats without
// zero give code 0 for everything below their smallest value; NaN gives the
// canonical positive NaN code, or +max in formats without NaN; signed zeros and
// underflows keep their sign; IEEE Inf inputs stay Inf.
uint32_t oracle_encode(const OracleFormat& f, double x, Rounding r, OnOverflow o);

// The points where some rounding of f changes its result, as doubles: every
// grid value, every midpoint between neighbours (including the one between
// max_value and next_above_max), next_above_max itself and, for formats
// without zero, two points below the smallest value. Used to generate
// boundary inputs.
std::vector<double> oracle_boundaries(const OracleFormat& f);

// ggml's fp32 -> UE4M3 conversion (nvfp4.ggml), from its description in
// docs/formats.md, in double arithmetic on the ue4m3() grid.
uint8_t oracle_ggml_ue4m3(float x);

}  // namespace oracle
