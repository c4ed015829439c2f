#pragma once
// Running one command over the ranks of an MPI job (mpirun, mpiexec or srun
// start N copies of fp4emu; README.md "Across machines"). Everything MPI is
// here; the commands see ranks, a deterministic split of their items and a
// gather of encoded results to rank 0, which writes every report.
//
// Built without MPI (FP4EMU_MPI=OFF, or AUTO without Open MPI), or started
// without a launcher, the job is one rank and nothing here talks to anyone.
//
// Failure: a rank whose command throws tells every other rank at their next
// checkpoint (every gather begins with one, and run_main ends with one). Then
// every rank throws JobFailed with the first failing rank's message, rank 0
// prints it, and every rank exits with its code (2 bad input, 3 internal), so
// no rank waits forever and no report is written.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp4emu/error.hpp"
#include "src/io/byte_stream.hpp"

namespace fp4emu::cli::dist {

// Starts MPI when fp4emu was built with it and a launcher started this
// process (the launcher's environment: Open MPI's OMPI_COMM_WORLD_SIZE, PMIx's
// PMIX_RANK, or PMI_SIZE/PMI_RANK of MPICH's Hydra and of srun's PMI). On
// ranks other than 0, stdout goes to /dev/null: rank 0 prints the tables.
void start(int* argc, char*** argv);
// MPI_Finalize (when started). `exit_code`: the command's outcome on this
// rank; with several ranks a final checkpoint first, so that a rank that
// failed after the others finished is heard by them. Returns this rank's
// exit code.
int finish(int exit_code);
// The command's error, handed to the other ranks (then thrown as JobFailed on
// every rank, this one included) when there are several; rethrown as is
// when alone. Called by run_main on an exception.
[[noreturn]] void fail(std::exception_ptr error);

int rank();
int size();
inline bool is_root() { return rank() == 0; }
// "" or " (rank 3 of 8)", for messages.
std::string where();
// Whether this fp4emu was built with MPI.
bool built_with_mpi();

// A failure on some rank, known to every rank; its message is the original
// one, `exit_code` 2 (InputError, out of memory) or 3 (internal error).
struct JobFailed : InputError {
  JobFailed(const std::string& message, int code, int failed_rank)
      : InputError(message), exit_code(code), rank(failed_rank) {}
  int exit_code;
  int rank;
};

// ---- splitting the work ----------------------------------------------------------
// The rank (of `ranks`) that handles each item, from the items' costs
// (bytes): the largest first (the lower index on ties), each to the least
// loaded rank (the lowest on ties). Every rank computes the same split;
// results never depend on it.
std::vector<int> assign(std::span<const uint64_t> costs, int ranks);
// The items of `owners` that this rank handles, in increasing order.
std::vector<size_t> mine(std::span<const int> owners);

// ---- row ranges of large tensors ---------------------------------------------------
// A tensor of more than `split_above` bytes (--split-rows-above) is studied as
// row ranges, "pieces", each an item of its own for assign(). The boundaries
// depend on the tensor's shape and the threshold only (never on N or
// --threads), and the single process runs the same pieces, so a command that
// follows the rules below writes the same bytes for any N. A row is a slice
// along the tensor's first axes (every axis but the block axis, which must be
// the last); pieces are whole multiples of kRowMultiple rows (NVFP4's 16x16
// tiles never straddle two pieces), the last one ragged.
//
// How a command uses it (cmd_compare.cpp is the worked example):
//  1. plan_rows() over the selected tensors: their rows, bytes per row, and
//     whether the command can split them (e.g. not under stochastic
//     rounding, whose random bits follow the element index).
//  2. Per-tensor quantities that need the whole tensor first (NVFP4's
//     per-tensor amax): each piece's value from shared_items(), which gives
//     every piece's result to every rank, reduced per tensor in piece order
//     by an exact, order-free rule (max); then every piece is quantized with
//     the tensor's value. A value that cannot be passed on (the quantizer
//     refuses it) is a reason to re-plan that tensor whole: every rank sees
//     the same values, so every rank re-plans alike.
//     A command whose pieces must share more while they are studied (resq's
//     rankings) studies a split tensor's pieces on every rank at once and
//     exchanges what they share with exchange().
//  3. map_items(plan.costs()) studies the pieces; rank 0 gets them in piece
//     order and merges each tensor's pieces (plan.of(t)) in that order: sums
//     by merging the per-piece sums in piece order, counts and maxima
//     exactly, order statistics (medians, percentiles, top-k) from the
//     per-row or per-block values each piece sends, concatenated.
inline constexpr int64_t kRowMultiple = 16;
inline constexpr uint64_t kDefaultSplitAbove = uint64_t{256} << 20;

struct RowShape {
  int64_t rows = 1;         // slices along the leading axes
  uint64_t row_bytes = 0;   // bytes of one row as stored
  bool splittable = false;  // false: one piece, whatever its size
};
// The rows of a tensor of `shape` (every axis but the last; a vector is one
// row) whose elements are stored in `element_size` bytes; split only from
// rank 2 up.
RowShape row_shape(const std::vector<int64_t>& shape, size_t element_size, bool splittable);
struct Piece {
  size_t tensor = 0;
  int64_t row_begin = 0, row_end = 0;  // rows [row_begin, row_end)
  uint64_t bytes = 0;
  bool whole(const RowShape& t) const { return row_begin == 0 && row_end == t.rows; }
};
struct RowPlan {
  std::vector<Piece> pieces;  // by tensor, then by row
  std::vector<size_t> first;  // tensor t's pieces: [first[t], first[t + 1])
  std::span<const Piece> of(size_t t) const {
    return std::span<const Piece>(pieces).subspan(first[t], first[t + 1] - first[t]);
  }
  bool split(size_t t) const { return first[t + 1] - first[t] > 1; }
  std::vector<uint64_t> costs() const;
  // "2 tensor(s) above --split-rows-above 4096 bytes studied as 14 row
  // pieces\n" for the standard output, "" when none is split.
  std::string note(uint64_t split_above) const;
};
// Pieces of at most max(split_above, kRowMultiple rows) bytes for every
// splittable tensor above `split_above` bytes, one piece for every other.
RowPlan plan_rows(std::span<const RowShape> tensors, uint64_t split_above);

// ---- encoding results --------------------------------------------------------------
// io::ByteWriter / io::ByteReader (src/io/byte_stream.hpp) carry results
// between ranks; every rank runs the same binary on the same kind of machine.
using Writer = io::ByteWriter;
using Reader = io::ByteReader;

// ---- collectives ------------------------------------------------------------------------
// Every rank's payload on rank 0, in rank order; an empty vector elsewhere.
// A checkpoint first (JobFailed on every rank when one has failed).
std::vector<std::string> gather(std::string payload);

// Rank 0's payload on every rank (a checkpoint first).
std::string broadcast(std::string payload);

// The items' results, computed where `assign(costs)` puts them, on rank 0 in
// item order (other ranks: default-constructed slots). `study(items)`
// returns the results of the given items in their order; `encode` and
// `decode` carry one result between ranks. Alone, the results are moved as
// they are.
template <class R>
std::vector<R> map_items(std::span<const uint64_t> costs,
                         const std::function<std::vector<R>(const std::vector<size_t>&)>& study,
                         const std::function<void(Writer&, const R&)>& encode,
                         const std::function<void(Reader&, R&)>& decode) {
  std::vector<R> all(costs.size());
  if (size() == 1) {
    std::vector<size_t> items(costs.size());
    for (size_t i = 0; i < items.size(); ++i) items[i] = i;
    std::vector<R> local = study(items);
    for (size_t i = 0; i < items.size(); ++i) all[i] = std::move(local[i]);
    return all;
  }
  const std::vector<int> owners = assign(costs, size());
  const std::vector<size_t> items = mine(owners);
  std::vector<R> local = study(items);
  Writer w;
  for (size_t k = 0; k < items.size(); ++k) {
    w.put<uint64_t>(items[k]);
    encode(w, local[k]);
  }
  local.clear();
  const std::vector<std::string> parts = gather(w.take());
  for (const std::string& part : parts) {
    Reader r(part);
    while (!r.done()) {
      const uint64_t i = r.get<uint64_t>();
      if (i >= all.size()) throw std::logic_error("dist::map_items: an item index out of range");
      decode(r, all[i]);
    }
  }
  return all;
}

// map_items with the results on every rank: for the first phase of a split
// tensor (step 2 above), whose per-piece values every rank needs.
template <class R>
std::vector<R> shared_items(std::span<const uint64_t> costs,
                            const std::function<std::vector<R>(const std::vector<size_t>&)>& study,
                            const std::function<void(Writer&, const R&)>& encode,
                            const std::function<void(Reader&, R&)>& decode) {
  std::vector<R> all = map_items<R>(costs, study, encode, decode);
  if (size() == 1) return all;
  Writer w;
  if (is_root())
    for (const R& r : all) encode(w, r);
  const std::string bytes = broadcast(w.take());
  Reader r(bytes);
  for (R& item : all) decode(r, item);
  return all;
}

// Every item's payload on every rank, in item order, from this rank's items'
// (mine(assign(costs)), in that order): for values the pieces of a split
// tensor share while they are studied (resq's amaxes and rankings).
inline std::vector<std::string> exchange(std::span<const uint64_t> costs, std::vector<std::string> local) {
  return shared_items<std::string>(
      costs, [&](const std::vector<size_t>& items) {
        if (items.size() != local.size()) throw std::logic_error("dist::exchange: one payload per item of this rank");
        return std::move(local);
      },
      [](Writer& w, const std::string& s) { w.put(s); }, [](Reader& r, std::string& s) { r.get(s); });
}

// Step 2 for per-tensor values such as NVFP4's amax, `values` of them per
// tensor (one per recipe or run): `piece_values(piece)` computes a piece's
// (nullopt where a value does not apply), every rank receives every piece's,
// `reduce(v, values)` combines a split tensor's pieces' value v in piece
// order, and a tensor for which `usable(v, value)` is false is re-planned
// whole (`shapes` and `plan` change). Returns the values of the split
// tensors (nullopt elsewhere), [tensor][v]. Nothing is read when `needed`
// is false.
using TensorValues = std::vector<std::vector<std::optional<float>>>;
TensorValues first_phase(bool needed, size_t values, std::vector<RowShape>& shapes, RowPlan& plan,
                         uint64_t split_above,
                         const std::function<std::vector<std::optional<float>>(const Piece&)>& piece_values,
                         const std::function<float(size_t, std::span<const float>)>& reduce,
                         const std::function<bool(size_t, float)>& usable);

}  // namespace fp4emu::cli::dist
