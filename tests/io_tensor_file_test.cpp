// Memory-mapped safetensors reading, the streaming writers, .npy/.safetensors
// detection and tensor selection by name or glob.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "fp4emu/io/array.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/io/tensor_file.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace fp4emu::io;
using fp4emu::InputError;
using fp4emu::testing::TempDir;

namespace {

size_t files_in(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void expect_input_error(const std::function<void()>& fn, std::initializer_list<std::string_view> needles) {
  try {
    fn();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (std::string_view n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "lacks \"" << n << "\": " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
}

Array patterned(DType dtype, std::vector<int64_t> shape, int seed) {
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes.resize(static_cast<size_t>(a.numel()) * dtype_size(dtype));
  for (size_t i = 0; i < a.bytes.size(); ++i) a.bytes[i] = static_cast<uint8_t>(i * 37 + seed);
  return a;
}

std::vector<SafetensorsTensor> some_tensors() {
  return {{"model.layers.0.mlp.down_proj.input", patterned(DType::bf16, {3, 5}, 1)},
          {"model.layers.0.self_attn.o_proj.input", patterned(DType::f32, {2, 4}, 2)},
          {"model.layers.1.mlp.down_proj.input", patterned(DType::bf16, {3, 5}, 3)},
          {"model.layers.10.mlp.down_proj.input", patterned(DType::f16, {7}, 4)},
          {"lm_head.input", patterned(DType::f32, {1, 3}, 5)},
          {"empty", patterned(DType::u8, {0, 4}, 6)},
          {"scalar", patterned(DType::i32, {}, 7)}};
}

}  // namespace

// ---- the mapped reader ------------------------------------------------------------

TEST(SafetensorsReader, MapsAndReadsEveryTensorExactly) {
  TempDir dir;
  const auto tensors = some_tensors();
  const std::map<std::string, std::string> meta = {{"step", "3"}};
  write_safetensors(dir / "d.safetensors", tensors, meta);
  const SafetensorsReader r(dir / "d.safetensors");
  EXPECT_EQ(r.metadata(), meta);
  EXPECT_EQ(r.file_size(), fs::file_size(dir / "d.safetensors"));
  ASSERT_EQ(r.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    const SafetensorsEntry& e = r.tensors()[i];  // data-offset order = writer order
    EXPECT_EQ(e.name, tensors[i].name);
    EXPECT_EQ(e.dtype, tensors[i].array.dtype);
    EXPECT_EQ(e.shape, tensors[i].array.shape);
    EXPECT_EQ(e.nbytes(), tensors[i].array.bytes.size());
    const MappedBytes m = r.map(e);
    const std::vector<uint8_t> mapped(m.bytes().begin(), m.bytes().end());
    EXPECT_EQ(mapped, tensors[i].array.bytes);
    EXPECT_EQ(r.read(e).bytes, tensors[i].array.bytes);
  }
  ASSERT_NE(r.find("lm_head.input"), nullptr);
  EXPECT_EQ(r.find("nope"), nullptr);
}

TEST(SafetensorsReader, MappingsOutliveEachOtherAndMove) {
  TempDir dir;
  const auto tensors = some_tensors();
  write_safetensors(dir / "d.safetensors", tensors);
  const SafetensorsReader r(dir / "d.safetensors");
  MappedBytes a = r.map(r.tensors()[0]);
  MappedBytes b = r.map(r.tensors()[2]);
  MappedBytes moved = std::move(a);
  EXPECT_TRUE(a.bytes().empty());
  EXPECT_EQ(std::vector<uint8_t>(moved.bytes().begin(), moved.bytes().end()), tensors[0].array.bytes);
  b = std::move(moved);  // unmaps b's old range
  EXPECT_EQ(std::vector<uint8_t>(b.bytes().begin(), b.bytes().end()), tensors[0].array.bytes);
}

// A tensor whose data does not start on a page boundary, larger than a page.
TEST(SafetensorsReader, MapsUnalignedLargeTensors) {
  TempDir dir;
  std::vector<SafetensorsTensor> t = {{"pad", patterned(DType::u8, {4099}, 1)},
                                      {"big", patterned(DType::f32, {3, 5000}, 2)}};
  write_safetensors(dir / "u.safetensors", t);
  const SafetensorsReader r(dir / "u.safetensors");
  const MappedBytes m = r.map(*r.find("big"));
  EXPECT_EQ(std::vector<uint8_t>(m.bytes().begin(), m.bytes().end()), t[1].array.bytes);
}

TEST(SafetensorsReader, RefusesToMapAFileThatChangedSize) {
  TempDir dir;
  write_safetensors(dir / "c.safetensors", some_tensors());
  const SafetensorsReader r(dir / "c.safetensors");
  {
    std::ofstream f(dir / "c.safetensors", std::ios::binary | std::ios::app);
    f << "more";
  }
  expect_input_error([&] { (void)r.map(r.tensors()[0]); }, {"c.safetensors", "changed size"});
}

TEST(SafetensorsReader, ValidatesLikeReadSafetensors) {
  TempDir dir;
  std::vector<uint8_t> bytes = encode_safetensors(some_tensors(), {});
  bytes.resize(bytes.size() - 3);  // truncated data
  {
    std::ofstream f(dir / "t.safetensors", std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  expect_input_error([&] { SafetensorsReader r(dir / "t.safetensors"); }, {"t.safetensors", "data_offsets", "truncated"});
  expect_input_error([&] { read_safetensors(dir / "t.safetensors"); }, {"t.safetensors", "data_offsets", "truncated"});
}

// ---- streaming writers --------------------------------------------------------

TEST(SafetensorsWriter, WritesTheSameBytesAsEncodeSafetensors) {
  TempDir dir;
  const auto tensors = some_tensors();
  const std::map<std::string, std::string> meta = {{"generator", "test"}};
  std::vector<SafetensorsEntry> layout;
  for (const auto& t : tensors) layout.push_back({t.name, t.array.dtype, t.array.shape, 99, 7});
  SafetensorsWriter w(dir / "s.safetensors", layout, meta);
  EXPECT_FALSE(fs::exists(dir / "s.safetensors"));
  for (const auto& t : tensors) w.write_next(t.array.bytes);
  EXPECT_THROW(w.write_next(tensors[0].array.bytes), std::invalid_argument);
  w.commit();
  const std::vector<uint8_t> expected = encode_safetensors(tensors, meta);
  EXPECT_EQ(read_bytes(dir / "s.safetensors"), std::string(expected.begin(), expected.end()));
  EXPECT_EQ(files_in(dir.path()), 1u);
}

TEST(SafetensorsWriter, AbandonedOrWrongSizedWriteLeavesNothing) {
  TempDir dir;
  const auto tensors = some_tensors();
  std::vector<SafetensorsEntry> layout;
  for (const auto& t : tensors) layout.push_back({t.name, t.array.dtype, t.array.shape, 0, 0});
  {
    SafetensorsWriter w(dir / "s.safetensors", layout);
    w.write_next(tensors[0].array.bytes);
    EXPECT_THROW(w.write_next(std::vector<uint8_t>(3)), std::invalid_argument);
    EXPECT_THROW(w.commit(), std::invalid_argument);  // not every tensor written
  }
  EXPECT_EQ(files_in(dir.path()), 0u);
  layout.push_back(layout[0]);
  expect_input_error([&] { SafetensorsWriter w(dir / "s.safetensors", layout); }, {"s.safetensors", "twice"});
  EXPECT_EQ(files_in(dir.path()), 0u);
}

TEST(AtomicFileWriter, WritesInPiecesAndCleansUp) {
  TempDir dir;
  {
    AtomicFileWriter w(dir / "a.bin");
    w.write(std::vector<uint8_t>{'a', 'b'});
    w.write(std::vector<uint8_t>{'c'});
    EXPECT_EQ(w.bytes_written(), 3u);
    EXPECT_FALSE(fs::exists(dir / "a.bin"));
    w.commit();
    expect_input_error([&] { w.write(std::vector<uint8_t>{'d'}); }, {"a.bin", "committed"});
  }
  EXPECT_EQ(read_bytes(dir / "a.bin"), "abc");
  {
    AtomicFileWriter w(dir / "b.bin");
    w.write(std::vector<uint8_t>{'x'});
  }  // never committed
  EXPECT_FALSE(fs::exists(dir / "b.bin"));
  EXPECT_EQ(files_in(dir.path()), 1u);
  expect_input_error([&] { AtomicFileWriter w(dir / "no" / "c.bin"); }, {"c.bin", "does not exist"});
}

// ---- widening from raw bytes --------------------------------------------------

TEST(WidenToF32, MatchesToF32AndRejectsIntegers) {
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x7F80, 0xFFC1, 0x0001, 0x8000};
  const Array a = from_bf16_bits({6}, bf16);
  std::vector<float> out(6);
  widen_to_f32(DType::bf16, a.bytes, out, "t");
  const std::vector<float> ref = to_f32(a);
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(ref[i])) << i;
  EXPECT_EQ(std::bit_cast<uint32_t>(out[5]), 0x80000000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(out[4]), 0x00010000u);
  EXPECT_THROW(widen_to_f32(DType::bf16, a.bytes, std::span(out.data(), 5)), std::invalid_argument);
  const Array u = from_u8({2}, std::vector<uint8_t>{1, 2});
  std::vector<float> two(2);
  expect_input_error([&] { widen_to_f32(DType::u8, u.bytes, two, "codes"); }, {"'codes'", "u8", "not a float"});
}

// ---- globs ---------------------------------------------------------------------

TEST(GlobMatch, ShellSemantics) {
  struct Case {
    const char* pattern;
    const char* name;
    bool match;
  };
  const Case cases[] = {
      {"model.layers.*.mlp.down_proj.input", "model.layers.3.mlp.down_proj.input", true},
      {"model.layers.*.mlp.down_proj.input", "model.layers.12.mlp.down_proj.input", true},
      {"model.layers.*.mlp.down_proj.input", "model.layers.3.self_attn.o_proj.input", false},
      {"model.layers.*.input", "model.layers.3.mlp.down_proj.input", true},  // '*' crosses dots
      {"*", "", true},
      {"*", "anything.at.all", true},
      {"", "", true},
      {"", "a", false},
      {"a", "", false},
      {"abc", "abc", true},
      {"abc", "abcd", false},
      {"ab?", "abc", true},
      {"ab?", "ab", false},
      {"*.input", "x.input", true},
      {"*.input", "x.inputs", false},
      {"a*b*c", "aXbYc", true},
      {"a*b*c", "aXbYcZ", false},
      {"a*b*c", "abbbc", true},
      {"model.layers.[0-2].*", "model.layers.1.mlp", true},
      {"model.layers.[0-2].*", "model.layers.3.mlp", false},
      {"model.layers.[!0-2].*", "model.layers.3.mlp", true},
      {"model.layers.[!0-2].*", "model.layers.1.mlp", false},
      {"[]]x", "]x", true},
      {"[ab", "[ab", true},  // unclosed class: a literal '['
      {"\\*", "*", true},
      {"\\*", "a", false},
      {"a\\?c", "a?c", true},
      {"a\\?c", "abc", false},
      {"**", "x", true},
      {"*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
  };
  for (const Case& c : cases) EXPECT_EQ(glob_match(c.pattern, c.name), c.match) << c.pattern << " vs " << c.name;
}

// ---- TensorFile and selection -------------------------------------------------

TEST(TensorFile, ReadsSafetensorsLazilyAndNpyWhole) {
  TempDir dir;
  const auto tensors = some_tensors();
  write_safetensors(dir / "dump.bin", tensors, {{"k", "v"}});  // kind from the bytes, not the name
  const TensorFile st(dir / "dump.bin");
  EXPECT_EQ(st.kind(), TensorFile::Kind::safetensors);
  EXPECT_EQ(st.metadata().at("k"), "v");
  ASSERT_EQ(st.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(st.tensors()[i].name, tensors[i].name);
    EXPECT_EQ(st.tensors()[i].nbytes, tensors[i].array.bytes.size());
    const TensorBytes b = st.bytes(i);
    EXPECT_EQ(std::vector<uint8_t>(b.bytes().begin(), b.bytes().end()), tensors[i].array.bytes);
  }
  EXPECT_THROW((void)st.bytes(tensors.size()), std::out_of_range);

  const Array a = patterned(DType::f16, {2, 3}, 9);
  write_npy(dir / "acts.npy", a);
  const TensorFile np(dir / "acts.npy");
  EXPECT_EQ(np.kind(), TensorFile::Kind::npy);
  EXPECT_TRUE(np.metadata().empty());
  ASSERT_EQ(np.tensors().size(), 1u);
  EXPECT_EQ(np.tensors()[0].name, "acts.npy");
  EXPECT_EQ(np.tensors()[0].shape, a.shape);
  const TensorBytes b = np.bytes(0);
  EXPECT_EQ(std::vector<uint8_t>(b.bytes().begin(), b.bytes().end()), a.bytes);
}

TEST(TensorFile, BadFilesNameTheFile) {
  TempDir dir;
  expect_input_error([&] { TensorFile f(dir / "missing.safetensors"); }, {"missing.safetensors"});
  {
    std::ofstream f(dir / "model.pt", std::ios::binary);
    f << std::string("PK\x03\x04\x14\x00\x00\x00", 8);
  }
  expect_input_error([&] { TensorFile f(dir / "model.pt"); }, {"model.pt", "PyTorch", "safetensors"});
  {
    std::ofstream f(dir / "short.safetensors", std::ios::binary);
    f << "abc";
  }
  expect_input_error([&] { TensorFile f(dir / "short.safetensors"); }, {"short.safetensors", "truncated"});
}

TEST(SelectTensors, GlobsUnionInFileOrderAndUnmatchedPatternsFail) {
  TempDir dir;
  write_safetensors(dir / "d.safetensors", some_tensors());
  const TensorFile f(dir / "d.safetensors");
  EXPECT_EQ(select_tensors(f, {}), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6}));
  const std::vector<std::string> down = {"model.layers.*.mlp.down_proj.input"};
  EXPECT_EQ(select_tensors(f, down), (std::vector<size_t>{0, 2, 3}));
  const std::vector<std::string> two = {"lm_head.input", "model.layers.0.*", "model.layers.0.mlp.down_proj.input"};
  EXPECT_EQ(select_tensors(f, two), (std::vector<size_t>{0, 1, 4}));
  const std::vector<std::string> typo = {"model.layers.*.mlp.down_proj.input", "model.layers.0.mlp.up_proj.input"};
  expect_input_error([&] { (void)select_tensors(f, typo); },
                     {"d.safetensors", "no tensor named 'model.layers.0.mlp.up_proj.input'", "7 tensors",
                      "model.layers.0.mlp.down_proj.input", "fp4emu inspect"});
  const std::vector<std::string> glob = {"*.gate_proj.*"};
  expect_input_error([&] { (void)select_tensors(f, glob); }, {"d.safetensors", "no tensor matches --tensor '*.gate_proj.*'"});
}
