#include "fp4emu/io/png.hpp"

#include <png.h>

#include <csetjmp>
#include <stdexcept>
#include <string>

#include "fp4emu/io/atomic_file.hpp"

namespace fp4emu::io {
namespace {

void append_bytes(png_structp png, png_bytep data, png_size_t length) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + length);
}

void no_flush(png_structp) {}

void ignore_warning(png_structp, png_const_charp) {}

// libpng reports errors by longjmp to png_jmpbuf; exceptions must not cross
// its C frames. This function holds no object with a destructor, so the jump
// back into it is well defined. Returns false on a libpng error.
bool write_image(png_structp png, png_infop info, const RgbImage& image, std::vector<uint8_t>* out) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, out, append_bytes, no_flush);
  png_set_IHDR(png, info, image.width, image.height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < image.height; ++y)
    png_write_row(png, const_cast<png_bytep>(image.pixels.data() + static_cast<size_t>(y) * image.width * 3));
  png_write_end(png, nullptr);
  return true;
}

}  // namespace

std::vector<uint8_t> encode_png(const RgbImage& image) {
  if (image.width <= 0 || image.height <= 0)
    throw std::invalid_argument("encode_png: image has no pixels");
  if (image.pixels.size() != static_cast<size_t>(image.width) * image.height * 3)
    throw std::invalid_argument("encode_png: pixel buffer does not match width * height * 3");
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, ignore_warning);
  if (!png) throw std::runtime_error("libpng: cannot create write struct");
  png_infop info = png_create_info_struct(png);
  const bool ok = info && write_image(png, info, image, &out);
  png_destroy_write_struct(&png, info ? &info : nullptr);
  if (!ok) throw std::runtime_error("libpng: encoding failed");
  return out;
}

void write_png(const std::filesystem::path& path, const RgbImage& image) {
  write_file_atomic(path, encode_png(image));
}

}  // namespace fp4emu::io
