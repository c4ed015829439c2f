// `golden generate`: runs every case through the reference quantizer and
// writes the suite (golden/README.md describes the files).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/golden/sha256.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/threads.hpp"
#include "fp4emu/version.hpp"
#include "src/io/byte_stream.hpp"
#include "generator.hpp"
#include "packing.hpp"

namespace fp4emu::golden {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string hex_float(float v) { return fmt::format("{:a}", v); }

std::string_view dtype_name(InputDType d) {
  switch (d) {
    case InputDType::f32: return "f32";
    case InputDType::bf16: return "bf16";
    case InputDType::f16: return "f16";
  }
  return "?";
}

struct OutFile {
  std::string name;  // within the case directory
  std::string role;  // input | output | text
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

OutFile npy_file(std::string name, std::string role, const io::Array& a) {
  return {std::move(name), std::move(role), std::string(io::dtype_name(a.dtype)), a.shape, io::encode_npy(a)};
}

// An input array: fp32, or bf16 words for a bf16-input recipe.
OutFile input_file(std::string name, const std::vector<int64_t>& shape, const std::vector<float>& x, InputGrid g) {
  if (g.dtype != InputDType::bf16) return npy_file(std::move(name), "input", io::from_f32(shape, x));
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = static_cast<uint16_t>(g.bits(x[i]));
  return npy_file(std::move(name), "input", io::from_bf16_bits(shape, bits));
}

// <prefix>codes.npy and <prefix>scales.npy of a packed tensor (a HiF4 scale as
// its u32 word, little-endian: the stored bytes in order).
void codes_and_scales(const std::string& prefix, const char* role, const PackedTensor& p, std::vector<OutFile>& files) {
  files.push_back(npy_file(prefix + "codes.npy", role, io::from_u8(p.stored_shape(p.padded_len / 2), p.codes)));
  if (p.format == Format::hif4) {
    std::vector<uint32_t> words(p.num_blocks());
    for (size_t i = 0; i < words.size(); ++i)
      for (int b = 0; b < 4; ++b) words[i] |= static_cast<uint32_t>(p.scales[4 * i + b]) << (8 * b);
    files.push_back(npy_file(prefix + "scales.npy", role, io::from_u32(p.stored_shape(p.blocks_per_row()), words)));
  } else {
    files.push_back(npy_file(prefix + "scales.npy", role, io::from_u8(p.stored_shape(p.blocks_per_row()), p.scales)));
  }
}

// NVFP4's <prefix>global_scale.npy; returns its manifest entry.
ojson global_scale(const std::string& prefix, const char* role, const PackedTensor& p, std::vector<OutFile>& files) {
  const float gs[3] = {p.global_amax, p.global_encode_scale, p.global_decode_scale};
  files.push_back(npy_file(prefix + "global_scale.npy", role, io::from_f32({3}, gs)));
  return {{"amax", hex_float(p.global_amax)},
          {"encode", hex_float(p.global_encode_scale)},
          {"decode", hex_float(p.global_decode_scale)}};
}

// One line per block: "index row block | input words | scale | codes", hex.
// In a stochastic case a field with each element's random byte (2 hex digits)
// follows the input words, so the codes stay the last field.
std::string blocks_text(const CaseSpec& c, const PackedTensor& p, const std::vector<float>& x,
                        const std::vector<uint8_t>& rbits) {
  const InputGrid g{c.options.input_dtype};
  const CaseGeometry geo(p.shape, p.axis, p.block_size, p.nibble_order);
  const int sb = scale_bytes_per_block(p.format);
  const char* scale_kind = p.format == Format::hif4    ? "HiF4 scale word, u32: E6M2 | L2 << 8 | L3 << 16"
                           : p.format == Format::mxfp4 ? "E8M0 code"
                                                       : "UE4M3 code";
  std::string s = fmt::format("# fp4emu golden blocks: {} (recipe {}, input {}, block {})\n", c.id, p.recipe_id,
                              dtype_name(c.options.input_dtype), p.block_size);
  if (p.format == Format::nvfp4)
    s += fmt::format("# per-tensor scale: global_amax {} S_enc {} S_dec {}\n", hex_float(p.global_amax),
                     hex_float(p.global_encode_scale), hex_float(p.global_decode_scale));
  s += fmt::format("# block row block_in_row | input words ({} bits, element 0 first, '-' = padding) | {}scale ({}) | "
                   "codes (one hex digit per element, element 0 first)\n",
                   g.hex_digits() * 4,
                   rbits.empty() ? "" : "random bytes of stochastic rounding (rbits.npy, '-' = padding) | ",
                   scale_kind);
  const int64_t blocks = geo.blocks_per_row();
  const uint8_t* codes = p.codes.data();
  for (int64_t row = 0; row < geo.rows(); ++row)
    for (int64_t b = 0; b < blocks; ++b) {
      s += fmt::format("{} {} {} |", row * blocks + b, row, b);
      for (int j = 0; j < p.block_size; ++j) {
        const int64_t k = b * p.block_size + j;
        if (k < geo.axis_len)
          s += fmt::format(" {:0{}x}", g.bits(x[geo.value_index(row, k)]), g.hex_digits());
        else
          s += fmt::format(" {:->{}}", "", g.hex_digits());
      }
      if (!rbits.empty()) {
        s += " |";
        for (int j = 0; j < p.block_size; ++j) {
          const int64_t k = b * p.block_size + j;
          s += k < geo.axis_len ? fmt::format(" {:02x}", rbits[geo.value_index(row, k)]) : std::string(" --");
        }
      }
      uint32_t scale = 0;
      for (int i = 0; i < sb; ++i) scale |= static_cast<uint32_t>(p.scales[(row * blocks + b) * sb + i]) << (8 * i);
      s += fmt::format(" | {:0{}x} | ", scale, 2 * sb);
      for (int j = 0; j < p.block_size; ++j) {
        const CaseGeometry::Slot sl = geo.slot(b, j);
        const uint8_t byte = codes[row * geo.row_bytes() + sl.byte];
        s += fmt::format("{:x}", sl.high ? byte >> 4 : byte & 0xF);
      }
      s += "\n";
    }
  return s;
}

// The bytes of a Philox key, one per element, row-major in the input's shape
// (the layout of rbits.npy).
std::vector<uint8_t> philox_bytes(const StochasticBits& key, const std::vector<int64_t>& shape, int axis, int block) {
  const int a = axis < 0 ? axis + static_cast<int>(shape.size()) : axis;
  const CaseGeometry geo(shape, a, block, NibbleOrder::low_first);
  std::vector<uint8_t> out(static_cast<size_t>(geo.rows() * geo.axis_len)), row(geo.padded_len);
  for (int64_t r = 0; r < geo.rows(); ++r) {
    stochastic_row_bits(key, shape, a, block, r, geo.padded_len, row.data());
    for (int64_t k = 0; k < geo.axis_len; ++k) out[geo.value_index(r, k)] = row[k];
  }
  return out;
}

// A realized case: its manifest line, and its files until they are written.
struct CaseOutput {
  std::string line;  // the case's manifest entry, one line of JSON
  int files = 0;
  int64_t bytes = 0;
  std::vector<std::pair<std::string, std::string>> sums;  // relative path, sha256
  std::vector<std::pair<std::string, std::vector<uint8_t>>> pending;  // relative path, bytes

  // Between the ranks of a job (GenerateOptions::Exchange): everything, files included.
  void encode(io::ByteWriter& w) const {
    w.put(line), w.put(files), w.put(bytes), w.put<uint64_t>(sums.size());
    for (const auto& [path, sum] : sums) w.put(path), w.put(sum);
    w.put<uint64_t>(pending.size());
    for (const auto& [path, data] : pending) w.put(path), w.put(data);
  }
  void decode(io::ByteReader& r) {
    r.get(line), r.get(files), r.get(bytes);
    sums.resize(r.get<uint64_t>());
    for (auto& [path, sum] : sums) r.get(path), r.get(sum);
    pending.resize(r.get<uint64_t>());
    for (auto& [path, data] : pending) r.get(path), r.get(data);
  }
};

CaseOutput finish_case(const std::string& id, std::vector<OutFile> files, ojson meta);

// Builds the case's files and its manifest entry.
CaseOutput realize(const CaseSpec& c) {
  const std::vector<float> x = c.make();
  Tensor t;
  t.shape = c.shape;
  t.data = x;
  std::vector<OutFile> files;
  const InputGrid g{c.options.input_dtype};
  if (c.options.input_dtype == InputDType::bf16) {
    // quantize() trusts a declared bf16 dtype; input.npy must hold exactly
    // the values quantized.
    for (float v : x)
      if (!is_bf16_exact(v)) throw std::logic_error(c.id + ": a bf16 case holds a value that is not a bf16");
  }
  files.push_back(input_file("input.npy", c.shape, x, g));

  // Stochastic rounding: the random bytes are an input of the case; Philox's
  // are expanded from their key here, so a kernel can read them or
  // regenerate them.
  const StochasticBits& key = c.options.stochastic;
  QuantOptions options = c.options;
  std::vector<uint8_t> rbits;
  if (c.options.rounding == Rounding::stochastic) {
    rbits = key.seed ? philox_bytes(key, c.shape, c.options.axis, block_size(c.recipe->format)) : c.make_rbits();
    if (rbits.size() != x.size()) throw std::logic_error(c.id + ": the random bytes do not fit the input");
    if (!key.seed) options.stochastic.bytes = rbits;
    files.push_back(npy_file("rbits.npy", "input", io::from_u8(c.shape, rbits)));
  }

  ojson meta;
  meta["id"] = c.id;
  meta["family"] = c.family;
  meta["probes"] = c.probes;
  meta["format"] = std::string(format_name(c.recipe->format));
  meta["recipe"] = std::string(c.recipe->id);
  meta["bits_version"] = c.recipe->bits_version;
  // (An expect-error case's own options are rejected; its other fields are
  // resolved as if padded.)
  QuantOptions resolvable = options;
  if (c.expect_error) resolvable.tail = TailPolicy::pad;
  const ResolvedOptions o = resolve_options(resolvable, c.shape);
  ojson opt;
  opt["axis"] = o.axis;
  opt["tail"] = std::string(to_string(c.expect_error ? *c.options.tail : o.tail));
  opt["rounding"] = std::string(to_string(o.rounding));
  opt["nibble_order"] = std::string(to_string(o.nibble_order));
  opt["scale_bit_order"] = c.recipe->format == Format::hif4 ? ojson(std::string(to_string(o.scale_bit_order))) : ojson();
  std::vector<std::string> layouts{"linear"};
  for (StoredScaleLayout l : c.layouts) layouts.emplace_back(to_string(l));
  opt["scale_layouts"] = layouts;
  opt["global_amax"] = o.global_amax ? ojson(hex_float(*o.global_amax)) : ojson();
  meta["options"] = opt;
  if (!rbits.empty()) {
    ojson sr;
    sr["rbits"] = "rbits.npy";
    if (key.seed) {
      sr["rng"] = std::string(to_string(key.rng));
      sr["seed"] = *key.seed;
      sr["offset"] = key.offset;
      if (key.rng == SrRng::philox_te) sr["rbits_map"] = std::string(to_string(key.map));
    }
    meta["stochastic"] = sr;
  }
  meta["input_dtype"] = std::string(dtype_name(c.options.input_dtype));
  meta["shape"] = c.shape;
  const int block = block_size(c.recipe->format);
  const CaseGeometry geo(c.shape, o.axis, block, o.nibble_order);
  meta["block_size"] = block;
  meta["rows"] = geo.rows();
  meta["padded_len"] = geo.padded_len;
  meta["blocks_per_row"] = geo.blocks_per_row();

  if (c.expect_error) {
    std::string message;
    try {
      (void)quantize(t, c.options);
    } catch (const InputError& e) {
      message = e.what();
    }
    if (message.empty()) throw std::logic_error(c.id + ": the reference accepted an input the case expects rejected");
    meta["expect"] = "error";
    meta["error"] = message;
  } else {
    const PackedTensor p = quantize(t, options);
    if (key.seed) {  // the bytes written are the ones the key gave
      QuantOptions given = options;
      given.stochastic = {};
      given.stochastic.bytes = rbits;
      const PackedTensor q = quantize(t, given);
      if (q.codes != p.codes || q.scales != p.scales)
        throw std::logic_error(c.id + ": rbits.npy does not reproduce the codes of its Philox key");
    }
    const Tensor dq = dequantize(p, kReferenceDequant);
    meta["expect"] = "output";
    codes_and_scales("", "output", p, files);
    for (StoredScaleLayout l : c.layouts)
      files.push_back(npy_file(fmt::format("scales_{}.npy", to_string(l)), "output",
                               io::from_u8(stored_scales_shape(p, l), store_scales(p, l))));
    if (p.format == Format::nvfp4) meta["global_scale"] = global_scale("", "output", p, files);
    files.push_back(npy_file("dequant.npy", "output", io::from_f32(dq.shape, dq.data)));
    // A block whose every element decodes to NaN has a NaN scale (no element
    // code is NaN in these formats): its element codes are fp4emu's
    // convention, not any library's bits (golden/README.md).
    std::vector<int64_t> nan_blocks;
    for (int64_t row = 0; row < geo.rows(); ++row)
      for (int64_t b = 0; b < geo.blocks_per_row(); ++b) {
        bool all_nan = true;
        for (int64_t k = b * block; k < std::min<int64_t>((b + 1) * block, geo.axis_len); ++k)
          all_nan = all_nan && std::isnan(dq.data[geo.value_index(row, k)]);
        if (all_nan) nan_blocks.push_back(row * geo.blocks_per_row() + b);
      }
    meta["nan_scale_blocks"] = nan_blocks;
    if (c.blocks_txt) {
      const std::string text = blocks_text(c, p, x, rbits);
      files.push_back({"blocks.txt", "text", "", {}, std::vector<uint8_t>(text.begin(), text.end())});
    }
  }

  return finish_case(c.id, std::move(files), std::move(meta));
}

// Completes the case's manifest entry (paths, digests); the files wait in
// `pending` for write_case.
CaseOutput finish_case(const std::string& id, std::vector<OutFile> files, ojson meta) {
  CaseOutput r;
  ojson list = ojson::array();
  for (OutFile& f : files) {
    const std::string rel = id + "/" + f.name;
    const std::string sum = sha256_hex(f.bytes);
    ojson entry;
    entry["path"] = rel;
    entry["role"] = f.role;
    if (!f.dtype.empty()) {
      entry["dtype"] = f.dtype;
      entry["shape"] = f.shape;
    }
    entry["sha256"] = sum;
    list.push_back(entry);
    r.sums.push_back({rel, sum});
    r.files += 1;
    r.bytes += static_cast<int64_t>(f.bytes.size());
    r.pending.emplace_back(rel, std::move(f.bytes));
  }
  meta["files"] = list;
  r.line = meta.dump();
  return r;
}

// Writes a case's files under `stage` (and frees them).
void write_case(CaseOutput& c, const fs::path& stage) {
  for (const auto& [rel, bytes] : c.pending) {
    std::error_code ec;
    const fs::path dir = (stage / rel).parent_path();
    fs::create_directories(dir, ec);
    if (ec) throw InputError(fmt::format("cannot create '{}': {}", dir.string(), ec.message()));
    io::write_file_atomic(stage / rel, bytes);
  }
  c.pending.clear();
  c.pending.shrink_to_fit();
}

// A packed GEMM operand's files (role "operand": what a kernel consumes) and
// its manifest entry.
ojson operand_files(const std::string& side, const PackedTensor& p, std::vector<OutFile>& files) {
  codes_and_scales(side + "_", "operand", p, files);
  // The scales also in the kernel-ready layout of the format, as GEMM kernels
  // read them (swizzled_128x4: Blackwell block-scaled MMA; hif4_cube: Ascend).
  std::vector<std::string> layouts{"linear"};
  for (StoredScaleLayout l : {StoredScaleLayout::swizzled_128x4, StoredScaleLayout::hif4_cube}) {
    if (!layout_applies(l, p.format)) continue;
    files.push_back(npy_file(fmt::format("{}_scales_{}.npy", side, to_string(l)), "operand",
                             io::from_u8(stored_scales_shape(p, l), store_scales(p, l))));
    layouts.emplace_back(to_string(l));
  }
  ojson o;
  o["scale_layouts"] = layouts;
  o["shape"] = p.shape;
  o["axis"] = p.axis;
  o["tail"] = "pad";
  o["nibble_order"] = std::string(to_string(p.nibble_order));
  o["padded_len"] = p.padded_len;
  if (p.format == Format::nvfp4) o["global_scale"] = global_scale(side + "_", "operand", p, files);
  return o;
}

// Replaces every block's scale code by a random code of the format's range:
// MXFP4 E8M0 0x00..0xFF, NVFP4 UE4M3 0x00..0x7F. Block `nan_block` gets the
// NaN code (0xFF, 0x7F) whatever the draw, so that every such case has one.
void randomize_scales(PackedTensor& p, Rng& rng, int64_t nan_block) {
  const int64_t range = p.format == Format::nvfp4 ? 0x80 : 0x100;
  for (uint8_t& s : p.scales) s = static_cast<uint8_t>(rng.below(range));
  p.scales[nan_block] = static_cast<uint8_t>(range - 1);
}

CaseOutput realize_gemm(const GemmCaseSpec& c) {
  const Recipe& r = *c.recipe;
  const InputGrid g{r.bf16_input_only ? InputDType::bf16 : InputDType::f32};
  Rng rng(c.seed, c.id);
  Tensor ta, tb;
  ta.shape = {c.m, c.k};
  ta.data = gemm_operand_values(rng, c.m, c.k, false, g);
  tb.shape = {c.k, c.n};
  tb.data = gemm_operand_values(rng, c.k, c.n, true, g);
  QuantOptions qa = golden_options(r, g.dtype), qb = qa;
  qa.axis = 1;
  qb.axis = 0;
  qa.tail = qb.tail = TailPolicy::pad;
  PackedTensor pa = quantize(ta, qa), pb = quantize(tb, qb);
  if (c.random_scales) {
    // A NaN block in row 1 of A and in the last column of B: C row 1 and C
    // column n-1 are NaN, the rest is not.
    randomize_scales(pa, rng, pa.blocks_per_row());
    randomize_scales(pb, rng, pb.num_blocks() - 1);
  }

  std::vector<OutFile> files;
  files.push_back(input_file("A.npy", ta.shape, ta.data, g));
  files.push_back(input_file("B.npy", tb.shape, tb.data, g));
  ojson meta;
  meta["id"] = c.id;
  meta["family"] = "gemm";
  meta["probes"] = c.probes;
  meta["format"] = std::string(format_name(r.format));
  meta["recipe"] = std::string(r.id);
  meta["bits_version"] = r.bits_version;
  meta["input_dtype"] = std::string(dtype_name(g.dtype));
  meta["m"] = c.m;
  meta["n"] = c.n;
  meta["k"] = c.k;
  meta["block_size"] = block_size(r.format);
  meta["a"] = operand_files("a", pa, files);
  meta["b"] = operand_files("b", pb, files);
  meta["random_scales"] = c.random_scales;
  meta["alpha"] = c.alpha ? ojson(hex_float(*c.alpha)) : ojson();
  const std::optional<float> used = gemm_alpha(pa, pb, c.alpha);
  meta["alpha_used"] = used ? ojson(hex_float(*used)) : ojson();
  // alpha' as a file the kernel reads: 1 where nothing multiplies (1·x = x
  // for every fp32 x, so C is the same either way).
  const float alpha_file[1] = {used.value_or(1.0f)};
  files.push_back(npy_file("alpha.npy", "operand", io::from_f32({1}, alpha_file)));
  meta["implementation"] = "scalar";
  meta["expect"] = "output";

  // The epilogue's source C and bias (docs/gemm.md "Epilogue"): each value
  // the exact product's size times a normal draw, so that the rounding order
  // of every step shows in D; one Inf and one NaN in C, a −0 in the bias.
  Tensor source, bias;
  if (c.beta || c.bias) {
    GemmOptions o;
    o.impl = GemmImpl::scalar;
    o.threads = 1;
    const Tensor acc = gemm(pa, pb, o);
    const auto near = [&](float v) {
      const float x = std::isfinite(v) && v != 0.0f ? v : 1.0f;
      return static_cast<float>(x * rng.normal());
    };
    if (c.beta) {
      source.shape = {c.m, c.n};
      for (float v : acc.data) source.data.push_back(near(v));
      source.data[1] = std::numeric_limits<float>::infinity();
      source.data[c.n + 2] = std::numeric_limits<float>::quiet_NaN();
      files.push_back(npy_file("c.npy", "input", io::from_f32(source.shape, source.data)));
    }
    if (c.bias) {
      bias.shape = {c.n};
      for (int64_t j = 0; j < c.n; ++j) bias.data.push_back(near(acc.data[j]));
      bias.data[0] = -0.0f;
      files.push_back(npy_file("bias.npy", "input", io::from_f32(bias.shape, bias.data)));
    }
  }
  meta["beta"] = c.beta ? ojson(hex_float(*c.beta)) : ojson();
  meta["bias"] = c.bias;
  meta["epilogue"] = "D = fma(beta, C, fma(alpha_used, acc, bias)); terms without their input are left out";

  // block_fp32 at one block per fp32 add, and at one hardware MMA step of
  // K = 64 (docs/spec/mxfp4.md §7.4, docs/spec/nvfp4.md §7.3; a HiF4 block is already 64).
  std::vector<std::pair<GemmModel, int>> models{{GemmModel::exact, 1}, {GemmModel::block_fp32, 1}};
  const int step = static_cast<int>(64 / block_size(r.format));
  if (step > 1) models.push_back({GemmModel::block_fp32, step});
  models.push_back({GemmModel::fma_fp32, 1});
  ojson outputs = ojson::array();
  for (const auto& [model, bps] : models) {
    GemmOptions o;
    o.model = model;
    o.blocks_per_step = bps;
    o.alpha = c.alpha;
    if (c.beta) {
      o.c = &source;
      o.beta = *c.beta;
    }
    if (c.bias) o.bias = &bias;
    o.threads = 1;
    o.impl = GemmImpl::scalar;
    const Tensor C = gemm(pa, pb, o);
    const std::string name = model == GemmModel::block_fp32 ? fmt::format("C_block_fp32_bps{}.npy", bps)
                                                            : fmt::format("C_{}.npy", to_string(model));
    files.push_back(npy_file(name, "output", io::from_f32(C.shape, C.data)));
    outputs.push_back({{"file", name}, {"model", std::string(to_string(model))}, {"blocks_per_step", bps}});
  }
  meta["outputs"] = outputs;
  return finish_case(c.id, std::move(files), std::move(meta));
}

// Checked writes (no space, file-size limit: an InputError with the reason);
// a failure removes the staging folder, so no half-written suite is left.
void write_text(const fs::path& path, const std::string& text) {
  io::write_file_atomic(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

// The suite directory may be replaced only when it is empty or a suite.
void check_destination(const fs::path& out) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec))
    throw InputError(fmt::format("--out {}: exists and is not a directory; choose a new directory name", out.string()));
  if (fs::is_empty(out, ec) || fs::exists(out / "manifest.json", ec)) return;
  throw InputError(fmt::format("--out {}: is a non-empty directory without a manifest.json; golden generate only "
                               "replaces an empty directory or a previous suite",
                               out.string()));
}

}  // namespace

std::vector<std::string> selected_recipes(const GenerateOptions& options) {
  std::vector<Format> formats;
  for (const std::string& f : options.formats) {
    const auto parsed = parse_format(f);
    if (!parsed) throw InputError(fmt::format("--formats: unknown format '{}'; use hif4, mxfp4, nvfp4", f));
    formats.push_back(*parsed);
  }
  auto format_ok = [&](Format f) { return formats.empty() || std::find(formats.begin(), formats.end(), f) != formats.end(); };
  std::vector<std::string> wanted;
  bool all = false;
  for (const std::string& r : options.recipes) {
    if (r == "all") {
      all = true;
      continue;
    }
    const Recipe* rec = find_recipe(r);
    if (!rec) {
      std::string ids;
      for (const Recipe& x : all_recipes())
        if (!x.fake_quant_only) ids += (ids.empty() ? "" : ", ") + std::string(x.id);
      throw InputError(fmt::format("--recipes: unknown recipe '{}'; use 'all' or ids from: {}", r, ids));
    }
    if (rec->fake_quant_only)
      throw InputError(fmt::format("--recipes: {} is fake-quant only (no codes exist to compare)", r));
    wanted.push_back(r);
  }
  if (options.recipes.empty())
    for (const char* r : kDefaultRecipes) wanted.emplace_back(r);
  std::vector<std::string> out;
  for (const Recipe& r : all_recipes()) {
    if (r.fake_quant_only || !format_ok(r.format)) continue;
    if (all || std::find(wanted.begin(), wanted.end(), r.id) != wanted.end()) out.emplace_back(r.id);
  }
  if (out.empty())
    throw InputError(fmt::format("the selection --formats {} --recipes {} contains no recipe",
                                 options.formats.empty() ? "(all)" : join(options.formats, ","),
                                 options.recipes.empty() ? "(default)" : join(options.recipes, ",")));
  return out;
}

std::string generator_command(const GenerateOptions& options) {
  const CaseFilter filter{options.families, options.cases, {}};
  return fmt::format("fp4emu golden generate --out DIR --recipes {}{} --level {} --seed {}",
                     join(selected_recipes(options), ","), filter.empty() ? "" : " " + filter.text(), options.level,
                     options.seed);
}

using CaseList = std::vector<std::function<CaseOutput()>>;

// cases[i] for every i in [lo, hi), in parallel; each case has its own result
// slot, so nothing depends on the thread count or the order cases finish in.
// `stage`: written there as each case is realized (empty: kept in memory).
std::vector<CaseOutput> realize_range(const CaseList& cases, size_t lo, size_t hi, int threads,
                                      const fs::path& stage) {
  std::vector<CaseOutput> results(hi - lo);
  std::vector<std::exception_ptr> errors(hi - lo);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t i = lo; i < hi; ++i) {
    try {
      results[i - lo] = cases[i]();
      if (!stage.empty()) write_case(results[i - lo], stage);
    } catch (...) {
      errors[i - lo] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

// Shared by the ranks of a job, in rounds (so rank 0 holds one round's files
// at a time): in each round rank r realizes `chunk` consecutive cases, and
// rank 0 writes every rank's cases under `stage` (the other ranks pass an
// empty `stage` and get back result slots without files).
std::vector<CaseOutput> realize_shared(const CaseList& cases, int threads, const GenerateOptions::Exchange& ex,
                                       const fs::path& stage) {
  const size_t chunk = size_t(4) * size_t(threads), round = chunk * size_t(ex.size);
  std::vector<CaseOutput> results(cases.size());
  for (size_t base = 0; base < cases.size(); base += round) {
    const size_t lo = std::min(cases.size(), base + size_t(ex.rank) * chunk);
    io::ByteWriter w;
    for (const CaseOutput& c : realize_range(cases, lo, std::min(cases.size(), lo + chunk), threads, {})) c.encode(w);
    const std::vector<std::string> parts = ex.gather(w.take());
    for (size_t r = 0; r < parts.size(); ++r) {
      io::ByteReader rd(parts[r]);
      for (size_t i = base + r * chunk; !rd.done(); ++i) {
        results.at(i).decode(rd);
        if (!stage.empty()) write_case(results[i], stage);
      }
    }
  }
  return results;
}

GenerateSummary generate_suite(const fs::path& out_arg, const GenerateOptions& options) {
  if (options.level < 1 || options.level > 3)
    throw InputError(fmt::format("--level {} is invalid; use 1 (edges + small random), 2 (+ larger random) or 3 "
                                 "(+ exhaustive bf16 sets)",
                                 options.level));
  const int threads = thread_count(options.threads);
  // "DIR/" and "DIR/." name DIR: the staging folder is DIR's sibling.
  fs::path out = out_arg.lexically_normal();
  if (!out.has_filename() && out.has_parent_path()) out = out.parent_path();
  if (out.empty() || out.filename() == "." || out.filename() == ".." || out == out.root_path())
    throw InputError(fmt::format("--out {}: name the suite's own directory (e.g. --out suite)", out_arg.string()));
  const std::vector<std::string> recipes = selected_recipes(options);
  const GenerateOptions::Exchange* ex = options.exchange && options.exchange->size > 1 ? options.exchange : nullptr;
  if (!ex || ex->rank == 0) check_destination(out);  // rank 0 alone touches `out`

  // Per recipe: the quantization cases, then the GEMM cases, those the
  // --family/--case filter selects.
  const CaseFilter filter{options.families, options.cases, {}};
  std::vector<CaseFilter::Key> keys;
  std::vector<std::function<CaseOutput()>> cases;
  for (const std::string& id : recipes) {
    for (CaseSpec& c : build_cases(*find_recipe(id), options.level, options.seed)) {
      keys.push_back({c.family, c.id, id});
      if (filter.selects(c.family, c.id, id))
        cases.push_back([c = std::move(c)] { return realize(c); });
    }
    for (GemmCaseSpec& c : build_gemm_cases(*find_recipe(id), options.level, options.seed)) {
      keys.push_back({"gemm", c.id, id});
      if (filter.selects("gemm", c.id, id))
        cases.push_back([c = std::move(c)] { return realize_gemm(c); });
    }
  }
  if (!filter.empty()) filter.check_matches(keys);
  if (ex && ex->rank != 0) {  // this rank's share, handed to rank 0
    (void)realize_shared(cases, threads, *ex, {});
    return {static_cast<int>(cases.size()), 0, 0};
  }

  // Directories created here are removed again if the run fails.
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  std::vector<fs::path> created;
  std::error_code ec;
  for (fs::path p = parent; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created.push_back(p);
    if (!p.has_relative_path() || p == p.parent_path()) break;
  }
  fs::create_directories(parent, ec);
  auto remove_created = [&created] {
    std::error_code e;
    for (const fs::path& p : created) fs::remove(p, e);  // innermost first; only if empty
  };
  const fs::path stage = parent / fmt::format(".{}.tmp-golden-{}", out.filename().string(), getpid());
  io::remove_stale_temporaries(out);  // staging folders of killed runs
  fs::remove_all(stage, ec);
  if (!fs::create_directories(stage, ec)) {
    remove_created();
    throw InputError(fmt::format("--out {}: cannot create the staging directory {} ({})", out.string(),
                                 stage.string(), ec.message()));
  }
  try {
    std::vector<CaseOutput> results =
        ex ? realize_shared(cases, threads, *ex, stage) : realize_range(cases, 0, cases.size(), threads, stage);

    GenerateSummary summary;
    summary.cases = static_cast<int>(cases.size());
    std::vector<std::pair<std::string, std::string>> sums;
    // The manifest: top-level fields one per line, then one case per line so
    // that a diff of two suites reads case by case.
    ojson gen;
    gen["command"] = generator_command(options);
    gen["level"] = options.level;
    gen["seed"] = std::to_string(options.seed);
    gen["recipes"] = recipes;
    gen["implementation"] = "reference";
    std::string m = "{\n";
    m += fmt::format("  \"schema\": {},\n", ojson(kSchemaName).dump());
    m += fmt::format("  \"schema_version\": {},\n", kSchemaVersion);
    m += fmt::format("  \"fp4emu_version\": {},\n", ojson(kVersion).dump());
    m += fmt::format("  \"generator\": {},\n", gen.dump());
    m += "  \"cases\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      m += "    " + results[i].line + (i + 1 < results.size() ? ",\n" : "\n");
      summary.files += results[i].files;
      summary.bytes += results[i].bytes;
      sums.insert(sums.end(), results[i].sums.begin(), results[i].sums.end());
    }
    m += "  ]\n}\n";
    write_text(stage / "manifest.json", m);
    sums.push_back({"manifest.json", sha256_hex({reinterpret_cast<const uint8_t*>(m.data()), m.size()})});
    std::sort(sums.begin(), sums.end());
    std::string sumfile;
    for (const auto& [path, sum] : sums) sumfile += sum + "  " + path + "\n";
    write_text(stage / "SHA256SUMS", sumfile);
    summary.files += 2;
    summary.bytes += static_cast<int64_t>(m.size() + sumfile.size());

    // Swap the staged suite into place.
    const fs::path old = parent / fmt::format(".{}.old-golden-{}", out.filename().string(), getpid());
    const bool had_old = fs::exists(out, ec);
    if (had_old) {
      fs::rename(out, old, ec);
      if (ec) throw InputError(fmt::format("--out {}: cannot move the previous suite aside ({})", out.string(), ec.message()));
    }
    fs::rename(stage, out, ec);
    if (ec) {
      if (had_old) fs::rename(old, out, ec);
      throw InputError(fmt::format("--out {}: cannot move the new suite into place ({})", out.string(), ec.message()));
    }
    if (had_old) fs::remove_all(old, ec);
    return summary;
  } catch (...) {
    fs::remove_all(stage, ec);
    remove_created();
    throw;
  }
}

}  // namespace fp4emu::golden
