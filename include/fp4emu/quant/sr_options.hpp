#pragma once
// The options that ask for stochastic rounding's random bits
// (fp4emu/quant/stochastic.hpp), checked by one rule with one set of
// messages for the command line and the Python module.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/codec/rounding.hpp"
#include "fp4emu/quant/stochastic.hpp"

namespace fp4emu {

// The command line writes them --round stochastic --seed S --rbits FILE.npy,
// the Python module rounding="stochastic", seed=S, rbits=ARRAY: one rule and
// one set of messages for both, each in its caller's spelling.
struct SrSpelling {
  std::string_view round_stochastic = "--round stochastic";
  std::string_view seed = "--seed", offset = "--offset", rng = "--rng", rbits = "--rbits",
                   rbits_map = "--rbits-map";
  std::string_view assign = " ";              // between an option and its value
  std::string_view rbits_value = "FILE.npy";  // what --rbits takes (empty: the caller takes no array)
};
inline constexpr SrSpelling kPythonSrSpelling{"rounding='stochastic'", "seed", "offset", "rng", "rbits", "rbits_map",
                                              "=", "ARRAY"};

// The options as given (empty / nullopt: not given).
struct SrRequest {
  std::optional<Rounding> rounding;  // the element rounding override (nullopt: the recipe's own)
  std::optional<uint64_t> seed, offset;
  std::string rng, rbits_map;
  bool rbits = false;  // a random-bit array is given (attached with check_rbits_array)
};

// InputError unless the options name random bits only with stochastic
// rounding, from exactly one source; else the seed, offset, stream and byte
// map of `bits` (a given array is attached by the caller).
void apply_sr_request(const SrRequest& request, const SrSpelling& spelling, StochasticBits& bits);

// InputError unless a random-bit array of element type `dtype` ("u8", "u32"
// or another name) and `rbits_shape` fits an input of `shape` blocked along
// `axis`: uint8 of the input's shape, or uint32 with that axis of length
// ceil(L / 4). `what` names the array in messages ("--rbits r.npy"). True
// for words.
bool check_rbits_array(std::string_view dtype, const std::vector<int64_t>& rbits_shape,
                       const std::vector<int64_t>& shape, int axis, bool map_given, std::string_view what,
                       const SrSpelling& spelling);

}  // namespace fp4emu
