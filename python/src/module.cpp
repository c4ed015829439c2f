// fp4emu._core: the library's quantize / fake-quant / dequantize, packed
// files, GEMM, compare, identify and golden suites for Python. Thin: every
// number is computed by the library; this file only converts arrays and
// options. The pure-Python package (python/fp4emu/) adds torch and ml_dtypes
// inputs, defaults and docstrings.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "fp4emu/analysis/compare.hpp"
#include "fp4emu/analysis/identify.hpp"
#include "fp4emu/analysis/resq.hpp"
#include "fp4emu/analysis/sparsity.hpp"
#include "fp4emu/analysis/transforms.hpp"
#include "fp4emu/analysis/underflow.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/io/array.hpp"
#include "fp4emu/io/tensor_file.hpp"
#include "fp4emu/quant/packed_io.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/quant/scale_layout.hpp"
#include "fp4emu/quant/sr_options.hpp"
#include "fp4emu/threads.hpp"
#include "fp4emu/version.hpp"

namespace py = pybind11;
using namespace fp4emu;

namespace {

// ---- errors ---------------------------------------------------------------------
// I/O failures (a file that cannot be opened or written) reach Python as
// OSError, bad input as ValueError (the translator below), both with the
// library's message.
struct PyOSError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs `fn`; an InputError while `path` cannot be read (or, for an output,
// once the input checks have passed) is an I/O failure.
template <class Fn>
auto file_call(const std::filesystem::path& path, bool output, Fn&& fn) {
  try {
    return fn();
  } catch (const InputError& e) {
    if (output || ::access(path.c_str(), R_OK) != 0) throw PyOSError(e.what());
    throw;
  }
}

// ---- inputs -----------------------------------------------------------------------
InputDType parse_input_dtype(const std::string& name) {
  if (name == "f32") return InputDType::f32;
  if (name == "bf16") return InputDType::bf16;
  if (name == "f16") return InputDType::f16;
  throw InputError(fmt::format("input_dtype '{}' is unknown; use f32, bf16 or f16", name));
}

void check_element_type(const py::array& x, InputDType dtype) {
  const bool f32 = dtype == InputDType::f32;
  if (f32 ? !py::isinstance<py::array_t<float>>(x) : x.itemsize() != 2)
    throw InputError(fmt::format("input of numpy dtype {} does not hold {} values", std::string(py::str(x.dtype())),
                                 f32 ? "float32" : "16-bit"));
}

// A view of a numpy array whose element type matches `dtype` (float32, or
// uint16 bits for bf16/fp16; the Python layer relabels): the library reads it
// in place, with its strides.
TensorView to_view(const py::array& x, InputDType dtype) {
  check_element_type(x, dtype);
  TensorView v;
  v.data = x.data();
  v.dtype = dtype;
  v.shape.assign(x.shape(), x.shape() + x.ndim());
  for (py::ssize_t d = 0; d < x.ndim(); ++d) {
    if (x.strides(d) % x.itemsize() != 0)
      throw InputError("the input array's strides are not whole elements; pass np.ascontiguousarray(x)");
    v.strides.push_back(x.strides(d) / x.itemsize());
  }
  return v;
}

// The fp32 values of a C-contiguous numpy array as the analysis calls read
// them (compare, identify, the studies; fp4emu/quant/tensor_ref.hpp):
// float32 in place, not copied; bf16/fp16 bits widened once into `storage`
// (every analysis reads each value several times).
TensorRef input_ref(const py::array& x, InputDType dtype, std::vector<float>& storage) {
  check_element_type(x, dtype);
  if (!(x.flags() & py::array::c_style))
    throw InputError("the input array is not C-contiguous; pass np.ascontiguousarray(x)");
  std::vector<int64_t> shape(x.shape(), x.shape() + x.ndim());
  const size_t n = static_cast<size_t>(x.size());
  if (dtype == InputDType::f32) return TensorRef(std::move(shape), {static_cast<const float*>(x.data()), n});
  storage.resize(n);
  io::widen_to_f32(dtype == InputDType::bf16 ? io::DType::bf16 : io::DType::f16,
                   {static_cast<const uint8_t*>(x.data()), static_cast<size_t>(x.nbytes())}, storage);
  return TensorRef(std::move(shape), storage);
}

// An owning fp32 Tensor (a copy), for the calls that keep one: dense GEMM
// operands, weights, a kernel's dequantized values.
Tensor to_dense_f32(const py::array& x) {
  std::vector<float> unused;
  const TensorRef r = input_ref(x, InputDType::f32, unused);
  return Tensor{r.shape, {r.data.begin(), r.data.end()}};
}

// A numpy array that owns `v` (moved, not copied).
template <class T>
py::array owning_array(std::vector<T>&& v, const std::vector<int64_t>& shape) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(std::vector<py::ssize_t>(shape.begin(), shape.end()), heap->data(), owner);
}

// A read-only numpy view of bytes owned by `owner` (a Packed), reinterpreted
// as T.
template <class T>
py::array view_of(const std::vector<uint8_t>& bytes, const std::vector<int64_t>& shape, py::handle owner) {
  py::array_t<T> a(std::vector<py::ssize_t>(shape.begin(), shape.end()),
                   reinterpret_cast<const T*>(bytes.data()), owner);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

template <class E, class Parse>
std::optional<E> parse_opt(const std::optional<std::string>& name, const char* option, Parse parse,
                           const char* accepted) {
  if (!name) return std::nullopt;
  const auto v = parse(*name);
  if (!v) throw InputError(fmt::format("{}='{}' is unknown; use {}", option, *name, accepted));
  return *v;
}

Impl parse_impl_arg(const std::string& name) {
  const auto v = parse_impl(name);
  if (!v) throw InputError(fmt::format("impl='{}' is unknown; use auto, reference or fast", name));
  return *v;
}

// The library's thread-count rule (fp4emu/threads.hpp), checked up front so
// that every call refuses a bad count, not only those that start threads.
int check_threads(int threads) {
  thread_count(threads);
  return threads;
}

QuantOptions quant_options(const std::string& recipe, int axis, const std::optional<std::string>& rounding,
                           const std::optional<std::string>& tail, std::optional<float> global_amax,
                           const std::optional<std::string>& nibble_order,
                           const std::optional<std::string>& scale_bit_order, InputDType dtype, int threads,
                           const std::string& impl) {
  QuantOptions o;
  o.recipe = recipe;
  o.axis = axis;
  o.rounding = parse_opt<Rounding>(rounding, "rounding", parse_rounding, "rne, rha, rtz, tiesToZero or stochastic");
  o.tail = parse_opt<TailPolicy>(tail, "tail", parse_tail, "pad or error");
  o.nibble_order =
      parse_opt<NibbleOrder>(nibble_order, "nibble_order", parse_nibble_order, "low_first, high_first or split_half");
  o.scale_bit_order =
      parse_opt<ScaleBitOrder>(scale_bit_order, "scale_bit_order", parse_scale_bit_order, "lsb_first or msb_first");
  o.global_amax = global_amax;
  o.input_dtype = dtype;
  o.threads = check_threads(threads);
  o.impl = parse_impl_arg(impl);
  return o;
}

// rounding="stochastic"'s random bits (fp4emu/quant/stochastic.hpp): the
// command line's rule and messages in the keywords' spelling. A given array
// is read in place (`keep` holds a C-contiguous copy when it is not one).
struct SrArgs {
  std::optional<uint64_t> seed, offset;
  std::optional<std::string> rng, rbits_map;
  std::optional<py::array> rbits;
};

void attach_sr(QuantOptions& o, const SrArgs& a, const std::vector<int64_t>& shape, py::array& keep) {
  SrRequest q;
  q.rounding = o.rounding;
  q.seed = a.seed;
  q.offset = a.offset;
  q.rng = a.rng.value_or("");
  q.rbits_map = a.rbits_map.value_or("");
  q.rbits = a.rbits.has_value();
  apply_sr_request(q, kPythonSrSpelling, o.stochastic);
  if (!a.rbits) return;
  const int rank = static_cast<int>(shape.size());
  const int axis = o.axis < 0 ? o.axis + rank : o.axis;
  if (axis < 0 || axis >= rank) return;  // resolve_options names the bad axis
  const py::array& r = *a.rbits;
  const bool u8 = py::isinstance<py::array_t<uint8_t>>(r), u32 = py::isinstance<py::array_t<uint32_t>>(r);
  const std::string dtype = u8 ? "u8" : u32 ? "u32" : std::string(py::str(r.dtype()));
  const bool words = check_rbits_array(dtype, std::vector<int64_t>(r.shape(), r.shape() + r.ndim()), shape, axis,
                                       a.rbits_map.has_value(), "rbits", kPythonSrSpelling);
  keep = py::array::ensure(r, py::array::c_style);  // numpy's uint32 is the machine's (little-endian) word
  const size_t n = static_cast<size_t>(keep.size());
  if (words) o.stochastic.words = {static_cast<const uint32_t*>(keep.data()), n};
  else o.stochastic.bytes = {static_cast<const uint8_t*>(keep.data()), n};
}

StoredScaleLayout parse_layout(const std::string& name, Format f) {
  const std::optional<StoredScaleLayout> layout = parse_stored_scale_layout(name);
  if (!layout || !layout_applies(*layout, f))
    throw InputError(fmt::format("scale_layout '{}' {}; {} scales take linear or {}", name,
                                 layout ? "does not apply to " + std::string(format_name(f)) : "is unknown",
                                 format_name(f), f == Format::hif4 ? "hif4_cube" : "swizzled_128x4"));
  return *layout;
}

// ---- packed tensors -------------------------------------------------------------
struct Packed {
  PackedTensor p;
  StoredScaleLayout layout = StoredScaleLayout::linear;
  std::vector<uint8_t> stored_scales;  // `p.scales` in `layout`
};

std::shared_ptr<Packed> make_packed(PackedTensor&& p, StoredScaleLayout layout) {
  auto out = std::make_shared<Packed>();
  out->stored_scales = store_scales(p, layout);
  out->p = std::move(p);
  out->layout = layout;
  return out;
}

py::array packed_codes(py::object self) {
  const Packed& k = self.cast<const Packed&>();
  return view_of<uint8_t>(k.p.codes, k.p.stored_shape(k.p.padded_len / 2), self);
}

py::array packed_scales(py::object self) {
  const Packed& k = self.cast<const Packed&>();
  const std::vector<int64_t> shape = stored_scales_shape(k.p, k.layout);
  if (k.layout == StoredScaleLayout::linear && k.p.format == Format::hif4)
    return view_of<uint32_t>(k.stored_scales, shape, self);
  return view_of<uint8_t>(k.stored_scales, shape, self);
}

py::object packed_global_scale(const Packed& k) {
  if (k.p.format != Format::nvfp4) return py::none();
  return py::array_t<float>(3, std::vector<float>{k.p.global_amax, k.p.global_encode_scale,
                                                  k.p.global_decode_scale}.data());
}

py::array dequantize_packed(const Packed& k, int threads, const std::string& impl) {
  DequantOptions o;
  o.threads = check_threads(threads);
  o.impl = parse_impl_arg(impl);
  py::array_t<float> y(std::vector<py::ssize_t>(k.p.shape.begin(), k.p.shape.end()));
  const OutputView out{y.mutable_data(), {}};
  {
    py::gil_scoped_release unlocked;
    dequantize(k.p, k.p.codes, k.p.scales, o, out);
  }
  return y;
}

// ---- compare ----------------------------------------------------------------------
// The keys and values of `fp4emu compare --json` (cmd_compare.cpp metrics_json).
py::dict metrics(const ErrorStats& s, double bits) {
  py::dict d;
  const std::optional<double> sat = s.saturation_ratio();
  d["n"] = s.count;
  d["n_nonzero"] = s.nonzero;
  d["n_underflow"] = s.flushed;
  d["underflow_ratio"] = s.underflow_ratio();
  d["n_zero_after"] = s.zero_after;
  d["zero_ratio_after"] = s.zero_ratio();
  d["n_saturated"] = s.saturated ? py::object(py::int_(*s.saturated)) : py::object(py::none());
  d["saturation_ratio"] = sat ? py::object(py::float_(*sat)) : py::object(py::none());
  d["nan_in"] = s.nan_in;
  d["inf_in"] = s.inf_in;
  d["nonfinite_out"] = s.nonfinite_out;
  d["qsnr_db"] = s.qsnr_db();
  d["nmse"] = s.nmse();
  d["rel_l2"] = s.rel_l2();
  d["cosine"] = s.cosine();
  d["max_abs_error"] = s.max_abs_error;
  d["signal_energy"] = s.signal_energy;
  d["error_energy"] = s.error_energy;
  d["bits_per_element"] = bits;
  d["bias"] = s.bias();
  d["bias_se"] = s.bias_se();
  d["error_sum"] = s.error_sum;
  return d;
}

py::dict compare(const py::array& x, const std::string& dtype, const std::vector<std::string>& ids, int axis,
                 const std::optional<std::string>& tail) {
  CompareOptions o;
  o.axis = axis;
  o.tail = parse_opt<TailPolicy>(tail, "tail", parse_tail, "pad or error");
  std::vector<const Recipe*> recipes;
  for (const std::string& id : ids) {
    const Recipe* r = find_recipe(id);
    if (!r) r = parse_format(id) ? &default_recipe(*parse_format(id)) : nullptr;
    if (!r) throw InputError(fmt::format("recipe '{}' is unknown; fp4emu.recipes() lists the recipe ids", id));
    recipes.push_back(r);
  }
  const InputDType d = parse_input_dtype(dtype);
  std::vector<float> widened;
  const TensorRef t = input_ref(x, d, widened);
  check_compare(t.shape, recipes, o);
  std::vector<RecipeResult> results;
  {
    py::gil_scoped_release unlocked;
    for (const Recipe* r : recipes) results.push_back(compare_recipe(t, d, *r, o));
  }
  py::dict out;
  for (const RecipeResult& r : results) {
    py::dict m = r.skipped.empty() ? metrics(r.stats, r.bits_per_element) : py::dict();
    if (!r.skipped.empty()) m["skipped"] = r.skipped;
    m["format"] = std::string(format_name(r.recipe->format));
    out[py::str(std::string(r.recipe->id))] = m;
  }
  return out;
}

// ---- gemm -----------------------------------------------------------------------
py::array gemm_call(const py::object& a, const py::object& b, const std::string& model, int blocks_per_step,
                    std::optional<float> alpha, int threads, const std::string& impl, const std::string& b_layout,
                    const std::optional<py::array>& source, float beta, const std::optional<py::array>& bias) {
  GemmOptions o;
  const auto layout = parse_b_layout(b_layout);
  if (!layout) throw InputError(fmt::format("b_layout='{}' is unknown; use kn (B is k×n) or nk (W is n×k)", b_layout));
  o.b_layout = *layout;
  // The epilogue's inputs (docs/gemm.md "Epilogue"); the library checks their shapes.
  std::optional<Tensor> c_in, bias_in;
  if (source) {
    c_in = to_dense_f32(*source);
    o.c = &*c_in;
    o.beta = beta;
  }
  if (bias) {
    bias_in = to_dense_f32(*bias);
    o.bias = &*bias_in;
  }
  const auto m = parse_gemm_model(model);
  if (!m) throw InputError(fmt::format("model='{}' is unknown; use exact, block_fp32, fma_fp32 or fast", model));
  o.model = *m;
  if (blocks_per_step < 1) throw InputError(fmt::format("blocks_per_step={} must be at least 1", blocks_per_step));
  o.blocks_per_step = blocks_per_step;
  o.alpha = alpha;
  o.threads = check_threads(threads);
  if (impl == "scalar") o.impl = GemmImpl::scalar;
  else if (impl != "simd") throw InputError(fmt::format("impl='{}' is unknown; use simd or scalar", impl));
  // Dense operands are converted here; packed ones are used in place.
  std::optional<Tensor> da, db;
  auto operand = [](const py::object& v, std::optional<Tensor>& dense, const char* side) -> GemmOperand {
    if (py::isinstance<Packed>(v)) return GemmOperand(v.cast<const Packed&>().p);
    if (!py::isinstance<py::array_t<float>>(v))
      throw InputError(fmt::format("operand {} must be a Packed (fp4emu.quantize) or a float32 matrix", side));
    dense = to_dense_f32(v.cast<py::array>());
    return GemmOperand(*dense);
  };
  const GemmOperand ga = operand(a, da, "a"), gb = operand(b, db, "b");
  Tensor c;
  {
    py::gil_scoped_release unlocked;
    c = gemm(ga, gb, o);
  }
  return owning_array(std::move(c.data), c.shape);
}

// ---- identify ----------------------------------------------------------------------
py::dict identify_call(const py::array& x, const std::string& dtype, const std::string& format,
                       const std::optional<py::array>& codes, const std::optional<py::array>& scales,
                       const std::optional<py::array>& values, int axis, std::optional<float> global_amax,
                       int threads, int top) {
  analysis::IdentifyOptions o;
  const auto f = parse_format(format);
  if (!f) throw InputError(fmt::format("format '{}' is unknown; use hif4, mxfp4 or nvfp4", format));
  o.format = *f;
  o.axis = axis;
  o.global_amax = global_amax;
  o.input_dtype = parse_input_dtype(dtype);
  o.threads = check_threads(threads);
  std::vector<float> widened;
  const TensorRef t = input_ref(x, o.input_dtype, widened);
  analysis::KernelOutput k;
  auto bytes = [](const py::array& a) {
    const auto* p = static_cast<const uint8_t*>(a.data());
    return std::vector<uint8_t>(p, p + a.nbytes());
  };
  if (codes) k.codes = bytes(*codes);
  if (scales) k.scales = bytes(*scales);
  if (values) k.values = to_dense_f32(*values).data;
  if (!codes && !scales && !values)
    throw InputError("no kernel output given: pass output=, packed=, or codes= and/or scales=");
  analysis::IdentifyResult r;
  {
    py::gil_scoped_release unlocked;
    r = analysis::identify(t, k, o);
  }
  py::dict d;
  d["text"] = analysis::identify_text(r, top);
  d["json"] = analysis::identify_json(r);
  d["exact"] = r.exact();
  d["best"] = r.ranked.empty() ? py::object(py::none()) : py::object(py::str(r.ranked.front().label()));
  return d;
}

// ---- golden -------------------------------------------------------------------------
py::dict golden_generate(const std::filesystem::path& out, const std::vector<std::string>& formats,
                         const std::vector<std::string>& recipes, const std::vector<std::string>& families,
                         const std::vector<std::string>& cases, int level, uint64_t seed, int threads) {
  golden::GenerateOptions o;
  o.formats = formats;
  o.recipes = recipes;
  o.families = families;
  o.cases = cases;
  o.level = level;
  o.seed = seed;
  o.threads = check_threads(threads);
  golden::GenerateSummary s;
  {
    py::gil_scoped_release unlocked;
    s = golden::generate_suite(out, o);
  }
  py::dict d;
  d["cases"] = s.cases;
  d["files"] = s.files;
  d["bytes"] = s.bytes;
  return d;
}

py::dict golden_verify(const std::filesystem::path& suite, const std::filesystem::path& candidate, int max_report,
                       bool strict, bool skip_missing, const std::vector<std::string>& families,
                       const std::vector<std::string>& cases, const std::vector<std::string>& recipes) {
  golden::VerifyOptions o;
  if (max_report < 0) throw InputError(fmt::format("max_report={} must be >= 0", max_report));
  o.max_report = max_report;
  o.strict = strict;
  o.skip_missing = skip_missing;
  o.filter.families = families;
  o.filter.cases = cases;
  o.filter.recipes = recipes;
  golden::VerifyReport r;
  {
    py::gil_scoped_release unlocked;
    r = file_call(suite, false, [&] { return golden::verify_suite(suite, candidate, o); });
  }
  py::dict d;
  d["json"] = golden::report_json(r);
  d["text"] = golden::report_text(r);
  d["exit_code"] = r.exit_code();
  return d;
}

// ---- activation studies (docs/analysis.md) -----------------------------------------
// The tensors of a .safetensors dump or an .npy file: {name: array}; bf16 as
// uint16 bit patterns (their names in `bf16`).
py::tuple read_tensors(const std::filesystem::path& path, const std::vector<std::string>& patterns) {
  std::unique_ptr<io::TensorFile> file;
  {
    py::gil_scoped_release unlocked;
    file = file_call(path, false, [&] { return std::make_unique<io::TensorFile>(path); });
  }
  py::dict out;
  py::list bf16;
  for (size_t i : io::select_tensors(*file, patterns)) {
    const io::TensorInfo& t = file->tensors()[i];
    py::dtype dt;
    switch (t.dtype) {
      case io::DType::f32: dt = py::dtype::of<float>(); break;
      case io::DType::f64: dt = py::dtype::of<double>(); break;
      case io::DType::f16: dt = py::dtype("float16"); break;
      case io::DType::bf16: dt = py::dtype::of<uint16_t>(); bf16.append(t.name); break;
      case io::DType::u8: dt = py::dtype::of<uint8_t>(); break;
      case io::DType::u16: dt = py::dtype::of<uint16_t>(); break;
      case io::DType::u32: dt = py::dtype::of<uint32_t>(); break;
      case io::DType::i32: dt = py::dtype::of<int32_t>(); break;
    }
    py::array a(dt, std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
    const io::TensorBytes b = file->bytes(i);
    if (b.bytes().size() != static_cast<size_t>(a.nbytes()))
      throw InputError(fmt::format("'{}': tensor '{}' holds {} bytes, its shape needs {}", file->file(), t.name,
                                   b.bytes().size(), a.nbytes()));
    if (a.nbytes()) std::memcpy(a.mutable_data(), b.bytes().data(), b.bytes().size());
    out[py::str(t.name)] = a;
  }
  return py::make_tuple(out, bf16, file->metadata());
}

py::dict underflow_call(const py::array& x, const std::string& dtype, const std::string& recipe,
                        const std::string& transform, const std::optional<py::array>& weights, int threads) {
  QuantOptions o;
  o.recipe = recipe;
  o.input_dtype = parse_input_dtype(dtype);
  o.threads = check_threads(threads);
  const analysis::TransformSpec spec = analysis::parse_transform(transform);
  if (!spec.calib.empty()) throw InputError("transform calib= (a calibration dump) is for the command line only");
  std::vector<float> widened;
  const TensorRef t = input_ref(x, o.input_dtype, widened);
  std::optional<Tensor> w;
  if (weights) w = to_dense_f32(*weights);
  analysis::UnderflowStats s;
  {
    py::gil_scoped_release unlocked;
    s = analysis::study_underflow(t, o, spec, w ? &*w : nullptr, nullptr, analysis::UnderflowOptions{});
  }
  py::dict d;
  d["rows"] = s.rows;
  d["cols"] = s.cols;
  d["block"] = s.block;
  d["n"] = s.n;
  d["n_nonfinite"] = s.n_nonfinite;
  d["n_nonzero"] = s.n_nonzero;
  d["n_underflow"] = s.n_underflow;
  d["n_zero_after"] = s.n_zero_after;
  d["underflow_ratio"] = s.underflow_ratio;
  d["zero_ratio_after"] = s.zero_ratio_after;
  d["n_blocks"] = s.n_blocks;
  d["blocks_with_underflow_ratio"] = s.blocks_with_underflow_ratio;
  d["mean_block_ur"] = s.mean_block_ur;
  d["p99_block_ur"] = s.p99_block_ur;
  d["max_block_ur"] = s.max_block_ur;
  d["outlier_block_ratio_abs"] = s.outlier_block_ratio_abs;
  d["outlier_block_ratio_rel"] = s.outlier_block_ratio_rel;
  d["outlier_block_ratio_uf"] = s.outlier_block_ratio_uf;
  d["saturation_ratio"] = s.saturation_ratio ? py::object(py::float_(*s.saturation_ratio)) : py::object(py::none());
  d["crest_mean"] = s.crest_mean;
  d["crest_max"] = s.crest_max;
  d["max_abs"] = s.max_abs;
  d["rms"] = s.rms;
  d["qsnr_db"] = s.qsnr_db;
  d["rel_l2"] = s.rel_l2;
  d["cosine"] = s.cosine;
  d["token_ur"] = py::array_t<double>(s.token_ur.size(), s.token_ur.data());
  d["channel_ur"] = py::array_t<double>(s.channel_ur.size(), s.channel_ur.data());
  d["log2_hist_all"] = s.log2_hist_all;
  d["log2_hist_underflow"] = s.log2_hist_underflow;
  return d;
}

// The operands a transform makes of X (m x d) and W (n x d) before both are
// quantized (docs/analysis.md §4): X' and W' with X' W'^T = X W^T for RHT and
// SmoothQuant (`calib`: the activations the scales are calibrated on, else X
// itself), clamp(X) and W for OCC, whose compensation X - clamp(X) stays in
// full precision. Returns (X', W', compensation or None).
py::tuple transform_operands_call(const py::array& x, const py::array& w, const std::string& recipe,
                                  const std::string& transform, const std::optional<py::array>& calib) {
  const analysis::TransformSpec spec = analysis::parse_transform(transform);
  if (!spec.calib.empty())
    throw InputError("transform calib= (a calibration dump) is for the command line only; pass calib=array");
  QuantOptions o;
  o.recipe = recipe;
  std::vector<float> unused;
  const TensorRef xr = input_ref(x, InputDType::f32, unused);
  const Tensor wt = to_dense_f32(w);
  if (xr.shape.size() != 2 || wt.shape.size() != 2 || wt.shape[1] != xr.shape[1])
    throw InputError(fmt::format("transform_operands: x must be m x d and w n x d, got x {} and w {}",
                                 io::shape_string(xr.shape), io::shape_string(wt.shape)));
  std::optional<Tensor> cal;
  if (calib) cal = to_dense_f32(*calib);
  const int block = block_size(resolve_options(o, xr.shape).recipe->format);
  const analysis::PreparedTransform t(spec, block, xr, &wt, cal ? &*cal : nullptr);
  Tensor xo = t.operand(xr);
  Tensor wo = t.weights(wt);
  py::object comp = py::none();
  if (spec.kind == analysis::TransformSpec::Kind::occ) {
    // to_original(0) is the kept residual X - clamp(X), exact in double.
    const std::vector<double> r = t.to_original(std::vector<float>(xr.data.size(), 0.0f));
    comp = owning_array(std::vector<float>(r.begin(), r.end()), xr.shape);
  }
  return py::make_tuple(owning_array(std::move(xo.data), xo.shape), owning_array(std::move(wo.data), wo.shape),
                        comp);
}

// One dict per pattern: the report row's metrics and its sums (so rows of
// several tensors pool as the command does: sums added, dB averaged).
py::list resq_call(const py::array& x, const std::string& dtype, const py::array& w, const std::string& recipe,
                   const std::vector<std::string>& patterns, uint64_t seed, int threads) {
  QuantOptions o;
  o.recipe = recipe;
  o.input_dtype = parse_input_dtype(dtype);
  o.threads = check_threads(threads);
  std::vector<analysis::SparsityPattern> ps;
  for (const std::string& p : patterns) ps.push_back(analysis::parse_pattern(p, 0.5, seed));
  std::vector<float> widened;
  const TensorRef t = input_ref(x, o.input_dtype, widened);
  const Tensor wt = to_dense_f32(w);
  analysis::ResqTensorResult r;
  {
    py::gil_scoped_release unlocked;
    r = analysis::study_resq("x", t, wt, o, analysis::TransformSpec{}, nullptr, ps, analysis::ResqOptions{});
  }
  py::list out;
  for (const analysis::ResqRow& row : r.rows) {
    py::dict d;
    d["pattern"] = row.pattern.name;
    d["kept_density"] = row.kept_density();
    d["act_qsnr_db"] = row.act_qsnr_db();
    d["out_qsnr_db"] = row.out_qsnr_db();
    d["recovered_fraction"] = row.recovered_fraction();
    d["drop_res_mse"] = row.drop_res_mse();
    d["drop_prim_mse"] = row.drop_prim_mse();
    d["drop_res_norm"] = row.drop_res_norm();
    d["drop_prim_norm"] = row.drop_prim_norm();
    d["speedup_vs_fp16"] = analysis::speedup_vs_fp16(row.pattern);
    out.append(d);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "fp4emu's C++ library (bit-exact HiF4, MXFP4, NVFP4); use the fp4emu package, not this module";
  m.attr("__version__") = std::string(kVersion);

  static py::exception<PyOSError> os_error(m, "_OSErrorBase", PyExc_OSError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const PyOSError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::invalid_argument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("formats", [] {
    py::list out;
    for (Format f : {Format::hif4, Format::mxfp4, Format::nvfp4}) {
      py::dict d;
      d["format"] = std::string(format_name(f));
      d["block_size"] = block_size(f);
      d["scale_bytes_per_block"] = scale_bytes_per_block(f);
      d["default_recipe"] = std::string(default_recipe(f).id);
      out.append(d);
    }
    return out;
  });

  // The fields of `fp4emu formats --json`.
  m.def("recipes", [] {
    py::list out;
    for (const Recipe& r : all_recipes()) {
      py::list allowed;
      for (Rounding x : kAllRoundings)
        if (r.allowed_roundings & rounding_bit(x)) allowed.append(std::string(to_string(x)));
      py::dict d;
      d["id"] = std::string(r.id);
      d["format"] = std::string(format_name(r.format));
      d["default"] = r.is_default;
      d["bits_version"] = r.bits_version;
      d["summary"] = std::string(r.summary);
      d["spec"] = std::string(r.spec_ref);
      d["element_rounding"] = std::string(to_string(r.element_rounding));
      d["allowed_roundings"] = allowed;
      d["tail"] = std::string(to_string(r.default_tail));
      d["nibble_order"] = std::string(to_string(r.nibble_order));
      d["fake_quant_only"] = r.fake_quant_only;
      d["bf16_input_only"] = r.bf16_input_only;
      out.append(d);
    }
    return out;
  });

  // The random-bit keywords of fake_quant / quantize (the package builds one).
  py::class_<SrArgs>(m, "SrArgs")
      .def(py::init([](std::optional<uint64_t> seed, std::optional<uint64_t> offset, std::optional<std::string> rng,
                       std::optional<py::array> rbits, std::optional<std::string> rbits_map) {
             return SrArgs{seed, offset, std::move(rng), std::move(rbits_map), std::move(rbits)};
           }),
           py::arg("seed") = py::none(), py::arg("offset") = py::none(), py::arg("rng") = py::none(),
           py::arg("rbits") = py::none(), py::arg("rbits_map") = py::none());

  m.def(
      "fake_quant",
      [](const py::array& x, const std::string& dtype, const std::string& recipe, int axis,
         const std::optional<std::string>& rounding, const std::optional<std::string>& tail,
         std::optional<float> global_amax, int threads, const std::string& impl, const SrArgs& sr) {
        QuantOptions o = quant_options(recipe, axis, rounding, tail, global_amax, std::nullopt, std::nullopt,
                                       parse_input_dtype(dtype), threads, impl);
        const TensorView v = to_view(x, o.input_dtype);
        py::array rbits;
        attach_sr(o, sr, v.shape, rbits);
        py::array_t<float> y(std::vector<py::ssize_t>(v.shape.begin(), v.shape.end()));
        const OutputView out{y.mutable_data(), {}};
        {
          py::gil_scoped_release unlocked;
          fake_quant(v, o, out);
        }
        return y;
      },
      py::arg("x"), py::arg("input_dtype"), py::arg("recipe"), py::arg("axis"), py::arg("rounding"),
      py::arg("tail"), py::arg("global_amax"), py::arg("threads"), py::arg("impl"), py::arg("sr"));

  py::class_<Packed, std::shared_ptr<Packed>>(m, "Packed")
      .def_property_readonly("codes", &packed_codes)
      .def_property_readonly("scales", &packed_scales)
      .def_property_readonly("global_scale", &packed_global_scale)
      .def_property_readonly("recipe", [](const Packed& k) { return k.p.recipe_id; })
      .def_property_readonly("format", [](const Packed& k) { return std::string(format_name(k.p.format)); })
      .def_property_readonly("shape", [](const Packed& k) { return py::tuple(py::cast(k.p.shape)); })
      .def_property_readonly("axis", [](const Packed& k) { return k.p.axis; })
      .def_property_readonly("scale_layout", [](const Packed& k) { return std::string(to_string(k.layout)); })
      .def_property_readonly("meta", [](const Packed& k) { return packed_metadata(k.p); })
      .def("dequantize", &dequantize_packed, py::arg("threads") = 0, py::arg("impl") = "auto")
      .def(
          "save",
          [](const Packed& k, const std::filesystem::path& path) {
            py::gil_scoped_release unlocked;
            file_call(path, true, [&] { write_packed(path, k.p, k.layout); });
          },
          py::arg("path"))
      .def("with_scale_layout", [](const Packed& k, const std::string& layout) {
        PackedTensor p = k.p;
        return make_packed(std::move(p), parse_layout(layout, k.p.format));
      });

  m.def(
      "quantize",
      [](const py::array& x, const std::string& dtype, const std::string& recipe, int axis,
         const std::optional<std::string>& rounding, const std::optional<std::string>& tail,
         std::optional<float> global_amax, const std::optional<std::string>& nibble_order,
         const std::optional<std::string>& scale_bit_order, const std::string& scale_layout, int threads,
         const std::string& impl, const SrArgs& sr) {
        QuantOptions o = quant_options(recipe, axis, rounding, tail, global_amax, nibble_order, scale_bit_order,
                                       parse_input_dtype(dtype), threads, impl);
        const TensorView v = to_view(x, o.input_dtype);
        py::array rbits;
        attach_sr(o, sr, v.shape, rbits);
        const PackedHeader sizes = packed_header(v.shape, o);
        PackedTensor p;
        p.codes.resize(static_cast<size_t>(sizes.code_bytes()));
        p.scales.resize(static_cast<size_t>(sizes.scale_bytes()));
        {
          py::gil_scoped_release unlocked;
          static_cast<PackedHeader&>(p) = quantize(v, o, p.codes, p.scales);
        }
        return make_packed(std::move(p), parse_layout(scale_layout, p.format));
      },
      py::arg("x"), py::arg("input_dtype"), py::arg("recipe"), py::arg("axis"), py::arg("rounding"),
      py::arg("tail"), py::arg("global_amax"), py::arg("nibble_order"), py::arg("scale_bit_order"),
      py::arg("scale_layout"), py::arg("threads"), py::arg("impl"), py::arg("sr"));

  m.def(
      "load",
      [](const std::filesystem::path& path) {
        PackedTensor p;
        {
          py::gil_scoped_release unlocked;
          p = file_call(path, false, [&] { return read_packed(path); });
        }
        // read_packed undoes any stored layout: the scales come back linear.
        return make_packed(std::move(p), StoredScaleLayout::linear);
      },
      py::arg("path"));

  m.def("compare", &compare, py::arg("x"), py::arg("input_dtype"), py::arg("recipes"), py::arg("axis"),
        py::arg("tail"));
  m.def("gemm", &gemm_call, py::arg("a"), py::arg("b"), py::arg("model"), py::arg("blocks_per_step"),
        py::arg("alpha"), py::arg("threads"), py::arg("impl"), py::arg("b_layout"), py::arg("c"), py::arg("beta"),
        py::arg("bias"));
  m.def("identify", &identify_call, py::arg("x"), py::arg("input_dtype"), py::arg("format"), py::arg("codes"),
        py::arg("scales"), py::arg("values"), py::arg("axis"), py::arg("global_amax"), py::arg("threads"),
        py::arg("top"));
  m.def("golden_generate", &golden_generate, py::arg("out"), py::arg("formats"), py::arg("recipes"),
        py::arg("families"), py::arg("cases"), py::arg("level"), py::arg("seed"), py::arg("threads"));
  m.def("golden_verify", &golden_verify, py::arg("suite"), py::arg("candidate"), py::arg("max_report"),
        py::arg("strict"), py::arg("skip_missing"), py::arg("families"), py::arg("cases"), py::arg("recipes"));

  // The keep mask of a Rollout-ResQ sparsity pattern on a rows x cols float32
  // matrix (analysis/sparsity.hpp).
  m.def(
      "sparsity_mask",
      [](const py::array_t<float, py::array::c_style>& values, const std::string& pattern) {
        if (values.ndim() != 2) throw InputError("sparsity_mask needs a 2-D (tokens x features) float32 array");
        const analysis::SparsityPattern s = analysis::parse_pattern(pattern);
        const int64_t rows = values.shape(0), cols = values.shape(1);
        std::vector<uint8_t> mask;
        {
          py::gil_scoped_release unlocked;
          mask = analysis::sparsity_mask(s, {values.data(), static_cast<size_t>(values.size())}, rows, cols);
        }
        return owning_array(std::move(mask), {rows, cols});
      },
      py::arg("values"), py::arg("pattern"));

  m.def("read_tensors", &read_tensors, py::arg("path"), py::arg("patterns"));
  m.def("underflow", &underflow_call, py::arg("x"), py::arg("input_dtype"), py::arg("recipe"), py::arg("transform"),
        py::arg("weights"), py::arg("threads"));
  m.def("transform_operands", &transform_operands_call, py::arg("x"), py::arg("w"), py::arg("recipe"),
        py::arg("transform"), py::arg("calib"));
  m.def("resq", &resq_call, py::arg("x"), py::arg("input_dtype"), py::arg("w"), py::arg("recipe"),
        py::arg("patterns"), py::arg("seed"), py::arg("threads"));
  m.def(
      "synthetic_weights",
      [](int64_t n, int64_t d, uint64_t seed) {
        if (n < 1 || d < 1) throw InputError(fmt::format("synthetic_weights({}, {}): both sizes must be >= 1", n, d));
        Tensor w = analysis::synthetic_weights(n, d, seed);
        return owning_array(std::move(w.data), w.shape);
      },
      py::arg("n"), py::arg("d"), py::arg("seed"));
  // The random Hadamard transform of docs/analysis.md §4.1 along the last
  // axis of a rows x cols float32 matrix: in double, rounded to fp32 once.
  m.def(
      "rht",
      [](const py::array_t<float, py::array::c_style>& values, int b, uint64_t seed, const std::string& signs,
         bool inverse) {
        if (values.ndim() != 2) throw InputError("rht needs a 2-D (rows x cols) float32 array");
        if (signs != "seeded" && signs != "te")
          throw InputError(fmt::format("rht signs='{}' is unknown; use seeded or te", signs));
        const int64_t rows = values.shape(0), cols = values.shape(1);
        if (b < 2 || (b & (b - 1)) != 0 || cols % b != 0)
          throw InputError(fmt::format("rht of size b={} needs b a power of two >= 2 dividing the row length {}",
                                       b, cols));
        const std::vector<double> d =
            analysis::rht_signs(signs == "te" ? analysis::RhtSigns::te : analysis::RhtSigns::seeded, b, seed);
        std::vector<float> out(static_cast<size_t>(values.size()));
        {
          py::gil_scoped_release unlocked;
          std::vector<double> v(values.data(), values.data() + values.size());
          if (inverse) analysis::rht_inverse(v, cols, d);
          else analysis::rht_forward(v, cols, d);
          for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
        }
        return owning_array(std::move(out), {rows, cols});
      },
      py::arg("values"), py::arg("b"), py::arg("seed"), py::arg("signs"), py::arg("inverse"));
  m.def("tensor_role", [](const std::string& name) {
    const analysis::TensorRole r = analysis::parse_tensor_role(name);
    py::dict d;
    d["layer"] = r.layer < 0 ? py::object(py::none()) : py::object(py::int_(r.layer));
    d["kind"] = r.kind;
    d["proj"] = r.proj;
    return d;
  });
}
