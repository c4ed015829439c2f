#pragma once
// .safetensors files (https://github.com/huggingface/safetensors):
//   u64 LE header length N, N bytes of JSON, then the data buffer.
//   JSON: {"__metadata__": {"k": "v", ...},           (optional, string -> string)
//          "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   Offsets are relative to the start of the data buffer; data is little-endian
//   C order.
// dtypes read and written: F32 F16 BF16 F64 U8 U16 U32 I32.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/io/array.hpp"

namespace fp4emu::io {

struct SafetensorsTensor {
  std::string name;
  Array array;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // "__metadata__", empty if absent
  std::vector<SafetensorsTensor> tensors;       // in data-offset order (the writer's order)

  // nullptr if there is no tensor of that name.
  const SafetensorsTensor* find(std::string_view name) const;
};

// Throws InputError naming the file, the tensor and the field for every
// malformed input: header length past the end of the file, invalid JSON,
// missing or ill-typed dtype/shape/data_offsets, unsupported dtype, negative
// dims, offsets out of range or not matching shape * dtype size, overlapping
// tensors, duplicate names, a "__metadata__" that is not a string -> string
// map. PyTorch pickle/zip files get a message saying how to convert them.
// Gaps between tensors and bytes after the last one are allowed and ignored.
SafetensorsFile read_safetensors(const std::filesystem::path& path);

// Atomic (write_file_atomic). Tensors are laid out in the given order with
// no gaps; the header is compact JSON ("__metadata__" first, only when
// non-empty) padded with spaces so the data starts on an 8-byte boundary.
// InputError for duplicate names, the reserved name "__metadata__", names or
// metadata that are not valid UTF-8, or an unwritable destination;
// std::invalid_argument if an array's bytes do not match its shape.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The complete file contents (what write_safetensors writes). `destination`
// only labels error messages.
std::vector<uint8_t> encode_safetensors(const std::vector<SafetensorsTensor>& tensors,
                                        const std::map<std::string, std::string>& metadata,
                                        std::string_view destination = "safetensors output");

}  // namespace fp4emu::io
