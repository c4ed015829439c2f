// --report FILE.html: the page writer (escaping, base64, sortable tables) and
// the pages of compare, underflow, resq and golden verify, made from dumps
// and candidates whose names try to inject markup. Each page is rendered in
// headless Chromium (tests/html_render.py), which fails on console errors,
// images that do not load, anything that escaped the escaping, and tables
// that do not sort; the test is skipped, after its other checks, where
// chromium is not installed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "html_report.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;
using testing::TempDir;

// Markup a hostile name or path tries to inject: if any of it reached the
// page as markup, the page would run a script or load an image.
const std::string kInject = "<script>window.__fp4emu_pwned=1</script>\"><img src=x onerror=\"window.__fp4emu_pwned=1\">";
// U+202E RIGHT-TO-LEFT OVERRIDE: would reverse the text after it.
const std::string kBidi = "\xE2\x80\xAE" "gnp.exe";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A shell word: the CLI runs through popen.
std::string quoted(const fs::path& p) {
  std::string q = "'";
  for (char c : p.string()) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// An independent base64 decoder (RFC 4648 table lookup).
std::vector<uint8_t> unbase64(const std::string& s) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const size_t v = alphabet.find(c);
    if (v == std::string::npos) throw std::runtime_error("not base64");
    acc = acc << 6 | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
    }
  }
  return out;
}

// The images of a page of type `mime`, decoded, in order.
std::vector<std::string> page_images(const std::string& page, const std::string& mime = "image/png") {
  // A plain search: std::regex recurses per character and overflows the
  // stack on an image's hundred kilobytes.
  std::vector<std::string> images;
  const std::string start = " src=\"data:" + mime + ";base64,";
  for (size_t at = page.find(start); at != std::string::npos; at = page.find(start, at + 1)) {
    const size_t begin = at + start.size(), end = page.find('"', begin);
    const std::vector<uint8_t> bytes = unbase64(page.substr(begin, end - begin));
    images.emplace_back(bytes.begin(), bytes.end());
  }
  return images;
}

// The file each figure names in its caption ("... (summary_heatmap.png)").
std::vector<std::string> figure_files(const std::string& page) {
  std::vector<std::string> files;
  const std::string end = ")</figcaption>";
  for (size_t at = page.find(end); at != std::string::npos; at = page.find(end, at + 1))
    files.push_back(page.substr(page.rfind('(', at) + 1, at - page.rfind('(', at) - 1));
  return files;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// What escaping must guarantee of a page, whatever the data: the one script
// fp4emu writes, images from data: URIs only, no hostile text as markup.
void expect_inert(const std::string& page) {
  EXPECT_EQ(count(page, "<script"), 1u);
  EXPECT_EQ(count(page, "<img"), count(page, "<img alt=\"")) << "an <img> not written by Page::figure";
  EXPECT_EQ(count(page, "<img"), count(page, "src=\"data:image/"));
  EXPECT_EQ(page.find("<img src=x"), std::string::npos);
  EXPECT_EQ(page.find("\" onerror"), std::string::npos) << "an attribute value was ended by a quote";
  EXPECT_EQ(page.find("\xE2\x80\xAE"), std::string::npos) << "a bidirectional override reached the page";
  EXPECT_NE(page.find("Content-Security-Policy"), std::string::npos);
}

// Renders `page` in headless Chromium; skips the test (its other checks done)
// where chromium is absent. FP4EMU_REPORT_SCREENSHOTS=DIR keeps a screenshot.
void render_in_chromium(const fs::path& page, const std::string& name) {
  std::string shot;
  if (const char* dir = std::getenv("FP4EMU_REPORT_SCREENSHOTS")) shot = " --screenshot " + quoted(fs::path(dir) / (name + ".png"));
  const auto r = testing::run_shell(fmt::format("/usr/bin/python3 {}/tests/html_render.py{} {}", FP4EMU_SOURCE_DIR,
                                                shot, quoted(page)));
  if (r.exit_code == 77)
    GTEST_SKIP() << "chromium is not installed (Debian package chromium, from tools/install-deps.sh): the page was "
                    "checked but not rendered. " << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// ---- the writer ----------------------------------------------------------------

TEST(HtmlReport, EscapeLeavesNoMarkup) {
  const std::string e = cli::html::escape(kInject + "&'" + kBidi);
  EXPECT_EQ(e.find_first_of("<>\"'"), std::string::npos) << e;
  EXPECT_NE(e.find("&lt;script&gt;"), std::string::npos) << e;
  EXPECT_NE(e.find("&amp;&#39;"), std::string::npos) << e;
  // io::printable's rule: the override is shown, not obeyed; bad UTF-8 and controls as \xNN.
  EXPECT_NE(e.find("\\u{202E}gnp.exe"), std::string::npos) << e;
  EXPECT_EQ(cli::html::escape("a\xFF\nb"), "a\\xff\\nb");
  EXPECT_EQ(cli::html::escape("model.layers.0.mlp.down_proj.input"), "model.layers.0.mlp.down_proj.input");
}

TEST(HtmlReport, Base64MatchesRfc4648Vectors) {
  auto b64 = [](std::string_view s) {
    return cli::html::base64({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  };
  // RFC 4648 section 10.
  EXPECT_EQ(b64(""), "");
  EXPECT_EQ(b64("f"), "Zg==");
  EXPECT_EQ(b64("fo"), "Zm8=");
  EXPECT_EQ(b64("foo"), "Zm9v");
  EXPECT_EQ(b64("foob"), "Zm9vYg==");
  EXPECT_EQ(b64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(b64("foobar"), "Zm9vYmFy");
  std::mt19937 rng(3);
  std::vector<uint8_t> bytes(1000);
  for (uint8_t& b : bytes) b = uint8_t(rng());
  EXPECT_EQ(unbase64(cli::html::base64(bytes)), bytes);
}

TEST(HtmlReport, HostileStringsStayText) {
  using namespace cli::html;
  Page page("title " + kInject, "subtitle " + kInject + kBidi);
  page.section("section " + kInject);
  page.paragraph("paragraph " + kInject);
  page.facts({{"name " + kInject, "value " + kInject}});
  page.bullets({"bullet " + kInject});
  Table t;
  t.caption = "caption " + kInject;
  t.columns = {"column " + kInject, "value"};
  t.column_notes = {"note " + kInject};
  t.rows = {{text("cell " + kInject), number(1.5)}, {text(kBidi), number(std::nan(""))}};
  page.table(t);
  page.details("details " + kInject);
  page.figure({"figure " + kInject, "file " + kInject, {0x89, 'P', 'N', 'G'}});
  const std::string html = page.render();
  expect_inert(html);
  EXPECT_EQ(count(html, "<img"), 1u);
  // Every place above shows the text: the title twice (<title>, <h1>), the
  // section twice (heading, contents), the facts' name and value, the figure's
  // alt text, caption and file name.
  EXPECT_EQ(count(html, "&lt;script&gt;"), 17u);
  EXPECT_NE(html.find("</details>"), std::string::npos) << "an open details element is closed";
}

TEST(HtmlReport, NumericColumnsCarrySortKeys) {
  using namespace cli::html;
  Page page("t", "s");
  Table t;
  t.columns = {"name", "value"};
  t.rows = {{text("a"), percent(0.25)},
            {text("b"), number(std::nan(""))},
            {text("c"), number(-INFINITY)},
            {text("d"), integer(-3)}};
  page.table(t);
  const std::string html = page.render();
  EXPECT_NE(html.find("<th scope=\"col\">name</th><th scope=\"col\" class=\"num\">value</th>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"num\" data-v=\"0.25\">25.00%</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td class=\"num\">-</td>"), std::string::npos) << "NaN: no sort key, shown as -";
  EXPECT_NE(html.find("<td class=\"num\" data-v=\"-Infinity\">-inf</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\" data-v=\"-3\">-3</td>"), std::string::npos);
}

// ---- the commands' pages -------------------------------------------------------

Tensor random_tensor(int64_t m, int64_t d, uint32_t seed, float hot) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  Tensor t{{m, d}, std::vector<float>(size_t(m * d))};
  for (float& v : t.data) v = g(rng) * 0.05f;
  for (int64_t r = 0; r < m; ++r) t.data[r * d + 3] *= hot;
  return t;
}

// Two layers of a small model, one tensor with a hostile name, in a directory
// with a hostile name, with hostile metadata.
fs::path write_dump(const TempDir& dir) {
  std::vector<io::SafetensorsTensor> ts;
  for (int l = 0; l < 2; ++l) {
    const Tensor q = random_tensor(16, 64, 10 + l, 40.0f);
    ts.push_back({fmt::format("model.layers.{}.self_attn.q_proj.input", l), io::from_f32(q.shape, q.data)});
    const Tensor down = random_tensor(16, 128, 30 + l, 200.0f);
    ts.push_back({fmt::format("model.layers.{}.mlp.down_proj.input", l), io::from_f32(down.shape, down.data)});
  }
  const Tensor h = random_tensor(8, 64, 50, 5.0f);
  ts.push_back({"model.layers.1.self_attn.o_proj.input" + kInject + kBidi, io::from_f32(h.shape, h.data)});
  const fs::path sub = dir / ("in<i>&\"" + std::string("x"));
  fs::create_directories(sub);
  const fs::path path = sub / "dump.safetensors";
  io::write_safetensors(path, ts, {{"phase", "<b>decode</b>"}, {"step", "7' onmouseover='x"}});
  return path;
}

TEST(HtmlReportCli, ComparePage) {
  TempDir dir;
  const fs::path dump = write_dump(dir);
  const fs::path page = dir / "compare.html";
  const auto r = run_cli(fmt::format("compare {} --format mxfp4,nvfp4 --json {} --report {}", quoted(dump),
                                     quoted(dir / "c.json"), quoted(page)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = slurp(page);
  expect_inert(html);
  // Every tensor x recipe is a row, the pooled rows too.
  const auto j = nlohmann::json::parse(slurp(dir / "c.json"));
  EXPECT_EQ(count(html, "<tr>"), 1 + j["pooled"].size() + 1 + j["tensors"].size() * 2 + 1 + 1);
  EXPECT_NE(html.find(fmt::format("{:.2f}", j["pooled"][0]["qsnr_db"].get<double>())), std::string::npos);
  render_in_chromium(page, "compare");
}

// Runs `command` on the dump with --out OUT --report PAGE and checks the page:
// inert, and showing, in order, exactly the pictures `files` the run wrote
// into OUT (each figure is the bytes of the file it names). Returns the page.
std::string study_page(const TempDir& dir, const std::string& command, const std::string& name,
                       const std::vector<std::string>& files, const std::string& mime = "image/png") {
  const fs::path dump = write_dump(dir);
  const fs::path page = dir / (name + ".html"), out = dir / name;
  const auto r = run_cli(fmt::format("{} {} --out {} --report {}", command, quoted(dump), quoted(out), quoted(page)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string html = slurp(page);
  expect_inert(html);
  const std::vector<std::string> images = page_images(html, mime);
  EXPECT_EQ(count(html, "<img"), files.size());
  EXPECT_EQ(figure_files(html), files);
  for (size_t k = 0; k < files.size() && k < images.size(); ++k) {
    EXPECT_TRUE(fs::is_regular_file(out / files[k])) << files[k] << " is named on the page but was not written";
    EXPECT_EQ(images[k], slurp(out / files[k])) << files[k];
  }
  EXPECT_EQ(images.size(), files.size());
  render_in_chromium(page, name);
  return html;
}

TEST(HtmlReportCli, UnderflowPageShowsTheHeatmapsItWrote) {
  TempDir dir;
  const std::string html = study_page(dir, "underflow --format mxfp4,nvfp4 --transform none --transform rht",
                                      "underflow", {"summary_heatmap.png", "detail_heatmap.png"});
  const auto j = nlohmann::json::parse(slurp(dir / "underflow" / "summary.json"));
  EXPECT_EQ(count(html, "<tr>"), 1 + j["pooled"].size() + 1 + j["tensors"].size() + 1 + 1);
}

TEST(HtmlReportCli, ResqPageShowsEachRecipesChart) {
  TempDir dir;
  study_page(dir, "resq --format mxfp4,nvfp4 --pattern none,dense,2:4,channel50", "resq",
             {"resq_mxfp4_ocp.png", "resq_nvfp4_te.png"});
}

// With --image-format svg no PNG is written: the page shows the SVG files
// and names no .png.
TEST(HtmlReportCli, SvgOnlyPagesShowTheSvgFilesWritten) {
  TempDir dir;
  const std::string uf = study_page(dir, "underflow --format mxfp4 --image-format svg", "underflow_svg",
                                    {"summary_heatmap.svg", "detail_heatmap.svg"}, "image/svg+xml");
  EXPECT_EQ(uf.find(".png"), std::string::npos);
  const std::string rq = study_page(dir, "resq --format mxfp4,nvfp4 --pattern dense,2:4 --image-format svg",
                                    "resq_svg", {"resq_mxfp4_ocp.svg", "resq_nvfp4_te.svg"}, "image/svg+xml");
  EXPECT_EQ(rq.find(".png"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "underflow_svg" / "summary_heatmap.png"));
  EXPECT_FALSE(fs::exists(dir / "resq_svg" / "resq_mxfp4_ocp.png"));
}

TEST(HtmlReportCli, VerifyPageListsTheFailingCasesWithTheirClassification) {
  TempDir dir;
  const fs::path suite = dir / "suite", cand = dir / ("cand<b>" + kInject);
  ASSERT_EQ(run_cli(fmt::format("golden generate --out {} --recipe mxfp4.ocp --family codes --family special "
                                "--family scale_steps --threads 1",
                                quoted(suite)))
                .exit_code,
            0);
  const auto m = nlohmann::json::parse(slurp(suite / "manifest.json"));
  for (const auto& c : m["cases"])
    for (const auto& f : c["files"]) {
      if (f["role"] != "output") continue;
      const fs::path to = cand / f["path"].get<std::string>();
      fs::create_directories(to.parent_path());
      fs::copy_file(suite / f["path"].get<std::string>(), to);
    }
  io::Array codes = io::read_npy(cand / "mxfp4.ocp/codes/codes.npy");
  codes.bytes[0] ^= 1;
  io::write_npy(cand / "mxfp4.ocp/codes/codes.npy", codes);
  const fs::path page = dir / "verify.html";
  const auto r = run_cli(fmt::format("golden verify --suite {} --candidate {} --report {}", quoted(suite),
                                     quoted(cand), quoted(page)));
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const std::string html = slurp(page);
  expect_inert(html);
  const size_t cases = m["cases"].size();
  EXPECT_NE(html.find(fmt::format("FAIL: {} of {} case(s) pass, 1 fail", cases - 1, cases)), std::string::npos);
  // The failing case with the same classification as the text report.
  const size_t why = r.output.find("why: ");
  ASSERT_NE(why, std::string::npos) << r.output;
  const std::string classification = r.output.substr(why + 5, r.output.find('\n', why) - why - 5);
  EXPECT_NE(html.find("<td>mxfp4.ocp/codes</td><td class=\"bad\">FAIL</td>"), std::string::npos);
  EXPECT_NE(html.find(cli::html::escape(classification)), std::string::npos) << classification;
  render_in_chromium(page, "verify");
}

TEST(HtmlReportCli, BadReportPathIsRefusedBeforeTheWork) {
  TempDir dir;
  const fs::path dump = write_dump(dir);
  const std::string missing = quoted(dir / "no_such_dir" / "r.html");
  for (const std::string& args :
       {fmt::format("compare {} --json {} --report {}", quoted(dump), quoted(dir / "c.json"), missing),
        fmt::format("underflow {} --out {} --report {}", quoted(dump), quoted(dir / "out"), missing),
        fmt::format("resq {} --pattern dense --out {} --report {}", quoted(dump), quoted(dir / "out"), missing),
        fmt::format("compare {} --report {}", quoted(dump), quoted(dump))}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("--report"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir / "c.json")) << args;
    EXPECT_FALSE(fs::exists(dir / "out")) << args;
  }
  // A run that fails after the check writes no page.
  const fs::path page = dir / "r.html";
  const auto r = run_cli(fmt::format("underflow {} --detail nope --out {} --report {}", quoted(dump),
                                     quoted(dir / "out"), quoted(page)));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(fs::exists(page));
}

}  // namespace
}  // namespace fp4emu
