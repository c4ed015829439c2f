// Long suite: every one of the 2^32 fp32 bit patterns through the codec,
// compared with the independent table-search oracle (tests/oracle.cpp).
//
// Speed without trusting the codec: for a fixed (format, rounding, overflow)
// the oracle's result is a step function of the fp32 bit pattern on each sign
// half (rounding is monotone in the magnitude, and fp32 bit order is magnitude
// order within a sign). So the oracle is asked only where the step function
// changes, found by galloping + bisection over the bit patterns, and stored as
// a list of pieces (last input of each piece, code). The sweep then walks the
// inputs in order beside the piece list: O(1) per input. The piece list is
// spot-checked against direct oracle calls, and every mismatch is re-checked
// against a direct oracle call before it is reported.
//
// Threads: FP4EMU_TEST_THREADS, else std::thread::hardware_concurrency().
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "oracle.hpp"

namespace {

using fp4emu::MinifloatTraits;
using fp4emu::Overflow;
using fp4emu::Rounding;
using oracle::OracleFormat;

struct Sweep {
  const MinifloatTraits* traits;
  const OracleFormat& (*oracle)();
  Rounding rounding;
  Overflow overflow;
};

oracle::OnOverflow to_oracle(Overflow o) {
  return o == Overflow::saturate ? oracle::OnOverflow::saturate : oracle::OnOverflow::to_special;
}

float f32(uint32_t u) { return std::bit_cast<float>(u); }

unsigned thread_count() {
  if (const char* env = std::getenv("FP4EMU_TEST_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return static_cast<unsigned>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Inputs u in (previous piece's last, last] all give `code`.
struct Piece {
  uint32_t last;
  uint32_t code;
};

// Step function u -> oracle code over [first, last], as pieces.
std::vector<Piece> oracle_pieces(const OracleFormat& f, Rounding r, oracle::OnOverflow o, uint32_t first,
                                 uint32_t last) {
  auto at = [&](uint64_t u) { return oracle::oracle_encode(f, f32(static_cast<uint32_t>(u)), r, o); };
  std::vector<Piece> pieces;
  uint64_t u = first;
  while (u <= last) {
    const uint32_t code = at(u);
    // Gallop: find a step with at(u + step) != code (or past the end).
    uint64_t good = u, step = 1;
    uint64_t bad = uint64_t{last} + 1;
    while (u + step <= last) {
      if (at(u + step) != code) {
        bad = u + step;
        break;
      }
      good = u + step;
      step *= 2;
    }
    // Bisect: at(good) == code, at(bad) != code (or bad is past the end).
    while (bad - good > 1) {
      const uint64_t mid = good + (bad - good) / 2;
      (at(mid) == code ? good : bad) = mid;
    }
    pieces.push_back({static_cast<uint32_t>(good), code});
    u = good + 1;
  }
  return pieces;
}

struct Mismatch {
  uint32_t input;
  uint32_t codec;
  uint32_t expected;
};

std::string sweep_name(const Sweep& s) {
  return std::string(s.traits->name) + "_" + std::string(fp4emu::to_string(s.rounding)) + "_" +
         (s.overflow == Overflow::saturate ? "saturate" : "to_special");
}

void PrintTo(const Sweep& s, std::ostream* os) { *os << sweep_name(s); }

class Fp32Sweep : public ::testing::TestWithParam<Sweep> {};

TEST_P(Fp32Sweep, EveryFp32Input) {
  const Sweep& sw = GetParam();
  const OracleFormat& f = sw.oracle();
  const oracle::OnOverflow oo = to_oracle(sw.overflow);
  const auto t0 = std::chrono::steady_clock::now();

  // Both sign halves; each is monotone on its own.
  std::vector<Piece> pieces = oracle_pieces(f, sw.rounding, oo, 0x00000000u, 0x7FFFFFFFu);
  const std::vector<Piece> neg = oracle_pieces(f, sw.rounding, oo, 0x80000000u, 0xFFFFFFFFu);
  pieces.insert(pieces.end(), neg.begin(), neg.end());
  const auto t1 = std::chrono::steady_clock::now();
  const std::clock_t cpu1 = std::clock();

  auto expected_at = [&](uint32_t u) {
    return std::lower_bound(pieces.begin(), pieces.end(), u, [](const Piece& p, uint32_t v) { return p.last < v; })
        ->code;
  };
  // Spot-check the piece list against direct oracle calls.
  std::mt19937 rng(0xC0DEC);
  for (int i = 0; i < 1'000'000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    ASSERT_EQ(expected_at(u), oracle::oracle_encode(f, f32(u), sw.rounding, oo)) << "piece list, input 0x" << std::hex
                                                                                   << u;
  }

  // The sweep: chunks of 2^22 inputs handed out to the threads.
  constexpr uint64_t kChunk = uint64_t{1} << 22;
  constexpr uint64_t kTotal = uint64_t{1} << 32;
  std::atomic<uint64_t> next_chunk{0};
  std::atomic<uint64_t> mismatches{0};
  std::mutex report_mutex;
  std::vector<Mismatch> reports;
  auto worker = [&] {
    for (;;) {
      const uint64_t begin = next_chunk.fetch_add(kChunk);
      if (begin >= kTotal) return;
      const uint64_t end = begin + kChunk;
      auto piece = std::lower_bound(pieces.begin(), pieces.end(), static_cast<uint32_t>(begin),
                                    [](const Piece& p, uint32_t v) { return p.last < v; });
      uint64_t bad = 0;
      for (uint64_t u = begin; u < end; ++u) {
        const uint32_t x = static_cast<uint32_t>(u);
        if (x > piece->last) ++piece;  // pieces are never empty, so one step suffices
        const uint32_t got = fp4emu::encode(*sw.traits, static_cast<double>(f32(x)), sw.rounding, sw.overflow);
        if (got != piece->code) {
          ++bad;
          std::lock_guard<std::mutex> lock(report_mutex);
          if (reports.size() < 20) reports.push_back({x, got, piece->code});
        }
      }
      mismatches += bad;
    }
  };
  const unsigned n_threads = thread_count();
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < n_threads; ++i) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  const auto t2 = std::chrono::steady_clock::now();
  const double cpu_s = static_cast<double>(std::clock() - cpu1) / CLOCKS_PER_SEC;

  std::sort(reports.begin(), reports.end(), [](const Mismatch& a, const Mismatch& b) { return a.input < b.input; });
  for (const Mismatch& m : reports) {
    const uint32_t direct = oracle::oracle_encode(f, f32(m.input), sw.rounding, oo);
    ADD_FAILURE() << sweep_name(sw) << ": input fp32 0x" << std::hex << m.input << " (" << std::hexfloat
                  << f32(m.input) << std::defaultfloat << "): codec 0x" << m.codec << ", oracle 0x" << m.expected
                  << " (direct oracle call 0x" << direct << ")";
  }
  EXPECT_EQ(mismatches.load(), 0u) << sweep_name(sw);

  const double oracle_s = std::chrono::duration<double>(t1 - t0).count();
  const double sweep_s = std::chrono::duration<double>(t2 - t1).count();
  // CPU seconds too: on a shared machine the wall time says little.
  std::printf(
      "[  sweep   ] %-28s 2^32 fp32 inputs in %6.1f s wall (%4.0f M/s, %u threads), %6.1f CPU s (%4.1f ns/input); "
      "oracle: %zu pieces in %.2f s\n",
      sweep_name(sw).c_str(), sweep_s, static_cast<double>(kTotal) / sweep_s / 1e6, n_threads, cpu_s,
      cpu_s / static_cast<double>(kTotal) * 1e9, pieces.size(), oracle_s);
  std::fflush(stdout);
}

std::vector<Sweep> all_sweeps() {
  using fp4emu::kBF16, fp4emu::kE2M1, fp4emu::kE4M3, fp4emu::kE6M2, fp4emu::kE8M0, fp4emu::kFP16, fp4emu::kS1P2,
      fp4emu::kUE4M3;
  constexpr Overflow SAT = Overflow::saturate, SPECIAL = Overflow::to_special;
  std::vector<Sweep> v;
  // Element formats: every rounding (their overflow is always saturation).
  for (Rounding r : {Rounding::rne, Rounding::rha, Rounding::rtz, Rounding::ties_to_zero, Rounding::rtp}) {
    v.push_back({&kE2M1, &oracle::e2m1, r, SAT});
    v.push_back({&kS1P2, &oracle::s1p2, r, SAT});
  }
  // Scale formats: RNE, both overflow rules; E8M0 also in CUDA's RZ and RP.
  for (Overflow o : {SAT, SPECIAL}) {
    v.push_back({&kE4M3, &oracle::e4m3, Rounding::rne, o});
    v.push_back({&kUE4M3, &oracle::ue4m3, Rounding::rne, o});
    v.push_back({&kE8M0, &oracle::e8m0, Rounding::rne, o});
    v.push_back({&kE6M2, &oracle::e6m2, Rounding::rne, o});
  }
  v.push_back({&kE8M0, &oracle::e8m0, Rounding::rtz, SAT});
  v.push_back({&kE8M0, &oracle::e8m0, Rounding::rtp, SAT});
  // 16-bit formats: RNE with IEEE overflow (what bf16_rne / fp16_rne use).
  v.push_back({&kBF16, &oracle::bf16, Rounding::rne, SPECIAL});
  v.push_back({&kFP16, &oracle::fp16, Rounding::rne, SPECIAL});
  return v;
}

INSTANTIATE_TEST_SUITE_P(CodecExhaustive, Fp32Sweep, ::testing::ValuesIn(all_sweeps()),
                         [](const ::testing::TestParamInfo<Sweep>& info) { return sweep_name(info.param); });

}  // namespace
