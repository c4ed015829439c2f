#include "fp4emu/io/safetensors.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp4emu/error.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/printable.hpp"
#include "input_file.hpp"

namespace fp4emu::io {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kSupported = "F32, F16, BF16, F64, U8, U16, U32, I32";
constexpr std::string_view kPytorchHint =
    "PyTorch pickle files are not supported: save the tensors with "
    "safetensors.torch.save_file(...)";

std::string_view st_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::f64: return "F64";
    case DType::u8: return "U8";
    case DType::u16: return "U16";
    case DType::u32: return "U32";
    case DType::i32: return "I32";
  }
  return "?";
}

std::optional<DType> st_dtype(std::string_view s) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::u8, DType::u16,
                  DType::u32, DType::i32}) {
    if (st_name(d) == s) return d;
  }
  return std::nullopt;
}

// A safetensors header needs three levels (the header object, a tensor's
// object, its shape list); a little margin, and no recursion over untrusted
// nesting beyond it.
constexpr int kMaxHeaderDepth = 8;

// Appends a JSON value, compact, stopping once `out` is longer than `limit`;
// strings go through printable(). Values come from HeaderSax, so the
// recursion is bounded by kMaxHeaderDepth.
void show_into(const json& v, std::string& out, size_t limit) {
  if (out.size() > limit) return;
  if (v.is_string()) {
    out += '"' + printable(v.get_ref<const std::string&>(), limit) + '"';
  } else if (v.is_array() || v.is_object()) {
    out += v.is_array() ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
      if (!first) out += ',';
      first = false;
      if (v.is_object()) out += '"' + printable(it.key(), limit) + "\":";
      show_into(*it, out, limit);
    }
    out += v.is_array() ? ']' : '}';
  } else {
    out += v.dump();  // a number, true, false or null: short ASCII
  }
}

// A JSON value for a message, at most 80 bytes.
std::string show(const json& v) {
  constexpr size_t kLimit = 80;
  std::string s;
  show_into(v, s, kLimit);
  if (s.size() > kLimit) {
    size_t cut = kLimit - 3;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    s = s.substr(0, cut) + "...";
  }
  return s;
}

// 'name', with untrusted bytes escaped.
std::string show_name(std::string_view s) { return fmt::format("'{}'", printable(s)); }

bool looks_like_pytorch(const uint8_t* head, size_t n) {
  if (n >= 2 && head[0] == 'P' && head[1] == 'K') return true;          // zip (torch >= 1.6)
  if (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return true;  // pickle PROTO
  return false;
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

// Parses the header with nlohmann's SAX interface rather than into one DOM:
// nesting is refused past kMaxHeaderDepth before it can recurse anywhere; a
// key repeated inside one object is caught (the DOM parser keeps one of the
// two silently) in O(log n); and each top-level entry is handed to `on_entry`
// as soon as it is complete, so a header of millions of tensors is never one
// tree in memory.
class HeaderSax {
 public:
  using OnEntry = std::function<void(std::string&&, json&&)>;
  explicit HeaderSax(OnEntry on_entry) : on_entry_(std::move(on_entry)) {}

  bool null() { return add(json(nullptr)); }
  bool boolean(bool v) { return add(json(v)); }
  bool number_integer(json::number_integer_t v) { return add(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return add(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return add(json(v)); }
  bool string(json::string_t& v) { return add(json(std::move(v))); }
  bool binary(json::binary_t& v) { return add(json(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    Frame& f = stack_.back();
    if (!f.streaming && f.value.contains(k)) {
      duplicate_ = std::move(k);
      return false;
    }
    f.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    parse_error_ = e.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::optional<std::string>& duplicate() const { return duplicate_; }
  const std::string& parse_error() const { return parse_error_; }
  bool root_is_object() const { return root_is_object_; }
  const json& root() const { return root_; }  // the header when it is not an object

 private:
  struct Frame {
    json value;
    std::string key;         // of the value being read, in an object
    bool streaming = false;  // the top-level object: entries go to on_entry_
  };

  bool open(json&& empty) {
    if (stack_.size() >= static_cast<size_t>(kMaxHeaderDepth)) {
      too_deep_ = true;
      return false;
    }
    const bool streaming = stack_.empty() && empty.is_object();
    root_is_object_ = root_is_object_ || streaming;
    stack_.push_back({streaming ? json() : std::move(empty), {}, streaming});
    return true;
  }

  bool close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return f.streaming || add(std::move(f.value));
  }

  bool add(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = stack_.back();
    if (f.streaming) {
      on_entry_(std::move(f.key), std::move(v));
    } else if (f.value.is_array()) {
      f.value.push_back(std::move(v));
    } else {
      f.value[f.key] = std::move(v);
    }
    return true;
  }

  OnEntry on_entry_;
  std::vector<Frame> stack_;
  json root_;
  bool root_is_object_ = false;
  bool too_deep_ = false;
  std::optional<std::string> duplicate_;
  std::string parse_error_;
};

class HeaderReader {
 public:
  HeaderReader(const std::string& file, uint64_t data_size) : file_(file), data_size_(data_size) {}

  [[noreturn]] void fail_duplicate(std::string_view key) const {
    throw InputError(fmt::format(
        "'{}': header has the key {} twice; tensor names (and fields) must be unique", file_,
        show_name(key)));
  }

  [[noreturn]] void fail_tensor(const std::string& name, std::string_view field,
                                std::string_view what) const {
    throw InputError(fmt::format("'{}': tensor {} field '{}' {}", file_, show_name(name), field,
                                 what));
  }

  std::vector<int64_t> read_shape(const std::string& name, const json& t) const {
    const auto it = t.find("shape");
    if (it == t.end()) {
      fail_tensor(name, "shape", "is missing; expected a list of non-negative integers, e.g. "
                                 "[2, 3] ([] for a scalar)");
    }
    if (!it->is_array()) {
      fail_tensor(name, "shape", fmt::format("is {}: expected a list of non-negative integers",
                                             show(*it)));
    }
    std::vector<int64_t> shape;
    for (const json& d : *it) {
      if (d.is_number_unsigned() && d.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) {
        shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
      } else if (d.is_number_integer() && !d.is_number_unsigned()) {
        fail_tensor(name, "shape", fmt::format("is {}: dim {} is negative; dims must be >= 0",
                                               show(*it), show(d)));
      } else {
        fail_tensor(name, "shape",
                    fmt::format("is {}: dim {} is not a non-negative 64-bit integer", show(*it),
                                show(d)));
      }
    }
    return shape;
  }

  DType read_dtype(const std::string& name, const json& t) const {
    const auto it = t.find("dtype");
    if (it == t.end()) {
      fail_tensor(name, "dtype", fmt::format("is missing; expected one of {}", kSupported));
    }
    if (!it->is_string()) {
      fail_tensor(name, "dtype", fmt::format("is {}: expected a string, one of {}", show(*it),
                                             kSupported));
    }
    const auto dtype = st_dtype(it->get_ref<const std::string&>());
    if (!dtype) {
      fail_tensor(name, "dtype",
                  fmt::format("is {}: unsupported dtype; supported: {} (convert the tensor, "
                              "e.g. t.float(), before saving)",
                              show(*it), kSupported));
    }
    return *dtype;
  }

  std::pair<uint64_t, uint64_t> read_offsets(const std::string& name, const json& t) const {
    const auto it = t.find("data_offsets");
    if (it == t.end()) {
      fail_tensor(name, "data_offsets",
                  "is missing; expected [begin, end], byte offsets into the data buffer");
    }
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_unsigned() ||
        !(*it)[1].is_number_unsigned()) {
      fail_tensor(name, "data_offsets",
                  fmt::format("is {}: expected [begin, end], two non-negative integers",
                              show(*it)));
    }
    const uint64_t begin = (*it)[0].get<uint64_t>();
    const uint64_t end = (*it)[1].get<uint64_t>();
    if (begin > end) {
      fail_tensor(name, "data_offsets",
                  fmt::format("is {}: begin is after end; expected begin <= end", show(*it)));
    }
    if (end > data_size_) {
      fail_tensor(name, "data_offsets",
                  fmt::format("is {}: end is past the data buffer, which holds {} bytes; the "
                              "file is truncated or the header is wrong",
                              show(*it), data_size_));
    }
    return {begin, end};
  }

  Entry read_tensor(const std::string& name, const json& t) const {
    if (!t.is_object()) {
      throw InputError(fmt::format(
          "'{}': tensor {} is {}: expected an object with fields 'dtype', 'shape' and "
          "'data_offsets'",
          file_, show_name(name), show(t)));
    }
    Entry e;
    e.name = name;
    e.dtype = read_dtype(name, t);
    e.shape = read_shape(name, t);
    std::tie(e.begin, e.end) = read_offsets(name, t);
    const auto nbytes = checked_byte_size(e.shape, e.dtype);
    if (!nbytes) {
      fail_tensor(name, "shape",
                  fmt::format("is {}: its byte size overflows 64 bits; the header is corrupt",
                              show(t["shape"])));
    }
    if (static_cast<uint64_t>(*nbytes) != e.end - e.begin) {
      fail_tensor(name, "data_offsets",
                  fmt::format("is [{}, {}] ({} bytes) but shape {} of {} needs {} bytes; the "
                              "offsets must span exactly shape * dtype size",
                              e.begin, e.end, e.end - e.begin, shape_string(e.shape),
                              st_name(e.dtype), *nbytes));
    }
    return e;
  }

  std::map<std::string, std::string> read_metadata(const json& m) const {
    if (!m.is_object()) {
      throw InputError(fmt::format(
          "'{}': header '__metadata__' is {}: expected an object mapping strings to strings",
          file_, show(m)));
    }
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : m.items()) {
      if (!v.is_string()) {
        throw InputError(fmt::format(
            "'{}': header '__metadata__' field {} is {}: metadata values must be strings "
            "(store numbers as text, e.g. \"3\")",
            file_, show_name(k), show(v)));
      }
      out.emplace(k, v.get<std::string>());
    }
    return out;
  }

 private:
  const std::string& file_;
  uint64_t data_size_;
};

}  // namespace

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  for (const SafetensorsTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// ---- reading -------------------------------------------------------------------

SafetensorsReader::SafetensorsReader(const std::filesystem::path& path)
    : file_(std::make_unique<detail::InputFile>(path)) {
  const detail::InputFile& f = *file_;
  const std::string& file = f.name();

  uint8_t head[9] = {};
  const size_t head_len = static_cast<size_t>(std::min<uint64_t>(f.size(), 9));
  f.read(0, head, head_len);
  // A header length of 0x0280..0x0580 (mod 2^16) starts with the bytes of a
  // pickle PROTO opcode: a safetensors header then follows as '{' at byte 8.
  const bool json_follows = head_len == 9 && head[8] == '{';
  if (!json_follows && looks_like_pytorch(head, head_len)) {
    throw InputError(fmt::format("'{}': this is a PyTorch {} file, not safetensors. {}", file,
                                 head[0] == 'P' ? "zip (.pt/.pth/.bin)" : "pickle (.pt/.pth/.bin)",
                                 kPytorchHint));
  }
  if (head_len >= 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) {
    throw InputError(fmt::format("'{}': this is a numpy .npy file, not safetensors; read it as "
                                 "npy (name it *.npy)",
                                 file));
  }
  if (head_len < 8) {
    throw InputError(fmt::format(
        "'{}': truncated header: the file is {} bytes, shorter than the 8-byte header length "
        "field; not a safetensors file or an incomplete one",
        file, f.size()));
  }
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(head[i]) << (8 * i);
  if (header_len > f.size() - 8) {
    throw InputError(fmt::format(
        "'{}': header length field is {} but only {} bytes follow it; the file is truncated "
        "or not a safetensors file",
        file, header_len, f.size() - 8));
  }
  data_start_ = 8 + header_len;
  const uint64_t data_size = f.size() - data_start_;

  std::string text(static_cast<size_t>(header_len), '\0');
  f.read(8, text.data(), text.size());

  HeaderReader reader(file, data_size);
  std::vector<Entry> entries;
  bool have_metadata = false;
  HeaderSax sax([&](std::string&& key, json&& value) {
    if (key == kMetadataKey) {
      if (have_metadata) reader.fail_duplicate(key);
      have_metadata = true;
      metadata_ = reader.read_metadata(value);
    } else {
      entries.push_back(reader.read_tensor(key, value));
    }
  });
  if (!json::sax_parse(text, &sax)) {
    if (sax.too_deep()) {
      throw InputError(fmt::format(
          "'{}': header nests lists or objects more than {} levels deep (a safetensors header "
          "needs 3); the file is corrupt or not a safetensors file",
          file, kMaxHeaderDepth));
    }
    if (sax.duplicate()) reader.fail_duplicate(*sax.duplicate());
    throw InputError(fmt::format(
        "'{}': header is not valid JSON ({}); the file is corrupt or not a safetensors file",
        file, printable(sax.parse_error())));
  }
  if (!sax.root_is_object()) {
    throw InputError(fmt::format(
        "'{}': header is {}: expected a JSON object mapping tensor names to "
        "{{\"dtype\", \"shape\", \"data_offsets\"}}",
        file, show(sax.root())));
  }
  // Tensor names must be unique (nlohmann would keep one of two silently);
  // checked sorted, in O(n log n), because headers hold millions of tensors.
  {
    std::vector<const std::string*> names;
    names.reserve(entries.size());
    for (const Entry& e : entries) names.push_back(&e.name);
    std::sort(names.begin(), names.end(),
              [](const std::string* a, const std::string* b) { return *a < *b; });
    const auto same = std::adjacent_find(
        names.begin(), names.end(), [](const std::string* a, const std::string* b) { return *a == *b; });
    if (same != names.end()) reader.fail_duplicate(**same);
  }

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // Empty tensors occupy no bytes and cannot overlap anything.
  const Entry* last = nullptr;
  for (const Entry& e : entries) {
    if (e.begin == e.end) continue;
    if (last != nullptr && e.begin < last->end) {
      throw InputError(fmt::format(
          "'{}': tensor {} field 'data_offsets' [{}, {}] overlaps tensor {} [{}, {}]; each "
          "tensor needs its own byte range",
          file, show_name(e.name), e.begin, e.end, show_name(last->name), last->begin,
          last->end));
    }
    if (last == nullptr || e.end > last->end) last = &e;
  }

  entries_.reserve(entries.size());
  for (Entry& e : entries) {
    entries_.push_back({std::move(e.name), e.dtype, std::move(e.shape), e.begin, e.end});
  }
}

SafetensorsReader::~SafetensorsReader() = default;

const std::string& SafetensorsReader::file() const { return file_->name(); }
uint64_t SafetensorsReader::file_size() const { return file_->size(); }

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  for (const SafetensorsEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Array SafetensorsReader::read(const SafetensorsEntry& e) const {
  // Ranges were checked against the file at open; the total of all tensors
  // is bounded by the file size (ranges are inside it and disjoint).
  Array a;
  a.dtype = e.dtype;
  a.shape = e.shape;
  a.bytes.resize(static_cast<size_t>(e.nbytes()));
  file_->read(data_start_ + e.begin, a.bytes.data(), a.bytes.size());
  return a;
}

MappedBytes SafetensorsReader::map(const SafetensorsEntry& e) const {
  const std::string& file = file_->name();
  MappedBytes m;
  if (e.nbytes() == 0) return m;
  struct stat st {};
  if (::fstat(file_->fd(), &st) != 0 || static_cast<uint64_t>(st.st_size) != file_->size()) {
    throw InputError(fmt::format("'{}': the file changed size while being read (it was {} "
                                 "bytes); let the writer finish, then run again",
                                 file, file_->size()));
  }
  if (e.begin > e.end || e.end > file_->size() - data_start_) {
    throw std::invalid_argument(fmt::format("'{}': map of tensor {} outside the data buffer",
                                            file, show_name(e.name)));
  }
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t offset = data_start_ + e.begin;
  const uint64_t aligned = offset / page * page;
  const uint64_t length = offset - aligned + e.nbytes();
  void* base = ::mmap(nullptr, static_cast<size_t>(length), PROT_READ, MAP_PRIVATE, file_->fd(),
                      static_cast<off_t>(aligned));
  if (base == MAP_FAILED) {
    throw InputError(fmt::format("'{}': cannot memory-map tensor {} ({} bytes): {}", file,
                                 show_name(e.name), e.nbytes(), std::strerror(errno)));
  }
  // Tensors are read front to back once: let the kernel read ahead.
  (void)::madvise(base, static_cast<size_t>(length), MADV_SEQUENTIAL);
  m.base_ = base;
  m.length_ = static_cast<size_t>(length);
  m.data_ = static_cast<const uint8_t*>(base) + (offset - aligned);
  m.size_ = static_cast<size_t>(e.nbytes());
  return m;
}

MappedBytes::MappedBytes(MappedBytes&& other) noexcept { *this = std::move(other); }

MappedBytes& MappedBytes::operator=(MappedBytes&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, length_);
    base_ = std::exchange(other.base_, nullptr);
    length_ = std::exchange(other.length_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedBytes::~MappedBytes() {
  if (base_ != nullptr) ::munmap(base_, length_);
}

SafetensorsFile read_safetensors(const std::filesystem::path& path) {
  const SafetensorsReader reader(path);
  SafetensorsFile out;
  out.metadata = reader.metadata();
  out.tensors.reserve(reader.tensors().size());
  for (const SafetensorsEntry& e : reader.tensors()) {
    out.tensors.push_back({e.name, reader.read(e)});
  }
  return out;
}

// ---- writing -------------------------------------------------------------------

namespace {

// The header text (padded so the data starts on an 8-byte boundary) for
// tensors packed in the given order; sets begin/end of each entry.
std::string encode_header(std::vector<SafetensorsEntry>& entries,
                          const std::map<std::string, std::string>& metadata,
                          std::string_view destination) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[std::string(kMetadataKey)] = std::move(m);
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (SafetensorsEntry& e : entries) {
    if (e.name == kMetadataKey) {
      throw InputError(fmt::format("cannot write '{}': tensor name \"__metadata__\" is reserved "
                                   "by the safetensors format; rename the tensor",
                                   destination));
    }
    if (!names.insert(e.name).second) {
      throw InputError(fmt::format("cannot write '{}': tensor name {} appears twice; tensor "
                                   "names must be unique",
                                   destination, show_name(e.name)));
    }
    const auto nbytes = checked_byte_size(e.shape, e.dtype);
    if (!nbytes) {
      throw std::invalid_argument(fmt::format(
          "writing '{}' tensor {}: shape {} has a negative dim or its byte size overflows int64",
          destination, show_name(e.name), shape_string(e.shape)));
    }
    e.begin = offset;
    e.end = offset + static_cast<uint64_t>(*nbytes);
    header[e.name] = {{"dtype", st_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {e.begin, e.end}}};
    offset = e.end;
  }
  std::string text;
  try {
    text = header.dump();  // strict: throws on invalid UTF-8
  } catch (const json::exception& e) {
    throw InputError(fmt::format("cannot write '{}': a tensor name or metadata string is not "
                                 "valid UTF-8 ({}); use UTF-8 names",
                                 destination, e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::vector<uint8_t> length_prefixed(const std::string& text, uint64_t reserve_data) {
  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + reserve_data);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

}  // namespace

std::vector<uint8_t> encode_safetensors(const std::vector<SafetensorsTensor>& tensors,
                                        const std::map<std::string, std::string>& metadata,
                                        std::string_view destination) {
  std::vector<SafetensorsEntry> entries;
  entries.reserve(tensors.size());
  for (const SafetensorsTensor& t : tensors) {
    entries.push_back({t.name, t.array.dtype, t.array.shape, 0, 0});
  }
  const std::string text = encode_header(entries, metadata, destination);
  uint64_t total = 0;
  for (const SafetensorsTensor& t : tensors) {
    check_consistent(t.array, fmt::format("writing '{}' tensor {}", destination,
                                          show_name(t.name)));
    total += t.array.bytes.size();
  }
  std::vector<uint8_t> out = length_prefixed(text, total);
  for (const SafetensorsTensor& t : tensors) {
    out.insert(out.end(), t.array.bytes.begin(), t.array.bytes.end());
  }
  return out;
}

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(tensors, metadata, path.string()));
}

struct SafetensorsWriter::Impl {
  std::vector<SafetensorsEntry> layout;
  size_t next = 0;
  AtomicFileWriter out;
  explicit Impl(const std::filesystem::path& path) : out(path) {}
};

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path,
                                     std::vector<SafetensorsEntry> layout,
                                     const std::map<std::string, std::string>& metadata) {
  // The header is checked before the temporary file exists.
  const std::string text = encode_header(layout, metadata, path.string());
  impl_ = std::make_unique<Impl>(path);
  impl_->layout = std::move(layout);
  impl_->out.write(length_prefixed(text, 0));
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::write_next(std::span<const uint8_t> bytes) {
  if (impl_->next >= impl_->layout.size()) {
    throw std::invalid_argument("SafetensorsWriter: every tensor of the layout is written already");
  }
  const SafetensorsEntry& e = impl_->layout[impl_->next];
  if (bytes.size() != e.nbytes()) {
    throw std::invalid_argument(fmt::format("SafetensorsWriter: tensor {} needs {} bytes, got {}",
                                            show_name(e.name), e.nbytes(), bytes.size()));
  }
  impl_->out.write(bytes);
  ++impl_->next;
}

void SafetensorsWriter::commit() {
  if (impl_->next != impl_->layout.size()) {
    throw std::invalid_argument(fmt::format("SafetensorsWriter: {} of {} tensors written",
                                            impl_->next, impl_->layout.size()));
  }
  impl_->out.commit();
}

}  // namespace fp4emu::io
