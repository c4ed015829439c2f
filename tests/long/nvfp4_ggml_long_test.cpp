// Long suite: ggml's fp32 -> UE4M3 conversion (nvfp4.ggml) on every one of the
// 2^32 fp32 bit patterns, against the independent oracle of tests/oracle.cpp.
// Threads: FP4EMU_TEST_THREADS, else std::thread::hardware_concurrency().
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "fp4emu/quant/reference.hpp"
#include "oracle.hpp"

namespace fp4emu {
namespace {

unsigned thread_count() {
  if (const char* env = std::getenv("FP4EMU_TEST_THREADS")) return std::max(1, std::atoi(env));
  return std::max(1u, std::thread::hardware_concurrency());
}

TEST(Nvfp4GgmlLong, Fp32ToUe4m3OnEveryFp32) {
  constexpr uint64_t kAll = uint64_t{1} << 32;
  const unsigned threads = thread_count();
  std::atomic<uint64_t> mismatches{0};
  std::atomic<uint64_t> first{kAll};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (uint64_t b = t; b < kAll; b += threads) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
        if (reference::ggml_fp32_to_ue4m3(x) != oracle::oracle_ggml_ue4m3(x)) {
          ++mismatches;
          uint64_t seen = first.load();
          while (b < seen && !first.compare_exchange_weak(seen, b)) {
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(mismatches.load(), 0u) << std::hex << "first at 0x" << first.load();
}

}  // namespace
}  // namespace fp4emu
