// Long suite: the fast path against the scalar reference on 10^9 random
// values per format (each format's default recipe), and 2.5 * 10^8 for the
// hardware recipes that are not defaults (hif4.a6, mxfp4.rceil), fake-quant
// values and packed bytes, bit for bit, on the target the dispatcher picks.
//
// Each chunk of 2^20 values is drawn from one of several generators (40
// binades, Gaussian activations with outliers, bf16 values, values near
// powers of two, sprinkled zeros/-0/NaN/Inf/subnormals) seeded by the chunk
// index, so a failure names a reproducible chunk.
//
// Threads: FP4EMU_TEST_THREADS, else std::thread::hardware_concurrency().
// FP4EMU_LONG_SCALE (default 1) multiplies the element counts.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "src/quant/simd.hpp"

namespace fp4emu {
namespace {

constexpr int64_t kChunk = int64_t{1} << 20;

int worker_count() {
  if (const char* env = std::getenv("FP4EMU_TEST_THREADS")) return std::max(1, std::atoi(env));
  return std::max(1u, std::thread::hardware_concurrency());
}

double scale() {
  if (const char* env = std::getenv("FP4EMU_LONG_SCALE")) return std::max(1e-6, std::atof(env));
  return 1.0;
}

std::vector<float> chunk_values(uint64_t seed, bool bf16_only) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(kChunk);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_int_distribution<int> exp40(-20, 19);
  const int kind = static_cast<int>(seed % 5);
  const int offset = static_cast<int>(seed % 61) - 30;  // tensor-wide magnitude shift
  for (float& x : v) {
    switch (kind) {
      case 0: {  // 40 binades; one draw per statement: argument order is the compiler's
        const int e = exp40(rng) + offset;
        x = static_cast<float>(std::ldexp(mant(rng), e));
        break;
      }
      case 1: {  // activations
        const float gain = (rng() & 1023) == 0 ? 300.0f : 1.0f;
        x = gauss(rng) * gain;
        break;
      }
      case 2: x = bf16_decode(static_cast<uint16_t>(rng())); break;                     // any bf16 pattern
      case 3: {                                                                         // near powers of two
        const float p = std::ldexp(1.0f, exp40(rng) + offset);
        x = std::nextafter(p, (rng() & 1) ? 0.0f : 1e38f);
        if (rng() & 2) x = p * 1.5f;
        break;
      }
      default: x = std::bit_cast<float>(static_cast<uint32_t>(rng()));  // any fp32 pattern
    }
    if (rng() & 1) x = -x;
    const uint64_t special = rng() % 4096;
    if (special == 0) x = 0.0f;
    if (special == 1) x = -0.0f;
    if (special == 2) x = std::numeric_limits<float>::quiet_NaN();
    if (special == 3) x = std::numeric_limits<float>::infinity();
    if (special == 4) x = std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 1000);
    if (bf16_only && !std::isnan(x)) x = bf16_rne(x);
  }
  return v;
}

void run(const char* recipe_id, double elements) {
  const Recipe& recipe = *find_recipe(recipe_id);
  const int block = block_size(recipe.format);
  const int64_t chunks = static_cast<int64_t>(std::ceil(elements * scale() / kChunk));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string failure;
  auto worker = [&] {
    for (int64_t c = next++; c < chunks && !failed; c = next++) {
      Tensor x;
      x.data = chunk_values(static_cast<uint64_t>(c) * 1000003u + block, recipe.bf16_input_only);
      // Row lengths vary by chunk: ragged tails and whole-block rows.
      const int64_t row = (c % 3 == 0) ? 4096 : block * 7 + c % block;
      x.data.resize(kChunk / row * row);
      x.shape = {kChunk / row, row};
      QuantOptions o;
      o.recipe = recipe_id;
      o.tail = TailPolicy::pad;
      if (recipe.bf16_input_only) o.input_dtype = InputDType::bf16;
      o.threads = 1;
      o.impl = Impl::reference;
      const Tensor ref = fake_quant(x, o);
      const bool packed = c % 4 == 0;
      PackedTensor ref_p;
      if (packed) ref_p = quantize(x, o);
      o.impl = Impl::fast;
      const Tensor fast = fake_quant(x, o);
      std::string what;
      for (size_t i = 0; i < ref.data.size() && what.empty(); ++i) {
        if (std::bit_cast<uint32_t>(ref.data[i]) != std::bit_cast<uint32_t>(fast.data[i])) {
          char buf[200];
          std::snprintf(buf, sizeof buf, "chunk %lld value %zu: input %a, reference %a, fast %a", static_cast<long long>(c),
                        i, x.data[i], ref.data[i], fast.data[i]);
          what = buf;
        }
      }
      if (what.empty() && packed) {
        const PackedTensor fast_p = quantize(x, o);
        if (fast_p.codes != ref_p.codes || fast_p.scales != ref_p.scales)
          what = "chunk " + std::to_string(c) + ": packed bytes differ";
      }
      if (!what.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        if (failure.empty()) failure = what;
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < worker_count(); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  EXPECT_TRUE(failure.empty()) << recipe_id << " on " << simd::dispatched_target() << ": " << failure;
  std::printf("%s: %lld values compared on %s\n", recipe_id, static_cast<long long>(chunks * kChunk),
              simd::dispatched_target().c_str());
}

TEST(SimdLong, Hif4DefaultRecipeBillionValues) { run("hif4.v14", 1e9); }
TEST(SimdLong, Mxfp4DefaultRecipeBillionValues) { run("mxfp4.ocp", 1e9); }
TEST(SimdLong, Nvfp4DefaultRecipeBillionValues) { run("nvfp4.te", 1e9); }
TEST(SimdLong, HardwareRecipes) {
  run("hif4.a6", 2.5e8);
  run("mxfp4.rceil", 2.5e8);
}

}  // namespace
}  // namespace fp4emu
