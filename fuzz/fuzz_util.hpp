#pragma once
// Shared by the fuzz harnesses: the readers under test take paths, so each
// input is written to a scratch file first, and a broken invariant of an
// accepted input aborts (a finding, as a crash would be).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <span>
#include <string_view>

namespace fp4emu::fuzz {

// Writes `bytes` to `name` inside this process's scratch directory (under
// /dev/shm when it exists, so runs do not wear the disk) and returns its
// path. The directory is removed when the process exits normally.
std::filesystem::path scratch_file(std::string_view name, std::span<const uint8_t> bytes);

// A path in the scratch directory for a writer under test to create.
std::filesystem::path scratch_path(std::string_view name);

// What a harness did with its input, printed when replaying a corpus (so the
// test log shows which seeds are accepted and why the others are refused);
// silent under libFuzzer.
void set_verbose(bool verbose);
void accepted(std::string_view what);
void rejected(std::string_view what, const std::exception& e);

[[noreturn]] inline void invariant_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
  std::abort();
}

}  // namespace fp4emu::fuzz

#define FUZZ_CHECK(cond) \
  ((cond) ? void(0) : ::fp4emu::fuzz::invariant_failed(#cond, __FILE__, __LINE__))
