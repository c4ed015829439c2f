#pragma once
// Output files are written whole or not at all (DESIGN.md §5): the bytes go
// to "<path>.tmp.<pid>.<random>" in the destination's directory, are fsynced,
// and the temporary is renamed over <path>. A reader sees the old file or the
// complete new one, never a partial write; a failed run leaves nothing behind.
#include <cstdint>
#include <filesystem>
#include <span>

namespace fp4emu::io {

// Writes `bytes` to `path` atomically, replacing any existing file. On any
// failure the temporary is removed and InputError is thrown naming `path`
// and the reason (missing directory, permission denied, disk full, path is a
// directory, ...).
void write_file_atomic(const std::filesystem::path& path, std::span<const uint8_t> bytes);

}  // namespace fp4emu::io
