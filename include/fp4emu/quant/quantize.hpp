#pragma once
// The quantization API (docs/architecture.md §3): quantize -> PackedTensor, dequantize,
// fake_quant. All functions throw InputError on bad options or input.
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fp4emu/codec/rounding.hpp"
#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "fp4emu/quant/stochastic.hpp"
#include "fp4emu/quant/tensor.hpp"
#include "fp4emu/quant/view.hpp"

namespace fp4emu {

// Which implementation runs (src/quant/simd.hpp lists what the fast path covers).
enum class Impl : uint8_t {
  automatic,  // the fast path where it covers the recipe and options, else the reference
  reference,  // the scalar reference (src/quant/reference), single-threaded
  fast,       // the fast path; an InputError names what it does not cover
};
std::string_view to_string(Impl impl);
std::optional<Impl> parse_impl(std::string_view name);  // "auto", "reference", "fast"

struct QuantOptions {
  RecipeRef recipe;                     // recipe id ("nvfp4.te"), format name (its default), or handle
  int axis = -1;                        // block axis; negative counts from the end
  std::optional<TailPolicy> tail;       // default: the recipe's
  std::optional<Rounding> rounding;     // element-rounding override, where the recipe allows it
  StochasticBits stochastic;            // Rounding::stochastic: its random bits (exactly one source)
  std::optional<NibbleOrder> nibble_order;
  std::optional<ScaleBitOrder> scale_bit_order;  // HiF4 only
  std::optional<float> global_amax;     // NVFP4: per-tensor amax (default: from the input)
  InputDType input_dtype = InputDType::f32;  // of the values of a Tensor (a TensorView says its own)
  Impl impl = Impl::automatic;
  int threads = 0;                      // fast path: 0 = OpenMP default (OMP_NUM_THREADS, else all cores)
};

struct DequantOptions {
  Impl impl = Impl::automatic;
  int threads = 0;
};

// Options checked against a tensor shape, with every default filled in.
struct ResolvedOptions {
  const Recipe* recipe = nullptr;
  int axis = 0;
  TailPolicy tail = TailPolicy::pad;
  Rounding rounding = Rounding::rne;
  NibbleOrder nibble_order = NibbleOrder::low_first;
  ScaleBitOrder scale_bit_order = ScaleBitOrder::lsb_first;
  std::optional<float> global_amax;
  InputDType input_dtype = InputDType::f32;
};
ResolvedOptions resolve_options(const QuantOptions& options, const std::vector<int64_t>& shape);

PackedTensor quantize(const Tensor& x, const QuantOptions& options);
Tensor dequantize(const PackedTensor& packed);
Tensor dequantize(const PackedTensor& packed, const DequantOptions& options);
Tensor fake_quant(const Tensor& x, const QuantOptions& options);

// The same, writing into `out`, whose buffers are reused when they already
// have the right size (repeated calls on large tensors; no reallocation, no
// zero-filling pass).
void quantize(const Tensor& x, const QuantOptions& options, PackedTensor& out);
void dequantize(const PackedTensor& packed, const DequantOptions& options, Tensor& out);
void fake_quant(const Tensor& x, const QuantOptions& options, Tensor& out);

// ---- Non-owning forms (view.hpp): the input is read in place and the results
// are written into caller memory. The Tensor forms above wrap these.
// A bf16 or fp16 view sets the input dtype; an fp32 view uses options.input_dtype.

// The header quantize(x, options, ...) will produce for an input of `shape`,
// for sizing the buffers (code_bytes(), scale_bytes()); its NVFP4 per-tensor
// fields are filled by quantize.
PackedHeader packed_header(const std::vector<int64_t>& shape, const QuantOptions& options);
// Writes exactly header.code_bytes() codes and header.scale_bytes() scales
// (InputError when a span is smaller) and returns the header.
PackedHeader quantize(const TensorView& x, const QuantOptions& options, std::span<uint8_t> codes,
                      std::span<uint8_t> scales);
// Reads exactly code_bytes() codes, scale_bytes() scales; writes all of `out`.
void dequantize(const PackedHeader& header, std::span<const uint8_t> codes, std::span<const uint8_t> scales,
                const DequantOptions& options, const OutputView& out);
// Writes every element of `out` (x's shape).
void fake_quant(const TensorView& x, const QuantOptions& options, const OutputView& out);
// The packed form of a view, in buffers it allocates (the input is not copied).
PackedTensor quantize(const TensorView& x, const QuantOptions& options);

}  // namespace fp4emu
