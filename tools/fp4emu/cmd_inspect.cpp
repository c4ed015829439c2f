// `fp4emu inspect FILE`: what a dump holds: tensors, dtypes, shapes, sizes,
// and per tensor the range, rms and NaN/Inf counts of its values. Tensors are
// memory-mapped and scanned in chunks, one at a time.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "distributed.hpp"
#include "fp4emu/analysis/metrics.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/atomic_file.hpp"
#include "fp4emu/io/tensor_file.hpp"
#include "fp4emu/version.hpp"
#include "progress.hpp"
#include "study.hpp"
#include "fp4emu/io/tensor_set.hpp"

namespace fp4emu::cli {
namespace {

using nlohmann::ordered_json;

struct Args {
  std::vector<std::string> inputs;
  std::vector<std::string> tensors;
  bool header_only = false;
  bool bf16_bits = false;
  std::string json_out;
  std::string progress = "auto";
  uint64_t split_above = dist::kDefaultSplitAbove;
  int threads = 0;
};

bool is_float(io::DType d) { return d == io::DType::f32 || d == io::DType::f16 || d == io::DType::bf16; }

std::string size_text(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1u << 20)) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  if (bytes < (1u << 30)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

// Widens and scans bytes [begin, end) of one tensor (all of it, or a row
// piece) in chunks, so no fp32 copy of it is made. ValueStats::add sums in
// index order, so the chunks do not change the numbers.
ValueStats scan(const io::TensorSet& set, size_t index, io::DType dtype, uint64_t begin, uint64_t end,
                Progress& progress, double& done) {
  constexpr size_t kChunk = size_t{1} << 20;
  const io::TensorInfo& t = set.tensors()[index].info;
  const io::TensorBytes mapped = set.bytes(index);
  const std::span<const uint8_t> bytes = mapped.bytes().subspan(begin, end - begin);
  const size_t esize = io::dtype_size(dtype);
  const size_t n = bytes.size() / esize;
  std::vector<float> buf(std::min(n, kChunk));
  ValueStats s;
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = std::min(kChunk, n - i);
    io::widen_to_f32(dtype, bytes.subspan(i * esize, m * esize), std::span(buf.data(), m), t.name);
    s.add(std::span<const float>(buf.data(), m));
#pragma omp critical(fp4emu_inspect_progress)
    {
      done += static_cast<double>(m * esize);
      progress.update(done, t.name);
    }
  }
  return s;
}

io::DType read_as(const Args& a, io::DType d) { return a.bf16_bits && d == io::DType::u16 ? io::DType::bf16 : d; }

// The value statistics of every selected float tensor (none with
// --header-only), spread over the ranks of an MPI job (all here when alone),
// tensors above --split-rows-above as row pieces merged in row order: on
// rank 0, in selection order.
std::vector<ValueStats> scan_all(const Args& a, const io::TensorSet& set, const std::vector<size_t>& selected) {
  std::vector<dist::RowShape> shapes;
  for (size_t i : selected) {
    const io::TensorInfo& t = set.tensors()[i].info;
    // Tensors not read: one piece of no cost.
    const bool read = !a.header_only && is_float(read_as(a, t.dtype));
    shapes.push_back(read ? dist::row_shape(t.shape, io::dtype_size(read_as(a, t.dtype)), true) : dist::RowShape{});
  }
  const dist::RowPlan plan = dist::plan_rows(shapes, a.split_above);
  fmt::print("{}", plan.note(a.split_above));
  const std::vector<uint64_t> costs = plan.costs();
  auto study = [&](const std::vector<size_t>& items) {
    double total = 0, done = 0;
    for (size_t k : items) total += static_cast<double>(costs[k]);
    Progress progress("inspect", a.header_only ? "never" : a.progress, total);
    // Pieces in parallel, each into its own slot: the numbers do not depend
    // on the thread count, and the first failing piece in order is reported.
    std::vector<ValueStats> out(items.size());
    std::vector<std::exception_ptr> errors(items.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(thread_count(a.threads))
    for (size_t n = 0; n < items.size(); ++n) {
      const dist::Piece& p = plan.pieces[items[n]];
      if (p.bytes == 0) continue;
      try {
        const size_t i = selected[p.tensor];
        const uint64_t row_bytes = shapes[p.tensor].row_bytes;
        out[n] = scan(set, i, read_as(a, set.tensors()[i].info.dtype), uint64_t(p.row_begin) * row_bytes,
                      uint64_t(p.row_end) * row_bytes, progress, done);
      } catch (...) {
        errors[n] = std::current_exception();
      }
    }
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    return out;
  };
  auto encode = [](dist::Writer& w, const ValueStats& s) { w.put(s); };
  auto decode = [](dist::Reader& r, ValueStats& s) { r.get(s); };
  const std::vector<ValueStats> pieces = dist::map_items<ValueStats>(costs, study, encode, decode);
  std::vector<ValueStats> out(selected.size());
  if (!dist::is_root()) return out;
  for (size_t t = 0; t < selected.size(); ++t) {
    out[t] = pieces[plan.first[t]];
    for (size_t k = plan.first[t] + 1; k < plan.first[t + 1]; ++k) out[t].merge(pieces[k]);
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int run(const Args& a) {
  check_progress_mode(a.progress);
  const io::TensorSet set(a.inputs);
  if (!a.json_out.empty() && dist::is_root()) {  // rank 0 writes it
    for (const std::filesystem::path& input : set.files()) check_not_an_input(a.json_out, "--json", {input});
    io::check_output_path(a.json_out, "--json");
  }
  const std::vector<size_t> selected = io::select_tensors(set, a.tensors);
  ordered_json files = ordered_json::array();
  uint64_t total_size = 0;
  for (size_t f = 0; f < set.files().size(); ++f) {
    const char* kind = set.kind(f) == io::TensorFile::Kind::npy ? "npy" : "safetensors";
    size_t count = 0;
    for (const io::TensorSet::Entry& e : set.tensors()) count += e.file == f;
    fmt::print("{}: {}, {} tensor{}, {} ({} bytes)\n", set.files()[f].string(), kind, count, count == 1 ? "" : "s",
               size_text(set.file_size(f)), set.file_size(f));
    for (const auto& [k, v] : set.metadata(f)) fmt::print("  metadata {} = {}\n", k, v);
    files.push_back({{"file", set.files()[f].string()}, {"kind", kind}, {"size_bytes", set.file_size(f)},
                     {"metadata", set.metadata(f)}});
    total_size += set.file_size(f);
  }

  size_t name_width = 6;
  for (size_t i : selected) name_width = std::max(name_width, set.tensors()[i].info.name.size());
  name_width = std::min<size_t>(name_width, 60);
  fmt::print("\n{:<{}} {:>5} {:>16} {:>10}", "tensor", name_width, "dtype", "shape", "size");
  if (!a.header_only)
    fmt::print(" {:>11} {:>11} {:>11} {:>11} {:>8} {:>6} {:>6}", "min", "max", "amax", "rms", "zeros", "NaN", "Inf");
  fmt::print("\n");

  const std::vector<ValueStats> stats = scan_all(a, set, selected);
  if (!dist::is_root()) return 0;  // rank 0 prints and writes the report
  ValueStats all;
  uint64_t all_bytes = 0;
  ordered_json tj = ordered_json::array();
  for (size_t k = 0; k < selected.size(); ++k) {
    const size_t i = selected[k];
    const io::TensorInfo& t = set.tensors()[i].info;
    ordered_json e = {{"name", t.name},     {"file", set.file_of(i).string()}, {"dtype", io::dtype_name(t.dtype)},
                      {"shape", t.shape},   {"bytes", t.nbytes}};
    std::string line = fmt::format("{:<{}} {:>5} {:>16} {:>10}", t.name, name_width, io::dtype_name(t.dtype),
                                   shape_text(t.shape), size_text(t.nbytes));
    all_bytes += t.nbytes;
    const io::DType dtype = read_as(a, t.dtype);
    if (!a.header_only) {
      if (is_float(dtype)) {
        const ValueStats& s = stats[k];
        all.merge(s);
        line += fmt::format(" {:>11.4g} {:>11.4g} {:>11.4g} {:>11.4g} {:>8} {:>6} {:>6}", s.min, s.max, s.amax,
                            s.rms(), s.zeros, s.nan, s.inf);
        e.update({{"min", s.min},
                  {"max", s.max},
                  {"amax", s.amax},
                  {"rms", s.rms()},
                  {"zeros", s.zeros},
                  {"nan", s.nan},
                  {"inf", s.inf},
                  {"finite", s.finite}});
      } else {
        line += "  (not a float tensor: no value statistics)";
      }
    }
    fmt::print("{}\n", line);
    tj.push_back(e);
  }
  if (!a.header_only && selected.size() > 1) {
    fmt::print("{:<{}} {:>5} {:>16} {:>10} {:>11.4g} {:>11.4g} {:>11.4g} {:>11.4g} {:>8} {:>6} {:>6}\n",
               fmt::format("all {} tensors", selected.size()), name_width, "", "", size_text(all_bytes), all.min,
               all.max, all.amax, all.rms(), all.zeros, all.nan, all.inf);
  }
  if (all.nan + all.inf > 0)
    fmt::print(stderr, "fp4emu: warning: '{}' holds {} NaN and {} Inf values (see the NaN and Inf columns)\n",
               set.label(), all.nan, all.inf);

  if (!a.json_out.empty()) {
    ordered_json j = {{"tool", "fp4emu inspect"},
                      {"version", kVersion},
                      {"file", set.files().size() == 1 ? set.files()[0].string() : set.label()},
                      {"kind", files.size() == 1 ? files[0]["kind"] : ordered_json("several files")},
                      {"size_bytes", total_size},
                      {"metadata", files.size() == 1 ? files[0]["metadata"] : ordered_json::object()},
                      {"files", files},
                      {"tensors", tj}};
    const std::string text = j.dump(2) + "\n";
    io::write_file_atomic(a.json_out, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  }
  return 0;
}

}  // namespace

void add_inspect(CLI::App& app, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("inspect", "List the tensors of .safetensors or .npy files with value statistics");
  add_dump_inputs(cmd, args->inputs);
  add_list_option(cmd, "--tensor,-t", args->tensors, "Tensor name, glob or re:REGEX (repeatable; default: all)", false);
  cmd->add_flag("--header-only", args->header_only, "Names, dtypes, shapes and sizes only; do not read the data");
  cmd->add_flag("--bf16-bits", args->bf16_bits, "Read u16 tensors as bf16 bit patterns (numpy '<u2' dumps)");
  cmd->add_option("--json", args->json_out, "Also write the listing as JSON to this file");
  cmd->add_option("--progress", args->progress, "Progress bar on stderr: auto (when a terminal) | always | never")
      ->default_val("auto");
  add_threads_option(cmd, args->threads, "Threads over tensors; results do not depend on it");
  add_split_rows_option(cmd, args->split_above);
  cmd->footer("Example: fp4emu inspect data/sample_dump.safetensors --tensor 'model.layers.0.*'");
  cmd->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace fp4emu::cli
