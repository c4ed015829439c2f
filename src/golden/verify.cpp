// `golden verify` (golden/README.md "Verification"). The suite and the
// candidate are folders anyone can edit, so verification runs in stages, each
// one function below, and no stage uses what an earlier one has not checked:
//   1. read_suite_texts / parse_manifest: manifest.json structure, every field
//      typed and in range (manifest.cpp);
//   2. check_suite_paths: every path relative, inside the suite after
//      symlinks, a regular file, and listed by both the manifest and
//      SHA256SUMS (nothing else is read);
//   3. check_digests: SHA-256 of every listed file;
//   4. load_expected / load_candidate: each array's dtype and shape against
//      the manifest, whose geometry parse_manifest has checked against the
//      recipe, before any index is computed;
//   5. CaseRun: the values, block by block, root cause first.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/golden/sha256.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/quant/diagnose.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/scale_layout.hpp"
#include "fp4emu/threads.hpp"
#include "manifest.hpp"
#include "src/io/byte_stream.hpp"
#include "packing.hpp"

namespace fp4emu::golden {
namespace {

namespace fs = std::filesystem;

// ---- paths -------------------------------------------------------------------------

// A folder the verifier reads from, resolved once.
struct Folder {
  fs::path root;       // as given
  fs::path canonical;  // symlinks resolved
  std::string label;   // "--suite" | "--candidate"
};

Folder open_folder(const fs::path& root, const std::string& label, const std::string& hint) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw InputError(fmt::format("{} {}: not a directory{}", label, root.string(), hint));
  const fs::path canonical = fs::canonical(root, ec);
  if (ec) throw InputError(fmt::format("{} {}: cannot be resolved ({})", label, root.string(), ec.message()));
  return {root, canonical, label};
}

// Where a listed relative path lies: `problem` is empty for a regular file
// inside the folder (symlinks resolved), `missing` for nothing there.
struct Located {
  fs::path path;
  bool missing = false;
  std::string problem;
};

const char* type_name(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

// `rel` has passed relative_path_problem (manifest.cpp): no '..', no
// absolute path. What remains to check is where symlinks lead, and the file
// type, which is looked at before anything opens the file (a FIFO would
// block the open).
Located locate(const Folder& folder, const std::string& rel) {
  Located l;
  l.path = folder.root / rel;
  std::error_code ec;
  const fs::file_status st = fs::status(l.path, ec);
  if (st.type() == fs::file_type::not_found) {
    l.missing = true;
    return l;
  }
  const fs::path real = fs::canonical(l.path, ec);
  if (ec) {
    l.problem = fmt::format("{} cannot be resolved ({})", l.path.string(), ec.message());
    return l;
  }
  const fs::path inside = real.lexically_relative(folder.canonical);
  if (inside.empty() || *inside.begin() == ".." || inside == ".") {
    l.problem = fmt::format("{} resolves to {}, outside the {} folder {}", l.path.string(), real.string(),
                            folder.label.substr(2), folder.canonical.string());
    return l;
  }
  if (st.type() != fs::file_type::regular)
    l.problem = fmt::format("{} is {}, not a regular file", l.path.string(), type_name(st.type()));
  return l;
}

// ---- stages 1-3: the suite -----------------------------------------------------------

struct Suite {
  Folder folder;
  ParsedManifest manifest;
  int files_hashed = 0;
};

std::string read_text(const Folder& suite, const std::string& rel) {
  const Located l = locate(suite, rel);
  if (l.missing) bad_suite(suite.root, fmt::format("{} is missing", rel));
  if (!l.problem.empty()) bad_suite(suite.root, l.problem);
  std::error_code ec;
  const auto size = fs::file_size(l.path, ec);
  if (ec || size > static_cast<uintmax_t>(kMaxManifestBytes))
    bad_suite(suite.root, fmt::format("{} is larger than {} bytes or unreadable", rel, kMaxManifestBytes));
  std::ifstream in(l.path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size))) bad_suite(suite.root, fmt::format("{} cannot be read", rel));
  return text;
}

// Stage 2: SHA256SUMS lists exactly manifest.json and the manifest's files,
// with the manifest's digests, and each is a regular file inside the suite.
void check_suite_paths(const Suite& s, const std::map<std::string, std::string>& sums) {
  std::map<std::string, std::string> listed{{"manifest.json", ""}};
  for (const ManifestCase& c : s.manifest.cases)
    for (const ManifestFile& f : c.files) listed[f.path] = f.sha256;
  for (const auto& [path, sum] : sums)
    if (!listed.count(path))
      bad_suite(s.folder.root, fmt::format("SHA256SUMS lists {}, which manifest.json does not", quote_untrusted(path)));
  for (const auto& [path, sum] : listed) {
    const auto it = sums.find(path);
    if (it == sums.end()) bad_suite(s.folder.root, fmt::format("SHA256SUMS does not list {}", path));
    if (!sum.empty() && it->second != sum)
      bad_suite(s.folder.root, fmt::format("manifest.json and SHA256SUMS disagree on the sha256 of {}", path));
    const Located l = locate(s.folder, path);
    if (l.missing) bad_suite(s.folder.root, fmt::format("file {} is missing", path));
    if (!l.problem.empty()) bad_suite(s.folder.root, l.problem);
  }
}

// Runs body(0..n-1) on `threads` threads; an exception is kept per item and
// the first in item order is rethrown, so what is reported does not depend
// on the thread count.
template <class Body>
void for_each_item(size_t n, int threads, Body body) {
  std::vector<std::exception_ptr> errors(n);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Stage 3: the files hashed in parallel, checked in SHA256SUMS order.
void check_digests(Suite& s, const std::map<std::string, std::string>& sums, const std::string& manifest_text,
                   int threads) {
  const std::vector<std::pair<std::string, std::string>> listed(sums.begin(), sums.end());
  std::vector<std::string> got(listed.size());
  for_each_item(listed.size(), threads, [&](size_t i) {
    const std::string& path = listed[i].first;
    got[i] = path == "manifest.json"
                 ? sha256_hex({reinterpret_cast<const uint8_t*>(manifest_text.data()), manifest_text.size()})
                 : sha256_file_hex(s.folder.root / path);
  });
  for (size_t i = 0; i < listed.size(); ++i) {
    const auto& [path, sum] = listed[i];
    if (got[i] != sum)
      bad_suite(s.folder.root, fmt::format("file {} has sha256 {}, SHA256SUMS says {}", path, got[i], sum));
    ++s.files_hashed;
  }
}

Suite read_suite(const fs::path& dir, int threads) {
  Suite s{open_folder(dir, "--suite", "; it must be a suite written by `fp4emu golden generate`"), {}, 0};
  const std::string manifest_text = read_text(s.folder, "manifest.json");
  const std::string sums_text = read_text(s.folder, "SHA256SUMS");
  s.manifest = parse_manifest(manifest_text, dir);                  // stage 1
  const std::map<std::string, std::string> sums = parse_sums(sums_text, dir);
  check_suite_paths(s, sums);                                        // stage 2
  check_digests(s, sums, manifest_text, threads);                    // stage 3
  return s;
}

// ---- stage 4: arrays against the manifest ---------------------------------------------

io::Array load_expected(const Suite& s, const ManifestFile& f) {
  io::Array a = io::read_npy(s.folder.root / f.path);
  if (a.dtype != *f.dtype || a.shape != f.shape)
    bad_suite(s.folder.root, fmt::format("file {} is {} {}, manifest.json says {} {}", f.path, io::dtype_name(a.dtype),
                                         io::shape_string(a.shape), io::dtype_name(*f.dtype), io::shape_string(f.shape)));
  return a;
}

// ---- values and their context ------------------------------------------------------------

std::string float_text(uint32_t bits) { return fmt::format("0x{:08x} ({})", bits, std::bit_cast<float>(bits)); }

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

// Where x/X lies on the element grid (E2M1 for MXFP4/NVFP4, S1P2 for HiF4):
// an exact midpoint is a tie, one within 2^-20 (relative) a near tie, the
// mark of a kernel that computes x/X by other arithmetic (a reciprocal,
// another operation order).
struct GridPosition {
  bool tie = false, near_tie = false;
  std::string text;
};

GridPosition grid_position(Format f, double scaled) {
  GridPosition g;
  double grid[8];
  for (int c = 0; c < 8; ++c) grid[c] = f == Format::hif4 ? s1p2_decode(static_cast<uint8_t>(c)) : e2m1_decode(static_cast<uint8_t>(c));
  const double t = std::fabs(scaled);
  g.text = fmt::format("x/X = {:.9g}", scaled);
  if (!std::isfinite(t)) return g;
  if (t > grid[7]) {
    g.text += fmt::format(" (beyond the largest element {})", grid[7]);
    return g;
  }
  int c = 0;
  while (c < 6 && t >= grid[c + 1]) ++c;
  const double mid = (grid[c] + grid[c + 1]) / 2;
  g.tie = t == mid;
  g.near_tie = !g.tie && std::fabs(t - mid) <= mid * 0x1p-20;
  if (g.tie) g.text += fmt::format(" (tie of {} and {})", grid[c], grid[c + 1]);
  if (g.near_tie) g.text += fmt::format(" (near tie of {} and {})", grid[c], grid[c + 1]);
  return g;
}

// Per-block flags of what differs.
enum : uint8_t { kScaleDiffers = 1, kCodesDiffer = 2, kValuesDiffer = 4, kLayoutDiffers = 8 };

int kind_rank(const std::string& kind) {
  if (kind == "global_scale") return 0;
  if (kind == "scale") return 1;
  if (kind == "code") return 2;
  if (kind == "dequant") return 3;
  return 4;
}

// ---- stage 5: one case ----------------------------------------------------------------------

class CaseRun {
 public:
  // `report`: this case's part alone (its errors, mismatch count and up to
  // max_report detailed mismatches), merged in case order by verify_suite,
  // so a case's lines do not depend on the cases before it or on threads.
  CaseRun(const Suite& suite, const Folder& candidate, const ManifestCase& c, const VerifyOptions& options,
          VerifyReport& report, CaseResult& result)
      : suite_(suite), cand_(candidate), c_(c), options_(options), report_(report), result_(result) {
    budget_ = options.max_report;
  }

  void run() {
    if (c_.expect_error) return run_expect_error();
    if (c_.is_gemm()) return run_gemm();
    run_quant();
  }

 private:
  // --- candidate files (stage 4 for the candidate) ---
  void error(const std::string& what) {
    ++errors_;
    result_.notes.push_back(what);
    report_.errors.push_back(fmt::format("{}: {}", c_.id, what));
  }
  void missing(const std::string& path) {
    std::string what = fmt::format("candidate file {} is missing", (cand_.root / path).string());
    if (!options_.skip_missing) {
      what += " (--skip-missing accepts a case with some of its outputs; --case, --family, --recipe select cases)";
      report_.errors.push_back(fmt::format("{}: {}", c_.id, what));
    }
    result_.notes.push_back(what);
  }
  std::optional<io::Array> load_candidate(const ManifestFile& f, const io::Array& expected) {
    const Located l = locate(cand_, f.path);
    if (l.missing) {
      missing(f.path);
      return std::nullopt;
    }
    if (!l.problem.empty()) {
      error("candidate file " + l.problem);
      return std::nullopt;
    }
    try {
      io::Array a = io::read_npy(l.path);
      if (a.dtype != expected.dtype || a.shape != expected.shape) {
        error(fmt::format("candidate file {} is {} {}, expected {} {}", l.path.string(), io::dtype_name(a.dtype),
                          io::shape_string(a.shape), io::dtype_name(expected.dtype), io::shape_string(expected.shape)));
        return std::nullopt;
      }
      ++result_.compared;
      return a;
    } catch (const InputError& e) {
      error(e.what());
      return std::nullopt;
    }
  }

  // --- mismatches: counted, and kept in detail for the first blocks ---
  void add(Mismatch m) {
    ++result_.mismatches;
    ++report_.total_mismatches;
    if (budget_ == 0) return;
    if (m.block < 0) {
      if (static_cast<int64_t>(case_level_.size()) < budget_) case_level_.push_back(std::move(m));
      return;
    }
    // Only the `budget_` lowest blocks can be listed; each keeps at most
    // `budget_` lines.
    auto it = detail_.find(m.block);
    if (it == detail_.end()) {
      if (static_cast<int64_t>(detail_.size()) >= budget_) {
        if (m.block > detail_.rbegin()->first) return;
        detail_.erase(std::prev(detail_.end()));
      }
      it = detail_.emplace(m.block, std::vector<Mismatch>{}).first;
    }
    std::vector<Mismatch>& list = it->second;
    if (static_cast<int64_t>(list.size()) < budget_) {
      list.push_back(std::move(m));
      return;
    }
    // A full block keeps its root causes: the files are compared codes first,
    // so a block's scale mismatch arrives after its code lines and must
    // displace the last line of the lowest-ranked kind (publish() sorts).
    auto worst = list.end();
    for (auto l = list.begin(); l != list.end(); ++l)
      if (worst == list.end() || kind_rank(l->kind) >= kind_rank(worst->kind)) worst = l;
    if (kind_rank(m.kind) < kind_rank(worst->kind)) {
      list.erase(worst);
      list.push_back(std::move(m));
    }
  }

  Mismatch base(const std::string& file, const char* kind, int64_t block) const {
    Mismatch m;
    m.case_id = c_.id;
    m.file = file;
    m.kind = kind;
    m.block = block;
    if (block >= 0) {
      m.row = block / geo_.blocks_per_row();
      m.block_in_row = block % geo_.blocks_per_row();
      m.expected_scale = scale_text(expected_scales_, block);
      m.actual_scale = scale_text(actual_scales_, block);
    }
    return m;
  }
  std::string scale_text(const std::vector<uint8_t>& s, int64_t block) const {
    if (s.empty()) return "?";
    uint32_t v = 0;
    for (int i = 0; i < sb_; ++i) v |= static_cast<uint32_t>(s[block * sb_ + i]) << (8 * i);
    return fmt::format("0x{:0{}x}", v, 2 * sb_);
  }
  bool skip_nan_block(int64_t block) const { return !options_.strict && nan_blocks_.count(block) > 0; }
  uint32_t input_word(int64_t row, int64_t k) const {
    const int64_t i = geo_.value_index(row, k);
    if (input_.dtype == io::DType::bf16) {
      uint16_t b;
      std::memcpy(&b, input_.bytes.data() + 2 * i, 2);
      return static_cast<uint32_t>(b) << 16;
    }
    return f32_bits(input_, i);
  }
  std::string input_text(int64_t row, int64_t k) const {
    if (k >= geo_.axis_len) return "pad";
    const uint32_t w = input_word(row, k);
    if (input_.dtype == io::DType::bf16) return fmt::format("0x{:04x} ({})", w >> 16, std::bit_cast<float>(w));
    return float_text(w);
  }
  float input_value(int64_t row, int64_t k) const {
    return k >= geo_.axis_len ? 0.0f : std::bit_cast<float>(input_word(row, k));
  }

  // --- the comparisons ---
  void compare_codes(const std::string& file, const io::Array& e, const io::Array& a) {
    const int64_t row_bytes = geo_.row_bytes();
    for (size_t i = 0; i < e.bytes.size(); ++i) {
      if (e.bytes[i] == a.bytes[i]) continue;
      const int64_t row = static_cast<int64_t>(i) / row_bytes, byte = static_cast<int64_t>(i) % row_bytes;
      for (bool high : {false, true}) {
        const int ev = high ? e.bytes[i] >> 4 : e.bytes[i] & 0xF, av = high ? a.bytes[i] >> 4 : a.bytes[i] & 0xF;
        if (ev == av) continue;
        int64_t b;
        int j;
        geo_.element_of(byte, high, &b, &j);
        const int64_t block = row * geo_.blocks_per_row() + b;
        if (skip_nan_block(block)) continue;
        flags_[block] |= kCodesDiffer;
        Mismatch m = base(file, "code", block);
        m.element = j;
        if (budget_ > 0) m.input = input_text(row, b * geo_.block + j);
        m.expected = fmt::format("0x{:x}", ev);
        m.actual = fmt::format("0x{:x}", av);
        add(std::move(m));
      }
    }
  }

  // Linear scales: one entry of sb_ bytes per block. In a NaN-scale HiF4
  // block only the E6M2 byte is defined.
  void compare_scales(const std::string& file, const io::Array& e, const io::Array& a) {
    for (int64_t block = 0; block < geo_.num_blocks(); ++block) {
      const int n = skip_nan_block(block) ? 1 : sb_;
      if (std::equal(e.bytes.begin() + block * sb_, e.bytes.begin() + block * sb_ + n, a.bytes.begin() + block * sb_))
        continue;
      flags_[block] |= kScaleDiffers;
      Mismatch m = base(file, "scale", block);
      m.expected = scale_text(e.bytes, block);
      m.actual = scale_text(a.bytes, block);
      add(std::move(m));
    }
  }

  void compare_layout(const std::string& file, StoredScaleLayout l, const io::Array& e, const io::Array& a) {
    const PackedTensor shape_only = c_.geometry();
    for (size_t i = 0; i < e.bytes.size(); ++i) {
      if (e.bytes[i] == a.bytes[i]) continue;
      const auto at = stored_scale_byte(static_cast<int64_t>(i), shape_only, l);
      if (at && at->byte > 0 && skip_nan_block(at->block)) continue;
      if (at) {
        layout_blocks_ += !(flags_[at->block] & kLayoutDiffers);
        flags_[at->block] |= kScaleDiffers | kLayoutDiffers;
      } else {
        ++layout_padding_;
      }
      Mismatch m = base(file, at ? "scale" : "layout_padding", at ? at->block : -1);
      m.expected = fmt::format("byte {} = 0x{:02x}", i, e.bytes[i]);
      m.actual = fmt::format("byte {} = 0x{:02x}", i, a.bytes[i]);
      if (at && sb_ > 1) {
        m.expected += fmt::format(" (scale byte {})", at->byte);
        m.actual += fmt::format(" (scale byte {})", at->byte);
      }
      add(std::move(m));
    }
  }

  void compare_dequant(const std::string& file, const io::Array& e, const io::Array& a) {
    const int64_t n = static_cast<int64_t>(e.bytes.size() / 4);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t eb = f32_bits(e, i), ab = f32_bits(a, i);
      if (same_value(eb, ab)) continue;
      int64_t row, k;
      geo_.row_and_k(i, &row, &k);
      const int64_t block = row * geo_.blocks_per_row() + k / geo_.block;
      flags_[block] |= kValuesDiffer;
      Mismatch m = base(file, "dequant", block);
      m.element = static_cast<int>(k % geo_.block);
      if (budget_ > 0) m.input = input_text(row, k);
      m.expected = float_text(eb);
      m.actual = float_text(ab);
      add(std::move(m));
    }
  }

  void compare_global_scale(const std::string& file, const io::Array& e, const io::Array& a) {
    static const char* kNames[3] = {"global_amax", "S_enc", "S_dec"};
    for (int64_t i = 0; i < 3; ++i) {
      const uint32_t eb = f32_bits(e, i), ab = f32_bits(a, i);
      if (same_value(eb, ab)) continue;
      global_differs_ = true;
      Mismatch m = base(file, "global_scale", -1);
      m.expected = fmt::format("{} {}", kNames[i], float_text(eb));
      m.actual = fmt::format("{} {}", kNames[i], float_text(ab));
      add(std::move(m));
    }
  }

  // --- context: the element scale X of each lane, from the expected scale ---
  // The lane's X is what a code of element value e1 (the smallest positive
  // element) decodes to, divided by e1: the reference dequantizer on one block
  // of such codes, so every recipe's own decode (HiF4 micro-exponents, NVFP4
  // S_dec) is used as is.
  const std::vector<double>& lane_scales(int64_t block) {
    auto it = lane_scale_cache_.find(block);
    if (it != lane_scale_cache_.end()) return it->second;
    std::vector<double> x(geo_.block, std::nan(""));
    if (!expected_scales_.empty()) {
      PackedTensor p = c_.geometry();
      p.shape = {1, geo_.block};
      p.axis = 1;
      p.rows = 1;
      p.axis_len = p.padded_len = geo_.block;
      p.codes.assign(geo_.block / 2, 0x11);
      p.scales.assign(expected_scales_.begin() + block * sb_, expected_scales_.begin() + (block + 1) * sb_);
      if (!global_scale_.empty()) {
        p.global_amax = global_scale_[0];
        p.global_encode_scale = global_scale_[1];
        p.global_decode_scale = global_scale_[2];
      }
      const double e1 = c_.recipe->format == Format::hif4 ? s1p2_decode(1) : e2m1_decode(1);
      try {
        const Tensor v = dequantize(p, DequantOptions{.impl = Impl::reference, .threads = 1});
        for (int j = 0; j < geo_.block; ++j) x[j] = v.data[j] / e1;
      } catch (const InputError&) {
        // A scale the decoder refuses gives no context; the mismatch stands.
      }
    }
    return lane_scale_cache_.emplace(block, std::move(x)).first->second;
  }

  void add_context(Mismatch& m) {
    const int64_t row = m.row, b = m.block_in_row;
    const uint8_t f = flags_[m.block];
    m.cause = f & kScaleDiffers ? "scale" : f & kCodesDiffer ? "codes" : "values";
    if (m.kind == "scale") {
      float amax = 0.0f;
      for (int j = 0; j < geo_.block; ++j) {
        const float v = std::fabs(input_value(row, b * geo_.block + j));
        amax = std::isnan(v) || std::isnan(amax) ? std::nanf("") : std::max(amax, v);
      }
      m.block_amax = float_text(std::bit_cast<uint32_t>(amax));
      if (c_.recipe->format == Format::nvfp4 && !global_scale_.empty()) {
        m.s_enc = float_text(std::bit_cast<uint32_t>(global_scale_[1]));
        m.before_rounding = fmt::format("amax/6*S_enc = {:.9g}", static_cast<double>(amax) / 6 * global_scale_[1]);
      } else if (c_.recipe->format == Format::mxfp4) {
        m.before_rounding = fmt::format("amax/6 = {:.9g}", static_cast<double>(amax) / 6);
      }
    } else if ((m.kind == "code" || m.kind == "dequant") && m.element >= 0) {
      const double X = lane_scales(m.block)[m.element];
      if (std::isfinite(X) && X != 0) {
        m.scaled = grid_position(c_.recipe->format, input_value(row, b * geo_.block + m.element) / X).text;
        if (c_.recipe->format == Format::nvfp4) m.scaled.replace(0, 3, "x/(s*S_dec)");
      }
      const int64_t k = b * geo_.block + m.element;
      if (!rbits_.empty() && k < geo_.axis_len)  // what the stochastic rounding of this element was fed
        m.scaled += fmt::format("{}random byte r = 0x{:02x} (away from zero iff floor(256*delta) + r >= 256)",
                                m.scaled.empty() ? "" : "; ", rbits_[geo_.value_index(row, k)]);
    }
  }

  // --- the one-line classification of a failing case ---
  // The shared diagnosis (quant/diagnose.hpp, as `fp4emu identify` uses it)
  // of the parts the candidate has, against the suite's reference; the
  // per-tensor scale and the kernel-ready layouts, which it does not see,
  // are named here. Without --strict the bits a NaN-scale block leaves
  // undefined are not compared, so they are taken from the reference first.
  std::string classify(const std::map<std::string, io::Array>& expected, const std::map<std::string, io::Array>& actual) {
    std::vector<std::string> parts;
    if (global_differs_) parts.push_back("the per-tensor scale (global_scale.npy) differs: every block follows from it");
    PackedTensor ref = c_.geometry();
    ref.codes = expected.at("codes.npy").bytes;
    ref.scales = expected_scales_;
    if (!global_scale_.empty()) {
      ref.global_amax = global_scale_[0];
      ref.global_encode_scale = global_scale_[1];
      ref.global_decode_scale = global_scale_[2];
    }
    Tensor x;
    x.shape = c_.shape;
    x.data = io::to_f32(input_);
    const std::vector<float> expected_values = io::to_f32(expected.at("dequant.npy"));
    std::vector<uint8_t> codes, scales;
    std::vector<float> values;
    if (actual.count("codes.npy")) codes = actual.at("codes.npy").bytes;
    if (actual.count("scales.npy")) scales = actual_scales_;
    if (actual.count("dequant.npy")) values = io::to_f32(actual.at("dequant.npy"));
    if (!options_.strict) {
      if (!codes.empty()) copy_nan_block_codes(ref.codes, codes);
      for (int64_t block : nan_blocks_) {
        if (!scales.empty())
          std::copy(ref.scales.begin() + block * sb_ + 1, ref.scales.begin() + (block + 1) * sb_,
                    scales.begin() + block * sb_ + 1);
      }
    }
    diagnose::Side a;
    a.codes = codes;
    a.nibble_order = c_.nibble_order;
    a.scales = scales;
    a.scale_bit_order = c_.scale_bit_order;
    a.values = values;
    try {
      const diagnose::Diagnosis d = diagnose::diagnose(x, ref, diagnose::side_of(ref, expected_values), a);
      if (!d.identical()) parts.push_back(d.summary());
    } catch (const InputError& e) {
      parts.push_back(fmt::format("(no diagnosis: {})", e.what()));
    }
    if (const std::string sr = stochastic_explanation(x, codes); !sr.empty()) parts.push_back(sr);
    if (layout_blocks_)
      parts.push_back(fmt::format("kernel-ready scale layout files differ in {} block{}", layout_blocks_,
                                  layout_blocks_ == 1 ? "" : "s"));
    if (layout_padding_) parts.push_back(fmt::format("{} layout padding bytes differ", layout_padding_));
    std::string line;
    for (size_t i = 0; i < parts.size(); ++i) line += (i ? "; " : "") + parts[i];
    return line;
  }

  // The codes of the NaN-scale blocks copied from `from` into `to` (their
  // codes are a convention, compared only with --strict).
  void copy_nan_block_codes(const std::vector<uint8_t>& from, std::vector<uint8_t>& to) const {
    for (int64_t block : nan_blocks_) {
      const int64_t row = block / geo_.blocks_per_row(), b = block % geo_.blocks_per_row();
      for (int j = 0; j < geo_.block; ++j) {
        const CaseGeometry::Slot sl = geo_.slot(b, j);
        const int64_t at = row * geo_.row_bytes() + sl.byte;
        const uint8_t mask = sl.high ? 0xF0 : 0x0F;
        to[at] = static_cast<uint8_t>((to[at] & ~mask) | (from[at] & mask));
      }
    }
  }

  // A stochastic case whose codes differ is quantized again by the reference
  // the ways a kernel commonly gets SR wrong; a match names the mistake:
  // round-to-nearest-even (the random bytes ignored), every byte 0 (the bytes
  // not added), and for a philox-te key the other rbits_map (the kernel reads
  // each cvt.rs word's bytes in the other order, docs/formats.md "Stochastic
  // rounding").
  // `got`: the candidate's codes (those of NaN-scale blocks taken from the
  // reference, as in classify), empty when it has none.
  std::string stochastic_explanation(const Tensor& x, const std::vector<uint8_t>& got) const {
    if (!c_.stochastic || got.empty()) return {};
    QuantOptions o;
    o.recipe = std::string(c_.recipe->id);
    o.axis = c_.axis;
    o.tail = TailPolicy::pad;
    o.nibble_order = c_.nibble_order;
    if (c_.recipe->format == Format::hif4) o.scale_bit_order = c_.scale_bit_order;
    if (!global_scale_.empty() && std::isfinite(global_scale_[0])) o.global_amax = global_scale_[0];
    o.input_dtype = c_.input_dtype == "bf16" ? InputDType::bf16 : InputDType::f32;
    o.impl = Impl::reference;
    o.threads = 1;
    const std::vector<uint8_t> zeros(rbits_.size(), 0);
    std::vector<std::pair<QuantOptions, std::string>> tries;
    QuantOptions rne = o;
    rne.rounding = Rounding::rne;
    tries.push_back({rne, "round-to-nearest-even: the kernel ignores the random bytes"});
    QuantOptions zero = o;
    zero.rounding = Rounding::stochastic;
    zero.stochastic.bytes = zeros;
    tries.push_back({zero, "every random byte 0 (truncation): the kernel does not add the random bytes"});
    if (c_.stochastic->rng == SrRng::philox_te) {
      const RbitsMap other = *c_.stochastic->map == RbitsMap::te ? RbitsMap::ptx : RbitsMap::te;
      QuantOptions swapped = o;
      swapped.rounding = Rounding::stochastic;
      swapped.stochastic.seed = c_.stochastic->seed;
      swapped.stochastic.offset = c_.stochastic->offset;
      swapped.stochastic.rng = SrRng::philox_te;
      swapped.stochastic.map = other;
      tries.push_back({swapped, fmt::format("rbits_map {}: the kernel reads the bytes of each cvt.rs word in the "
                                            "other order", to_string(other))});
    }
    for (const auto& [q, what] : tries) {
      try {
        std::vector<uint8_t> codes = quantize(x, q).codes;
        if (!options_.strict) copy_nan_block_codes(got, codes);
        if (codes == got) return "stochastic rounding: the codes are those of " + what;
      } catch (const InputError&) {
        // the reference refuses these options for this case: no explanation
      }
    }
    return {};
  }

  // Detailed mismatches into the report: per-tensor scale first, then block
  // by block (scale, codes, values), then layout padding.
  void publish() {
    std::vector<Mismatch> out;
    for (Mismatch& m : case_level_)
      if (m.kind == "global_scale") out.push_back(std::move(m));
    for (auto& [block, list] : detail_) {
      std::stable_sort(list.begin(), list.end(),
                       [](const Mismatch& a, const Mismatch& b) { return kind_rank(a.kind) < kind_rank(b.kind); });
      for (Mismatch& m : list) {
        add_context(m);
        out.push_back(std::move(m));
      }
    }
    for (Mismatch& m : case_level_)
      if (!m.kind.empty() && m.kind != "global_scale") out.push_back(std::move(m));
    for (Mismatch& m : out) {
      if (static_cast<int>(report_.first.size()) >= options_.max_report) break;
      report_.first.push_back(std::move(m));
    }
  }

  void run_quant() {
    geo_ = CaseGeometry(c_.shape, c_.axis, c_.block_size, c_.nibble_order);
    sb_ = scale_bytes_per_block(c_.recipe->format);
    flags_.assign(geo_.num_blocks(), 0);
    nan_blocks_.insert(c_.nan_scale_blocks.begin(), c_.nan_scale_blocks.end());
    input_ = load_expected(suite_, *c_.file("input.npy"));
    if (c_.stochastic) rbits_ = load_expected(suite_, *c_.file(c_.stochastic->rbits)).bytes;

    std::map<std::string, io::Array> expected, actual;
    for (const ManifestFile& f : c_.files) {
      if (f.role != "output") continue;
      ++result_.outputs;
      expected[f.name] = load_expected(suite_, f);
      if (auto a = load_candidate(f, expected[f.name])) actual[f.name] = std::move(*a);
    }
    expected_scales_ = expected["scales.npy"].bytes;
    if (actual.count("scales.npy")) actual_scales_ = actual["scales.npy"].bytes;
    if (expected.count("global_scale.npy")) {
      const io::Array& g = expected["global_scale.npy"];
      for (int i = 0; i < 3; ++i) global_scale_.push_back(std::bit_cast<float>(f32_bits(g, i)));
    }
    for (auto& [name, a] : actual) {
      const std::string file = c_.id + "/" + name;
      const io::Array& e = expected[name];
      if (name == "codes.npy") compare_codes(file, e, a);
      else if (name == "scales.npy") compare_scales(file, e, a);
      else if (name == "dequant.npy") compare_dequant(file, e, a);
      else if (name == "global_scale.npy") compare_global_scale(file, e, a);
      else compare_layout(file, *parse_stored_scale_layout(name.substr(7, name.size() - 11)), e, a);
    }
    if (result_.mismatches) result_.classification = classify(expected, actual);
    publish();
    finish();
  }

  void run_gemm() {
    std::map<std::string, std::string> model_of;
    for (const GemmOutput& o : c_.outputs) model_of[o.file] = fmt::format("{} blocks_per_step {}", o.model, o.blocks_per_step);
    std::map<std::string, int64_t> per_file;
    for (const ManifestFile& f : c_.files) {
      if (f.role != "output") continue;
      ++result_.outputs;
      const io::Array e = load_expected(suite_, f);
      const std::optional<io::Array> a = load_candidate(f, e);
      if (!a) continue;
      const int64_t n = c_.n, count = static_cast<int64_t>(e.bytes.size() / 4);
      for (int64_t i = 0; i < count; ++i) {
        // NaN bits included: every NaN of the models is 0x7fffffff (docs/gemm.md "NaN").
        const uint32_t eb = f32_bits(e, i), ab = f32_bits(*a, i);
        if (eb == ab) continue;
        ++per_file[f.name];
        Mismatch m;
        m.case_id = c_.id;
        m.file = f.path;
        m.kind = "gemm_c";
        m.row = i / n;
        m.column = i % n;
        m.input = "model " + model_of[f.name];
        m.expected = float_text(eb);
        m.actual = float_text(ab);
        add(std::move(m));
      }
    }
    std::string cls;
    for (const auto& [file, n] : per_file)
      cls += fmt::format("{}{} of {} C values differ under {}", cls.empty() ? "" : "; ", n, c_.m * c_.n, model_of[file]);
    result_.classification = cls;
    publish();
    finish();
  }

  // An expect-error case's evidence is the kernel's refusal: `error.txt`
  // (its message, possibly empty) in the case's directory, and no output.
  void run_expect_error() {
    result_.outputs = 1;
    for (const char* name : {"codes.npy", "scales.npy", "dequant.npy", "global_scale.npy"}) {
      const Located l = locate(cand_, c_.id + "/" + name);
      if (l.missing) continue;
      Mismatch m;
      m.case_id = c_.id;
      m.file = c_.id + "/" + name;
      m.kind = "unexpected_output";
      m.expected = "no output (the tail policy 'error' rejects this input)";
      m.actual = "an output file";
      add(std::move(m));
    }
    if (result_.mismatches) result_.classification = "the kernel wrote outputs for an input the recipe rejects";
    const Located l = locate(cand_, c_.id + "/error.txt");
    if (l.missing) missing(c_.id + "/error.txt");
    else if (!l.problem.empty()) error("candidate file " + l.problem);
    else ++result_.compared;
    publish();
    finish();
  }

  // The status, from what was compared (one place).
  void finish() {
    if (errors_) result_.status = CaseStatus::error;
    else if (result_.mismatches) result_.status = CaseStatus::fail;
    else if (result_.compared == 0) result_.status = options_.skip_missing ? CaseStatus::not_run : CaseStatus::error;
    else if (result_.compared < result_.outputs) result_.status = CaseStatus::partial;
    else result_.status = CaseStatus::pass;
    if (result_.status == CaseStatus::not_run)
      result_.notes = {c_.expect_error ? "the candidate has no error.txt (the kernel's refusal of the input) for it"
                                       : "the candidate has none of its outputs"};
  }

  const Suite& suite_;
  const Folder& cand_;
  const ManifestCase& c_;
  const VerifyOptions& options_;
  VerifyReport& report_;
  CaseResult& result_;
  int64_t budget_ = 0;
  int errors_ = 0;

  CaseGeometry geo_{{1}, 0, 1, NibbleOrder::low_first};
  int sb_ = 1;
  io::Array input_;
  std::vector<uint8_t> rbits_;  // a stochastic case's random bytes, row-major in the input's shape
  std::vector<uint8_t> expected_scales_, actual_scales_;
  std::vector<float> global_scale_;  // NVFP4: amax, S_enc, S_dec (expected)
  std::set<int64_t> nan_blocks_;
  std::vector<uint8_t> flags_;  // per block
  bool global_differs_ = false;
  int64_t layout_blocks_ = 0, layout_padding_ = 0;
  std::map<int64_t, std::vector<Mismatch>> detail_;
  std::vector<Mismatch> case_level_;
  std::map<int64_t, std::vector<double>> lane_scale_cache_;
};

// One case's result and part of the report between the ranks of a job
// (io::ByteWriter): each struct's fields listed once, for both directions.
template <class M, class Visit>
void mismatch_fields(M& m, Visit v) {
  v(m.case_id), v(m.file), v(m.kind), v(m.block), v(m.row), v(m.block_in_row), v(m.element), v(m.column);
  v(m.input), v(m.expected), v(m.actual), v(m.expected_scale), v(m.actual_scale), v(m.cause), v(m.scaled);
  v(m.block_amax), v(m.s_enc), v(m.before_rounding);
}
template <class R, class Visit>
void result_fields(R& r, Visit v) {
  v(r.id), v(r.family), v(r.recipe), v(r.status), v(r.outputs), v(r.compared), v(r.mismatches);
  v(r.classification), v(r.notes);
}

void encode(io::ByteWriter& w, const CaseResult& result, const VerifyReport& part) {
  auto put = [&w](const auto& field) { w.put(field); };
  result_fields(result, put);
  w.put(part.errors), w.put(part.total_mismatches), w.put<uint64_t>(part.first.size());
  for (const Mismatch& m : part.first) mismatch_fields(m, put);
}

void decode(io::ByteReader& r, CaseResult& result, VerifyReport& part) {
  auto get = [&r](auto& field) { r.get(field); };
  result_fields(result, get);
  r.get(part.errors), r.get(part.total_mismatches);
  part.first.resize(r.get<uint64_t>());
  for (Mismatch& m : part.first) mismatch_fields(m, get);
}

}  // namespace

std::string_view to_string(CaseStatus s) {
  switch (s) {
    case CaseStatus::pass: return "pass";
    case CaseStatus::fail: return "fail";
    case CaseStatus::partial: return "partial";
    case CaseStatus::not_run: return "not_run";
    case CaseStatus::error: return "error";
    case CaseStatus::stale: return "stale";
  }
  return "?";
}

int VerifyReport::count(CaseStatus s) const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(), [s](const CaseResult& c) { return c.status == s; }));
}

int VerifyReport::exit_code() const {
  if (!errors.empty()) return 2;
  return total_mismatches > 0 ? 1 : 0;
}

VerifyReport verify_suite(const fs::path& suite_dir, const fs::path& candidate, const VerifyOptions& options) {
  if (options.max_report < 0)
    throw InputError(fmt::format("--max-report {}: must be 0 or more (the number of mismatches listed in detail)",
                                 options.max_report));
  const int threads = thread_count(options.threads);
  VerifyReport report;
  report.suite = suite_dir;
  report.candidate = candidate;
  const Suite suite = read_suite(suite_dir, threads);
  report.files_hashed = suite.files_hashed;
  const Folder cand = open_folder(candidate, "--candidate",
                                  "; it must hold the kernel's outputs under the suite's file names (e.g. "
                                  "<recipe>/<case>/codes.npy)");
  std::vector<CaseFilter::Key> keys;
  for (const ManifestCase& c : suite.manifest.cases) keys.push_back({c.family, c.id, std::string(c.recipe->id)});
  if (!options.filter.empty()) options.filter.check_matches(keys);

  // Cases in parallel, each into its own result and part of the report,
  // merged in suite order: the report does not depend on the thread count.
  const std::vector<ManifestCase>& cases = suite.manifest.cases;
  std::vector<CaseResult> results(cases.size());
  std::vector<VerifyReport> parts(cases.size());
  // An MPI job (golden generate's exchange): rank r takes cases r, r + N,
  // ...; rank 0 gathers every case's result and part and merges them as one
  // process would.
  const GenerateOptions::Exchange* ex =
      options.exchange && options.exchange->size > 1 ? options.exchange : nullptr;
  std::vector<size_t> mine;
  for (size_t i = 0; i < cases.size(); ++i)
    if (!ex || static_cast<int>(i % static_cast<size_t>(ex->size)) == ex->rank) mine.push_back(i);
  for_each_item(mine.size(), threads, [&](size_t k) {
    const size_t i = mine[k];
    const ManifestCase& c = cases[i];
    CaseResult& result = results[i];
    VerifyReport& part = parts[i];
    result.id = c.id;
    result.family = c.family;
    result.recipe = c.recipe->id;
    if (!options.filter.selects(c.family, c.id, result.recipe)) {
      result.status = CaseStatus::not_run;
      result.notes.push_back("outside " + options.filter.text());
    } else if (c.bits_version != c.recipe->bits_version) {
      // The expected bits are those of another version of the recipe: not a
      // kernel's fault, and nothing to compare.
      result.status = CaseStatus::stale;
      const std::string what = fmt::format("suite made with {} bits v{}, this fp4emu implements v{}: regenerate "
                                           "it (fp4emu golden generate; CHANGELOG.md lists the changes)",
                                           result.recipe, c.bits_version, c.recipe->bits_version);
      result.notes.push_back(what);
      part.errors.push_back(fmt::format("{}: {}", c.id, what));
    } else {
      CaseRun(suite, cand, c, options, part, result).run();
    }
  });
  if (ex) {
    io::ByteWriter w;
    for (size_t i : mine) {
      w.put<uint64_t>(i);
      encode(w, results[i], parts[i]);
    }
    const std::vector<std::string> shares = ex->gather(w.take());
    if (ex->rank != 0) return report;  // rank 0 reports
    for (const std::string& share : shares) {
      io::ByteReader r(share);
      while (!r.done()) {
        const uint64_t i = r.get<uint64_t>();
        if (i >= cases.size()) throw std::logic_error("golden verify: a case index out of range from a rank");
        decode(r, results[i], parts[i]);
      }
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    report.cases.push_back(std::move(results[i]));
    VerifyReport& part = parts[i];
    report.errors.insert(report.errors.end(), part.errors.begin(), part.errors.end());
    report.total_mismatches += part.total_mismatches;
    for (Mismatch& m : part.first) {
      if (static_cast<int>(report.first.size()) >= options.max_report) break;
      report.first.push_back(std::move(m));
    }
  }
  const bool compared_any = std::any_of(report.cases.begin(), report.cases.end(), [](const CaseResult& r) {
    return r.compared > 0;
  });
  if (!compared_any && report.errors.empty())
    report.errors.push_back("the candidate holds none of the selected cases' output files; nothing was compared");
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
  if (!m.scaled.empty()) s += "; " + m.scaled;
  if (!m.block_amax.empty()) s += "; block amax " + m.block_amax;
  if (!m.s_enc.empty()) s += "; S_enc " + m.s_enc;
  if (!m.before_rounding.empty()) s += "; " + m.before_rounding;
  if (!m.expected_scale.empty() && m.kind != "scale")
    s += fmt::format("; block scale expected {}, actual {}", m.expected_scale, m.actual_scale);
  if (m.kind != "scale" && m.cause == "scale") s += " (follows from the block's scale)";
  return s;
}

std::string summary_line(const VerifyReport& r) {
  return fmt::format("{} passed, {} failed, {} partial, {} not run, {} errors, {} stale (cases); {} mismatches; exit {}",
                     r.count(CaseStatus::pass), r.count(CaseStatus::fail), r.count(CaseStatus::partial),
                     r.count(CaseStatus::not_run), r.count(CaseStatus::error), r.count(CaseStatus::stale),
                     r.total_mismatches, r.exit_code());
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& ch : u) ch = ch == '_' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return u;
}

}  // namespace

std::string report_text(const VerifyReport& r) {
  std::string s = fmt::format("suite {}: {} files, sha256 ok\ncandidate {}\n", r.suite.string(), r.files_hashed,
                              r.candidate.string());
  for (const CaseResult& c : r.cases) {
    // Filtered-out cases are counted in the summary, not listed.
    if (c.status == CaseStatus::not_run && c.compared == 0 && !c.notes.empty() && c.notes[0].rfind("outside ", 0) == 0)
      continue;
    s += fmt::format("{:<7} {}", upper(to_string(c.status)), c.id);
    if (c.status == CaseStatus::partial) s += fmt::format("  ({} of {} output files)", c.compared, c.outputs);
    if (c.mismatches) s += fmt::format("  ({} mismatches)", c.mismatches);
    s += "\n";
    if (!c.classification.empty()) s += "        why: " + c.classification + "\n";
    for (const std::string& n : c.notes) s += "        " + n + "\n";
  }
  if (!r.first.empty()) {
    s += fmt::format("first {} of {} mismatches, block by block, root cause first:\n", r.first.size(),
                     r.total_mismatches);
    for (const Mismatch& m : r.first) s += "  " + mismatch_line(m) + "\n";
  }
  // Errors not tied to a case (the case lines above show the others).
  for (const std::string& e : r.errors)
    if (std::none_of(r.cases.begin(), r.cases.end(), [&](const CaseResult& c) { return e.rfind(c.id + ": ", 0) == 0; }))
      s += "error: " + e + "\n";
  s += "summary: " + summary_line(r) + "\n";
  return s;
}

std::string report_json(const VerifyReport& r) {
  nlohmann::ordered_json j;
  j["suite"] = r.suite.string();
  j["candidate"] = r.candidate.string();
  j["suite_files_hashed"] = r.files_hashed;
  for (CaseStatus st : {CaseStatus::pass, CaseStatus::fail, CaseStatus::partial, CaseStatus::not_run,
                        CaseStatus::error, CaseStatus::stale})
    j[std::string(to_string(st))] = r.count(st);
  j["errors"] = r.errors;
  j["total_mismatches"] = r.total_mismatches;
  j["exit_code"] = r.exit_code();
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const CaseResult& c : r.cases) {
    nlohmann::ordered_json o{{"id", c.id},           {"family", c.family},     {"recipe", c.recipe},
                             {"status", to_string(c.status)}, {"outputs", c.outputs}, {"compared", c.compared},
                             {"mismatches", c.mismatches}};
    if (!c.classification.empty()) o["classification"] = c.classification;
    o["notes"] = c.notes;
    cases.push_back(std::move(o));
  }
  j["cases"] = cases;
  nlohmann::ordered_json ms = nlohmann::ordered_json::array();
  for (const Mismatch& m : r.first) {
    // Only the fields that apply to the mismatch's kind.
    nlohmann::ordered_json o{{"case", m.case_id}, {"file", m.file}, {"kind", m.kind}};
    if (m.block >= 0) {
      o["block"] = m.block;
      o["row"] = m.row;
      o["block_in_row"] = m.block_in_row;
    }
    if (m.element >= 0) o["element"] = m.element;
    if (m.column >= 0) {
      o["row"] = m.row;
      o["column"] = m.column;
    }
    const std::pair<const char*, const std::string*> text[] = {
        {"input", &m.input},          {"expected", &m.expected},      {"actual", &m.actual},
        {"expected_scale", &m.expected_scale}, {"actual_scale", &m.actual_scale}, {"cause", &m.cause},
        {"scaled", &m.scaled},        {"block_amax", &m.block_amax},  {"s_enc", &m.s_enc},
        {"before_rounding", &m.before_rounding}};
    for (const auto& [key, value] : text)
      if (!value->empty()) o[key] = *value;
    ms.push_back(std::move(o));
  }
  j["mismatches"] = ms;
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

namespace {

// Text for an XML attribute or element: markup escaped, and the characters
// XML 1.0 forbids (controls other than tab and newline) replaced.
std::string xml(std::string_view s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') out += '?';
        else out += ch;
    }
  }
  return out;
}

}  // namespace

std::string report_junit(const VerifyReport& r) {
  const int failures = r.count(CaseStatus::fail);
  const int errors = r.count(CaseStatus::error) + r.count(CaseStatus::stale);
  const int skipped = r.count(CaseStatus::not_run) + r.count(CaseStatus::partial);
  const std::string head = fmt::format("name=\"fp4emu golden verify\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\"",
                                       r.cases.size(), failures, errors, skipped);
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites {}>\n  <testsuite {}>\n", head, head);
  for (const CaseResult& c : r.cases) {
    s += fmt::format("    <testcase classname=\"golden.{}\" name=\"{}\"", xml(c.recipe), xml(c.id));
    std::string notes;
    for (const std::string& n : c.notes) notes += n + "\n";
    switch (c.status) {
      case CaseStatus::pass: s += "/>\n"; continue;
      case CaseStatus::fail: {
        std::string body;
        for (const Mismatch& m : r.first)
          if (m.case_id == c.id) body += mismatch_line(m) + "\n";
        s += fmt::format(">\n      <failure message=\"{} mismatches: {}\" type=\"mismatch\">{}{}</failure>\n",
                         c.mismatches, xml(c.classification), xml(body), xml(notes));
        break;
      }
      case CaseStatus::error:
      case CaseStatus::stale:
        s += fmt::format(">\n      <error message=\"{}\" type=\"{}\">{}</error>\n", xml(c.notes.empty() ? "" : c.notes[0]),
                         to_string(c.status), xml(notes));
        break;
      case CaseStatus::partial:
        s += fmt::format(">\n      <skipped message=\"partial: {} of {} output files compared, all equal\">{}</skipped>\n",
                         c.compared, c.outputs, xml(notes));
        break;
      case CaseStatus::not_run:
        s += fmt::format(">\n      <skipped message=\"not run: {}\"/>\n", xml(c.notes.empty() ? "" : c.notes[0]));
        break;
    }
    s += "    </testcase>\n";
  }
  s += "  </testsuite>\n</testsuites>\n";
  return s;
}

}  // namespace fp4emu::golden
