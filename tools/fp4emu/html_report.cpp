#include "html_report.hpp"

#include <fmt/format.h>

#include <array>

#include <unistd.h>

#include "cli.hpp"
#include "fp4emu/error.hpp"
#include "report.hpp"
#include "fp4emu/golden/sha256.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/printable.hpp"
#include "fp4emu/version.hpp"

namespace fp4emu::cli::html {

std::string escape(std::string_view s) {
  const std::string safe = io::printable(s, 4096);
  std::string out;
  out.reserve(safe.size());
  for (char c : safe) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string base64(std::span<const uint8_t> bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = uint32_t(bytes[i]) << 16 | uint32_t(bytes[i + 1]) << 8 | bytes[i + 2];
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    const uint32_t v = uint32_t(bytes[i]) << 16 | (rest == 2 ? uint32_t(bytes[i + 1]) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// ---- cells ---------------------------------------------------------------------

Cell text(std::string s, Cell::Tone tone) {
  Cell c;
  c.text = std::move(s);
  c.tone = tone;
  return c;
}

Cell number(double v, std::string shown) {
  Cell c;
  c.numeric = true;
  c.value = v;
  if (std::isnan(v)) c.text = "-";
  else if (!shown.empty()) c.text = std::move(shown);
  else if (std::isinf(v)) c.text = v > 0 ? "inf" : "-inf";
  else c.text = fmt::format("{:.6g}", v);
  return c;
}

Cell integer(int64_t v) { return number(double(v), std::to_string(v)); }

Cell percent(double ratio, int decimals) {
  return number(ratio, std::isfinite(ratio) ? fmt::format("{:.{}f}%", 100.0 * ratio, decimals) : std::string());
}

Cell fixed(double v, int decimals) {
  return number(v, std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : std::string());
}

Table json_table(std::string caption, const nlohmann::ordered_json& rows, std::span<const JsonColumn> columns) {
  using Style = JsonColumn::Style;
  Table t;
  t.caption = std::move(caption);
  for (const JsonColumn& c : columns) {
    t.columns.push_back(c.header);
    t.column_notes.push_back(c.note);
  }
  for (const auto& row : rows) {
    std::vector<Cell> cells;
    for (const JsonColumn& c : columns) {
      const nlohmann::json_pointer<std::string> ptr(c.pointer);
      const nlohmann::ordered_json* v = row.contains(ptr) ? &row.at(ptr) : nullptr;
      if (c.style == Style::text) {
        cells.push_back(text(!v || v->is_null() ? "-" : v->is_string() ? v->get<std::string>() : v->dump()));
        continue;
      }
      const double x = v && v->is_number() ? v->get<double>() : std::nan("");
      switch (c.style) {
        case Style::integer: cells.push_back(v && v->is_number() ? integer(v->get<int64_t>()) : number(x)); break;
        case Style::fixed2: cells.push_back(fixed(x, 2)); break;
        case Style::fixed4: cells.push_back(fixed(x, 4)); break;
        case Style::percent: cells.push_back(percent(x)); break;
        case Style::sci: cells.push_back(number(x, std::isfinite(x) ? fmt::format("{:.3e}", x) : "")); break;
        default: cells.push_back(number(x)); break;
      }
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

namespace {

std::string& command_line() {
  static std::string line;
  return line;
}

// The sort key of a numeric cell, as JavaScript's Number() reads it.
std::string sort_key(double v) {
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return fmt::format("{:.17g}", v);
}

std::string tone_class(Cell::Tone t) {
  switch (t) {
    case Cell::Tone::good: return "good";
    case Cell::Tone::bad: return "bad";
    case Cell::Tone::warn: return "warn";
    case Cell::Tone::plain: break;
  }
  return "";
}

// System fonts only (the page loads no font); tables scroll inside their box,
// and a cell breaks only inside a word longer than the box (break-word, not
// anywhere), so tensor names and paths stay whole.
constexpr const char* kStyle = R"(
:root { color-scheme: light; --line: #d0d7de; --head: #f3f5f7; --muted: #57606a; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1280px; padding: 24px 32px 48px; color: #1f2328; background: #fff;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif; }
h1 { font-size: 24px; margin: 0 0 4px; overflow-wrap: anywhere; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
p.subtitle { margin: 0 0 12px; color: var(--muted); overflow-wrap: anywhere; }
nav { margin: 8px 0 16px; padding: 8px 12px; background: var(--head); border-radius: 6px; }
nav a { margin-right: 16px; white-space: nowrap; color: #0969da; text-decoration: none; }
nav a:hover { text-decoration: underline; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.facts dt { font-weight: 600; color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; font-family: ui-monospace, "DejaVu Sans Mono", monospace;
  font-size: 13px; }
div.scroll { width: fit-content; max-width: 100%; max-height: 560px; overflow: auto; border: 1px solid var(--line);
  border-radius: 6px; margin: 4px 0 16px; }
table { border-collapse: collapse; font-size: 13px; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 6px 8px; background: #fff; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eaeef2; text-align: left; vertical-align: top; }
th { position: sticky; top: 0; background: var(--head); border-bottom: 1px solid var(--line); cursor: pointer;
  user-select: none; white-space: nowrap; }
th:hover { background: #e6eaef; }
th::after { content: " \2195"; color: #afb8c1; }
th[aria-sort=ascending]::after { content: " \25B2"; color: #1f2328; }
th[aria-sort=descending]::after { content: " \25BC"; color: #1f2328; }
td { overflow-wrap: break-word; max-width: 60em; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #f8f9fa; }
tbody tr:hover { background: #eef4ff; }
td.good { color: #1a7f37; font-weight: 600; }
td.bad { color: #cf222e; font-weight: 600; }
td.warn { color: #9a6700; font-weight: 600; }
figure { margin: 8px 0 24px; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); margin-top: 4px; }
details { margin: 8px 0; }
summary { cursor: pointer; font-weight: 600; }
ul { margin: 4px 0 8px; padding-left: 22px; }
li { overflow-wrap: anywhere; }
pre.cmd { margin: 0 0 12px; padding: 6px 10px; background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px;
  white-space: pre-wrap; overflow-wrap: anywhere; font: 13px ui-monospace, "DejaVu Sans Mono", monospace; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
)";

// Sorting: numeric columns by data-v (cells without one last), the others by
// their text in natural order; a second click reverses. Stable (Array sort).
constexpr const char* kScript = R"(
(function () {
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
    var up = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    var numeric = th.classList.contains("num"), sign = up ? 1 : -1;
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col], y = b.cells[col];
      if (numeric) {
        var u = x.getAttribute("data-v"), v = y.getAttribute("data-v");
        if (u === null || v === null) return (u === null) - (v === null);
        return sign * (Number(u) - Number(v));
      }
      return sign * x.textContent.localeCompare(y.textContent, undefined, { numeric: true });
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable th").forEach(function (th) {
    th.tabIndex = 0;
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(th); }
    });
  });
})();
)";

}  // namespace

void set_command_line(int argc, const char* const* argv) {
  std::string line = "fp4emu";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // Quoted as a POSIX shell would need it, so the line can be pasted back.
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789-_./=:,+@%") == std::string_view::npos;
    if (plain) {
      line += " " + std::string(arg);
      continue;
    }
    line += " '";
    for (char ch : arg) line += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    line += "'";
  }
  command_line() = line;
}

// ---- page ----------------------------------------------------------------------

Page::Page(std::string title, std::string subtitle) : title_(std::move(title)), subtitle_(std::move(subtitle)) {}

void Page::section(const std::string& heading) {
  if (open_details_) end_details();
  sections_.push_back(heading);
  body_ += fmt::format("<h2 id=\"s{}\">{}</h2>\n", sections_.size(), escape(heading));
}

void Page::paragraph(const std::string& text) { body_ += "<p>" + escape(text) + "</p>\n"; }

void Page::facts(const std::vector<std::pair<std::string, std::string>>& items) {
  body_ += "<dl class=\"facts\">\n";
  for (const auto& [name, value] : items)
    body_ += fmt::format("<dt>{}</dt><dd>{}</dd>\n", escape(name), value.empty() ? "-" : escape(value));
  body_ += "</dl>\n";
}

void Page::bullets(const std::vector<std::string>& items) {
  body_ += "<ul>\n";
  for (const std::string& item : items) body_ += "<li>" + escape(item) + "</li>\n";
  body_ += "</ul>\n";
}

void Page::table(const Table& t) {
  // A column is numeric when every cell in it is a number.
  std::vector<bool> numeric(t.columns.size(), !t.rows.empty());
  for (const auto& row : t.rows)
    for (size_t c = 0; c < numeric.size(); ++c)
      if (c >= row.size() || !row[c].numeric) numeric[c] = false;
  ++tables_;
  body_ += fmt::format("<div class=\"scroll\"><table class=\"sortable\" id=\"t{}\">\n", tables_);
  if (!t.caption.empty()) body_ += "<caption>" + escape(t.caption) + "</caption>\n";
  body_ += "<thead><tr>";
  for (size_t c = 0; c < t.columns.size(); ++c) {
    const std::string note =
        c < t.column_notes.size() && !t.column_notes[c].empty() ? " title=\"" + escape(t.column_notes[c]) + "\"" : "";
    body_ += fmt::format("<th scope=\"col\"{}{}>{}</th>", numeric[c] ? " class=\"num\"" : "", note,
                         escape(t.columns[c]));
  }
  body_ += "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows) {
    body_ += "<tr>";
    for (size_t c = 0; c < t.columns.size(); ++c) {
      if (c >= row.size()) {
        body_ += "<td></td>";
        continue;
      }
      const Cell& cell = row[c];
      std::string cls = tone_class(cell.tone);
      if (numeric[c]) cls += cls.empty() ? "num" : " num";
      std::string attrs = cls.empty() ? "" : " class=\"" + cls + "\"";
      if (numeric[c] && !std::isnan(cell.value)) attrs += " data-v=\"" + sort_key(cell.value) + "\"";
      body_ += fmt::format("<td{}>{}</td>", attrs, escape(cell.text));
    }
    body_ += "</tr>\n";
  }
  body_ += "</tbody></table></div>\n";
}

void Page::figure(const Figure& f) {
  body_ += fmt::format("<figure><img alt=\"{}\" src=\"data:{};base64,{}\"><figcaption>{} ({})</figcaption></figure>\n",
                       escape(f.caption), escape(f.mime), base64(f.bytes), escape(f.caption), escape(f.file));
}

void Page::details(const std::string& summary) {
  if (open_details_) end_details();
  body_ += "<details><summary>" + escape(summary) + "</summary>\n";
  open_details_ = true;
}

void Page::end_details() {
  if (!open_details_) return;
  body_ += "</details>\n";
  open_details_ = false;
}

namespace {

// A CSP source for an inline element: only this exact text may run or style
// the page, so markup that ever slipped past `escape` would stay inert.
std::string csp_hash(std::string_view text) {
  golden::Sha256 h;
  h.update({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  const std::array<uint8_t, 32> d = h.digest();
  return "'sha256-" + base64(d) + "'";
}

}  // namespace

std::string Page::render() const {
  std::string nav;
  for (size_t i = 0; i < sections_.size(); ++i)
    nav += fmt::format("<a href=\"#s{}\">{}</a>", i + 1, escape(sections_[i]));
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // Nothing but this style, this script and data: images may load.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
      "style-src {}; script-src {}\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"fp4emu {}\">\n<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n"
      "<h1>{}</h1>\n<p class=\"subtitle\">{}</p>\n{}<nav>{}</nav>\n{}{}"
      "<footer>Written by fp4emu {}. Click a column header to sort the table by it.</footer>\n"
      "<script>{}</script>\n</body>\n</html>\n",
      csp_hash(kStyle), csp_hash(kScript), kVersion, escape(title_), kStyle, escape(title_), escape(subtitle_),
      command_line().empty() ? "" : "<pre class=\"cmd\">$ " + escape(command_line()) + "</pre>\n", nav, body_,
      open_details_ ? "</details>\n" : "", kVersion, kScript);
}

// ---- option and output ---------------------------------------------------------

CLI::Option* add_report_option(CLI::App* cmd, std::string& path) {
  return cmd->add_option("--report", path,
                         "Also write one self-contained HTML page (options, inputs, sortable tables, pictures "
                         "inline; loads nothing from the network) to this file");
}

void check_report_path(const std::string& path, std::span<const std::filesystem::path> inputs) {
  if (path.empty()) return;
  for (const std::filesystem::path& input : inputs) check_not_an_input(path, "--report", {input});
  io::check_output_path(path, "--report");
  // The page is written after the study's other outputs: a name the file
  // system refuses must fail here, before any of them is written.
  const std::filesystem::path p(path), dir = p.has_parent_path() ? p.parent_path() : ".";
  const long name_max = pathconf(dir.c_str(), _PC_NAME_MAX);
  if (p.filename().string().size() > size_t(name_max > 0 ? name_max : 255))
    throw InputError(fmt::format("--report {}: the file name is longer than the {} bytes its folder allows",
                                 io::printable(path), name_max > 0 ? name_max : 255));
}

void write_page(const std::string& path, const Page& page) { write_text(path, page.render()); }

}  // namespace fp4emu::cli::html
