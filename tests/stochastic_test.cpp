// Stochastic rounding through the library and the CLI: the worked examples
// EX-M6 / EX-N8 with given bytes and words (both byte mappings), the Philox
// element mappings, reproducibility (threads, implementation choice), the
// statistics of whole tensors, the packed metadata, and the refusals.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <vector>

#include "fp4emu/codec/philox.hpp"
#include "fp4emu/error.hpp"
#include "fp4emu/io/npy.hpp"
#include "fp4emu/io/safetensors.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "test_util.hpp"

namespace fp4emu {
namespace {

using testing::run_cli;
using testing::same_bits;
using testing::TempDir;

// One block whose scale makes y = x exactly: MXFP4 amax 6 -> X = 1 (OCP and
// rceil); NVFP4 TE with G = 2688 (S_enc = 1) and block amax 6 -> enc_b = 1.
struct ExampleCase {
  const char* args;
  int block;
};
const ExampleCase kExamples[] = {
    {"--recipe mxfp4.ocp", 32},
    {"--recipe mxfp4.rceil", 32},
    {"--recipe nvfp4.te --global-amax 2688", 16},
    {"--recipe nvfp4.te_2d --global-amax 2688", 16},
};

// docs/spec/mxfp4.md EX-M6, docs/spec/nvfp4.md EX-N8: y = fp32(2.4) rounds up
// to 3 iff r >= 0x9A. Element 1 of the block holds 2.4, so its byte is byte 1
// of the first word under the te mapping and byte 2 under ptx.
TEST(StochasticCli, WorkedExamplesEXM6AndEXN8) {
  TempDir dir;
  for (const ExampleCase& ex : kExamples) {
    std::vector<float> x(ex.block, 0.0f);
    x[0] = 6.0f;
    x[1] = 2.4f;
    const std::string in = (dir / "x.npy").string(), out = (dir / "y.npy").string();
    io::write_npy(in, io::from_f32({1, ex.block}, x));
    struct Bits {
      const char* name;
      io::Array array;
      const char* map;
      float want;
    };
    auto bytes = [&](uint8_t r) {
      io::Array a{io::DType::u8, {1, ex.block}, std::vector<uint8_t>(ex.block, 0)};
      a.bytes[1] = r;
      return a;
    };
    auto words = [&](uint32_t w) {
      io::Array a{io::DType::u32, {1, ex.block / 4}, std::vector<uint8_t>(ex.block, 0)};
      for (int b = 0; b < 4; ++b) a.bytes[b] = static_cast<uint8_t>(w >> (8 * b));
      return a;
    };
    const Bits cases[] = {
        {"uint8 0x9A", bytes(0x9A), "", 3.0f},
        {"uint8 0x99", bytes(0x99), "", 2.0f},
        {"uint32 te 0x9A", words(0x9Au << 8), "", 3.0f},
        {"uint32 te 0x99", words(0x99u << 8), "--rbits-map te", 2.0f},
        {"uint32 ptx 0x9A", words(0x9Au << 16), "--rbits-map ptx", 3.0f},
        {"uint32 ptx 0x99", words(0x99u << 16 | 0xFFu << 8), "--rbits-map ptx", 2.0f},
        {"uint32 ptx bits read as te", words(0x9Au << 16), "", 2.0f},
    };
    for (const Bits& c : cases) {
      const std::string rbits = (dir / "r.npy").string();
      io::write_npy(rbits, c.array);
      const auto r = run_cli(fmt::format("fake-quant {} {} {} --round stochastic --rbits {} {}", in, out, ex.args,
                                         rbits, c.map));
      ASSERT_EQ(r.exit_code, 0) << ex.args << " " << c.name << "\n" << r.output;
      const std::vector<float> y = io::to_f32(io::read_npy(out));
      EXPECT_EQ(y[0], 6.0f) << ex.args << " " << c.name;
      EXPECT_EQ(y[1], c.want) << ex.args << " " << c.name;
    }
  }
}

TEST(StochasticCli, QuantizeRecordsTheBitsAndRoundTrips) {
  TempDir dir;
  std::mt19937_64 rng(3);
  std::vector<float> x(4 * 64);
  for (float& v : x) v = testing::random_wide(rng);
  const std::string in = (dir / "x.npy").string();
  io::write_npy(in, io::from_f32({4, 64}, x));
  struct Case {
    const char* args;
    const char* metadata;
  };
  const Case cases[] = {
      {"--format nvfp4 --seed 7 --offset 3", "philox-te seed=7 offset=3 map=te"},
      {"--format mxfp4 --seed 18446744073709551615 --rng philox-index", "philox-index seed=18446744073709551615 offset=0"},
      {"--format hif4 --seed 1 --rng philox-te --rbits-map ptx", "philox-te seed=1 offset=0 map=ptx"},
  };
  for (const Case& c : cases) {
    const std::string q = (dir / "q.safetensors").string();
    auto r = run_cli(fmt::format("quantize {} {} {} --round stochastic", in, q, c.args));
    ASSERT_EQ(r.exit_code, 0) << c.args << "\n" << r.output;
    const io::SafetensorsFile f = io::read_safetensors(q);
    EXPECT_EQ(f.metadata.at("rounding"), "stochastic") << c.args;
    EXPECT_EQ(f.metadata.at("stochastic"), c.metadata) << c.args;
    r = run_cli(fmt::format("dequantize {} {}", q, (dir / "dq.npy").string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_cli(fmt::format("fake-quant {} {} {} --round stochastic", in, (dir / "fq.npy").string(), c.args));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto a = io::to_f32(io::read_npy(dir / "dq.npy"));
    const auto b = io::to_f32(io::read_npy(dir / "fq.npy"));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_bits(a[i], b[i])) << c.args << " element " << i;
  }
}

TEST(StochasticCli, Refusals) {
  TempDir dir;
  const std::string in = (dir / "x.npy").string(), out = (dir / "y.npy").string();
  io::write_npy(in, io::from_f32({2, 64}, std::vector<float>(128, 1.3f)));
  io::write_npy((dir / "u8.npy").string(), io::Array{io::DType::u8, {2, 64}, std::vector<uint8_t>(128, 1)});
  io::write_npy((dir / "u8_short.npy").string(), io::Array{io::DType::u8, {2, 32}, std::vector<uint8_t>(64, 1)});
  io::write_npy((dir / "u32_wrong.npy").string(), io::Array{io::DType::u32, {2, 64}, std::vector<uint8_t>(512, 1)});
  const std::string u8 = (dir / "u8.npy").string();
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"--format mxfp4 --round stochastic", "needs its random bits"},
      {"--format mxfp4 --seed 1", "--seed applies to --round stochastic only"},
      {"--format mxfp4 --round rne --rbits " + u8, "--rbits applies to --round stochastic only"},
      {"--format mxfp4 --round stochastic --seed 1 --rbits " + u8, "give one"},
      {"--format mxfp4 --round stochastic --rbits " + u8 + " --offset 2", "--offset applies to generated bits"},
      {"--format mxfp4 --round stochastic --rbits " + u8 + " --rbits-map ptx", "--rbits-map applies to uint32"},
      {"--format mxfp4 --round stochastic --seed 1 --rng philox-index --rbits-map te", "--rbits-map applies"},
      {"--format mxfp4 --round stochastic --seed 1 --rng mt19937", "--rng 'mt19937' is unknown"},
      {"--format mxfp4 --round stochastic --rbits " + (dir / "u8_short.npy").string(), "differs from the input's"},
      {"--format mxfp4 --round stochastic --rbits " + (dir / "u32_wrong.npy").string(), "should be [2, 16]"},
      {"--format mxfp4 --round stochastic --rbits " + in, "dtype f32 is not random bits"},
      {"--recipe mxfp4.ceil --round stochastic --seed 1", "does not define element rounding 'stochastic'"},
      {"--recipe mxfp4.microxcaling --round stochastic --seed 1", "does not define element rounding 'stochastic'"},
      {"--recipe nvfp4.torchao --round stochastic --seed 1", "does not define element rounding 'stochastic'"},
      {"--recipe hif4.a6 --round stochastic --seed 1", "does not define element rounding 'stochastic'"},
  };
  for (const Case& c : cases) {
    const auto r = run_cli(fmt::format("fake-quant {} {} {}", in, out, c.args));
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

// ---- library ------------------------------------------------------------------

Tensor random_tensor(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t;
  t.shape = std::move(shape);
  std::mt19937_64 rng(seed);
  t.data.resize(t.numel());
  for (float& v : t.data) v = testing::random_wide(rng);
  return t;
}

// The generated bits depend on (seed, offset, mapping, position) only: the
// automatic choice, the reference and every thread count give the same bits.
TEST(Stochastic, ReproducibleAcrossImplementationsAndThreads) {
  const Tensor x = random_tensor({6, 3, 96}, 11);
  for (const char* recipe : {"mxfp4.ocp", "mxfp4.rceil", "nvfp4.te", "nvfp4.te_2d", "hif4.v14", "hif4.v14_f64",
                             "hif4.amct"}) {
    for (int axis : {-1, 0}) {
      for (SrRng rng : {SrRng::philox_te, SrRng::philox_index}) {
        QuantOptions o;
        o.recipe = recipe;
        o.axis = axis;
        o.tail = TailPolicy::pad;  // hif4.amct refuses tails by default
        o.rounding = Rounding::stochastic;
        o.stochastic.seed = 99;
        o.stochastic.rng = rng;
        o.impl = Impl::reference;
        const Tensor ref = fake_quant(x, o);
        for (int threads : {1, 4}) {
          o.impl = Impl::automatic;
          o.threads = threads;
          const Tensor y = fake_quant(x, o);
          for (size_t i = 0; i < y.data.size(); ++i)
            ASSERT_TRUE(same_bits(y.data[i], ref.data[i])) << recipe << " axis " << axis << " element " << i;
        }
        // Another seed gives other bits (some element rounds the other way).
        o.stochastic.seed = 100;
        const Tensor other = fake_quant(x, o);
        size_t differ = 0;
        for (size_t i = 0; i < other.data.size(); ++i) differ += !same_bits(other.data[i], ref.data[i]);
        EXPECT_GT(differ, 0u) << recipe;
      }
    }
  }
}

// The mappings, element by element, from their definitions (stochastic.hpp).
TEST(Stochastic, PhiloxMappingsByDefinition) {
  const std::vector<int64_t> shape = {3, 5, 40};  // MXFP4 along axis 2: 40 -> 64 padded, 2 blocks per row
  StochasticBits bits;
  bits.seed = 0x243f6a8885a308d3ull;
  bits.offset = 12;
  std::vector<uint8_t> row(64);
  for (RbitsMap map : {RbitsMap::te, RbitsMap::ptx}) {
    bits.rng = SrRng::philox_te;
    bits.map = map;
    for (int64_t r = 0; r < 15; ++r) {
      stochastic_row_bits(bits, shape, 2, 32, r, 64, row.data());
      for (int64_t k = 0; k < 64; ++k) {
        if (k >= 40) {
          EXPECT_EQ(row[k], 0);
          continue;
        }
        const uint64_t thread = static_cast<uint64_t>(r * 2 + k / 32);
        const uint32_t word = philox_stream_word(*bits.seed, thread, bits.offset, (k % 32) / 4);
        const int byte = map == RbitsMap::te ? k % 4 : std::array<int, 4>{0, 2, 1, 3}[k % 4];
        ASSERT_EQ(row[k], static_cast<uint8_t>(word >> (8 * byte))) << r << " " << k;
      }
    }
  }
  // philox-index: the byte follows the element's row-major index, whatever the axis.
  bits.rng = SrRng::philox_index;
  std::vector<uint8_t> by_index(3 * 5 * 40);
  for (int64_t f = 0; f < 3 * 5 * 40; ++f) {
    const PhiloxCounter w = philox4x32(philox_counter(static_cast<uint64_t>(f) / 16, 12), philox_key(*bits.seed));
    by_index[f] = static_cast<uint8_t>(w[(f % 16) / 4] >> (8 * (f % 4)));
  }
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t len = shape[axis], padded = (len + 31) / 32 * 32;
    int64_t inner = 1;
    for (int d = axis + 1; d < 3; ++d) inner *= shape[d];
    std::vector<uint8_t> rb(padded);
    for (int64_t r = 0; r < 3 * 5 * 40 / len; ++r) {
      stochastic_row_bits(bits, shape, axis, 32, r, padded, rb.data());
      const int64_t o = r / inner, i = r % inner;
      for (int64_t k = 0; k < len; ++k) ASSERT_EQ(rb[k], by_index[(o * len + k) * inner + i]) << axis;
    }
  }
}

// The bytes of a part of a row (the fast path's runs) are the row's bytes at
// those positions, for every source: given bytes and words (both maps) read
// by their definition here, Philox through the row bytes, which
// PhiloxMappingsByDefinition checks element by element.
TEST(Stochastic, RunBitsAreTheRowBitsAtThosePositions) {
  for (const bool last : {false, true}) {  // a non-last axis, and the contiguous last axis
  // NVFP4 blocks along the axis of length 70 -> 80 padded, 5 blocks per row.
  const std::vector<int64_t> shape = last ? std::vector<int64_t>{3, 5, 70} : std::vector<int64_t>{3, 70, 5};
  const int axis = last ? 2 : 1, block = 16;
  const int64_t len = 70, padded = 80, inner = last ? 1 : 5, rows = 15, word_len = 18;
  std::vector<uint8_t> bytes(3 * 70 * 5);
  std::vector<uint32_t> words(3 * word_len * 5);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint32_t>(i * 0x9E3779B9u + 7);
  std::vector<StochasticBits> sources(6);
  sources[0].bytes = bytes;
  sources[1].words = words;
  sources[2].words = words;
  sources[2].map = RbitsMap::ptx;
  for (int s = 3; s < 6; ++s) {
    sources[s].seed = 0xD1B54A32D192ED03ull;
    sources[s].offset = ~uint64_t{0} - 1;  // the draw counter carries into the subsequence
  }
  sources[4].map = RbitsMap::ptx;
  sources[5].rng = SrRng::philox_index;
  for (size_t s = 0; s < sources.size(); ++s) {
    const StochasticBits& bits = sources[s];
    std::vector<uint8_t> row(padded), run(padded);
    for (int64_t r = 0; r < rows; ++r) {
      stochastic_row_bits(bits, shape, axis, block, r, padded, row.data());
      const int64_t o = r / inner, i = r % inner;
      for (int64_t k = 0; k < len && s < 3; ++k) {
        const uint8_t want =
            s == 0 ? bytes[(o * len + k) * inner + i]
                   : static_cast<uint8_t>(words[(o * word_len + k / 4) * inner + i] >>
                                          (8 * (s == 1 ? k % 4 : std::array<int, 4>{0, 2, 1, 3}[k % 4])));
        ASSERT_EQ(row[k], want) << "source " << s << " row " << r << " k " << k;
      }
      for (int64_t k = len; k < padded; ++k) ASSERT_EQ(row[k], 0) << "padding, source " << s;
      for (int64_t k0 = 0; k0 < padded; k0 += block / 2)  // run starts need not be draw starts here
        for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{16}, padded - k0}) {
          if (k0 + n > padded) continue;
          std::fill(run.begin(), run.end(), uint8_t{0xAA});
          stochastic_run_bits(bits, shape, axis, block, r, k0, n, run.data());
          for (int64_t k = 0; k < n; ++k)
            ASSERT_EQ(run[k], row[k0 + k]) << "source " << s << " row " << r << " k0 " << k0 << " n " << n;
        }
    }
  }
  }
}

// Whole tensors: E[SR(x)] = x and P(up) = floor(256 delta)/256 for values in
// every E2M1 interval, in three binades of the block scale 2^e (MXFP4 rows
// [6, x, ..., x] * 2^e: scale 2^e; NVFP4 TE with G = 2688 * 2^e and block
// amax 6 * 2^e: enc_b = 2^-e), bytes from Philox (fixed seed), on the fast
// path (bit for bit the reference's, simd_quant_test). 31 (MXFP4) or 15
// (NVFP4) draws per row, 512 rows: 5 standard errors plus the rule's bias
// below step/256.
TEST(Stochastic, TensorStatistics) {
  const double grid[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int e : {-60, 0, 40}) {
    const double unit = std::ldexp(1.0, e);
    for (const char* recipe : {"mxfp4.ocp", "nvfp4.te"}) {
      const int block = std::string(recipe).rfind("mxfp4", 0) == 0 ? 32 : 16;
      for (int i = 0; i < 7; ++i) {
        const double step = grid[i + 1] - grid[i];
        for (double pos : {0.1, 0.4, 0.5, 0.9}) {
          const float v = static_cast<float>(-(grid[i] + pos * step) * unit);  // negative: the sign is kept
          constexpr int kRows = 512;
          Tensor x;
          x.shape = {kRows, block};
          x.data.assign(kRows * block, v);
          for (int r = 0; r < kRows; ++r) x.data[r * block] = static_cast<float>(6.0 * unit);
          QuantOptions o;
          o.recipe = recipe;
          o.rounding = Rounding::stochastic;
          o.stochastic.seed = 2026;
          o.stochastic.rng = SrRng::philox_index;
          o.impl = Impl::fast;
          if (block == 16) o.global_amax = static_cast<float>(2688.0 * unit);
          const Tensor y = fake_quant(x, o);
          const float lo = static_cast<float>(-grid[i] * unit), hi = static_cast<float>(-grid[i + 1] * unit);
          double sum = 0;
          int up = 0, n = 0;
          for (int r = 0; r < kRows; ++r)
            for (int k = 1; k < block; ++k, ++n) {
              const float q = y.data[r * block + k];
              ASSERT_TRUE(q == lo || q == hi) << recipe << " 2^" << e << ": " << q;
              up += q == hi;
              sum += q / unit;
            }
          const double p = std::floor(256 * ((-v / unit - grid[i]) / step)) / 256;
          const double se = std::sqrt(std::max(p * (1 - p), 1.0 / n) / n);
          EXPECT_NEAR(static_cast<double>(up) / n, p, 5 * se) << recipe << " 2^" << e << " x=" << v;
          EXPECT_NEAR(sum / n, v / unit, step * (5 * se + 1.0 / 256)) << recipe << " 2^" << e << " x=" << v;
        }
      }
    }
  }
}

TEST(Stochastic, LibraryRefusals) {
  const Tensor x = random_tensor({2, 32}, 1);
  QuantOptions o;
  o.recipe = "mxfp4";
  o.rounding = Rounding::stochastic;
  EXPECT_THROW(fake_quant(x, o), InputError);  // no bits
  std::vector<uint8_t> bytes(63);
  o.stochastic.bytes = bytes;
  EXPECT_THROW(fake_quant(x, o), InputError);  // one byte short
  bytes.resize(64);
  o.stochastic.bytes = bytes;
  EXPECT_NO_THROW(fake_quant(x, o));
  std::vector<uint32_t> words(16);
  o.stochastic.words = words;
  EXPECT_THROW(fake_quant(x, o), InputError);  // two sources
  o.stochastic = {};
  o.stochastic.words = words;
  EXPECT_NO_THROW(fake_quant(x, o));
  o.rounding = Rounding::rne;
  EXPECT_THROW(fake_quant(x, o), InputError);  // bits without stochastic rounding
}

}  // namespace
}  // namespace fp4emu
