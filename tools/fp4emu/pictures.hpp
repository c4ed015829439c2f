#pragma once
// The studies' pictures on disk: --image-format (png | svg | both) and the
// heatmaps' --color-range / --color-scale, one declaration and one parser each.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fp4emu/analysis/heatmap.hpp"
#include "fp4emu/io/png.hpp"
#include "html_report.hpp"

namespace fp4emu::cli {

struct ImageFormats {
  bool png = true, svg = false;
};

// --image-format png|svg|both (default png).
CLI::Option* add_image_format_option(CLI::App* cmd, std::string& text);
// InputError naming --image-format for anything else.
ImageFormats parse_image_format(const std::string& text);

// --color-range auto|0-1|LO-HI and --color-scale linear|log.
void add_color_options(CLI::App* cmd, std::string& range, std::string& scale);
// InputError naming the option for a malformed range, lo >= hi, or a log
// scale with lo <= 0.
analysis::ColorScale parse_color_scale(const std::string& range, const std::string& scale);

// One picture in memory before anything is written: the PNG pixels (always
// drawn; --report pages embed them) and the SVG text when it is asked for.
struct Picture {
  io::RgbImage png;
  std::string svg;
};
Picture draw_picture(const analysis::HeatmapFigure& figure, ImageFormats formats);
Picture draw_picture(const analysis::BarChart& chart, ImageFormats formats);

// Writes `stem`.png and/or `stem`.svg into `dir` (atomically) and appends the
// names written to `written`.
void write_picture(const std::filesystem::path& dir, const std::string& stem, const Picture& picture,
                   ImageFormats formats, std::vector<std::string>& written);

// The first file write_picture writes for `stem`: `stem`.png, or `stem`.svg
// when only SVG is asked for.
std::string picture_file(const std::string& stem, ImageFormats formats);
// The picture as a --report page shows it: the bytes of picture_file (the
// PNG, or the SVG itself), so the page names only a file that was written.
html::Figure report_figure(std::string caption, const std::string& stem, const Picture& picture,
                           ImageFormats formats);

}  // namespace fp4emu::cli
