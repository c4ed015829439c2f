// Readers under hostile input: nesting bombs, huge headers, FIFOs and
// devices as inputs, untrusted bytes echoed in messages.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/io/read_file.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/io/tensor_file.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "io_test_util.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace fp4emu::io;
using fp4emu::testing::expect_input_error;
using fp4emu::testing::TempDir;
using fp4emu::testing::write_bytes;

namespace {

// A safetensors file: u64 LE header length, the header, the data.
std::string st_bytes(std::string_view header, std::string_view data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  out += header;
  out += data;
  return out;
}

}  // namespace

// ---- printable ---------------------------------------------------------------

TEST(Printable, KeepsTextAndEscapesWhatATerminalWouldActOn) {
  EXPECT_EQ(printable("model.layers.0.mlp"), "model.layers.0.mlp");
  EXPECT_EQ(printable("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable(std::string_view("nul\0x\x1b[31m\x7f", 11)), "nul\\x00x\\x1b[31m\\x7f");
  // Valid UTF-8 in any script is kept.
  EXPECT_EQ(printable("层.权重.é"), "层.权重.é");
  // Invalid UTF-8: stray continuation, truncated sequence, overlong '/',
  // a surrogate, above U+10FFFF.
  EXPECT_EQ(printable("a\x80z"), "a\\x80z");
  EXPECT_EQ(printable("a\xe5\xb1"), "a\\xe5\\xb1");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  // C1 controls, line separators and bidirectional overrides.
  EXPECT_EQ(printable("\xc2\x85"), "\\u{0085}");
  EXPECT_EQ(printable("x\xe2\x80\xa8y"), "x\\u{2028}y");
  EXPECT_EQ(printable("evil\xe2\x80\xaegnp.exe"), "evil\\u{202E}gnp.exe");
}

TEST(Printable, TruncatesAtACharacterBoundary) {
  EXPECT_EQ(printable("abcdef", 4), "abcd...");
  EXPECT_EQ(printable("abcd", 4), "abcd");
  EXPECT_EQ(printable("ab层", 4), "ab...");  // 层 is 3 bytes: not split
  EXPECT_EQ(printable(std::string(10000, 'x')).size(), 203u);
}

// ---- safetensors header: nesting and size ------------------------------------

// 100,000 nested '[' in a 200 KB header once overflowed the stack (a
// recursive dump of the value for the message).
TEST(HostileSafetensors, DeepNestingIsRefusedWithoutRecursion) {
  TempDir dir;
  const fs::path p = dir / "deep.safetensors";
  for (const std::string& header :
       {std::string(100000, '[') + std::string(100000, ']'),
        "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
        "{\"x\": {\"dtype\": \"F32\", \"shape\": " + std::string(100000, '[') + std::string(100000, ']') + "}}",
        std::string("{\"__metadata__\": {\"a\": {\"b\": {\"c\": {\"d\": {\"e\": {\"f\": {\"g\": {\"h\": 1}}}}}}}}}"),
        [] {
          std::string s;
          for (int i = 0; i < 50000; ++i) s += "{\"a\":";
          return s + "1" + std::string(50000, '}');
        }()}) {
    SCOPED_TRACE(header.substr(0, 40));
    write_bytes(p, st_bytes(header, ""));
    expect_input_error([&] { read_safetensors(p); }, {"deep.safetensors", "more than 8 levels deep"});
  }
}

TEST(HostileSafetensors, DepthThreeAndAMarginAreAccepted) {
  TempDir dir;
  const fs::path p = dir / "ok.safetensors";
  // Nesting up to the limit parses; a tensor with it is then refused for
  // its content, not its depth.
  write_bytes(p, st_bytes(R"({"x": {"dtype": "U8", "shape": [[[[[[1]]]]]], "data_offsets": [0, 1]}})", "a"));
  expect_input_error([&] { read_safetensors(p); }, {"ok.safetensors", "tensor 'x' field 'shape'", "[[[[[[1]]]]]]"});
  write_bytes(p, st_bytes(R"({"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "a"));
  EXPECT_EQ(read_safetensors(p).tensors.size(), 1u);
}

// Keys repeated inside a nested object are refused too (the DOM parser keeps
// the last one silently).
TEST(HostileSafetensors, DuplicateKeysAtEveryLevel) {
  TempDir dir;
  const fs::path p = dir / "dup.safetensors";
  write_bytes(p, st_bytes(R"({"x": {"dtype": "U8", "dtype": "F32", "shape": [1], "data_offsets": [0, 1]}})", "a"));
  expect_input_error([&] { read_safetensors(p); }, {"dup.safetensors", "'dtype'", "twice"});
  write_bytes(p, st_bytes(R"({"__metadata__": {"a": "1"}, "__metadata__": {"b": "2"}})", ""));
  expect_input_error([&] { read_safetensors(p); }, {"dup.safetensors", "'__metadata__'", "twice"});
  write_bytes(p, st_bytes(R"({"__metadata__": {"a": "1", "a": "2"}})", ""));
  expect_input_error([&] { read_safetensors(p); }, {"dup.safetensors", "'a'", "twice"});
}

// A header of many tensors parses in linear time (the duplicate check once
// rescanned the whole object at every key: 40k tensors took 6 minutes). No
// timing is asserted; at this size the old parser would need about half an
// hour (quadratic, from the 40k figure).
TEST(HostileSafetensors, HeaderWithManyTensors) {
  TempDir dir;
  const fs::path p = dir / "many.safetensors";
  constexpr int kTensors = 100000;
  std::string header = "{\"__metadata__\": {\"format\": \"pt\"}";
  std::string data;
  for (int i = 0; i < kTensors; ++i) {
    // Written in reverse name order, so the reader's own order is by offset.
    header += fmt::format(", \"model.layers.{}.w\": {{\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [{}, {}]}}",
                          kTensors - 1 - i, i, i + 1);
    data += static_cast<char>(i & 0xFF);
  }
  header += "}";
  write_bytes(p, st_bytes(header, data));
  const SafetensorsReader r(p);
  ASSERT_EQ(r.tensors().size(), static_cast<size_t>(kTensors));
  EXPECT_EQ(r.metadata().at("format"), "pt");
  for (int i : {0, 1, 12345, kTensors - 1}) {
    const SafetensorsEntry& e = r.tensors()[static_cast<size_t>(i)];
    EXPECT_EQ(e.name, fmt::format("model.layers.{}.w", kTensors - 1 - i));
    EXPECT_EQ(e.begin, static_cast<uint64_t>(i));
    EXPECT_EQ(r.read(e).bytes.at(0), static_cast<uint8_t>(i & 0xFF));
  }
  // The same header with one name repeated far apart.
  const std::string dup = "\"model.layers.7.w\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]}, ";
  write_bytes(p, st_bytes("{" + dup + header.substr(1), data));
  expect_input_error([&] { read_safetensors(p); }, {"many.safetensors", "'model.layers.7.w'", "twice"});
}

// ---- untrusted names in messages --------------------------------------------

TEST(HostileSafetensors, NamesAndValuesAreEscapedInMessages) {
  TempDir dir;
  const fs::path p = dir / "names.safetensors";
  // A name with a newline, an escape sequence and invalid UTF-8 (JSON allows
  // control characters only escaped; \u001b is the terminal escape).
  write_bytes(p, st_bytes("{\"a\\nfake: error\\u001b[2J\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]}}",
                          std::string(8, '\0')));
  try {
    read_safetensors(p);
    ADD_FAILURE() << "no error";
  } catch (const fp4emu::InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
    EXPECT_NE(msg.find("'a\\nfake: error\\x1b[2J'"), std::string::npos) << msg;
  }
  // Invalid UTF-8 in the header: the parser's message quotes the bytes.
  write_bytes(p, st_bytes("{\"x\xff\n\": 1}", ""));
  try {
    read_safetensors(p);
    ADD_FAILURE() << "no error";
  } catch (const fp4emu::InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\xff'), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // A long value is shortened.
  write_bytes(p, st_bytes("{\"x\": {\"dtype\": \"" + std::string(100000, 'Q') + "\"}}", ""));
  try {
    read_safetensors(p);
    ADD_FAILURE() << "no error";
  } catch (const fp4emu::InputError& e) {
    EXPECT_LT(std::string_view(e.what()).size(), 1000u) << e.what();
  }
}

TEST(HostileSafetensors, TensorSelectionEchoesNamesEscaped) {
  TempDir dir;
  const fs::path p = dir / "sel.safetensors";
  write_bytes(p, st_bytes("{\"bad\\nname\\u202e\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}}", "a"));
  const TensorFile f(p);
  const std::string patterns[] = {"no\nsuch"};
  try {
    select_tensors(f, patterns);
    ADD_FAILURE() << "no error";
  } catch (const fp4emu::InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad\\nname\\u{202E}"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no\\nsuch"), std::string::npos) << msg;
  }
}

// ---- inputs that are not files -----------------------------------------------

// Opening a FIFO for reading waits for a writer: the readers must refuse it
// before they block. The read runs on another thread; if it blocks, the test
// fails and unblocks it by opening the FIFO itself.
TEST(HostileInputs, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir / "f.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::function<void()> readers[] = {
      [&] { read_npy(fifo); },
      [&] { read_safetensors(fifo); },
      [&] { TensorFile f(fifo); },
      [&] { fp4emu::read_packed(fifo); },
      [&] { read_file(fifo); },
  };
  for (const auto& read : readers) {
    auto result = std::async(std::launch::async, [&] {
      try {
        read();
      } catch (const fp4emu::InputError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    });
    if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "reading a FIFO blocks";
      const int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);  // lets the blocked open return
      result.wait();
      if (fd >= 0) ::close(fd);
      continue;
    }
    const std::string msg = result.get();
    EXPECT_NE(msg.find("f.npy"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is not a regular file (it is a FIFO)"), std::string::npos) << msg;
  }
}

TEST(HostileInputs, DevicesAndDirectoriesAreRefused) {
  TempDir dir;
  expect_input_error([] { read_npy("/dev/zero"); }, {"/dev/zero", "character device"});
  expect_input_error([] { read_safetensors("/dev/null"); }, {"/dev/null", "character device"});
  expect_input_error([&] { read_npy(dir.path()); }, {"directory"});
  expect_input_error([] { read_file("/dev/zero"); }, {"/dev/zero", "character device"});
  write_bytes(dir / "f.bin", "abc");
  EXPECT_EQ(read_file(dir / "f.bin"), (std::vector<uint8_t>{'a', 'b', 'c'}));
}

// The CLI on a FIFO input: exit 2 with the message (a blocked run is
// stopped by `timeout` and exits 124).
TEST(HostileInputs, CliRefusesFifoInputs) {
  TempDir dir;
  const fs::path fifo = dir / "in.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string f = fifo.string();
  // run_cli has no timeout of its own: the shell's stops a blocked run.
  for (const std::string& cmd : {std::string("fake-quant"), std::string("inspect")}) {
    const std::string line = fmt::format("timeout 60 {} {} {}{} > {} 2>&1; echo $? > {}", FP4EMU_CLI_PATH, cmd, f,
                                         cmd == "inspect" ? "" : " " + (dir / "o.npy").string() + " --format mxfp4",
                                         (dir / "log").string(), (dir / "rc").string());
    ASSERT_EQ(std::system(line.c_str()), 0);
    EXPECT_EQ(fp4emu::testing::read_bytes(dir / "rc"), "2\n") << fp4emu::testing::read_bytes(dir / "log");
    EXPECT_NE(fp4emu::testing::read_bytes(dir / "log").find("FIFO"), std::string::npos)
        << fp4emu::testing::read_bytes(dir / "log");
  }
}
