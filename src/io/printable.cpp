#include "fp4emu/io/printable.hpp"

#include <cstdint>

#include <fmt/format.h>

namespace fp4emu::io {

namespace {

// Length of the valid UTF-8 sequence at s[i] (RFC 3629: shortest form, no
// surrogates, at most U+10FFFF) and its code point; 0 if it is not valid.
size_t utf8_sequence(std::string_view s, size_t i, char32_t& cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  size_t len = 0;
  char32_t min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1Fu, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0Fu, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07u, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// Code points a terminal would act on rather than show.
bool is_format_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E ||
         cp == 0x200F || cp == 0x061C;
}

}  // namespace

std::string printable(std::string_view s, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 1;
    char32_t cp = 0;
    if (c >= 0x80) len = utf8_sequence(s, i, cp);
    if (i + (len == 0 ? 1 : len) > max_bytes) break;
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (len == 0) {
      out += fmt::format("\\x{:02x}", c);
      len = 1;
    } else if (is_format_control(cp)) {
      out += fmt::format("\\u{{{:04X}}}", static_cast<uint32_t>(cp));
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  if (i < s.size()) out += "...";
  return out;
}

}  // namespace fp4emu::io
