#include "fp4emu/analysis/compare.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/reference.hpp"

namespace fp4emu {

namespace {

QuantOptions options_for(const Recipe& recipe, const CompareOptions& options, InputDType dtype) {
  QuantOptions o;
  o.recipe = std::string(recipe.id);
  o.axis = options.axis;
  o.tail = options.tail;
  o.rounding = options.rounding;
  o.stochastic = options.stochastic;
  o.input_dtype = dtype;
  o.threads = options.threads;
  return o;
}

const MinifloatTraits& element_traits(Format f) { return f == Format::hif4 ? kS1P2 : kE2M1; }

// A recipe whose own default tail policy is `error` (hif4.amct, hif4.a6)
// cannot run on a ragged axis unless a tail policy is given: the tensor is
// skipped for that recipe instead of failing the whole comparison.
std::string default_tail_refusal(const Recipe& r, const std::vector<int64_t>& shape, const CompareOptions& options) {
  if (options.tail || r.default_tail != TailPolicy::error) return {};
  const int rank = static_cast<int>(shape.size());
  const int axis = options.axis < 0 ? options.axis + rank : options.axis;
  if (axis < 0 || axis >= rank || shape[axis] % block_size(r.format) == 0) return {};
  return fmt::format("its default tail policy is 'error' and axis {} has length {}, not a multiple of {}; give --tail "
                     "pad to include it",
                     axis, shape[axis], block_size(r.format));
}

}  // namespace

void check_compare(const std::vector<int64_t>& shape, std::span<const Recipe* const> recipes,
                   const CompareOptions& options) {
  for (const Recipe* r : recipes) {
    QuantOptions o = options_for(*r, options, InputDType::f32);
    if (!default_tail_refusal(*r, shape, options).empty()) o.tail = TailPolicy::pad;  // skipped later, not an error
    (void)resolve_options(o, shape);
  }
}

int64_t count_saturated(const TensorRef& x, std::span<const float> quantized, const PackedTensor& p) {
  if (quantized.size() != x.data.size() || p.shape != x.shape || p.nibble_order != NibbleOrder::low_first) {
    throw std::invalid_argument("count_saturated: packed tensor does not describe x (shape, low_first codes)");
  }
  const uint32_t max_code = max_finite_code(element_traits(p.format));
  // Element (outer o, k, inner i) is code k of row o * inner + i
  // (packed_tensor.hpp), nibble 2j in the low half of byte j (low_first).
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(p.axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t outer = p.rows / inner;
  int64_t count = 0;
  size_t idx = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < p.axis_len; ++k) {
      for (int64_t i = 0; i < inner; ++i, ++idx) {
        const float a = x.data[idx];
        const float q = quantized[idx];
        if (!std::isfinite(a) || !std::isfinite(q) || !(std::fabs(a) > std::fabs(q))) continue;
        const int64_t pos = (o * inner + i) * p.padded_len + k;
        const uint8_t byte = p.codes[static_cast<size_t>(pos / 2)];
        const uint32_t code = (pos & 1) ? (byte >> 4) : (byte & 0xF);
        if ((code & 0x7u) == max_code) ++count;
      }
    }
  }
  return count;
}

double bits_per_element(const Recipe& recipe, const std::vector<int64_t>& shape, int axis) {
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) return 0.0;
  const int a = axis < 0 ? axis + rank : axis;
  double numel = 1.0;
  for (int64_t d : shape) numel *= static_cast<double>(d);
  if (numel == 0.0 || a < 0 || a >= rank) return 0.0;
  const int block = block_size(recipe.format);
  const double rows = numel / static_cast<double>(shape[a]);
  const double blocks = rows * std::ceil(static_cast<double>(shape[a]) / block);
  double bits = blocks * block * 4.0 + blocks * scale_bytes_per_block(recipe.format) * 8.0;
  if (recipe.format == Format::nvfp4) bits += 32.0;  // the fp32 per-tensor scale
  return bits / numel;
}

RecipeResult compare_recipe(const TensorRef& x, InputDType dtype, const Recipe& recipe,
                            const CompareOptions& options, const TensorPiece* piece) {
  RecipeResult r;
  r.recipe = &recipe;
  const std::vector<int64_t>& shape = piece ? piece->shape : x.shape;
  const int64_t first = piece ? piece->first_element : 0;
  r.bits_per_element = bits_per_element(recipe, shape, options.axis);
  r.skipped = default_tail_refusal(recipe, shape, options);
  if (!r.skipped.empty()) return r;
  if (recipe.bf16_input_only && dtype != InputDType::bf16) {
    for (size_t i = 0; i < x.data.size(); ++i) {
      if (!is_bf16_exact(x.data[i])) {
        r.skipped = fmt::format("defined on bf16 inputs; element {} = {:.9g} is not a bf16 value",
                                int64_t(i) + first, x.data[i]);
        return r;
      }
    }
  }
  QuantOptions o = options_for(recipe, options, dtype);
  if (piece && recipe.format == Format::nvfp4) o.global_amax = piece->global_amax;
  const Tensor q = fake_quant(x, o);
  r.stats = error_stats(x.data, q.data);
  if (!recipe.fake_quant_only) {
    o.nibble_order = NibbleOrder::low_first;
    r.stats.saturated = count_saturated(x, q.data, quantize(x, o));
  }
  return r;
}

std::optional<float> piece_amax(const Recipe& recipe, std::span<const float> x) {
  if (recipe.format != Format::nvfp4) return std::nullopt;
  return reference::nvfp4_global_amax(recipe, x);
}

bool usable_global_amax(const Recipe& recipe, float amax) {
  // The quantizer's own check (resolve_options), not a copy of it.
  QuantOptions o;
  o.recipe = std::string(recipe.id);
  o.global_amax = amax;
  try {
    (void)resolve_options(o, {1, block_size(recipe.format)});
  } catch (const InputError&) {
    return false;
  }
  return true;
}

RecipeResult merge_pieces(std::span<const RecipeResult> pieces) {
  if (pieces.empty()) throw std::invalid_argument("merge_pieces: no pieces");
  RecipeResult r = pieces[0];
  for (size_t k = 1; k < pieces.size() && r.skipped.empty(); ++k) {
    if (!pieces[k].skipped.empty()) {
      r.skipped = pieces[k].skipped;
      r.stats = {};
    } else {
      r.stats.merge(pieces[k].stats);
    }
  }
  return r;
}

void PooledResult::add(const RecipeResult& r, int64_t numel) {
  if (!r.skipped.empty()) return;
  if (tensors == 0) {
    stats = r.stats;
  } else {
    stats.merge(r.stats);
  }
  ++tensors;
  const double db = r.stats.qsnr_db();
  if (!std::isnan(db)) {
    sum_qsnr_db += db;
    ++qsnr_terms;
  }
  elements += numel;
  bits += r.bits_per_element * static_cast<double>(numel);
}

double PooledResult::mean_qsnr_db() const {
  if (qsnr_terms == 0) return std::numeric_limits<double>::quiet_NaN();
  return sum_qsnr_db / static_cast<double>(qsnr_terms);
}

}  // namespace fp4emu
