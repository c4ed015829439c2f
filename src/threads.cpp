#include "fp4emu/threads.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>

#include "fp4emu/error.hpp"

namespace fp4emu {

int thread_count(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw InputError(fmt::format("thread count {} is invalid: use 1..{}, or 0 for the default "
                                 "(OMP_NUM_THREADS, else every core)",
                                 threads, kMaxThreads));
  // OMP_NUM_THREADS is capped by the same rule.
  return threads > 0 ? threads : std::clamp(omp_get_max_threads(), 1, kMaxThreads);
}

}  // namespace fp4emu
