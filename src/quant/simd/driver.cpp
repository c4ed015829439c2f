// Fast tensor driver: splits a tensor into runs of blocks and hands them to
// the SIMD kernels (kernels.cpp) on OpenMP threads. Every run covers whole
// blocks of one row, so each output byte is written by exactly one run and
// the result is the same for any thread count.
//
// Contiguous row-major tensors: blocks along the last axis are read in place
// (bf16/fp16 widened a run at a time). Along any other axis a tile of up to
// kTileColumns neighbouring rows is transposed into a per-thread buffer
// (reading kTileColumns consecutive values per step of the axis), run through
// the same kernels, and transposed back. Strided views go run by run: a run
// with stride 1 along the axis is used in place, any other is gathered into
// (and scattered from) a per-thread buffer.

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <omp.h>

#include "fp4emu/quant/reference.hpp"
#include "fp4emu/threads.hpp"
#include "kernels.hpp"
#include "src/quant/library_ops.hpp"
#include "src/quant/simd.hpp"

namespace fp4emu::simd {
namespace {

// Work items are handed out dynamically, one at a time: on a shared machine a
// thread that loses its core takes fewer items instead of holding the others
// up (a static split waits for the slowest thread). An item is large enough
// that taking one (an atomic increment) costs nothing measurable.
constexpr int64_t kRunValues = 8192;   // values per work item along the axis (a multiple of every block)
constexpr int64_t kTileColumns = 16;   // rows transposed together for a non-last axis
constexpr int64_t kTileRunValues = 1024;
constexpr int64_t kAmaxChunk = 1 << 16;
// Below this many values per thread a parallel region costs more than it saves.
constexpr int64_t kValuesPerThread = 1 << 16;

// Threads worth starting for `values` values, at most `threads`.
int threads_for(int64_t values, int threads) {
  return static_cast<int>(std::clamp<int64_t>(values / kValuesPerThread, 1, threads));
}

// The kernel family that reproduces `r`, read from its parameters: recipes are
// data, so a new recipe with the same parameters gets the fast path too.
std::optional<KernelFamily> fast_kernel(const Recipe& r) {
  switch (r.format) {
    case Format::hif4: {
      // Scale range, non-finite policy and zero sign are per-block rules of
      // every family (hif4-inl.h Hif4Rules); the arithmetic picks the family.
      const Hif4Params& p = r.hif4;
      switch (p.arithmetic) {
        case Hif4Arithmetic::fp32: return p.bf16_element_ratio ? KernelFamily::hif4_amct : KernelFamily::hif4_v14;
        case Hif4Arithmetic::exact:
          if (!p.bf16_element_ratio) return KernelFamily::hif4_f64;
          return std::nullopt;
        case Hif4Arithmetic::pow2_v12:
          if (!p.bf16_element_ratio && p.scale_range == Hif4ScaleRange::clamp) return KernelFamily::hif4_v14;
          return std::nullopt;
        case Hif4Arithmetic::bf16:  // a6_steps: its own saturating range and product sign
          if ((p.scale_range == Hif4ScaleRange::saturate_e6m2 || p.scale_range == Hif4ScaleRange::clamp) &&
              !p.bf16_element_ratio && p.zero_sign == ZeroSign::less_than_zero)
            return KernelFamily::hif4_a6;
          return std::nullopt;
      }
      return std::nullopt;
    }
    case Format::mxfp4: {
      const MxParams& p = r.mx;
      if (p.element_select == MxElementSelect::convert && p.scale_range == MxScaleRange::clamp &&
          p.nan_propagating_amax)
        return KernelFamily::mxfp4;
      if (p.element_select == MxElementSelect::ggml_argmin && p.scale_range == MxScaleRange::x86_uint8_wrap &&
          !p.nan_propagating_amax && p.scale_rule == MxScaleRule::log2f_floor && p.inf_amax == MxInfAmax::scale_rule)
        return KernelFamily::mxfp4_ggml;
      return std::nullopt;
    }
    case Format::nvfp4: {
      // Every parameter but the rule is data the kernels read (nvfp4-inl.h).
      // The rules whose scale step would take a NaN amax through fminf or a
      // rounding need the NaN-dropping amax, and so do 16x16 tiles (the
      // tile amax is reduced here, NaN-free).
      const NvParams& p = r.nv;
      const bool nan_free = p.amax_nan == NvAmaxNan::drop;
      switch (p.rule) {
        case NvScaleRule::te:
        case NvScaleRule::cudnn:
          if (!nan_free) return std::nullopt;
          return KernelFamily::nvfp4;
        case NvScaleRule::cutlass_epi:
        case NvScaleRule::torchao:
        case NvScaleRule::torchao_1l:
        case NvScaleRule::modelopt:
        case NvScaleRule::ct:
          if (p.tile_2d && !nan_free) return std::nullopt;
          return KernelFamily::nvfp4;
        case NvScaleRule::modelopt_fq:
          if (p.tile_2d) return std::nullopt;
          return KernelFamily::nvfp4;
        case NvScaleRule::te_4over6:
          if (!nan_free || p.tile_2d) return std::nullopt;
          return KernelFamily::nvfp4_4over6;
        case NvScaleRule::ggml:
          if (!nan_free || p.tile_2d) return std::nullopt;
          return KernelFamily::nvfp4_ggml;
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// Element roundings each kernel implements for `recipe`.
bool kernel_rounds(KernelFamily f, const Recipe& recipe, Rounding r) {
  switch (f) {
    case KernelFamily::hif4_a6: return r == Rounding::rne || r == Rounding::rha;
    case KernelFamily::hif4_v14:
    case KernelFamily::hif4_amct:
    case KernelFamily::hif4_f64:
    case KernelFamily::mxfp4:
      return r == Rounding::rne || r == Rounding::rha || r == Rounding::rtz || r == Rounding::ties_to_zero ||
             r == Rounding::stochastic;
    case KernelFamily::mxfp4_ggml: return r == Rounding::ties_to_zero;  // its argmin has no other
    case KernelFamily::nvfp4:  // cvt.rs: TransformerEngine's rule only (kernels.cpp NvValues)
      return r == Rounding::rne || r == Rounding::rtz ||
             (r == Rounding::stochastic && recipe.nv.rule == NvScaleRule::te);
    case KernelFamily::nvfp4_4over6: return r == Rounding::rne || r == Rounding::rtz;
    case KernelFamily::nvfp4_ggml: return r == Rounding::ties_to_zero;  // its argmin has no other
  }
  return false;
}

// The tensor as rows along the block axis (packed_tensor.hpp).
struct AxisView {
  int64_t outer = 1, axis_len = 0, inner = 1;
  int64_t rows() const { return outer * inner; }
};
AxisView axis_view(const std::vector<int64_t>& shape, int axis) {
  AxisView v;
  for (int d = 0; d < axis; ++d) v.outer *= shape[d];
  v.axis_len = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) v.inner *= shape[d];
  return v;
}

// One work item: `n` values of row `row` from axis position k0 (a multiple of
// the block size).
struct Run {
  int64_t row, k0, n;
};

// Runs along the last axis, in place. When rows hold whole blocks the tensor
// is one long row, so short rows do not cost a kernel call each.
template <class Fn>
void for_each_contiguous_run(const AxisView& v, int block, int threads, Fn&& fn) {
  const bool whole_blocks = v.axis_len % block == 0;
  const int64_t rows = whole_blocks ? 1 : v.rows();
  const int64_t len = whole_blocks ? v.rows() * v.axis_len : v.axis_len;
  const int64_t runs_per_row = (len + kRunValues - 1) / kRunValues;
  const int64_t items = rows * runs_per_row;
  threads = threads_for(v.rows() * v.axis_len, threads);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t row = item / runs_per_row;
    const int64_t k0 = (item % runs_per_row) * kRunValues;
    fn(Run{row, k0, std::min(kRunValues, len - k0)}, len);
  }
}

// Tiles for a non-last axis: fn(outer, i0, columns, k0, n, buffer) with the
// tile gathered as `columns` rows of n values at stride kTileRunValues.
template <class Fn>
void for_each_tile(const AxisView& v, int threads, Fn&& fn) {
  const int64_t tiles = (v.inner + kTileColumns - 1) / kTileColumns;
  const int64_t runs = (v.axis_len + kTileRunValues - 1) / kTileRunValues;
  const int64_t items = v.outer * tiles * runs;
  threads = threads_for(v.rows() * v.axis_len, threads);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<float> buffer(kTileColumns * kTileRunValues);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t o = item / (tiles * runs);
      const int64_t i0 = (item / runs) % tiles * kTileColumns;
      const int64_t k0 = item % runs * kTileRunValues;
      fn(o, i0, std::min(kTileColumns, v.inner - i0), k0, std::min(kTileRunValues, v.axis_len - k0), buffer.data());
    }
  }
}

// fn(load) with load(i) = element i of x's data widened to fp32: the dtype
// is switched on once, outside the loops.
template <class Fn>
void with_loader(const detail::StridedIn& x, Fn&& fn) {
  switch (x.dtype) {
    case InputDType::f32: {
      const float* p = static_cast<const float*>(x.data);
      fn([p](int64_t i) { return p[i]; });
      return;
    }
    case InputDType::bf16: {
      const uint16_t* p = static_cast<const uint16_t*>(x.data);
      fn([p](int64_t i) { return bf16_bits_to_f32(p[i]); });
      return;
    }
    case InputDType::f16: {
      const uint16_t* p = static_cast<const uint16_t*>(x.data);
      fn([p](int64_t i) { return f16_bits_to_f32(p[i]); });
      return;
    }
  }
}

// Contiguous x: x[o, k0 + k, i0 + c] -> buffer[c * kTileRunValues + k]
void gather_tile(const detail::StridedIn& x, const AxisView& v, int64_t o, int64_t i0, int64_t columns, int64_t k0,
                 int64_t n, float* buffer) {
  with_loader(x, [&](auto load) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t src = (o * v.axis_len + k0 + k) * v.inner + i0;
      for (int64_t c = 0; c < columns; ++c) buffer[c * kTileRunValues + k] = load(src + c);
    }
  });
}

// A run's values in place when they are fp32 at stride 1 (`in_place`), else
// widened into buffer.
bool in_place(const detail::StridedIn& x, int64_t step) { return x.dtype == InputDType::f32 && step == 1; }
const float* read_run(const detail::StridedIn& x, int64_t offset, int64_t step, int64_t n, float* buffer) {
  if (in_place(x, step)) return static_cast<const float*>(x.data) + offset;
  x.load(offset, step, n, buffer);
  return buffer;
}

// Strided views: fn(run, in_buffer, out_buffer) for every run of every row,
// with two per-thread buffers of kRunValues values.
template <class Fn>
void for_each_strided_run(const AxisView& v, int threads, Fn&& fn) {
  const int64_t runs_per_row = (v.axis_len + kRunValues - 1) / kRunValues;
  const int64_t items = v.rows() * runs_per_row;
  threads = threads_for(v.rows() * v.axis_len, threads);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<float> in(kRunValues), out(kRunValues);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t k0 = item % runs_per_row * kRunValues;
      fn(Run{item / runs_per_row, k0, std::min(kRunValues, v.axis_len - k0)}, in.data(), out.data());
    }
  }
}

// Offset of position k0 of the run's row in a strided array.
int64_t run_offset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int axis, const Run& r) {
  return detail::row_offset(shape, strides, axis, r.row) + r.k0 * strides[axis];
}

void scatter_tile(const float* buffer, const AxisView& v, int64_t o, int64_t i0, int64_t columns, int64_t k0,
                  int64_t n, float* y) {
  for (int64_t k = 0; k < n; ++k) {
    float* dst = y + ((o * v.axis_len + k0 + k) * v.inner + i0);
    for (int64_t c = 0; c < columns; ++c) dst[c] = buffer[c * kTileRunValues + k];
  }
}

// The tensor amax G (reference::nvfp4_global_amax) from the NaN-dropping
// maximum and the NaN facts of the parts of x, merged in any order.
void merge_amax(AbsMaxStats& all, const AbsMaxStats& part) {
  all.max_dropping_nan = std::max(all.max_dropping_nan, part.max_dropping_nan);
  all.any_nan = all.any_nan || part.any_nan;
  all.all_nan = all.all_nan && part.all_nan;
}
float tensor_amax(const std::vector<AbsMaxStats>& parts, const detail::StridedIn& x, NvAmaxNan rule) {
  AbsMaxStats all;
  for (const AbsMaxStats& part : parts) merge_amax(all, part);
  if (rule == NvAmaxNan::maxnum && all.all_nan) return std::numeric_limits<float>::quiet_NaN();
  if (rule != NvAmaxNan::propagate || !all.any_nan) return all.max_dropping_nan;
  // torch.amax: |first NaN| in element order, payload kept (rare: a serial scan).
  float first = 0.0f;
  bool found = false;
  detail::for_each_chunk(x, [&](int64_t, const float* values, int64_t count) {
    for (int64_t i = 0; i < count && !found; ++i)
      if (std::isnan(values[i])) {
        first = std::fabs(values[i]);
        found = true;
      }
  });
  return first;
}

// The recipe's tensor amax G, reduced in parallel.
float global_abs_max(const detail::StridedIn& x, NvAmaxNan rule, int threads) {
  const int64_t n = x.numel();
  std::vector<AbsMaxStats> partial;
  if (const float* dense = x.dense_f32()) {
    const int64_t chunks = (n + kAmaxChunk - 1) / kAmaxChunk;
    partial.resize(chunks);
    threads = threads_for(n, threads);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
    for (int64_t c = 0; c < chunks; ++c)
      partial[c] = abs_max_stats(dense + c * kAmaxChunk, std::min(kAmaxChunk, n - c * kAmaxChunk));
  } else {
    // Views: runs along the last axis, widened.
    const int last = static_cast<int>(x.shape.size()) - 1;
    const AxisView v = axis_view(x.shape, last);
    const int64_t runs_per_row = (v.axis_len + kRunValues - 1) / kRunValues;
    partial.resize(v.rows() * runs_per_row);
    for_each_strided_run(v, threads, [&](const Run& r, float* buffer, float*) {
      const float* values = read_run(x, run_offset(x.shape, x.strides, last, r), x.strides[last], r.n, buffer);
      partial[r.row * runs_per_row + r.k0 / kRunValues] = abs_max_stats(values, r.n);
    });
  }
  return tensor_amax(partial, x, rule);
}

// Rounding::stochastic: each run's random bytes (stochastic.hpp), drawn into
// a per-thread buffer just before the run. They depend on the positions
// only, so the result is the same for any split into runs and threads.
struct RunBits {
  const StochasticBits* bits = nullptr;  // null: the rounding is not stochastic
  const std::vector<int64_t>* shape = nullptr;
  int axis = 0, block = 0;
  // A contiguous run over rows of whole blocks (for_each_contiguous_run's
  // one long row) continues into the next rows: `joined` is then the row length.
  KernelArgs at(const KernelArgs& k, int64_t row, int64_t k0, int64_t n, int64_t joined = 0) const {
    if (!bits) return k;
    thread_local std::vector<uint8_t> buffer;
    const int64_t padded = (n + kRbitsPad - 1) / kRbitsPad * kRbitsPad;
    buffer.resize(static_cast<size_t>(std::max(padded, kRunValues)));
    std::fill(buffer.begin() + n, buffer.begin() + padded, uint8_t{0});
    if (joined == 0) {
      stochastic_run_bits(*bits, *shape, axis, block, row, k0, n, buffer.data());
    } else {
      for (int64_t done = 0; done < n;) {
        const int64_t at = k0 + done, len = std::min(n - done, joined - at % joined);
        stochastic_run_bits(*bits, *shape, axis, block, at / joined, at % joined, len, buffer.data() + done);
        done += len;
      }
    }
    KernelArgs a = k;
    a.rbits = buffer.data();
    return a;
  }
};

RunBits run_bits(const ResolvedOptions& o, const StochasticBits& bits, const std::vector<int64_t>& shape) {
  RunBits b;
  if (o.rounding != Rounding::stochastic) return b;
  b.bits = &bits;
  b.shape = &shape;
  b.axis = o.axis;
  b.block = block_size(o.recipe->format);
  return b;
}

KernelArgs kernel_args(const ResolvedOptions& o) {
  KernelArgs k;
  k.recipe = o.recipe;
  k.family = *fast_kernel(*o.recipe);
  k.rounding = o.rounding;
  k.nibble_order = o.nibble_order;
  k.scale_bit_order = o.scale_bit_order;
  if (k.family == KernelFamily::nvfp4_ggml || k.family == KernelFamily::mxfp4_ggml)
    k.ggml_argmin = ggml_argmin_table(o.recipe->format);
  if (k.family == KernelFamily::nvfp4_ggml) k.ggml_literal_bits = nvfp4_ggml_literal_bits();
  return k;
}

// ---- ggml's argmin as thresholds (nvfp4.ggml, mxfp4.ggml) ------------------------
// For x >= 0 and a unit d > 0 the literal argmin (library_ops.hpp
// ggml_best_index, ggml-quants.c:337-348) ranks only the candidates kv*d of
// ggml-common.h:1126-1129 on x's side: the others and index 8 never beat
// index 0. Between two neighbours v = kv[k-1]*d and w = kv[k]*d, fp32(w - x)
// falls and fp32(x - v) rises with x (rounding is monotone), so the argmin
// moves from k - 1 to k at one fp32 x, threshold[k], and no farther candidate
// wins while |x| < 2^20 d (there every fp32 difference of two candidates'
// errors, at least d, survives rounding). threshold[k] is found on the fp32
// line by bisection with the library's own comparison, the strict '<' of
// `err < best_err` included; SimdGgmlArgmin tests it against the reference
// around every threshold. A candidate whose fp32(kv*d) overflows (mxfp4.ggml's
// units 2^125..2^127: scale codes that wrapped, and 253 from an amax whose
// log2f rounds to 128) has error +Inf (NaN at x = Inf) and never wins: its
// threshold is +Inf.

// fabsf(kv*d - x) as ggml evaluates it (ggml-quants.c:339, 341).
float ggml_error(int kv, float d, float x) { return std::fabs(static_cast<float>(kv) * d - x); }

GgmlArgminRow ggml_argmin_row(float d) {
  const auto& kMagnitudes = library::kGgmlValues;  // kvalues_fp4: 0..7 are the magnitudes
  GgmlArgminRow row;
  row.d = d;
  const float inf = std::numeric_limits<float>::infinity();
  std::fill(std::begin(row.threshold) + 1, std::end(row.threshold), inf);
  if (d == 0.0f) {  // every error is |x|: index 0 (nvfp4.ggml: a block that holds Inf has a nonzero scale)
    row.minus_threshold1 = -inf;
    row.limit_bits = std::bit_cast<uint32_t>(inf);
    return row;
  }
  // Past 2^20 d candidates merge; past the largest finite candidate the
  // lookup's index could name an Inf threshold (GgmlArgmin).
  row.limit_bits = std::bit_cast<uint32_t>(std::ldexp(d, 20));  // +Inf's bits where that overflows
  for (int k = 1; k < 8; ++k) {
    if (std::isinf(kMagnitudes[k] * d)) {
      row.limit_bits = std::bit_cast<uint32_t>(kMagnitudes[k - 1] * d);
      break;
    }
    // The comparison fails at v (error 0 there) and holds at w.
    uint32_t lo = std::bit_cast<uint32_t>(kMagnitudes[k - 1] * d);
    uint32_t hi = std::bit_cast<uint32_t>(kMagnitudes[k] * d);
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      const float x = std::bit_cast<float>(mid);
      (ggml_error(kMagnitudes[k], d, x) < ggml_error(kMagnitudes[k - 1], d, x) ? hi : lo) = mid;
    }
    row.threshold[k] = std::bit_cast<float>(hi);
  }
  row.minus_threshold1 = -row.threshold[1];
  row.ratio = kGgmlArgminRatio / d;
  return row;
}

// The rows of scale codes 0..kCodes-1 whose unit is kUnit(code), built once.
template <size_t kCodes, float (*kUnit)(uint8_t)>
const GgmlArgminRow* ggml_rows() {
  static const std::array<GgmlArgminRow, kCodes> table = [] {
    std::array<GgmlArgminRow, kCodes> t;
    for (size_t c = 0; c < kCodes; ++c) t[c] = ggml_argmin_row(kUnit(static_cast<uint8_t>(c)));
    return t;
  }();
  return table.data();
}

}  // namespace

const GgmlArgminRow* ggml_argmin_table(Format format) {
  if (format == Format::mxfp4) return ggml_rows<256, reference::ggml_e8m0_to_fp32_half>();
  return ggml_rows<128, reference::ggml_ue4m3_to_fp32>();
}

// The scale code of quantize_ggml rises with the block's amax
// (ggml_fp32_to_ue4m3 of amax / 6 is monotone, nvfp4.cpp), so the amax bits
// of code s span [first(s), first(s + 1)), and its blocks reach their row's
// limit from max(first(s), limit_bits). The smallest such start over the
// codes; SimdGgmlArgmin checks every finite amax below it against its row.
uint32_t nvfp4_ggml_literal_bits() {
  static const uint32_t bits = [] {
    constexpr uint32_t kInf = 0x7F800000;  // Inf and NaN reach every row's limit (at most +Inf's bits)
    const GgmlArgminRow* rows = ggml_argmin_table(Format::nvfp4);
    auto code_of = [](uint32_t b) { return reference::ggml_fp32_to_ue4m3(std::bit_cast<float>(b) / 6.0f); };
    auto first = [&](int s) {  // the smallest finite amax bits of code >= s, else kInf
      uint32_t lo = 0, hi = kInf;
      while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (code_of(mid) >= s)
          hi = mid;
        else
          lo = mid + 1;
      }
      return lo;
    };
    uint32_t from = kInf;
    uint32_t begin = 0;  // first(0)
    for (int s = 0; s < 128; ++s) {
      const uint32_t end = first(s + 1);
      const uint32_t start = std::max(begin, rows[s].limit_bits);
      if (start < end) from = std::min(from, start);
      begin = end;
    }
    return from;
  }();
  return bits;
}

namespace {

// NVFP4 per-tensor state the kernel arguments point to.
struct NvState {
  std::array<float, 256> factor{};  // reference::nvfp4_decode_factor of each scale byte
  // 16x16 tiles: the tile amax of every block, [rows, blocks_per_row] (empty: none).
  std::vector<float> block_amax;
  int64_t blocks_per_row = 0;
  // The arguments of the run that starts at position k0 of `row`.
  KernelArgs at(const KernelArgs& k, int64_t row, int64_t k0) const {
    if (block_amax.empty()) return k;
    KernelArgs a = k;
    a.nv_block_amax = block_amax.data() + row * blocks_per_row + k0 / reference::kNvBlock;
    return a;
  }
};

// docs/spec/nvfp4.md §3 (quantize.cpp prepare): each block takes the NaN-dropping amax
// of its tile, the 16 blocks at its position in 16 consecutive rows. The same
// loads give the parts of the tensor amax G (tensor_amax merges them), so that
// G costs no pass of its own over the input.
std::vector<AbsMaxStats> nv_tile_amax(const detail::StridedIn& x, int axis, int threads, NvState& state) {
  const AxisView v = axis_view(x.shape, axis);
  const int64_t bpr = (v.axis_len + reference::kNvBlock - 1) / reference::kNvBlock;
  const int64_t groups = (v.rows() + 15) / 16;
  state.blocks_per_row = bpr;
  state.block_amax.resize(v.rows() * bpr);  // every entry is written below
  threads = threads_for(v.rows() * v.axis_len, threads);
  std::vector<AbsMaxStats> parts(threads);  // per thread, merged in any order
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<float> buffer(in_place(x, x.strides[axis]) ? 0 : v.axis_len);
    // The tile's largest |x| so far at each position of a row (zero past its end).
    std::vector<float> lane_amax;
    AbsMaxStats& part = parts[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      lane_amax.assign(bpr * reference::kNvBlock, 0.0f);
      const int64_t rows = std::min<int64_t>(16, v.rows() - g * 16);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t row = g * 16 + r;
        const float* values = read_run(x, detail::row_offset(x.shape, x.strides, axis, row), x.strides[axis],
                                       v.axis_len, buffer.data());
        merge_amax(part, nv_tile_row_amax(values, v.axis_len, lane_amax.data()));
      }
      float* tile = state.block_amax.data() + g * 16 * bpr;
      for (int64_t b = 0; b < bpr; ++b)
        tile[b] = abs_max_dropping_nan(lane_amax.data() + b * reference::kNvBlock, reference::kNvBlock);
      for (int64_t r = 1; r < rows; ++r) std::copy(tile, tile + bpr, tile + r * bpr);
    }
  }
  return parts;
}

// The decode fields of k (nvfp4.cpp nvfp4_decode_block) for a per-tensor scale;
// quantize decodes nothing and gets no factor table.
void nv_decode_args(const Recipe& r, const reference::NvTensorScale& ts, KernelArgs& k, NvState& state,
                    bool decodes = true) {
  k.nv_global_amax = ts.global_amax;
  k.nv_encode = ts.encode;
  k.nv_decode = ts.decode;
  if (decodes) {
    for (int c = 0; c < 256; ++c) state.factor[c] = reference::nvfp4_decode_factor(r, ts, static_cast<uint8_t>(c));
    k.nv_factor = state.factor.data();
  }
  k.nv_positive_zero = reference::nvfp4_decode_positive_zero(r);
}

bool nv_single_level(const Recipe& r) { return r.nv.rule == NvScaleRule::torchao_1l || r.nv.rule == NvScaleRule::ggml; }

// NVFP4 per-tensor scale (the reference driver's `prepare`), with the global
// amax reduced in parallel: by the 16x16 tile pass where there are tiles (one
// read of the input for both amaxes), else by global_abs_max. A single-level
// rule (no per-tensor scale) reads G nowhere: fake-quant skips its pass,
// quantize (`quantizing`) stores it, and takes it run by run with the
// quantizing (`amax_by_run`: then G is not read here, and the scale returned
// holds G = 0).
reference::NvTensorScale nv_tensor_scale(const ResolvedOptions& o, const detail::StridedIn& x, int threads,
                                        bool quantizing, bool amax_by_run, KernelArgs& k, NvState& state) {
  const Recipe& r = *o.recipe;
  const std::vector<AbsMaxStats> tile_parts = r.nv.tile_2d ? nv_tile_amax(x, o.axis, threads, state)
                                                           : std::vector<AbsMaxStats>{};
  float g = 0.0f;
  if (o.global_amax)
    g = *o.global_amax;
  else if ((quantizing && !amax_by_run) || !nv_single_level(r))
    g = r.nv.tile_2d ? tensor_amax(tile_parts, x, r.nv.tensor_amax_nan)
                     : global_abs_max(x, r.nv.tensor_amax_nan, threads);
  const reference::NvTensorScale ts = reference::nvfp4_tensor_scale(r, g);
  nv_decode_args(r, ts, k, state, !quantizing);
  return ts;
}

}  // namespace

std::string fast_path_gap(const ResolvedOptions& o, Operation op) {
  const Recipe& r = *o.recipe;
  if (op == Operation::dequantize) return "dequantize takes a packed tensor; use fast_dequantize_gap";
  const std::optional<KernelFamily> family = fast_kernel(r);
  if (!family) return fmt::format("recipe {} has no fast kernel", r.id);
  if (!kernel_rounds(*family, r, o.rounding))
    return fmt::format("the fast {} kernel has no element rounding '{}'", r.id, to_string(o.rounding));
  return {};
}

std::string fast_dequantize_gap(const PackedHeader& p) {
  const Recipe* r = find_recipe(p.recipe_id);
  if (!r) return fmt::format("unknown recipe '{}'", p.recipe_id);
  switch (r->format) {
    case Format::hif4:   // E6M2 and V12's power-of-two scale byte
    case Format::mxfp4:  // E8M0, and ggml's own decoder
      return {};
    case Format::nvfp4:
      if (r->nv.rule == NvScaleRule::modelopt_fq)
        return fmt::format("recipe {} has no fast decoder", r->id);
      return {};
  }
  return "unknown format";
}

void fake_quant(const detail::StridedIn& x, const ResolvedOptions& o, const StochasticBits& stochastic, int threads,
                const detail::StridedOut& out) {
  threads = thread_count(threads);
  KernelArgs k = kernel_args(o);
  const RunBits bits = run_bits(o, stochastic, x.shape);
  NvState nv;
  if (o.recipe->format == Format::nvfp4) nv_tensor_scale(o, x, threads, false, false, k, nv);
  const AxisView v = axis_view(x.shape, o.axis);
  const int block = block_size(o.recipe->format);
  if (x.contiguous && out.contiguous) {
    float* y = out.data;
    if (v.inner == 1) {
      const float* in = x.dense_f32();
      for_each_contiguous_run(v, block, threads, [&](const Run& r, int64_t len) {
        const int64_t offset = r.row * len + r.k0;
        const KernelArgs a = bits.at(nv.at(k, r.row, r.k0), 0, offset, r.n, v.axis_len);
        if (in) {
          fake_quant_values(a, in + offset, y + offset, r.n);
          return;
        }
        thread_local std::vector<float> buffer;  // bf16/fp16 widened a run at a time
        buffer.resize(kRunValues);
        x.load(offset, 1, r.n, buffer.data());
        fake_quant_values(a, buffer.data(), y + offset, r.n);
      });
      return;
    }
    for_each_tile(v, threads, [&](int64_t o_, int64_t i0, int64_t columns, int64_t k0, int64_t n, float* buffer) {
      gather_tile(x, v, o_, i0, columns, k0, n, buffer);
      // Kernels take restrict pointers and may reread their input after
      // writing (hif4.v14_special's pass-through): never call them in place.
      thread_local std::vector<float> quantized;
      quantized.resize(kTileRunValues);
      for (int64_t c = 0; c < columns; ++c) {
        float* row = buffer + c * kTileRunValues;
        const int64_t index = o_ * v.inner + i0 + c;
        fake_quant_values(bits.at(nv.at(k, index, k0), index, k0, n), row, quantized.data(), n);
        std::copy_n(quantized.data(), n, row);
      }
      scatter_tile(buffer, v, o_, i0, columns, k0, n, y);
    });
    return;
  }
  const int64_t in_step = x.strides[o.axis], out_step = out.strides[o.axis];
  for_each_strided_run(v, threads, [&](const Run& r, float* in_buffer, float* out_buffer) {
    const float* in = read_run(x, run_offset(x.shape, x.strides, o.axis, r), in_step, r.n, in_buffer);
    float* y = out.data + run_offset(out.shape, out.strides, o.axis, r);
    fake_quant_values(bits.at(nv.at(k, r.row, r.k0), r.row, r.k0, r.n), in, out_step == 1 ? y : out_buffer, r.n);
    if (out_step != 1)
      for (int64_t i = 0; i < r.n; ++i) y[i * out_step] = out_buffer[i];
  });
}

void quantize(const detail::StridedIn& x, const ResolvedOptions& o, const StochasticBits& stochastic, int threads,
              PackedHeader& p, uint8_t* codes, uint8_t* scales) {
  threads = thread_count(threads);
  KernelArgs k = kernel_args(o);
  const RunBits bits = run_bits(o, stochastic, x.shape);
  NvState nv;
  const AxisView v = axis_view(x.shape, o.axis);
  const bool nvfp4 = o.recipe->format == Format::nvfp4;
  // A single-level NVFP4 recipe quantizes without G and only stores it: on
  // dense fp32 its amax is taken run by run just before the run is quantized,
  // while the run is in cache, not in a pass of its own over the input (that
  // pass made nvfp4.ggml quantize read 8 bytes per value, not 4); nvfp4.ggml's
  // kernel reports it from the block maxima it reduces anyway (KernelArgs::run_amax).
  // (16x16 tiles take G from their tile pass.)
  const bool amax_by_run = nvfp4 && nv_single_level(*o.recipe) && !o.recipe->nv.tile_2d && !o.global_amax &&
                           x.contiguous && v.inner == 1 && x.dense_f32() != nullptr;
  std::vector<AbsMaxStats> run_amax(amax_by_run ? threads : 0);  // per thread, merged in any order
  auto store_tensor_scale = [&](const reference::NvTensorScale& ts) {
    p.global_amax = ts.global_amax;
    p.global_encode_scale = ts.encode;
    p.global_decode_scale = ts.decode;
  };
  if (nvfp4) store_tensor_scale(nv_tensor_scale(o, x, threads, true, amax_by_run, k, nv));
  const int block = p.block_size;
  const int scale_bytes = scale_bytes_per_block(o.recipe->format);
  const int64_t blocks = p.blocks_per_row();
  // Codes of row r at byte r * padded_len / 2, scales at block r * blocks:
  // position k0 (a multiple of the block) of a row is byte k0 / 2, block k0 / block.
  auto codes_at = [&](int64_t row, int64_t k0) { return codes + row * (p.padded_len / 2) + k0 / 2; };
  auto scales_at = [&](int64_t row, int64_t k0) { return scales + (row * blocks + k0 / block) * scale_bytes; };
  if (x.contiguous && v.inner == 1) {
    const float* in = x.dense_f32();
    // With whole blocks the packed rows are contiguous too: one long row.
    for_each_contiguous_run(v, block, threads, [&](const Run& r, int64_t len) {
      const int64_t offset = r.row * len + r.k0;
      const KernelArgs a = bits.at(nv.at(k, r.row, r.k0), 0, offset, r.n, v.axis_len);
      if (in) {
        if (!amax_by_run) {
          quantize_values(a, in + offset, r.n, codes_at(r.row, r.k0), scales_at(r.row, r.k0));
          return;
        }
        AbsMaxStats amax;
        if (a.family == KernelFamily::nvfp4_ggml) {  // the kernel reports the run's amax (KernelArgs::run_amax)
          KernelArgs reporting = a;
          reporting.run_amax = &amax;
          quantize_values(reporting, in + offset, r.n, codes_at(r.row, r.k0), scales_at(r.row, r.k0));
        } else {
          amax = abs_max_stats(in + offset, r.n);
          quantize_values(a, in + offset, r.n, codes_at(r.row, r.k0), scales_at(r.row, r.k0));
        }
        merge_amax(run_amax[static_cast<size_t>(omp_get_thread_num())], amax);
        return;
      }
      thread_local std::vector<float> buffer;  // bf16/fp16 widened a run at a time
      buffer.resize(kRunValues);
      x.load(offset, 1, r.n, buffer.data());
      quantize_values(a, buffer.data(), r.n, codes_at(r.row, r.k0), scales_at(r.row, r.k0));
    });
    if (amax_by_run) {
      const float g = tensor_amax(run_amax, x, o.recipe->nv.tensor_amax_nan);
      store_tensor_scale(reference::nvfp4_tensor_scale(*o.recipe, g));
    }
    return;
  }
  if (x.contiguous) {
    for_each_tile(v, threads, [&](int64_t o_, int64_t i0, int64_t columns, int64_t k0, int64_t n, float* buffer) {
      gather_tile(x, v, o_, i0, columns, k0, n, buffer);
      for (int64_t c = 0; c < columns; ++c) {
        const int64_t row = o_ * v.inner + i0 + c;
        quantize_values(bits.at(nv.at(k, row, k0), row, k0, n), buffer + c * kTileRunValues, n, codes_at(row, k0),
                        scales_at(row, k0));
      }
    });
    return;
  }
  const int64_t in_step = x.strides[o.axis];
  for_each_strided_run(v, threads, [&](const Run& r, float* in_buffer, float*) {
    const float* in = read_run(x, run_offset(x.shape, x.strides, o.axis, r), in_step, r.n, in_buffer);
    quantize_values(bits.at(nv.at(k, r.row, r.k0), r.row, r.k0, r.n), in, r.n, codes_at(r.row, r.k0),
                    scales_at(r.row, r.k0));
  });
}

void dequantize(const PackedHeader& p, const uint8_t* codes, const uint8_t* scales, int threads,
                const detail::StridedOut& out) {
  threads = thread_count(threads);
  const Recipe& r = *find_recipe(p.recipe_id);
  KernelArgs k;
  k.recipe = &r;
  k.nibble_order = p.nibble_order;
  k.scale_bit_order = p.scale_bit_order;
  NvState nv;
  if (r.format == Format::nvfp4)
    nv_decode_args(r, {p.global_amax, p.global_encode_scale, p.global_decode_scale}, k, nv);
  const AxisView v = axis_view(p.shape, p.axis);
  const int block = p.block_size;
  const int scale_bytes = scale_bytes_per_block(r.format);
  const int64_t blocks = p.blocks_per_row();
  auto codes_at = [&](int64_t row, int64_t k0) { return codes + row * (p.padded_len / 2) + k0 / 2; };
  auto scales_at = [&](int64_t row, int64_t k0) { return scales + (row * blocks + k0 / block) * scale_bytes; };
  if (out.contiguous) {
    float* y = out.data;
    if (v.inner == 1) {
      for_each_contiguous_run(v, block, threads, [&](const Run& run, int64_t len) {
        dequantize_values(k, codes_at(run.row, run.k0), scales_at(run.row, run.k0), run.n,
                          y + run.row * len + run.k0);
      });
      return;
    }
    for_each_tile(v, threads, [&](int64_t o_, int64_t i0, int64_t columns, int64_t k0, int64_t n, float* buffer) {
      for (int64_t c = 0; c < columns; ++c) {
        const int64_t row = o_ * v.inner + i0 + c;
        dequantize_values(k, codes_at(row, k0), scales_at(row, k0), n, buffer + c * kTileRunValues);
      }
      scatter_tile(buffer, v, o_, i0, columns, k0, n, y);
    });
    return;
  }
  const int64_t out_step = out.strides[p.axis];
  for_each_strided_run(v, threads, [&](const Run& run, float*, float* out_buffer) {
    float* y = out.data + run_offset(out.shape, out.strides, p.axis, run);
    dequantize_values(k, codes_at(run.row, run.k0), scales_at(run.row, run.k0), run.n,
                      out_step == 1 ? y : out_buffer);
    if (out_step != 1)
      for (int64_t i = 0; i < run.n; ++i) y[i * out_step] = out_buffer[i];
  });
}

}  // namespace fp4emu::simd
