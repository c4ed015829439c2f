#pragma once
// Pictures for the studies: heatmaps with a colour bar and bar charts, drawn
// into an RGB image (written with io::write_png). Text uses a built-in 5x7
// bitmap font (printable ASCII), so the images need no font files and are
// byte-identical on every machine.
#include <array>
#include <cstdint>
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

struct HeatmapFigure {
  std::string title;                 // first line of the title
  std::string subtitle;              // second line (may be empty)
  std::vector<HeatmapPanel> panels;  // stacked top to bottom, sharing the colour scale
  double vmin = 0.0, vmax = 1.0;     // fixed colour scale
  std::string colorbar_label;
  int max_plot_width = 960;          // pixels for the widest panel's cells
};

io::RgbImage render_heatmap(const HeatmapFigure& figure);

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

}  // namespace fp4emu::analysis
