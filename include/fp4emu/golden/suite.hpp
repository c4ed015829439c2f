#pragma once
// Golden-vector suites (DESIGN.md §7; the format is documented in
// golden/README.md). `generate_suite` and `verify_suite` share nothing but the
// suite on disk: the generator writes manifest.json, SHA256SUMS and the .npy
// arrays; the verifier reads them back and compares a kernel's outputs.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace fp4emu::golden {

inline constexpr const char* kSchemaName = "fp4emu-golden";
inline constexpr int kSchemaVersion = 1;

// ---- generation ----------------------------------------------------------------
struct GenerateOptions {
  std::vector<std::string> formats;  // empty: every format
  std::vector<std::string> recipes;  // empty: the default set (kDefaultRecipes); "all": every packed recipe
  int level = 1;                     // 1 edges + small random, 2 + larger random, 3 + exhaustive bf16 sets
  uint64_t seed = 1;
  int threads = 0;                   // 0: OpenMP's default; never changes the bytes
};

// Each format's default recipe and its hardware recipes: the checked-in suite.
inline constexpr const char* kDefaultRecipes[] = {"hif4.v14", "hif4.a6", "mxfp4.ocp", "mxfp4.rceil", "nvfp4.te"};

// The recipe ids `options` selects, in the registry's order. InputError for an
// unknown format or recipe, a fake-quant-only recipe, or an empty selection.
std::vector<std::string> selected_recipes(const GenerateOptions& options);

// The generator command line as recorded in the manifest: every option
// explicit, in a fixed order, the output directory written as DIR (so a suite
// is byte-identical wherever it is generated).
std::string generator_command(const GenerateOptions& options);

struct GenerateSummary {
  int cases = 0;
  int files = 0;
  int64_t bytes = 0;
};

// Writes the suite to `out`. The suite is built in a temporary sibling
// directory and renamed into place, so `out` holds the old suite or the whole
// new one. `out` may be missing, empty, or a previous suite (it is replaced);
// anything else is refused with InputError.
GenerateSummary generate_suite(const std::filesystem::path& out, const GenerateOptions& options);

// ---- verification ----------------------------------------------------------------
struct VerifyOptions {
  int max_report = 20;        // mismatches listed in detail (all are counted)
  bool strict = false;        // also compare codes (and HiF4 L2/L3 bytes) of NaN-scale blocks
  bool skip_missing = false;  // a candidate file that is absent is skipped, not an error
};

// One differing value. `block` is the linear block index (row * blocks_per_row
// + block_in_row), `element` the index inside the block (-1 for a scale). A
// GEMM C value (kind gemm_c) has `row` and `column` of C instead, the model in
// `input`.
struct Mismatch {
  std::string case_id;
  std::string file;      // relative to the suite, e.g. "mxfp4.ocp/codes/codes.npy"
  std::string kind;      // code | scale | dequant | global_scale | layout_padding | unexpected_output | gemm_c
  int64_t block = -1;
  int64_t row = -1;
  int64_t block_in_row = -1;
  int element = -1;
  int64_t column = -1;   // gemm_c only
  std::string input;     // "0x3f800000 (1)" or "pad" or ""
  std::string expected;  // code, scale or value, hex (and decimal for values)
  std::string actual;
  std::string expected_scale;  // the block's scale, for context
  std::string actual_scale;
};

struct CaseResult {
  std::string id;
  std::string family;
  std::string status;  // pass | fail | skipped | error
  int64_t mismatches = 0;
  std::vector<std::string> notes;  // errors and skips, one line each
};

struct VerifyReport {
  std::filesystem::path suite, candidate;
  int files_hashed = 0;
  std::vector<CaseResult> cases;
  std::vector<Mismatch> first;  // up to max_report
  int64_t total_mismatches = 0;
  std::vector<std::string> errors;  // bad candidate files (exit 2)

  int passed() const;
  int failed() const;
  int skipped() const;
  // 0 all compared cases pass, 1 a mismatch, 2 a bad candidate.
  int exit_code() const;
};

// Checks the suite's SHA256SUMS and every manifest digest first (InputError,
// naming the file, if the suite is damaged), then compares the candidate.
VerifyReport verify_suite(const std::filesystem::path& suite, const std::filesystem::path& candidate,
                          const VerifyOptions& options);

std::string report_text(const VerifyReport& report);
std::string report_json(const VerifyReport& report);

}  // namespace fp4emu::golden
