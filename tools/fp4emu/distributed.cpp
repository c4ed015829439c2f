#include "distributed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <numeric>

#ifdef FP4EMU_HAVE_MPI
// The C API only: the deprecated C++ bindings' header warns under -Wextra.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace fp4emu::cli::dist {
namespace {

int g_rank = 0, g_size = 1;

#ifdef FP4EMU_HAVE_MPI
bool g_started = false;  // MPI_Init called (and MPI_Finalize still due)
bool g_failed = false;   // a checkpoint has reported a failure: no more collectives

// A launcher's environment: the process is one rank of a job.
bool launched() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

// The code and message an exception reports (run_main's rules).
std::pair<int, std::string> describe(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const JobFailed& f) {
    return {f.exit_code, f.what()};
  } catch (const InputError& x) {
    return {2, x.what()};
  } catch (const std::bad_alloc&) {
    return {2, "out of memory; the input is too large for this machine"};
  } catch (const std::exception& x) {
    return {3, x.what()};
  } catch (...) {
    return {3, "unknown exception"};
  }
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("MPI: {} failed ({})", what, rc));
}

// Every rank calls it at the same points. The lowest failing rank (if any)
// broadcasts its code and message; then every rank throws JobFailed.
void checkpoint(const std::pair<int, std::string>* failure) {
  int mine = failure ? g_rank : INT_MAX, first = INT_MAX;
  check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  if (first == INT_MAX) return;
  g_failed = true;
  uint64_t head[2] = {0, 0};  // code, message length
  std::string message;
  if (g_rank == first) head[0] = uint64_t(failure->first), head[1] = failure->second.size(), message = failure->second;
  check(MPI_Bcast(head, 2, MPI_UINT64_T, first, MPI_COMM_WORLD), "MPI_Bcast");
  message.resize(head[1]);
  check(MPI_Bcast(message.data(), int(head[1]), MPI_CHAR, first, MPI_COMM_WORLD), "MPI_Bcast");
  throw JobFailed(message, int(head[0]), first);
}

// Point-to-point in pieces under MPI's int counts.
constexpr uint64_t kPiece = uint64_t{1} << 30;

void send_bytes(const std::string& s, int to) {
  const uint64_t n = s.size();
  check(MPI_Send(&n, 1, MPI_UINT64_T, to, 0, MPI_COMM_WORLD), "MPI_Send");
  for (uint64_t at = 0; at < n; at += kPiece)
    check(MPI_Send(s.data() + at, int(std::min(kPiece, n - at)), MPI_CHAR, to, 1, MPI_COMM_WORLD), "MPI_Send");
}

std::string recv_bytes(int from) {
  uint64_t n = 0;
  check(MPI_Recv(&n, 1, MPI_UINT64_T, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  std::string s(n, '\0');
  for (uint64_t at = 0; at < n; at += kPiece)
    check(MPI_Recv(s.data() + at, int(std::min(kPiece, n - at)), MPI_CHAR, from, 1, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
  return s;
}
#endif

}  // namespace

bool built_with_mpi() {
#ifdef FP4EMU_HAVE_MPI
  return true;
#else
  return false;
#endif
}

void start(int* argc, char*** argv) {
#ifdef FP4EMU_HAVE_MPI
  if (g_started || !launched()) return;
  if (MPI_Init(argc, argv) != MPI_SUCCESS) return;  // Open MPI has printed why; run alone
  g_started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  // Errors are codes here, turned into JobFailed, not aborts.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (g_rank != 0 && !std::freopen("/dev/null", "w", stdout)) std::fclose(stdout);
#else
  (void)argc, (void)argv;
#endif
}

int finish(int exit_code) {
#ifdef FP4EMU_HAVE_MPI
  if (!g_started) return exit_code;
  if (g_size > 1 && !g_failed) {
    try {
      checkpoint(nullptr);
    } catch (const JobFailed& f) {
      exit_code = f.exit_code;  // another rank failed after this one finished: rank 0 says so
      if (g_rank == 0) fmt::print(stderr, "fp4emu: error (rank {} of {}): {}\n", f.rank, g_size, f.what());
    }
  }
  MPI_Finalize();
  g_started = false;
#endif
  return exit_code;
}

void fail(std::exception_ptr error) {
#ifdef FP4EMU_HAVE_MPI
  if (g_started && g_size > 1 && !g_failed) {
    const std::pair<int, std::string> f = describe(error);
    checkpoint(&f);  // throws JobFailed on every rank
  }
#endif
  std::rethrow_exception(error);
}

int rank() { return g_rank; }
int size() { return g_size; }
std::string where() { return g_size == 1 ? "" : fmt::format(" (rank {} of {})", g_rank, g_size); }

std::vector<int> assign(std::span<const uint64_t> costs, int ranks) {
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<uint64_t> load(size_t(std::max(ranks, 1)), 0);
  std::vector<int> owner(costs.size(), 0);
  for (size_t i : order) {
    const size_t r = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = int(r);
    load[r] += std::max<uint64_t>(costs[i], 1);
  }
  return owner;
}

std::vector<size_t> mine(std::span<const int> owners) {
  std::vector<size_t> items;
  for (size_t i = 0; i < owners.size(); ++i)
    if (owners[i] == rank()) items.push_back(i);
  return items;
}

RowShape row_shape(const std::vector<int64_t>& shape, size_t element_size, bool splittable) {
  RowShape r;
  for (size_t d = 0; d + 1 < shape.size(); ++d) r.rows *= shape[d];
  r.row_bytes = uint64_t(shape.empty() ? 1 : shape.back()) * element_size;
  r.splittable = splittable && shape.size() >= 2;
  return r;
}

std::vector<uint64_t> RowPlan::costs() const {
  std::vector<uint64_t> c;
  for (const Piece& p : pieces) c.push_back(p.bytes);
  return c;
}

std::string RowPlan::note(uint64_t split_above) const {
  size_t tensors = 0, pieces_of_split = 0;
  for (size_t t = 0; t + 1 < first.size(); ++t)
    if (split(t)) ++tensors, pieces_of_split += first[t + 1] - first[t];
  if (tensors == 0) return {};
  return fmt::format("{} tensor(s) above --split-rows-above {} bytes studied as {} row pieces\n", tensors, split_above,
                     pieces_of_split);
}

RowPlan plan_rows(std::span<const RowShape> tensors, uint64_t split_above) {
  RowPlan plan;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const RowShape& s = tensors[t];
    plan.first.push_back(plan.pieces.size());
    const uint64_t bytes = uint64_t(s.rows) * s.row_bytes;
    int64_t step = s.rows;  // one piece
    if (s.splittable && bytes > split_above && s.row_bytes > 0) {
      const int64_t fit = int64_t(std::min<uint64_t>(split_above / s.row_bytes, uint64_t(s.rows)));
      step = std::max(kRowMultiple, fit / kRowMultiple * kRowMultiple);
    }
    for (int64_t r = 0; r < s.rows; r += step) {
      const int64_t end = std::min(s.rows, r + step);
      plan.pieces.push_back({t, r, end, uint64_t(end - r) * s.row_bytes});
    }
    if (s.rows == 0) plan.pieces.push_back({t, 0, 0, 0});
  }
  plan.first.push_back(plan.pieces.size());
  return plan;
}

TensorValues first_phase(bool needed, size_t values, std::vector<RowShape>& shapes, RowPlan& plan,
                         uint64_t split_above,
                         const std::function<std::vector<std::optional<float>>(const Piece&)>& piece_values,
                         const std::function<float(size_t, std::span<const float>)>& reduce,
                         const std::function<bool(size_t, float)>& usable) {
  using Values = std::vector<std::optional<float>>;
  TensorValues out(shapes.size(), Values(values));
  std::vector<size_t> pieces;  // of split tensors
  for (size_t k = 0; needed && k < plan.pieces.size(); ++k)
    if (plan.split(plan.pieces[k].tensor)) pieces.push_back(k);
  if (pieces.empty()) return out;
  std::vector<uint64_t> costs;
  for (size_t k : pieces) costs.push_back(plan.pieces[k].bytes);
  auto study = [&](const std::vector<size_t>& items) {
    std::vector<Values> res;
    for (size_t i : items) res.push_back(piece_values(plan.pieces[pieces[i]]));
    return res;
  };
  const std::vector<Values> got = shared_items<Values>(
      costs, study, [](Writer& w, const Values& v) { w.put(v); }, [](Reader& r, Values& v) { r.get(v); });
  bool replan = false;
  for (size_t t = 0; t < shapes.size(); ++t) {
    if (!plan.split(t)) continue;
    for (size_t v = 0; v < values; ++v) {
      std::vector<float> parts;
      for (size_t i = 0; i < pieces.size(); ++i)
        if (plan.pieces[pieces[i]].tensor == t && got[i].at(v)) parts.push_back(*got[i][v]);
      if (parts.empty()) continue;
      out[t][v] = reduce(v, parts);
      if (!usable(v, *out[t][v])) shapes[t].splittable = false, replan = true;
    }
  }
  if (replan) {
    plan = plan_rows(shapes, split_above);
    for (size_t t = 0; t < shapes.size(); ++t)
      if (!plan.split(t)) out[t].assign(values, std::nullopt);
  }
  return out;
}

std::string broadcast(std::string payload) {
#ifdef FP4EMU_HAVE_MPI
  if (g_size > 1) {
    checkpoint(nullptr);
    uint64_t n = payload.size();
    check(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
    payload.resize(n);
    for (uint64_t at = 0; at < n; at += kPiece)
      check(MPI_Bcast(payload.data() + at, int(std::min(kPiece, n - at)), MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
  }
#endif
  return payload;
}

std::vector<std::string> gather(std::string payload) {
  std::vector<std::string> parts;
#ifdef FP4EMU_HAVE_MPI
  if (g_size > 1) {
    checkpoint(nullptr);
    if (g_rank != 0) {
      send_bytes(payload, 0);
      return parts;
    }
    parts.push_back(std::move(payload));
    for (int r = 1; r < g_size; ++r) parts.push_back(recv_bytes(r));
    return parts;
  }
#endif
  parts.push_back(std::move(payload));
  return parts;
}

}  // namespace fp4emu::cli::dist
