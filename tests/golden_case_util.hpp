#pragma once
// A golden case read the way an external kernel harness reads it
// (golden/README.md): its input tensor, and the quantizer options its
// manifest entry names.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/recipe.hpp"

namespace fp4emu::testing {

inline Tensor read_case_input(const std::filesystem::path& case_dir) {
  const io::Array in = io::read_npy(case_dir / "input.npy");
  Tensor x;
  x.shape = in.shape;
  x.data = io::to_f32(in);
  return x;
}

// Recipe, axis, tail, nibble and scale-bit orders, global amax and input
// dtype of case `c`; rounding, implementation and threads are the caller's.
inline QuantOptions case_options(const nlohmann::json& c) {
  const nlohmann::json& opt = c["options"];
  QuantOptions o;
  o.recipe = c["recipe"].get<std::string>();
  o.axis = opt["axis"];
  o.tail = parse_tail(opt["tail"].get<std::string>());
  o.nibble_order = parse_nibble_order(opt["nibble_order"].get<std::string>());
  if (!opt["scale_bit_order"].is_null())
    o.scale_bit_order = parse_scale_bit_order(opt["scale_bit_order"].get<std::string>());
  if (!opt["global_amax"].is_null())
    o.global_amax = std::strtof(opt["global_amax"].get<std::string>().c_str(), nullptr);
  o.input_dtype = c["input_dtype"] == "bf16" ? InputDType::bf16 : InputDType::f32;
  return o;
}

}  // namespace fp4emu::testing
