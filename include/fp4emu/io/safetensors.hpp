#pragma once
// .safetensors files (https://github.com/huggingface/safetensors):
//   u64 LE header length N, N bytes of JSON, then the data buffer.
//   JSON: {"__metadata__": {"k": "v", ...},           (optional, string -> string)
//          "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   Offsets are relative to the start of the data buffer; data is little-endian
//   C order.
// dtypes read and written: F32 F16 BF16 F64 U8 U16 U32 I32.
//
// Large dumps: SafetensorsReader parses the header once and memory-maps one
// tensor at a time (map()), so a file of any size is analysed in the memory
// of its largest tensor; SafetensorsWriter streams tensors to disk one at a
// time. read_safetensors / write_safetensors are the whole-file forms.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/io/array.hpp"

namespace fp4emu::io {

namespace detail {
class InputFile;
}

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

// One tensor as the header describes it.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // [begin, end): byte offsets into the data buffer
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

// A read-only memory mapping of one tensor's bytes. Destroying it unmaps the
// pages, so they no longer count against the process's memory.
class MappedBytes {
 public:
  MappedBytes() = default;
  MappedBytes(MappedBytes&& other) noexcept;
  MappedBytes& operator=(MappedBytes&& other) noexcept;
  MappedBytes(const MappedBytes&) = delete;
  MappedBytes& operator=(const MappedBytes&) = delete;
  ~MappedBytes();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  friend class SafetensorsReader;
  void* base_ = nullptr;  // page-aligned start of the mapping
  size_t length_ = 0;     // bytes mapped from base_
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Opens a file and validates its whole header (the same checks and messages
// as read_safetensors) without reading any tensor data.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::filesystem::path& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& file() const;
  uint64_t file_size() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In data-offset order (the writer's order).
  const std::vector<SafetensorsEntry>& tensors() const { return entries_; }
  // nullptr if there is no tensor of that name.
  const SafetensorsEntry* find(std::string_view name) const;

  // Maps the bytes of `entry` (one of tensors()). InputError if the file has
  // changed size since it was opened, or the mapping fails. The file must not
  // be truncated while a mapping is alive (the OS would raise SIGBUS).
  MappedBytes map(const SafetensorsEntry& entry) const;
  // A copy of the tensor, read with pread (no mapping).
  Array read(const SafetensorsEntry& entry) const;

 private:
  std::unique_ptr<detail::InputFile> file_;
  uint64_t data_start_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsEntry> entries_;
};

// Writes a file whose layout is known up front, one tensor at a time, so the
// data never has to be in memory at once. The header (the same bytes as
// encode_safetensors would write) is written by the constructor; write_next()
// takes the tensors in `layout` order, each exactly nbytes of its shape and
// dtype; commit() renames the file into place (atomic, as write_file_atomic).
// Destroying the writer before commit() leaves no file. The begin/end fields
// of `layout` are ignored (the writer packs tensors without gaps).
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::filesystem::path& path, std::vector<SafetensorsEntry> layout,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // std::invalid_argument if the bytes do not match the next tensor's size,
  // or all tensors are written already.
  void write_next(std::span<const uint8_t> bytes);
  // std::invalid_argument unless every tensor has been written.
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

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
