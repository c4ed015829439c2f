// GEMM operands: checks and unpacking of the packed form into integers and
// block units (operand.hpp).
#include "operand.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/quant/nibbles.hpp"
#include "fp4emu/quant/reference.hpp"

namespace fp4emu::gemm_detail {

namespace {
size_t whole_huge_pages(size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }
}  // namespace

// A mapping of its own, cut to a 2 MiB boundary: from glibc's heap
// (aligned_alloc) the huge pages of freed buffers stayed resident, 21 ->
// 196 MB over repeated 1024³ calls.
void* allocate_large_buffer(size_t bytes) {
  const size_t size = whole_huge_pages(bytes), span = size + kHugePageBytes;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t p = (base + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (p > base) munmap(m, p - base);
  if (base + span > p + size) munmap(reinterpret_cast<void*>(p + size), base + span - (p + size));
  advise_huge_pages(reinterpret_cast<void*>(p), size);
  return reinterpret_cast<void*>(p);
}

void free_large_buffer(void* p, size_t bytes) noexcept { munmap(p, whole_huge_pages(bytes)); }

void advise_huge_pages(void* p, size_t bytes) noexcept {
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / kHugePageBytes * kHugePageBytes;
  // Advice: failure leaves 4 KiB pages.
  if (begin < end) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Element values as the recipe's reference block decoder gives them: the
// value of `code` in every lane of a block with scale byte `byte` (HiF4: no
// L2/L3 bits). NVFP4 decodes with S_dec = 1: the per-tensor scale is applied
// once after accumulation (gemm_alpha).
float decode_element(const Recipe& recipe, const PackedTensor& /*p*/, uint8_t byte, uint8_t code) {
  std::array<uint8_t, 64> codes;
  codes.fill(code);
  std::array<float, 64> out{};
  reference::format_ops(recipe.format).decode_block_unscaled(recipe, byte, codes.data(), out.data());
  return out[0];
}

// Unit (value of N = 1) of every scale byte: element code 0x1 (E2M1 0.5 =
// N 1; S1P2 0.25 = N 1) decoded with that byte.
std::array<float, 256> unit_table(const Recipe& recipe, const PackedTensor& p) {
  std::array<float, 256> table{};
  for (int c = 0; c < 256; ++c) table[c] = decode_element(recipe, p, static_cast<uint8_t>(c), 0x1);
  return table;
}

// Which zero codes are −0: E2M1 and S1P2 code 0x8 is −0 (CUTLASS's
// float_e2m1_t keeps it, docs/gemm.md), unless the recipe's decoder makes it
// +0 (ggml's integer value tables). Read under a scale byte of finite
// nonzero unit, so the sign is the code's own.
std::array<uint8_t, 16> negative_zero_codes(const Recipe& recipe, const PackedTensor& p,
                                            const std::array<float, 256>& units,
                                            const std::array<int8_t, 16>& integers) {
  std::array<uint8_t, 16> table{};
  int byte = 0;
  while (byte < 255 && !(std::isfinite(units[byte]) && units[byte] != 0.0f)) ++byte;
  for (uint8_t c = 0; c < 16; ++c)
    if (integers[c] == 0) table[c] = std::signbit(decode_element(recipe, p, static_cast<uint8_t>(byte), c));
  return table;
}

// Integer N of each element code with no micro-exponent: 2·E2M1 or 4·S1P2.
std::array<int8_t, 16> integer_table(Format f) {
  std::array<int8_t, 16> t{};
  for (uint8_t c = 0; c < 16; ++c)
    t[c] = static_cast<int8_t>(f == Format::hif4 ? 4.0f * s1p2_decode(c) : 2.0f * e2m1_decode(c));
  return t;
}

void check_packed(const PackedTensor& p, const Recipe* recipe, Side side, BLayout layout) {
  const std::string what = fmt::format("operand {} (packed, recipe {})", side_name(side), p.recipe_id);
  if (!recipe)
    throw InputError(fmt::format("operand {}: packed tensor names unknown recipe '{}'", side_name(side),
                                 p.recipe_id));
  if (p.format != recipe->format || p.block_size != block_size(recipe->format))
    throw InputError(fmt::format("{}: metadata is inconsistent (format {}, block {})", what,
                                 format_name(p.format), p.block_size));
  if (p.shape.size() != 2)
    throw InputError(fmt::format("{}: shape {} is not a matrix; a GEMM operand has rank 2 ({} is {})", what,
                                 shape_string(p.shape), side_name(side), shape_name(side, layout)));
  const int axis = k_axis(side, layout);
  if (p.axis != axis)
    throw InputError(fmt::format(
        "{}: blocked along axis {}, but {} must be blocked along k, its axis {} ({} is {}{}); "
        "quantize it with --axis {}",
        what, p.axis, side_name(side), axis, side_name(side), shape_name(side, layout),
        side == Side::a ? "" : layout == BLayout::kn ? ", --b-layout kn" : ", --b-layout nk", axis));
  const int64_t rows = p.shape[1 - axis], k = p.shape[axis];
  const int64_t padded = (k + p.block_size - 1) / p.block_size * p.block_size;
  if (rows <= 0 || k <= 0 || p.rows != rows || p.axis_len != k || p.padded_len != padded)
    throw InputError(fmt::format("{}: metadata is inconsistent: rows {} / axis_len {} / padded_len {} do not "
                                 "match shape {} blocked along axis {}",
                                 what, p.rows, p.axis_len, p.padded_len, shape_string(p.shape), axis));
  if (p.codes.size() != static_cast<size_t>(rows * padded / 2))
    throw InputError(fmt::format("{}: {} code bytes, shape {} needs {}", what, p.codes.size(),
                                 shape_string(p.shape), rows * padded / 2));
  const int64_t scale_bytes = scale_bytes_per_block(p.format);
  if (p.scales.size() != static_cast<size_t>(rows * (padded / p.block_size) * scale_bytes))
    throw InputError(fmt::format("{}: {} scale bytes, shape {} needs {}", what, p.scales.size(),
                                 shape_string(p.shape), rows * (padded / p.block_size) * scale_bytes));
}

}  // namespace

std::string_view side_name(Side s) { return s == Side::a ? "A" : "B"; }

int k_axis(Side side, BLayout layout) { return side == Side::a || layout == BLayout::nk ? 1 : 0; }

std::string_view shape_name(Side side, BLayout layout) {
  if (side == Side::a) return "m×k";
  return layout == BLayout::kn ? "k×n" : "n×k";
}

Dyadic split_fp32(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t field = (bits >> 23) & 0xFF;
  int64_t m = bits & 0x7FFFFF;
  int e = -149;
  if (field != 0) {
    m |= 0x800000;
    e = static_cast<int>(field) - 150;
  }
  if (m == 0) return {0, 0};
  const int tz = std::countr_zero(static_cast<uint64_t>(m));
  m >>= tz;
  e += tz;
  return {(bits >> 31) ? -m : m, e};
}

uint32_t scale_word(const PackedTensor& p, int64_t block_index) {
  return reference::load_scale(p.format, p.scales.data() + block_index * scale_bytes_per_block(p.format),
                               p.scale_bit_order);
}

ElementTables checked_element_tables(const PackedTensor& p, Side side, BLayout layout) {
  const Recipe* recipe = find_recipe(p.recipe_id);
  check_packed(p, recipe, side, layout);
  ElementTables t;
  t.units = unit_table(*recipe, p);
  t.integers = integer_table(p.format);
  t.negative_zero = negative_zero_codes(*recipe, p, t.units, t.integers);
  for (int c = 0; c < 16; ++c) t.values[c] = t.negative_zero[c] ? -0.0f : static_cast<float>(t.integers[c]);
  const int64_t blocks = p.blocks_per_row();
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint32_t word = scale_word(p, r * blocks + b);
      if (std::isinf(t.units[word & 0xFF]))
        throw InputError(fmt::format(
            "operand {} (recipe {}): row {} block {} has scale byte 0x{:02X}, whose unit is beyond fp32 range; "
            "the recipe's quantizer never writes it (the file is damaged or hand-made)",
            side_name(side), p.recipe_id, r, b, word & 0xFF));
    }
  return t;
}

PackedOperand packed_operand_shape(const PackedTensor& p) {
  PackedOperand o;
  o.format = p.format;
  o.rows = p.rows;
  o.k = p.axis_len;
  o.kpad = p.padded_len;
  o.block = p.block_size;
  o.blocks = p.blocks_per_row();
  return o;
}

PackedOperand packed_operand_shell(const PackedTensor& p) {
  PackedOperand o = packed_operand_shape(p);
  o.n.resize(o.rows * o.kpad);
  o.sign.resize(o.rows * o.kpad);
  o.unit.resize(o.rows * o.blocks);
  o.unit_m.resize(o.rows * o.blocks);
  o.unit_e.resize(o.rows * o.blocks);
  return o;
}

void unpack_rows(const PackedTensor& p, const ElementTables& tables, PackedOperand& o, int64_t r0, int64_t r1,
                 uint8_t* codes, bool signs) {
  const std::array<float, 256>& units = tables.units;
  const std::array<int8_t, 16>& integers = tables.integers;
  // The sign bit of each code's value, one lookup per element (a branch on
  // random signs mispredicts half the time).
  std::array<uint8_t, 16> sign_bit{};
  for (int c = 0; c < 16; ++c) sign_bit[c] = static_cast<uint8_t>(integers[c] < 0 || tables.negative_zero[c]);
  // MXFP4 and NVFP4 in a position-local nibble order (unpack_row's first
  // case): the two elements of a byte, N and sign bit, from one lookup of the
  // byte (callgrind, NVFP4: 10 instructions per element, 21 a code at a time).
  const bool byte_pairs = p.format != Format::hif4 && p.nibble_order != NibbleOrder::split_half;
  std::array<std::array<int8_t, 2>, 256> pair_n{};
  std::array<std::array<uint8_t, 2>, 256> pair_sign{};
  if (byte_pairs) {
    const int first = p.nibble_order == NibbleOrder::low_first ? 0 : 4;
    for (int byte = 0; byte < 256; ++byte) {
      const int c0 = (byte >> first) & 0xF, c1 = (byte >> (4 - first)) & 0xF;
      pair_n[byte] = {integers[c0], integers[c1]};
      pair_sign[byte] = {sign_bit[c0], sign_bit[c1]};
    }
  }
  // Block b of row r: its unit; returns its scale word.
  const auto read_unit = [&](int64_t r, int64_t b) {
    const uint32_t word = scale_word(p, o.block_index(r, b));
    const float u = units[word & 0xFF];
    o.unit[o.block_index(r, b)] = u;
    const Dyadic d = std::isnan(u) ? Dyadic{} : split_fp32(u);
    o.unit_m[o.block_index(r, b)] = static_cast<int8_t>(d.m);
    o.unit_e[o.block_index(r, b)] = static_cast<int16_t>(d.e);
    return word;
  };
  for (int64_t r = r0; r < r1; ++r) {
    int8_t* row_n = o.n.data() + r * o.kpad;
    uint8_t* row_sign = o.sign.data() + r * o.kpad;
    const uint8_t* row_bytes = p.codes.data() + r * (o.kpad / 2);
    // The padding beyond k reads as 0 whatever its codes.
    std::fill(row_n + o.k, row_n + o.kpad, int8_t{0});
    if (signs) std::fill(row_sign + o.k, row_sign + o.kpad, uint8_t{0});
    if (byte_pairs) {
      for (int64_t b = 0; b < o.blocks; ++b) read_unit(r, b);
      // Elements [0, k) only: the padding is 0 (above).
      for (int64_t i = 0; i < o.k / 2; ++i) std::memcpy(row_n + 2 * i, pair_n[row_bytes[i]].data(), 2);
      if (signs)
        for (int64_t i = 0; i < o.k / 2; ++i) std::memcpy(row_sign + 2 * i, pair_sign[row_bytes[i]].data(), 2);
      if (o.k % 2) {
        row_n[o.k - 1] = pair_n[row_bytes[o.k / 2]][0];
        if (signs) row_sign[o.k - 1] = pair_sign[row_bytes[o.k / 2]][0];
      }
      continue;
    }
    unpack_row(row_bytes, p.nibble_order, o.block, o.kpad, codes);
    for (int64_t b = 0; b < o.blocks; ++b) {
      const uint32_t word = read_unit(r, b);
      const int count = static_cast<int>(std::min<int64_t>(o.block, o.k - b * o.block));
      const uint8_t* block_codes = codes + b * o.block;
      int8_t* block_n = row_n + b * o.block;
      uint8_t* block_sign = row_sign + b * o.block;
      if (signs)
        for (int j = 0; j < count; ++j) block_sign[j] = sign_bit[block_codes[j]];
      if (p.format != Format::hif4) {
        for (int j = 0; j < count; ++j) block_n[j] = integers[block_codes[j]];
      } else {
        // docs/spec/hif4.md §3-§4: element j carries L2 bit b_{j/8} and L3 bit c_{j/4}.
        for (int j = 0; j < count; ++j)
          block_n[j] = static_cast<int8_t>(integers[block_codes[j]] *
                                           (1 << (((word >> (8 + j / 8)) & 1) + ((word >> (16 + j / 4)) & 1))));
      }
    }
  }
}

PackedOperand unpack_operand(const PackedTensor& p, Side side, BLayout layout, int threads) {
  const ElementTables tables = checked_element_tables(p, side, layout);
  PackedOperand o = packed_operand_shell(p);
  // Rows in parallel: each writes only its own entries.
#pragma omp parallel num_threads(threads)
  {
    std::vector<uint8_t> codes(o.kpad);
#pragma omp for schedule(dynamic)
    for (int64_t r0 = 0; r0 < o.rows; r0 += 16) unpack_rows(p, tables, o, r0, std::min(o.rows, r0 + 16), codes.data());
  }
  return o;
}

DenseOperand dense_operand(const Tensor& t, Side side, BLayout layout) {
  if (t.shape.size() != 2 || t.shape[0] <= 0 || t.shape[1] <= 0)
    throw InputError(fmt::format("operand {} (dense): shape {} is not a non-empty matrix ({} is {})",
                                 side_name(side), shape_string(t.shape), side_name(side), shape_name(side, layout)));
  if (static_cast<int64_t>(t.data.size()) != t.numel())
    throw InputError(fmt::format("operand {} (dense): shape {} needs {} values, the tensor holds {}",
                                 side_name(side), shape_string(t.shape), t.numel(), t.data.size()));
  DenseOperand d;
  if (k_axis(side, layout) == 1) {  // rows along k already: A, or W as given
    d.rows = t.shape[0];
    d.k = t.shape[1];
    d.values.assign(t.data.begin(), t.data.end());
  } else {
    d.k = t.shape[0];
    d.rows = t.shape[1];
    d.values.resize(t.data.size());
    for (int64_t kk = 0; kk < d.k; ++kk)
      for (int64_t j = 0; j < d.rows; ++j) d.values[j * d.k + kk] = t.data[kk * d.rows + j];
  }
  return d;
}

Operand make_operand(const GemmOperand& op, Side side, BLayout layout, int threads, OperandForm form) {
  Operand o;
  if (op.packed()) {
    o.format = op.packed()->format;
    if (form == OperandForm::fp32) {
      o.dense = decode_fp32_operand(*op.packed(), side, layout, threads);
    } else if (form == OperandForm::deferred || form == OperandForm::fp32_rows_later) {
      o.is_packed = true;
      o.tables = checked_element_tables(*op.packed(), side, layout);
      o.packed = form == OperandForm::deferred ? packed_operand_shell(*op.packed())
                                                : packed_operand_shape(*op.packed());
      o.source = op.packed();
    } else {
      o.is_packed = true;
      o.packed = unpack_operand(*op.packed(), side, layout, threads);
    }
  } else if (op.dense()) {
    o.dense = dense_operand(*op.dense(), side, layout);
  } else {
    throw InputError(fmt::format("operand {} is empty", side_name(side)));
  }
  return o;
}

std::vector<float> to_fp32_rows(const Operand& o, int threads) {
  if (!o.is_packed) return {o.dense.values.begin(), o.dense.values.end()};
  const PackedOperand& p = o.packed;
  std::vector<float> out(p.rows * p.k);
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t b = 0; b < p.blocks; ++b) {
      // element_fp32, a block at a time
      const float u = p.unit[p.block_index(r, b)];
      const int64_t k0 = b * p.block, k1 = std::min(p.k, k0 + p.block);
      for (int64_t kk = k0; kk < k1; ++kk) out[r * p.k + kk] = element_integer_fp32(p, r * p.kpad + kk) * u;
    }
  return out;
}

bool every_product_negative_zero(const PackedOperand& a, int64_t i, const PackedOperand& b, int64_t j) {
  const auto is_zero = [](const PackedOperand& p, int64_t r, int64_t kk) {
    return p.n[r * p.kpad + kk] == 0 || p.unit_m[p.block_index(r, kk / p.block)] == 0;
  };
  for (int64_t kk = 0; kk < a.k; ++kk) {
    const bool zero = is_zero(a, i, kk) || is_zero(b, j, kk);
    if (!zero || a.sign[i * a.kpad + kk] == b.sign[j * b.kpad + kk]) return false;
  }
  return true;
}

}  // namespace fp4emu::gemm_detail
