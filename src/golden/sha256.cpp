// SHA-256 through OpenSSL's EVP interface (libcrypto).
#include "fp4emu/golden/sha256.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <fstream>
#include <stdexcept>
#include <vector>

#include "fp4emu/error.hpp"

namespace fp4emu::golden {

struct Sha256::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(ctx); }
};

namespace {
// libcrypto fails here only when it cannot allocate: not an input error.
void check(int ok, const char* what) {
  if (ok != 1) throw std::runtime_error(fmt::format("OpenSSL {} failed for SHA-256", what));
}
}  // namespace

Sha256::Sha256() : state_(std::make_unique<State>()) {
  if (!state_->ctx) throw std::bad_alloc();
  check(EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(std::span<const uint8_t> bytes) {
  check(EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size()), "EVP_DigestUpdate");
}

std::array<uint8_t, 32> Sha256::digest() {
  std::array<uint8_t, 32> out;
  unsigned int n = 0;
  check(EVP_DigestFinal_ex(state_->ctx, out.data(), &n), "EVP_DigestFinal_ex");
  return out;
}

namespace {
std::string hex(const std::array<uint8_t, 32>& digest) {
  std::string s;
  for (uint8_t b : digest) s += fmt::format("{:02x}", b);
  return s;
}
}  // namespace

std::string sha256_hex(std::span<const uint8_t> bytes) {
  Sha256 s;
  s.update(bytes);
  return hex(s.digest());
}

std::string sha256_file_hex(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot be read", path.string()));
  Sha256 s;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    if (n > 0) s.update({reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(n)});
  }
  if (in.bad()) throw InputError(fmt::format("{}: read error", path.string()));
  return hex(s.digest());
}

}  // namespace fp4emu::golden
