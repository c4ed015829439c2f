#pragma once
// SHA-256 (FIPS 180-4) of OpenSSL's libcrypto: golden suites record the
// digest of every file so a verifier can tell a damaged suite from a failing
// kernel.
#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace fp4emu::golden {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(std::span<const uint8_t> bytes);
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();

 private:
  struct State;  // the libcrypto context, kept out of this header
  std::unique_ptr<State> state_;
};

// Lower-case hex digest of `bytes`.
std::string sha256_hex(std::span<const uint8_t> bytes);
// Lower-case hex digest of a file's contents; InputError if it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace fp4emu::golden
