#include "pictures.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "report.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/printable.hpp"

namespace fp4emu::cli {

CLI::Option* add_image_format_option(CLI::App* cmd, std::string& text) {
  return cmd
      ->add_option("--image-format", text,
                   "Pictures as png, svg (vector, same layout) or both; the .csv beside each picture has its numbers")
      ->default_val("png");
}

ImageFormats parse_image_format(const std::string& text) {
  if (text == "png") return {true, false};
  if (text == "svg") return {false, true};
  if (text == "both") return {true, true};
  throw InputError(fmt::format("--image-format '{}' is unknown; use png, svg or both", io::printable(text, 40)));
}

void add_color_options(CLI::App* cmd, std::string& range, std::string& scale) {
  cmd->add_option("--color-range", range,
                  "Values the heatmap colours span: auto (the data's smallest to largest value, rounded out to the "
                  "colour bar's ticks), 0-1, or LO-HI such as 0-0.25 or 1e-4-0.5; values outside take the end colours")
      ->default_val("auto");
  cmd->add_option("--color-scale", scale, "Heatmap colour scale: linear or log (log needs values > 0)")
      ->default_val("linear");
}

namespace {
// A whole string as a finite double, or nothing.
std::optional<double> parse_real(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  double v;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}
}  // namespace

analysis::ColorScale parse_color_scale(const std::string& range, const std::string& scale) {
  analysis::ColorScale c;
  if (scale == "log") c.log = true;
  else if (scale != "linear")
    throw InputError(fmt::format("--color-scale '{}' is unknown; use linear or log", io::printable(scale, 40)));
  if (range == "auto") return c;
  // LO-HI: the '-' that separates them is one that does not start a number
  // or follow an exponent's 'e' ("-1-2", "1e-4-0.5").
  for (size_t i = 1; i < range.size(); ++i) {
    if (range[i] != '-' || range[i - 1] == 'e' || range[i - 1] == 'E') continue;
    const std::optional<double> lo = parse_real(range.substr(0, i)), hi = parse_real(range.substr(i + 1));
    if (!lo || !hi) continue;
    if (!(*lo < *hi))
      throw InputError(fmt::format("--color-range '{}': LO must be below HI", io::printable(range, 40)));
    if (c.log && !(*lo > 0))
      throw InputError(fmt::format("--color-range '{}' with --color-scale log: LO must be above 0",
                                   io::printable(range, 40)));
    c.lo = *lo, c.hi = *hi;
    return c;
  }
  throw InputError(fmt::format("--color-range '{}' is not auto or LO-HI (e.g. 0-1, 0-0.25, 1e-4-0.5)",
                               io::printable(range, 40)));
}

Picture draw_picture(const analysis::HeatmapFigure& figure, ImageFormats formats) {
  return {analysis::render_heatmap(figure), formats.svg ? analysis::render_heatmap_svg(figure) : std::string()};
}

Picture draw_picture(const analysis::BarChart& chart, ImageFormats formats) {
  return {analysis::render_bar_chart(chart), formats.svg ? analysis::render_bar_chart_svg(chart) : std::string()};
}

void write_picture(const std::filesystem::path& dir, const std::string& stem, const Picture& picture,
                   ImageFormats formats, std::vector<std::string>& written) {
  if (formats.png) {
    io::write_png(dir / (stem + ".png"), picture.png);
    written.push_back(stem + ".png");
  }
  if (formats.svg) {
    write_text(dir / (stem + ".svg"), picture.svg);
    written.push_back(stem + ".svg");
  }
}

std::string picture_file(const std::string& stem, ImageFormats formats) {
  return stem + (formats.png ? ".png" : ".svg");
}

html::Figure report_figure(std::string caption, const std::string& stem, const Picture& picture,
                           ImageFormats formats) {
  if (formats.png) return {std::move(caption), picture_file(stem, formats), io::encode_png(picture.png)};
  return {std::move(caption), picture_file(stem, formats), std::vector<uint8_t>(picture.svg.begin(), picture.svg.end()),
          "image/svg+xml"};
}

}  // namespace fp4emu::cli
