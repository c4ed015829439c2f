// Heatmaps and bar charts for the studies (heatmap.hpp), drawn with cairo.
// One drawing function per picture runs twice: first measuring (a Painter
// that only measures text), then drawing onto an image or SVG surface of the
// size it measured, so PNG and SVG share every coordinate.
#include "fp4emu/analysis/heatmap.hpp"

#include <cairo-ft.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <fmt/format.h>
#include <ft2build.h>
#include FT_FREETYPE_H

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>
#include <stdexcept>
#include <string_view>

#ifndef FP4EMU_FONT_FILE
#error "FP4EMU_FONT_FILE (DejaVuSans.ttf) is set by CMakeLists.txt"
#endif

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

const Rgb kBlack{0, 0, 0}, kWhite{255, 255, 255}, kGrey{110, 110, 110}, kGrid{210, 210, 210},
    kNoData{217, 217, 217};

// Font sizes in pixels.
constexpr double kTitleSize = 16, kLabelSize = 12, kTickSize = 11, kValueSize = 10;
constexpr double kMargin = 12;

double line_height(double size) { return std::ceil(size * 1.3); }

// DejaVu Sans from its file (not a fontconfig lookup, which could pick
// another font on another machine). Loaded once; lives for the process.
cairo_font_face_t* font_face() {
  static cairo_font_face_t* const face = [] {
    FT_Library library = nullptr;
    FT_Face ft = nullptr;
    if (FT_Init_FreeType(&library) != 0) throw std::runtime_error("FreeType: cannot initialise");
    if (FT_New_Face(library, FP4EMU_FONT_FILE, 0, &ft) != 0)
      throw std::runtime_error(fmt::format("cannot read the font {} (install Debian's fonts-dejavu-core)",
                                           FP4EMU_FONT_FILE));
    return cairo_ft_font_face_create_for_ft_face(ft, 0);
  }();
  return face;
}

// Text as cairo needs it: valid UTF-8; control characters, and every byte
// >= 0x80 of a string that is not valid UTF-8, drawn as '?'.
std::string drawable(std::string_view s) {
  std::string out(s);
  bool valid = true;
  for (size_t i = 0; i < out.size() && valid;) {
    const auto c = static_cast<unsigned char>(out[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > out.size()) valid = false;
    for (size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(out[i + k]) >> 6) == 0x2;
    i += std::max<size_t>(n, 1);
  }
  for (char& ch : out) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 32 || c == 127 || (!valid && c >= 0x80)) ch = '?';
  }
  return out;
}

// Drawing calls on a cairo context, or (drawing off) text measurement only.
class Painter {
 public:
  Painter(cairo_t* cr, bool drawing) : cr_(cr), drawing_(drawing) {
    cairo_set_font_face(cr_, font_face());
    // Fixed rasterisation of glyphs: the same bytes whatever the machine's
    // font configuration, and outline metrics (no hinting) so that measured
    // widths are the same for PNG and SVG.
    cairo_font_options_t* o = cairo_font_options_create();
    cairo_font_options_set_antialias(o, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_hint_style(o, CAIRO_HINT_STYLE_NONE);
    cairo_font_options_set_hint_metrics(o, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr_, o);
    cairo_font_options_destroy(o);
  }

  void rect(double x, double y, double w, double h, Rgb c) {
    if (!drawing_ || w <= 0 || h <= 0) return;
    set(c);
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
  }
  // A one-pixel outline just outside the rectangle.
  void frame(double x, double y, double w, double h, Rgb c) {
    rect(x - 1, y - 1, w + 2, 1, c);
    rect(x - 1, y + h, w + 2, 1, c);
    rect(x - 1, y, 1, h, c);
    rect(x + w, y, 1, h, c);
  }

  double width(std::string_view s, double size) {
    cairo_set_font_size(cr_, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr_, drawable(s).c_str(), &e);
    return std::ceil(e.x_advance);
  }

  // Text anchored at (x, y): ax = 0, 0.5, 1 puts x at its left, centre or
  // right; ay = 0, 0.5, 1 puts y at the top, middle or bottom of its
  // ascent + descent box. `vertical` turns it 90 degrees counter-clockwise
  // (reading bottom to top) about the anchor.
  void text(double x, double y, std::string_view s, double size, double ax, double ay, Rgb c = kBlack,
            bool vertical = false) {
    if (!drawing_ || s.empty()) return;
    const std::string t = drawable(s);
    cairo_set_font_size(cr_, size);
    cairo_font_extents_t fe;
    cairo_font_extents(cr_, &fe);
    cairo_text_extents_t te;
    cairo_text_extents(cr_, t.c_str(), &te);
    set(c);
    cairo_save(cr_);
    cairo_translate(cr_, x, y);
    if (vertical) cairo_rotate(cr_, -std::numbers::pi / 2);
    cairo_move_to(cr_, -ax * te.x_advance, fe.ascent - ay * (fe.ascent + fe.descent));
    cairo_show_text(cr_, t.c_str());
    cairo_restore(cr_);
  }

 private:
  void set(Rgb c) { cairo_set_source_rgb(cr_, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0); }
  cairo_t* cr_;
  bool drawing_;
};

struct Size {
  int width, height;
};

using SurfacePtr = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using ContextPtr = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

void check(cairo_t* cr) {
  if (cairo_status(cr) != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error(fmt::format("cairo: {}", cairo_status_to_string(cairo_status(cr))));
}

// Measures with `draw`, then draws onto a white surface from `make` of the
// measured size.
template <class Draw, class Make>
SurfacePtr paint(Draw draw, Make make) {
  SurfacePtr scratch(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1), cairo_surface_destroy);
  ContextPtr measure(cairo_create(scratch.get()), cairo_destroy);
  Painter m(measure.get(), false);
  const Size size = draw(m);
  check(measure.get());
  SurfacePtr surface = make(size);
  ContextPtr cr(cairo_create(surface.get()), cairo_destroy);
  cairo_set_source_rgb(cr.get(), 1, 1, 1);
  cairo_paint(cr.get());
  Painter p(cr.get(), true);
  draw(p);
  check(cr.get());
  return surface;
}

template <class Draw>
io::RgbImage raster(Draw draw) {
  SurfacePtr s = paint(draw, [](Size size) {
    return SurfacePtr(cairo_image_surface_create(CAIRO_FORMAT_RGB24, size.width, size.height),
                      cairo_surface_destroy);
  });
  cairo_surface_flush(s.get());
  io::RgbImage img{cairo_image_surface_get_width(s.get()), cairo_image_surface_get_height(s.get()), {}};
  img.pixels.resize(size_t(img.width) * img.height * 3);
  const unsigned char* data = cairo_image_surface_get_data(s.get());
  const int stride = cairo_image_surface_get_stride(s.get());
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      uint32_t px;  // RGB24: one native-endian 0x00RRGGBB word per pixel
      std::memcpy(&px, data + size_t(y) * stride + size_t(x) * 4, 4);
      uint8_t* o = img.pixels.data() + (size_t(y) * img.width + x) * 3;
      o[0] = uint8_t(px >> 16), o[1] = uint8_t(px >> 8), o[2] = uint8_t(px);
    }
  return img;
}

cairo_status_t append(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

// cairo numbers SVG surfaces ("surface12") with a process-wide counter; the
// same picture must give the same bytes, so they are renumbered in order of
// appearance.
std::string renumber_surfaces(const std::string& svg) {
  std::string out;
  std::vector<std::string> seen;
  size_t pos = 0;
  for (size_t at; (at = svg.find("surface", pos)) != std::string::npos;) {
    size_t end = at + 7;
    while (end < svg.size() && svg[end] >= '0' && svg[end] <= '9') ++end;
    out.append(svg, pos, at + 7 - pos);
    if (end > at + 7) {
      const std::string id = svg.substr(at + 7, end - at - 7);
      auto it = std::find(seen.begin(), seen.end(), id);
      if (it == seen.end()) it = seen.insert(seen.end(), id);
      out += std::to_string(it - seen.begin() + 1);
    }
    pos = end;
  }
  out.append(svg, pos);
  return out;
}

template <class Draw>
std::string vector_svg(Draw draw) {
  std::string svg;
  {
    SurfacePtr s = paint(draw, [&svg](Size size) {
      return SurfacePtr(cairo_svg_surface_create_for_stream(append, &svg, size.width, size.height),
                        cairo_surface_destroy);
    });
    cairo_surface_finish(s.get());
    if (cairo_surface_status(s.get()) != CAIRO_STATUS_SUCCESS)
      throw std::runtime_error(fmt::format("cairo SVG: {}", cairo_status_to_string(cairo_surface_status(s.get()))));
  }
  return renumber_surfaces(svg);
}

// A tick or axis label: integers without decimals, others with 3 digits.
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

// The smallest of 1, 2, 2.5, 5 times a power of ten that is >= x > 0.
double nice_real_step(double x) {
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= x * (1 - 1e-12)) return m * p;
  return 10 * p;
}

// ---- colour scale -----------------------------------------------------------

// The scale with its ticks; t() maps a value to [0, 1] (NaN stays NaN).
struct Scale {
  double lo, hi;
  bool log;
  std::vector<double> ticks;
  double t(double v) const {
    if (std::isnan(v)) return v;
    if (!log) return (v - lo) / (hi - lo);
    if (v <= 0) return 0;
    return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  }
};

// 1, 2 and 5 times powers of ten: the largest <= v (down) or smallest >= v.
double round_125(double v, bool down) {
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  const double ms[] = {1, 2, 5, 10};
  if (down) {
    double r = p;
    for (double m : ms)
      if (m * p <= v * (1 + 1e-12)) r = m * p;
    return r;
  }
  for (double m : ms)
    if (m * p >= v * (1 - 1e-12)) return m * p;
  return 10 * p;
}

Scale resolve_scale(const HeatmapFigure& f) {
  const ColorScale& c = f.color;
  double dlo = INFINITY, dhi = -INFINITY;
  for (const HeatmapPanel& p : f.panels)
    for (double v : p.values)
      if (std::isfinite(v) && (!c.log || v > 0)) dlo = std::min(dlo, v), dhi = std::max(dhi, v);
  if (dlo > dhi) dlo = c.log ? 0.01 : 0, dhi = 1;  // no data: a neutral range
  Scale s{c.lo.value_or(dlo), c.hi.value_or(dhi), c.log, {}};
  if (!std::isfinite(s.lo) || !std::isfinite(s.hi) || (c.lo && c.hi && !(s.lo < s.hi)))
    throw std::invalid_argument(fmt::format("colour range {}..{}: needs finite ends with lo < hi", s.lo, s.hi));
  if (c.log && !(s.lo > 0))
    throw std::invalid_argument(fmt::format("colour range {}..{}: a log scale needs lo > 0", s.lo, s.hi));
  if (!c.log) {
    if (!(s.lo < s.hi)) {  // one value (or an end given beyond the data): a range around it
      const double pad = s.lo == 0 ? 1 : std::fabs(s.lo) * 0.1;
      if (!c.hi) s.hi = s.lo + pad;
      else s.lo = s.hi - pad;
    }
    const double step = nice_real_step((s.hi - s.lo) / 5);
    if (!c.lo) s.lo = std::floor(s.lo / step + 1e-9) * step;
    if (!c.hi) s.hi = std::ceil(s.hi / step - 1e-9) * step;
    for (int64_t k = int64_t(std::ceil(s.lo / step - 1e-9)); k * step <= s.hi * (1 + 1e-12) + 1e-300; ++k)
      s.ticks.push_back(double(k) * step);
  } else {
    if (!(s.lo < s.hi)) {
      if (!c.lo) s.lo = s.hi / 10;
      else s.hi = s.lo * 10;
    }
    if (!c.lo) s.lo = round_125(s.lo, true);
    if (!c.hi) s.hi = round_125(s.hi, false);
    const int e0 = int(std::floor(std::log10(s.lo))), e1 = int(std::ceil(std::log10(s.hi)));
    const bool decades_only = e1 - e0 > 3;
    for (int e = e0; e <= e1; ++e)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if ((m == 1 || !decades_only) && v >= s.lo * (1 - 1e-12) && v <= s.hi * (1 + 1e-12)) s.ticks.push_back(v);
      }
  }
  return s;
}

// The colour of a value on the scale, and the text colour that reads on it.
Rgb cell_colour(const Scale& s, double v) { return viridis(s.t(v)); }
Rgb ink_on(Rgb c) { return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2] < 140 ? kWhite : kBlack; }

// ---- heatmap ----------------------------------------------------------------

int cell_height(const HeatmapPanel& p) {
  return !p.row_labels.empty() ? 24 : std::clamp(360 / std::max(p.rows, 1), 1, 24);
}

// The title at the top left and the grey subtitle (if any) under it; returns
// the y below them, and `right` is where the longer line ends.
double draw_heading(Painter& pt, const std::string& title, const std::string& subtitle, double& right) {
  double y = kMargin;
  pt.text(kMargin, y, title, kTitleSize, 0, 0);
  right = kMargin + pt.width(title, kTitleSize);
  y += line_height(kTitleSize);
  if (!subtitle.empty()) {
    pt.text(kMargin, y, subtitle, kLabelSize, 0, 0, kGrey);
    right = std::max(right, kMargin + pt.width(subtitle, kLabelSize));
    y += line_height(kLabelSize);
  }
  return y;
}

Size draw_heatmap(const HeatmapFigure& f, const Scale& s, Painter& pt) {
  int max_cols = 1;
  for (const HeatmapPanel& p : f.panels) max_cols = std::max(max_cols, p.cols);
  const int cell_w = std::clamp(f.max_plot_width / max_cols, 1, 48);
  // Cell values with one number of decimals for the whole figure (3
  // significant digits of the largest magnitude), so that columns align and
  // 0.40 does not read as a rounder number than 0.41.
  double vmax_abs = 0;
  for (const HeatmapPanel& p : f.panels)
    for (double v : p.values)
      if (std::isfinite(v)) vmax_abs = std::max(vmax_abs, std::fabs(v));
  const int decimals = vmax_abs > 0 ? std::clamp(2 - int(std::floor(std::log10(vmax_abs))), 0, 6) : 0;

  // Left of the cells: the rotated y label, then the row labels.
  double row_label_w = 0;
  for (const HeatmapPanel& p : f.panels) {
    for (const std::string& l : p.row_labels) row_label_w = std::max(row_label_w, pt.width(l, kTickSize));
    if (p.row_labels.empty())
      for (int r = 0; r < p.rows; ++r)
        row_label_w = std::max(row_label_w, pt.width(tick_label(p.row_origin + r * p.row_step), kTickSize));
  }
  const double left = kMargin + line_height(kLabelSize) + 6 + row_label_w + 6;

  double right = 0;
  double y = draw_heading(pt, f.title, f.subtitle, right) + 8;

  double plots_right = left;
  for (const HeatmapPanel& p : f.panels)
    plots_right = std::max({plots_right, left + double(cell_w) * p.cols, left + pt.width(p.title, kLabelSize)});
  double bar_top = 0, bar_bottom = 0;
  for (size_t k = 0; k < f.panels.size(); ++k) {
    const HeatmapPanel& p = f.panels[k];
    const int cell_h = cell_height(p);
    const double plot_w = double(cell_w) * p.cols, plot_h = double(cell_h) * p.rows;
    pt.text(left, y, p.title, kLabelSize, 0, 0);
    y += line_height(kLabelSize) + 2;
    if (k == 0) bar_top = y;
    for (int r = 0; r < p.rows; ++r)
      for (int c = 0; c < p.cols; ++c) {
        const double v = p.values[size_t(r) * p.cols + c];
        const Rgb colour = cell_colour(s, v);
        const double x0 = left + double(c) * cell_w, y0 = y + double(r) * cell_h;
        // Each cell reaches one unit into the next cell, drawn later: in SVG,
        // abutting rectangles leave anti-aliased seams that read as a grid; the
        // PNG's pixels are the same either way.
        pt.rect(x0, y0, cell_w + (c + 1 < p.cols), cell_h + (r + 1 < p.rows), colour);
        // The value itself where it fits: the colour alone is hard to read.
        if (std::isfinite(v) && cell_h >= kValueSize + 6) {
          const std::string l = fmt::format("{:.{}f}", v, decimals);
          if (pt.width(l, kValueSize) + 4 <= cell_w)
            pt.text(x0 + cell_w / 2.0, y0 + cell_h / 2.0, l, kValueSize, 0.5, 0.5, ink_on(colour));
        }
      }
    pt.frame(left, y, plot_w, plot_h, kBlack);
    if (!p.row_labels.empty()) {
      for (int r = 0; r < p.rows; ++r)
        pt.text(left - 6, y + r * cell_h + cell_h / 2.0, p.row_labels[r], kTickSize, 1, 0.5);
    } else {  // numeric rows: ticks at least 16 pixels apart
      const int step = nice_step(16.0 / cell_h);
      for (int r = 0; r < p.rows; r += step) {
        const double ty = y + r * cell_h + cell_h / 2.0;
        pt.rect(left - 4, std::floor(ty), 3, 1, kBlack);
        pt.text(left - 6, ty, tick_label(p.row_origin + r * p.row_step), kTickSize, 1, 0.5);
      }
    }
    pt.text(kMargin, y + plot_h / 2, p.y_label, kLabelSize, 0.5, 0, kBlack, true);
    // Column ticks far enough apart for their labels.
    double widest = 0;
    for (int c = 0; c < p.cols; ++c)
      widest = std::max(widest, pt.width(tick_label(p.col_origin + c * p.col_step), kTickSize));
    const int step = nice_step((widest + 10) / cell_w);
    for (int c = 0; c < p.cols; c += step) {
      const double tx = left + c * cell_w + cell_w / 2.0;
      pt.rect(std::floor(tx), y + plot_h + 1, 1, 3, kBlack);
      pt.text(tx, y + plot_h + 5, tick_label(p.col_origin + c * p.col_step), kTickSize, 0.5, 0);
    }
    pt.text(left + plot_w / 2, y + plot_h + 5 + line_height(kTickSize), p.x_label, kLabelSize, 0.5, 0);
    bar_bottom = y + plot_h;
    y += plot_h + 5 + line_height(kTickSize) + line_height(kLabelSize) + 10;
  }

  // Colour bar beside the panels, from the first panel's cells to the last's.
  const double bar_x = plots_right + 24, bar_w = 16;
  const double bar_h = std::max(80.0, bar_bottom - bar_top);
  y = std::max(y, bar_top + bar_h + 10);
  for (int j = 0; j < int(bar_h); ++j)  // overlapping rows, as the cells above
    pt.rect(bar_x, bar_top + j, bar_w, j + 1 < int(bar_h) ? 2 : 1, viridis(1.0 - j / (bar_h - 1)));
  pt.frame(bar_x, bar_top, bar_w, int(bar_h), kBlack);
  double tick_w = 0;
  for (double v : s.ticks) {
    const double ty = bar_top + (bar_h - 1) * (1 - s.t(v));
    pt.rect(bar_x + bar_w, std::round(ty), 4, 1, kBlack);
    pt.text(bar_x + bar_w + 6, ty, tick_label(v), kTickSize, 0, 0.5);
    tick_w = std::max(tick_w, pt.width(tick_label(v), kTickSize));
  }
  const double label_x = bar_x + bar_w + 6 + tick_w + 8;
  const std::string label = f.colorbar_label + (s.log ? " (log scale)" : "");
  pt.text(label_x, bar_top + bar_h / 2, label, kLabelSize, 0.5, 0, kBlack, true);
  right = std::max(right, label_x + line_height(kLabelSize));
  return {int(std::ceil(right + kMargin)), int(std::ceil(y - 10 + kMargin))};
}

void check_panels(const HeatmapFigure& f) {
  if (f.panels.empty()) throw std::invalid_argument("render_heatmap: no panels");
  for (const HeatmapPanel& p : f.panels)
    if (p.rows <= 0 || p.cols <= 0 || p.values.size() != size_t(p.rows) * p.cols ||
        (!p.row_labels.empty() && p.row_labels.size() != size_t(p.rows)))
      throw std::invalid_argument("render_heatmap: panel values or row labels do not match rows x cols");
}

// ---- bar chart ----------------------------------------------------------------

Size draw_bar_chart(const BarChart& chart, Painter& pt) {
  const size_t n = chart.categories.size();
  double lo = 0, hi = 0;
  for (const BarSeries& s : chart.series)
    for (double v : s.values)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (hi == lo) hi = lo + 1;
  const double step = nice_real_step((hi - lo) / 6);
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi * 1.12 / step) * step;

  const int ns = int(chart.series.size());
  const double bar_w = 24;
  double widest = 0;
  for (size_t i = 0; i < n; ++i) {
    widest = std::max(widest, pt.width(chart.categories[i], kTickSize));
    if (i < chart.notes.size()) widest = std::max(widest, pt.width(chart.notes[i], kTickSize));
  }
  double tick_w = 0;
  for (double t = lo; t <= hi + step / 2; t += step) tick_w = std::max(tick_w, pt.width(tick_label(t), kTickSize));
  const double group_w = std::max(ns * bar_w + 16, widest + 12);
  const double left = kMargin + line_height(kLabelSize) + 6 + tick_w + 6;
  double right = 0;
  double top = draw_heading(pt, chart.title, chart.subtitle, right) + 6;
  // Legend above the plot, one line per series.
  std::vector<Rgb> colours;
  for (int s = 0; s < ns; ++s) colours.push_back(viridis(ns == 1 ? 0.3 : 0.1 + 0.75 * s / (ns - 1)));
  for (int s = 0; s < ns; ++s) {
    pt.rect(left, top + 3, 12, 10, colours[s]);
    pt.text(left + 18, top + 8, chart.series[s].name, kTickSize, 0, 0.5);
    right = std::max(right, left + 18 + pt.width(chart.series[s].name, kTickSize));
    top += line_height(kTickSize) + 2;
  }
  top += 8;
  const double plot_h = 320, plot_w = group_w * double(n);
  auto y_of = [&](double v) { return top + std::round((hi - v) / (hi - lo) * (plot_h - 1)); };
  for (double t = lo; t <= hi + step / 2; t += step) {
    const double ty = y_of(t);
    for (double x = left; x < left + plot_w; x += 4) pt.rect(x, ty, 2, 1, kGrid);
    pt.rect(left - 5, ty, 4, 1, kBlack);
    pt.text(left - 7, ty, tick_label(t), kTickSize, 1, 0.5);
  }
  pt.text(kMargin, top + plot_h / 2, chart.y_label, kLabelSize, 0.5, 0, kBlack, true);

  const double zero_y = y_of(0.0);
  for (size_t i = 0; i < n; ++i) {
    const double gx = left + double(i) * group_w + (group_w - ns * bar_w) / 2;
    for (int s = 0; s < ns; ++s) {
      const double v = chart.series[s].values[i];
      if (!std::isfinite(v)) continue;
      const double vy = y_of(v);
      const double x = gx + s * bar_w;
      pt.rect(x + 1, std::min(vy, zero_y), bar_w - 2, std::abs(zero_y - vy) + 1, colours[s]);
      // Values rotated above (below, for negative bars) the bar, so that
      // neighbours never overlap.
      pt.text(x + bar_w / 2, v >= 0 ? vy - 3 : vy + 3, fmt::format("{:.1f}", v), kValueSize, v >= 0 ? 0 : 1, 0.5,
              kBlack, true);
    }
    const double cx = left + double(i) * group_w + group_w / 2;
    pt.text(cx, top + plot_h + 6, chart.categories[i], kTickSize, 0.5, 0);
    if (i < chart.notes.size())
      pt.text(cx, top + plot_h + 6 + line_height(kTickSize), chart.notes[i], kTickSize, 0.5, 0, kGrey);
  }
  pt.rect(left, zero_y, plot_w, 1, kBlack);
  pt.rect(left - 1, top, 1, plot_h, kBlack);
  right = std::max(right, left + plot_w);
  const double bottom = top + plot_h + 6 + 2 * line_height(kTickSize);
  return {int(std::ceil(right + kMargin)), int(std::ceil(bottom + kMargin))};
}

void check_chart(const BarChart& chart) {
  if (chart.categories.empty() || chart.series.empty()) throw std::invalid_argument("render_bar_chart: nothing to draw");
  for (const BarSeries& s : chart.series)
    if (s.values.size() != chart.categories.size())
      throw std::invalid_argument("render_bar_chart: series length != categories");
}

}  // namespace

Rgb viridis(double t) {
  if (std::isnan(t)) return kNoData;
  t = std::clamp(t, 0.0, 1.0);
  const uint32_t v = kViridis[std::min(255, int(t * 255.0 + 0.5))];
  return {uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
}

std::array<double, 2> color_range(const HeatmapFigure& figure) {
  const Scale s = resolve_scale(figure);
  return {s.lo, s.hi};
}

io::RgbImage render_heatmap(const HeatmapFigure& figure) {
  check_panels(figure);
  const Scale s = resolve_scale(figure);
  return raster([&](Painter& p) { return draw_heatmap(figure, s, p); });
}

std::string render_heatmap_svg(const HeatmapFigure& figure) {
  check_panels(figure);
  const Scale s = resolve_scale(figure);
  return vector_svg([&](Painter& p) { return draw_heatmap(figure, s, p); });
}

io::RgbImage render_bar_chart(const BarChart& chart) {
  check_chart(chart);
  return raster([&](Painter& p) { return draw_bar_chart(chart, p); });
}

std::string render_bar_chart_svg(const BarChart& chart) {
  check_chart(chart);
  return vector_svg([&](Painter& p) { return draw_bar_chart(chart, p); });
}

}  // namespace fp4emu::analysis
