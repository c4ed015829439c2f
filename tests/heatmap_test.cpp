// The studies' pictures (analysis/heatmap.hpp): the colour range follows the
// data, values are printed in cells that can hold them, text is drawn, and the
// same figure gives the same PNG and SVG bytes. `fp4emu underflow` and `resq`
// write the formats --image-format asks for and refuse bad picture options.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "fp4emu/analysis/heatmap.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using analysis::HeatmapFigure;
using analysis::HeatmapPanel;
using analysis::Rgb;

HeatmapFigure figure(std::vector<double> values, int rows, int cols) {
  HeatmapFigure f;
  f.title = "Underflow ratio by layer and tensor";
  f.subtitle = "gateup_in signs: g, q and p have descenders";
  f.colorbar_label = "UR";
  HeatmapPanel p;
  p.title = "panel";
  p.rows = rows, p.cols = cols;
  p.values = std::move(values);
  for (int r = 0; r < rows; ++r) p.row_labels.push_back(fmt::format("row{}", r));
  p.x_label = "layer", p.y_label = "tensor";
  f.panels.push_back(std::move(p));
  return f;
}

int count(const io::RgbImage& img, Rgb c) {
  int n = 0;
  for (size_t i = 0; i < img.pixels.size(); i += 3)
    n += img.pixels[i] == c[0] && img.pixels[i + 1] == c[1] && img.pixels[i + 2] == c[2];
  return n;
}

// The bounding box of the pixels of colour `c`: {x0, y0, x1, y1}, inclusive.
std::array<int, 4> box_of(const io::RgbImage& img, Rgb c) {
  std::array<int, 4> b{img.width, img.height, -1, -1};
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      const uint8_t* p = img.pixels.data() + (size_t(y) * img.width + x) * 3;
      if (p[0] == c[0] && p[1] == c[1] && p[2] == c[2])
        b = {std::min(b[0], x), std::min(b[1], y), std::max(b[2], x), std::max(b[3], y)};
    }
  return b;
}

TEST(Heatmap, ColorRangeFollowsTheDataRoundedOutToTicks) {
  // Real URs of 0.05-0.2: auto spans them, not 0..1.
  HeatmapFigure f = figure({0.052, 0.11, 0.197, std::nan("")}, 2, 2);
  EXPECT_EQ(analysis::color_range(f), (std::array<double, 2>{0.05, 0.2}));
  f.color.lo = 0, f.color.hi = 1;
  EXPECT_EQ(analysis::color_range(f), (std::array<double, 2>{0, 1}));
  f.color = {};
  f.color.log = true;
  EXPECT_EQ(analysis::color_range(f), (std::array<double, 2>{0.05, 0.2}));
  f.panels[0].values = {0.003, 0.4, 0.0, std::nan("")};  // zero: no place on a log scale, takes lo's colour
  EXPECT_EQ(analysis::color_range(f), (std::array<double, 2>{0.002, 0.5}));
  // One value, all zero, no data: a range that holds it.
  f.color = {};
  f.panels[0].values = {0, 0, 0, 0};
  EXPECT_EQ(analysis::color_range(f), (std::array<double, 2>{0, 1}));
  f.panels[0].values.assign(4, std::nan(""));
  EXPECT_EQ(analysis::color_range(f), (std::array<double, 2>{0, 1}));
  f.panels[0].values.assign(4, 0.3);
  const auto r = analysis::color_range(f);
  EXPECT_LE(r[0], 0.3);
  EXPECT_GT(r[1], 0.3);
  // Ranges that cannot be drawn.
  f.color.lo = 0.5, f.color.hi = 0.5;
  EXPECT_THROW(analysis::render_heatmap(f), std::invalid_argument);
  f.color.lo = 0, f.color.hi = 1, f.color.log = true;
  EXPECT_THROW(analysis::render_heatmap(f), std::invalid_argument);
}

// The largest value takes the top colour of the bar: the range adapted.
TEST(Heatmap, CellsTakeTheirColourOnTheResolvedScale) {
  const HeatmapFigure f = figure({0.05, 0.2, 0.125, std::nan("")}, 2, 2);
  const io::RgbImage img = analysis::render_heatmap(f);
  const int cell_area = 48 * 24;
  EXPECT_GE(count(img, analysis::viridis(1.0)), cell_area / 2);   // 0.2 (and the bar's top)
  EXPECT_GE(count(img, analysis::viridis(0.0)), cell_area / 2);   // 0.05
  EXPECT_GE(count(img, analysis::viridis((0.125 - 0.05) / (0.2 - 0.05))), cell_area / 2);  // 0.125, mid-range
  EXPECT_GE(count(img, analysis::viridis(std::nan(""))), cell_area - 2);  // no data: no text
  HeatmapFigure g = f;
  g.color.log = true;
  g.panels[0].values = {0.001, 0.1, 0.01, std::nan("")};
  const io::RgbImage lg = analysis::render_heatmap(g);
  EXPECT_GE(count(lg, analysis::viridis(0.5)), cell_area / 2);  // 0.01: halfway on a log scale 0.001..0.1
}

// A cell large enough shows its value: ink inside the cell's box. Cells too
// small for the text show the colour alone.
TEST(Heatmap, ValuesArePrintedInCellsThatHoldThem) {
  HeatmapFigure f = figure({0.25}, 1, 1);
  f.color.lo = 0, f.color.hi = 1;
  const Rgb c = analysis::viridis(0.25);
  const io::RgbImage big = analysis::render_heatmap(f);
  const auto b = box_of(big, c);
  ASSERT_GT(b[2], b[0]);
  const int area = (b[2] - b[0] + 1) * (b[3] - b[1] + 1);
  EXPECT_EQ(area, 48 * 24);
  EXPECT_GT(area - count(big, c), 20);  // the digits of "0.25"
  f.max_plot_width = 12;                // 12-pixel cells: "0.25" does not fit
  const io::RgbImage small = analysis::render_heatmap(f);
  EXPECT_EQ(count(small, c), 12 * 24);
}

// Text is drawn (the title has ink) and the same figure gives the same bytes.
TEST(Heatmap, DeterministicPngAndSvg) {
  const HeatmapFigure f = figure({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, 2, 3);
  const io::RgbImage a = analysis::render_heatmap(f), b = analysis::render_heatmap(f);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(io::encode_png(a), io::encode_png(b));
  int dark = 0;  // title ink in the top 30 rows
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < a.width; ++x) dark += a.pixels[(size_t(y) * a.width + x) * 3] < 100;
  EXPECT_GT(dark, 100);
  const std::string s1 = analysis::render_heatmap_svg(f), s2 = analysis::render_heatmap_svg(f);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(s1.substr(0, 5), "<?xml");
  EXPECT_NE(s1.find(fmt::format("width=\"{}pt\" height=\"{}pt\"", a.width, a.height)), std::string::npos);
  EXPECT_NE(s1.find("id=\"surface1\""), std::string::npos);
  // Text that is not valid UTF-8 draws as '?', it does not fail.
  HeatmapFigure bad = f;
  bad.title = "caf\xe9 \x01";
  EXPECT_NO_THROW(analysis::render_heatmap(bad));
  EXPECT_NO_THROW(analysis::render_heatmap_svg(bad));
}

TEST(Heatmap, BarChartPngAndSvg) {
  analysis::BarChart c;
  c.title = "QSNR by pattern";
  c.y_label = "dB";
  c.categories = {"dense", "2:4", "unstructured50"};
  c.notes = {"1.00x", "2.00x", "1.00x"};
  c.series = {{"activation", {20.5, 18.25, -3}}, {"output", {21, std::nan(""), 17}}};
  const io::RgbImage img = analysis::render_bar_chart(c);
  EXPECT_EQ(io::encode_png(img), io::encode_png(analysis::render_bar_chart(c)));
  EXPECT_EQ(analysis::render_bar_chart_svg(c), analysis::render_bar_chart_svg(c));
  c.series[1].values.pop_back();
  EXPECT_THROW(analysis::render_bar_chart(c), std::invalid_argument);
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path small_dump(const testing::TempDir& dir) {
  std::vector<io::SafetensorsTensor> ts;
  for (int l = 0; l < 2; ++l) {
    std::vector<float> x(8 * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::ldexp(1.0 + double(i % 7), -int(i % 13)));
    ts.push_back({fmt::format("model.layers.{}.mlp.down_proj.input", l), io::from_f32({8, 64}, x)});
  }
  const auto path = dir / "dump.safetensors";
  io::write_safetensors(path, ts, {});
  return path;
}

TEST(PicturesCli, ImageFormatWritesPngSvgOrBoth) {
  testing::TempDir dir;
  const auto dump = small_dump(dir);
  for (const char* fmt_name : {"png", "svg", "both"}) {
    const auto out = dir / fmt_name;
    const auto r = testing::run_cli(fmt::format("underflow {} --format mxfp4 --image-format {} --out {}",
                                                dump.string(), fmt_name, out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const bool png = std::string(fmt_name) != "svg", svg = std::string(fmt_name) != "png";
    for (const char* stem : {"summary_heatmap", "detail_heatmap"}) {
      EXPECT_EQ(std::filesystem::exists(out / (std::string(stem) + ".png")), png) << stem;
      EXPECT_EQ(std::filesystem::exists(out / (std::string(stem) + ".svg")), svg) << stem;
    }
    if (svg) {
      EXPECT_EQ(slurp(out / "summary_heatmap.svg").substr(0, 5), "<?xml");
    }
  }
  // Re-running gives the same picture bytes.
  const auto again = dir / "again";
  ASSERT_EQ(testing::run_cli(fmt::format("underflow {} --format mxfp4 --image-format both --out {}", dump.string(),
                                         again.string()))
                .exit_code,
            0);
  EXPECT_EQ(slurp(again / "summary_heatmap.png"), slurp(dir / "both" / "summary_heatmap.png"));
  EXPECT_EQ(slurp(again / "summary_heatmap.svg"), slurp(dir / "both" / "summary_heatmap.svg"));
  // resq: one chart per recipe in each format; the report names the first.
  const auto rq = dir / "rq";
  const auto r = testing::run_cli(fmt::format("resq {} --format nvfp4 --pattern none,2:4 --image-format svg --out {}",
                                              dump.string(), rq.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(rq / "resq_nvfp4_te.svg"));
  EXPECT_FALSE(std::filesystem::exists(rq / "resq_nvfp4_te.png"));
  EXPECT_NE(slurp(rq / "resq.json").find("\"chart\": \"resq_nvfp4_te.svg\""), std::string::npos);
}

TEST(PicturesCli, ColorRangeAndBadPictureOptions) {
  testing::TempDir dir;
  const auto dump = small_dump(dir);
  for (const char* ok : {"--color-range 0-1", "--color-range 0-0.25", "--color-range 1e-4-0.5 --color-scale log",
                         "--color-scale log"}) {
    const auto out = dir / "ok";
    const auto r = testing::run_cli(fmt::format("underflow {} --format mxfp4 {} --out {}", dump.string(), ok,
                                                out.string()));
    EXPECT_EQ(r.exit_code, 0) << ok << "\n" << r.output;
  }
  struct Bad {
    const char* args;
    const char* says;
  };
  for (const Bad& b : {Bad{"--image-format jpg", "--image-format"}, Bad{"--color-range 1-0", "--color-range"},
                       Bad{"--color-range a-b", "--color-range"}, Bad{"--color-range 0.5", "--color-range"},
                       Bad{"--color-range 0-1 --color-scale log", "above 0"},
                       Bad{"--color-scale cubic", "--color-scale"}}) {
    const auto out = dir / "bad";
    const auto r = testing::run_cli(fmt::format("underflow {} --format mxfp4 {} --out {}", dump.string(), b.args,
                                                out.string()));
    EXPECT_EQ(r.exit_code, 2) << b.args << "\n" << r.output;
    EXPECT_NE(r.output.find(b.says), std::string::npos) << b.args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << b.args;
  }
}

}  // namespace
}  // namespace fp4emu
