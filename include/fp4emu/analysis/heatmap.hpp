#pragma once
// Pictures for the studies: heatmaps with a colour bar and bar charts, drawn
// with cairo as PNG (an RGB image, written with io::write_png) or SVG. Text
// is DejaVu Sans (Debian's fonts-dejavu-core), read from its file with fixed
// hinting and antialiasing, so a picture's bytes depend only on its data and
// the cairo, FreeType and font versions.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp4emu/io/png.hpp"

namespace fp4emu::analysis {

using Rgb = std::array<uint8_t, 3>;

// Viridis (perceptually uniform, readable in greyscale and by colour-blind
// readers): t in [0, 1] -> colour; values outside are clamped. NaN -> light
// grey, the "no data" colour.
Rgb viridis(double t);

// One heatmap panel: rows x cols values, row-major, NaN for "no data".
struct HeatmapPanel {
  std::string title;
  int rows = 0;
  int cols = 0;
  std::vector<double> values;
  std::vector<std::string> row_labels;  // categorical rows; empty: numeric rows
  double row_origin = 0, row_step = 1;  // numeric row r is labelled row_origin + r * row_step
  double col_origin = 0, col_step = 1;  // column c is labelled col_origin + c * col_step
  std::string x_label, y_label;
};

// The values the colours span. Unset ends come from the data: the smallest
// and largest finite value over every panel, rounded out to the colour bar's
// ticks. Values outside [lo, hi] take the end colours.
struct ColorScale {
  std::optional<double> lo, hi;
  bool log = false;  // log10 spacing; needs lo > 0 (auto: the smallest value > 0; values <= 0 take lo's colour)
};

struct HeatmapFigure {
  std::string title;                 // first line of the title
  std::string subtitle;              // second line (may be empty)
  std::vector<HeatmapPanel> panels;  // stacked top to bottom, sharing the colour scale
  ColorScale color;
  std::string colorbar_label;
  int max_plot_width = 960;          // pixels for the widest panel's cells
};

// The [lo, hi] a figure's colours span (ColorScale resolved against its data).
// std::invalid_argument for a range that is empty, not finite, or not > 0 on a
// log scale.
std::array<double, 2> color_range(const HeatmapFigure& figure);

// Each cell shows its value (decimals for 3 significant digits of the
// figure's largest magnitude) when the cell is large enough for the text;
// the colour bar carries ticks at round values.
io::RgbImage render_heatmap(const HeatmapFigure& figure);
std::string render_heatmap_svg(const HeatmapFigure& figure);

struct BarSeries {
  std::string name;            // legend entry
  std::vector<double> values;  // one per category; NaN draws no bar
};

struct BarChart {
  std::string title;
  std::string subtitle;
  std::string y_label;
  std::vector<std::string> categories;  // x axis
  std::vector<std::string> notes;       // a second label line under each category (may be empty)
  std::vector<BarSeries> series;        // grouped bars, one colour per series
};

// Bars start at 0 (values below 0 are drawn down from the axis); the y range
// covers every finite value with a margin, and each bar carries its value.
io::RgbImage render_bar_chart(const BarChart& chart);
std::string render_bar_chart_svg(const BarChart& chart);

}  // namespace fp4emu::analysis
