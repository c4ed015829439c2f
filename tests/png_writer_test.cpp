// PNG writer: decoded back by libpng's reader (a separate code path from the
// writer) and checked byte by byte at the file level.
#include <gtest/gtest.h>
#include <png.h>

#include <cstring>
#include <fstream>

#include "fp4emu/analysis/heatmap.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/png.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

io::RgbImage gradient(int w, int h) {
  io::RgbImage img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = img.pixels.data() + (size_t(y) * w + x) * 3;
      p[0] = uint8_t(x * 7), p[1] = uint8_t(y * 13), p[2] = uint8_t((x ^ y) * 3);
    }
  return img;
}

std::vector<uint8_t> decode(const std::vector<uint8_t>& file, int* w, int* h) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_memory(&image, file.data(), file.size())) << image.message;
  image.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> px(PNG_IMAGE_SIZE(image));
  EXPECT_TRUE(png_image_finish_read(&image, nullptr, px.data(), 0, nullptr)) << image.message;
  *w = int(image.width), *h = int(image.height);
  return px;
}

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

TEST(PngWriter, DecodesToTheSamePixels) {
  for (auto [w, h] : {std::pair{1, 1}, {3, 2}, {37, 19}, {256, 3}}) {
    const io::RgbImage img = gradient(w, h);
    const std::vector<uint8_t> file = io::encode_png(img);
    int dw = 0, dh = 0;
    EXPECT_EQ(decode(file, &dw, &dh), img.pixels) << w << "x" << h;
    EXPECT_EQ(dw, w);
    EXPECT_EQ(dh, h);
  }
}

TEST(PngWriter, SignatureAndHeaderChunk) {
  const std::vector<uint8_t> file = io::encode_png(gradient(300, 7));
  ASSERT_GT(file.size(), 33u);
  const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  EXPECT_EQ(std::memcmp(file.data(), sig, 8), 0);
  EXPECT_EQ(be32(&file[8]), 13u);  // IHDR length
  EXPECT_EQ(std::memcmp(&file[12], "IHDR", 4), 0);
  EXPECT_EQ(be32(&file[16]), 300u);
  EXPECT_EQ(be32(&file[20]), 7u);
  EXPECT_EQ(file[24], 8);  // bit depth
  EXPECT_EQ(file[25], 2);  // colour type RGB
  EXPECT_EQ(file[28], 0);  // no interlace
  // No time chunk: the same pixels give the same bytes.
  EXPECT_EQ(file, io::encode_png(gradient(300, 7)));
}

TEST(PngWriter, RejectsBadImagesAndUnwritablePaths) {
  EXPECT_THROW(io::encode_png({0, 5, {}}), std::invalid_argument);
  EXPECT_THROW(io::encode_png({2, 2, std::vector<uint8_t>(11)}), std::invalid_argument);
  testing::TempDir dir;
  EXPECT_THROW(io::write_png(dir / "missing" / "x.png", gradient(2, 2)), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir / "missing"));
  io::write_png(dir / "x.png", gradient(4, 4));
  int w = 0, h = 0;
  std::ifstream in(dir / "x.png", std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(decode(bytes, &w, &h), gradient(4, 4).pixels);
}

// The colour map is viridis: its end points and middle are matplotlib's.
TEST(PngHeatmap, ViridisEndPointsAndNoDataGrey) {
  EXPECT_EQ(analysis::viridis(0.0), (analysis::Rgb{0x44, 0x01, 0x54}));
  EXPECT_EQ(analysis::viridis(1.0), (analysis::Rgb{0xfd, 0xe7, 0x25}));
  EXPECT_EQ(analysis::viridis(-3.0), analysis::viridis(0.0));
  EXPECT_EQ(analysis::viridis(7.0), analysis::viridis(1.0));
  EXPECT_EQ(analysis::viridis(std::nan("")), (analysis::Rgb{217, 217, 217}));
  // Perceptually ordered: luminance rises monotonically.
  double last = -1;
  for (int i = 0; i <= 255; ++i) {
    const analysis::Rgb c = analysis::viridis(i / 255.0);
    const double lum = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
    EXPECT_GT(lum, last - 0.5) << i;
    last = lum;
  }
}

// A heatmap cell's pixels carry the colour of its value.
TEST(PngHeatmap, CellsCarryTheirColours) {
  analysis::HeatmapFigure f;
  f.title = "t";
  analysis::HeatmapPanel p;
  p.rows = 2, p.cols = 3;
  p.values = {0.0, 0.5, 1.0, std::nan(""), 0.25, 0.75};
  p.row_labels = {"a", "b"};
  f.panels.push_back(p);
  const io::RgbImage img = analysis::render_heatmap(f);
  // Count pixels of each expected colour: each cell is 40 x 22 pixels.
  auto count = [&](analysis::Rgb c) {
    int n = 0;
    for (size_t i = 0; i < img.pixels.size(); i += 3)
      n += img.pixels[i] == c[0] && img.pixels[i + 1] == c[1] && img.pixels[i + 2] == c[2];
    return n;
  };
  for (double v : {0.5, 0.25, 0.75}) EXPECT_GE(count(analysis::viridis(v)), 40 * 22) << v;
  EXPECT_GE(count(analysis::viridis(std::nan(""))), 40 * 22);
  EXPECT_THROW(analysis::render_heatmap({}), std::invalid_argument);
}

}  // namespace
}  // namespace fp4emu
