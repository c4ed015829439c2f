// `fp4emu identify`: rank every recipe x rounding x packing order of a format
// by agreement with a kernel's output (fp4emu/analysis/identify.hpp).
#include "fp4emu/analysis/identify.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "fp4emu/error.hpp"

namespace fp4emu::analysis {
namespace {

constexpr Rounding kRoundings[] = {Rounding::rne, Rounding::rha, Rounding::rtz, Rounding::ties_to_zero,
                                   Rounding::rtp};
constexpr NibbleOrder kNibbleOrders[] = {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::split_half};
constexpr ScaleBitOrder kScaleBitOrders[] = {ScaleBitOrder::lsb_first, ScaleBitOrder::msb_first};

// `own` first, then the others in table order.
template <class T, size_t N>
std::vector<T> own_first(T own, const T (&all)[N], bool only_own) {
  std::vector<T> out{own};
  if (!only_own)
    for (T t : all)
      if (t != own) out.push_back(t);
  return out;
}

// Ranking key: identical blocks, then identical parts (codes, values and
// scales together, so that a recipe compared on every part the kernel gave
// ranks above a fake-quant-only one compared on its values alone).
bool better(const diagnose::Agreement& l, const diagnose::Agreement& r) {
  if (l.blocks_equal != r.blocks_equal) return l.blocks_equal > r.blocks_equal;
  return l.codes_equal + l.values_equal + l.scales_equal > r.codes_equal + r.values_equal + r.scales_equal;
}

// A candidate that could not be compared on a part the kernel gave.
std::string partial_note(const IdentifyResult& r, const Candidate& c) {
  const diagnose::Agreement& a = c.diagnosis.agreement;
  if ((r.given_codes && a.codes == 0) || (r.given_scales && a.scales == 0))
    return " (values only: the recipe has no packed form)";
  return "";
}

std::string percent(int64_t n, int64_t of) {
  if (of == 0) return "-";
  if (n == of) return "100%";
  return fmt::format("{:.2f}%", std::min(99.99, 100.0 * static_cast<double>(n) / static_cast<double>(of)));
}

std::string agreement_text(const diagnose::Agreement& a) {
  std::string s = fmt::format("blocks {} identical ({} of {})", percent(a.blocks_equal, a.blocks), a.blocks_equal,
                              a.blocks);
  if (a.scales) s += fmt::format(", scales {}", percent(a.scales_equal, a.scales));
  if (a.codes) s += fmt::format(", codes {}", percent(a.codes_equal, a.codes));
  if (a.values) s += fmt::format(", values {}", percent(a.values_equal, a.values));
  return s;
}

// The tensor geometry for a recipe that has no packed form (fake-quant only):
// the diagnosis needs the shape, axis and blocks, not codes.
PackedTensor geometry_only(const TensorRef& x, const ResolvedOptions& o) {
  PackedTensor p;
  p.format = o.recipe->format;
  p.recipe_id = std::string(o.recipe->id);
  p.shape = x.shape;
  p.axis = o.axis;
  p.block_size = block_size(p.format);
  p.axis_len = x.shape[o.axis];
  p.padded_len = (p.axis_len + p.block_size - 1) / p.block_size * p.block_size;
  p.rows = x.numel() / p.axis_len;
  return p;
}

}  // namespace

std::string Candidate::label() const {
  std::string s(recipe->id);
  if (rounding != recipe->element_rounding) s += fmt::format(" --round {}", to_string(rounding));
  if (nibble_order != recipe->nibble_order) s += fmt::format(" --nibble-order {}", to_string(nibble_order));
  if (recipe->format == Format::hif4 && scale_bit_order != recipe->scale_bit_order)
    s += fmt::format(" --scale-bit-order {}", to_string(scale_bit_order));
  return s;
}

IdentifyResult identify(const TensorRef& x, const KernelOutput& kernel, const IdentifyOptions& options) {
  IdentifyResult result;
  result.format = options.format;
  result.given_codes = !kernel.codes.empty();
  result.given_scales = !kernel.scales.empty();
  result.given_values = !kernel.values.empty();
  if (!result.given_codes && !result.given_scales && !result.given_values)
    throw InputError("identify needs the kernel's output: codes, scales or dequantized values");
  if (options.global_amax && options.format != Format::nvfp4)
    throw InputError(fmt::format("--global-amax applies to NVFP4 only, not to {}", format_name(options.format)));

  // Check the kernel's arrays against the geometry once, with the names a
  // user knows (every recipe of a format shares block and scale sizes).
  {
    QuantOptions q;
    q.recipe = std::string(format_name(options.format));
    q.axis = options.axis;
    q.global_amax = options.global_amax;  // refused here as by quantize, not skipped per recipe below
    const ResolvedOptions o = resolve_options(q, x.shape);
    const PackedTensor g = geometry_only(x, o);
    result.blocks = g.num_blocks();
    const int64_t code_bytes = g.rows * g.padded_len / 2;
    const int64_t scale_bytes = g.num_blocks() * scale_bytes_per_block(options.format);
    if (result.given_codes && static_cast<int64_t>(kernel.codes.size()) != code_bytes)
      throw InputError(fmt::format("the kernel's codes hold {} bytes; an input of {} values blocked along axis {} "
                                   "needs {} ({} rows of {} padded values, two codes per byte)",
                                   kernel.codes.size(), x.numel(), o.axis, code_bytes, g.rows, g.padded_len));
    if (result.given_scales && static_cast<int64_t>(kernel.scales.size()) != scale_bytes)
      throw InputError(fmt::format("the kernel's scales hold {} bytes; the input has {} blocks of {} needing {} "
                                   "({} byte{} per block)",
                                   kernel.scales.size(), g.num_blocks(), g.block_size, scale_bytes,
                                   scale_bytes_per_block(options.format),
                                   scale_bytes_per_block(options.format) == 1 ? "" : "s"));
    if (result.given_values && static_cast<int64_t>(kernel.values.size()) != x.numel())
      throw InputError(fmt::format("the kernel's dequantized values hold {} entries; the input has {}",
                                   kernel.values.size(), x.numel()));
  }

  for (const Recipe& recipe : all_recipes()) {
    if (recipe.format != options.format) continue;
    if (recipe.fake_quant_only && !result.given_values) {
      result.skipped.push_back({std::string(recipe.id), "fake-quant only: compared with dequantized values only"});
      continue;
    }
    std::vector<Rounding> roundings{recipe.element_rounding};
    for (Rounding r : kRoundings)
      if (r != recipe.element_rounding && (recipe.allowed_roundings & rounding_bit(r))) roundings.push_back(r);
    for (Rounding rounding : roundings) {
      QuantOptions q;
      q.recipe = std::string(recipe.id);
      q.axis = options.axis;
      q.tail = TailPolicy::pad;  // the kernel's own tail handling is what is being compared
      q.rounding = rounding;
      q.global_amax = options.global_amax;
      q.input_dtype = options.input_dtype;
      q.threads = options.threads;
      PackedTensor reference;
      Tensor values;
      try {
        if (recipe.fake_quant_only) {
          reference = geometry_only(x, resolve_options(q, x.shape));
          values = fake_quant(x, q);
        } else {
          reference = quantize(x, q);
          if (result.given_values) values = dequantize(reference, DequantOptions{.threads = options.threads});
        }
      } catch (const InputError& e) {
        // A recipe that cannot take this input (hif4.a6 on values that are
        // not bf16) is no candidate; say why.
        result.skipped.push_back({std::string(recipe.id), e.what()});
        break;
      }
      ++result.quantizations;
      const diagnose::Side expected = diagnose::side_of(reference, values.data);
      for (NibbleOrder nibbles : own_first(reference.nibble_order, kNibbleOrders, !result.given_codes)) {
        const bool hif4_words = recipe.format == Format::hif4 && result.given_scales;
        for (ScaleBitOrder bits : own_first(reference.scale_bit_order, kScaleBitOrders, !hif4_words)) {
          diagnose::Side actual;
          actual.codes = kernel.codes;
          actual.nibble_order = nibbles;
          actual.scales = kernel.scales;
          actual.scale_bit_order = bits;
          actual.values = kernel.values;
          Candidate c;
          c.recipe = &recipe;
          c.rounding = rounding;
          c.nibble_order = nibbles;
          c.scale_bit_order = bits;
          c.diagnosis = diagnose::diagnose(x, reference, expected, actual, options.diagnosis);
          result.ranked.push_back(std::move(c));
        }
      }
    }
  }
  std::stable_sort(result.ranked.begin(), result.ranked.end(), [](const Candidate& l, const Candidate& r) {
    return better(l.diagnosis.agreement, r.diagnosis.agreement);
  });
  return result;
}

std::string identify_text(const IdentifyResult& r, int top) {
  std::string given;
  for (auto [on, name] : {std::pair{r.given_codes, "codes"}, {r.given_scales, "scales"}, {r.given_values, "values"}})
    if (on) given += (given.empty() ? "" : ", ") + std::string(name);
  std::string s = fmt::format("{} blocks of {}; kernel output: {}; {} candidates from {} quantizations\n", r.blocks,
                              format_name(r.format), given, r.ranked.size(), r.quantizations);
  for (const SkippedRecipe& k : r.skipped) s += fmt::format("not a candidate: {}: {}\n", k.recipe, k.reason);
  if (r.ranked.empty()) return s + "no recipe could run on this input\n";
  const Candidate& best = r.ranked.front();
  if (r.exact()) {
    s += fmt::format("exact match: {} (every block identical)\n", best.label());
    std::string same;
    for (size_t i = 1; i < r.ranked.size() && r.ranked[i].diagnosis.identical(); ++i)
      same += (same.empty() ? "" : ", ") + r.ranked[i].label() + partial_note(r, r.ranked[i]);
    if (!same.empty())
      s += fmt::format("equally exact on this input (it does not tell them apart): {}\n", same);
    return s;
  }
  s += fmt::format("no exact match; closest: {}: {}\n", best.label(), agreement_text(best.diagnosis.agreement));
  s += fmt::format("  {}\n", best.diagnosis.summary());
  for (const std::string& line : best.diagnosis.details()) s += fmt::format("  {}\n", line);
  for (int i = 1; i < top && i < static_cast<int>(r.ranked.size()); ++i) {
    const Candidate& c = r.ranked[i];
    s += fmt::format("{}. {}: {}\n   {}\n", i + 1, c.label(), agreement_text(c.diagnosis.agreement),
                     c.diagnosis.summary());
  }
  return s;
}

std::string identify_json(const IdentifyResult& r) {
  using nlohmann::json;
  json j;
  j["format"] = format_name(r.format);
  j["blocks"] = r.blocks;
  j["given"] = {{"codes", r.given_codes}, {"scales", r.given_scales}, {"values", r.given_values}};
  j["exact"] = r.exact();
  j["quantizations"] = r.quantizations;
  json skipped = json::array();
  for (const SkippedRecipe& k : r.skipped) skipped.push_back({{"recipe", k.recipe}, {"reason", k.reason}});
  j["skipped"] = skipped;
  json cands = json::array();
  for (const Candidate& c : r.ranked) {
    const diagnose::Diagnosis& d = c.diagnosis;
    const diagnose::Agreement& a = d.agreement;
    json cj;
    cj["label"] = c.label();
    cj["recipe"] = c.recipe->id;
    cj["rounding"] = to_string(c.rounding);
    cj["nibble_order"] = to_string(c.nibble_order);
    if (r.format == Format::hif4) cj["scale_bit_order"] = to_string(c.scale_bit_order);
    cj["identical"] = d.identical();
    cj["agreement"] = {{"blocks", a.blocks},   {"blocks_equal", a.blocks_equal}, {"scales", a.scales},
                       {"scales_equal", a.scales_equal}, {"codes", a.codes},    {"codes_equal", a.codes_equal},
                       {"values", a.values}, {"values_equal", a.values_equal}};
    cj["summary"] = d.summary();
    json classes = json::object();
    for (int k = 0; k < diagnose::kKinds; ++k) {
      if (!d.kinds[k].n) continue;
      const auto kind = static_cast<diagnose::Kind>(k);
      json first = json::array();
      for (const diagnose::Example& e : d.kinds[k].first)
        first.push_back({{"block", e.block},
                         {"lane", e.lane},
                         {"input", fmt::format("{:a}", e.input)},
                         {"scaled", fmt::format("{:.9g}", e.scaled)},
                         {"expected", e.expected},
                         {"actual", e.actual}});
      classes[std::string(diagnose::to_string(kind))] = {
          {"count", d.kinds[k].n}, {"unit", diagnose::is_block_kind(kind) ? "blocks" : "elements"}, {"first", first}};
    }
    cj["classes"] = classes;
    cands.push_back(cj);
  }
  j["candidates"] = cands;
  return j.dump(2) + "\n";
}

}  // namespace fp4emu::analysis
