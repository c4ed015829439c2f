#pragma once
// Untrusted text (a tensor name, a metadata value, a header excerpt) made safe
// to print inside a message: it cannot end the line, move the cursor, reorder
// the text around it, or hide what it holds.
#include <cstddef>
#include <string>
#include <string_view>

namespace fp4emu::io {

// Returns `s` with every byte that is not printable escaped:
//   backslash            -> "\\"
//   \n \r \t             -> "\n" "\r" "\t"
//   other ASCII controls -> "\xNN"
//   bytes that are not valid UTF-8 (stray continuation bytes, overlong or
//   truncated sequences, surrogates) -> "\xNN" per byte
//   valid UTF-8 that is a C1 control, a line/paragraph separator or a
//   bidirectional override (U+0080..U+009F, U+2028, U+2029, U+202A..U+202E,
//   U+2066..U+2069, U+200E, U+200F, U+061C) -> "\u{XXXX}"
// Other valid UTF-8 (names in any script) is kept. At most `max_bytes` bytes
// of `s` are shown, cut at a character boundary, followed by "..." when
// anything was cut.
std::string printable(std::string_view s, size_t max_bytes = 200);

}  // namespace fp4emu::io
