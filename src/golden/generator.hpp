#pragma once
// Internals of `golden generate`: the seeded random source, the input-dtype
// grid, the block probe (the reference quantizer on one block), and the case
// families. The suite's bytes depend only on these and the options, never on
// the thread count or the machine: every value is made with IEEE basic
// operations (+ - * / sqrt), no libm transcendental.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fp4emu/golden/suite.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/scale_layout.hpp"

namespace fp4emu::golden {

// ---- random source -----------------------------------------------------------
// xoshiro256** seeded through splitmix64 from (suite seed, case id): each case
// has its own stream, so cases can be built in any order.
class Rng {
 public:
  Rng(uint64_t seed, const std::string& stream);
  uint64_t next();
  double uniform();                 // [0, 1), 53 bits
  int64_t below(int64_t n);         // [0, n)
  double normal();                  // Marsaglia polar method
  double student_t3();              // Student-t, 3 degrees of freedom
 private:
  uint64_t s_[4];
};

// Natural log from + - * / only (bit-reproducible everywhere).
double portable_log(double x);

// ---- the input dtype's grid ---------------------------------------------------
struct InputGrid {
  InputDType dtype = InputDType::f32;
  float round(double x) const;          // RNE onto the dtype (fp32 or bf16)
  // Non-negative finite values in order: ordinal 0 is +0, max_ordinal() the
  // largest finite value.
  uint32_t ordinal(float x) const;      // x >= 0 on the grid
  float from_ordinal(uint32_t o) const;
  uint32_t max_ordinal() const;
  float next_up(float x) const;         // toward +Inf on the grid (finite x)
  float next_down(float x) const;
  uint32_t bits(float x) const;         // the stored word (fp32 or bf16 bits)
  int hex_digits() const { return dtype == InputDType::bf16 ? 4 : 8; }
};

// ---- one-block probe ------------------------------------------------------------
// Runs the golden path (quantize() with the case's options, reference
// implementation) on a single block, for the searches that place inputs on
// scale steps, bit thresholds, representable values and ties.
class Probe {
 public:
  Probe(const Recipe& recipe, const QuantOptions& options, InputGrid grid);
  int block() const { return block_; }
  const InputGrid& grid() const { return grid_; }
  PackedTensor quantize_block(const std::vector<float>& x) const;
  // Scale word in canonical form: MX/NV the code; HiF4 the LSB-first word.
  uint32_t word(const PackedTensor& p) const;
  // Level-1 scale code only: MX/NV the code, HiF4 the E6M2 byte.
  uint32_t scale_code(const PackedTensor& p) const { return word(p) & 0xFF; }
  // Decoded value of element `pos` if its code were `code` (scale unchanged).
  float decode_as(const PackedTensor& p, int pos, uint8_t code) const;
  std::vector<float> dequantize_block(const PackedTensor& p) const;

 private:
  QuantOptions options_;
  InputGrid grid_;
  int block_;
};

// Level-1 scale steps: for each transition of the scale code as the block amax
// grows over the positive finite grid, the smallest amax with the new code.
struct ScaleStep {
  uint32_t code_below;
  uint32_t code_at;
  float amax;  // smallest amax that gives code_at
};
std::vector<ScaleStep> find_scale_steps(const Probe& probe);

// ---- cases -------------------------------------------------------------------------
struct CaseSpec {
  std::string id;        // "<recipe>/<name>"; also the case's directory
  std::string family;    // codes | scale_steps | hif4_bits | special | tail | tail_error | random | layout |
                         // stochastic | exhaustive
  std::string probes;    // what the case probes, one sentence
  const Recipe* recipe = nullptr;
  QuantOptions options;  // recipe, axis, tail, global_amax, input_dtype
  std::vector<int64_t> shape;
  std::function<std::vector<float>()> make;  // input values, exact in the input dtype
  bool blocks_txt = false;                   // edge set: also write blocks.txt
  std::vector<StoredScaleLayout> layouts;    // kernel-ready layouts besides linear
  bool expect_error = false;                 // quantize must reject the input
  // Stochastic rounding (options.rounding == stochastic): the random byte of
  // each element, row-major in the input's shape, written as rbits.npy. Given
  // bytes come from `make_rbits`; with options.stochastic.seed set they are
  // Philox's (seed, offset, rng, map), expanded by the generator.
  std::function<std::vector<uint8_t>()> make_rbits;
};

// Every case of `recipe` at `level` (families.cpp).
std::vector<CaseSpec> build_cases(const Recipe& recipe, int level, uint64_t seed);

// A GEMM case: C = Q(A) · Q(B) under each bit-reproducible accumulation model
// (exact, block_fp32, fma_fp32; never fast), from the scalar GEMM.
struct GemmCaseSpec {
  std::string id;      // "<recipe>/<name>"
  std::string probes;  // what the case probes, one sentence
  const Recipe* recipe = nullptr;
  int64_t m = 0, n = 0, k = 0;  // A m×k blocked along axis 1, B k×n blocked along axis 0
  bool random_scales = false;   // block scale codes replaced by random codes (NaN codes included)
  std::optional<float> alpha;
  uint64_t seed = 1;
  // The epilogue's other inputs (docs/gemm.md "Epilogue"): a source C (c.npy,
  // m×n) scaled by `beta`, and a bias (bias.npy, one value per column).
  std::optional<float> beta;
  bool bias = false;
};
std::vector<GemmCaseSpec> build_gemm_cases(const Recipe& recipe, int level, uint64_t seed);

// A GEMM operand's input values, [rows, cols] C order, Gaussian with each row
// (or column, when `per_col`) at its own binade in 2^-20..2^20.
std::vector<float> gemm_operand_values(Rng& rng, int64_t rows, int64_t cols, bool per_col, InputGrid g);

// The options every golden case starts from: the recipe, its defaults, and the
// reference implementation.
QuantOptions golden_options(const Recipe& recipe, InputDType dtype);
inline const DequantOptions kReferenceDequant{.impl = Impl::reference, .threads = 0};

}  // namespace fp4emu::golden
