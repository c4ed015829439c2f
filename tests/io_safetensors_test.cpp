// .safetensors reader and writer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "io_test_util.hpp"
#include "fp4emu/io/array.hpp"
#include "fp4emu/io/safetensors.hpp"

namespace fs = std::filesystem;
using namespace fp4emu::io;
using fp4emu::InputError;

namespace {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            fmt::format("fp4emu_io_st_test_{}_{:08x}", ::getpid(), rd());
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(std::string_view name) const { return path_ / name; }
  size_t count() const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(path_), fs::directory_iterator()));
  }

 private:
  fs::path path_;
};

using fp4emu::testing::expect_input_error;
using fp4emu::testing::read_bytes;
using fp4emu::testing::write_bytes;

// A hand-made file: u64 LE length, the header text as given, then data.
std::string st_bytes(std::string_view header, std::string_view data) {
  std::string out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  out += header;
  out += data;
  return out;
}

const DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                            DType::u8,  DType::u16, DType::u32,  DType::i32};
const std::vector<std::vector<int64_t>> kShapesByRank = {{}, {5}, {2, 3}, {2, 1, 3}, {2, 3, 1, 2}};

Array patterned(DType dtype, std::vector<int64_t> shape, int seed) {
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes.resize(static_cast<size_t>(a.numel()) * dtype_size(dtype));
  for (size_t i = 0; i < a.bytes.size(); ++i) a.bytes[i] = static_cast<uint8_t>(i * 31 + seed);
  return a;
}

}  // namespace

// ---- round trips ---------------------------------------------------------------

TEST(SafetensorsIo, RoundTripsEveryDtypeAndRank) {
  TempDir dir;
  std::vector<SafetensorsTensor> tensors;
  int seed = 0;
  // Names deliberately out of alphabetical order: the writer's order is kept.
  for (DType dtype : kAllDTypes) {
    for (const auto& shape : kShapesByRank) {
      tensors.push_back({fmt::format("z{}.{}_rank{}", seed, dtype_name(dtype), shape.size()),
                         patterned(dtype, shape, seed)});
      ++seed;
    }
  }
  tensors.push_back({"empty", patterned(DType::f32, {0, 4}, 0)});
  tensors.push_back({"a.last", patterned(DType::u8, {3}, 9)});
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "caf\xc3\xa9"}};
  const fs::path p = dir / "all.safetensors";
  write_safetensors(p, tensors, meta);

  const SafetensorsFile f = read_safetensors(p);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(f.tensors[i].name, tensors[i].name);
    EXPECT_EQ(f.tensors[i].array.dtype, tensors[i].array.dtype);
    EXPECT_EQ(f.tensors[i].array.shape, tensors[i].array.shape);
    EXPECT_EQ(f.tensors[i].array.bytes, tensors[i].array.bytes);
  }
  ASSERT_NE(f.find("a.last"), nullptr);
  EXPECT_EQ(f.find("a.last")->array.bytes, tensors.back().array.bytes);
  EXPECT_EQ(f.find("missing"), nullptr);
}

TEST(SafetensorsIo, WritesAlignedHeaderWithMetadataOnlyWhenPresent) {
  TempDir dir;
  const float v[] = {1, 2, 3};
  const fs::path p = dir / "h.safetensors";
  write_safetensors(p, {{"x", from_f32({3}, v)}}, {});
  std::string s = read_bytes(p);
  uint64_t n = 0;
  std::memcpy(&n, s.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(s.size(), 8 + n + 12);
  std::string header = s.substr(8, n);
  EXPECT_EQ(header.rfind("{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 0),
            0u)
      << header;
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);
  EXPECT_EQ(header.find_first_not_of(' ', header.find('}') + 2), std::string::npos);

  write_safetensors(p, {{"x", from_f32({3}, v)}}, {{"k", "v"}});
  s = read_bytes(p);
  std::memcpy(&n, s.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(s.substr(8, 29), "{\"__metadata__\":{\"k\":\"v\"},\"x\"");
}

// ---- hand-written files ---------------------------------------------------------------

TEST(SafetensorsIo, ReadsHandWrittenFile) {
  TempDir dir;
  const fs::path p = dir / "hand.safetensors";
  // Header out of data order, rank 0, an empty tensor, a gap and trailing bytes.
  std::string data;
  for (float x : {2.5f, -1.0f}) {
    uint32_t u = std::bit_cast<uint32_t>(x);
    data.append(reinterpret_cast<const char*>(&u), 4);
  }
  data += "\x80\x3f";  // bf16 1.0
  data += "GAP";
  data += "\x07";
  data += "tail";
  write_bytes(p, st_bytes(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "__metadata__": {"format": "pt"},
    "s": {"dtype": "U8", "shape": [], "data_offsets": [13, 14]},
    "e": {"dtype": "F16", "shape": [0, 7], "data_offsets": [8, 8]},
    "b": {"dtype": "BF16", "shape": [1, 1], "data_offsets": [8, 10], "extra": 1}})",
                          data));
  const SafetensorsFile f = read_safetensors(p);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.tensors[0].name, "w");  // data-offset order
  EXPECT_EQ(to_f32(f.find("w")->array), (std::vector<float>{2.5f, -1.0f}));
  EXPECT_EQ(to_f32(f.find("b")->array), (std::vector<float>{1.0f}));
  EXPECT_TRUE(f.find("s")->array.shape.empty());
  EXPECT_EQ(to_u8(f.find("s")->array), (std::vector<uint8_t>{7}));
  EXPECT_EQ(f.find("e")->array.shape, (std::vector<int64_t>{0, 7}));
  EXPECT_TRUE(f.find("e")->array.bytes.empty());
}

// ---- bad input: each names the file and the field ---------------------------

TEST(SafetensorsIo, RejectsPytorchFiles) {
  TempDir dir;
  const fs::path p = dir / "model.pt";
  constexpr std::string_view kHint =
      "PyTorch pickle files are not supported: save the tensors with "
      "safetensors.torch.save_file(...)";
  write_bytes(p, std::string("PK\x03\x04\x14\x00\x00\x00\x08\x00", 10));
  expect_input_error([&] { read_safetensors(p); }, {"model.pt", kHint});
  write_bytes(p, std::string("\x80\x02\x8a\x0a" "l\xfc\x9c" "F\xf9 j\xa8", 12));
  expect_input_error([&] { read_safetensors(p); }, {"model.pt", kHint});
  write_bytes(p, std::string("\x93NUMPY\x01\x00", 8));
  expect_input_error([&] { read_safetensors(p); }, {"model.pt", "npy"});
}

TEST(SafetensorsIo, RejectsHeaderLengthBeyondFile) {
  TempDir dir;
  const fs::path p = dir / "len.safetensors";
  std::string bytes = st_bytes("{}", "");
  bytes[0] = 100;
  write_bytes(p, bytes);
  expect_input_error([&] { read_safetensors(p); },
                     {"len.safetensors", "header length", "100", "only 2 bytes"});
  write_bytes(p, "\x01\x02\x03");
  expect_input_error([&] { read_safetensors(p); }, {"len.safetensors", "truncated header"});
  write_bytes(p, std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10));
  expect_input_error([&] { read_safetensors(p); },
                     {"len.safetensors", "header length", "18446744073709551615"});
}

TEST(SafetensorsIo, RejectsInvalidJson) {
  TempDir dir;
  const fs::path p = dir / "json.safetensors";
  for (std::string_view h : {"{\"x\": {\"dtype\": \"F32\",", "", "{\"a\": \xff}", "not json"}) {
    SCOPED_TRACE(h);
    write_bytes(p, st_bytes(h, ""));
    expect_input_error([&] { read_safetensors(p); },
                       {"json.safetensors", "header is not valid JSON"});
  }
  write_bytes(p, st_bytes("[1, 2]", ""));
  expect_input_error([&] { read_safetensors(p); }, {"json.safetensors", "header is [1,2]"});
}

TEST(SafetensorsIo, RejectsMissingFields) {
  TempDir dir;
  const fs::path p = dir / "fields.safetensors";
  const std::string data(8, '\0');
  write_bytes(p, st_bytes(R"({"x": {"shape": [2], "data_offsets": [0, 8]}})", data));
  expect_input_error([&] { read_safetensors(p); },
                     {"fields.safetensors", "tensor 'x' field 'dtype'", "missing", "F32"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "data_offsets": [0, 8]}})", data));
  expect_input_error([&] { read_safetensors(p); },
                     {"fields.safetensors", "tensor 'x' field 'shape'", "missing"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [2]}})", data));
  expect_input_error([&] { read_safetensors(p); },
                     {"fields.safetensors", "tensor 'x' field 'data_offsets'", "missing"});
  write_bytes(p, st_bytes(R"({"x": [1]})", data));
  expect_input_error([&] { read_safetensors(p); }, {"fields.safetensors", "tensor 'x'", "object"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": 5, "shape": [2], "data_offsets": [0, 8]}})", data));
  expect_input_error([&] { read_safetensors(p); },
                     {"fields.safetensors", "tensor 'x' field 'dtype'", "5"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", data));
  expect_input_error([&] { read_safetensors(p); },
                     {"fields.safetensors", "tensor 'x' field 'data_offsets'", "[0]"});
}

TEST(SafetensorsIo, RejectsUnsupportedDtype) {
  TempDir dir;
  const fs::path p = dir / "dtype.safetensors";
  write_bytes(p, st_bytes(R"({"x": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})",
                          std::string(8, '\0')));
  expect_input_error([&] { read_safetensors(p); },
                     {"dtype.safetensors", "tensor 'x' field 'dtype'", "\"I64\"",
                      "F32, F16, BF16, F64, U8, U16, U32, I32"});
}

TEST(SafetensorsIo, RejectsBadShapes) {
  TempDir dir;
  const fs::path p = dir / "shape.safetensors";
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 8]}})",
                          std::string(8, '\0')));
  expect_input_error([&] { read_safetensors(p); },
                     {"shape.safetensors", "tensor 'x' field 'shape'", "-1", "negative"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})",
                          std::string(8, '\0')));
  expect_input_error([&] { read_safetensors(p); },
                     {"shape.safetensors", "tensor 'x' field 'shape'", "2.0"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})",
                          std::string(8, '\0')));
  expect_input_error([&] { read_safetensors(p); },
                     {"shape.safetensors", "tensor 'x' field 'shape'", "list"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296],
                                    "data_offsets": [0, 8]}})",
                          std::string(8, '\0')));
  expect_input_error([&] { read_safetensors(p); },
                     {"shape.safetensors", "tensor 'x' field 'shape'", "overflows"});
}

TEST(SafetensorsIo, RejectsBadOffsets) {
  TempDir dir;
  const fs::path p = dir / "off.safetensors";
  const std::string data(16, '\0');
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})",
                          data));
  expect_input_error([&] { read_safetensors(p); },
                     {"off.safetensors", "tensor 'x' field 'data_offsets'", "[0,32]", "16 bytes"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
                          data));
  expect_input_error([&] { read_safetensors(p); },
                     {"off.safetensors", "tensor 'x' field 'data_offsets'", "[0, 8]",
                      "needs 12 bytes"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
                          data));
  expect_input_error([&] { read_safetensors(p); },
                     {"off.safetensors", "tensor 'x' field 'data_offsets'", "begin"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})",
                          data));
  expect_input_error([&] { read_safetensors(p); },
                     {"off.safetensors", "tensor 'x' field 'data_offsets'", "-4"});
}

TEST(SafetensorsIo, RejectsOverlappingTensors) {
  TempDir dir;
  const fs::path p = dir / "overlap.safetensors";
  write_bytes(p, st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "U8", "shape": [4], "data_offsets": [6, 10]}})",
                          std::string(16, '\0')));
  expect_input_error([&] { read_safetensors(p); },
                     {"overlap.safetensors", "tensor 'b' field 'data_offsets'", "overlaps",
                      "tensor 'a'"});
  // A range inside an earlier, longer one.
  write_bytes(p, st_bytes(R"({"a": {"dtype": "U8", "shape": [12], "data_offsets": [0, 12]},
                              "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]},
                              "c": {"dtype": "U8", "shape": [2], "data_offsets": [6, 8]}})",
                          std::string(16, '\0')));
  expect_input_error([&] { read_safetensors(p); }, {"overlap.safetensors", "overlaps"});
}

TEST(SafetensorsIo, RejectsDuplicateNames) {
  TempDir dir;
  const fs::path p = dir / "dup.safetensors";
  write_bytes(p, st_bytes(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                              "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                          "xy"));
  expect_input_error([&] { read_safetensors(p); }, {"dup.safetensors", "'a'", "twice"});
}

TEST(SafetensorsIo, RejectsBadMetadata) {
  TempDir dir;
  const fs::path p = dir / "meta.safetensors";
  write_bytes(p, st_bytes(R"({"__metadata__": {"a": "ok", "n": 3}})", ""));
  expect_input_error([&] { read_safetensors(p); },
                     {"meta.safetensors", "'__metadata__' field 'n'", "3", "strings"});
  write_bytes(p, st_bytes(R"({"__metadata__": ["a"]})", ""));
  expect_input_error([&] { read_safetensors(p); },
                     {"meta.safetensors", "'__metadata__'", "string"});
}

TEST(SafetensorsIo, WriteRejectsBadNamesAndLeavesNothing) {
  TempDir dir;
  const fs::path p = dir / "out.safetensors";
  const uint8_t b[] = {1};
  expect_input_error([&] { write_safetensors(p, {{"a", from_u8({1}, b)}, {"a", from_u8({1}, b)}}); },
                     {"out.safetensors", "'a'", "twice"});
  expect_input_error([&] { write_safetensors(p, {{"__metadata__", from_u8({1}, b)}}); },
                     {"out.safetensors", "__metadata__", "reserved"});
  expect_input_error([&] { write_safetensors(p, {{"bad\xff", from_u8({1}, b)}}); },
                     {"out.safetensors", "UTF-8"});
  Array bad = from_u8({1}, b);
  bad.bytes.push_back(0);
  EXPECT_THROW(write_safetensors(p, {{"x", bad}}), std::invalid_argument);
  EXPECT_EQ(dir.count(), 0u);
  const fs::path missing = dir / "nodir" / "o.safetensors";
  expect_input_error([&] { write_safetensors(missing, {{"x", from_u8({1}, b)}}); },
                     {missing.string(), "does not exist"});
  EXPECT_EQ(dir.count(), 0u);
}
