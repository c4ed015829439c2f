#pragma once
// Rounding modes used by the recipes. Every rounding in fp4emu is an explicit
// argument; nothing relies on the floating-point environment.
#include <cstdint>
#include <optional>
#include <string_view>

namespace fp4emu {

enum class Rounding : uint8_t {
  rne,           // round to nearest, ties to even (IEEE default)
  rha,           // round to nearest, ties away from zero ("half away")
  rtz,           // round toward zero (truncate the magnitude)
  ties_to_zero,  // round to nearest, ties toward zero (ggml's argmin, FP-Quant tables)
  rtp,           // round toward +infinity (CUDA cudaRoundPosInf, "round up" scales)
  // Stochastic rounding with explicit random bits (PTX cvt.rs): r, kStochasticBits
  // wide, is added below the kept precision and the sum truncated, so the
  // magnitude rounds away from zero iff floor(frac * 2^8) + r >= 2^8, where
  // frac is the position between the two neighbours. The bits are an input
  // (encode_stochastic), never drawn implicitly.
  stochastic,
};

// Every rounding, in declaration order: for lists of what a recipe allows.
inline constexpr Rounding kAllRoundings[] = {Rounding::rne, Rounding::rha,        Rounding::rtz,
                                             Rounding::ties_to_zero, Rounding::rtp, Rounding::stochastic};

inline constexpr int kStochasticBits = 8;  // random bits per element (cvt.rs e2m1x4: 32 per 4)

std::string_view to_string(Rounding r);
// Accepts "rne", "rha", "rtz", "tiesToZero" (also "ties_to_zero"), "rtp", "stochastic".
std::optional<Rounding> parse_rounding(std::string_view name);

}  // namespace fp4emu
