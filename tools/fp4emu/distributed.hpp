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

// ---- encoding results --------------------------------------------------------------
// io::ByteWriter / io::ByteReader (src/io/byte_stream.hpp) carry results
// between ranks; every rank runs the same binary on the same kind of machine.
using Writer = io::ByteWriter;
using Reader = io::ByteReader;

// ---- collectives ------------------------------------------------------------------------
// Every rank's payload on rank 0, in rank order; an empty vector elsewhere.
// A checkpoint first (JobFailed on every rank when one has failed).
std::vector<std::string> gather(std::string payload);

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

}  // namespace fp4emu::cli::dist
