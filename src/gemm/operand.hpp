#pragma once
// GEMM operands in the form the models read (internal to src/gemm).
//
// A packed operand becomes rows of integers N (a row of A, or a column of B:
// both run along k) and one unit per block, the exact value of N = 1
// (gemm.hpp). Units come from the recipe's own reference block decoder, so
// every recipe quirk (ggml's 0xFF and 0x7F, V12's power-of-two byte) is read
// from one place; the integers come from the element codecs.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "fp4emu/gemm/gemm.hpp"

namespace fp4emu::gemm_detail {

enum class Side : uint8_t { a, b };
std::string_view side_name(Side s);  // "A" or "B"
// Which axis of the operand is k: A (m×k) 1; B 0 as k×n, 1 as W n×k (BLayout).
int k_axis(Side side, BLayout layout);
// The operand's shape in words: "m×k", "k×n" or "n×k".
std::string_view shape_name(Side side, BLayout layout);

// A finite dyadic rational m·2^e (m = 0 for zero), or a special.
struct Dyadic {
  int64_t m = 0;
  int e = 0;
};
// Splits a finite fp32 value exactly: x = m·2^e with m odd, or m = 0.
Dyadic split_fp32(float x);

// GEMM working buffers of 1 MiB and more take whole 2 MiB pages, with
// transparent huge pages asked for (madvise; only advice, and ignored where
// the system has them off): a call's fresh buffers (about 12 MB at 1024³,
// 1 MiB each but C) otherwise fault in 4 KiB at a time, which took a quarter
// to a third of block_fp32's time at 1024³ (docs/gemm.md "Speed").
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kLargeBufferBytes = kHugePageBytes / 2;
void* allocate_large_buffer(size_t bytes);  // bytes >= kLargeBufferBytes; never null
void free_large_buffer(void* p, size_t bytes) noexcept;
// Asks for huge pages on the whole 2 MiB pages within [p, p + bytes), for
// buffers allocated elsewhere (C, a std::vector) before they are written.
void advise_huge_pages(void* p, size_t bytes) noexcept;

template <class T>
struct LargeBufferAllocator {
  using value_type = T;
  LargeBufferAllocator() = default;
  template <class U>
  LargeBufferAllocator(const LargeBufferAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n * sizeof(T) < kLargeBufferBytes) return std::allocator<T>().allocate(n);
    return static_cast<T*>(allocate_large_buffer(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) < kLargeBufferBytes) return std::allocator<T>().deallocate(p, n);
    free_large_buffer(p, n * sizeof(T));
  }
  template <class U>
  bool operator==(const LargeBufferAllocator<U>&) const noexcept { return true; }
};
template <class T>
using LargeBuffer = std::vector<T, LargeBufferAllocator<T>>;

// Leaves the elements of a resize() uninitialised, for buffers written whole
// before they are read (decoded operands, fma_fp32's panels, the unpacked
// operands and integer layouts): zero-filling W's fp32 copy first (180 MB at
// 4096×11008) took a quarter of the `fast` model's time, and the zero-fills
// of block_fp32's buffers ran on the calling thread before its parallel
// region, a quarter of a 2-thread call at 1024³ (docs/gemm.md "Speed").
template <class T>
struct UninitialisedAllocator : LargeBufferAllocator<T> {
  template <class U>
  struct rebind {
    using other = UninitialisedAllocator<U>;
  };
  UninitialisedAllocator() = default;
  template <class U>
  UninitialisedAllocator(const UninitialisedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using UninitialisedBuffer = std::vector<T, UninitialisedAllocator<T>>;
using Fp32Rows = UninitialisedBuffer<float>;

struct PackedOperand {
  Format format = Format::mxfp4;
  int64_t rows = 0;    // m for A, n for B
  int64_t k = 0;
  int64_t kpad = 0;    // k rounded up to the block
  int block = 0;
  int64_t blocks = 0;  // kpad / block
  // Written whole by unpack_rows (packed_operand_shell leaves them unset).
  UninitialisedBuffer<int8_t> n;       // rows × kpad integers, 0 beyond k
  // rows × kpad: the sign bit of each element's value, 1 for N < 0 and for
  // −0 (E2M1/S1P2 code 0x8 where the recipe's decoder keeps the sign);
  // unset where unpack_rows was told not to write it
  UninitialisedBuffer<uint8_t> sign;
  UninitialisedBuffer<float> unit;     // rows × blocks; NaN marks a NaN block
  UninitialisedBuffer<int8_t> unit_m;  // unit = unit_m · 2^unit_e, unit_m odd (0 for a zero unit)
  UninitialisedBuffer<int16_t> unit_e;

  int64_t block_index(int64_t row, int64_t kb) const { return row * blocks + kb; }
};

// What a packed operand's codes and scale bytes mean, read from its recipe's
// reference decoder (operand.cpp).
struct ElementTables {
  std::array<float, 256> units;         // unit of each scale byte (the low byte of a HiF4 word); NaN: NaN block
  std::array<int8_t, 16> integers;      // N of each code (HiF4: before the L2/L3 micro-exponents)
  std::array<uint8_t, 16> negative_zero;  // 1 for a zero code whose value is −0
  std::array<float, 16> values;         // N of each code as fp32, −0 where negative_zero
};
// Checks `p` as unpack_operand does (shape, metadata, no unit beyond fp32
// range) and returns its tables.
ElementTables checked_element_tables(const PackedTensor& p, Side side, BLayout layout);
// The scale of block `block_index` (row · blocks + block): the E8M0/UE4M3
// byte, or HiF4's word (E6M2 byte, L2 bits 8..15, L3 bits 16..31).
uint32_t scale_word(const PackedTensor& p, int64_t block_index);

// Checks that `p` is a consistent packed tensor of the given side (A: [m, k]
// blocked along axis 1; B: [k, n] blocked along axis 0, or [n, k] along axis 1
// with BLayout::nk) and unpacks it. The padding beyond k reads as 0 whatever
// its bytes (the GEMM's k is the logical k).
PackedOperand unpack_operand(const PackedTensor& p, Side side, BLayout layout = BLayout::kn, int threads = 1);
// The operand's shape fields alone, no arrays (the `fast` model's B, decoded
// a panel at a time).
PackedOperand packed_operand_shape(const PackedTensor& p);
// unpack_operand in two steps, for callers that unpack rows inside a
// parallel region of their own (simd_packed_gemm): the operand's sizes with
// its arrays allocated, then rows [r0, r1) (`codes`: scratch of kpad bytes).
PackedOperand packed_operand_shell(const PackedTensor& p);
// signs false leaves `sign` unset (simd_packed_gemm's block_fp32: only
// `exact` reads the signs, for the sign of a zero sum).
void unpack_rows(const PackedTensor& p, const ElementTables& tables, PackedOperand& o, int64_t r0, int64_t r1,
                 uint8_t* codes, bool signs = true);

// Dense operand as rows along k (A: its rows; B: its columns, which are the
// rows of W as given with BLayout::nk), fp32 values.
struct DenseOperand {
  int64_t rows = 0;
  int64_t k = 0;
  Fp32Rows values;  // rows × k
};
DenseOperand dense_operand(const Tensor& t, Side side, BLayout layout = BLayout::kn);

// The fp32 values of a packed operand as rows along k, fp32(N·unit) for every
// element (element_fp32), decoded from codes and scale bytes in one pass:
// a lookup of the code's N, times the block's unit (simd.cpp, every Highway
// target; tests compare it with to_fp32_rows of unpack_operand).
DenseOperand decode_fp32_operand(const PackedTensor& p, Side side, BLayout layout = BLayout::kn, int threads = 1);
// Rows [r0, r1) of the same, into out (row r0 first), on the calling thread;
// `tables` from checked_element_tables.
void decode_fp32_rows(const PackedTensor& p, const ElementTables& tables, int64_t r0, int64_t r1, float* out);

// Either kind, with the shape facts the driver needs.
struct Operand {
  bool is_packed = false;  // integers and units in `packed`; else fp32 values in `dense`
  PackedOperand packed;
  DenseOperand dense;
  std::optional<Format> format;  // of a packed input, in either form
  const PackedTensor* source = nullptr;  // OperandForm::deferred: the input, not yet unpacked
  ElementTables tables{};                // OperandForm::deferred: its tables
  int64_t rows() const { return is_packed ? packed.rows : dense.rows; }
  int64_t k() const { return is_packed ? packed.k : dense.k; }
};
// How make_operand holds a packed input: integers and units (the exact and
// block_fp32 models, every scalar form), or its fp32 values (the fast forms
// of fma_fp32 and fast, which need nothing else), or checked but not yet
// unpacked (`deferred`: packed_operand_shell in `packed`, the tables in
// `tables`; simd_packed_gemm unpacks it inside its own parallel region), or
// checked with only its shape in `packed` (`fp32_rows_later`: the `fast`
// model decodes its rows a panel at a time with decode_fp32_rows).
enum class OperandForm : uint8_t { integers, fp32, deferred, fp32_rows_later };
// `threads`: rows unpacked in parallel (the result does not depend on it).
Operand make_operand(const GemmOperand& op, Side side, BLayout layout = BLayout::kn, int threads = 1,
                     OperandForm form = OperandForm::integers);

// N of element `index` (row · kpad + k) as an fp32 value with its sign: −0
// for a −0 code, so that N·unit keeps it (CUTLASS: fp32(a)·fp32(sf) of
// float_e2m1_t −0 is −0).
inline float element_integer_fp32(const PackedOperand& p, int64_t index) {
  const float n = static_cast<float>(p.n[index]);
  return p.sign[index] ? -std::fabs(n) : n;
}

// fp32 value of element kk of row r: fp32(N·unit) for packed operands (one
// rounding; only an MXFP4 element beyond fp32 range rounds, to ±Inf).
inline float element_fp32(const Operand& o, int64_t r, int64_t kk) {
  if (!o.is_packed) return o.dense.values[r * o.dense.k + kk];
  const PackedOperand& p = o.packed;
  return element_integer_fp32(p, r * p.kpad + kk) * p.unit[p.block_index(r, kk / p.block)];
}

// True when every product a_k·b_k of row i of A and column j of B is −0 (a
// zero factor, and the signs differ): the only case where an exact sum is −0
// (IEEE 754 §6.3; docs/gemm.md "Sign of zero").
bool every_product_negative_zero(const PackedOperand& a, int64_t i, const PackedOperand& b, int64_t j);

// Rows of fp32 values (element_fp32), row-major rows × k, from either form:
// the scalar form of decode_fp32_operand.
std::vector<float> to_fp32_rows(const Operand& o, int threads = 1);

}  // namespace fp4emu::gemm_detail
