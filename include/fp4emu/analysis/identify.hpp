#pragma once
// Which recipe does a kernel implement? Every recipe of a format, with every
// element rounding it allows, quantizes the kernel's input; the kernel's
// output is read in every nibble order (and, for HiF4, both L2/L3 scale bit
// orders) and compared with each (fp4emu/quant/diagnose.hpp). Candidates are
// ranked by agreement: identical blocks first, then identical parts (codes,
// values and scales together). Candidates that agree equally
// keep the enumeration order, which is the tie-break: the recipe table of
// `fp4emu formats` (the format's default recipe first), then the recipe's own
// rounding before the overrides (rne, rha, rtz, tiesToZero), then the
// recipe's own nibble order and scale bit order before the others.
#include <optional>
#include <string>
#include <vector>

#include "fp4emu/quant/diagnose.hpp"
#include "fp4emu/quant/quantize.hpp"

namespace fp4emu::analysis {

// What a kernel wrote for one input tensor; an empty vector is "not given".
// Layouts are those of PackedTensor (packed_tensor.hpp): codes [rows,
// padded_len/2] bytes with the block axis last, scales linear [rows, blocks]
// (HiF4: 32-bit words, little-endian); values are dequantized fp32 in the
// input's own shape.
struct KernelOutput {
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;
  std::vector<float> values;
};

struct IdentifyOptions {
  Format format = Format::mxfp4;
  int axis = -1;
  std::optional<float> global_amax;  // NVFP4: the per-tensor amax the kernel used
  InputDType input_dtype = InputDType::f32;
  int threads = 0;
  diagnose::Options diagnosis;
};

struct Candidate {
  const Recipe* recipe = nullptr;
  Rounding rounding = Rounding::rne;
  NibbleOrder nibble_order = NibbleOrder::low_first;     // how the kernel's codes were read
  ScaleBitOrder scale_bit_order = ScaleBitOrder::lsb_first;  // HiF4: how its scale words were read
  diagnose::Diagnosis diagnosis;
  // The recipe id, with the options a user would pass to reproduce it where
  // they differ from the recipe's own, e.g. "mxfp4.ocp --round rha".
  std::string label() const;
};

struct SkippedRecipe {
  std::string recipe;
  std::string reason;
};

struct IdentifyResult {
  Format format = Format::mxfp4;
  int64_t blocks = 0;
  bool given_codes = false, given_scales = false, given_values = false;
  int quantizations = 0;          // recipe x rounding runs
  std::vector<Candidate> ranked;  // best first
  std::vector<SkippedRecipe> skipped;
  bool exact() const { return !ranked.empty() && ranked.front().diagnosis.identical(); }
};

// Throws InputError when the options or the kernel output do not fit the
// input (the message names the part: codes, scales or values).
IdentifyResult identify(const TensorRef& input, const KernelOutput& kernel, const IdentifyOptions& options);

// The report: one line for an exact match (and the other candidates the
// input cannot tell apart from it); otherwise the closest candidate with its
// diagnosis and first cases, then the next `top - 1` candidates' summaries.
std::string identify_text(const IdentifyResult& r, int top = 3);
// Every candidate, ranked, with its agreement counts and classes.
std::string identify_json(const IdentifyResult& r);

}  // namespace fp4emu::analysis
