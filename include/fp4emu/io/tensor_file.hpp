#pragma once
// A file of named tensors, read one tensor at a time: an activation dump in
// .safetensors (many tensors, memory-mapped) or a single .npy array. The kind
// is told by the file's first bytes, not by its name. Tensors are selected by
// name or glob (`model.layers.*.mlp.down_proj.input`).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/io/array.hpp"
#include "fp4emu/io/safetensors.hpp"

namespace fp4emu::io {

struct TensorInfo {
  std::string name;  // safetensors: the header name; .npy: the file name ("x.npy")
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
};

// The bytes of one tensor, alive as long as this object: a mapping of a
// safetensors file, or a view of an .npy array already in memory.
class TensorBytes {
 public:
  TensorBytes() = default;
  explicit TensorBytes(MappedBytes mapped) : mapped_(std::move(mapped)), bytes_(mapped_.bytes()) {}
  explicit TensorBytes(std::span<const uint8_t> in_memory) : bytes_(in_memory) {}
  // Bytes held by `owner` (e.g. an .npy file read for this one tensor).
  TensorBytes(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes)
      : owner_(std::move(owner)), bytes_(bytes) {}
  std::span<const uint8_t> bytes() const { return bytes_; }

 private:
  MappedBytes mapped_;
  std::shared_ptr<const void> owner_;
  std::span<const uint8_t> bytes_;
};

class TensorFile {
 public:
  enum class Kind { npy, safetensors };

  // Reads and validates the header (safetensors) or the whole array (.npy).
  // InputError for anything malformed, naming the file and the field.
  explicit TensorFile(const std::filesystem::path& path);
  ~TensorFile();
  TensorFile(const TensorFile&) = delete;
  TensorFile& operator=(const TensorFile&) = delete;

  Kind kind() const { return kind_; }
  const std::string& file() const { return file_; }
  uint64_t file_size() const { return file_size_; }
  // safetensors "__metadata__" (empty for .npy).
  const std::map<std::string, std::string>& metadata() const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // The bytes of tensors()[index], little-endian C order.
  TensorBytes bytes(size_t index) const;

 private:
  Kind kind_ = Kind::npy;
  std::string file_;
  uint64_t file_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::unique_ptr<SafetensorsReader> safetensors_;
  std::optional<Array> npy_;
};

// Shell-style glob over the whole name: `*` any run of characters (dots
// included), `?` one character, `[abc]`, `[a-z]`, `[!abc]` a character class,
// `\` escapes the next character. A pattern without these is an exact name.
bool glob_match(std::string_view pattern, std::string_view name);

// A --tensor pattern: `re:REGEX` is an ECMAScript regular expression that
// must match the whole name (`re:.*\.(q|k)_proj\.input`); anything else is a
// glob (glob_match). InputError naming the pattern for a malformed regex.
bool name_matches(std::string_view pattern, std::string_view name);
// Whether a --tensor value is a glob or regex rather than a plain name (for
// the message when it selects nothing).
bool is_name_pattern(std::string_view pattern);

// Indices into file.tensors() (in file order, each once) of the tensors that
// match any of `patterns` (name_matches); all tensors when `patterns` is empty. InputError,
// naming the file and listing the tensors it has, when a pattern matches
// nothing (every pattern must match, so a typo is never silently ignored).
std::vector<size_t> select_tensors(const TensorFile& file, std::span<const std::string> patterns);

}  // namespace fp4emu::io
