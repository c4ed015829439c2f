#pragma once
// A golden suite's manifest.json and SHA256SUMS, parsed and validated
// (golden/README.md "manifest.json"). The suite is a folder anyone can edit
// and re-hash, so nothing here trusts it: every field is checked for type and
// range, every path is checked to stay inside the suite, and the geometry of
// each case is checked against its recipe's block size and against the
// dtype and shape the manifest gives for each file, before `golden verify`
// indexes any array. All of it works on text only (no files, no SHA-256), so
// a fuzzer can drive it.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4emu/io/array.hpp"
#include "fp4emu/quant/packed_tensor.hpp"
#include "fp4emu/quant/recipe.hpp"
#include "fp4emu/quant/scale_layout.hpp"
#include "fp4emu/quant/stochastic.hpp"

namespace fp4emu::golden {

// Largest manifest.json and SHA256SUMS read (a level-3 suite's manifest is a
// few MB).
inline constexpr int64_t kMaxManifestBytes = int64_t{1} << 30;
// Largest element count of one case's tensor: far beyond any suite, small
// enough that no size computed from it overflows int64.
inline constexpr int64_t kMaxCaseElements = int64_t{1} << 40;

struct ManifestFile {
  std::string path;  // relative to the suite: "<case id>/<name>"
  std::string name;  // within the case directory, e.g. "codes.npy"
  std::string role;  // input | output | operand | text
  std::optional<io::DType> dtype;  // absent for text files
  std::vector<int64_t> shape;      // the .npy shape (empty for text)
  std::string sha256;              // 64 lower-case hex digits
};

// A GEMM case's C file and the accumulation model that produced it.
struct GemmOutput {
  std::string file;  // name within the case directory
  std::string model;
  int blocks_per_step = 1;
};

struct ManifestCase {
  std::string id;      // "<recipe>/<name>", also the case's directory
  std::string family;  // codes | scale_steps | ... | tail_error | gemm
  std::string probes;
  const Recipe* recipe = nullptr;  // never null after parse_manifest
  bool expect_error = false;       // the input must be rejected
  int bits_version = 1;            // Recipe::bits_version of the generating fp4emu (1 if absent)
  std::string input_dtype;         // f32 | bf16
  int block_size = 0;              // the recipe's block size
  // Quantization cases (family != gemm).
  std::vector<int64_t> shape;
  int axis = 0;
  NibbleOrder nibble_order = NibbleOrder::low_first;
  ScaleBitOrder scale_bit_order = ScaleBitOrder::lsb_first;  // HiF4; the recipe's when absent
  std::optional<Rounding> rounding;
  std::vector<StoredScaleLayout> scale_layouts;  // besides linear
  std::vector<int64_t> nan_scale_blocks;          // sorted, each < num_blocks
  // Stochastic rounding (options.rounding "stochastic"): the case's random
  // bytes, an input file of the input's shape (uint8, one per element), and
  // when they came from Philox the key that regenerates them.
  struct Stochastic {
    std::string rbits;          // file name within the case's directory
    std::optional<SrRng> rng;   // nullopt: given bytes, no key
    uint64_t seed = 0, offset = 0;
    std::optional<RbitsMap> map;  // philox-te only
  };
  std::optional<Stochastic> stochastic;
  // GEMM cases.
  int64_t m = 0, n = 0, k = 0;
  std::vector<GemmOutput> outputs;
  // The epilogue's inputs (docs/gemm.md "Epilogue"): beta with a source C
  // (c.npy), a bias (bias.npy).
  std::optional<float> beta;
  bool bias = false;

  std::vector<ManifestFile> files;

  bool is_gemm() const { return family == "gemm"; }
  // The case's packed geometry (shape, axis, block, rows, padded length) with
  // no data: what the layouts and stored shapes are computed from.
  PackedTensor geometry() const;
  const ManifestFile* file(std::string_view name) const;
};

struct ParsedManifest {
  int schema_version = 0;
  std::string fp4emu_version;
  std::vector<ManifestCase> cases;
};

// Parses manifest.json and validates it completely: structure and types
// (schema, schema_version, every case field), ranges (axis within the rank,
// dims positive and their product at most kMaxCaseElements, block_size equal
// to the recipe's, nan_scale_blocks within the case), paths (relative, no
// '.', '..' or empty components, each file inside its case's directory, case
// ids unique), and the dtype and shape of every file against the case's
// geometry. InputError naming `suite_for_messages`, the case and the field
// otherwise; no other exception escapes.
ParsedManifest parse_manifest(std::string_view json_text, const std::filesystem::path& suite_for_messages);

// SHA256SUMS ("<64 hex>  <relative path>" per line, sha256sum's format):
// path -> digest. Paths obey the same rules as the manifest's; duplicates are
// rejected. InputError naming the line otherwise.
std::map<std::string, std::string> parse_sums(std::string_view text, const std::filesystem::path& suite_for_messages);

// The path rule of both files: non-empty, relative, '/'-separated, no empty,
// '.' or '..' component, no backslash or control character. Returns the
// problem, or an empty string when `path` is acceptable.
std::string relative_path_problem(std::string_view path);

// InputError "suite DIR: <what>; regenerate it ... or restore it from version
// control": the one message form of a damaged or hostile suite.
[[noreturn]] void bad_suite(const std::filesystem::path& suite, const std::string& what);

// `s` in single quotes, escaped by io::printable (control characters,
// invalid UTF-8 and bidirectional overrides made visible): untrusted text in
// a message.
std::string quote_untrusted(std::string_view s);

}  // namespace fp4emu::golden
