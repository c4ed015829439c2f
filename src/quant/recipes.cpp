// Format properties, enum names and the recipe registry.
#include <algorithm>
#include <vector>

#include "fp4emu/quant/recipe.hpp"

#include <fmt/format.h>

#include "fp4emu/error.hpp"

namespace fp4emu {

std::string_view format_name(Format f) {
  switch (f) {
    case Format::hif4: return "hif4";
    case Format::mxfp4: return "mxfp4";
    case Format::nvfp4: return "nvfp4";
  }
  return "?";
}

std::optional<Format> parse_format(std::string_view name) {
  if (name == "hif4") return Format::hif4;
  if (name == "mxfp4") return Format::mxfp4;
  if (name == "nvfp4") return Format::nvfp4;
  return std::nullopt;
}

int block_size(Format f) {
  switch (f) {
    case Format::hif4: return 64;
    case Format::mxfp4: return 32;
    case Format::nvfp4: return 16;
  }
  return 0;
}

std::string_view to_string(TailPolicy t) { return t == TailPolicy::pad ? "pad" : "error"; }
std::optional<TailPolicy> parse_tail(std::string_view name) {
  if (name == "pad") return TailPolicy::pad;
  if (name == "error") return TailPolicy::error;
  return std::nullopt;
}

std::string_view to_string(NibbleOrder n) {
  switch (n) {
    case NibbleOrder::low_first: return "low_first";
    case NibbleOrder::high_first: return "high_first";
    case NibbleOrder::split_half: return "split_half";
  }
  return "?";
}
std::optional<NibbleOrder> parse_nibble_order(std::string_view name) {
  if (name == "low_first") return NibbleOrder::low_first;
  if (name == "high_first") return NibbleOrder::high_first;
  if (name == "split_half") return NibbleOrder::split_half;
  return std::nullopt;
}

std::string_view to_string(ScaleBitOrder s) { return s == ScaleBitOrder::lsb_first ? "lsb_first" : "msb_first"; }
std::optional<ScaleBitOrder> parse_scale_bit_order(std::string_view name) {
  if (name == "lsb_first") return ScaleBitOrder::lsb_first;
  if (name == "msb_first") return ScaleBitOrder::msb_first;
  return std::nullopt;
}

std::string_view to_string(ScaleLayout) { return "linear"; }

std::span<const Recipe> all_recipes() {
  static const std::vector<Recipe> recipes = [] {
    std::vector<Recipe> all;
    for (auto table : {hif4_recipes(), mxfp4_recipes(), nvfp4_recipes()})
      all.insert(all.end(), table.begin(), table.end());
    return all;
  }();
  return recipes;
}

void check_rounding(const Recipe& recipe, Rounding rounding) {
  if (recipe.allowed_roundings & rounding_bit(rounding)) return;
  std::string accepted;
  for (Rounding r : kAllRoundings)
    if (recipe.allowed_roundings & rounding_bit(r))
      accepted += (accepted.empty() ? "" : ", ") + std::string(to_string(r));
  throw InputError(fmt::format("recipe {} does not define element rounding '{}'; it accepts: {}", recipe.id,
                               to_string(rounding), accepted));
}

const Recipe* find_recipe(std::string_view id) {
  for (const Recipe& r : all_recipes())
    if (r.id == id) return &r;
  return nullptr;
}

const Recipe& default_recipe(Format f) {
  for (const Recipe& r : all_recipes())
    if (r.format == f && r.is_default) return r;
  // Every format table marks exactly one default; a test pins it.
  return *std::find_if(all_recipes().begin(), all_recipes().end(),
                       [f](const Recipe& r) { return r.format == f; });
}

const Recipe& recipe(std::string_view id_or_format) {
  if (auto f = parse_format(id_or_format)) return default_recipe(*f);
  if (const Recipe* r = find_recipe(id_or_format)) return *r;
  std::string list;
  for (const Recipe& r : all_recipes()) list += fmt::format("{}{}", list.empty() ? "" : ", ", r.id);
  throw InputError(fmt::format("unknown recipe '{}'; known recipes: {} (or a format name: hif4, mxfp4, nvfp4)",
                               id_or_format, list));
}

}  // namespace fp4emu
