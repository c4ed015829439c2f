#include "fuzz_util.hpp"

#include <unistd.h>

#include <fstream>
#include <string>
#include <system_error>

namespace fp4emu::fuzz {
namespace {

namespace fs = std::filesystem;

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string tmpl = (base / "fp4emu-fuzz-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      std::perror("fp4emu fuzz: cannot create a scratch directory");
      std::abort();
    }
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

bool verbose = false;

const fs::path& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

}  // namespace

std::filesystem::path scratch_path(std::string_view name) { return scratch_dir() / fs::path(name); }

std::filesystem::path scratch_file(std::string_view name, std::span<const uint8_t> bytes) {
  const fs::path path = scratch_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::perror("fp4emu fuzz: cannot write a scratch file");
    std::abort();
  }
  return path;
}

void set_verbose(bool v) { verbose = v; }

void accepted(std::string_view what) {
  if (verbose) std::fprintf(stderr, "  %.*s: accepted\n", static_cast<int>(what.size()), what.data());
}

void rejected(std::string_view what, const std::exception& e) {
  if (verbose) std::fprintf(stderr, "  %.*s: refused: %s\n", static_cast<int>(what.size()), what.data(), e.what());
}

}  // namespace fp4emu::fuzz
