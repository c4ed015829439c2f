#pragma once
// SHA-256 (FIPS 180-4), self-contained: golden suites record the digest of
// every file so a verifier can tell a damaged suite from a failing kernel.
#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace fp4emu::golden {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const uint8_t> bytes);
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_bits_ = 0;
};

// Lower-case hex digest of `bytes`.
std::string sha256_hex(std::span<const uint8_t> bytes);
// Lower-case hex digest of a file's contents; InputError if it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace fp4emu::golden
