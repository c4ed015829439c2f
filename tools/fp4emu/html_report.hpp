#pragma once
// `--report FILE.html`: one self-contained page a person opens in a browser
// (compare, underflow, resq, golden verify). The page loads nothing: styles
// and the small table-sorting script are inline, pictures are data: URIs, and
// a Content-Security-Policy forbids every other source. Every string that can
// come from the input (tensor names, paths, metadata, messages) goes through
// `escape`; the page is written atomically, after everything else is known.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp4emu::cli::html {

// Untrusted text made safe as HTML element content or a quoted attribute
// value: io::printable's rule (no controls, bidirectional overrides or
// invalid UTF-8; at most 4096 bytes shown), then & < > " ' as entities.
std::string escape(std::string_view s);

// Base64 (RFC 4648, with padding) of `bytes`, for data: URIs.
std::string base64(std::span<const uint8_t> bytes);

// One table cell: text, or a number shown as `text` and sorted by `value`
// (NaN: no value, shown as "-" and sorted last either way).
struct Cell {
  std::string text;
  bool numeric = false;
  double value = std::nan("");
  enum class Tone { plain, good, bad, warn } tone = Tone::plain;
};
Cell text(std::string s, Cell::Tone tone = Cell::Tone::plain);
// `shown` empty: the value with 6 significant digits.
Cell number(double v, std::string shown = {});
Cell integer(int64_t v);
// A ratio in [0, 1] shown as a percentage with `decimals` decimals.
Cell percent(double ratio, int decimals = 2);
Cell fixed(double v, int decimals);

// A sortable table: a click on a header (or Enter on it) sorts by that column,
// numbers by value, text in natural order.
struct Table {
  std::string caption;
  std::vector<std::string> columns;
  std::vector<std::string> column_notes;  // tooltip of each header (may be shorter than columns)
  std::vector<std::vector<Cell>> rows;
};

// A table from JSON rows (the objects the command also writes to its JSON
// report), one column per JSON pointer ("/crest/mean"). A missing or null
// value is "-"; arrays (shapes) are shown as [8, 64].
struct JsonColumn {
  enum class Style { text, integer, general, fixed2, fixed4, percent, sci } style;
  std::string pointer;
  std::string header;
  std::string note = {};
};
Table json_table(std::string caption, const nlohmann::ordered_json& rows, std::span<const JsonColumn> columns);

// A picture the command also wrote to a file, shown inline.
struct Figure {
  std::string caption;
  std::string file;  // named under the picture
  std::vector<uint8_t> bytes;
  std::string mime = "image/png";
};

// The command line of this run, shown on every page (run_main sets it).
void set_command_line(int argc, const char* const* argv);

class Page {
 public:
  // `title`: the page's <title> and heading; `subtitle`: one line under it.
  Page(std::string title, std::string subtitle);

  // A section heading (listed in the contents at the top).
  void section(const std::string& heading);
  void paragraph(const std::string& text);
  // Name/value pairs (options, inputs), in the order given.
  void facts(const std::vector<std::pair<std::string, std::string>>& items);
  void bullets(const std::vector<std::string>& items);
  void table(const Table& table);
  void figure(const Figure& figure);
  // Collapsed by default: a summary line the reader clicks to open what
  // follows, up to end_details() (long per-tensor tables).
  void details(const std::string& summary);
  void end_details();

  // The complete document.
  std::string render() const;

 private:
  std::string title_, subtitle_;
  std::vector<std::string> sections_;
  std::string body_;
  int tables_ = 0;
  bool open_details_ = false;
};

// --report FILE.html, described once for every command.
CLI::Option* add_report_option(CLI::App* cmd, std::string& path);
// Before the work: the report can be written there and is none of the inputs.
void check_report_path(const std::string& path, std::span<const std::filesystem::path> inputs);
// The page, written atomically (a failed write leaves no partial page).
void write_page(const std::string& path, const Page& page);

}  // namespace fp4emu::cli::html
