#pragma once
// Work over [0, n) in fixed chunks of kChunk elements, each chunk in index
// order and its result kept in chunk order, so that sums and counts built
// from the chunks are the same bits for any thread count
// (docs/analysis.md §3.3 R6).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fp4emu/threads.hpp"

namespace fp4emu::analysis {

inline constexpr int64_t kChunk = int64_t(1) << 16;

// f(begin, end) -> Part over every chunk of [0, n), on the threads; the parts
// in chunk order.
template <class Part, class F>
std::vector<Part> chunk_parts(int64_t n, int threads, F f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Part> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) num_threads(thread_count(threads))
  for (int64_t c = 0; c < chunks; ++c) parts[size_t(c)] = f(c * kChunk, std::min(n, (c + 1) * kChunk));
  return parts;
}

}  // namespace fp4emu::analysis
