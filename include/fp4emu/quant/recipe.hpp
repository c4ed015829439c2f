#pragma once
// Formats and recipes. A recipe is a named variant of how a format is produced
// from real numbers; it is plain data (docs/architecture.md §3, §10). The canonical ids
// and the spec sections they implement are listed by `fp4emu formats`.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fp4emu/codec/rounding.hpp"
#include "fp4emu/quant/hif4_params.hpp"
#include "fp4emu/quant/mxfp4_params.hpp"
#include "fp4emu/quant/nvfp4_params.hpp"

namespace fp4emu {

enum class Format : uint8_t { hif4, mxfp4, nvfp4 };

std::string_view format_name(Format f);
std::optional<Format> parse_format(std::string_view name);
// Elements per block: HiF4 64, MXFP4 32, NVFP4 16.
int block_size(Format f);
// Bytes of scale metadata per block in the packed form: HiF4 4 (one 32-bit
// scale word), MXFP4 1 (E8M0), NVFP4 1 (UE4M3).
constexpr int scale_bytes_per_block(Format f) { return f == Format::hif4 ? 4 : 1; }

enum class TailPolicy : uint8_t {
  pad,    // zero-pad the last block (zeros change no block maximum)
  error,  // reject an axis length that is not a multiple of the block
};
std::string_view to_string(TailPolicy t);
std::optional<TailPolicy> parse_tail(std::string_view name);

// Order of two 4-bit codes in a byte.
enum class NibbleOrder : uint8_t {
  low_first,   // element 2i in bits 3..0, 2i+1 in bits 7..4 (PTX, CUDA, torchao, pto-isa, AMCT)
  high_first,  // element 2i in bits 7..4 (legacy HiF4 exporter)
  split_half,  // ggml: byte j of a block holds elements j (low) and j + block/2 (high)
};
std::string_view to_string(NibbleOrder n);
std::optional<NibbleOrder> parse_nibble_order(std::string_view name);

// HiF4: bit order of the L2/L3 bits inside bytes 1..3 of the scale word (docs/spec/hif4.md §5.2).
enum class ScaleBitOrder : uint8_t {
  lsb_first,  // group 0 in bit 0 (PTO spec, pto-isa)
  msb_first,  // group 0 in bit 7 (CANN AMCT)
};
std::string_view to_string(ScaleBitOrder s);
std::optional<ScaleBitOrder> parse_scale_bit_order(std::string_view name);

// Layout of the block-scale array. Only the row-major [rows, blocks] layout for
// now; the 128x4 tiled GEMM layout comes with the golden-vector work.
enum class ScaleLayout : uint8_t { linear };
std::string_view to_string(ScaleLayout s);

inline constexpr uint8_t rounding_bit(Rounding r) { return static_cast<uint8_t>(1u << static_cast<int>(r)); }

struct Recipe {
  std::string_view id;         // canonical id, e.g. "hif4.v14"
  Format format;
  bool is_default;             // the format's default recipe
  std::string_view summary;    // one line for `fp4emu formats`
  std::string_view spec_ref;   // where it is defined, e.g. "docs/spec/hif4.md §6.1"
  Rounding element_rounding;   // the recipe's own element rounding
  uint8_t allowed_roundings;   // rounding_bit(...) mask accepted as an override
  TailPolicy default_tail;
  NibbleOrder nibble_order;
  ScaleBitOrder scale_bit_order;  // HiF4 only
  bool fake_quant_only;        // no packed form exists (quantize is rejected)
  bool bf16_input_only;        // inputs must be bf16 values (hif4.a6)
  Hif4Params hif4{};
  MxParams mx{};
  NvParams nv{};
  // Version of this recipe's output bits: bumped whenever any output of the
  // recipe changes (CHANGELOG.md lists each change). Golden suites record it
  // per case so that a suite made by an older fp4emu is told apart from a
  // kernel bug.
  int bits_version = 1;
};

// InputError unless the recipe defines element rounding `rounding` (its own
// or an allowed override); the one check every entry point makes.
void check_rounding(const Recipe& recipe, Rounding rounding);

// All recipes, grouped by format, in a stable order.
std::span<const Recipe> all_recipes();
const Recipe* find_recipe(std::string_view id);
const Recipe& default_recipe(Format f);
// The recipe with this id, or the default recipe of a format name ("nvfp4");
// InputError listing the known ids otherwise.
const Recipe& recipe(std::string_view id_or_format);

// A recipe choice: an id or format name (checked when used), or a handle, a
// Recipe of the registry (all_recipes(), find_recipe, recipe, default_recipe).
//   QuantOptions q;  q.recipe = "nvfp4.te";  q.recipe = default_recipe(Format::mxfp4);
class RecipeRef {
 public:
  RecipeRef() = default;
  RecipeRef(std::string_view id) : id_(id) {}
  RecipeRef(const std::string& id) : id_(id) {}
  RecipeRef(const char* id) : id_(id) {}
  RecipeRef(const Recipe& r) : id_(r.id), recipe_(&r) {}

  // The recipe; InputError for an unknown id.
  const Recipe& get() const { return recipe_ ? *recipe_ : recipe(id_); }
  // The id or format name as given (a handle's id); also as a string_view,
  // for code that treats the choice as its id.
  const std::string& name() const { return id_; }
  operator std::string_view() const { return id_; }

 private:
  std::string id_;
  const Recipe* recipe_ = nullptr;
};

// Per-format tables (src/quant/reference/<format>_recipes.cpp).
std::span<const Recipe> hif4_recipes();
std::span<const Recipe> mxfp4_recipes();
std::span<const Recipe> nvfp4_recipes();

}  // namespace fp4emu
