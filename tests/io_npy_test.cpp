// .npy reader/writer, the Array helpers and atomic file writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "io_test_util.hpp"
#include "fp4emu/io/array.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/npy.hpp"

namespace fs = std::filesystem;
using namespace fp4emu::io;
using fp4emu::InputError;

namespace {

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            fmt::format("fp4emu_io_npy_test_{}_{:08x}", ::getpid(), rd());
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(std::string_view name) const { return path_ / name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename());
    return out;
  }

 private:
  fs::path path_;
};

using fp4emu::testing::expect_input_error;
using fp4emu::testing::read_bytes;
using fp4emu::testing::write_bytes;

// A hand-made .npy: magic, version, length, the header text padded with
// spaces to a 64-byte boundary and '\n', then data.
std::string npy_bytes(std::string_view header, std::string_view data, int major = 1) {
  const size_t len_bytes = major == 1 ? 2 : 4;
  std::string h(header);
  const size_t unpadded = 8 + len_bytes + h.size() + 1;
  h.append((64 - unpadded % 64) % 64, ' ');
  h += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xFF);
  out += h;
  out += data;
  return out;
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}
std::string le32(uint32_t v) {
  return {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
          static_cast<char>(v >> 24)};
}
std::string le16(uint16_t v) { return {static_cast<char>(v), static_cast<char>(v >> 8)}; }
std::string be16(uint16_t v) { return {static_cast<char>(v >> 8), static_cast<char>(v)}; }

const DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                            DType::u8,  DType::u16, DType::u32,  DType::i32};
const std::vector<std::vector<int64_t>> kShapesByRank = {{}, {5}, {2, 3}, {2, 1, 3}, {2, 3, 1, 2}};

Array patterned(DType dtype, std::vector<int64_t> shape) {
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes.resize(static_cast<size_t>(a.numel()) * dtype_size(dtype));
  for (size_t i = 0; i < a.bytes.size(); ++i) a.bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  return a;
}

}  // namespace

// ---- round trips ---------------------------------------------------------------

TEST(NpyIo, RoundTripsEveryDtypeAndRank) {
  TempDir dir;
  for (DType dtype : kAllDTypes) {
    for (const auto& shape : kShapesByRank) {
      SCOPED_TRACE(fmt::format("{} rank {}", dtype_name(dtype), shape.size()));
      const Array a = patterned(dtype, shape);
      const fs::path p = dir / fmt::format("{}_{}.npy", dtype_name(dtype), shape.size());
      write_npy(p, a);
      const Array b = read_npy(p);
      EXPECT_EQ(b.dtype, a.dtype);
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.bytes, a.bytes);
      // Data starts on a 64-byte boundary, as numpy requires.
      EXPECT_EQ((fs::file_size(p) - a.bytes.size()) % 64, 0u);
    }
  }
}

TEST(NpyIo, RoundTripsZeroSizedArrays) {
  TempDir dir;
  const Array a = patterned(DType::f32, {0, 3});
  write_npy(dir / "z.npy", a);
  const Array b = read_npy(dir / "z.npy");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(b.bytes.empty());
}

TEST(NpyIo, WritesNumpyHeaderText) {
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const std::vector<uint8_t> bytes = encode_npy(from_f32({2, 3}, v));
  const std::string s(bytes.begin(), bytes.end());
  EXPECT_EQ(s.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t hlen = static_cast<uint8_t>(s[8]) | (static_cast<uint8_t>(s[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  const std::string header = s.substr(10, hlen);
  // numpy >= 1.24 text, with 21 - len("2") growth spaces before the padding.
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                             std::string(20, ' '),
                         0),
            0u);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(s.size(), 10 + hlen + 24);

  const std::string bf = [] {
    const uint16_t bits[] = {0x3F80};
    const auto b = encode_npy(from_bf16_bits({1}, bits));
    return std::string(b.begin(), b.end());
  }();
  EXPECT_NE(bf.find("{'descr': '<V2', 'fortran_order': False, 'shape': (1,), }"),
            std::string::npos);
}

// ---- hand-written files -------------------------------------------------------------

TEST(NpyIo, ReadsBigEndian) {
  TempDir dir;
  const fs::path p = dir / "be.npy";
  write_bytes(p, npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                           be32(0x3F800000) + be32(0xC0000000)));
  const Array a = read_npy(p);
  EXPECT_EQ(a.dtype, DType::f32);
  EXPECT_EQ(to_f32(a), (std::vector<float>{1.0f, -2.0f}));

  write_bytes(p, npy_bytes("{'descr': '>u2', 'fortran_order': False, 'shape': (2,), }",
                           be16(0x1234) + be16(0xBEEF)));
  EXPECT_EQ(to_u16(read_npy(p)), (std::vector<uint16_t>{0x1234, 0xBEEF}));

  write_bytes(p, npy_bytes("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
                           be32(0xFFFFFFFE)));
  EXPECT_EQ(to_i32(read_npy(p)), (std::vector<int32_t>{-2}));

  write_bytes(p, npy_bytes("{'descr': '>f2', 'fortran_order': False, 'shape': (), }",
                           be16(0xC100)));  // -2.5
  EXPECT_EQ(to_f32(read_npy(p)), (std::vector<float>{-2.5f}));

  write_bytes(p, npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }",
                           std::string("\x3F\xF8\0\0\0\0\0\0", 8)));  // 1.5
  const Array d = read_npy(p);
  ASSERT_EQ(d.dtype, DType::f64);
  double x;
  std::memcpy(&x, d.bytes.data(), 8);
  EXPECT_EQ(x, 1.5);
}

TEST(NpyIo, ReadsFortranOrder) {
  TempDir dir;
  const fs::path p = dir / "f.npy";
  // C-order [[1, 2, 3], [4, 5, 6]] stored column by column.
  std::string data;
  for (float v : {1.f, 4.f, 2.f, 5.f, 3.f, 6.f}) data += le32(std::bit_cast<uint32_t>(v));
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data));
  const Array a = read_npy(p);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(to_f32(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  // Rank 3, big-endian and Fortran order together: element (i, j, k) holds
  // 100i + 10j + k and sits at Fortran offset i + 2j + 6k.
  std::string fdata(2 * 3 * 4 * 2, '\0');
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) fdata.replace((i + 2 * j + 6 * k) * 2, 2, be16(100 * i + 10 * j + k));
  write_bytes(p, npy_bytes("{'descr': '>u2', 'fortran_order': True, 'shape': (2, 3, 4), }", fdata));
  const std::vector<uint16_t> got = to_u16(read_npy(p));
  ASSERT_EQ(got.size(), 24u);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(got[i * 12 + j * 4 + k], 100 * i + 10 * j + k);
}

TEST(NpyIo, ReadsBf16AsVoid2) {
  TempDir dir;
  const fs::path p = dir / "bf.npy";
  for (std::string_view descr : {"<V2", "|V2"}) {
    SCOPED_TRACE(descr);
    write_bytes(p, npy_bytes(fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (3,), }}",
                                         descr),
                             le16(0x3F80) + le16(0xC040) + le16(0x8000)));
    const Array a = read_npy(p);
    EXPECT_EQ(a.dtype, DType::bf16);
    const std::vector<float> f = to_f32(a);
    EXPECT_EQ(f[0], 1.0f);
    EXPECT_EQ(f[1], -3.0f);
    EXPECT_EQ(std::bit_cast<uint32_t>(f[2]), 0x80000000u);  // -0 kept
  }
}

TEST(NpyIo, ReadsVersion2And3AndOldStyleHeaders) {
  TempDir dir;
  const fs::path p = dir / "v.npy";
  const std::string data = le32(std::bit_cast<uint32_t>(7.0f));
  for (int major : {2, 3}) {
    write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", data,
                             major));
    EXPECT_EQ(to_f32(read_npy(p)), (std::vector<float>{7.0f}));
  }
  // Python 2 longs, double quotes, other key order, no trailing comma.
  write_bytes(p, npy_bytes("{\"shape\": (1L, 1L), 'fortran_order': False, \"descr\": \"<f4\"}",
                           data));
  const Array a = read_npy(p);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 1}));
  // Bytes after the data (np.save appending to one file) are ignored.
  write_bytes(p, npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }",
                           "\x05\x06trailing"));
  EXPECT_EQ(to_u8(read_npy(p)), (std::vector<uint8_t>{5, 6}));
}

// ---- bad input: each names the file and the field ---------------------------

TEST(NpyIo, RejectsBadMagic) {
  TempDir dir;
  const fs::path p = dir / "bad_magic.npy";
  write_bytes(p, "hello world, this is text");
  expect_input_error([&] { read_npy(p); }, {"bad_magic.npy", "not an npy file", "magic"});
  write_bytes(p, "");
  expect_input_error([&] { read_npy(p); }, {"bad_magic.npy", "magic"});
  write_bytes(p, std::string("PK\x03\x04zipzipzip", 12));
  expect_input_error([&] { read_npy(p); }, {"bad_magic.npy", "magic", "zip", ".npz", "PyTorch"});
  write_bytes(p, std::string("\x80\x02\x8a\x0a", 4));
  expect_input_error([&] { read_npy(p); },
                     {"bad_magic.npy", "PyTorch pickle files are not supported: save the tensors "
                                       "with safetensors.torch.save_file(...)"});
}

TEST(NpyIo, RejectsMissingFileAndDirectory) {
  TempDir dir;
  expect_input_error([&] { read_npy(dir / "nope.npy"); }, {"nope.npy", "No such file"});
  expect_input_error([&] { read_npy(dir.path()); }, {dir.path().string(), "directory"});
}

TEST(NpyIo, RejectsTruncatedHeader) {
  TempDir dir;
  const fs::path p = dir / "trunc.npy";
  write_bytes(p, std::string("\x93NUMPY\x01\x00\x76", 9));
  expect_input_error([&] { read_npy(p); }, {"trunc.npy", "truncated header"});
  const std::string full =
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", le32(0));
  write_bytes(p, full.substr(0, 40));
  expect_input_error([&] { read_npy(p); }, {"trunc.npy", "truncated header", "'length'", "118"});
  write_bytes(p, std::string("\x93NUMPY\x04\x00\x00\x00", 10));
  expect_input_error([&] { read_npy(p); }, {"trunc.npy", "'version'", "4.0", "1.0, 2.0 and 3.0"});
}

TEST(NpyIo, RejectsHeaderThatIsNotADictLiteral) {
  TempDir dir;
  const fs::path p = dir / "dict.npy";
  for (std::string_view header : {
           "{'descr': '<f4' 'fortran_order': False, 'shape': (1,), }",  // missing comma
           "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ",  // unclosed
           "{'descr: '<f4', 'fortran_order': False, 'shape': (1,), }",  // unterminated string
           "{'descr': '<f4', 'fortran_order': false, 'shape': (1,), }",  // not Python
           "{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,), }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk",
           "",
       }) {
    SCOPED_TRACE(header);
    write_bytes(p, npy_bytes(header, le32(0)));
    expect_input_error([&] { read_npy(p); },
                       {"dict.npy", "header is not a valid Python dict literal", "'descr'"});
  }
  // Deep nesting is refused, not recursed into.
  write_bytes(p, npy_bytes(std::string(5000, '(') + std::string(5000, ')'), ""));
  expect_input_error([&] { read_npy(p); }, {"dict.npy", "nesting too deep"});
  write_bytes(p, npy_bytes("['descr', '<f4']", ""));
  expect_input_error([&] { read_npy(p); }, {"dict.npy", "not a dict"});
}

TEST(NpyIo, RejectsMissingOrUnknownKeys) {
  TempDir dir;
  const fs::path p = dir / "keys.npy";
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, }", le32(0)));
  expect_input_error([&] { read_npy(p); }, {"keys.npy", "missing the key 'shape'"});
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                           le32(0)));
  expect_input_error([&] { read_npy(p); }, {"keys.npy", "unexpected key 'x'"});
  write_bytes(p, npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                           "'shape': (1,)}",
                           le32(0)));
  expect_input_error([&] { read_npy(p); }, {"keys.npy", "'descr'", "twice"});
}

TEST(NpyIo, RejectsUnsupportedDescr) {
  TempDir dir;
  const fs::path p = dir / "descr.npy";
  write_bytes(p, npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                           std::string(8, '\0')));
  expect_input_error([&] { read_npy(p); },
                     {"descr.npy", "header 'descr'", "'<c8'", "'<f4'", "'<V2'", "'>i4'"});
  write_bytes(p, npy_bytes("{'descr': '>V2', 'fortran_order': False, 'shape': (1,), }", "\0\0"));
  expect_input_error([&] { read_npy(p); }, {"descr.npy", "header 'descr'", "'>V2'"});
  write_bytes(p, npy_bytes("{'descr': 3, 'fortran_order': False, 'shape': (1,), }", "\0\0"));
  expect_input_error([&] { read_npy(p); }, {"descr.npy", "header 'descr'", "3"});
}

TEST(NpyIo, RejectsObjectAndStructuredArrays) {
  TempDir dir;
  const fs::path p = dir / "obj.npy";
  write_bytes(p, npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }",
                           "\x80\x02]q\x00."));
  expect_input_error([&] { read_npy(p); }, {"obj.npy", "header 'descr'", "'|O'", "object arrays"});
  write_bytes(p, npy_bytes("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, "
                           "'shape': (1,), }",
                           std::string(8, '\0')));
  expect_input_error([&] { read_npy(p); }, {"obj.npy", "header 'descr'", "structured"});
}

TEST(NpyIo, RejectsBadShapeAndFortranOrder) {
  TempDir dir;
  const fs::path p = dir / "shape.npy";
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", ""));
  expect_input_error([&] { read_npy(p); }, {"shape.npy", "header 'shape'", "-3"});
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", ""));
  expect_input_error([&] { read_npy(p); }, {"shape.npy", "header 'shape'", "[2, 3]", "tuple"});
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", ""));
  expect_input_error([&] { read_npy(p); }, {"shape.npy", "header 'shape'", "tuple"});
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }", ""));
  expect_input_error([&] { read_npy(p); }, {"shape.npy", "header 'fortran_order'", "True or False"});
}

TEST(NpyIo, RejectsShapeProductOverflow) {
  TempDir dir;
  const fs::path p = dir / "overflow.npy";
  // 2^32 * 2^32 elements: the element count alone overflows int64.
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (4294967296, 4294967296), }",
                           ""));
  expect_input_error([&] { read_npy(p); }, {"overflow.npy", "header 'shape'", "overflows"});
  // 2^62 elements fit in int64, their 4-byte size does not.
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (4611686018427387904,), }",
                           ""));
  expect_input_error([&] { read_npy(p); }, {"overflow.npy", "header 'shape'", "overflows"});
}

TEST(NpyIo, RejectsDataShorterThanShape) {
  TempDir dir;
  const fs::path p = dir / "short.npy";
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                           std::string(8, '\0')));
  expect_input_error([&] { read_npy(p); },
                     {"short.npy", "'shape'", "(2, 2)", "need 16 bytes", "has 8 bytes"});
  // A huge shape with a tiny file: refused before allocating.
  write_bytes(p, npy_bytes("{'descr': '<f8', 'fortran_order': False, "
                           "'shape': (1000000000000,), }",
                           std::string(8, '\0')));
  expect_input_error([&] { read_npy(p); }, {"short.npy", "need 8000000000000 bytes"});
}

// ---- Array helpers -------------------------------------------------------------

TEST(NpyArray, F16WidensExactlyForEveryBitPattern) {
  std::vector<uint16_t> bits(65536);
  for (uint32_t i = 0; i < 65536; ++i) bits[i] = static_cast<uint16_t>(i);
  const std::vector<float> f = to_f32(from_f16_bits({65536}, bits));
  for (uint32_t h = 0; h < 65536; ++h) {
    // Independent oracle: the f16 definition evaluated in double.
    const int e = (h >> 10) & 0x1F;
    const int m = h & 0x3FF;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0x1F) {
      if (m == 0) {
        EXPECT_EQ(f[h], static_cast<float>(sign * INFINITY)) << h;
      } else {
        EXPECT_TRUE(std::isnan(f[h])) << h;
        EXPECT_EQ(std::bit_cast<uint32_t>(f[h]),
                  ((h & 0x8000u) << 16) | 0x7F800000u | (static_cast<uint32_t>(m) << 13))
            << h;
      }
      continue;
    }
    const double v = e == 0 ? sign * std::ldexp(m, -24) : sign * std::ldexp(1024 + m, e - 25);
    EXPECT_EQ(std::bit_cast<uint32_t>(f[h]), std::bit_cast<uint32_t>(static_cast<float>(v)))
        << h;
  }
}

TEST(NpyArray, Bf16WidensExactly) {
  const uint16_t bits[] = {0x0000, 0x8000, 0x3F80, 0x0001, 0x7F80, 0xFF81, 0x4049};
  const std::vector<float> f = to_f32(from_bf16_bits({7}, bits));
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(f[i]), static_cast<uint32_t>(bits[i]) << 16);
  }
}

TEST(NpyArray, ToF32RefusesF64AndIntegers) {
  const double d[] = {1.0};
  expect_input_error([&] { to_f32(from_f64({1}, d), "acts.npy"); },
                     {"acts.npy", "fp64 input: convert to fp32 first"});
  const uint16_t u[] = {0x3F80};
  expect_input_error([&] { to_f32(from_u16({1}, u), "x.npy"); }, {"x.npy", "u16", "bf16"});
  const uint8_t b[] = {1};
  expect_input_error([&] { to_f32(from_u8({1}, b), "c.npy"); }, {"c.npy", "u8", "not a float"});
  // Relabelling u16 bit patterns as bf16 is the documented way in.
  EXPECT_EQ(to_f32(reinterpret_dtype(from_u16({1}, u), DType::bf16)), (std::vector<float>{1.0f}));
  expect_input_error([&] { reinterpret_dtype(from_u8({1}, b), DType::bf16, "c.npy"); },
                     {"c.npy", "u8", "bf16"});
  expect_input_error([&] { to_u32(from_u8({1}, b), "c.npy"); }, {"c.npy", "expected a u32"});
}

TEST(NpyArray, SizesAndNames) {
  for (DType d : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_FALSE(parse_dtype("f8").has_value());
  EXPECT_EQ(checked_byte_size(std::vector<int64_t>{}, DType::f64), 8);
  EXPECT_EQ(checked_byte_size(std::vector<int64_t>{3, 0}, DType::f32), 0);
  EXPECT_FALSE(checked_byte_size(std::vector<int64_t>{INT64_MAX / 2 + 1}, DType::u16));
  EXPECT_FALSE(checked_byte_size(std::vector<int64_t>{-1}, DType::u8));
  const float v[] = {1, 2, 3};
  EXPECT_THROW(from_f32({2, 2}, v), std::invalid_argument);
  Array bad = from_f32({3}, v);
  bad.bytes.pop_back();
  EXPECT_THROW(encode_npy(bad), std::invalid_argument);
}

// ---- atomic writes ---------------------------------------------------------------

TEST(AtomicFile, WritesAndReplacesLeavingNoTemporaries) {
  TempDir dir;
  const fs::path p = dir / "out.bin";
  const std::vector<uint8_t> first = {1, 2, 3};
  write_file_atomic(p, first);
  EXPECT_EQ(read_bytes(p), std::string("\x01\x02\x03", 3));
  const std::vector<uint8_t> second(1000, 7);
  write_file_atomic(p, second);
  EXPECT_EQ(read_bytes(p), std::string(1000, '\x07'));
  write_file_atomic(p, {});
  EXPECT_EQ(fs::file_size(p), 0u);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, MissingDirectoryThrowsAndLeavesNothing) {
  TempDir dir;
  const fs::path p = dir / "no_such_dir" / "out.npy";
  const float v[] = {1};
  expect_input_error([&] { write_npy(p, from_f32({1}, v)); },
                     {p.string(), "no_such_dir", "does not exist"});
  EXPECT_FALSE(fs::exists(dir / "no_such_dir"));
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicFile, DestinationIsADirectoryThrowsAndKeepsIt) {
  TempDir dir;
  fs::create_directory(dir / "sub");
  write_bytes(dir / "sub" / "keep.txt", "keep");
  const std::vector<uint8_t> bytes = {1};
  expect_input_error([&] { write_file_atomic(dir / "sub", bytes); }, {"sub", "directory"});
  EXPECT_EQ(read_bytes(dir / "sub" / "keep.txt"), "keep");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"sub"});
}

// ---- cross-check with numpy -------------------------------------------------------

namespace {

// A python3 that can import numpy, or "" (the PATH's python3 may be a
// virtualenv without it while the system one has it).
std::string python_with_numpy() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string cmd = fmt::format("{} -c \"import numpy\" >/dev/null 2>&1", py);
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

}  // namespace

TEST(NpyIo, AgreesWithNumpy) {
  const std::string py = python_with_numpy();
  if (py.empty()) GTEST_SKIP() << "python3 with numpy not available";
  TempDir dir;
  const fs::path d = dir.path();

  // What we write, numpy must read (bf16 through the '<V2' convention).
  const std::vector<float> f = {1.5f, -2.0f, 0.0f, 3.25f, -0.5f, 1e-3f};
  write_npy(d / "ours_f32.npy", from_f32({2, 3}, f));
  const uint16_t bf[] = {0x3F80, 0xC040, 0x7F80};
  write_npy(d / "ours_bf16.npy", from_bf16_bits({3}, bf));
  const int32_t i0[] = {-7};
  write_npy(d / "ours_i32.npy", from_i32({}, i0));

  const std::string script = R"PY(
import sys, numpy as np
d = sys.argv[1]
a = np.load(d + '/ours_f32.npy')
assert a.dtype == np.float32 and a.shape == (2, 3), (a.dtype, a.shape)
assert a.tolist() == [[1.5, -2.0, 0.0], [3.25, -0.5, float(np.float32(1e-3))]], a
b = np.load(d + '/ours_bf16.npy').view('<u2')
assert b.tolist() == [0x3F80, 0xC040, 0x7F80], b
c = np.load(d + '/ours_i32.npy')
assert c.shape == () and c.dtype == np.int32 and int(c) == -7
np.save(d + '/np_f32.npy', np.array([[1.5, -2.0, 0.0], [3.25, -0.5, 1e-3]], dtype='<f4'))
np.save(d + '/np_i32.npy', np.array(-7, dtype='<i4'))
np.save(d + '/np_u8.npy', np.arange(10, dtype=np.uint8))
np.save(d + '/np_be.npy', np.arange(6, dtype='>f4').reshape(2, 3))
np.save(d + '/np_fortran.npy', np.asfortranarray(np.arange(24, dtype='<f2').reshape(2, 3, 4)))
np.save(d + '/np_be_fortran_u4.npy', np.asfortranarray(np.arange(24, dtype='>u4').reshape(4, 6)))
np.save(d + '/np_f64.npy', np.array([0.1], dtype='<f8'))
print('ok')
)PY";
  write_bytes(d / "check.py", script);
  const std::string cmd = fmt::format("{} '{}' '{}' > '{}' 2>&1", py, (d / "check.py").string(),
                                      d.string(), (d / "py.log").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_bytes(d / "py.log");

  // Byte-identical files for the same arrays.
  EXPECT_EQ(read_bytes(d / "ours_f32.npy"), read_bytes(d / "np_f32.npy"));
  EXPECT_EQ(read_bytes(d / "ours_i32.npy"), read_bytes(d / "np_i32.npy"));

  EXPECT_EQ(to_u8(read_npy(d / "np_u8.npy")),
            (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(to_f32(read_npy(d / "np_be.npy")), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  const Array fo = read_npy(d / "np_fortran.npy");
  EXPECT_EQ(fo.dtype, DType::f16);
  EXPECT_EQ(fo.shape, (std::vector<int64_t>{2, 3, 4}));
  const std::vector<float> fv = to_f32(fo);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(fv[i], static_cast<float>(i));
  const std::vector<uint32_t> uv = to_u32(read_npy(d / "np_be_fortran_u4.npy"));
  for (uint32_t i = 0; i < 24; ++i) EXPECT_EQ(uv[i], i);
  EXPECT_EQ(read_npy(d / "np_f64.npy").dtype, DType::f64);
}
