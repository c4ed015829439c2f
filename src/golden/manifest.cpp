// Parsing and validation of manifest.json and SHA256SUMS (manifest.hpp).
// Every access to the untrusted JSON goes through `Node`, whose accessors
// check the type and range and throw InputError naming the field; nothing
// reads a value it has not checked.
#include "manifest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "fp4emu/error.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/printable.hpp"
#include "packing.hpp"

namespace fp4emu::golden {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The manifest needs depth 6 (top, cases, case, files, file, shape); deeper
// input is refused before nlohmann builds (and later destroys) it.
constexpr int kMaxJsonDepth = 16;

int json_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > kMaxJsonDepth) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// A checked view of one JSON value, named in messages by its owner and its
// field path: "case 'mxfp4.ocp/codes' field 'files[2].role'".
class Node {
 public:
  Node(const json& j, std::string owner, const fs::path& suite, std::string path = {})
      : j_(j), owner_(std::move(owner)), path_(std::move(path)), suite_(suite) {}

  [[noreturn]] void fail(const std::string& what) const { bad_suite(suite_, fmt::format("manifest.json: {} {}", where(), what)); }
  std::string where() const { return path_.empty() ? owner_ : fmt::format("{} field '{}'", owner_, path_); }
  const json& raw() const { return j_; }

  bool has(const char* key) const { return j_.is_object() && j_.contains(key) && !j_.at(key).is_null(); }
  Node at(const char* key) const {
    if (!j_.is_object()) fail("is not a JSON object");
    const auto it = j_.find(key);
    const std::string path = path_.empty() ? std::string(key) : path_ + "." + key;
    if (it == j_.end()) Node(j_, owner_, suite_, path).fail("is missing");
    return Node(*it, owner_, suite_, path);
  }
  Node object(const char* key) const {
    Node n = at(key);
    if (!n.j_.is_object()) n.fail(fmt::format("is {}, must be a JSON object", type_text(n.j_)));
    return n;
  }
  std::vector<Node> array(const char* key, size_t min_size = 0) const {
    Node n = at(key);
    if (!n.j_.is_array()) n.fail(fmt::format("is {}, must be an array", type_text(n.j_)));
    if (n.j_.size() < min_size) n.fail(fmt::format("has {} entries, needs at least {}", n.j_.size(), min_size));
    std::vector<Node> out;
    out.reserve(n.j_.size());
    for (size_t i = 0; i < n.j_.size(); ++i) out.emplace_back(n.j_[i], owner_, suite_, fmt::format("{}[{}]", n.path_, i));
    return out;
  }
  std::string string(const char* key) const { return at(key).as_string(); }
  std::string as_string() const {
    if (!j_.is_string()) fail(fmt::format("is {}, must be a string", type_text(j_)));
    return j_.get<std::string>();
  }
  // An integer in [lo, hi]: a JSON integer literal, never a float (1e300,
  // 3.9) or a string.
  int64_t integer(const char* key, int64_t lo, int64_t hi) const { return at(key).as_integer(lo, hi); }
  int64_t as_integer(int64_t lo, int64_t hi) const {
    int64_t v = 0;
    if (j_.is_number_unsigned()) {
      const uint64_t u = j_.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) fail(fmt::format("is {}, must be an integer in {}..{}", u, lo, hi));
      v = static_cast<int64_t>(u);
    } else if (j_.is_number_integer()) {
      v = j_.get<int64_t>();
    } else {
      fail(fmt::format("is {}, must be an integer in {}..{}", type_text(j_), lo, hi));
    }
    if (v < lo || v > hi) fail(fmt::format("is {}, must be an integer in {}..{}", v, lo, hi));
    return v;
  }
  // An unsigned 64-bit integer (a Philox seed or offset): a JSON integer
  // literal in 0..2^64-1.
  uint64_t unsigned64(const char* key) const {
    const Node n = at(key);
    if (n.j_.is_number_unsigned()) return n.j_.get<uint64_t>();
    if (n.j_.is_number_integer())
      n.fail(fmt::format("is {}, must be an integer in 0..{}", n.j_.get<int64_t>(), UINT64_MAX));
    n.fail(fmt::format("is {}, must be an integer in 0..{}", type_text(n.j_), UINT64_MAX));
  }
  bool boolean(const char* key) const {
    Node n = at(key);
    if (!n.j_.is_boolean()) n.fail(fmt::format("is {}, must be true or false", type_text(n.j_)));
    return n.j_.get<bool>();
  }

 private:
  static std::string type_text(const json& j) {
    if (j.is_number_float()) return "a non-integer number";
    if (j.is_number()) return "a number";
    return fmt::format("{} {}", j.is_object() || j.is_array() ? "an" : "a", j.type_name());
  }

  const json& j_;
  std::string owner_, path_;
  const fs::path& suite_;
};

std::string shape_text(const std::vector<int64_t>& s) { return io::shape_string(s); }

// A shape: 1..8 positive dims whose product stays at most kMaxCaseElements.
std::vector<int64_t> parse_shape(const Node& parent, const char* key) {
  std::vector<int64_t> shape;
  const std::vector<Node> dims = parent.array(key, 1);
  if (dims.size() > 8) parent.at(key).fail(fmt::format("has {} dims, at most 8 are supported", dims.size()));
  int64_t product = 1;
  for (const Node& d : dims) {
    const int64_t v = d.as_integer(1, kMaxCaseElements);
    if (__builtin_mul_overflow(product, v, &product) || product > kMaxCaseElements)
      parent.at(key).fail(fmt::format("has more than {} elements", kMaxCaseElements));
    shape.push_back(v);
  }
  return shape;
}

const std::set<std::string>& known_families() {
  static const std::set<std::string> f{"codes",  "scale_steps", "hif4_bits",  "special",   "tail", "tail_error",
                                       "random", "layout",      "stochastic", "exhaustive", "gemm"};
  return f;
}

ManifestFile parse_file(const Node& f, const ManifestCase& c) {
  ManifestFile out;
  out.path = f.string("path");
  if (const std::string p = relative_path_problem(out.path); !p.empty()) f.at("path").fail(p);
  const std::string prefix = c.id + "/";
  if (out.path.size() <= prefix.size() || out.path.compare(0, prefix.size(), prefix) != 0 ||
      out.path.find('/', prefix.size()) != std::string::npos)
    f.at("path").fail(fmt::format("is {}, must be a file directly inside the case's directory {}", quote_untrusted(out.path),
                                  quote_untrusted(prefix)));
  out.name = out.path.substr(prefix.size());
  out.role = f.string("role");
  if (out.role != "input" && out.role != "output" && out.role != "operand" && out.role != "text")
    f.at("role").fail(fmt::format("is {}, must be input, output, operand or text", quote_untrusted(out.role)));
  if (out.role != "text") {
    const std::string d = f.string("dtype");
    out.dtype = io::parse_dtype(d);
    if (!out.dtype) f.at("dtype").fail(fmt::format("is {}, must be one of {}", quote_untrusted(d), io::dtype_names()));
    // A scalar .npy has rank 0; the suite writes none, so rank >= 1.
    out.shape = parse_shape(f, "shape");
  }
  const std::string sum = f.string("sha256");
  if (sum.size() != 64 || !std::all_of(sum.begin(), sum.end(), [](char ch) {
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
      }))
    f.at("sha256").fail("is not 64 lower-case hex digits");
  out.sha256 = sum;
  return out;
}

// The file a case's geometry implies for `name`: its dtype and shape. nullopt
// for a name that this kind of case does not have.
struct Expected {
  std::string role;
  io::DType dtype;
  std::vector<int64_t> shape;
};

io::DType input_dtype_of(const ManifestCase& c) { return c.input_dtype == "bf16" ? io::DType::bf16 : io::DType::f32; }

std::optional<Expected> expected_quant_file(const ManifestCase& c, const std::string& name) {
  const PackedTensor p = c.geometry();
  if (name == "input.npy") return Expected{"input", input_dtype_of(c), c.shape};
  if (c.stochastic && name == c.stochastic->rbits) return Expected{"input", io::DType::u8, c.shape};
  if (c.expect_error) return std::nullopt;
  const io::DType scale_dtype = p.format == Format::hif4 ? io::DType::u32 : io::DType::u8;
  if (name == "codes.npy") return Expected{"output", io::DType::u8, p.stored_shape(p.padded_len / 2)};
  if (name == "scales.npy") return Expected{"output", scale_dtype, p.stored_shape(p.blocks_per_row())};
  if (name == "dequant.npy") return Expected{"output", io::DType::f32, c.shape};
  if (name == "global_scale.npy" && p.format == Format::nvfp4) return Expected{"output", io::DType::f32, {3}};
  if (name.starts_with("scales_") && name.ends_with(".npy")) {
    const auto l = parse_stored_scale_layout(std::string_view(name).substr(7, name.size() - 11));
    if (l && std::find(c.scale_layouts.begin(), c.scale_layouts.end(), *l) != c.scale_layouts.end())
      return Expected{"output", io::DType::u8, stored_scales_shape(p, *l)};
  }
  return std::nullopt;
}

std::optional<Expected> expected_gemm_file(const ManifestCase& c, const std::string& name) {
  const io::DType in = input_dtype_of(c);
  if (name == "A.npy") return Expected{"input", in, {c.m, c.k}};
  if (name == "B.npy") return Expected{"input", in, {c.k, c.n}};
  if (name == "c.npy" && c.beta) return Expected{"input", io::DType::f32, {c.m, c.n}};
  if (name == "bias.npy" && c.bias) return Expected{"input", io::DType::f32, {c.n}};
  for (const GemmOutput& o : c.outputs)
    if (o.file == name) return Expected{"output", io::DType::f32, {c.m, c.n}};
  // The packed operands and alpha' are what the kernel reads; verify never reads them.
  if (name.starts_with("a_") || name.starts_with("b_")) return Expected{"operand", io::DType::u8, {}};
  if (name == "alpha.npy") return Expected{"operand", io::DType::f32, {1}};
  return std::nullopt;
}

// The random bits of a stochastic case (golden/README.md "Stochastic
// rounding cases"): present exactly when options.rounding is stochastic, for
// a recipe that offers it; the file name is not another file of the case;
// a Philox key is complete (rng, seed, offset, and rbits_map for philox-te)
// or absent (given bytes).
void parse_stochastic(const Node& n, const Node& opt, ManifestCase& c) {
  const bool sr = c.rounding == Rounding::stochastic;
  if (!sr) {
    if (n.has("stochastic"))
      n.at("stochastic").fail(fmt::format("is given, but options.rounding is {}: random bits belong to a stochastic "
                                          "case only",
                                          c.rounding ? to_string(*c.rounding) : "absent"));
    return;
  }
  if (!(c.recipe->allowed_roundings & rounding_bit(Rounding::stochastic)))
    opt.at("rounding").fail(fmt::format("is stochastic, which recipe {} does not offer", c.recipe->id));
  if (!n.has("stochastic")) n.fail("has options.rounding stochastic but no field 'stochastic' (its random bits)");
  const Node s = n.object("stochastic");
  ManifestCase::Stochastic st;
  st.rbits = s.string("rbits");
  if (const std::string p = relative_path_problem(st.rbits);
      !p.empty() || st.rbits.find('/') != std::string::npos || !st.rbits.ends_with(".npy"))
    s.at("rbits").fail(fmt::format("is {}, must be a .npy file name inside the case's directory", quote_untrusted(st.rbits)));
  ManifestCase outputs = c;  // every file a quantization case can have
  outputs.expect_error = false;
  if (expected_quant_file(outputs, st.rbits))
    s.at("rbits").fail(fmt::format("is {}, the name of another file of the case", quote_untrusted(st.rbits)));
  if (s.has("rng")) {
    const std::string rng = s.string("rng");
    st.rng = parse_sr_rng(rng);
    if (!st.rng) s.at("rng").fail(fmt::format("is {}, must be philox-te or philox-index", quote_untrusted(rng)));
    st.seed = s.unsigned64("seed");
    st.offset = s.unsigned64("offset");
    if (*st.rng == SrRng::philox_te) {
      const std::string map = s.string("rbits_map");
      st.map = parse_rbits_map(map);
      if (!st.map) s.at("rbits_map").fail(fmt::format("is {}, must be te or ptx", quote_untrusted(map)));
    } else if (s.has("rbits_map")) {
      s.at("rbits_map").fail("is given, but philox-index gives each element its own byte (no word to map)");
    }
  } else {
    for (const char* key : {"seed", "offset", "rbits_map"})
      if (s.has(key)) s.at(key).fail("is given without 'rng': given bytes have no Philox key");
  }
  c.stochastic = std::move(st);
}

void parse_quant_fields(const Node& n, ManifestCase& c) {
  c.shape = parse_shape(n, "shape");
  const Node opt = n.object("options");
  const int64_t rank = static_cast<int64_t>(c.shape.size());
  c.axis = static_cast<int>(opt.integer("axis", 0, rank - 1));
  const std::string order = opt.string("nibble_order");
  const auto nibble = parse_nibble_order(order);
  if (!nibble) opt.at("nibble_order").fail(fmt::format("is {}, must be low_first, high_first or split_half", quote_untrusted(order)));
  c.nibble_order = *nibble;
  c.scale_bit_order = c.recipe->scale_bit_order;
  if (c.recipe->format == Format::hif4 && opt.has("scale_bit_order")) {
    const std::string b = opt.string("scale_bit_order");
    const auto parsed = parse_scale_bit_order(b);
    if (!parsed) opt.at("scale_bit_order").fail(fmt::format("is {}, must be lsb_first or msb_first", quote_untrusted(b)));
    c.scale_bit_order = *parsed;
  }
  if (opt.has("rounding")) {
    const std::string r = opt.string("rounding");
    c.rounding = parse_rounding(r);
    if (!c.rounding) opt.at("rounding").fail(fmt::format("is {}, not a rounding fp4emu knows", quote_untrusted(r)));
  }
  if (opt.has("scale_layouts"))
    for (const Node& l : opt.array("scale_layouts")) {
      const std::string s = l.as_string();
      const auto layout = parse_stored_scale_layout(s);
      if (!layout) l.fail(fmt::format("is {}, must be linear, swizzled_128x4 or hif4_cube", quote_untrusted(s)));
      if (!layout_applies(*layout, c.recipe->format))
        l.fail(fmt::format("is {}, which does not apply to {}", s, format_name(c.recipe->format)));
      if (*layout != StoredScaleLayout::linear) c.scale_layouts.push_back(*layout);
    }
  parse_stochastic(n, opt, c);
  const PackedTensor p = c.geometry();
  // The derived fields are redundant; when present they must agree.
  const std::pair<const char*, int64_t> derived[] = {
      {"rows", p.rows}, {"padded_len", p.padded_len}, {"blocks_per_row", p.blocks_per_row()}};
  for (const auto& [key, value] : derived)
    if (n.has(key)) {
      const int64_t v = n.integer(key, 0, std::numeric_limits<int64_t>::max());
      if (v != value)
        n.at(key).fail(fmt::format("is {}, but 'shape' {} with axis {} and block {} gives {}", v, shape_text(c.shape),
                                   c.axis, c.block_size, value));
    }
  if (!c.expect_error) {
    int64_t prev = -1;
    for (const Node& b : n.array("nan_scale_blocks")) {
      const int64_t v = b.as_integer(0, p.num_blocks() - 1);
      if (v <= prev) b.fail("is out of order (the list is strictly increasing)");
      c.nan_scale_blocks.push_back(prev = v);
    }
  }
}

void parse_gemm_fields(const Node& n, ManifestCase& c) {
  c.m = n.integer("m", 1, kMaxCaseElements);
  c.n = n.integer("n", 1, kMaxCaseElements);
  c.k = n.integer("k", 1, kMaxCaseElements);
  int64_t mn = 0, mk = 0, kn = 0;
  if (__builtin_mul_overflow(c.m, c.n, &mn) || __builtin_mul_overflow(c.m, c.k, &mk) ||
      __builtin_mul_overflow(c.k, c.n, &kn) || std::max({mn, mk, kn}) > kMaxCaseElements)
    n.fail(fmt::format("has m, n, k = {}, {}, {}: more than {} elements in A, B or C", c.m, c.n, c.k,
                       kMaxCaseElements));
  // Suites written before the epilogue had neither field.
  if (n.has("beta")) {
    const std::string text = n.string("beta");
    char* end = nullptr;
    const float beta = std::strtof(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(beta))
      n.at("beta").fail(fmt::format("is {}, must be a finite float (hex, e.g. \"-0x1p-1\") or null",
                                    quote_untrusted(text)));
    c.beta = beta;
  }
  if (n.has("bias")) c.bias = n.boolean("bias");
  std::set<std::string> seen;
  for (const Node& o : n.array("outputs", 1)) {
    GemmOutput g;
    g.file = o.string("file");
    if (const std::string p = relative_path_problem(g.file); !p.empty() || g.file.find('/') != std::string::npos ||
                                                           !g.file.ends_with(".npy"))
      o.at("file").fail(fmt::format("is {}, must be a .npy file name inside the case's directory", quote_untrusted(g.file)));
    if (!seen.insert(g.file).second) o.at("file").fail(fmt::format("{} is listed twice", quote_untrusted(g.file)));
    g.model = o.string("model");
    g.blocks_per_step = static_cast<int>(o.integer("blocks_per_step", 1, 1 << 20));
    c.outputs.push_back(std::move(g));
  }
}

ManifestCase parse_case(const Node& n, size_t index, const fs::path& suite) {
  ManifestCase c;
  // The id names the case in every later message, so it is checked first.
  const Node index_node(n.raw(), fmt::format("cases[{}]", index), suite);
  c.id = index_node.string("id");
  if (const std::string p = relative_path_problem(c.id); !p.empty()) index_node.at("id").fail(p);
  const Node cn(n.raw(), fmt::format("case {}", quote_untrusted(c.id)), suite);
  c.family = cn.string("family");
  if (!known_families().count(c.family)) cn.at("family").fail(fmt::format("is {}, not a known family", quote_untrusted(c.family)));
  if (cn.has("probes")) c.probes = cn.string("probes");
  const std::string recipe = cn.string("recipe");
  c.recipe = find_recipe(recipe);
  if (!c.recipe || c.recipe->fake_quant_only)
    cn.at("recipe").fail(fmt::format("is {}, not a packed recipe of this fp4emu", quote_untrusted(recipe)));
  if (c.id.compare(0, recipe.size() + 1, recipe + "/") != 0 || c.id.find('/', recipe.size() + 1) != std::string::npos)
    cn.at("id").fail(fmt::format("must be '{}/<name>' (the recipe, then the case name)", recipe));
  const std::string format = cn.string("format");
  if (format != format_name(c.recipe->format))
    cn.at("format").fail(fmt::format("is {}, but recipe {} is {}", quote_untrusted(format), recipe, format_name(c.recipe->format)));
  c.block_size = static_cast<int>(cn.integer("block_size", 1, 1024));
  if (c.block_size != fp4emu::block_size(c.recipe->format))
    cn.at("block_size").fail(fmt::format("is {}, but a {} block holds {} elements", c.block_size, format,
                                         fp4emu::block_size(c.recipe->format)));
  // Suites written before bits versions existed are bits v1.
  c.bits_version = cn.has("bits_version") ? static_cast<int>(cn.integer("bits_version", 1, 1 << 20)) : 1;
  const std::string expect = cn.string("expect");
  if (expect != "output" && expect != "error") cn.at("expect").fail(fmt::format("is {}, must be output or error", quote_untrusted(expect)));
  c.expect_error = expect == "error";
  c.input_dtype = cn.string("input_dtype");
  if (c.input_dtype != "f32" && c.input_dtype != "bf16")
    cn.at("input_dtype").fail(fmt::format("is {}, must be f32 or bf16", quote_untrusted(c.input_dtype)));

  if (c.is_gemm()) {
    if (c.expect_error) cn.at("expect").fail("is error, which a gemm case cannot be");
    parse_gemm_fields(cn, c);
  } else {
    parse_quant_fields(cn, c);
  }

  std::set<std::string> names;
  for (const Node& f : cn.array("files", 1)) {
    ManifestFile mf = parse_file(f, c);
    if (!names.insert(mf.name).second) f.at("path").fail(fmt::format("{} is listed twice", quote_untrusted(mf.path)));
    const std::optional<Expected> e = c.is_gemm() ? expected_gemm_file(c, mf.name) : expected_quant_file(c, mf.name);
    if (mf.role == "text") {
      if (mf.name != "blocks.txt") f.at("path").fail(fmt::format("{} is not a text file of a suite", quote_untrusted(mf.name)));
    } else if (!e) {
      f.at("path").fail(fmt::format("{} is not a file of a {} case", quote_untrusted(mf.name),
                                    c.is_gemm() ? "gemm" : (c.expect_error ? "expect-error" : "quantization")));
    } else if (mf.role != e->role) {
      f.at("role").fail(fmt::format("of {} is {}, must be {}", mf.name, quote_untrusted(mf.role), e->role));
    } else if (mf.role != "operand" && (*mf.dtype != e->dtype || mf.shape != e->shape)) {
      const std::string geometry =
          c.is_gemm() ? fmt::format("'m', 'n', 'k' = {}, {}, {}", c.m, c.n, c.k)
                      : fmt::format("'shape' {} (axis {}, block_size {})", shape_text(c.shape), c.axis, c.block_size);
      f.fail(fmt::format("gives {} as {} {}, but the case's {} needs {} {}", mf.name, io::dtype_name(*mf.dtype),
                         shape_text(mf.shape), geometry, io::dtype_name(e->dtype), shape_text(e->shape)));
    }
    c.files.push_back(std::move(mf));
  }
  // What verify needs to find: the input, and every output the case implies.
  const char* input = c.is_gemm() ? "A.npy" : "input.npy";
  if (!names.count(input)) cn.at("files").fail(fmt::format("has no {}", input));
  if (c.is_gemm()) {
    for (const GemmOutput& o : c.outputs)
      if (!names.count(o.file)) cn.at("outputs").fail(fmt::format("names {}, which 'files' does not list", quote_untrusted(o.file)));
    if (c.beta && !names.count("c.npy")) cn.at("files").fail("has no c.npy, the source C that 'beta' scales");
    if (c.bias && !names.count("bias.npy")) cn.at("files").fail("has no bias.npy, though 'bias' is true");
  } else if (!c.expect_error) {
    for (const char* need : {"codes.npy", "scales.npy", "dequant.npy"})
      if (!names.count(need)) cn.at("files").fail(fmt::format("has no {}", need));
    if (c.recipe->format == Format::nvfp4 && !names.count("global_scale.npy"))
      cn.at("files").fail("has no global_scale.npy");
  }
  if (c.stochastic && !names.count(c.stochastic->rbits))
    cn.at("stochastic").at("rbits").fail(fmt::format("names {}, which 'files' does not list", quote_untrusted(c.stochastic->rbits)));
  return c;
}

}  // namespace

void bad_suite(const fs::path& suite, const std::string& what) {
  throw InputError(fmt::format("suite {}: {}; regenerate it (fp4emu golden generate) or restore it from version "
                               "control",
                               suite.string(), what));
}

PackedTensor ManifestCase::geometry() const {
  PackedTensor p;
  p.format = recipe ? recipe->format : Format::hif4;
  p.recipe_id = recipe ? std::string(recipe->id) : std::string();
  p.shape = shape;
  p.axis = axis;
  p.block_size = block_size;
  p.nibble_order = nibble_order;
  p.scale_bit_order = scale_bit_order;
  if (shape.empty() || block_size <= 0) return p;
  const CaseGeometry g(shape, axis, block_size, nibble_order);
  p.rows = g.rows();
  p.axis_len = g.axis_len;
  p.padded_len = g.padded_len;
  return p;
}

const ManifestFile* ManifestCase::file(std::string_view name) const {
  for (const ManifestFile& f : files)
    if (f.name == name) return &f;
  return nullptr;
}

std::string quote_untrusted(std::string_view s) { return "'" + io::printable(s) + "'"; }

std::string relative_path_problem(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.size() > 4096) return "is longer than 4096 characters";
  if (path.front() == '/') return fmt::format("{} is an absolute path; paths are relative to the suite", quote_untrusted(path));
  for (char ch : path)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '\\')
      return fmt::format("{} holds a control character or a backslash", quote_untrusted(path));
  size_t start = 0;
  while (true) {
    const size_t end = path.find('/', start);
    const std::string_view part = path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (part.empty()) return fmt::format("{} has an empty component ('//' or a trailing '/')", quote_untrusted(path));
    if (part == "." || part == "..")
      return fmt::format("{} has a '{}' component; paths must stay inside the suite", quote_untrusted(path), part);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return {};
}

ParsedManifest parse_manifest(std::string_view json_text, const fs::path& suite) {
  if (static_cast<int64_t>(json_text.size()) > kMaxManifestBytes)
    bad_suite(suite, fmt::format("manifest.json is larger than {} bytes", kMaxManifestBytes));
  if (json_depth(json_text) > kMaxJsonDepth)
    bad_suite(suite, fmt::format("manifest.json nests arrays/objects deeper than {} levels", kMaxJsonDepth));
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    bad_suite(suite, fmt::format("manifest.json is not valid JSON ({})", e.what()));
  }
  const Node top(j, "the top level", suite);
  if (!j.is_object()) top.fail("is not a JSON object");
  ParsedManifest m;
  try {
    if (top.string("schema") != kSchemaName) top.at("schema").fail(fmt::format("is not '{}'", kSchemaName));
    m.schema_version = static_cast<int>(top.integer("schema_version", 0, std::numeric_limits<int>::max()));
    if (m.schema_version != kSchemaVersion)
      throw InputError(fmt::format("suite {}: schema_version {} is not supported by this fp4emu (it reads {}); use "
                                   "the fp4emu version named in manifest.json",
                                   suite.string(), m.schema_version, kSchemaVersion));
    if (top.has("fp4emu_version")) m.fp4emu_version = top.string("fp4emu_version");
    std::set<std::string> ids;
    const std::vector<Node> cases = top.array("cases", 1);
    for (size_t i = 0; i < cases.size(); ++i) {
      ManifestCase c = parse_case(cases[i], i, suite);
      if (!ids.insert(c.id).second) cases[i].at("id").fail(fmt::format("{} is used by two cases", quote_untrusted(c.id)));
      m.cases.push_back(std::move(c));
    }
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    // Defence in depth: the checks above leave nothing for nlohmann or the
    // layout code to throw, but no exception may leave as anything but an
    // InputError.
    bad_suite(suite, fmt::format("manifest.json cannot be read ({})", e.what()));
  }
  return m;
}

std::map<std::string, std::string> parse_sums(std::string_view text, const fs::path& suite) {
  if (static_cast<int64_t>(text.size()) > kMaxManifestBytes)
    bad_suite(suite, fmt::format("SHA256SUMS is larger than {} bytes", kMaxManifestBytes));
  std::map<std::string, std::string> sums;
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string_view line = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? text.size() : end + 1;
    ++line_no;
    const bool hex = line.size() >= 64 && std::all_of(line.begin(), line.begin() + 64, [](char ch) {
                       return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
                     });
    if (!hex || line.size() < 67 || line.substr(64, 2) != "  ")
      bad_suite(suite, fmt::format("SHA256SUMS line {} is not '<64 lower-case hex digits>  <path>'", line_no));
    const std::string path(line.substr(66));
    if (const std::string p = relative_path_problem(path); !p.empty())
      bad_suite(suite, fmt::format("SHA256SUMS line {}: the path {}", line_no, p));
    if (!sums.emplace(path, std::string(line.substr(0, 64))).second)
      bad_suite(suite, fmt::format("SHA256SUMS line {}: {} is listed twice", line_no, quote_untrusted(path)));
  }
  return sums;
}

}  // namespace fp4emu::golden
