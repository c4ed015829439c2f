#pragma once
// PNG output through libpng: 8-bit RGB, no interlace, no time or text chunks,
// so the same pixels always give the same bytes. Written atomically
// (write_file_atomic).
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace fp4emu::io {

// An 8-bit RGB image, rows top to bottom, 3 bytes per pixel.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3
};

// The complete PNG file for `image`. std::invalid_argument if the size is
// zero or the pixel buffer does not match width * height * 3.
std::vector<uint8_t> encode_png(const RgbImage& image);

// Atomic; InputError naming `path` if it cannot be written.
void write_png(const std::filesystem::path& path, const RgbImage& image);

}  // namespace fp4emu::io
