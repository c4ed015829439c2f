// `golden verify`: checks the suite's digests, then compares a candidate's
// outputs with the suite's bit for bit (golden/README.md "Verification").
// It reads everything it needs from the suite on disk; nothing is shared with
// the generator but the file format.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <bit>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "fp4emu/error.hpp"
#include "fp4emu/golden/sha256.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/scale_layout.hpp"
#include "packing.hpp"

namespace fp4emu::golden {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

[[noreturn]] void bad_suite(const fs::path& suite, const std::string& what) {
  throw InputError(fmt::format("suite {}: {}; regenerate it (fp4emu golden generate) or restore it from version "
                               "control",
                               suite.string(), what));
}

// SHA256SUMS: "<64 hex>  <relative path>" per line (sha256sum's format).
std::map<std::string, std::string> read_sums(const fs::path& suite) {
  std::ifstream in(suite / "SHA256SUMS");
  if (!in) bad_suite(suite, "SHA256SUMS is missing");
  std::map<std::string, std::string> sums;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.size() < 67 || line.compare(64, 2, "  ") != 0)
      bad_suite(suite, fmt::format("SHA256SUMS line {} is not '<sha256>  <path>'", n));
    sums[line.substr(66)] = line.substr(0, 64);
  }
  return sums;
}

std::string float_text(uint32_t bits) {
  return fmt::format("0x{:08x} ({})", bits, std::bit_cast<float>(bits));
}

uint32_t f32_bits(const io::Array& a, int64_t i) {
  uint32_t b;
  std::memcpy(&b, a.bytes.data() + 4 * i, 4);
  return b;
}

bool same_value(uint32_t a, uint32_t b) {
  const bool nan_a = (a & 0x7F800000u) == 0x7F800000u && (a & 0x007FFFFFu);
  const bool nan_b = (b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu);
  return a == b || (nan_a && nan_b);
}

// Everything about one case that a mismatch report needs.
struct CaseContext {
  const json& meta;
  std::string id;
  Format format;
  CaseGeometry geo;
  int scale_bytes;
  io::Array input;
  std::vector<uint8_t> expected_scales;
  std::vector<uint8_t> actual_scales;  // empty if the candidate has none
  std::set<int64_t> nan_blocks;
  bool strict;

  std::string input_text(int64_t row, int64_t k) const {
    if (k >= geo.axis_len) return "pad";
    const int64_t i = geo.value_index(row, k);
    if (input.dtype == io::DType::bf16) {
      uint16_t b;
      std::memcpy(&b, input.bytes.data() + 2 * i, 2);
      return fmt::format("0x{:04x} ({})", b, std::bit_cast<float>(static_cast<uint32_t>(b) << 16));
    }
    return float_text(f32_bits(input, i));
  }
  static std::string scale_text(const std::vector<uint8_t>& s, int64_t block, int sb) {
    if (s.empty() || static_cast<int64_t>(s.size()) < (block + 1) * sb) return "?";
    uint32_t v = 0;
    for (int i = 0; i < sb; ++i) v |= static_cast<uint32_t>(s[block * sb + i]) << (8 * i);
    return fmt::format("0x{:0{}x}", v, 2 * sb);
  }
  bool skip_nan_block(int64_t block) const { return !strict && nan_blocks.count(block) > 0; }
};

class Comparer {
 public:
  Comparer(const VerifyOptions& o, VerifyReport& r) : options_(o), report_(r) {}

  void add(Mismatch m, CaseResult& c) {
    ++c.mismatches;
    ++report_.total_mismatches;
    if (static_cast<int>(report_.first.size()) < options_.max_report) report_.first.push_back(std::move(m));
  }

  Mismatch base(const CaseContext& ctx, const std::string& file, const char* kind, int64_t block) {
    Mismatch m;
    m.case_id = ctx.id;
    m.file = file;
    m.kind = kind;
    m.block = block;
    if (block >= 0) {
      m.row = block / ctx.geo.blocks_per_row();
      m.block_in_row = block % ctx.geo.blocks_per_row();
      m.expected_scale = CaseContext::scale_text(ctx.expected_scales, block, ctx.scale_bytes);
      m.actual_scale = CaseContext::scale_text(ctx.actual_scales, block, ctx.scale_bytes);
    }
    return m;
  }

  void codes(const CaseContext& ctx, const std::string& file, const io::Array& e, const io::Array& a,
             CaseResult& c) {
    const int64_t row_bytes = ctx.geo.row_bytes();
    for (size_t i = 0; i < e.bytes.size(); ++i) {
      if (e.bytes[i] == a.bytes[i]) continue;
      const int64_t row = static_cast<int64_t>(i) / row_bytes, byte = static_cast<int64_t>(i) % row_bytes;
      for (bool high : {false, true}) {
        const int ev = high ? e.bytes[i] >> 4 : e.bytes[i] & 0xF, av = high ? a.bytes[i] >> 4 : a.bytes[i] & 0xF;
        if (ev == av) continue;
        int64_t b;
        int j;
        ctx.geo.element_of(byte, high, &b, &j);
        const int64_t block = row * ctx.geo.blocks_per_row() + b;
        if (ctx.skip_nan_block(block)) continue;
        Mismatch m = base(ctx, file, "code", block);
        m.element = j;
        m.input = ctx.input_text(row, b * ctx.geo.block + j);
        m.expected = fmt::format("0x{:x}", ev);
        m.actual = fmt::format("0x{:x}", av);
        add(std::move(m), c);
      }
    }
  }

  // Linear scales: one entry of scale_bytes per block. In a NaN-scale HiF4
  // block only the E6M2 byte is defined.
  void scales(const CaseContext& ctx, const std::string& file, const io::Array& e, const io::Array& a,
              CaseResult& c) {
    const int sb = ctx.scale_bytes;
    for (int64_t block = 0; block < ctx.geo.num_blocks(); ++block) {
      const int n = ctx.skip_nan_block(block) ? 1 : sb;
      if (std::equal(e.bytes.begin() + block * sb, e.bytes.begin() + block * sb + n, a.bytes.begin() + block * sb))
        continue;
      Mismatch m = base(ctx, file, "scale", block);
      m.expected = CaseContext::scale_text(e.bytes, block, sb);
      m.actual = CaseContext::scale_text(a.bytes, block, sb);
      add(std::move(m), c);
    }
  }

  void layout(const CaseContext& ctx, const std::string& file, StoredScaleLayout l, const io::Array& e,
              const io::Array& a, CaseResult& c) {
    PackedTensor shape_only;
    shape_only.format = ctx.format;
    shape_only.shape = ctx.geo.shape;
    shape_only.axis = ctx.geo.axis;
    shape_only.block_size = ctx.geo.block;
    shape_only.axis_len = ctx.geo.axis_len;
    shape_only.padded_len = ctx.geo.padded_len;
    shape_only.rows = ctx.geo.rows();
    for (size_t i = 0; i < e.bytes.size(); ++i) {
      if (e.bytes[i] == a.bytes[i]) continue;
      const auto at = stored_scale_byte(static_cast<int64_t>(i), shape_only, l);
      if (at && at->byte > 0 && ctx.skip_nan_block(at->block)) continue;
      Mismatch m = base(ctx, file, at ? "scale" : "layout_padding", at ? at->block : -1);
      m.expected = fmt::format("byte {} = 0x{:02x}", i, e.bytes[i]);
      m.actual = fmt::format("byte {} = 0x{:02x}", i, a.bytes[i]);
      if (at && ctx.scale_bytes > 1) {
        m.expected += fmt::format(" (scale byte {})", at->byte);
        m.actual += fmt::format(" (scale byte {})", at->byte);
      }
      add(std::move(m), c);
    }
  }

  void dequant(const CaseContext& ctx, const std::string& file, const io::Array& e, const io::Array& a,
               CaseResult& c) {
    const int64_t n = static_cast<int64_t>(e.bytes.size() / 4);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t eb = f32_bits(e, i), ab = f32_bits(a, i);
      if (same_value(eb, ab)) continue;
      int64_t row, k;
      ctx.geo.row_and_k(i, &row, &k);
      const int64_t b = k / ctx.geo.block;
      Mismatch m = base(ctx, file, "dequant", row * ctx.geo.blocks_per_row() + b);
      m.element = static_cast<int>(k % ctx.geo.block);
      m.input = ctx.input_text(row, k);
      m.expected = float_text(eb);
      m.actual = float_text(ab);
      add(std::move(m), c);
    }
  }

  void global_scale(const CaseContext& ctx, const std::string& file, const io::Array& e, const io::Array& a,
                    CaseResult& c) {
    static const char* kNames[3] = {"global_amax", "S_enc", "S_dec"};
    for (int64_t i = 0; i < 3; ++i) {
      const uint32_t eb = f32_bits(e, i), ab = f32_bits(a, i);
      if (same_value(eb, ab)) continue;
      Mismatch m = base(ctx, file, "global_scale", -1);
      m.expected = fmt::format("{} = {}", kNames[i], float_text(eb));
      m.actual = fmt::format("{} = {}", kNames[i], float_text(ab));
      add(std::move(m), c);
    }
  }

  // C of a GEMM case, m×n fp32: bit for bit, NaN bits included.
  void gemm_c(const std::string& id, const std::string& file, const std::string& model, const io::Array& e,
              const io::Array& a, CaseResult& c) {
    const int64_t n = e.shape.size() == 2 ? e.shape[1] : 1;
    for (int64_t i = 0; i < static_cast<int64_t>(e.bytes.size() / 4); ++i) {
      // NaN bits included: every NaN of the models is 0x7fffffff (docs/gemm.md "NaN").
      const uint32_t eb = f32_bits(e, i), ab = f32_bits(a, i);
      if (eb == ab) continue;
      Mismatch m;
      m.case_id = id;
      m.file = file;
      m.kind = "gemm_c";
      m.row = i / n;
      m.column = i % n;
      m.input = "model " + model;
      m.expected = float_text(eb);
      m.actual = float_text(ab);
      add(std::move(m), c);
    }
  }

  void raw(const CaseContext& ctx, const std::string& file, const io::Array& e, const io::Array& a, CaseResult& c) {
    for (size_t i = 0; i < e.bytes.size(); ++i) {
      if (e.bytes[i] == a.bytes[i]) continue;
      Mismatch m = base(ctx, file, "output", -1);
      m.expected = fmt::format("byte {} = 0x{:02x}", i, e.bytes[i]);
      m.actual = fmt::format("byte {} = 0x{:02x}", i, a.bytes[i]);
      add(std::move(m), c);
    }
  }

 private:
  const VerifyOptions& options_;
  VerifyReport& report_;
};

template <class T>
T field(const json& j, const char* key, const fs::path& suite, const std::string& where) {
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    bad_suite(suite, fmt::format("manifest.json: {} has no valid field '{}'", where, key));
  }
}

}  // namespace

int VerifyReport::passed() const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(), [](const CaseResult& c) { return c.status == "pass"; }));
}
int VerifyReport::failed() const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(), [](const CaseResult& c) { return c.status == "fail"; }));
}
int VerifyReport::skipped() const {
  return static_cast<int>(
      std::count_if(cases.begin(), cases.end(), [](const CaseResult& c) { return c.status == "skipped"; }));
}
int VerifyReport::exit_code() const {
  if (!errors.empty()) return 2;
  return total_mismatches > 0 ? 1 : 0;
}

namespace {

// A case's status: any note other than a skipped file is an error.
const char* case_status(const CaseResult& result, int skipped, int outputs) {
  if (std::any_of(result.notes.begin(), result.notes.end(),
                  [](const std::string& n) { return n.rfind("skipped", 0) != 0; }))
    return "error";
  if (result.mismatches > 0) return "fail";
  if (skipped == outputs) return "skipped";
  return "pass";
}

}  // namespace

VerifyReport verify_suite(const fs::path& suite, const fs::path& candidate, const VerifyOptions& options) {
  VerifyReport report;
  report.suite = suite;
  report.candidate = candidate;
  std::error_code ec;
  if (!fs::is_directory(suite, ec)) throw InputError(fmt::format("--suite {}: not a directory", suite.string()));
  if (!fs::is_directory(candidate, ec))
    throw InputError(fmt::format("--candidate {}: not a directory; it must hold the kernel's outputs under the "
                                 "suite's file names (e.g. <recipe>/<case>/codes.npy)",
                                 candidate.string()));

  // 1. The suite itself: every digest in SHA256SUMS, the manifest included.
  const std::map<std::string, std::string> sums = read_sums(suite);
  if (!sums.count("manifest.json")) bad_suite(suite, "SHA256SUMS does not list manifest.json");
  for (const auto& [path, sum] : sums) {
    if (!fs::is_regular_file(suite / path, ec)) bad_suite(suite, fmt::format("file {} is missing", path));
    const std::string got = sha256_file_hex(suite / path);
    if (got != sum) bad_suite(suite, fmt::format("file {} has sha256 {}, SHA256SUMS says {}", path, got, sum));
    ++report.files_hashed;
  }
  json manifest;
  try {
    std::ifstream in(suite / "manifest.json");
    manifest = json::parse(in);
  } catch (const json::exception& e) {
    bad_suite(suite, fmt::format("manifest.json is not valid JSON ({})", e.what()));
  }
  if (field<std::string>(manifest, "schema", suite, "the top level") != kSchemaName)
    bad_suite(suite, fmt::format("manifest.json: schema is not '{}'", kSchemaName));
  const int version = field<int>(manifest, "schema_version", suite, "the top level");
  if (version != kSchemaVersion)
    throw InputError(fmt::format("suite {}: schema_version {} is not supported by this fp4emu (it reads {}); use "
                                 "the fp4emu version named in manifest.json",
                                 suite.string(), version, kSchemaVersion));
  const json& cases = manifest.at("cases");
  for (const json& c : cases)
    for (const json& f : c.at("files")) {
      const std::string path = field<std::string>(f, "path", suite, "a file entry");
      const auto it = sums.find(path);
      if (it == sums.end() || it->second != field<std::string>(f, "sha256", suite, path))
        bad_suite(suite, fmt::format("manifest.json and SHA256SUMS disagree on {}", path));
    }

  // 2. The candidate, case by case.
  Comparer cmp(options, report);
  bool compared_any = false;
  for (const json& c : cases) {
    const std::string id = field<std::string>(c, "id", suite, "a case");
    CaseResult result;
    result.id = id;
    result.family = field<std::string>(c, "family", suite, id);
    auto error = [&](const std::string& what) {
      result.notes.push_back(what);
      report.errors.push_back(fmt::format("{}: {}", id, what));
    };
    // False when the candidate lacks an output file: noted as skipped with
    // --skip-missing, an error otherwise.
    auto candidate_has = [&](const std::string& path, int& skipped) {
      if (fs::exists(candidate / path, ec)) return true;
      if (options.skip_missing) {
        ++skipped;
        result.notes.push_back(fmt::format("skipped {}: not in the candidate", path));
      } else {
        error(fmt::format("candidate file {} is missing (use --skip-missing to compare only what the candidate has)",
                          (candidate / path).string()));
      }
      return false;
    };

    if (field<std::string>(c, "expect", suite, id) == "error") {
      // The input must be rejected: a candidate that wrote outputs fails.
      for (const char* name : {"codes.npy", "scales.npy", "dequant.npy"}) {
        if (!fs::exists(candidate / id / name, ec)) continue;
        Mismatch m;
        m.case_id = id;
        m.file = id + "/" + name;
        m.kind = "unexpected_output";
        m.expected = "no output (the tail policy 'error' rejects this input)";
        m.actual = "an output file";
        cmp.add(std::move(m), result);
      }
      result.status = result.mismatches ? "fail" : "pass";
      report.cases.push_back(std::move(result));
      continue;
    }

    if (result.family == "gemm") {
      // Outputs are the C files, one per model; A, B and the packed operands
      // are what the kernel consumes.
      std::map<std::string, std::string> model_of;
      for (const json& o : c.at("outputs"))
        model_of[field<std::string>(o, "file", suite, id)] =
            fmt::format("{} blocks_per_step {}", field<std::string>(o, "model", suite, id),
                        field<int>(o, "blocks_per_step", suite, id));
      int outputs = 0, skipped = 0;
      for (const json& f : c.at("files")) {
        if (f.at("role").get<std::string>() != "output") continue;
        ++outputs;
        const std::string path = f.at("path").get<std::string>();
        const std::string name = path.substr(path.rfind('/') + 1);
        if (!candidate_has(path, skipped)) continue;
        try {
          const io::Array e = io::read_npy(suite / path);
          const io::Array a = io::read_npy(candidate / path);
          if (a.dtype != e.dtype || a.shape != e.shape) {
            error(fmt::format("candidate file {} is {} {}, expected {} {}", (candidate / path).string(),
                              io::dtype_name(a.dtype), io::shape_string(a.shape), io::dtype_name(e.dtype),
                              io::shape_string(e.shape)));
            continue;
          }
          compared_any = true;
          cmp.gemm_c(id, path, model_of.count(name) ? model_of[name] : name, e, a, result);
        } catch (const InputError& e) {
          error(e.what());
        }
      }
      result.status = case_status(result, skipped, outputs);
      report.cases.push_back(std::move(result));
      continue;
    }

    const json& opt = c.at("options");
    const auto format = parse_format(field<std::string>(c, "format", suite, id));
    if (!format) bad_suite(suite, fmt::format("manifest.json: case {} has an unknown format", id));
    const auto nibble = parse_nibble_order(field<std::string>(opt, "nibble_order", suite, id));
    if (!nibble) bad_suite(suite, fmt::format("manifest.json: case {} has an unknown nibble_order", id));
    CaseContext ctx{c,
                    id,
                    *format,
                    CaseGeometry(field<std::vector<int64_t>>(c, "shape", suite, id),
                                 field<int>(opt, "axis", suite, id), field<int>(c, "block_size", suite, id), *nibble),
                    scale_bytes_per_block(*format),
                    {},
                    {},
                    {},
                    {},
                    options.strict};
    for (int64_t b : field<std::vector<int64_t>>(c, "nan_scale_blocks", suite, id)) ctx.nan_blocks.insert(b);

    // Expected arrays by file name; the candidate's, read and checked.
    std::map<std::string, io::Array> expected, actual;
    int outputs = 0, skipped = 0;
    for (const json& f : c.at("files")) {
      const std::string path = f.at("path").get<std::string>();
      const std::string name = path.substr(path.rfind('/') + 1);
      const std::string role = f.at("role").get<std::string>();
      if (role == "input") ctx.input = io::read_npy(suite / path);
      if (role != "output") continue;
      ++outputs;
      expected[name] = io::read_npy(suite / path);
      if (!candidate_has(path, skipped)) continue;
      try {
        io::Array a = io::read_npy(candidate / path);
        const io::Array& e = expected[name];
        if (a.dtype != e.dtype || a.shape != e.shape) {
          error(fmt::format("candidate file {} is {} {}, expected {} {}", (candidate / path).string(),
                            io::dtype_name(a.dtype), io::shape_string(a.shape), io::dtype_name(e.dtype),
                            io::shape_string(e.shape)));
          continue;
        }
        actual[name] = std::move(a);
      } catch (const InputError& e) {
        error(e.what());
      }
    }
    if (expected.count("scales.npy")) ctx.expected_scales = expected["scales.npy"].bytes;
    if (actual.count("scales.npy")) ctx.actual_scales = actual["scales.npy"].bytes;

    for (auto& [name, a] : actual) {
      const std::string file = id + "/" + name;
      const io::Array& e = expected[name];
      compared_any = true;
      if (name == "codes.npy") {
        cmp.codes(ctx, file, e, a, result);
      } else if (name == "scales.npy") {
        cmp.scales(ctx, file, e, a, result);
      } else if (name == "dequant.npy") {
        cmp.dequant(ctx, file, e, a, result);
      } else if (name == "global_scale.npy") {
        cmp.global_scale(ctx, file, e, a, result);
      } else if (name.rfind("scales_", 0) == 0) {
        const auto l = parse_stored_scale_layout(name.substr(7, name.size() - 7 - 4));
        if (l) cmp.layout(ctx, file, *l, e, a, result);
        else cmp.raw(ctx, file, e, a, result);
      } else {
        cmp.raw(ctx, file, e, a, result);
      }
    }
    result.status = case_status(result, skipped, outputs);
    report.cases.push_back(std::move(result));
  }
  if (!compared_any && report.errors.empty())
    report.errors.push_back("the candidate holds none of the suite's output files; nothing was compared");
  return report;
}

// ---- reports ---------------------------------------------------------------------

namespace {

std::string mismatch_line(const Mismatch& m) {
  std::string s = fmt::format("{} {}", m.kind, m.file);
  if (m.block >= 0) s += fmt::format(" block {} (row {}, block {} of the row)", m.block, m.row, m.block_in_row);
  if (m.element >= 0) s += fmt::format(" element {}", m.element);
  if (m.column >= 0) s += fmt::format(" C row {}, column {}", m.row, m.column);
  if (!m.input.empty()) s += m.kind == "gemm_c" ? fmt::format(" ({})", m.input) : fmt::format(": input {}", m.input);
  s += fmt::format("; expected {}, actual {}", m.expected, m.actual);
  if (!m.expected_scale.empty() && m.kind != "scale")
    s += fmt::format("; block scale expected {}, actual {}", m.expected_scale, m.actual_scale);
  return s;
}

}  // namespace

std::string report_text(const VerifyReport& r) {
  std::string s = fmt::format("suite {}: {} files, sha256 ok\ncandidate {}\n", r.suite.string(), r.files_hashed,
                              r.candidate.string());
  for (const CaseResult& c : r.cases) {
    std::string status = c.status;
    std::transform(status.begin(), status.end(), status.begin(), ::toupper);
    s += fmt::format("{:<7} {}", status, c.id);
    if (c.mismatches) s += fmt::format("  ({} mismatches)", c.mismatches);
    s += "\n";
    for (const std::string& n : c.notes) s += "        " + n + "\n";
  }
  if (!r.first.empty()) {
    s += fmt::format("first {} of {} mismatches:\n", r.first.size(), r.total_mismatches);
    for (const Mismatch& m : r.first) s += "  " + mismatch_line(m) + "\n";
  }
  // Errors not tied to a case (the case lines above show the others).
  size_t case_errors = 0;
  for (const CaseResult& c : r.cases)
    for (const std::string& n : c.notes) case_errors += n.rfind("skipped", 0) != 0;
  for (size_t i = case_errors; i < r.errors.size(); ++i) s += "error: " + r.errors[i] + "\n";
  s += fmt::format("summary: {} passed, {} failed, {} skipped, {} errors; {} mismatches; exit {}\n", r.passed(),
                   r.failed(), r.skipped(), r.errors.size(), r.total_mismatches, r.exit_code());
  return s;
}

std::string report_json(const VerifyReport& r) {
  nlohmann::ordered_json j;
  j["suite"] = r.suite.string();
  j["candidate"] = r.candidate.string();
  j["suite_files_hashed"] = r.files_hashed;
  j["passed"] = r.passed();
  j["failed"] = r.failed();
  j["skipped"] = r.skipped();
  j["errors"] = r.errors;
  j["total_mismatches"] = r.total_mismatches;
  j["exit_code"] = r.exit_code();
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const CaseResult& c : r.cases)
    cases.push_back({{"id", c.id}, {"family", c.family}, {"status", c.status}, {"mismatches", c.mismatches},
                     {"notes", c.notes}});
  j["cases"] = cases;
  nlohmann::ordered_json ms = nlohmann::ordered_json::array();
  for (const Mismatch& m : r.first)
    ms.push_back({{"case", m.case_id},
                  {"file", m.file},
                  {"kind", m.kind},
                  {"block", m.block},
                  {"row", m.row},
                  {"block_in_row", m.block_in_row},
                  {"element", m.element},
                  {"column", m.column},
                  {"input", m.input},
                  {"expected", m.expected},
                  {"actual", m.actual},
                  {"expected_scale", m.expected_scale},
                  {"actual_scale", m.actual_scale}});
  j["mismatches"] = ms;
  return j.dump(2) + "\n";
}

}  // namespace fp4emu::golden
