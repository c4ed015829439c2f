// The golden-suite manifest and SHA256SUMS parsers on arbitrary text: the
// parsed structure, with no files and no SHA-256 in the way. Rejections must
// be InputError; whatever is accepted must be safe for `golden verify` to
// index: every path relative and inside its case, every geometry in range.
#include <cstdint>
#include <string_view>

#include "fp4emu/error.hpp"
#include "fuzz_util.hpp"
#include "src/golden/manifest.hpp"

namespace {

void check_case(const fp4emu::golden::ManifestCase& c) {
  using fp4emu::golden::relative_path_problem;
  FUZZ_CHECK(c.recipe != nullptr);
  FUZZ_CHECK(relative_path_problem(c.id).empty());
  for (const auto& f : c.files) {
    FUZZ_CHECK(relative_path_problem(f.path).empty());
    FUZZ_CHECK(f.path == c.id + "/" + f.name);
  }
  if (c.is_gemm()) {
    FUZZ_CHECK(c.m > 0 && c.n > 0 && c.k > 0);
    return;
  }
  FUZZ_CHECK(!c.shape.empty() && c.axis >= 0 && c.axis < static_cast<int>(c.shape.size()));
  const fp4emu::PackedTensor g = c.geometry();
  FUZZ_CHECK(g.block_size > 0 && g.block_size == c.block_size);
  FUZZ_CHECK(g.axis_len > 0 && g.padded_len >= g.axis_len && g.padded_len % g.block_size == 0);
  FUZZ_CHECK(g.rows > 0 && g.rows <= fp4emu::golden::kMaxCaseElements / g.axis_len);
  for (int64_t b : c.nan_scale_blocks) FUZZ_CHECK(b >= 0 && b < g.num_blocks());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace golden = fp4emu::golden;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const golden::ParsedManifest m = golden::parse_manifest(text, "fuzz-suite");
    for (const auto& c : m.cases) check_case(c);
    fp4emu::fuzz::accepted("parse_manifest");
  } catch (const fp4emu::InputError& e) {
    fp4emu::fuzz::rejected("parse_manifest", e);
  }
  try {
    for (const auto& [path, digest] : golden::parse_sums(text, "fuzz-suite")) {
      FUZZ_CHECK(golden::relative_path_problem(path).empty());
      FUZZ_CHECK(digest.size() == 64);
    }
    fp4emu::fuzz::accepted("parse_sums");
  } catch (const fp4emu::InputError& e) {
    fp4emu::fuzz::rejected("parse_sums", e);
  }
  return 0;
}
