// Activation dumps for the studies: tensor selection, layer/kind naming
// (docs/analysis.md §1) and deduplication of shared layer inputs.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/array.hpp"

namespace fp4emu::analysis {
namespace {

constexpr std::string_view kKinds[] = {"qkv_in", "o_in", "gateup_in", "down_in"};

// Dot- or slash-separated parts of a tensor name.
std::vector<std::string_view> name_parts(std::string_view name) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); ++i)
    if (i == name.size() || name[i] == '.' || name[i] == '/') {
      if (i > start) parts.push_back(name.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() < 9 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); });
}

std::optional<InputDType> float_dtype(io::DType d) {
  switch (d) {
    case io::DType::f32: return InputDType::f32;
    case io::DType::bf16: return InputDType::bf16;
    case io::DType::f16: return InputDType::f16;
    default: return std::nullopt;
  }
}

}  // namespace

std::span<const std::string_view> tensor_kinds() { return kKinds; }

TensorRole parse_tensor_role(std::string_view name) {
  TensorRole role;
  const std::vector<std::string_view> parts = name_parts(name);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    // "layers.3", "layer.3", "h.3", "blocks.3", or "layer3" / "layers_3".
    if (role.layer < 0 && i + 1 < parts.size() && all_digits(parts[i + 1]) &&
        (p == "layers" || p == "layer" || p == "h" || p == "blocks" || p == "block"))
      role.layer = std::stoi(std::string(parts[i + 1]));
    for (std::string_view prefix : {"layers_", "layer_", "layers", "layer"})
      if (role.layer < 0 && p.substr(0, prefix.size()) == prefix && all_digits(p.substr(prefix.size())))
        role.layer = std::stoi(std::string(p.substr(prefix.size())));
    static constexpr std::pair<std::string_view, std::string_view> kProj[] = {
        {"q_proj", "q"},       {"k_proj", "k"},         {"v_proj", "v"},     {"qkv_proj", "qkv"},
        {"o_proj", "o"},       {"gate_proj", "gate"},   {"up_proj", "up"},   {"gate_up_proj", "gate_up"},
        {"down_proj", "down"}};
    for (auto [token, proj] : kProj)
      if (p == token) role.proj = std::string(proj);
    for (std::string_view k : kKinds)
      if (p == k) role.kind = std::string(k);
  }
  if (role.kind.empty() && !role.proj.empty()) {
    const std::string& j = role.proj;
    role.kind = (j == "q" || j == "k" || j == "v" || j == "qkv")       ? "qkv_in"
                : j == "o"                                            ? "o_in"
                : (j == "gate" || j == "up" || j == "gate_up")         ? "gateup_in"
                                                                      : "down_in";
  }
  return role;
}

std::vector<const Recipe*> study_recipes(const std::vector<std::string>& formats,
                                         const std::vector<std::string>& recipes, std::string_view scale_rule) {
  if (!scale_rule.empty() && scale_rule != "ocp" && scale_rule != "ceil")
    throw InputError(fmt::format("--scale-rule '{}' is unknown; use ocp (mxfp4.ocp) or ceil (2^ceil(log2(amax/6)), "
                                 "mxfp4.rceil)",
                                 scale_rule));
  std::vector<Format> selected;
  for (const std::string& name : formats) {
    const auto f = parse_format(name);
    if (!f) throw InputError(fmt::format("--format '{}' is unknown; use hif4, mxfp4 or nvfp4", name));
    selected.push_back(*f);
  }
  std::vector<const Recipe*> out;
  for (const std::string& id : recipes) {
    const Recipe* r = find_recipe(id);
    if (!r)
      if (auto f = parse_format(id)) r = &default_recipe(*f);
    if (!r) throw InputError(fmt::format("--recipe '{}' is unknown; see `fp4emu formats`", id));
    // Both given: the recipes must lie in the formats, or --format would be dropped.
    if (!selected.empty() && std::find(selected.begin(), selected.end(), r->format) == selected.end())
      throw InputError(fmt::format("--recipe {} belongs to {}, which --format does not select; give --recipe alone, "
                                   "or add {} to --format",
                                   r->id, format_name(r->format), format_name(r->format)));
    if (std::find(out.begin(), out.end(), r) != out.end())
      throw InputError(fmt::format("--recipe names {} twice ('{}'); name each recipe once", r->id, id));
    out.push_back(r);
  }
  if (!out.empty()) {
    if (!scale_rule.empty())
      throw InputError("--scale-rule picks the MXFP4 recipe when --recipe does not; give one or the other (ocp is "
                       "mxfp4.ocp, ceil is mxfp4.rceil)");
    return out;
  }
  if (selected.empty()) selected = {Format::hif4, Format::mxfp4, Format::nvfp4};
  if (!scale_rule.empty() && std::find(selected.begin(), selected.end(), Format::mxfp4) == selected.end())
    throw InputError(fmt::format("--scale-rule {} applies to mxfp4, which --format does not select", scale_rule));
  for (const Format f : selected) {
    // docs/analysis.md's "ceil" rule, 2^ceil(log2(amax / 6)) (no block maximum
    // saturates), is NVIDIA's RCEIL recipe; torchao's CEIL (ceil(log2 amax) - 2)
    // is another rule, available as --recipe mxfp4.ceil.
    if (f == Format::mxfp4 && scale_rule == "ceil") out.push_back(find_recipe("mxfp4.rceil"));
    else out.push_back(&default_recipe(f));
  }
  return out;
}

MatrixShape as_matrix(const TensorRef& x) {
  if (x.shape.empty()) throw InputError("tensor has rank 0 (a scalar); the studies need a tokens x features matrix");
  MatrixShape m;
  m.cols = x.shape.back();
  m.rows = m.cols ? x.numel() / m.cols : 0;
  return m;
}

Dump::Dump(const std::vector<std::string>& inputs, const std::vector<std::string>& patterns, bool deduplicate)
    : set_(std::make_unique<io::TensorSet>(inputs)) {
  std::vector<size_t> floats;
  for (size_t i : io::select_tensors(*set_, patterns)) {
    const io::TensorInfo& info = set_->tensors()[i].info;
    if (!float_dtype(info.dtype)) continue;  // codes, scales, token ids: not activations
    io::Array probe;
    probe.shape = info.shape;
    if (info.shape.empty() || probe.numel() == 0)
      throw InputError(fmt::format("{}: tensor {} has shape {}; the studies need a non-empty tokens x features "
                                   "matrix (leave it out with --tensor)",
                                   set_->file_of(i).string(), info.name, io::shape_string(info.shape)));
    floats.push_back(i);
  }
  if (floats.empty())
    throw InputError(fmt::format("{}: none of the selected tensors holds floats (f32, bf16 or f16); the studies "
                                 "read activation tensors",
                                 label()));
  if (!deduplicate) {
    selected_ = std::move(floats);
    return;
  }
  const io::Deduplicated d = io::deduplicate(*set_, floats);
  selected_ = d.kept;
  for (const auto& [dup, kept] : d.aliases)
    aliases_.push_back(set_->tensors()[dup].info.name + " = " + set_->tensors()[kept].info.name);
}

Dump::~Dump() = default;
Dump::Dump(Dump&&) noexcept = default;
Dump& Dump::operator=(Dump&&) noexcept = default;

const std::string& Dump::name(size_t i) const { return set_->tensors()[selected_.at(i)].info.name; }
const std::filesystem::path& Dump::file(size_t i) const { return set_->file_of(selected_.at(i)); }
const std::map<std::string, std::string>& Dump::metadata(size_t i) const {
  return set_->metadata(set_->tensors()[selected_.at(i)].file);
}
const io::TensorInfo& Dump::info(size_t i) const { return set_->tensors()[selected_.at(i)].info; }

std::optional<size_t> Dump::find(std::string_view name) const {
  for (size_t i = 0; i < selected_.size(); ++i)
    if (set_->tensors()[selected_[i]].info.name == name) return i;
  return std::nullopt;
}

DumpTensor Dump::load(size_t i) const {
  const io::TensorInfo& info = set_->tensors()[selected_.at(i)].info;
  DumpTensor t;
  t.name = info.name;
  t.dtype = *float_dtype(info.dtype);
  t.x.shape = info.shape;
  t.x.data.resize(size_t(t.x.numel()));
  const io::TensorBytes bytes = set_->bytes(selected_[i]);
  io::widen_to_f32(info.dtype, bytes.bytes(), t.x.data,
                   fmt::format("{} tensor {}", set_->file_of(selected_[i]).string(), info.name));
  return t;
}

DumpTensor Dump::load_rows(size_t i, int64_t row_begin, int64_t row_end) const {
  const io::TensorInfo& info = set_->tensors()[selected_.at(i)].info;
  const int64_t cols = info.shape.empty() ? 1 : info.shape.back();
  const size_t row_bytes = size_t(cols) * io::dtype_size(info.dtype);
  if (row_begin < 0 || row_end < row_begin || size_t(row_end) * row_bytes > info.nbytes)
    throw std::invalid_argument("Dump::load_rows: rows out of range");
  DumpTensor t;
  t.name = info.name;
  t.dtype = *float_dtype(info.dtype);
  t.x.shape = {row_end - row_begin, cols};
  t.x.data.resize(size_t(t.x.numel()));
  const io::TensorBytes bytes = set_->bytes(selected_[i]);
  io::widen_to_f32(info.dtype, bytes.bytes().subspan(size_t(row_begin) * row_bytes, size_t(row_end - row_begin) * row_bytes),
                   t.x.data, fmt::format("{} tensor {}", set_->file_of(selected_[i]).string(), info.name));
  return t;
}

}  // namespace fp4emu::analysis
