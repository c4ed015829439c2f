#pragma once
// The tensors of a dump spread over many files, read one tensor at a time:
// what every dump-reading command takes as its inputs (docs/analysis.md
// "Inputs"). Each input is
//   - a .safetensors or .npy file,
//   - a directory: every *.safetensors and *.npy file in it, sorted by name,
//   - a glob over file names ('dump/step_*.safetensors'), sorted by name,
//   - a sharded index (model.safetensors.index.json): the shard files its
//     `weight_map` names, each of which must hold the tensors mapped to it.
// Tensor names are unique across the files (an .npy file's tensor is named by
// its file name). Headers are read up front; tensor bytes only when asked
// for, so a dump of any size is read in the memory of one tensor.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/io/tensor_file.hpp"

namespace fp4emu::io {

// The files the inputs name, in order (each input's files sorted by name).
// InputError naming the input for a path that does not exist, an empty
// directory or glob, a malformed index, or a file given twice.
std::vector<std::filesystem::path> expand_inputs(std::span<const std::string> inputs);

class TensorSet {
 public:
  struct Entry {
    TensorInfo info;
    size_t file = 0;   // index into files()
    size_t index = 0;  // index into that file's tensors
  };

  // InputError naming both files when two files hold a tensor of one name.
  explicit TensorSet(std::span<const std::string> inputs);
  ~TensorSet();
  TensorSet(const TensorSet&) = delete;
  TensorSet& operator=(const TensorSet&) = delete;

  const std::vector<std::filesystem::path>& files() const { return files_; }
  // The inputs as given, joined for messages ("a.safetensors b.npy").
  const std::string& label() const { return label_; }
  const std::vector<Entry>& tensors() const { return tensors_; }
  TensorFile::Kind kind(size_t file) const { return kinds_.at(file); }
  uint64_t file_size(size_t file) const { return sizes_.at(file); }
  // The file's safetensors "__metadata__" (empty for .npy).
  const std::map<std::string, std::string>& metadata(size_t file) const { return metadata_.at(file); }
  const std::filesystem::path& file_of(size_t tensor) const { return files_[tensors_.at(tensor).file]; }
  // The bytes of tensors()[i], little-endian C order; they stay valid as long
  // as the returned object (an .npy file is read on demand).
  TensorBytes bytes(size_t i) const;

 private:
  std::vector<std::filesystem::path> files_;
  std::string label_;
  std::vector<TensorFile::Kind> kinds_;
  std::vector<uint64_t> sizes_;
  std::vector<std::map<std::string, std::string>> metadata_;
  std::vector<std::unique_ptr<TensorFile>> open_;  // safetensors files stay open (header + mapping)
  std::vector<Entry> tensors_;
};

// Indices into set.tensors() (in order, each once) of the tensors whose name
// matches any of `patterns` (name_matches); all when `patterns` is empty.
// InputError naming the inputs and listing some names when a pattern matches
// nothing.
std::vector<size_t> select_tensors(const TensorSet& set, std::span<const std::string> patterns);

// Tensors holding identical bytes (same dtype and shape) under different
// names, e.g. the one input that q, k and v read: the first in `selected`
// order is kept, the others listed as its aliases (docs/analysis.md
// "Duplicates"). `selected` indexes set.tensors().
struct Deduplicated {
  std::vector<size_t> kept;                            // subset of `selected`, in order
  std::vector<std::pair<size_t, size_t>> aliases;      // (duplicate, the kept tensor it repeats)
};
Deduplicated deduplicate(const TensorSet& set, std::span<const size_t> selected);

}  // namespace fp4emu::io
