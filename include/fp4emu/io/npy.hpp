#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Read: descr <f4 >f4 <f2 >f2 <f8 >f8 |u1 <u2 >u2 <u4 >u4 <i4 >i4, and bf16
// as |V2 or <V2. Big-endian data is byte-swapped and fortran_order True is
// transposed, so the result is always little-endian C order. Bytes after the
// data are ignored (np.save may append several arrays to one file).
//
// Write: little-endian C order, version 1.0 (2.0 if the header needs it),
// header padded to a multiple of 64 bytes exactly as numpy >= 1.24 pads it,
// so an array written here is byte-identical to np.save of the same array.
//
// bf16 convention: numpy has no bfloat16 dtype. bf16 is stored as 2-byte
// void '<V2' (what np.save writes for an ml_dtypes.bfloat16 array); numpy
// reads it with np.load(...).view('<u2') and ml_dtypes with
// .view(ml_dtypes.bfloat16). A plain '<u2' file is read as u16; relabel it
// with reinterpret_dtype(array, DType::bf16) if it holds bf16 bit patterns.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "fp4emu/io/array.hpp"

namespace fp4emu::io {

// Throws InputError naming the file, the field and the bad value for every
// malformed input: bad magic, truncated header, header that is not a dict
// literal, unsupported descr, object/structured dtypes, bad shape, data
// shorter than the shape implies.
Array read_npy(const std::filesystem::path& path);

// Atomic (write_file_atomic). std::invalid_argument if the array's bytes do
// not match its shape and dtype; InputError if the file cannot be written.
void write_npy(const std::filesystem::path& path, const Array& array);
// The same for little-endian C-order elements that live elsewhere (a
// kernel's output buffer), written without an intermediate copy.
// std::invalid_argument if `bytes` does not hold exactly `shape` of `dtype`.
void write_npy(const std::filesystem::path& path, DType dtype, std::span<const int64_t> shape,
               std::span<const uint8_t> bytes);

// The complete .npy file contents for `array` (what write_npy writes).
std::vector<uint8_t> encode_npy(const Array& array);
// Its header alone (magic, version, length, dict, padding to 64 bytes).
std::string encode_npy_header(DType dtype, std::span<const int64_t> shape);

}  // namespace fp4emu::io
