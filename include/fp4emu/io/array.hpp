#pragma once
// A dense array as it lies in a file: a dtype, a shape, and the raw bytes
// (little-endian, C order). The io layer moves these bytes between files and
// memory; it knows nothing of number formats beyond widening the input dtypes
// (f16, bf16) exactly to f32.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4emu::io {

enum class DType { f32, f16, bf16, f64, u8, u16, u32, i32 };

// "f32", "f16", "bf16", "f64", "u8", "u16", "u32", "i32".
std::string_view dtype_name(DType dtype);
// Bytes per element: 4, 2, 2, 8, 1, 2, 4, 4.
size_t dtype_size(DType dtype);
// Inverse of dtype_name; nullopt for any other string.
std::optional<DType> parse_dtype(std::string_view name);
// "f32, f16, bf16, f64, u8, u16, u32, i32", for error messages.
std::string_view dtype_names();

struct Array {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;   // rank >= 0; rank 0 is a scalar (numel 1)
  std::vector<uint8_t> bytes;   // little-endian, C (row-major) order, numel * dtype_size bytes

  // Product of the dims (1 for rank 0). Throws std::invalid_argument for a
  // negative dim or a product that overflows int64.
  int64_t numel() const;
};

// numel * dtype_size for `shape`, or nullopt if a dim is negative or the
// product overflows int64 (readers use it to validate untrusted headers).
std::optional<int64_t> checked_byte_size(std::span<const int64_t> shape, DType dtype);

// "[2, 3]" / "[]", for error messages.
std::string shape_string(std::span<const int64_t> shape);

// Throws std::invalid_argument (naming `context`) unless bytes.size() equals
// numel * dtype_size. Writers call it before touching the disk.
void check_consistent(const Array& array, std::string_view context);

// ---- widening to f32 -----------------------------------------------------
// Exact for f32, f16 and bf16 (NaN payloads and signed zeros kept).
// f64 throws InputError ("fp64 input: convert to fp32 first"); integer dtypes
// throw InputError (a u16 array holding bf16/f16 bit patterns must be
// relabelled first with reinterpret_dtype). `source` (a file or tensor name)
// is put in the message.
std::vector<float> to_f32(const Array& array, std::string_view source = {});

// The same widening for raw little-endian elements of `dtype` that live
// elsewhere (a memory-mapped tensor): out.size() * dtype_size(dtype) must
// equal bytes.size() (std::invalid_argument otherwise). Same InputErrors as
// to_f32 for dtypes that are not f32, f16 or bf16.
void widen_to_f32(DType dtype, std::span<const uint8_t> bytes, std::span<float> out,
                  std::string_view source = {});

// Copies of the elements of an integer array; InputError (naming `source`)
// unless the dtype is exactly the one asked for.
std::vector<uint8_t> to_u8(const Array& array, std::string_view source = {});
std::vector<uint16_t> to_u16(const Array& array, std::string_view source = {});
std::vector<uint32_t> to_u32(const Array& array, std::string_view source = {});
std::vector<int32_t> to_i32(const Array& array, std::string_view source = {});

// ---- building arrays -------------------------------------------------------
// values.size() must equal the product of `shape` (std::invalid_argument
// otherwise).
Array from_f32(std::vector<int64_t> shape, std::span<const float> values);
Array from_f64(std::vector<int64_t> shape, std::span<const double> values);
Array from_u8(std::vector<int64_t> shape, std::span<const uint8_t> values);
Array from_u16(std::vector<int64_t> shape, std::span<const uint16_t> values);
Array from_u32(std::vector<int64_t> shape, std::span<const uint32_t> values);
Array from_i32(std::vector<int64_t> shape, std::span<const int32_t> values);
// Raw 16-bit patterns labelled as f16 or bf16.
Array from_f16_bits(std::vector<int64_t> shape, std::span<const uint16_t> bits);
Array from_bf16_bits(std::vector<int64_t> shape, std::span<const uint16_t> bits);

// Relabels the bytes with another dtype of the same element size (e.g. a u16
// .npy that holds bf16 bit patterns -> bf16). InputError (naming `source`) if
// the sizes differ.
Array reinterpret_dtype(Array array, DType to, std::string_view source = {});

}  // namespace fp4emu::io
