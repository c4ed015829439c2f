// SHA-256 of the golden suites against the FIPS 180-2 / NIST example vectors.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <string>

#include "fp4emu/golden/sha256.hpp"
#include "test_util.hpp"

namespace fp4emu::golden {
namespace {

std::string hex_of(const std::string& s) {
  return sha256_hex({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

TEST(GoldenSha256, FipsVectors) {
  EXPECT_EQ(hex_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex_of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                   "mnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(hex_of(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(GoldenSha256, PaddingBoundariesAndStreaming) {
  // Lengths around the 55/56/64-byte padding boundaries, hashed whole and in
  // uneven pieces, must agree.
  for (size_t n : {55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 128u, 1000u}) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + 3);
    Sha256 h;
    for (size_t i = 0; i < n;) {
      const size_t k = std::min(n - i, i % 13 + 1);
      h.update({reinterpret_cast<const uint8_t*>(s.data()) + i, k});
      i += k;
    }
    std::string streamed;
    for (uint8_t b : h.digest()) streamed += fmt::format("{:02x}", b);
    EXPECT_EQ(streamed, hex_of(s)) << n;
  }
  // 56 bytes of 'a' is a NIST-published length-boundary value.
  EXPECT_EQ(hex_of(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

TEST(GoldenSha256, FileDigestEqualsMemoryDigest) {
  testing::TempDir dir;
  const std::string text = "fp4emu golden\n";
  std::ofstream(dir / "f.txt", std::ios::binary) << text;
  EXPECT_EQ(sha256_file_hex(dir / "f.txt"), hex_of(text));
}

}  // namespace
}  // namespace fp4emu::golden
