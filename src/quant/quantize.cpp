// Tensor driver: blocks along any axis, tails, packing. The numerics live in
// the per-format block quantizers (src/quant/reference/*.cpp); this file only
// moves values between the tensor and blocks, and bytes between blocks and
// the packed form.
//
// It is also the one dispatcher between the two implementations: each entry
// point resolves and checks the options, then runs the fast path
// (src/quant/simd, src/quant/simd.hpp) where it covers the recipe and
// options, else the reference loops below (QuantOptions::impl forces either).
#include "fp4emu/quant/quantize.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/nibbles.hpp"
#include "fp4emu/quant/reference.hpp"
#include "fp4emu/quant/tensor_ref.hpp"
#include "src/quant/simd.hpp"
#include "src/quant/strided.hpp"
#include "fp4emu/threads.hpp"

namespace fp4emu {
namespace {

constexpr int kMaxBlock = 64;

std::string recipe_list() {
  std::string list;
  for (const Recipe& r : all_recipes()) {
    if (!list.empty()) list += ", ";
    list += r.id;
  }
  return list;
}


std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The tensor seen as rows along the block axis (see packed_tensor.hpp).
struct BlockedView {
  int64_t outer = 1, axis_len = 0, inner = 1;
  int64_t rows() const { return outer * inner; }
  int64_t index(int64_t row, int64_t k) const {
    const int64_t o = row / inner, i = row % inner;
    return (o * axis_len + k) * inner + i;
  }
};

BlockedView blocked_view(const std::vector<int64_t>& shape, int axis) {
  BlockedView v;
  for (int d = 0; d < axis; ++d) v.outer *= shape[d];
  v.axis_len = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) v.inner *= shape[d];
  return v;
}

// Elements in row-major order, widened a chunk at a time.
void check_bf16_inputs(const ResolvedOptions& o, const detail::StridedIn& x) {
  if (!o.recipe->bf16_input_only || o.input_dtype == InputDType::bf16) return;
  detail::for_each_chunk(x, [&](int64_t first, const float* values, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (!is_bf16_exact(values[i])) {
        throw InputError(fmt::format(
            "recipe {} is defined on bf16 inputs, but element {} = {:.9g} is not exactly representable "
            "in bf16; round the input to bf16 first (or pick another recipe, e.g. {})",
            o.recipe->id, first + i, values[i], default_recipe(o.recipe->format).id));
      }
    }
  });
}

// Per-tensor state a format needs before the blocks are visited.
struct TensorContext {
  reference::NvTensorScale nv;
  std::vector<float> tile_amax;  // NVFP4 16x16 tiles: [row_groups, blocks]
};

// The reference loops read one contiguous row-major fp32 array.
std::vector<float> gather_row(const float* x, const BlockedView& v, int64_t row, int64_t padded_len) {
  std::vector<float> buf(padded_len, 0.0f);
  for (int64_t k = 0; k < v.axis_len; ++k) buf[k] = x[v.index(row, k)];
  return buf;
}

TensorContext prepare(const ResolvedOptions& o, const float* x, const BlockedView& v, int64_t padded_len) {
  TensorContext ctx;
  const Recipe& recipe = *o.recipe;
  if (recipe.format != Format::nvfp4) return ctx;
  const float g = o.global_amax ? *o.global_amax
                                : reference::nvfp4_global_amax(recipe, std::span<const float>(x, v.rows() * v.axis_len));
  ctx.nv = reference::nvfp4_tensor_scale(recipe, g);
  if (recipe.nv.tile_2d) {
    // docs/spec/nvfp4.md §3: the amax of a 16x16 tile (16 consecutive rows x one block)
    // sets the scale of each of its 16 rows.
    const int64_t blocks = padded_len / reference::kNvBlock;
    const int64_t groups = (v.rows() + 15) / 16;
    ctx.tile_amax.assign(groups * blocks, 0.0f);
    for (int64_t g16 = 0; g16 < groups; ++g16) {
      std::vector<std::array<float, 16>> row_amax(blocks);
      for (auto& a : row_amax) a.fill(0.0f);
      for (int64_t rr = 0; rr < 16 && g16 * 16 + rr < v.rows(); ++rr) {
        const std::vector<float> row = gather_row(x, v, g16 * 16 + rr, padded_len);
        for (int64_t b = 0; b < blocks; ++b)
          row_amax[b][rr] = reference::nvfp4_block_amax(recipe, row.data() + b * reference::kNvBlock,
                                                        reference::kNvBlock);
      }
      for (int64_t b = 0; b < blocks; ++b)
        ctx.tile_amax[g16 * blocks + b] = reference::nvfp4_block_amax(recipe, row_amax[b].data(), 16);
    }
  }
  return ctx;
}

// What block b of `row` reads beyond its values: the 16x16 tile's amax where
// there are tiles.
reference::BlockContext block_context(const TensorContext& ctx, int64_t row, int64_t b, int64_t blocks) {
  return {ctx.nv, ctx.tile_amax.empty() ? nullptr : &ctx.tile_amax[(row / 16) * blocks + b]};
}

// The implementation choice: `gap` is empty when the fast path covers the call.
bool run_fast(Impl impl, int threads, const std::string& gap) {
  thread_count(threads);  // the one thread-count rule, on the reference path too
  if (impl == Impl::reference) return false;
  if (gap.empty()) return true;
  if (impl == Impl::fast)
    throw InputError(fmt::format("the fast implementation was requested, but {}; use the automatic choice "
                                 "(--impl auto) or --impl reference",
                                 gap));
  return false;
}

void check_data_size(const TensorRef& x) {
  if (static_cast<int64_t>(x.data.size()) != x.numel())
    throw InputError(fmt::format("tensor of shape {} holds {} values, expected {}", shape_string(x.shape),
                                 x.data.size(), x.numel()));
}

// The owning and borrowed fp32 forms: the caller's values, in place.
void quantize_into(const TensorView& x, const QuantOptions& options, PackedTensor& p) {
  const PackedHeader h = packed_header(x.shape, options);
  // resize keeps what a previous call wrote; quantize writes every byte.
  p.codes.resize(h.code_bytes());
  p.scales.resize(h.scale_bytes());
  static_cast<PackedHeader&>(p) = quantize(x, options, p.codes, p.scales);
}

void quantize_into(const TensorRef& x, const QuantOptions& options, PackedTensor& p) {
  resolve_options(options, x.shape);  // option errors before size errors
  check_data_size(x);
  quantize_into(x.view(), options, p);
}

void fake_quant_into(const TensorRef& x, const QuantOptions& options, Tensor& out) {
  resolve_options(options, x.shape);  // option errors before size errors
  check_data_size(x);
  out.shape = x.shape;
  if (out.data.size() != x.data.size()) out.data.resize(x.data.size());  // every value is written
  fake_quant(x.view(), options, output_view(out.data, out.shape));
}

// A view says its own dtype unless it is fp32 (fp32 values may have come from
// bf16, which QuantOptions::input_dtype declares).
ResolvedOptions resolve_for(const QuantOptions& options, const detail::StridedIn& x) {
  ResolvedOptions o = resolve_options(options, x.shape);
  if (x.dtype != InputDType::f32) o.input_dtype = x.dtype;
  return o;
}

PackedHeader header_for(const ResolvedOptions& o, const std::vector<int64_t>& shape) {
  const Recipe& recipe = *o.recipe;
  const int block = block_size(recipe.format);
  const BlockedView v = blocked_view(shape, o.axis);
  PackedHeader p;
  p.format = recipe.format;
  p.recipe_id = std::string(recipe.id);
  p.shape = shape;
  p.axis = o.axis;
  p.rows = v.rows();
  p.axis_len = v.axis_len;
  p.padded_len = (v.axis_len + block - 1) / block * block;
  p.block_size = block;
  p.rounding = o.rounding;
  p.tail = o.tail;
  p.nibble_order = o.nibble_order;
  p.scale_bit_order = o.scale_bit_order;
  return p;
}

// Where the reference loops write value k of row `row`.
struct OutIndex {
  const detail::StridedOut& out;
  int axis;
  const BlockedView& v;
  int64_t row_base(int64_t row) const {
    return out.contiguous ? (row / v.inner) * v.axis_len * v.inner + row % v.inner
                          : detail::row_offset(out.shape, out.strides, axis, row);
  }
  int64_t step() const { return out.contiguous ? v.inner : out.strides[axis]; }
};

void check_header(const PackedHeader& p, const Recipe* recipe) {
  if (!recipe)
    throw InputError(fmt::format("packed tensor names unknown recipe '{}'; known recipes: {}", p.recipe_id,
                                 recipe_list()));
  const int block = block_size(recipe->format);
  // Cross-check every size field so a damaged file fails here, not in a loop.
  if (p.format != recipe->format || p.block_size != block || p.shape.empty() || p.axis < 0 ||
      p.axis >= static_cast<int>(p.shape.size()))
    throw InputError(fmt::format("packed tensor metadata is inconsistent: recipe {} with format {}, block {}, "
                                 "axis {} of shape {}",
                                 p.recipe_id, format_name(p.format), p.block_size, p.axis, shape_string(p.shape)));
  const BlockedView v = blocked_view(p.shape, p.axis);
  const int64_t padded = (v.axis_len + block - 1) / block * block;
  if (p.rows != v.rows() || p.axis_len != v.axis_len || p.padded_len != padded)
    throw InputError(fmt::format("packed tensor metadata is inconsistent: rows {} / axis_len {} / padded_len {} "
                                 "do not match shape {} blocked along axis {}",
                                 p.rows, p.axis_len, p.padded_len, shape_string(p.shape), p.axis));
}

}  // namespace

std::string_view to_string(Impl impl) {
  switch (impl) {
    case Impl::automatic: return "auto";
    case Impl::reference: return "reference";
    case Impl::fast: return "fast";
  }
  return "?";
}

std::optional<Impl> parse_impl(std::string_view name) {
  if (name == "auto") return Impl::automatic;
  if (name == "reference") return Impl::reference;
  if (name == "fast") return Impl::fast;
  return std::nullopt;
}

ResolvedOptions resolve_options(const QuantOptions& options, const std::vector<int64_t>& shape) {
  ResolvedOptions o;
  o.recipe = &options.recipe.get();
  const Recipe& r = *o.recipe;
  const int block = block_size(r.format);

  if (shape.empty())
    throw InputError("tensor has rank 0 (a scalar); block quantization needs at least one axis");
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] <= 0)
      throw InputError(fmt::format("tensor shape {} has a zero-size or negative dimension {}; nothing to quantize",
                                   shape_string(shape), d));
  const int rank = static_cast<int>(shape.size());
  if (options.axis < -rank || options.axis >= rank)
    throw InputError(fmt::format("axis {} is out of range for a tensor of rank {} (shape {}); use -{}..{}",
                                 options.axis, rank, shape_string(shape), rank, rank - 1));
  o.axis = options.axis < 0 ? options.axis + rank : options.axis;

  o.tail = options.tail.value_or(r.default_tail);
  if (o.tail == TailPolicy::error && shape[o.axis] % block != 0)
    throw InputError(fmt::format(
        "axis {} has length {}, not a multiple of the {} block size {} (tail policy 'error'{}); "
        "use --tail pad to zero-pad the last block, or pad the tensor",
        o.axis, shape[o.axis], format_name(r.format), block,
        options.tail ? "" : fmt::format(", the default of {}", r.id)));

  o.rounding = options.rounding.value_or(r.element_rounding);
  if (options.rounding) check_rounding(r, *options.rounding);

  o.nibble_order = options.nibble_order.value_or(r.nibble_order);
  if (options.scale_bit_order && r.format != Format::hif4)
    throw InputError(fmt::format("--scale-bit-order applies to HiF4 scale words only, not to {}", r.id));
  o.scale_bit_order = options.scale_bit_order.value_or(r.scale_bit_order);

  if (options.global_amax) {
    if (r.format != Format::nvfp4)
      throw InputError(fmt::format("--global-amax applies to NVFP4 only, not to {}", r.id));
    if (!(*options.global_amax >= 0.0f) || std::isinf(*options.global_amax))
      throw InputError(fmt::format("--global-amax {} is invalid: it must be a finite value >= 0",
                                   *options.global_amax));
    // Below 2688/FLT_MAX the encode scale S_enc = 2688/G (docs/spec/nvfp4.md §2.2)
    // is not finite in fp32: every block scale saturates and the outputs
    // shrink by ~1e30 (the recipes clamp or guard it, each its own way).
    // That is a wrong amax, not a choice; 0 stays valid (an all-zero tensor:
    // S_enc = 1). Checked here, so the CLI, C++ and Python callers all refuse it.
    if (*options.global_amax > 0.0f && !std::isfinite(2688.0f / *options.global_amax))
      throw InputError(fmt::format("--global-amax {:g}: the per-tensor encode scale 2688/G overflows fp32 (G must "
                                   "be 0 or at least {:g}); give the tensor's amax, or leave the option out to use "
                                   "the input's",
                                   *options.global_amax, 2688.0 / std::numeric_limits<float>::max()));
  }
  o.global_amax = options.global_amax;
  o.input_dtype = options.input_dtype;
  check_stochastic_bits(options.stochastic, o.rounding == Rounding::stochastic, shape, o.axis);
  return o;
}

PackedHeader packed_header(const std::vector<int64_t>& shape, const QuantOptions& options) {
  PackedHeader p = header_for(resolve_options(options, shape), shape);
  if (p.rounding == Rounding::stochastic) p.stochastic = describe(options.stochastic);
  return p;
}

PackedTensor quantize(const Tensor& x, const QuantOptions& options) {
  PackedTensor p;
  quantize(x, options, p);
  return p;
}

void quantize(const Tensor& x, const QuantOptions& options, PackedTensor& p) { quantize_into(x, options, p); }

PackedTensor quantize(const TensorRef& x, const QuantOptions& options) {
  PackedTensor p;
  quantize_into(x, options, p);
  return p;
}

PackedTensor quantize(const TensorView& x, const QuantOptions& options) {
  PackedTensor p;
  quantize_into(x, options, p);
  return p;
}

TensorRef::TensorRef(std::vector<int64_t> shape_, std::span<const float> data_)
    : shape(std::move(shape_)), data(data_) {
  check_data_size(*this);
}

PackedHeader quantize(const TensorView& view, const QuantOptions& options, std::span<uint8_t> codes,
                      std::span<uint8_t> scales) {
  const detail::StridedIn x = detail::strided(view);
  const ResolvedOptions o = resolve_for(options, x);
  const Recipe& recipe = *o.recipe;
  if (recipe.fake_quant_only)
    throw InputError(fmt::format("recipe {} is fake-quant only (its library never produces codes); "
                                 "use fake-quant, or a recipe with a packed form",
                                 recipe.id));
  PackedHeader p = header_for(o, x.shape);
  if (o.rounding == Rounding::stochastic) p.stochastic = describe(options.stochastic);
  if (static_cast<int64_t>(codes.size()) < p.code_bytes() || static_cast<int64_t>(scales.size()) < p.scale_bytes())
    throw InputError(fmt::format("quantize: the caller's buffers hold {} code and {} scale bytes; shape {} with "
                                 "recipe {} needs {} and {} (packed_header gives the sizes)",
                                 codes.size(), scales.size(), shape_string(x.shape), recipe.id, p.code_bytes(),
                                 p.scale_bytes()));
  codes = codes.first(p.code_bytes());
  scales = scales.first(p.scale_bytes());
  check_bf16_inputs(o, x);

  const int block = p.block_size;
  const int scale_bytes = scale_bytes_per_block(recipe.format);
  if (run_fast(options.impl, options.threads, simd::fast_path_gap(o, simd::Operation::quantize))) {
    simd::quantize(x, o, options.stochastic, options.threads, p, codes.data(), scales.data());  // every byte is written
    return p;
  }
  std::fill(codes.begin(), codes.end(), uint8_t{0});  // nibbles are OR-ed in below
  std::fill(scales.begin(), scales.end(), uint8_t{0});

  std::vector<float> storage;
  const float* dense = detail::dense_f32(x, storage);
  const BlockedView v = blocked_view(x.shape, o.axis);
  const TensorContext ctx = prepare(o, dense, v, p.padded_len);
  p.global_amax = ctx.nv.global_amax;
  p.global_encode_scale = ctx.nv.encode;
  p.global_decode_scale = ctx.nv.decode;

  const int64_t blocks = p.blocks_per_row();
  const reference::FormatOps& ops = reference::format_ops(recipe.format);
  const int64_t row_bytes = p.padded_len / 2;
  std::array<uint8_t, kMaxBlock> block_codes{};
  const bool stochastic = o.rounding == Rounding::stochastic;
  std::vector<uint8_t> row_rbits(stochastic ? p.padded_len : 0);
  for (int64_t row = 0; row < p.rows; ++row) {
    const std::vector<float> buf = gather_row(dense, v, row, p.padded_len);
    if (stochastic)
      stochastic_row_bits(options.stochastic, x.shape, o.axis, block, row, p.padded_len, row_rbits.data());
    for (int64_t b = 0; b < blocks; ++b) {
      const float* in = buf.data() + b * block;
      const uint8_t* rbits = stochastic ? row_rbits.data() + b * block : nullptr;
      const uint32_t scale =
          ops.quantize_block(recipe, o.rounding, block_context(ctx, row, b, blocks), in, block_codes.data(), rbits);
      reference::store_scale(recipe.format, scale, o.scale_bit_order,
                             scales.data() + (row * blocks + b) * scale_bytes);
      uint8_t* row_codes = codes.data() + row * row_bytes;
      for (int j = 0; j < block; ++j) {
        const NibbleSlot s = nibble_slot(o.nibble_order, block, b, j);
        row_codes[s.byte] |= static_cast<uint8_t>((block_codes[j] & 0xF) << (s.high ? 4 : 0));
      }
    }
  }
  return p;
}

Tensor dequantize(const PackedTensor& p) { return dequantize(p, DequantOptions{}); }

Tensor dequantize(const PackedTensor& p, const DequantOptions& options) {
  Tensor out;
  dequantize(p, options, out);
  return out;
}

void dequantize(const PackedTensor& p, const DequantOptions& options, Tensor& out) {
  check_header(p, find_recipe(p.recipe_id));
  out.shape = p.shape;
  out.data.resize(out.numel());  // every value is written
  dequantize(p, p.codes, p.scales, options, output_view(out.data, out.shape));
}

void dequantize(const PackedHeader& p, std::span<const uint8_t> codes, std::span<const uint8_t> scales,
                const DequantOptions& options, const OutputView& out_view) {
  const Recipe* recipe = find_recipe(p.recipe_id);
  check_header(p, recipe);
  if (codes.size() != static_cast<size_t>(p.code_bytes()))
    throw InputError(fmt::format("packed tensor has {} code bytes; shape {} needs {}", codes.size(),
                                 shape_string(p.shape), p.code_bytes()));
  if (scales.size() != static_cast<size_t>(p.scale_bytes()))
    throw InputError(fmt::format("packed tensor has {} scale bytes; shape {} needs {}", scales.size(),
                                 shape_string(p.shape), p.scale_bytes()));
  const detail::StridedOut out = detail::strided(out_view, p.shape);

  if (run_fast(options.impl, options.threads, simd::fast_dequantize_gap(p))) {
    simd::dequantize(p, codes.data(), scales.data(), options.threads, out);
    return;
  }

  const int block = p.block_size;
  const int scale_bytes = scale_bytes_per_block(recipe->format);
  const BlockedView v = blocked_view(p.shape, p.axis);
  const OutIndex at{out, p.axis, v};
  const reference::NvTensorScale ts{p.global_amax, p.global_encode_scale, p.global_decode_scale};
  const int64_t blocks = p.blocks_per_row();
  const reference::FormatOps& ops = reference::format_ops(recipe->format);
  const int64_t row_bytes = p.padded_len / 2;
  std::array<uint8_t, kMaxBlock> block_codes{};
  std::array<float, kMaxBlock> values{};
  for (int64_t row = 0; row < p.rows; ++row) {
    const uint8_t* row_codes = codes.data() + row * row_bytes;
    float* y = out.data + at.row_base(row);
    for (int64_t b = 0; b < blocks; ++b) {
      for (int j = 0; j < block; ++j) {
        const NibbleSlot s = nibble_slot(p.nibble_order, block, b, j);
        block_codes[j] = static_cast<uint8_t>((row_codes[s.byte] >> (s.high ? 4 : 0)) & 0xF);
      }
      const uint32_t scale =
          reference::load_scale(recipe->format, scales.data() + (row * blocks + b) * scale_bytes, p.scale_bit_order);
      ops.decode_block(*recipe, ts, scale, block_codes.data(), values.data());
      for (int j = 0; j < block; ++j) {
        const int64_t k = b * block + j;
        if (k < v.axis_len) y[k * at.step()] = values[j];
      }
    }
  }
}

Tensor fake_quant(const Tensor& x, const QuantOptions& options) {
  Tensor out;
  fake_quant(x, options, out);
  return out;
}

void fake_quant(const Tensor& x, const QuantOptions& options, Tensor& out) { fake_quant_into(x, options, out); }

Tensor fake_quant(const TensorRef& x, const QuantOptions& options) {
  Tensor out;
  fake_quant_into(x, options, out);
  return out;
}

void fake_quant(const TensorView& view, const QuantOptions& options, const OutputView& out_view) {
  const detail::StridedIn x = detail::strided(view);
  const ResolvedOptions o = resolve_for(options, x);
  const detail::StridedOut out = detail::strided(out_view, x.shape);
  const Recipe& recipe = *o.recipe;
  check_bf16_inputs(o, x);
  if (run_fast(options.impl, options.threads, simd::fast_path_gap(o, simd::Operation::fake_quant))) {
    simd::fake_quant(x, o, options.stochastic, options.threads, out);
    return;
  }
  std::vector<float> storage;
  const float* dense = detail::dense_f32(x, storage);
  const int block = block_size(recipe.format);
  const BlockedView v = blocked_view(x.shape, o.axis);
  const OutIndex at{out, o.axis, v};
  const int64_t padded = (v.axis_len + block - 1) / block * block;
  const int64_t blocks = padded / block;
  const reference::FormatOps& ops = reference::format_ops(recipe.format);
  const TensorContext ctx = prepare(o, dense, v, padded);

  std::array<float, kMaxBlock> values{};
  const bool stochastic = o.rounding == Rounding::stochastic;
  std::vector<uint8_t> row_rbits(stochastic ? padded : 0);
  for (int64_t row = 0; row < v.rows(); ++row) {
    const std::vector<float> buf = gather_row(dense, v, row, padded);
    if (stochastic) stochastic_row_bits(options.stochastic, x.shape, o.axis, block, row, padded, row_rbits.data());
    float* y = out.data + at.row_base(row);
    for (int64_t b = 0; b < blocks; ++b) {
      const float* in = buf.data() + b * block;
      const uint8_t* rbits = stochastic ? row_rbits.data() + b * block : nullptr;
      ops.fake_quant_block(recipe, o.rounding, block_context(ctx, row, b, blocks), in, values.data(), rbits);
      for (int j = 0; j < block; ++j) {
        const int64_t k = b * block + j;
        if (k < v.axis_len) y[k * at.step()] = values[j];
      }
    }
  }
}

}  // namespace fp4emu
