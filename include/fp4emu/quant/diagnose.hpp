#pragma once
// Why two quantizations of one input differ: the reference (fp4emu's output
// of one recipe) against a kernel's output (any subset of packed codes, block
// scales and dequantized values). Used by `fp4emu identify` and by
// `golden verify`.
//
// The comparison runs per block, root cause first: a block whose scale
// differs is counted once, as a block difference, and its codes and values
// are not examined further (they follow from the scale); codes come before
// values. Every difference gets exactly one class (Kind) a person can act on,
// with a count and the first cases. The classes, in the order they are tried:
//
//   block classes (unit: blocks)
//     nan_block        the block's input holds a NaN, or either scale is the NaN code
//     scale_bit_order  HiF4: the scale word is the expected one stored in the other
//                      L2/L3 bit order (lsb_first / msb_first)
//     inf_block        the scale differs in a block whose input holds an Inf
//     subnormal_amax   the scale differs in a block whose amax is an fp32 subnormal
//     scale_up         the scale differs and decodes larger than expected
//     scale_down       ... smaller than expected
//     nibble_order     the block's codes are the expected ones in another nibble order
//   element classes (unit: elements, in blocks with the expected scale)
//     tail             a padding lane past the end of the block axis
//     saturation       the input is ±Inf or beyond the largest element of its block
//     negative_zero    the codes are +0 and −0 (0x0 and 0x8)
//     tie              the scaled input x/X is exactly midway between two elements,
//                      and the two sides chose different ones
//     near_tie         x/X is within 2^-20 (relative) of a midpoint: the kernel
//                      computes the scaled value by other arithmetic (a reciprocal,
//                      another operation order)
//     subnormal_input  the input is an fp32 subnormal (flushed to zero?)
//     toward_zero      the neighbour nearer zero was chosen, not a tie (truncation)
//     away_from_zero   the neighbour farther from zero was chosen, not a tie
//     stochastic_step  the reference rounds stochastically and the other neighbour
//                      was chosen: other random bits, or bits used another way
//                      (ties and round-to-nearest say nothing under SR)
//     dequantize       codes and scale agree, the dequantized value differs
//                      (the arithmetic or order of the decode)
//     other            anything else
//
// X is the element scale of a lane as the recipe decodes it (the value a code
// of magnitude 1 decodes to: 2^(c-127) for MXFP4, UE4M3(s)·S_dec for NVFP4,
// E6M2(S)·2^(b+c) for HiF4), so x/X is the value the element grid
// (E2M1 {0, 0.5, ..., 6}, HiF4 S1P2 {0, 0.25, ..., 1.75}) rounds.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/tensor.hpp"
#include "fp4emu/quant/tensor_ref.hpp"

namespace fp4emu::diagnose {

enum class Kind : uint8_t {
  nan_block,
  scale_bit_order,
  inf_block,
  subnormal_amax,
  scale_up,
  scale_down,
  nibble_order,
  tail,
  saturation,
  negative_zero,
  tie,
  near_tie,
  subnormal_input,
  toward_zero,
  away_from_zero,
  stochastic_step,
  dequantize,
  other,
};
inline constexpr int kKinds = static_cast<int>(Kind::other) + 1;
std::string_view to_string(Kind k);  // "scale_up", "tie", ...
bool is_block_kind(Kind k);          // counted in blocks (else in elements)

// One side of the comparison. Empty spans are "not given". Layouts are those
// of PackedTensor (packed_tensor.hpp): codes packed two per byte in
// `nibble_order`, scales linear [rows, blocks] (HiF4: 32-bit words,
// little-endian, L2/L3 bits in `scale_bit_order`); values are dequantized
// fp32 in the input tensor's own order and shape.
struct Side {
  std::span<const uint8_t> codes;
  NibbleOrder nibble_order = NibbleOrder::low_first;
  std::span<const uint8_t> scales;
  ScaleBitOrder scale_bit_order = ScaleBitOrder::lsb_first;
  std::span<const float> values;
};
// The codes and scales of a packed tensor, in its own orders.
Side side_of(const PackedTensor& p, std::span<const float> values = {});

// One case of a class, for the report. Block classes give the lane of the
// block amax and the scales; element classes the lane's codes (or values).
struct Example {
  int64_t block = 0;       // row * blocks_per_row + block in row
  int lane = 0;            // element within the block
  float input = 0.0f;      // the lane's input (block classes: the block amax)
  double scaled = 0.0;     // x/X with the expected scale (block classes: amax/X)
  std::string expected;    // hex code or scale (value in parentheses)
  std::string actual;
};

struct Count {
  int64_t n = 0;
  std::vector<Example> first;
};

// Agreement of the parts both sides give.
struct Agreement {
  int64_t blocks = 0, blocks_equal = 0;  // a block is equal when every given part is
  int64_t scales = 0, scales_equal = 0;
  int64_t codes = 0, codes_equal = 0;    // elements, padding lanes included
  int64_t values = 0, values_equal = 0;  // elements; NaN equals any NaN
};

struct Diagnosis {
  std::string recipe_id;  // the reference side's recipe
  Format format = Format::mxfp4;
  Agreement agreement;
  std::array<Count, kKinds> kinds;
  // Ties (exact and near) by the direction the kernel chose, and by the
  // parity of the element it chose (even: last mantissa bit 0).
  struct TieSides {
    int64_t away = 0, toward_zero = 0, even = 0, odd = 0;
  } ties, near_ties;
  // Scale differences (scale_up / scale_down blocks): how many code steps,
  // and the significand of the block amax in [1, 2) over those blocks, with
  // the number of equal-scale blocks whose amax significand lies at or above
  // the smallest differing one (0: the differing blocks are exactly the
  // blocks above a significand threshold, the mark of a different scale rule).
  struct ScaleShape {
    int64_t one_step = 0;
    int max_steps = 0;
    double min_significand = 2.0, max_significand = 0.0;
    int64_t equal_at_or_above = 0;
    int64_t truncated = 0;  // NVFP4: actual scale <= amax/6 (in decoded units) < expected
  } scale_shape;

  int64_t count(Kind k) const { return kinds[static_cast<int>(k)].n; }
  int64_t differing_blocks() const;    // sum over block kinds + blocks holding element kinds
  int64_t differing_elements() const;  // sum over element kinds
  bool identical() const;              // no difference of any kind
  // One line: "identical (64 blocks)" or the classes by count, largest first,
  // e.g. "ties rounded away from zero in 212 of 212 differing elements".
  std::string summary() const;
  // One line per class present with its first cases in hex.
  std::vector<std::string> details() const;
};

struct Options {
  int max_examples = 5;  // per class
};

// `input` is the tensor both sides quantized (tensor order). `reference`
// gives the geometry (shape, axis, block, padding), the recipe (and the
// NVFP4 per-tensor scale); its codes and scales may be empty (a fake-quant
// only recipe), then only values are compared. `expected` and `actual` are
// the two sides; `expected` usually is side_of(reference, its values).
// Throws InputError when a given part's size does not fit the geometry.
Diagnosis diagnose(const TensorRef& input, const PackedTensor& reference, const Side& expected, const Side& actual,
                   const Options& options = {});

}  // namespace fp4emu::diagnose
