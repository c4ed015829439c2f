// .npy reader and writer. Format reference: numpy/lib/format.py (NEP 1).
//   magic "\x93NUMPY", major, minor,
//   header length (u16 LE for 1.0, u32 LE for 2.0/3.0),
//   header: a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), }
//           padded with spaces and ended by '\n',
//   data.
#include "fp4emu/io/npy.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/printable.hpp"
#include "input_file.hpp"

namespace fp4emu::io {

namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr std::string_view kSupportedDescrs =
    "'<f4' '>f4' '<f2' '>f2' '<f8' '>f8' '|u1' '<u2' '>u2' '<u4' '>u4' '<i4' '>i4', "
    "and bf16 as '<V2' or '|V2'";
constexpr std::string_view kHeaderExample =
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
constexpr int kMaxNesting = 32;  // bounds the parser's recursion on hostile input

struct DescrInfo {
  std::string_view descr;
  DType dtype;
  bool big_endian;
};

constexpr DescrInfo kDescrs[] = {
    {"<f4", DType::f32, false},  {">f4", DType::f32, true},   {"<f2", DType::f16, false},
    {">f2", DType::f16, true},   {"<f8", DType::f64, false},  {">f8", DType::f64, true},
    {"|u1", DType::u8, false},   {"<u1", DType::u8, false},   {">u1", DType::u8, false},
    {"<u2", DType::u16, false},  {">u2", DType::u16, true},   {"<u4", DType::u32, false},
    {">u4", DType::u32, true},   {"<i4", DType::i32, false},  {">i4", DType::i32, true},
    {"|V2", DType::bf16, false}, {"<V2", DType::bf16, false},
};

std::string_view write_descr(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<V2";  // see the bf16 convention in npy.hpp
    case DType::f64: return "<f8";
    case DType::u8: return "|u1";
    case DType::u16: return "<u2";
    case DType::u32: return "<u4";
    case DType::i32: return "<i4";
  }
  return "?";
}

// ---- the header: a restricted Python literal ---------------------------------
// numpy parses the header with ast.literal_eval. We accept the subset that
// can appear in one: dicts, tuples, lists, strings, integers, True/False/None.

struct PyEntry;

struct PyValue {
  enum class Kind { str, integer, boolean, none, tuple, list, dict };
  Kind kind = Kind::none;
  std::string str;
  int64_t integer = 0;
  bool boolean = false;
  std::vector<PyValue> items;                        // tuple, list
  // A vector of an incomplete element type is allowed (C++17), a pair of
  // one is not: libstdc++'s std::pair<PyValue, PyValue> fails under clang.
  std::vector<PyEntry> entries;  // dict
};

struct PyEntry {
  PyValue key;
  PyValue value;
};

// repr output is already printable (strings go through printable()); this
// only bounds its length.
std::string shorten(std::string s, size_t max_len) {
  if (s.size() > max_len) s = s.substr(0, max_len) + "...";
  return s;
}

std::string repr(const PyValue& v) {
  switch (v.kind) {
    case PyValue::Kind::str: return fmt::format("'{}'", printable(v.str, 48));
    case PyValue::Kind::integer: return std::to_string(v.integer);
    case PyValue::Kind::boolean: return v.boolean ? "True" : "False";
    case PyValue::Kind::none: return "None";
    case PyValue::Kind::tuple:
    case PyValue::Kind::list: {
      std::string s = v.kind == PyValue::Kind::tuple ? "(" : "[";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) s += ", ";
        s += repr(v.items[i]);
      }
      if (v.kind == PyValue::Kind::tuple && v.items.size() == 1) s += ",";
      s += v.kind == PyValue::Kind::tuple ? ")" : "]";
      return s;
    }
    case PyValue::Kind::dict: {
      std::string s = "{";
      for (size_t i = 0; i < v.entries.size(); ++i) {
        if (i) s += ", ";
        s += repr(v.entries[i].key) + ": " + repr(v.entries[i].value);
      }
      return s + "}";
    }
  }
  return "?";
}

class LiteralParser {
 public:
  LiteralParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  PyValue parse_all() {
    PyValue v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw InputError(fmt::format(
        "'{}': header is not a valid Python dict literal: {} at byte {} of the header "
        "(near \"{}\"); an npy header looks like {}",
        file_, what, pos_, printable(text_.substr(std::min(pos_, text_.size()), 24), 24),
        kHeaderExample));
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void expect(char c, std::string_view what) {
    skip_space();
    if (!at(c)) fail(fmt::format("expected {}", what));
    ++pos_;
  }

  PyValue parse_value(int depth) {
    if (depth > kMaxNesting) fail("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of header");
    const char c = text_[pos_];
    if (c == '{') return parse_dict(depth);
    if (c == '(') return parse_sequence(depth, ')', PyValue::Kind::tuple);
    if (c == '[') return parse_sequence(depth, ']', PyValue::Kind::list);
    if (c == '\'' || c == '"') return parse_string();
    if (c == '-' || (c >= '0' && c <= '9')) return parse_integer();
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return parse_name();
    fail(fmt::format("unexpected character '{}'", printable(text_.substr(pos_, 1))));
  }

  PyValue parse_dict(int depth) {
    PyValue v;
    v.kind = PyValue::Kind::dict;
    ++pos_;  // '{'
    for (;;) {
      skip_space();
      if (at('}')) {
        ++pos_;
        return v;
      }
      PyValue key = parse_value(depth + 1);
      expect(':', "':' after a dict key");
      PyValue value = parse_value(depth + 1);
      v.entries.push_back({std::move(key), std::move(value)});
      skip_space();
      if (at(',')) {
        ++pos_;
      } else if (!at('}')) {
        fail("expected ',' or '}' in the dict");
      }
    }
  }

  // "(x)" without a comma is x itself, as in Python; "(x,)" is a tuple.
  PyValue parse_sequence(int depth, char close, PyValue::Kind kind) {
    PyValue v;
    v.kind = kind;
    ++pos_;  // '(' or '['
    bool saw_comma = false;
    for (;;) {
      skip_space();
      if (at(close)) {
        ++pos_;
        break;
      }
      v.items.push_back(parse_value(depth + 1));
      skip_space();
      if (at(',')) {
        ++pos_;
        saw_comma = true;
      } else if (!at(close)) {
        fail(fmt::format("expected ',' or '{}'", close));
      }
    }
    if (kind == PyValue::Kind::tuple && v.items.size() == 1 && !saw_comma) {
      return std::move(v.items[0]);
    }
    return v;
  }

  PyValue parse_string() {
    const char quote = text_[pos_++];
    PyValue v;
    v.kind = PyValue::Kind::str;
    for (;;) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail("unterminated string");
      const char c = text_[pos_++];
      if (c == quote) return v;
      if (c == '\\') {
        if (pos_ >= text_.size()) fail("unterminated string");
        const char e = text_[pos_++];
        switch (e) {
          case 'n': v.str += '\n'; break;
          case 't': v.str += '\t'; break;
          case 'r': v.str += '\r'; break;
          case '0': v.str += '\0'; break;
          case '\\': case '\'': case '"': v.str += e; break;
          default: fail(fmt::format("unsupported escape '\\{}' in a string",
                                    printable(std::string_view(&e, 1))));
        }
      } else {
        v.str += c;
      }
    }
  }

  PyValue parse_integer() {
    PyValue v;
    v.kind = PyValue::Kind::integer;
    bool negative = false;
    if (at('-')) {
      negative = true;
      ++pos_;
    }
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') fail("expected a digit");
    // Accumulate as a negative number so INT64_MIN parses too.
    int64_t n = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_] - '0';
      if (__builtin_mul_overflow(n, int64_t{10}, &n) || __builtin_sub_overflow(n, digit, &n)) {
        fail("integer does not fit in 64 bits");
      }
      ++pos_;
    }
    if (!negative) {
      if (n == INT64_MIN) fail("integer does not fit in 64 bits");
      n = -n;
    }
    if (at('L')) ++pos_;  // Python 2 long suffix, found in old files
    if (at('.') || at('e') || at('E')) fail("expected an integer, found a float");
    v.integer = n;
    return v;
  }

  PyValue parse_name() {
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '_')) {
      ++pos_;
    }
    const std::string_view name = text_.substr(start, pos_ - start);
    PyValue v;
    if (name == "True" || name == "False") {
      v.kind = PyValue::Kind::boolean;
      v.boolean = name == "True";
      return v;
    }
    if (name == "None") return v;
    pos_ = start;
    fail(fmt::format("unknown name '{}' (only True, False and None are allowed)",
                     printable(name)));
  }

  std::string_view text_;
  const std::string& file_;
  size_t pos_ = 0;
};

// ---- header fields -----------------------------------------------------------

struct Header {
  std::string descr;
  DType dtype = DType::f32;
  bool big_endian = false;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

DescrInfo interpret_descr(const PyValue& v, const std::string& file) {
  if (v.kind == PyValue::Kind::list) {
    throw InputError(fmt::format(
        "'{}': header 'descr' is {}: structured (record) dtypes are not supported; save each "
        "field as its own plain array (np.save(path, x['field']))",
        file, shorten(repr(v), 80)));
  }
  if (v.kind != PyValue::Kind::str) {
    throw InputError(fmt::format("'{}': header 'descr' is {}: expected a dtype string, one of {}",
                                 file, shorten(repr(v), 80), kSupportedDescrs));
  }
  for (const DescrInfo& d : kDescrs) {
    if (d.descr == v.str) return d;
  }
  std::string_view s = v.str;
  if (s == "|O" || s == "O" || s == "<O" || s == ">O") {
    throw InputError(fmt::format(
        "'{}': header 'descr' is '{}': object arrays (pickled Python objects) are not "
        "supported; save a numeric array, e.g. np.save(path, np.asarray(x, dtype=np.float32))",
        file, printable(s)));
  }
  // '>V2' is refused rather than guessed: void data has no byte order, so a
  // writer that put one there did not follow the '<V2' convention.
  const std::string_view hint =
      s == ">V2" ? " ('>V2' is not read as bf16: bf16 is '<V2' or '|V2', little-endian)"
                 : "; convert with x.astype(np.float32) before np.save";
  throw InputError(fmt::format("'{}': header 'descr' is '{}': unsupported dtype; supported: {}{}",
                               file, printable(s), kSupportedDescrs, hint));
}

Header interpret_header(const PyValue& dict, const std::string& file) {
  if (dict.kind != PyValue::Kind::dict) {
    throw InputError(fmt::format(
        "'{}': header is {}, not a dict; an npy header looks like {}", file,
        shorten(repr(dict), 80), kHeaderExample));
  }
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& [key, value] : dict.entries) {
    const PyValue** slot = nullptr;
    if (key.kind == PyValue::Kind::str) {
      if (key.str == "descr") slot = &descr;
      if (key.str == "fortran_order") slot = &fortran;
      if (key.str == "shape") slot = &shape;
    }
    if (slot == nullptr) {
      throw InputError(fmt::format(
          "'{}': header has an unexpected key {}; an npy header has exactly the keys 'descr', "
          "'fortran_order' and 'shape'",
          file, shorten(repr(key), 60)));
    }
    if (*slot != nullptr) {
      throw InputError(fmt::format("'{}': header key {} appears twice; it must appear once", file,
                                   repr(key)));
    }
    *slot = &value;
  }
  for (auto [ptr, name] : {std::pair{descr, "descr"}, std::pair{fortran, "fortran_order"},
                           std::pair{shape, "shape"}}) {
    if (ptr == nullptr) {
      throw InputError(fmt::format(
          "'{}': header is missing the key '{}'; an npy header looks like {}", file, name,
          kHeaderExample));
    }
  }

  Header h;
  const DescrInfo info = interpret_descr(*descr, file);
  h.descr = std::string(info.descr);
  h.dtype = info.dtype;
  h.big_endian = info.big_endian;

  if (fortran->kind != PyValue::Kind::boolean) {
    throw InputError(fmt::format("'{}': header 'fortran_order' is {}: expected True or False",
                                 file, shorten(repr(*fortran), 60)));
  }
  h.fortran_order = fortran->boolean;

  if (shape->kind != PyValue::Kind::tuple) {
    throw InputError(fmt::format(
        "'{}': header 'shape' is {}: expected a tuple of non-negative integers, e.g. (2, 3), "
        "(5,) or () for a scalar",
        file, shorten(repr(*shape), 80)));
  }
  for (const PyValue& d : shape->items) {
    if (d.kind != PyValue::Kind::integer || d.integer < 0) {
      throw InputError(fmt::format(
          "'{}': header 'shape' is {}: dim {} is not a non-negative integer", file,
          shorten(repr(*shape), 80), shorten(repr(d), 40)));
    }
    h.shape.push_back(d.integer);
  }
  return h;
}

// numpy's tuple repr: "()", "(3,)", "(2, 3)".
std::string shape_repr(std::span<const int64_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

void byteswap_elements(std::vector<uint8_t>& bytes, size_t esize) {
  for (size_t i = 0; i + esize <= bytes.size(); i += esize) {
    std::reverse(bytes.begin() + static_cast<ptrdiff_t>(i),
                 bytes.begin() + static_cast<ptrdiff_t>(i + esize));
  }
}

// Fortran order stores dim 0 fastest; walk the C-order index and gather.
std::vector<uint8_t> fortran_to_c(const std::vector<uint8_t>& src,
                                  const std::vector<int64_t>& shape, size_t esize) {
  const size_t rank = shape.size();
  if (src.empty() || rank < 2) return src;
  std::vector<uint8_t> dst(src.size());
  std::vector<int64_t> fstride(rank);
  int64_t s = 1;
  for (size_t k = 0; k < rank; ++k) {
    fstride[k] = s;
    s *= shape[k];
  }
  std::vector<int64_t> idx(rank, 0);
  const size_t n = src.size() / esize;
  int64_t foff = 0;  // element offset in the Fortran-order source
  for (size_t c = 0; c < n; ++c) {
    std::memcpy(&dst[c * esize], &src[static_cast<size_t>(foff) * esize], esize);
    // Increment the C index (last dim fastest), keeping foff in step.
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < shape[k]) {
        foff += fstride[k];
        break;
      }
      foff -= fstride[k] * (idx[k] - 1);
      idx[k] = 0;
    }
  }
  return dst;
}

[[noreturn]] void not_npy(const std::string& file, std::string_view head) {
  std::string what;
  if (head.size() >= 2 && head[0] == 'P' && head[1] == 'K') {
    what = " It is a zip archive: a numpy .npz (extract arrays with np.load(path)[name] and "
           "np.save each one) or a PyTorch .pt/.pth file (not supported: save the tensors with "
           "safetensors.torch.save_file(...)).";
  } else if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x80 &&
             head[1] >= 2 && head[1] <= 5) {
    what = " It looks like a Python pickle (PyTorch .pt/.pth/.bin?): PyTorch pickle files are "
           "not supported: save the tensors with safetensors.torch.save_file(...).";
  }
  throw InputError(fmt::format(
      "'{}': not an npy file: the magic bytes are \"{}\", expected \"\\x93NUMPY\" (a file "
      "written by np.save).{}",
      file, printable(head.substr(0, 6)), what));
}

}  // namespace

Array read_npy(const std::filesystem::path& path) {
  const detail::InputFile f(path);
  const std::string& file = f.name();

  char pre[12] = {};
  const size_t head_len = static_cast<size_t>(std::min<uint64_t>(f.size(), sizeof pre));
  f.read(0, pre, head_len);
  const std::string_view head(pre, head_len);
  if (f.size() == 0) {
    throw InputError(fmt::format("'{}': not an npy file: the file is empty (magic bytes "
                                 "\"\\x93NUMPY\" expected)",
                                 file));
  }
  if (head_len < 6 || std::memcmp(pre, kMagic, 6) != 0) not_npy(file, head);
  if (head_len < 8) {
    throw InputError(fmt::format("'{}': truncated header: the file ends after {} bytes, inside "
                                 "the version field; the file is incomplete",
                                 file, head_len));
  }
  const int major = static_cast<unsigned char>(pre[6]);
  const int minor = static_cast<unsigned char>(pre[7]);
  if (!((major == 1 || major == 2 || major == 3) && minor == 0)) {
    throw InputError(fmt::format(
        "'{}': header 'version' is {}.{}: supported npy versions are 1.0, 2.0 and 3.0", file,
        major, minor));
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t preamble = 8 + len_bytes;
  if (head_len < preamble) {
    throw InputError(fmt::format(
        "'{}': truncated header: the file is {} bytes but an npy {}.0 preamble needs {}; the "
        "file is incomplete",
        file, f.size(), major, preamble));
  }
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) {
    header_len |= static_cast<uint64_t>(static_cast<unsigned char>(pre[8 + i])) << (8 * i);
  }
  if (header_len > f.size() - preamble) {
    throw InputError(fmt::format(
        "'{}': truncated header: header 'length' says {} bytes but only {} bytes follow the "
        "preamble; the file is incomplete or not an npy file",
        file, header_len, f.size() - preamble));
  }
  std::string text(static_cast<size_t>(header_len), '\0');
  f.read(preamble, text.data(), text.size());

  const PyValue dict = LiteralParser(text, file).parse_all();
  const Header h = interpret_header(dict, file);

  const auto nbytes = checked_byte_size(h.shape, h.dtype);
  if (!nbytes) {
    throw InputError(fmt::format(
        "'{}': header 'shape' is {}: its element count times {} bytes overflows 64 bits; the "
        "header is corrupt",
        file, shape_repr(h.shape), dtype_size(h.dtype)));
  }
  const uint64_t data_offset = preamble + header_len;
  const uint64_t available = f.size() - data_offset;
  if (static_cast<uint64_t>(*nbytes) > available) {
    throw InputError(fmt::format(
        "'{}': data is shorter than header 'shape' {} implies: {} elements of '{}' need {} "
        "bytes, the file has {} bytes after the header; the file is truncated",
        file, shape_repr(h.shape), *nbytes / static_cast<int64_t>(dtype_size(h.dtype)),
        h.descr,
        *nbytes, available));
  }

  Array a;
  a.dtype = h.dtype;
  a.shape = h.shape;
  a.bytes.resize(static_cast<size_t>(*nbytes));
  f.read(data_offset, a.bytes.data(), a.bytes.size());
  if (h.big_endian) byteswap_elements(a.bytes, dtype_size(h.dtype));
  if (h.fortran_order) a.bytes = fortran_to_c(a.bytes, a.shape, dtype_size(h.dtype));
  return a;
}

std::string encode_npy_header(DType dtype, std::span<const int64_t> shape) {
  // Same text, key order and padding as numpy >= 1.24's _write_array_header:
  // 21 - len(str(shape[0])) growth spaces, then spaces to a 64-byte boundary
  // (1..64 of them) and '\n'.
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", write_descr(dtype),
                                   shape_repr(shape));
  if (!shape.empty()) {
    header.append(21 - std::to_string(shape[0]).size(), ' ');
  }
  const size_t hlen = header.size() + 1;
  size_t len_bytes = 2;
  size_t padlen = 64 - (6 + 2 + len_bytes + hlen) % 64;
  int major = 1;
  if (hlen + padlen > 0xFFFF) {
    major = 2;
    len_bytes = 4;
    padlen = 64 - (6 + 2 + len_bytes + hlen) % 64;
  }
  const uint64_t total_header = hlen + padlen;

  std::string head(kMagic, sizeof kMagic);
  head += static_cast<char>(major);
  head += '\0';
  for (size_t i = 0; i < len_bytes; ++i) head += static_cast<char>((total_header >> (8 * i)) & 0xFF);
  head += header;
  head.append(padlen, ' ');
  head += '\n';
  return head;
}

std::vector<uint8_t> encode_npy(const Array& array) {
  check_consistent(array, "encode_npy");
  const std::string head = encode_npy_header(array.dtype, array.shape);
  std::vector<uint8_t> out(head.size() + array.bytes.size());
  std::memcpy(out.data(), head.data(), head.size());
  if (!array.bytes.empty()) {
    std::memcpy(out.data() + head.size(), array.bytes.data(), array.bytes.size());
  }
  return out;
}

void write_npy(const std::filesystem::path& path, const Array& array) {
  check_consistent(array, fmt::format("writing '{}'", path.string()));
  write_npy(path, array.dtype, array.shape, array.bytes);
}

void write_npy(const std::filesystem::path& path, DType dtype, std::span<const int64_t> shape,
               std::span<const uint8_t> bytes) {
  const std::optional<int64_t> size = checked_byte_size(shape, dtype);
  if (!size || static_cast<uint64_t>(*size) != bytes.size())
    throw std::invalid_argument(fmt::format("writing '{}': {} bytes do not hold a {} array of shape {}",
                                            path.string(), bytes.size(), dtype_name(dtype), shape_string(shape)));
  // Header and data go to the file one after the other: no file-sized buffer
  // joins them (a fake-quant output is written from where the kernel left it).
  const std::string head = encode_npy_header(dtype, shape);
  AtomicFileWriter out(path);
  out.write({reinterpret_cast<const uint8_t*>(head.data()), head.size()});
  out.write(bytes);
  out.commit();
}

}  // namespace fp4emu::io
