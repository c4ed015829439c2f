// Heatmaps and bar charts for the studies (heatmap.hpp). Plain raster
// drawing: filled rectangles, one-pixel lines and a 5x7 bitmap font.
#include "fp4emu/analysis/heatmap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>

namespace fp4emu::analysis {
namespace {

// Viridis, 256 entries, 0xRRGGBB: matplotlib's table (van der Walt and
// Smith, released into the public domain under CC0).
constexpr uint32_t kViridis[256] = {
    0x440154, 0x440256, 0x450457, 0x450559, 0x46075a, 0x46085c, 0x460a5d, 0x460b5e,
    0x470d60, 0x470e61, 0x471063, 0x471164, 0x471365, 0x481467, 0x481668, 0x481769,
    0x48186a, 0x481a6c, 0x481b6d, 0x481c6e, 0x481d6f, 0x481f70, 0x482071, 0x482173,
    0x482374, 0x482475, 0x482576, 0x482677, 0x482878, 0x482979, 0x472a7a, 0x472c7a,
    0x472d7b, 0x472e7c, 0x472f7d, 0x46307e, 0x46327e, 0x46337f, 0x463480, 0x453581,
    0x453781, 0x453882, 0x443983, 0x443a83, 0x443b84, 0x433d84, 0x433e85, 0x423f85,
    0x424086, 0x424186, 0x414287, 0x414487, 0x404588, 0x404688, 0x3f4788, 0x3f4889,
    0x3e4989, 0x3e4a89, 0x3e4c8a, 0x3d4d8a, 0x3d4e8a, 0x3c4f8a, 0x3c508b, 0x3b518b,
    0x3b528b, 0x3a538b, 0x3a548c, 0x39558c, 0x39568c, 0x38588c, 0x38598c, 0x375a8c,
    0x375b8d, 0x365c8d, 0x365d8d, 0x355e8d, 0x355f8d, 0x34608d, 0x34618d, 0x33628d,
    0x33638d, 0x32648e, 0x32658e, 0x31668e, 0x31678e, 0x31688e, 0x30698e, 0x306a8e,
    0x2f6b8e, 0x2f6c8e, 0x2e6d8e, 0x2e6e8e, 0x2e6f8e, 0x2d708e, 0x2d718e, 0x2c718e,
    0x2c728e, 0x2c738e, 0x2b748e, 0x2b758e, 0x2a768e, 0x2a778e, 0x2a788e, 0x29798e,
    0x297a8e, 0x297b8e, 0x287c8e, 0x287d8e, 0x277e8e, 0x277f8e, 0x27808e, 0x26818e,
    0x26828e, 0x26828e, 0x25838e, 0x25848e, 0x25858e, 0x24868e, 0x24878e, 0x23888e,
    0x23898e, 0x238a8d, 0x228b8d, 0x228c8d, 0x228d8d, 0x218e8d, 0x218f8d, 0x21908d,
    0x21918c, 0x20928c, 0x20928c, 0x20938c, 0x1f948c, 0x1f958b, 0x1f968b, 0x1f978b,
    0x1f988b, 0x1f998a, 0x1f9a8a, 0x1e9b8a, 0x1e9c89, 0x1e9d89, 0x1f9e89, 0x1f9f88,
    0x1fa088, 0x1fa188, 0x1fa187, 0x1fa287, 0x20a386, 0x20a486, 0x21a585, 0x21a685,
    0x22a785, 0x22a884, 0x23a983, 0x24aa83, 0x25ab82, 0x25ac82, 0x26ad81, 0x27ad81,
    0x28ae80, 0x29af7f, 0x2ab07f, 0x2cb17e, 0x2db27d, 0x2eb37c, 0x2fb47c, 0x31b57b,
    0x32b67a, 0x34b679, 0x35b779, 0x37b878, 0x38b977, 0x3aba76, 0x3bbb75, 0x3dbc74,
    0x3fbc73, 0x40bd72, 0x42be71, 0x44bf70, 0x46c06f, 0x48c16e, 0x4ac16d, 0x4cc26c,
    0x4ec36b, 0x50c46a, 0x52c569, 0x54c568, 0x56c667, 0x58c765, 0x5ac864, 0x5cc863,
    0x5ec962, 0x60ca60, 0x63cb5f, 0x65cb5e, 0x67cc5c, 0x69cd5b, 0x6ccd5a, 0x6ece58,
    0x70cf57, 0x73d056, 0x75d054, 0x77d153, 0x7ad151, 0x7cd250, 0x7fd34e, 0x81d34d,
    0x84d44b, 0x86d549, 0x89d548, 0x8bd646, 0x8ed645, 0x90d743, 0x93d741, 0x95d840,
    0x98d83e, 0x9bd93c, 0x9dd93b, 0xa0da39, 0xa2da37, 0xa5db36, 0xa8db34, 0xaadc32,
    0xaddc30, 0xb0dd2f, 0xb2dd2d, 0xb5de2b, 0xb8de29, 0xbade28, 0xbddf26, 0xc0df25,
    0xc2df23, 0xc5e021, 0xc8e020, 0xcae11f, 0xcde11d, 0xd0e11c, 0xd2e21b, 0xd5e21a,
    0xd8e219, 0xdae319, 0xdde318, 0xdfe318, 0xe2e418, 0xe5e419, 0xe7e419, 0xeae51a,
    0xece51b, 0xefe51c, 0xf1e51d, 0xf4e61e, 0xf6e620, 0xf8e621, 0xfbe723, 0xfde725,
};

// 5x7 glyphs for printable ASCII (32..126), one string of 7 rows x 5 columns
// per glyph, '#' = ink.
constexpr std::string_view kFont[95] = {
    "....." "....." "....." "....." "....." "....." ".....",  // space
    "..#.." "..#.." "..#.." "..#.." "..#.." "....." "..#..",  // !
    ".#.#." ".#.#." "....." "....." "....." "....." ".....",  // "
    ".#.#." ".#.#." "#####" ".#.#." "#####" ".#.#." ".#.#.",  // #
    "..#.." ".####" "#.#.." ".###." "..#.#" "####." "..#..",  // $
    "##..." "##..#" "...#." "..#.." ".#..." "#..##" "...##",  // %
    ".##.." "#..#." "#.#.." ".#..." "#.#.#" "#..#." ".##.#",  // &
    "..#.." "..#.." "....." "....." "....." "....." ".....",  // '
    "...#." "..#.." ".#..." ".#..." ".#..." "..#.." "...#.",  // (
    ".#..." "..#.." "...#." "...#." "...#." "..#.." ".#...",  // )
    "....." "..#.." "#.#.#" ".###." "#.#.#" "..#.." ".....",  // *
    "....." "..#.." "..#.." "#####" "..#.." "..#.." ".....",  // +
    "....." "....." "....." "....." ".##.." "..#.." ".#...",  // ,
    "....." "....." "....." "#####" "....." "....." ".....",  // -
    "....." "....." "....." "....." "....." ".##.." ".##..",  // .
    "....." "....#" "...#." "..#.." ".#..." "#...." ".....",  // /
    ".###." "#...#" "#..##" "#.#.#" "##..#" "#...#" ".###.",  // 0
    "..#.." ".##.." "..#.." "..#.." "..#.." "..#.." ".###.",  // 1
    ".###." "#...#" "....#" "...#." "..#.." ".#..." "#####",  // 2
    "#####" "...#." "..#.." "...#." "....#" "#...#" ".###.",  // 3
    "...#." "..##." ".#.#." "#..#." "#####" "...#." "...#.",  // 4
    "#####" "#...." "####." "....#" "....#" "#...#" ".###.",  // 5
    "..##." ".#..." "#...." "####." "#...#" "#...#" ".###.",  // 6
    "#####" "....#" "...#." "..#.." ".#..." ".#..." ".#...",  // 7
    ".###." "#...#" "#...#" ".###." "#...#" "#...#" ".###.",  // 8
    ".###." "#...#" "#...#" ".####" "....#" "...#." ".##..",  // 9
    "....." ".##.." ".##.." "....." ".##.." ".##.." ".....",  // :
    "....." ".##.." ".##.." "....." ".##.." "..#.." ".#...",  // ;
    "...#." "..#.." ".#..." "#...." ".#..." "..#.." "...#.",  // <
    "....." "....." "#####" "....." "#####" "....." ".....",  // =
    ".#..." "..#.." "...#." "....#" "...#." "..#.." ".#...",  // >
    ".###." "#...#" "....#" "...#." "..#.." "....." "..#..",  // ?
    ".###." "#...#" "....#" ".##.#" "#.#.#" "#.#.#" ".###.",  // @
    ".###." "#...#" "#...#" "#####" "#...#" "#...#" "#...#",  // A
    "####." "#...#" "#...#" "####." "#...#" "#...#" "####.",  // B
    ".###." "#...#" "#...." "#...." "#...." "#...#" ".###.",  // C
    "###.." "#..#." "#...#" "#...#" "#...#" "#..#." "###..",  // D
    "#####" "#...." "#...." "####." "#...." "#...." "#####",  // E
    "#####" "#...." "#...." "####." "#...." "#...." "#....",  // F
    ".###." "#...#" "#...." "#.###" "#...#" "#...#" ".####",  // G
    "#...#" "#...#" "#...#" "#####" "#...#" "#...#" "#...#",  // H
    ".###." "..#.." "..#.." "..#.." "..#.." "..#.." ".###.",  // I
    "..###" "...#." "...#." "...#." "...#." "#..#." ".##..",  // J
    "#...#" "#..#." "#.#.." "##..." "#.#.." "#..#." "#...#",  // K
    "#...." "#...." "#...." "#...." "#...." "#...." "#####",  // L
    "#...#" "##.##" "#.#.#" "#.#.#" "#...#" "#...#" "#...#",  // M
    "#...#" "#...#" "##..#" "#.#.#" "#..##" "#...#" "#...#",  // N
    ".###." "#...#" "#...#" "#...#" "#...#" "#...#" ".###.",  // O
    "####." "#...#" "#...#" "####." "#...." "#...." "#....",  // P
    ".###." "#...#" "#...#" "#...#" "#.#.#" "#..#." ".##.#",  // Q
    "####." "#...#" "#...#" "####." "#.#.." "#..#." "#...#",  // R
    ".####" "#...." "#...." ".###." "....#" "....#" "####.",  // S
    "#####" "..#.." "..#.." "..#.." "..#.." "..#.." "..#..",  // T
    "#...#" "#...#" "#...#" "#...#" "#...#" "#...#" ".###.",  // U
    "#...#" "#...#" "#...#" "#...#" "#...#" ".#.#." "..#..",  // V
    "#...#" "#...#" "#...#" "#.#.#" "#.#.#" "#.#.#" ".#.#.",  // W
    "#...#" "#...#" ".#.#." "..#.." ".#.#." "#...#" "#...#",  // X
    "#...#" "#...#" ".#.#." "..#.." "..#.." "..#.." "..#..",  // Y
    "#####" "....#" "...#." "..#.." ".#..." "#...." "#####",  // Z
    ".###." ".#..." ".#..." ".#..." ".#..." ".#..." ".###.",  // [
    "....." "#...." ".#..." "..#.." "...#." "....#" ".....",  // backslash
    ".###." "...#." "...#." "...#." "...#." "...#." ".###.",  // ]
    "..#.." ".#.#." "#...#" "....." "....." "....." ".....",  // ^
    "....." "....." "....." "....." "....." "....." "#####",  // _
    ".#..." "..#.." "....." "....." "....." "....." ".....",  // `
    "....." "....." ".###." "....#" ".####" "#...#" ".####",  // a
    "#...." "#...." "#.##." "##..#" "#...#" "#...#" "####.",  // b
    "....." "....." ".###." "#...." "#...." "#...#" ".###.",  // c
    "....#" "....#" ".##.#" "#..##" "#...#" "#...#" ".####",  // d
    "....." "....." ".###." "#...#" "#####" "#...." ".###.",  // e
    "..##." ".#..#" ".#..." "###.." ".#..." ".#..." ".#...",  // f
    "....." ".####" "#...#" "#...#" ".####" "....#" ".###.",  // g
    "#...." "#...." "#.##." "##..#" "#...#" "#...#" "#...#",  // h
    "..#.." "....." ".##.." "..#.." "..#.." "..#.." ".###.",  // i
    "...#." "....." "..##." "...#." "...#." "#..#." ".##..",  // j
    "#...." "#...." "#..#." "#.#.." "##..." "#.#.." "#..#.",  // k
    ".##.." "..#.." "..#.." "..#.." "..#.." "..#.." ".###.",  // l
    "....." "....." "##.#." "#.#.#" "#.#.#" "#...#" "#...#",  // m
    "....." "....." "#.##." "##..#" "#...#" "#...#" "#...#",  // n
    "....." "....." ".###." "#...#" "#...#" "#...#" ".###.",  // o
    "....." "....." "####." "#...#" "####." "#...." "#....",  // p
    "....." "....." ".####" "#...#" ".####" "....#" "....#",  // q
    "....." "....." "#.##." "##..#" "#...." "#...." "#....",  // r
    "....." "....." ".###." "#...." ".###." "....#" "####.",  // s
    ".#..." ".#..." "###.." ".#..." ".#..." ".#..#" "..##.",  // t
    "....." "....." "#...#" "#...#" "#...#" "#..##" ".##.#",  // u
    "....." "....." "#...#" "#...#" "#...#" ".#.#." "..#..",  // v
    "....." "....." "#...#" "#...#" "#.#.#" "#.#.#" ".#.#.",  // w
    "....." "....." "#...#" ".#.#." "..#.." ".#.#." "#...#",  // x
    "....." "....." "#...#" "#...#" ".####" "....#" ".###.",  // y
    "....." "....." "#####" "...#." "..#.." ".#..." "#####",  // z
    "...#." "..#.." "..#.." ".#..." "..#.." "..#.." "...#.",  // {
    "..#.." "..#.." "..#.." "..#.." "..#.." "..#.." "..#..",  // |
    ".#..." "..#.." "..#.." "...#." "..#.." "..#.." ".#...",  // }
    "....." "....." ".#..." "#.#.#" "...#." "....." ".....",  // ~
};

constexpr int kGlyphW = 5, kGlyphH = 7, kAdvance = 6;  // one pixel between glyphs

const Rgb kBlack{0, 0, 0}, kGrey{128, 128, 128}, kNoData{217, 217, 217};

class Canvas {
 public:
  Canvas(int width, int height) : image_{width, height, std::vector<uint8_t>(size_t(width) * height * 3, 255)} {}

  void pixel(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= image_.width || y >= image_.height) return;
    uint8_t* p = image_.pixels.data() + (size_t(y) * image_.width + x) * 3;
    p[0] = c[0], p[1] = c[1], p[2] = c[2];
  }
  void rect(int x, int y, int w, int h, Rgb c) {
    for (int j = 0; j < h; ++j)
      for (int i = 0; i < w; ++i) pixel(x + i, y + j, c);
  }
  void hline(int x0, int x1, int y, Rgb c) { rect(x0, y, x1 - x0 + 1, 1, c); }
  void vline(int x, int y0, int y1, Rgb c) { rect(x, y0, 1, y1 - y0 + 1, c); }
  void frame(int x, int y, int w, int h, Rgb c) {
    hline(x - 1, x + w, y - 1, c);
    hline(x - 1, x + w, y + h, c);
    vline(x - 1, y - 1, y + h, c);
    vline(x + w, y - 1, y + h, c);
  }

  // Text with its top-left corner at (x, y); characters outside printable
  // ASCII draw as '?'. `vertical` rotates it 90 degrees counter-clockwise
  // (reading bottom to top), with (x, y) then the bottom-left corner.
  void text(int x, int y, std::string_view s, int scale = 1, Rgb c = kBlack, bool vertical = false) {
    for (size_t n = 0; n < s.size(); ++n) {
      int ch = static_cast<unsigned char>(s[n]);
      if (ch < 32 || ch > 126) ch = '?';
      const std::string_view g = kFont[ch - 32];
      for (int r = 0; r < kGlyphH; ++r)
        for (int col = 0; col < kGlyphW; ++col) {
          if (g[r * kGlyphW + col] != '#') continue;
          const int u = int(n) * kAdvance + col;  // along the text
          if (vertical)
            rect(x + r * scale, y - (u + 1) * scale + 1, scale, scale, c);
          else
            rect(x + u * scale, y + r * scale, scale, scale, c);
        }
    }
  }

  io::RgbImage take() { return std::move(image_); }

 private:
  io::RgbImage image_;
};

int text_width(std::string_view s, int scale = 1) { return int(s.size()) * kAdvance * scale; }

// A label for a tick value: integers without decimals, others with 3 digits.
std::string tick_label(double v) {
  if (std::fabs(v - std::round(v)) < 1e-9 && std::fabs(v) < 1e9) return fmt::format("{}", int64_t(std::llround(v)));
  return fmt::format("{:.3g}", v);
}

// The smallest of 1, 2, 5, 10, 20, 50, ... that is >= x.
int nice_step(double x) {
  for (int p = 1;; p *= 10)
    for (int m : {1, 2, 5})
      if (m * p >= x) return m * p;
}

double nice_real_step(double x) {
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= x) return m * p;
  return 10 * p;
}

struct PanelGeometry {
  int cell_w, cell_h, plot_w, plot_h;
};

PanelGeometry panel_geometry(const HeatmapPanel& p, int cell_w) {
  const int cell_h = !p.row_labels.empty() ? 22 : std::clamp(360 / std::max(p.rows, 1), 1, 22);
  return {cell_w, cell_h, cell_w * p.cols, cell_h * p.rows};
}

}  // namespace

Rgb viridis(double t) {
  if (std::isnan(t)) return kNoData;
  t = std::clamp(t, 0.0, 1.0);
  const uint32_t v = kViridis[std::min(255, int(t * 255.0 + 0.5))];
  return {uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
}

io::RgbImage render_heatmap(const HeatmapFigure& f) {
  if (f.panels.empty()) throw std::invalid_argument("render_heatmap: no panels");
  int max_cols = 1;
  size_t label_chars = 0;
  for (const HeatmapPanel& p : f.panels) {
    if (p.rows <= 0 || p.cols <= 0 || p.values.size() != size_t(p.rows) * p.cols)
      throw std::invalid_argument("render_heatmap: panel values do not match rows x cols");
    max_cols = std::max(max_cols, p.cols);
    for (const std::string& l : p.row_labels) label_chars = std::max(label_chars, l.size());
    if (p.row_labels.empty())
      label_chars = std::max(label_chars, tick_label(p.row_origin + (p.rows - 1) * p.row_step).size());
  }
  const int cell_w = std::clamp(f.max_plot_width / max_cols, 1, 40);
  const int left = 30 + int(label_chars) * kAdvance;  // rotated y label + row labels
  const int title_h = 10 + 16 + (f.subtitle.empty() ? 0 : 12) + 8;
  int plots_h = 0, plots_w = 0;
  std::vector<PanelGeometry> geo;
  for (const HeatmapPanel& p : f.panels) {
    geo.push_back(panel_geometry(p, cell_w));
    plots_h += 14 + geo.back().plot_h + 32;  // panel title, cells, tick labels + x label
    plots_w = std::max(plots_w, geo.back().plot_w);
  }
  const int title_w = std::max(text_width(f.title, 2), text_width(f.subtitle));
  int right = left + plots_w;
  for (const HeatmapPanel& p : f.panels) right = std::max(right, left + text_width(p.title));
  const int width = std::max(right + 90, title_w + 20);
  const int height = title_h + plots_h + 8;
  Canvas c(width, height);
  c.text(10, 10, f.title, 2);
  if (!f.subtitle.empty()) c.text(10, 30, f.subtitle);

  int y = title_h;
  const int bar_top = y + 14;
  for (size_t k = 0; k < f.panels.size(); ++k) {
    const HeatmapPanel& p = f.panels[k];
    const PanelGeometry& g = geo[k];
    c.text(left, y, p.title);
    y += 14;
    for (int r = 0; r < p.rows; ++r)
      for (int col = 0; col < p.cols; ++col) {
        const double v = p.values[size_t(r) * p.cols + col];
        c.rect(left + col * g.cell_w, y + r * g.cell_h, g.cell_w, g.cell_h,
               viridis((v - f.vmin) / (f.vmax - f.vmin)));
      }
    c.frame(left, y, g.plot_w, g.plot_h, kBlack);
    // Row labels: every category, or numeric ticks at least 12 pixels apart.
    if (!p.row_labels.empty()) {
      for (int r = 0; r < p.rows; ++r) {
        const std::string& l = p.row_labels[r];
        c.text(left - 4 - text_width(l), y + r * g.cell_h + (g.cell_h - kGlyphH) / 2, l);
      }
    } else {
      const int step = nice_step(12.0 / g.cell_h);
      for (int r = 0; r < p.rows; r += step) {
        const std::string l = tick_label(p.row_origin + r * p.row_step);
        const int ty = y + r * g.cell_h + g.cell_h / 2;
        c.hline(left - 3, left - 2, ty, kBlack);
        c.text(left - 5 - text_width(l), ty - 3, l);
      }
    }
    c.text(4, y + g.plot_h / 2 + text_width(p.y_label) / 2, p.y_label, 1, kBlack, true);
    // Column ticks, far enough apart for their labels.
    const size_t widest = tick_label(p.col_origin + (p.cols - 1) * p.col_step).size();
    const int step = nice_step((widest * kAdvance + 8.0) / g.cell_w);
    for (int col = 0; col < p.cols; col += step) {
      const std::string l = tick_label(p.col_origin + col * p.col_step);
      const int tx = left + col * g.cell_w + g.cell_w / 2;
      c.vline(tx, y + g.plot_h + 1, y + g.plot_h + 3, kBlack);
      c.text(tx - text_width(l) / 2, y + g.plot_h + 5, l);
    }
    c.text(left + g.plot_w / 2 - text_width(p.x_label) / 2, y + g.plot_h + 17, p.x_label);
    y += g.plot_h + 32;
  }

  // Colour bar beside the panels and their titles, spanning them.
  int bar_x = left + plots_w + 14;
  for (const HeatmapPanel& p : f.panels) bar_x = std::max(bar_x, left + text_width(p.title) + 14);
  const int bar_h = std::max(40, y - 32 - bar_top);
  for (int j = 0; j < bar_h; ++j) c.rect(bar_x, bar_top + j, 14, 1, viridis(1.0 - double(j) / (bar_h - 1)));
  c.frame(bar_x, bar_top, 14, bar_h, kBlack);
  for (int t = 0; t <= 4; ++t) {
    const int ty = bar_top + bar_h - 1 - (bar_h - 1) * t / 4;
    c.hline(bar_x + 14, bar_x + 17, ty, kBlack);
    c.text(bar_x + 20, ty - 3, tick_label(f.vmin + (f.vmax - f.vmin) * t / 4));
  }
  c.text(bar_x + 56, bar_top + bar_h / 2 + text_width(f.colorbar_label) / 2, f.colorbar_label, 1, kBlack, true);
  return c.take();
}

io::RgbImage render_bar_chart(const BarChart& chart) {
  const size_t n = chart.categories.size();
  if (n == 0 || chart.series.empty()) throw std::invalid_argument("render_bar_chart: nothing to draw");
  double lo = 0, hi = 0;
  for (const BarSeries& s : chart.series) {
    if (s.values.size() != n) throw std::invalid_argument("render_bar_chart: series length != categories");
    for (double v : s.values)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (hi == lo) hi = lo + 1;
  const double step = nice_real_step((hi - lo) / 6);
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi * 1.08 / step) * step;

  const int ns = int(chart.series.size());
  const int bar_w = 22;
  size_t widest = 0;
  for (size_t i = 0; i < n; ++i) {
    widest = std::max(widest, chart.categories[i].size());
    if (i < chart.notes.size()) widest = std::max(widest, chart.notes[i].size());
  }
  const int group_w = std::max(ns * bar_w + 14, int(widest) * kAdvance + 10);
  const int left = 70, top = 10 + 16 + (chart.subtitle.empty() ? 0 : 12) + 14 + 14 * ns, plot_h = 320;
  const int plot_w = group_w * int(n);
  const int width = std::max(left + plot_w + 20, std::max(text_width(chart.title, 2), text_width(chart.subtitle)) + 20);
  const int height = top + plot_h + 44;
  Canvas c(width, height);
  c.text(10, 10, chart.title, 2);
  if (!chart.subtitle.empty()) c.text(10, 30, chart.subtitle);

  auto y_of = [&](double v) { return top + int(std::lround((hi - v) / (hi - lo) * (plot_h - 1))); };
  // Horizontal grid and y ticks.
  for (double t = lo; t <= hi + step / 2; t += step) {
    const int ty = y_of(t);
    for (int x = left; x < left + plot_w; x += 3) c.pixel(x, ty, {200, 200, 200});
    c.hline(left - 4, left - 1, ty, kBlack);
    const std::string l = tick_label(t);
    c.text(left - 6 - text_width(l), ty - 3, l);
  }
  c.text(8, top + plot_h / 2 + text_width(chart.y_label) / 2, chart.y_label, 1, kBlack, true);

  std::vector<Rgb> colours;
  for (int s = 0; s < ns; ++s) colours.push_back(viridis(ns == 1 ? 0.3 : 0.15 + 0.7 * s / (ns - 1)));
  const int zero_y = y_of(0.0);
  for (size_t i = 0; i < n; ++i) {
    const int gx = left + int(i) * group_w + (group_w - ns * bar_w) / 2;
    for (int s = 0; s < ns; ++s) {
      const double v = chart.series[s].values[i];
      if (!std::isfinite(v)) continue;
      const int vy = y_of(v);
      const int x = gx + s * bar_w;
      c.rect(x + 1, std::min(vy, zero_y), bar_w - 2, std::abs(zero_y - vy) + 1, colours[s]);
      const std::string l = fmt::format("{:.1f}", v);
      // Values rotated above the bar, so neighbours never overlap.
      c.text(x + (bar_w - kGlyphH) / 2, (v >= 0 ? vy - 3 : vy + 3 + text_width(l)), l, 1, kBlack, true);
    }
    const std::string& cat = chart.categories[i];
    const int cx = left + int(i) * group_w + group_w / 2;
    c.text(cx - text_width(cat) / 2, top + plot_h + 6, cat);
    if (i < chart.notes.size()) c.text(cx - text_width(chart.notes[i]) / 2, top + plot_h + 18, chart.notes[i], 1, kGrey);
  }
  c.hline(left, left + plot_w - 1, zero_y, kBlack);
  c.vline(left - 1, top, top + plot_h - 1, kBlack);
  // Legend above the plot.
  for (int s = 0; s < ns; ++s) {
    const int ly = top - 14 * (ns - s) - 6;
    c.rect(left, ly, 10, 8, colours[s]);
    c.text(left + 14, ly, chart.series[s].name);
  }
  return c.take();
}

}  // namespace fp4emu::analysis
