// The non-owning forms (fp4emu/quant/view.hpp): strided fp32, bf16 and fp16
// views, caller buffers and strided outputs give the bits of the Tensor forms
// (whose bits the other suites prove) on both implementations, for every
// recipe and axis; a contiguous fp32 input is not copied.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <new>
#include <random>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "test_util.hpp"

// Bytes allocated through operator new while counting is on: the no-copy
// check. Replacing operator new is global to the test binary; it only counts.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocated{0};
void* counted_alloc(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocated.fetch_add(static_cast<int64_t>(n));
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace
void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace fp4emu {
namespace {

using testing::random_wide;

bool same(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// Row-major element offsets of `shape` laid out with `strides`.
int64_t offset_of(int64_t flat, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += flat % shape[d] * strides[d];
    flat /= shape[d];
  }
  return off;
}

// A strided layout: axes permuted in memory (dimension order `perm`, outermost
// first) with a gap of `gap` elements after every innermost run; `base` makes
// the first element sit past the start, and a negative stride on axis 0 when
// `flip`.
struct Layout {
  std::vector<int64_t> strides;
  int64_t size = 0;   // elements of the backing array
  int64_t base = 0;   // offset of element (0, ..., 0)
};
Layout make_layout(const std::vector<int64_t>& shape, const std::vector<int>& perm, int64_t gap, bool flip) {
  Layout l;
  l.strides.assign(shape.size(), 0);
  int64_t stride = 1;
  for (size_t i = perm.size(); i-- > 0;) {
    l.strides[perm[i]] = stride;
    stride *= shape[perm[i]] + (i + 1 == perm.size() ? gap : 0);
  }
  l.size = stride;
  if (flip) {
    l.base = (shape[0] - 1) * l.strides[0];
    l.strides[0] = -l.strides[0];
  }
  return l;
}

std::vector<std::vector<int>> perms(int rank) {
  if (rank == 2) return {{0, 1}, {1, 0}};
  return {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
}

Tensor random_tensor(const std::vector<int64_t>& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t;
  t.shape = shape;
  t.data.resize(t.numel());
  for (float& v : t.data) v = bf16_rne(random_wide(rng));  // bf16-exact: every recipe takes them
  return t;
}

std::vector<const Recipe*> recipes_under_test() {
  std::vector<const Recipe*> out;
  for (const Recipe& r : all_recipes()) out.push_back(&r);
  return out;
}

QuantOptions options_for(const Recipe& r, int axis, Impl impl) {
  QuantOptions q;
  q.recipe = r;  // by handle
  q.axis = axis;
  q.tail = TailPolicy::pad;
  q.impl = impl;
  return q;
}

// Shapes with tails along every axis, rank 2 and 3.
const std::vector<std::vector<int64_t>> kShapes = {{5, 70}, {3, 36, 4}};

TEST(QuantizeView, StridedF32FakeQuantAndQuantizeMatchTensorForms) {
  uint64_t seed = 11;
  for (const Recipe* r : recipes_under_test()) {
    for (Impl impl : {Impl::reference, Impl::automatic}) {
      for (const auto& shape : kShapes) {
        const Tensor x = random_tensor(shape, seed++);
        for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
          const QuantOptions q = options_for(*r, axis, impl);
          const Tensor want = fake_quant(x, q);
          PackedTensor want_p;
          if (!r->fake_quant_only) want_p = quantize(x, q);
          for (const auto& perm : perms(static_cast<int>(shape.size()))) {
            for (bool flip : {false, true}) {
              const std::string what = fmt::format("{} {} axis {} perm {} flip {}", r->id, to_string(impl), axis,
                                                   fmt::join(perm, ""), flip);
              const Layout in = make_layout(shape, perm, 3, flip);
              std::vector<float> mem(in.size, std::nanf("7"));
              for (int64_t i = 0; i < x.numel(); ++i) mem[in.base + offset_of(i, shape, in.strides)] = x.data[i];
              const TensorView view{mem.data() + in.base, InputDType::f32, shape, in.strides};

              // Output with its own (different) layout.
              const Layout out = make_layout(shape, perms(static_cast<int>(shape.size())).back(), 1, !flip);
              std::vector<float> y(out.size, -1.0f);
              fake_quant(view, q, OutputView{y.data() + out.base, out.strides});
              for (int64_t i = 0; i < x.numel(); ++i)
                ASSERT_TRUE(same(y[out.base + offset_of(i, shape, out.strides)], want.data[i])) << what << " @" << i;

              if (r->fake_quant_only) continue;
              const PackedHeader h = packed_header(shape, q);
              std::vector<uint8_t> codes(h.code_bytes() + 5, 0xAB), scales(h.scale_bytes(), 0xCD);
              const PackedHeader got = quantize(view, q, codes, scales);
              ASSERT_EQ(got.code_bytes(), static_cast<int64_t>(want_p.codes.size())) << what;
              EXPECT_TRUE(std::equal(want_p.codes.begin(), want_p.codes.end(), codes.begin())) << what;
              EXPECT_EQ(codes.back(), 0xAB) << what << ": wrote past code_bytes()";
              EXPECT_EQ(scales, want_p.scales) << what;
              EXPECT_EQ(got.global_decode_scale, want_p.global_decode_scale) << what;
              EXPECT_EQ(got.recipe_id, want_p.recipe_id) << what;
              EXPECT_EQ(got.padded_len, want_p.padded_len) << what;

              // Dequantize from the caller's buffers into the strided output.
              const Tensor want_d = dequantize(want_p, DequantOptions{impl, 0});
              std::fill(y.begin(), y.end(), -1.0f);
              dequantize(got, std::span<const uint8_t>(codes).first(got.code_bytes()), scales, DequantOptions{impl, 0},
                         OutputView{y.data() + out.base, out.strides});
              for (int64_t i = 0; i < x.numel(); ++i)
                ASSERT_TRUE(same(y[out.base + offset_of(i, shape, out.strides)], want_d.data[i]))
                    << what << " dequantize @" << i;
            }
          }
        }
      }
    }
  }
}

// bf16 and fp16 bit patterns give the bits of the widened fp32 Tensor (bf16
// declared as such), contiguous and strided.
TEST(QuantizeView, Bf16AndF16ViewsMatchWidenedTensor) {
  std::mt19937_64 rng(5);
  const std::vector<int64_t> shape = {6, 96};
  std::vector<uint16_t> bf16(6 * 96), f16(6 * 96);
  for (size_t i = 0; i < bf16.size(); ++i) {
    bf16[i] = bf16_encode(random_wide(rng));
    f16[i] = fp16_encode(std::ldexp(random_wide(rng), -20));  // mostly in fp16's range
  }
  // A few specials in each.
  bf16[3] = 0x7FC1;  // NaN with payload
  bf16[4] = 0x8000;
  f16[3] = 0x7E01;
  f16[4] = 0x0001;   // smallest subnormal
  f16[5] = 0xFC00;   // -Inf
  for (const Recipe* r : recipes_under_test()) {
    for (Impl impl : {Impl::reference, Impl::automatic}) {
      for (int axis : {0, 1}) {
        for (InputDType dt : {InputDType::bf16, InputDType::f16}) {
          const std::vector<uint16_t>& bits = dt == InputDType::bf16 ? bf16 : f16;
          Tensor wide;
          wide.shape = shape;
          for (uint16_t b : bits) wide.data.push_back(dt == InputDType::bf16 ? bf16_decode(b) : fp16_decode(b));
          if (dt == InputDType::f16)  // fp16_decode goes through double: keep the NaN payload as a widening would
            wide.data[3] = std::bit_cast<float>(0x7FC02000u);
          QuantOptions q = options_for(*r, axis, impl);
          q.input_dtype = dt;
          const std::string what = fmt::format("{} {} axis {} {}", r->id, to_string(impl), axis,
                                               dt == InputDType::bf16 ? "bf16" : "f16");
          bool tensor_throws = false;
          Tensor want;
          try {
            want = fake_quant(wide, q);
          } catch (const InputError&) {
            tensor_throws = true;  // hif4.a6 on fp16 values that are not bf16
          }
          // Contiguous, and transposed (a column-major array of the same values).
          std::vector<uint16_t> transposed(bits.size());
          for (int64_t i = 0; i < 6; ++i)
            for (int64_t j = 0; j < 96; ++j) transposed[j * 6 + i] = bits[i * 96 + j];
          for (const TensorView& view : {TensorView{bits.data(), dt, shape, {}},
                                         TensorView{transposed.data(), dt, shape, {1, 6}}}) {
            std::vector<float> y(bits.size());
            if (tensor_throws) {
              EXPECT_THROW(fake_quant(view, q, OutputView{y.data(), {}}), InputError) << what;
              continue;
            }
            fake_quant(view, q, OutputView{y.data(), {}});
            for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(same(y[i], want.data[i])) << what << " @" << i;
            if (r->fake_quant_only) continue;
            const PackedTensor want_p = quantize(wide, q);
            std::vector<uint8_t> codes(want_p.codes.size()), scales(want_p.scales.size());
            quantize(view, q, codes, scales);
            EXPECT_EQ(codes, want_p.codes) << what;
            EXPECT_EQ(scales, want_p.scales) << what;
          }
        }
      }
    }
  }
}

TEST(QuantizeView, ContiguousF32InputIsNotCopied) {
  const std::vector<int64_t> shape = {256, 4096};  // 4 MiB of input
  const Tensor x = random_tensor(shape, 3);
  std::vector<float> y(x.data.size());
  std::vector<uint8_t> codes, scales;
  for (const char* id : {"hif4.v14", "mxfp4.ocp", "nvfp4.te"}) {
    QuantOptions q;
    q.recipe = id;
    q.impl = Impl::fast;
    const PackedHeader h = packed_header(shape, q);
    codes.resize(h.code_bytes());
    scales.resize(h.scale_bytes());
    const TensorView view = f32_view(x.data, shape);
    const OutputView out = output_view(y, shape);
    g_allocated = 0;
    g_counting = true;
    fake_quant(view, q, out);
    quantize(view, q, codes, scales);
    g_counting = false;
    // Per-thread run buffers and small bookkeeping only: far below one copy.
    EXPECT_LT(g_allocated.load(), static_cast<int64_t>(x.data.size() * sizeof(float) / 8)) << id;
  }
}

TEST(QuantizeView, BadViewsAndBuffersAreInputErrors) {
  const std::vector<float> v(64, 1.0f);
  std::vector<float> y(64);
  QuantOptions q;
  q.recipe = "mxfp4";
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no InputError");
  };
  EXPECT_NE(message([&] { f32_view(v, {2, 31}); }).find("needs 62"), std::string::npos);
  EXPECT_NE(message([&] { fake_quant(TensorView{v.data(), InputDType::f32, {2, 32}, {32}}, q, OutputView{y.data(), {}}); })
                .find("1 strides"),
            std::string::npos);
  EXPECT_NE(message([&] { fake_quant(TensorView{nullptr, InputDType::f32, {2, 32}, {}}, q, OutputView{y.data(), {}}); })
                .find("data is null"),
            std::string::npos);
  EXPECT_NE(message([&] { fake_quant(f32_view(v, {2, 32}), q, OutputView{nullptr, {}}); }).find("data is null"),
            std::string::npos);
  std::vector<uint8_t> codes(31), scales(2);
  EXPECT_NE(message([&] { quantize(f32_view(v, {2, 32}), q, codes, scales); }).find("packed_header gives the sizes"),
            std::string::npos);
  q.recipe = "mxfp4.nope";
  EXPECT_NE(message([&] { packed_header({2, 32}, q); }).find("unknown recipe 'mxfp4.nope'"), std::string::npos);
}

TEST(RecipeHandle, HandleAndIdSelectTheSameRecipe) {
  EXPECT_EQ(&recipe("nvfp4"), &default_recipe(Format::nvfp4));
  EXPECT_EQ(&recipe("mxfp4.rceil"), find_recipe("mxfp4.rceil"));
  EXPECT_THROW(recipe("nope"), InputError);
  const Tensor x = random_tensor({4, 64}, 9);
  for (const Recipe& r : all_recipes()) {
    QuantOptions by_id, by_handle;
    by_id.recipe = std::string(r.id);
    by_handle.recipe = r;
    EXPECT_EQ(by_handle.recipe.name(), r.id);
    const Tensor a = fake_quant(x, by_id), b = fake_quant(x, by_handle);
    for (size_t i = 0; i < a.data.size(); ++i) ASSERT_TRUE(same(a.data[i], b.data[i])) << r.id;
  }
}

}  // namespace
}  // namespace fp4emu
