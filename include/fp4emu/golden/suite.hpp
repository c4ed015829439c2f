#pragma once
// Golden-vector suites (docs/architecture.md §8; the format is documented in
// golden/README.md). `generate_suite` and `verify_suite` share nothing but the
// suite on disk: the generator writes manifest.json, SHA256SUMS and the .npy
// arrays; the verifier reads them back and compares a kernel's outputs.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace fp4emu::golden {

inline constexpr const char* kSchemaName = "fp4emu-golden";
inline constexpr int kSchemaVersion = 1;

// ---- case selection ---------------------------------------------------------------
// Which cases `golden generate` writes and `golden verify` compares. Each list
// is ORed, the lists are ANDed; an empty list selects everything. Globs are
// shell-style over the whole string (io::glob_match: `*` also crosses '/').
struct CaseFilter {
  std::vector<std::string> families;  // globs over the family, e.g. "tail*"
  std::vector<std::string> cases;     // globs over the case id, e.g. "mxfp4.ocp/random_*"
  std::vector<std::string> recipes;   // recipe ids
  bool empty() const { return families.empty() && cases.empty() && recipes.empty(); }
  bool selects(const std::string& family, const std::string& id, const std::string& recipe) const;
  // "--family 'tail*' --case '*/codes'", for the generator command line and messages.
  std::string text() const;
  // InputError naming the option when a recipe id is unknown, or a pattern
  // or recipe matches none of `cases` (a typo never selects silently).
  struct Key {
    std::string family, id, recipe;
  };
  void check_matches(const std::vector<Key>& cases) const;
};

// ---- generation ----------------------------------------------------------------
struct GenerateOptions {
  std::vector<std::string> formats;  // empty: every format
  std::vector<std::string> recipes;  // empty: the default set (kDefaultRecipes); "all": every packed recipe
  std::vector<std::string> families;  // globs over the family; empty: all
  std::vector<std::string> cases;     // globs over the case id; empty: all
  int level = 1;                     // 1 edges + small random, 2 + larger random, 3 + exhaustive bf16 sets
  uint64_t seed = 1;
  int threads = 0;                   // 0: OpenMP's default; never changes the bytes
  // Several processes generating one suite (the CLI's MPI ranks): each
  // realizes its share of the cases and `gather` brings every share to
  // rank 0, which alone touches `out`. The bytes do not depend on `size`.
  struct Exchange {
    int rank = 0, size = 1;
    // Rank 0: every rank's payload, in rank order; other ranks: empty. Called
    // by every rank the same number of times.
    std::function<std::vector<std::string>(std::string)> gather;
  };
  const Exchange* exchange = nullptr;  // null: this process alone
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
// new one; a failed run leaves no temporary and no directory it created.
// `out` may be missing, empty, or a previous suite (it is replaced); anything
// else is refused with InputError, as are a --family/--case selection that
// matches no case and a thread count outside 0..1024.
GenerateSummary generate_suite(const std::filesystem::path& out, const GenerateOptions& options);

// ---- verification ----------------------------------------------------------------
struct VerifyOptions {
  int max_report = 20;        // mismatches listed in detail (all are counted); >= 0
  bool strict = false;        // also compare codes (and HiF4 L2/L3 bytes) of NaN-scale blocks
  bool skip_missing = false;  // a case missing some outputs is `partial`, not an error
  CaseFilter filter;          // cases outside it are `not_run`
  // Cases (and the suite's digests) in parallel; 0: OpenMP's default. Never
  // changes the report; memory holds one case's arrays per thread.
  int threads = 0;
  // Several processes verifying one candidate (the CLI's MPI ranks, as for
  // generate): every rank checks the suite, rank r compares cases r, r + N,
  // ..., and rank 0 gets the whole report (the same as one process's);
  // the other ranks get one without cases. Null: this process alone.
  const GenerateOptions::Exchange* exchange = nullptr;
};

// One differing value. `block` is the linear block index (row * blocks_per_row
// + block_in_row), `element` the index inside the block (-1 for a scale). A
// GEMM C value (kind gemm_c) has `row` and `column` of C instead, the model in
// `input`. Mismatches are listed block by block, root cause first: the scale,
// then the codes, then the dequantized values of a block.
struct Mismatch {
  std::string case_id;
  std::string file;      // relative to the suite, e.g. "mxfp4.ocp/codes/codes.npy"
  std::string kind;      // scale | code | dequant | global_scale | layout_padding | unexpected_output | gemm_c
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
  // Why (code and dequant lanes, and scales): the lane's scaled input x/X
  // (X = the lane's element scale decoded from the expected scale; NVFP4
  // x/(s*S_dec)) and where it lies on the element grid ("tie of 1 and 1.5",
  // "near tie", ""); for a scale, the block amax, the NVFP4 per-tensor S_enc
  // and the value the scale rule rounds (amax/6, NVFP4 amax/6*S_enc).
  std::string cause;           // root cause of the block: scale | codes | values
  std::string scaled;          // "x/X = 0.75 (tie of 0.5 and 1)"
  std::string block_amax;
  std::string s_enc;
  std::string before_rounding;
};

// A case's outcome. pass: every output compared equal; fail: a mismatch;
// partial: the outputs the candidate has match but some are missing; not_run:
// outside the filter, or (with --skip-missing) none of its outputs in the
// candidate; error: a bad candidate file (or, without --skip-missing, a
// missing one); stale: the suite was made with another bits version of the
// recipe than this fp4emu implements (nothing compared: regenerate).
enum class CaseStatus { pass, fail, partial, not_run, error, stale };
std::string_view to_string(CaseStatus s);

struct CaseResult {
  std::string id;
  std::string family;
  std::string recipe;
  CaseStatus status = CaseStatus::not_run;
  int outputs = 0;   // output files the case has (an expect-error case: its error.txt)
  int compared = 0;  // of those, found in the candidate and compared
  int64_t mismatches = 0;
  std::string classification;      // one line: why it fails (empty when it does not)
  std::vector<std::string> notes;  // errors, missing files, one line each
};

struct VerifyReport {
  std::filesystem::path suite, candidate;
  int files_hashed = 0;
  std::vector<CaseResult> cases;
  std::vector<Mismatch> first;  // up to max_report
  int64_t total_mismatches = 0;
  std::vector<std::string> errors;  // bad candidate files, stale cases, missing files (exit 2)

  int count(CaseStatus s) const;
  // 0 every selected case passes (or is partial with --skip-missing), 1 a
  // mismatch, 2 a bad or missing candidate file or a stale case.
  int exit_code() const;
};

// Checks the suite in stages (golden/README.md "Verification"): manifest
// structure, paths, digests, geometry against the files, then compares the
// candidate. InputError, naming the file and field, for a damaged or hostile
// suite, a bad filter or option.
VerifyReport verify_suite(const std::filesystem::path& suite, const std::filesystem::path& candidate,
                          const VerifyOptions& options);

std::string report_text(const VerifyReport& report);
std::string report_json(const VerifyReport& report);
// JUnit XML: one testcase per suite case (failure: the classification and the
// first mismatches; error: bad candidate or stale suite; skipped: not run or
// partial).
std::string report_junit(const VerifyReport& report);

}  // namespace fp4emu::golden
