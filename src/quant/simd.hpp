#pragma once
// The fast path (src/quant/simd/): Highway SIMD block kernels chosen at run
// time for the CPU, and an OpenMP tensor driver over runs of blocks. It gives
// the same bits as the scalar reference for the recipes and options it
// covers; quantize/fake_quant/dequantize (quantize.hpp) use it automatically
// there. These entry points are for the dispatcher, tests and benchmarks;
// they are not installed.
//
// Covered: every recipe (every element rounding each allows, stochastic
// included, every nibble and scale-bit order, any axis); dequantize of every
// recipe with codes (nvfp4.modelopt_fq is fake-quant only). Which kernel runs
// a recipe is read from its parameters (driver.cpp fast_kernel).
// Deterministic: the output does not depend on the thread count (nor do the
// random bytes of stochastic rounding, drawn by element position).
#include <cstdint>
#include <string>
#include <vector>

#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "src/quant/strided.hpp"

namespace fp4emu::simd {

enum class Operation : uint8_t { fake_quant, quantize, dequantize };

// Empty when the fast path covers the recipe with these options; otherwise
// the reason, as a phrase ("recipe mxfp4.ggml has no fast kernel").
std::string fast_path_gap(const ResolvedOptions& o, Operation op);
std::string fast_dequantize_gap(const PackedHeader& p);

// `threads`: fp4emu/threads.hpp's rule (0: OpenMP's default).
// Views (strided.hpp): an input whose block axis has stride 1 is read in
// place (bf16/fp16 widened a run at a time), any other is gathered a tile or
// a run at a time into per-thread buffers; outputs likewise.
//
// Preconditions: fast_path_gap(o, op) is empty and x passed the checks of
// quantize.cpp (shape, bf16 values for hif4.a6); `out` has x's shape.
// `stochastic`: the random bits of Rounding::stochastic (read only then).
void fake_quant(const detail::StridedIn& x, const ResolvedOptions& o, const StochasticBits& stochastic, int threads,
                const detail::StridedOut& out);
// Fills `codes` and `scales` (p.code_bytes(), p.scale_bytes()) and the
// per-tensor fields of `p`, whose other fields the caller has set.
void quantize(const detail::StridedIn& x, const ResolvedOptions& o, const StochasticBits& stochastic, int threads,
              PackedHeader& p, uint8_t* codes, uint8_t* scales);
// Precondition: fast_dequantize_gap(p) is empty, p is consistent and `out`
// has p's shape.
void dequantize(const PackedHeader& p, const uint8_t* codes, const uint8_t* scales, int threads,
                const detail::StridedOut& out);

// ---- Highway targets (tests and benchmarks) ----------------------------------
// The targets compiled into the kernels that this CPU supports (Highway's
// HWY_* bits, one per entry); the scalar fallback is always among them.
std::vector<int64_t> compiled_targets();
std::string target_name(int64_t target);
// The target HWY_DYNAMIC_DISPATCH uses now.
std::string dispatched_target();
// Restricts dispatch to `target` (hwy::SetSupportedTargetsForTest); 0 undoes it.
void force_target(int64_t target);

// Restricts dispatch to one target for its lifetime (tests run a kernel on
// every compiled target in turn).
class ForcedTarget {
 public:
  explicit ForcedTarget(int64_t target) { force_target(target); }
  ~ForcedTarget() { force_target(0); }
  ForcedTarget(const ForcedTarget&) = delete;
  ForcedTarget& operator=(const ForcedTarget&) = delete;
};

}  // namespace fp4emu::simd
