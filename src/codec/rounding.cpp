#include "fp4emu/codec/rounding.hpp"

namespace fp4emu {

std::string_view to_string(Rounding r) {
  switch (r) {
    case Rounding::rne: return "rne";
    case Rounding::rha: return "rha";
    case Rounding::rtz: return "rtz";
    case Rounding::ties_to_zero: return "tiesToZero";
    case Rounding::rtp: return "rtp";
    case Rounding::stochastic: return "stochastic";
  }
  return "?";
}

std::optional<Rounding> parse_rounding(std::string_view name) {
  if (name == "rne") return Rounding::rne;
  if (name == "rha") return Rounding::rha;
  if (name == "rtz") return Rounding::rtz;
  if (name == "tiesToZero" || name == "ties_to_zero") return Rounding::ties_to_zero;
  if (name == "rtp") return Rounding::rtp;
  if (name == "stochastic") return Rounding::stochastic;
  return std::nullopt;
}

}  // namespace fp4emu
