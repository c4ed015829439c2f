#include "fp4emu/io/tensor_set.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "fp4emu/error.hpp"
#include "fp4emu/io/printable.hpp"
#include "input_file.hpp"

namespace fp4emu::io {
namespace {

namespace fs = std::filesystem;

std::string shown(const fs::path& p) { return "'" + printable(p.string(), 200) + "'"; }

bool is_tensor_file_name(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".safetensors" || ext == ".npy";
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& pattern) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    const bool wanted = pattern.empty() ? is_tensor_file_name(p) : glob_match(pattern, name);
    std::error_code ec2;
    if (wanted && fs::is_regular_file(p, ec2)) out.push_back(p);
  }
  if (ec)
    throw InputError(fmt::format("{}: cannot list the directory ({})", shown(dir), ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}.
struct ShardIndex {
  fs::path index;
  std::vector<std::pair<std::string, fs::path>> weight_map;
};

std::vector<fs::path> index_shards(const fs::path& index, ShardIndex& map) {
  map.index = index;
  const detail::InputFile f(index);
  constexpr uint64_t kMaxIndex = 256ull << 20;  // a 1T-parameter model's index is a few MB
  if (f.size() > kMaxIndex)
    throw InputError(fmt::format("{}: {} bytes is too large for a sharded index (at most {} MB)", shown(index),
                                 f.size(), kMaxIndex >> 20));
  std::string text(f.size(), '\0');
  if (!text.empty()) f.read(0, text.data(), text.size());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON ({}); a sharded index is model.safetensors.index.json with a "
                                 "\"weight_map\" of tensor name -> shard file",
                                 shown(index), e.what()));
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
    throw InputError(fmt::format("{}: field 'weight_map' is missing, not an object or empty; a sharded index maps "
                                 "each tensor name to its shard file",
                                 shown(index)));
  std::vector<fs::path> shards;
  std::set<std::string> seen;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().empty())
      throw InputError(fmt::format("{}: field 'weight_map' entry '{}' is not a file name", shown(index),
                                   printable(name, 80)));
    const std::string s = file.get<std::string>();
    const fs::path rel(s);
    if (rel.is_absolute() || s.find("..") != std::string::npos || rel.has_parent_path())
      throw InputError(fmt::format("{}: field 'weight_map' entry '{}' names '{}'; a shard is a file name beside the "
                                   "index",
                                   shown(index), printable(name, 80), printable(s, 80)));
    map.weight_map.emplace_back(name, index.parent_path() / rel);
    if (seen.insert(s).second) shards.push_back(index.parent_path() / rel);
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

// Every tensor the index maps to a shard must be in that shard.
void check_index(const ShardIndex& map, const TensorSet& set) {
  std::unordered_map<std::string, size_t> where;
  for (const TensorSet::Entry& e : set.tensors()) where.emplace(e.info.name, e.file);
  for (const auto& [name, shard] : map.weight_map) {
    const auto it = where.find(name);
    if (it == where.end() || set.files()[it->second] != shard)
      throw InputError(fmt::format("{}: field 'weight_map' maps tensor '{}' to {}, which does not hold it; the "
                                   "index and its shards disagree",
                                   shown(map.index), printable(name, 80), shown(shard)));
  }
}

std::vector<fs::path> expand(std::span<const std::string> inputs, std::vector<ShardIndex>* indexes) {
  if (inputs.empty()) throw InputError("no input given: name a dump file, a directory, a glob or a sharded index");
  std::vector<fs::path> files;
  for (const std::string& input : inputs) {
    const fs::path p(input);
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    std::vector<fs::path> found;
    if (fs::is_directory(st)) {
      found = sorted_files(p, "");
      if (found.empty())
        throw InputError(fmt::format("{}: the directory holds no *.safetensors or *.npy file", shown(p)));
    } else if (!fs::exists(st) && has_glob_chars(p.filename().string()) && !has_glob_chars(p.parent_path().string())) {
      const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
      if (!fs::is_directory(dir, ec))
        throw InputError(fmt::format("{}: the glob's directory {} does not exist", shown(p), shown(dir)));
      found = sorted_files(dir, p.filename().string());
      if (found.empty()) throw InputError(fmt::format("{}: no file matches the glob", shown(p)));
    } else if (p.string().size() >= 5 && p.extension() == ".json") {
      ShardIndex map;
      found = index_shards(p, map);
      if (indexes) indexes->push_back(std::move(map));
    } else {
      found = {p};  // TensorFile reports a missing or unreadable file
    }
    files.insert(files.end(), found.begin(), found.end());
  }
  // A file reached twice (directly, through a directory, glob or index) would
  // only repeat every one of its tensor names.
  for (size_t i = 0; i < files.size(); ++i)
    for (size_t k = 0; k < i; ++k) {
      std::error_code ec;
      if (files[i] == files[k] || fs::equivalent(files[i], files[k], ec))
        throw InputError(fmt::format("{} is given twice (directly or through a directory, glob or index); name "
                                     "each file once",
                                     shown(files[i])));
    }
  return files;
}

}  // namespace

std::vector<fs::path> expand_inputs(std::span<const std::string> inputs) { return expand(inputs, nullptr); }

TensorSet::TensorSet(std::span<const std::string> inputs) {
  std::vector<ShardIndex> indexes;
  files_ = expand(inputs, &indexes);
  for (size_t i = 0; i < inputs.size(); ++i) label_ += (i ? " " : "") + inputs[i];
  std::unordered_map<std::string, size_t> owner;  // tensor name -> file
  for (size_t f = 0; f < files_.size(); ++f) {
    auto file = std::make_unique<TensorFile>(files_[f]);
    kinds_.push_back(file->kind());
    sizes_.push_back(file->file_size());
    metadata_.push_back(file->metadata());
    for (size_t t = 0; t < file->tensors().size(); ++t) {
      const TensorInfo& info = file->tensors()[t];
      const auto [it, fresh] = owner.emplace(info.name, f);
      if (!fresh)
        throw InputError(fmt::format("tensor '{}' is in both {} and {}; tensor names must be unique across the "
                                     "inputs (select one file's copy by giving fewer inputs)",
                                     printable(info.name, 80), shown(files_[it->second]), shown(files_[f])));
      tensors_.push_back({info, f, t});
    }
    // An .npy file is read whole: it is read again when its tensor is used,
    // so that a directory of arrays is never all in memory.
    open_.push_back(file->kind() == TensorFile::Kind::safetensors ? std::move(file) : nullptr);
  }
  for (const ShardIndex& map : indexes) check_index(map, *this);
}

TensorSet::~TensorSet() = default;

TensorBytes TensorSet::bytes(size_t i) const {
  const Entry& e = tensors_.at(i);
  if (open_[e.file]) return open_[e.file]->bytes(e.index);
  auto file = std::make_shared<const TensorFile>(files_[e.file]);
  if (file->tensors().size() != 1 || file->tensors()[0].dtype != e.info.dtype ||
      file->tensors()[0].shape != e.info.shape)
    throw InputError(fmt::format("{}: the file changed while it was read; run again", shown(files_[e.file])));
  const std::span<const uint8_t> bytes = file->bytes(0).bytes();
  return TensorBytes(std::shared_ptr<const void>(file, file.get()), bytes);
}

std::vector<size_t> select_tensors(const TensorSet& set, std::span<const std::string> patterns) {
  const auto& ts = set.tensors();
  std::vector<bool> chosen(ts.size(), patterns.empty());
  for (const std::string& pattern : patterns) {
    bool any = false;
    for (size_t i = 0; i < ts.size(); ++i)
      if (name_matches(pattern, ts[i].info.name)) chosen[i] = any = true;
    if (!any) {
      constexpr size_t kShown = 8;
      std::string names;
      for (size_t i = 0; i < ts.size() && i < kShown; ++i) names += (i ? ", " : "") + printable(ts[i].info.name, 80);
      if (ts.size() > kShown) names += fmt::format(", ... ({} more)", ts.size() - kShown);
      throw InputError(fmt::format("'{}': {} '{}'; the input{} {} {} tensor{}: {} (`fp4emu inspect` lists them all)",
                                   printable(set.label(), 200),
                                   is_name_pattern(pattern) ? "no tensor matches --tensor" : "no tensor named",
                                   printable(pattern), set.files().size() == 1 ? "" : "s",
                                   set.files().size() == 1 ? "has" : "have", ts.size(), ts.size() == 1 ? "" : "s",
                                   ts.empty() ? "none" : names));
    }
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < ts.size(); ++i)
    if (chosen[i]) out.push_back(i);
  return out;
}

Deduplicated deduplicate(const TensorSet& set, std::span<const size_t> selected) {
  // Candidates share dtype, shape and a hash of their first 64 KiB; only
  // those are compared whole, so distinct tensors are read once, briefly.
  auto key = [&set](size_t i) {
    const TensorInfo& info = set.tensors()[i].info;
    const TensorBytes b = set.bytes(i);
    const size_t n = std::min<size_t>(b.bytes().size(), 64 << 10);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t k = 0; k < n; ++k) h = (h ^ b.bytes()[k]) * 1099511628211ull;
    return fmt::format("{}|{}|{}|{}", static_cast<int>(info.dtype), fmt::join(info.shape, "x"), info.nbytes, h);
  };
  Deduplicated d;
  std::unordered_map<std::string, std::vector<size_t>> kept_by_key;
  for (size_t i : selected) {
    std::vector<size_t>& group = kept_by_key[key(i)];
    std::optional<size_t> same;
    for (size_t k : group) {
      const TensorBytes a = set.bytes(i), b = set.bytes(k);
      if (std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin(), b.bytes().end())) {
        same = k;
        break;
      }
    }
    if (same) {
      d.aliases.emplace_back(i, *same);
    } else {
      d.kept.push_back(i);
      group.push_back(i);
    }
  }
  return d;
}

}  // namespace fp4emu::io
