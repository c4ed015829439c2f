// The options that ask for stochastic rounding's random bits
// (fp4emu/quant/sr_options.hpp).
#include "fp4emu/quant/sr_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4emu/error.hpp"
#include "fp4emu/io/printable.hpp"

namespace fp4emu {
namespace {

// The parsed value of option `option` given as `value`, or InputError naming
// the option and what it accepts.
template <class T>
T known(const std::optional<T>& parsed, std::string_view option, std::string_view value, std::string_view accepted,
        const SrSpelling& s) {
  if (!parsed)
    throw InputError(fmt::format("{}{}'{}' is unknown; use {}", option, s.assign, io::printable(value, 40), accepted));
  return *parsed;
}

}  // namespace

void apply_sr_request(const SrRequest& q, const SrSpelling& s, StochasticBits& bits) {
  const bool stochastic = q.rounding == Rounding::stochastic;
  for (const auto& [given, name] : {std::pair{q.seed.has_value(), s.seed}, {q.offset.has_value(), s.offset},
                                    {!q.rng.empty(), s.rng}, {q.rbits, s.rbits}, {!q.rbits_map.empty(), s.rbits_map}})
    if (given && !stochastic)
      throw InputError(fmt::format("{} applies to {} only (the element rounding is {})", name, s.round_stochastic,
                                   q.rounding ? std::string(to_string(*q.rounding)) : "the recipe's own"));
  if (stochastic && !q.seed && !q.rbits)
    throw InputError(fmt::format("{} needs its random bits: {}{}S (Philox4x32-10, see {}){}", s.round_stochastic,
                                 s.seed, s.assign, s.rng,
                                 s.rbits_value.empty() ? "" : fmt::format(" or {}{}{}", s.rbits, s.assign,
                                                                          s.rbits_value)));
  if (q.seed && q.rbits)
    throw InputError(fmt::format("{} and {} are two sources of random bits; give one", s.seed, s.rbits));
  if ((q.offset || !q.rng.empty()) && !q.seed)
    throw InputError(fmt::format("{} applies to generated bits ({}); with {} the bits are given",
                                 q.offset ? s.offset : s.rng, s.seed, s.rbits));
  if (q.seed) {
    bits.seed = q.seed;
    bits.offset = q.offset.value_or(0);
    if (!q.rng.empty()) bits.rng = known(parse_sr_rng(q.rng), s.rng, q.rng, "philox-te or philox-index", s);
    if (!q.rbits_map.empty() && bits.rng == SrRng::philox_index)
      throw InputError(fmt::format("{} applies to 32-bit words ({} uint32, {}{}philox-te), not to {}{}philox-index, "
                                   "which gives each element its own byte",
                                   s.rbits_map, s.rbits, s.rng, s.assign, s.rng, s.assign));
  }
  if (!q.rbits_map.empty()) bits.map = known(parse_rbits_map(q.rbits_map), s.rbits_map, q.rbits_map, "te or ptx", s);
}

bool check_rbits_array(std::string_view dtype, const std::vector<int64_t>& rbits_shape,
                       const std::vector<int64_t>& shape, int axis, bool map_given, std::string_view what,
                       const SrSpelling& s) {
  const auto text = [](const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); };
  std::vector<int64_t> want = shape;
  if (dtype == "u8") {
    if (map_given)
      throw InputError(fmt::format("{} applies to uint32 words; {} holds one byte per element", s.rbits_map, what));
    if (rbits_shape != want)
      throw InputError(fmt::format("{}: uint8 shape {} differs from the input's {} (one byte per element)", what,
                                   text(rbits_shape), text(want)));
    return false;
  }
  if (dtype == "u32") {
    want[axis] = (want[axis] + 3) / 4;
    if (rbits_shape != want)
      throw InputError(fmt::format("{}: uint32 shape {} should be {}: the input's shape with axis {} (length {}) "
                                   "holding one word per 4 elements",
                                   what, text(rbits_shape), text(want), axis, shape[axis]));
    return true;
  }
  throw InputError(fmt::format("{}: dtype {} is not random bits; use uint8 (one byte per element) or uint32 (one "
                               "word per 4 elements)",
                               what, dtype));
}

}  // namespace fp4emu
