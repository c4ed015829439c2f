#include "fp4emu/io/array.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "src/codec/widen.hpp"

namespace fp4emu::io {

static_assert(std::endian::native == std::endian::little,
              "fp4emu io assumes a little-endian host");

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::u8: return "u8";
    case DType::u16: return "u16";
    case DType::u32: return "u32";
    case DType::i32: return "i32";
  }
  return "?";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f64: return 8;
    case DType::u8: return 1;
    case DType::u16: return 2;
    case DType::u32: return 4;
    case DType::i32: return 4;
  }
  return 0;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::u8,
                  DType::u16, DType::u32, DType::i32}) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

std::string_view dtype_names() { return "f32, f16, bf16, f64, u8, u16, u32, i32"; }

std::optional<int64_t> checked_byte_size(std::span<const int64_t> shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

std::string shape_string(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      throw std::invalid_argument(
          fmt::format("array shape {}: dims must be >= 0 and their product must fit in int64",
                      shape_string(shape)));
    }
  }
  return n;
}

void check_consistent(const Array& array, std::string_view context) {
  const auto expected = checked_byte_size(array.shape, array.dtype);
  if (!expected) {
    throw std::invalid_argument(fmt::format(
        "{}: shape {} has a negative dim or its byte size overflows int64", context,
        shape_string(array.shape)));
  }
  if (static_cast<uint64_t>(*expected) != array.bytes.size()) {
    throw std::invalid_argument(fmt::format(
        "{}: {} array of shape {} needs {} bytes but holds {}", context,
        dtype_name(array.dtype), shape_string(array.shape), *expected, array.bytes.size()));
  }
}

namespace {

std::string where(std::string_view source) {
  return source.empty() ? std::string("input") : fmt::format("'{}'", source);
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

template <class T>
std::vector<T> copy_elements(const Array& array, DType want, std::string_view source) {
  if (array.dtype != want) {
    throw InputError(fmt::format("{}: expected a {} array, got {} (shape {})", where(source),
                                 dtype_name(want), dtype_name(array.dtype),
                                 shape_string(array.shape)));
  }
  check_consistent(array, where(source));
  std::vector<T> out(array.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), array.bytes.data(), array.bytes.size());
  return out;
}

template <class T>
Array make_array(DType dtype, std::vector<int64_t> shape, std::span<const T> values) {
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  const int64_t n = a.numel();
  if (static_cast<uint64_t>(n) != values.size()) {
    throw std::invalid_argument(fmt::format("{} array of shape {} needs {} values, got {}",
                                            dtype_name(dtype), shape_string(a.shape), n,
                                            values.size()));
  }
  a.bytes.resize(values.size_bytes());
  if (!values.empty()) std::memcpy(a.bytes.data(), values.data(), values.size_bytes());
  return a;
}

// `shape` only labels messages (empty when unknown).
void widen(DType dtype, std::span<const uint8_t> bytes, std::span<float> out,
           std::string_view source, std::string_view shape) {
  const std::string shape_note = shape.empty() ? "" : fmt::format("shape {}; ", shape);
  const std::string in_shape = shape.empty() ? "" : fmt::format(" (shape {})", shape);
  const size_t n = out.size();
  const uint8_t* p = bytes.data();
  switch (dtype) {
    case DType::f32:
      if (n != 0) std::memcpy(out.data(), p, n * 4);
      return;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) out[i] = f16_bits_to_f32(load_u16(p + 2 * i));
      return;
    case DType::bf16:
      for (size_t i = 0; i < n; ++i) out[i] = bf16_bits_to_f32(load_u16(p + 2 * i));
      return;
    case DType::f64:
      throw InputError(fmt::format(
          "{}: fp64 input: convert to fp32 first, e.g. np.save(path, x.astype(np.float32)) "
          "({}fp4emu reads f32, f16 and bf16)",
          where(source), shape_note));
    case DType::u16:
      throw InputError(fmt::format(
          "{}: u16 array{} is not a float tensor; if it holds bf16 or f16 bit patterns, "
          "relabel it as bf16/f16 (fp4emu reads f32, f16 and bf16)",
          where(source), in_shape));
    case DType::u8:
    case DType::u32:
    case DType::i32:
      break;
  }
  throw InputError(fmt::format("{}: {} array{} is not a float tensor; fp4emu reads f32, f16 "
                               "and bf16",
                               where(source), dtype_name(dtype), in_shape));
}

bool is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

}  // namespace

void widen_to_f32(DType dtype, std::span<const uint8_t> bytes, std::span<float> out,
                  std::string_view source) {
  if (bytes.size() != out.size() * dtype_size(dtype)) {
    throw std::invalid_argument(fmt::format("{}: widen_to_f32 of {} bytes of {} into {} floats",
                                            where(source), bytes.size(), dtype_name(dtype),
                                            out.size()));
  }
  widen(dtype, bytes, out, source, {});
}

std::vector<float> to_f32(const Array& array, std::string_view source) {
  check_consistent(array, where(source));
  // Non-float dtypes are rejected before anything is allocated.
  std::vector<float> out(is_float(array.dtype) ? array.bytes.size() / dtype_size(array.dtype) : 0);
  widen(array.dtype, array.bytes, out, source, shape_string(array.shape));
  return out;
}

std::vector<uint8_t> to_u8(const Array& a, std::string_view s) {
  return copy_elements<uint8_t>(a, DType::u8, s);
}
std::vector<uint16_t> to_u16(const Array& a, std::string_view s) {
  return copy_elements<uint16_t>(a, DType::u16, s);
}
std::vector<uint32_t> to_u32(const Array& a, std::string_view s) {
  return copy_elements<uint32_t>(a, DType::u32, s);
}
std::vector<int32_t> to_i32(const Array& a, std::string_view s) {
  return copy_elements<int32_t>(a, DType::i32, s);
}

Array from_f32(std::vector<int64_t> shape, std::span<const float> v) {
  return make_array(DType::f32, std::move(shape), v);
}
Array from_f64(std::vector<int64_t> shape, std::span<const double> v) {
  return make_array(DType::f64, std::move(shape), v);
}
Array from_u8(std::vector<int64_t> shape, std::span<const uint8_t> v) {
  return make_array(DType::u8, std::move(shape), v);
}
Array from_u16(std::vector<int64_t> shape, std::span<const uint16_t> v) {
  return make_array(DType::u16, std::move(shape), v);
}
Array from_u32(std::vector<int64_t> shape, std::span<const uint32_t> v) {
  return make_array(DType::u32, std::move(shape), v);
}
Array from_i32(std::vector<int64_t> shape, std::span<const int32_t> v) {
  return make_array(DType::i32, std::move(shape), v);
}
Array from_f16_bits(std::vector<int64_t> shape, std::span<const uint16_t> bits) {
  return make_array(DType::f16, std::move(shape), bits);
}
Array from_bf16_bits(std::vector<int64_t> shape, std::span<const uint16_t> bits) {
  return make_array(DType::bf16, std::move(shape), bits);
}

Array reinterpret_dtype(Array array, DType to, std::string_view source) {
  if (dtype_size(array.dtype) != dtype_size(to)) {
    throw InputError(fmt::format(
        "{}: cannot relabel a {} array as {}: element sizes differ ({} vs {} bytes)",
        where(source), dtype_name(array.dtype), dtype_name(to), dtype_size(array.dtype),
        dtype_size(to)));
  }
  array.dtype = to;
  return array;
}

}  // namespace fp4emu::io
