#include "fp4emu/io/tensor_file.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/printable.hpp"
#include "input_file.hpp"

namespace fp4emu::io {

namespace {


// Matches one character class starting at pattern[p] == '['. Returns the
// index after the closing ']' and sets `matched`; npos if the class is not
// closed (then '[' is an ordinary character, as in the shell).
size_t match_class(std::string_view pattern, size_t p, char c, bool& matched) {
  size_t i = p + 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool hit = false;
  bool first = true;
  while (i < pattern.size() && (first || pattern[i] != ']')) {
    first = false;
    char lo = pattern[i];
    if (lo == '\\' && i + 1 < pattern.size()) lo = pattern[++i];
    char hi = lo;
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      hi = pattern[i + 2];
      if (hi == '\\' && i + 3 < pattern.size()) {
        hi = pattern[i + 3];
        ++i;
      }
      i += 2;
    }
    if (lo <= c && c <= hi) hit = true;
    ++i;
  }
  if (i >= pattern.size()) return std::string_view::npos;
  matched = hit != negate;
  return i + 1;
}

std::string name_list(const TensorFile& file) {
  constexpr size_t kShown = 8;
  const auto& ts = file.tensors();
  std::string s;
  for (size_t i = 0; i < ts.size() && i < kShown; ++i) {
    s += (i ? ", " : "") + printable(ts[i].name, 80);
  }
  if (ts.size() > kShown) s += fmt::format(", ... ({} more)", ts.size() - kShown);
  return s;
}

}  // namespace

// Iterative matcher with one backtrack point (the last '*'): linear in
// practice, no recursion on hostile patterns.
bool glob_match(std::string_view pattern, std::string_view name) {
  size_t p = 0, n = 0;
  size_t star_p = std::string_view::npos, star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size()) {
      const char c = pattern[p];
      if (c == '*') {
        star_p = p++;
        star_n = n;
        continue;
      }
      if (c == '?') {
        ++p;
        ++n;
        continue;
      }
      if (c == '[') {
        bool matched = false;
        const size_t after = match_class(pattern, p, name[n], matched);
        if (after != std::string_view::npos) {
          if (matched) {
            p = after;
            ++n;
            continue;
          }
        } else if (name[n] == '[') {
          ++p;
          ++n;
          continue;
        }
      } else {
        char lit = c;
        size_t width = 1;
        if (c == '\\' && p + 1 < pattern.size()) {
          lit = pattern[p + 1];
          width = 2;
        }
        if (lit == name[n]) {
          p += width;
          ++n;
          continue;
        }
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p + 1;
    n = ++star_n;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool is_name_pattern(std::string_view pattern) {
  return pattern.substr(0, 3) == "re:" || pattern.find_first_of("*?[\\") != std::string_view::npos;
}

bool name_matches(std::string_view pattern, std::string_view name) {
  if (pattern.substr(0, 3) != "re:") return glob_match(pattern, name);
  // Compiled once per pattern: a selection tries every pattern on every name.
  static std::mutex mutex;
  static std::map<std::string, std::regex, std::less<>> compiled;
  const std::regex* re = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = compiled.find(pattern);
    if (it == compiled.end()) {
      try {
        it = compiled.emplace(std::string(pattern), std::regex(std::string(pattern.substr(3)))).first;
      } catch (const std::regex_error& e) {
        throw InputError(fmt::format("--tensor '{}': not a valid regular expression ({}); `re:` takes an ECMAScript "
                                     "regex matching the whole name, e.g. 're:.*\\.(q|k)_proj\\.input'",
                                     printable(pattern, 80), e.what()));
      }
    }
    re = &it->second;
  }
  return std::regex_match(name.begin(), name.end(), *re);
}

TensorFile::TensorFile(const std::filesystem::path& path) : file_(path.string()) {
  char magic[6] = {};
  {
    const detail::InputFile f(path);
    file_size_ = f.size();
    if (f.size() >= 6) f.read(0, magic, 6);
  }
  if (std::memcmp(magic, "\x93NUMPY", 6) == 0) {
    kind_ = Kind::npy;
    npy_ = read_npy(path);
    tensors_.push_back({path.filename().string(), npy_->dtype, npy_->shape, npy_->bytes.size()});
    return;
  }
  kind_ = Kind::safetensors;
  safetensors_ = std::make_unique<SafetensorsReader>(path);
  for (const SafetensorsEntry& e : safetensors_->tensors()) {
    tensors_.push_back({e.name, e.dtype, e.shape, e.nbytes()});
  }
}

TensorFile::~TensorFile() = default;

const std::map<std::string, std::string>& TensorFile::metadata() const {
  static const std::map<std::string, std::string> kNone;
  return safetensors_ ? safetensors_->metadata() : kNone;
}

TensorBytes TensorFile::bytes(size_t index) const {
  if (index >= tensors_.size()) {
    throw std::out_of_range(fmt::format("'{}': tensor index {} of {}", file_, index,
                                        tensors_.size()));
  }
  if (npy_) return TensorBytes(std::span<const uint8_t>(npy_->bytes));
  return TensorBytes(safetensors_->map(safetensors_->tensors()[index]));
}

std::vector<size_t> select_tensors(const TensorFile& file, std::span<const std::string> patterns) {
  const auto& ts = file.tensors();
  std::vector<bool> chosen(ts.size(), patterns.empty());
  for (const std::string& pattern : patterns) {
    bool any = false;
    for (size_t i = 0; i < ts.size(); ++i) {
      if (name_matches(pattern, ts[i].name)) {
        chosen[i] = true;
        any = true;
      }
    }
    if (!any) {
      throw InputError(fmt::format(
          "'{}': {} '{}'; the file has {} tensor{}: {} (`fp4emu inspect {}` lists them all)",
          file.file(), is_name_pattern(pattern) ? "no tensor matches --tensor" : "no tensor named",
          printable(pattern), ts.size(), ts.size() == 1 ? "" : "s", ts.empty() ? "none" : name_list(file),
          file.file()));
    }
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (chosen[i]) out.push_back(i);
  }
  return out;
}

}  // namespace fp4emu::io
