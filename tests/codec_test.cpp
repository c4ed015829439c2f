// The element / scale codecs (src/codec/minifloat.cpp) against the
// independent table-search oracle (tests/oracle.cpp), against the spec tables
// and against the CUDA oracle facts recorded in the specs.
//
// Exhaustive where it is cheap: every code of every format, every bf16 and
// every fp16 bit pattern as input. fp32 inputs: a seeded random sample plus
// every fp32 at and next to each grid value, midpoint and overflow point. The
// exhaustive fp32 sweeps live in tests/long/codec_exhaustive_test.cpp.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fp4emu/codec/minifloat.hpp"
#include "oracle.hpp"

namespace {

using fp4emu::MinifloatTraits;
using fp4emu::Overflow;
using fp4emu::Rounding;
using oracle::OracleFormat;

constexpr std::array<Rounding, 5> kRoundings = {Rounding::rne, Rounding::rha, Rounding::rtz,
                                                Rounding::ties_to_zero, Rounding::rtp};
constexpr std::array<Overflow, 2> kOverflows = {Overflow::saturate, Overflow::to_special};

oracle::OnOverflow to_oracle(Overflow o) {
  return o == Overflow::saturate ? oracle::OnOverflow::saturate : oracle::OnOverflow::to_special;
}

// A format under test: the codec's traits and the oracle's table for it.
struct Subject {
  const MinifloatTraits* traits;
  const OracleFormat* oracle;
};

const std::vector<Subject>& subjects() {
  static const std::vector<Subject> v = {
      {&fp4emu::kE2M1, &oracle::e2m1()}, {&fp4emu::kS1P2, &oracle::s1p2()},
      {&fp4emu::kE4M3, &oracle::e4m3()}, {&fp4emu::kUE4M3, &oracle::ue4m3()},
      {&fp4emu::kE8M0, &oracle::e8m0()}, {&fp4emu::kE6M2, &oracle::e6m2()},
      {&fp4emu::kBF16, &oracle::bf16()}, {&fp4emu::kFP16, &oracle::fp16()},
  };
  return v;
}

const Subject& subject(std::string_view name) {
  for (const Subject& s : subjects())
    if (s.traits->name == name) return s;
  throw std::logic_error("no subject " + std::string(name));
}

std::string describe(double x) {
  char buf[160];
  const float f = static_cast<float>(x);
  if (static_cast<double>(f) == x || std::isnan(x)) {
    std::snprintf(buf, sizeof buf, "%.17g (%a, fp32 0x%08" PRIX32 ")", x, x, std::bit_cast<uint32_t>(f));
  } else {
    std::snprintf(buf, sizeof buf, "%.17g (%a, not an fp32)", x, x);
  }
  return buf;
}

// Compares codec and oracle; reports the first few mismatches of a test with
// full context and counts the rest.
class Comparer {
 public:
  explicit Comparer(int max_reports = 20) : max_reports_(max_reports) {}
  ~Comparer() {
    EXPECT_EQ(mismatches_, 0u) << "mismatches out of " << checks_ << " comparisons";
  }
  void check(const Subject& s, double x, Rounding r, Overflow o) {
    ++checks_;
    const uint32_t got = fp4emu::encode(*s.traits, x, r, o);
    const uint32_t want = oracle::oracle_encode(*s.oracle, x, r, to_oracle(o));
    if (got != want) {
      if (static_cast<int>(mismatches_) < max_reports_) {
        ADD_FAILURE() << s.traits->name << " encode(" << describe(x) << ", " << fp4emu::to_string(r) << ", "
                      << (o == Overflow::saturate ? "saturate" : "to_special") << "): codec 0x" << std::hex
                      << got << ", oracle 0x" << want << std::dec;
      }
      ++mismatches_;
    }
  }
  void check_all_modes(const Subject& s, double x) {
    for (Rounding r : kRoundings)
      for (Overflow o : kOverflows) check(s, x, r, o);
  }
  uint64_t checks() const { return checks_; }

 private:
  int max_reports_;
  uint64_t checks_ = 0;
  uint64_t mismatches_ = 0;
};

bool same_double(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);  // tells -0 from +0
}

float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// ---- Independent bit tricks for the 16-bit formats ------------------------

// fp32 -> bf16 RNE by the classic integer add (as PyTorch's c10::BFloat16):
// adding 0x7FFF plus the kept LSB carries exactly when the dropped half is
// above the tie, or at the tie with an odd kept LSB.
uint16_t bf16_rne_bit_trick(float f) {
  uint32_t u = bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;  // NaN: canonical positive quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// fp32 -> fp16 RNE (F. Giesen's float_to_half_fast3_rtne): subnormals through
// one fp32 addition of a magic constant (the FPU rounds to nearest even),
// normals by integer rounding bias.
uint16_t fp16_rne_bit_trick(float f) {
  uint32_t u = bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t o;
  if (u >= (127u + 16u) << 23) {                // >= 65536: Inf, or NaN
    if (u > 0x7F800000u) return 0x7E00;         // NaN: canonical positive quiet NaN
    o = 0x7C00;
  } else if (u < (113u << 23)) {                // below 2^-14: fp16 subnormal or zero
    const float magic = f32(((127u - 15u) + (23u - 10u) + 1u) << 23);  // 0.5
    const float sum = f32(u) + magic;
    o = bits(sum) - bits(magic);
  } else {
    const uint32_t mant_odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu;
    u += mant_odd;
    o = u >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

// ---- Input generators ------------------------------------------------------

// Every fp32 at and within 2 ulps of each oracle boundary (grid values,
// midpoints, overflow point), both signs. Boundaries that are not fp32 values
// (none for these formats, but cheap to handle) contribute both fp32
// neighbours.
std::vector<float> fp32_boundary_inputs(const OracleFormat& f) {
  std::vector<float> out;
  for (double b : oracle::oracle_boundaries(f)) {
    if (b > std::numeric_limits<float>::max()) {
      // next_above_max = 2^128 for BF16/E8M0: its fp32 neighbourhood is the
      // top of the finite range and +Inf.
      b = std::numeric_limits<float>::infinity();
    }
    const float lo = static_cast<float>(b);
    std::vector<float> centres = {lo};
    if (static_cast<double>(lo) != b) centres.push_back(std::nextafter(lo, b < lo ? -INFINITY : INFINITY));
    for (float c : centres) {
      for (int k = -2; k <= 2; ++k) {
        const int64_t u = static_cast<int64_t>(bits(c)) + k;
        if (u < 0 || u > 0x7F800000) continue;  // stay in [+0, +Inf]
        out.push_back(f32(static_cast<uint32_t>(u)));
        out.push_back(-f32(static_cast<uint32_t>(u)));
      }
    }
  }
  return out;
}

// The same in double: the boundary, 1 and 2 double ulps away, and points
// 2^-30 relative away (inputs no fp32 holds: the codec must not round twice).
std::vector<double> double_boundary_inputs(const OracleFormat& f) {
  std::vector<double> out;
  for (double b : oracle::oracle_boundaries(f)) {
    double up = b, down = b;
    std::vector<double> near = {b, b * (1 + 0x1p-30), b * (1 - 0x1p-30)};
    for (int k = 0; k < 2; ++k) {
      up = std::nextafter(up, INFINITY);
      down = std::nextafter(down, -INFINITY);
      near.push_back(up);
      near.push_back(down);
    }
    for (double x : near) {
      out.push_back(x);
      out.push_back(-x);
    }
  }
  return out;
}

std::vector<double> special_inputs() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0,
                           -0.0,
                           inf,
                           -inf,
                           std::numeric_limits<double>::quiet_NaN(),
                           -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::signaling_NaN(),
                           std::bit_cast<double>(uint64_t{0x7FF0000000000001}),
                           std::bit_cast<double>(uint64_t{0xFFF8000000000123}),
                           std::numeric_limits<double>::max(),
                           -std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::denorm_min(),
                           -std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::min(),
                           std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::min(),
                           std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::denorm_min(),
                           0x1p-127,
                           0x1p-128,
                           0x1p128,
                           0x1p1000,
                           -0x1p-1000};
  const float fnan_payload = f32(0x7FA12345u);  // fp32 signalling NaN with payload
  v.push_back(fnan_payload);
  v.push_back(-f32(0x7FC00001u));
  return v;
}

// ---- Oracle self-checks (the oracle against the spec tables) ---------------

TEST(OracleTest, GridSizesAndCodesMatchSpecs) {
  EXPECT_EQ(oracle::e2m1().grid.size(), 8u);   // 0, 0.5, ..., 6
  EXPECT_EQ(oracle::s1p2().grid.size(), 8u);   // 0, 0.25, ..., 1.75
  EXPECT_EQ(oracle::e4m3().grid.size(), 127u); // 0x00..0x7E
  EXPECT_EQ(oracle::ue4m3().grid.size(), 127u);
  EXPECT_EQ(oracle::e8m0().grid.size(), 255u);   // 0x00..0xFE
  EXPECT_EQ(oracle::e6m2().grid.size(), 255u);   // 0x00..0xFE
  EXPECT_EQ(oracle::bf16().grid.size(), 0x7F80u);
  EXPECT_EQ(oracle::fp16().grid.size(), 0x7C00u);
  EXPECT_EQ(oracle::e2m1().max_value, 6.0);
  EXPECT_EQ(oracle::s1p2().max_value, 1.75);
  EXPECT_EQ(oracle::e4m3().max_value, 448.0);
  EXPECT_EQ(oracle::e8m0().max_value, 0x1p127);
  EXPECT_EQ(oracle::e6m2().max_value, 49152.0);
  EXPECT_EQ(oracle::bf16().max_value, f32(0x7F7F0000u));
  EXPECT_EQ(oracle::fp16().max_value, 65504.0);
  EXPECT_EQ(oracle::e8m0().grid.front(), 0x1p-127);
  EXPECT_EQ(oracle::e6m2().grid.front(), 0x1p-48);
  // Every grid value encodes to its own code under every rounding.
  for (const OracleFormat* f : oracle::all_formats())
    for (size_t i = 0; i < f->grid.size(); ++i)
      for (Rounding r : kRoundings)
        ASSERT_EQ(oracle::oracle_encode(*f, f->grid[i], r, oracle::OnOverflow::to_special), f->grid_code[i])
            << f->name << " " << f->grid[i];
}

// ---- Decoding ---------------------------------------------------------------

TEST(CodecDecode, EveryCodeMatchesOracle) {
  for (const Subject& s : subjects()) {
    const OracleFormat& f = *s.oracle;
    ASSERT_EQ(fp4emu::code_bits(*s.traits), f.code_bits) << f.name;
    EXPECT_EQ(fp4emu::max_finite_code(*s.traits), f.max_code) << f.name;
    if (f.has_nan) {
      EXPECT_EQ(fp4emu::nan_code(*s.traits), f.nan_code) << f.name;
    }
    for (uint32_t c = 0; c < f.num_codes(); ++c) {
      const double want = oracle::oracle_decode(f, c);
      ASSERT_TRUE(same_double(fp4emu::decode(*s.traits, c), want)) << f.name << " code 0x" << std::hex << c;
      ASSERT_EQ(fp4emu::is_nan_code(*s.traits, c), std::isnan(want)) << f.name << " code 0x" << std::hex << c;
    }
  }
}

TEST(CodecDecode, NamedDecodersMatchOracle) {
  for (uint32_t c = 0; c < 256; ++c) {
    const uint8_t b = static_cast<uint8_t>(c);
    // Element decoders read the low nibble; ue4m3 ignores bit 7.
    ASSERT_TRUE(same_double(fp4emu::e2m1_decode(b), oracle::oracle_decode(oracle::e2m1(), c & 0xF))) << c;
    ASSERT_TRUE(same_double(fp4emu::s1p2_decode(b), oracle::oracle_decode(oracle::s1p2(), c & 0xF))) << c;
    ASSERT_TRUE(same_double(fp4emu::e4m3_decode(b), oracle::oracle_decode(oracle::e4m3(), c))) << c;
    ASSERT_TRUE(same_double(fp4emu::ue4m3_decode(b), oracle::oracle_decode(oracle::ue4m3(), c & 0x7F))) << c;
    ASSERT_TRUE(same_double(fp4emu::e8m0_decode(b), oracle::oracle_decode(oracle::e8m0(), c))) << c;
    ASSERT_TRUE(same_double(fp4emu::e6m2_decode(b), oracle::oracle_decode(oracle::e6m2(), c))) << c;
  }
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const uint16_t h = static_cast<uint16_t>(c);
    ASSERT_TRUE(same_double(fp4emu::bf16_decode(h), oracle::oracle_decode(oracle::bf16(), c))) << c;
    ASSERT_TRUE(same_double(fp4emu::fp16_decode(h), oracle::oracle_decode(oracle::fp16(), c))) << c;
  }
}

TEST(CodecDecode, SpecTables) {
  // docs/spec/mxfp4.md §1.1
  const double e2m1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (uint8_t c = 0; c < 16; ++c) EXPECT_TRUE(same_double(fp4emu::e2m1_decode(c), e2m1[c])) << int(c);
  // docs/spec/hif4.md §1
  for (uint8_t c = 0; c < 16; ++c) {
    const double v = (c & 7) / 4.0;
    EXPECT_TRUE(same_double(fp4emu::s1p2_decode(c), (c & 8) ? -v : v)) << int(c);
  }
  // docs/spec/hif4.md §2 examples
  const std::pair<uint8_t, double> e6m2[] = {{0xC0, 1.0},     {0xC1, 1.25},    {0xC2, 1.5},   {0xC3, 1.75},
                                             {0xBF, 0.875},   {0xBE, 0.75},    {0x00, 0x1p-48}, {0x04, 0x1p-47},
                                             {0xFC, 32768},   {0xFD, 40960},   {0xFE, 49152}};
  for (auto [c, v] : e6m2) EXPECT_EQ(fp4emu::e6m2_decode(c), v) << int(c);
  EXPECT_TRUE(std::isnan(fp4emu::e6m2_decode(0xFF)));
  // docs/spec/mxfp4.md §2: 0x00 = 2^-127 = fp32 subnormal 0x00400000; 0xFE = 2^127.
  EXPECT_EQ(bits(fp4emu::e8m0_decode(0x00)), 0x00400000u);
  EXPECT_EQ(fp4emu::e8m0_decode(0x7F), 1.0f);
  EXPECT_EQ(bits(fp4emu::e8m0_decode(0xFE)), 0x7F000000u);
  EXPECT_TRUE(std::isnan(fp4emu::e8m0_decode(0xFF)));
  // docs/spec/nvfp4.md §2.1 reference codes
  const std::pair<uint8_t, double> ue4m3[] = {{0x01, 0x1p-9},      {0x05, 0.009765625}, {0x07, 0.013671875},
                                              {0x08, 0.015625},    {0x20, 0.125},       {0x38, 1.0},
                                              {0x3D, 1.625},       {0x40, 2.0},         {0x4B, 5.5},
                                              {0x78, 256},         {0x7E, 448}};
  for (auto [c, v] : ue4m3) {
    EXPECT_EQ(fp4emu::ue4m3_decode(c), v) << int(c);
    EXPECT_EQ(fp4emu::e4m3_decode(c), v) << int(c);
    EXPECT_EQ(fp4emu::e4m3_decode(c | 0x80), -v) << int(c);
  }
  EXPECT_TRUE(std::isnan(fp4emu::ue4m3_decode(0x7F)));
  EXPECT_TRUE(std::isnan(fp4emu::e4m3_decode(0x7F)));
  EXPECT_TRUE(std::isnan(fp4emu::e4m3_decode(0xFF)));
}

// ---- Round trips --------------------------------------------------------------

TEST(CodecRoundTrip, EveryCodeReencodesToItself) {
  for (const Subject& s : subjects()) {
    const OracleFormat& f = *s.oracle;
    for (uint32_t c = 0; c < f.num_codes(); ++c) {
      const double v = fp4emu::decode(*s.traits, c);
      for (Rounding r : kRoundings) {
        for (Overflow o : kOverflows) {
          const uint32_t back = fp4emu::encode(*s.traits, v, r, o);
          if (std::isnan(v)) {
            ASSERT_TRUE(fp4emu::is_nan_code(*s.traits, back)) << f.name << " 0x" << std::hex << c;
          } else {
            ASSERT_EQ(back, c) << f.name << " 0x" << std::hex << c << " " << fp4emu::to_string(r);
          }
        }
      }
    }
  }
}

// ---- Against the oracle ---------------------------------------------------------

TEST(CodecOracle, EveryBf16InputEveryFormat) {
  Comparer cmp;
  for (const Subject& s : subjects())
    for (uint32_t h = 0; h < 0x10000; ++h) cmp.check_all_modes(s, f32(h << 16));
}

TEST(CodecOracle, EveryFp16InputEveryFormat) {
  Comparer cmp;
  const OracleFormat& fp16 = oracle::fp16();
  for (const Subject& s : subjects())
    for (uint32_t h = 0; h < 0x10000; ++h) cmp.check_all_modes(s, oracle::oracle_decode(fp16, h));
}

TEST(CodecOracle, Fp32AtAndNextToEveryBoundary) {
  for (const Subject& s : subjects()) {
    SCOPED_TRACE(s.oracle->name);
    Comparer cmp;
    // Each format's own boundaries, plus those of the 4-bit element formats
    // (cheap, and they exercise other formats at interesting points).
    std::vector<float> in = fp32_boundary_inputs(*s.oracle);
    for (const OracleFormat* other : {&oracle::e2m1(), &oracle::s1p2()}) {
      const std::vector<float> more = fp32_boundary_inputs(*other);
      in.insert(in.end(), more.begin(), more.end());
    }
    for (float x : in) cmp.check_all_modes(s, x);
  }
}

TEST(CodecOracle, DoubleInputsNextToEveryBoundary) {
  for (const Subject& s : subjects()) {
    Comparer cmp;
    for (double x : double_boundary_inputs(*s.oracle)) cmp.check_all_modes(s, x);
  }
}

TEST(CodecOracle, SpecialInputs) {
  Comparer cmp;
  for (const Subject& s : subjects())
    for (double x : special_inputs()) cmp.check_all_modes(s, x);
}

// fp32 inputs drawn from a seeded generator: a quarter uniform over all bit
// patterns (every binade, Inf and NaN included), a quarter with full random
// mantissas in binades 2^-52..2^20 (the ranges of every format but BF16/E8M0,
// whose range the uniform quarter covers), half with mantissas cut to a random
// number of leading bits (these land on grid values and ties far more often).
// Each sample goes through every format with one (rounding, overflow) pair,
// cycling through all ten.
TEST(CodecOracle, RandomFp32Sample) {
  constexpr uint64_t kSeed = 0xF94E5EEDull;
  constexpr int kSamples = 3'000'000;
  std::mt19937_64 rng(kSeed);
  Comparer cmp;
  for (int i = 0; i < kSamples; ++i) {
    const uint64_t r = rng();
    uint32_t u;
    switch (r & 3) {
      case 0: u = static_cast<uint32_t>(r >> 32); break;
      case 1:
      default: {
        const uint32_t sign = static_cast<uint32_t>(r >> 2) & 1u;
        const uint32_t exp = 127u - 52u + static_cast<uint32_t>((r >> 3) % 73);  // 2^-52 .. 2^20
        uint32_t man = static_cast<uint32_t>(r >> 32) & 0x7FFFFFu;
        if ((r & 3) != 1) {
          const int keep = static_cast<int>((r >> 10) % 24);  // leading mantissa bits kept
          man &= ~((1u << (23 - keep)) - 1u);
          if ((r >> 15) & 1) man |= (1u << (22 - std::min(keep, 22)));  // put a tie bit after them
        }
        u = (sign << 31) | (exp << 23) | man;
        break;
      }
    }
    const Rounding rd = kRoundings[(i / 2) % kRoundings.size()];
    const Overflow ov = kOverflows[i % 2];
    for (const Subject& s : subjects()) cmp.check(s, f32(u), rd, ov);
  }
  EXPECT_GT(cmp.checks(), 20'000'000u);
}

// ---- CUDA oracle facts (docs/spec/mxfp4.md §1.3, §2.1, §5.2-5.4, §8.0; docs/spec/nvfp4.md §2.1) ---

struct Fact {
  const char* format;
  double x;
  Rounding r;
  Overflow o;
  uint32_t expected;
  const char* source;
};

constexpr Overflow SAT = Overflow::saturate;
constexpr Overflow NOSAT = Overflow::to_special;
constexpr Rounding RN = Rounding::rne;
constexpr Rounding RZ = Rounding::rtz;
constexpr Rounding RP = Rounding::rtp;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<Fact>& facts() {
  static const std::vector<Fact> v = {
      // E2M1, __nv_cvt_float_to_fp4 (docs/spec/mxfp4.md §1.3, §8.0)
      {"e2m1", 0.0, RN, SAT, 0x0, "§1.3 +0"},
      {"e2m1", -0.0, RN, SAT, 0x8, "§1.3 -0"},
      {"e2m1", -0.0, RZ, SAT, 0x8, "§1.3 -0 RZ"},
      {"e2m1", -0.1f, RN, SAT, 0x8, "§1.3 underflow keeps sign"},
      {"e2m1", -0.25, RN, SAT, 0x8, "§1.3"},
      {"e2m1", -0.25, RZ, SAT, 0x8, "§1.3"},
      {"e2m1", 0.25, RN, SAT, 0x0, "§1.3 tie to even"},
      {"e2m1", 0.25, RZ, SAT, 0x0, "§1.3"},
      {"e2m1", 0.2500001f, RN, SAT, 0x1, "§1.3"},
      {"e2m1", 0.2500001f, RZ, SAT, 0x0, "§1.3"},
      {"e2m1", 0.75, RN, SAT, 0x2, "§8.0"},
      {"e2m1", 1.25, RN, SAT, 0x2, "§8.0"},
      {"e2m1", 1.75, RN, SAT, 0x4, "§8.0"},
      {"e2m1", 2.5, RN, SAT, 0x4, "§8.0"},
      {"e2m1", 3.5, RN, SAT, 0x6, "§8.0"},
      {"e2m1", 5.0, RN, SAT, 0x6, "§8.0"},
      {"e2m1", 5.0, RZ, SAT, 0x6, "§1.3"},
      {"e2m1", 5.0001f, RN, SAT, 0x7, "§8.0"},
      {"e2m1", 5.0001f, RZ, SAT, 0x6, "§8.0"},
      {"e2m1", 7.0, RN, SAT, 0x7, "§8.0"},
      {"e2m1", 7.0, RZ, SAT, 0x7, "§1.3"},
      {"e2m1", 1e30f, RN, SAT, 0x7, "§1.3"},
      {"e2m1", 1e30f, RZ, SAT, 0x7, "§1.3"},
      {"e2m1", kInf, RN, SAT, 0x7, "§8.0"},
      {"e2m1", kInf, RZ, SAT, 0x7, "§1.3"},
      {"e2m1", -kInf, RN, SAT, 0xF, "§8.0"},
      {"e2m1", kNaN, RN, SAT, 0x7, "§8.0 NaN -> +MAXNORM"},
      {"e2m1", -kNaN, RN, SAT, 0x7, "§8.0 NaN -> +MAXNORM"},
      {"e2m1", kNaN, RZ, SAT, 0x7, "§1.3"},
      {"e2m1", 0.75, RZ, SAT, 0x1, "§8.0"},
      {"e2m1", 1.75, RZ, SAT, 0x3, "§8.0"},
      {"e2m1", 3.5, RZ, SAT, 0x5, "§8.0"},
      // E2M1 other element roundings (docs/spec/mxfp4.md §5.2, §5.4): half away, ties to zero
      {"e2m1", 0.25, Rounding::rha, SAT, 0x1, "§5.2"},
      {"e2m1", 1.25, Rounding::rha, SAT, 0x3, "§5.2"},
      {"e2m1", 2.5, Rounding::rha, SAT, 0x5, "§5.2"},
      {"e2m1", 5.0, Rounding::rha, SAT, 0x7, "§5.2"},
      {"e2m1", 0.75, Rounding::rha, SAT, 0x2, "§5.2"},
      {"e2m1", -1.25, Rounding::rha, SAT, 0xB, "EX-M1"},
      {"e2m1", 0.75, Rounding::ties_to_zero, SAT, 0x1, "§5.4"},
      {"e2m1", 1.75, Rounding::ties_to_zero, SAT, 0x3, "§5.4"},
      {"e2m1", 3.5, Rounding::ties_to_zero, SAT, 0x5, "§5.4"},
      {"e2m1", 2.5, Rounding::ties_to_zero, SAT, 0x4, "§5.4"},
      {"e2m1", -0.25, Rounding::ties_to_zero, SAT, 0x8, "header: rounds to zero keeps sign (ggml's +0 is a recipe quirk)"},
      // E8M0, __nv_cvt_float_to_e8m0 (docs/spec/mxfp4.md §2.1)
      {"e8m0", 0.0, RZ, SAT, 0x00, "§2.1"},
      {"e8m0", 0.0, RP, SAT, 0x00, "§2.1"},
      {"e8m0", -0.0, RP, SAT, 0x00, "§2.1"},
      {"e8m0", 1.0, RZ, SAT, 0x7F, "§2.1"},
      {"e8m0", 1.0, RP, SAT, 0x7F, "§2.1"},
      {"e8m0", 1.5, RZ, SAT, 0x7F, "§2.1"},
      {"e8m0", 1.5, RP, SAT, 0x80, "§2.1"},
      {"e8m0", -1.5, RP, SAT, 0x80, "§2.1 sign ignored"},
      {"e8m0", 0.75, RZ, SAT, 0x7E, "§2.1"},
      {"e8m0", 0.75, RP, SAT, 0x7F, "§2.1"},
      {"e8m0", 1.0f / 6.0f, RZ, SAT, 0x7C, "§2.1"},
      {"e8m0", 1.0f / 6.0f, RP, SAT, 0x7D, "§2.1"},
      {"e8m0", 5.9e-39f, RZ, SAT, 0x00, "§2.1"},
      {"e8m0", 5.9e-39f, RP, SAT, 0x01, "§2.1"},
      {"e8m0", 0x1p-127, RP, SAT, 0x00, "§2.1"},
      {"e8m0", 0x1p-130, RP, SAT, 0x00, "§2.1 below 2^-127"},
      {"e8m0", 0x1p-149, RZ, SAT, 0x00, "§2.1 below 2^-127"},
      {"e8m0", 3e38f, RZ, SAT, 0xFE, "§2.1"},
      {"e8m0", 3e38f, RP, SAT, 0xFE, "§2.1"},
      {"e8m0", 3e38f, RP, NOSAT, 0xFF, "§2.1"},
      {"e8m0", 3e38f, RZ, NOSAT, 0xFE, "§2.1 (RZ result 2^127 is finite)"},
      {"e8m0", kInf, RZ, SAT, 0xFE, "§2.1"},
      {"e8m0", kInf, RP, SAT, 0xFE, "§2.1"},
      {"e8m0", kInf, RP, NOSAT, 0xFF, "§2.1"},
      {"e8m0", -kInf, RZ, NOSAT, 0xFF, "§2.1"},
      {"e8m0", kNaN, RZ, SAT, 0xFF, "§2.1"},
      {"e8m0", kNaN, RP, SAT, 0xFF, "§2.1"},
      // E8M0 RNE (docs/spec/mxfp4.md §2.2, ml_dtypes float8_e8m0fnu): the implicit bit
      // counts as odd, so a significand >= 1.5 rounds up.
      {"e8m0", 1.5, RN, SAT, 0x80, "§2.2 ml_dtypes"},
      {"e8m0", 3.0, RN, SAT, 0x81, "§2.2 ml_dtypes"},
      {"e8m0", 1.4999999, RN, SAT, 0x7F, "§2.2 ml_dtypes"},
      {"e8m0", 0x1.8p-127, RN, SAT, 0x01, "§2.2 ml_dtypes"},
      {"e8m0", 0x1.8p127, RN, SAT, 0xFE, "§2.2 rounds to 2^128: saturate"},
      {"e8m0", 0x1.8p127, RN, NOSAT, 0xFF, "§2.2 rounds to 2^128: NaN"},
      {"e8m0", 1.5, Rounding::ties_to_zero, SAT, 0x7F, "ties toward zero"},
      {"e8m0", 1.5, Rounding::rha, SAT, 0x80, "ties away"},
      // E4M3, __nv_cvt_float_to_fp8(x, sat, __NV_E4M3), RNE (docs/spec/nvfp4.md §2.1)
      {"e4m3", 0x1p-10, RN, SAT, 0x00, "§2.1 tie to 0"},
      {"e4m3", -0x1p-10, RN, SAT, 0x80, "§2.1 -> -0"},
      {"e4m3", 0x1p-11, RN, SAT, 0x00, "§2.1"},
      {"e4m3", std::nextafter(0x1p-10f, 1.0f), RN, SAT, 0x01, "§2.1 just above the tie"},
      {"e4m3", 448, RN, SAT, 0x7E, "§2.1"},
      {"e4m3", 449, RN, SAT, 0x7E, "§2.1"},
      {"e4m3", 464, RN, SAT, 0x7E, "§2.1 tie to even"},
      {"e4m3", 464, RN, NOSAT, 0x7E, "§2.1 tie to even"},
      {"e4m3", -464, RN, NOSAT, 0xFE, "§2.1 tie to even"},
      {"e4m3", std::nextafter(464.0f, 1000.0f), RN, SAT, 0x7E, "§2.1"},
      {"e4m3", std::nextafter(464.0f, 1000.0f), RN, NOSAT, 0x7F, "§2.1"},
      {"e4m3", 470, RN, SAT, 0x7E, "§2.1"},
      {"e4m3", 470, RN, NOSAT, 0x7F, "§2.1"},
      {"e4m3", -470, RN, SAT, 0xFE, "§2.1"},
      {"e4m3", -470, RN, NOSAT, 0xFF, "§2.1"},
      {"e4m3", kInf, RN, SAT, 0x7E, "§2.1"},
      {"e4m3", -kInf, RN, SAT, 0xFE, "§2.1"},
      {"e4m3", kInf, RN, NOSAT, 0x7F, "§2.1"},
      {"e4m3", -kInf, RN, NOSAT, 0xFF, "§2.1"},
      {"e4m3", kNaN, RN, SAT, 0x7F, "§2.1"},
      {"e4m3", -kNaN, RN, SAT, 0x7F, "§2.1 float NaN canonicalised positive"},
      {"e4m3", -kNaN, RN, NOSAT, 0x7F, "§2.1 float NaN canonicalised positive"},
      {"e4m3", 1.0, RN, SAT, 0x38, "§2.1"},
      {"e4m3", 5.5, RN, SAT, 0x4B, "§2.1"},
      {"e4m3", 0.013671875, RN, SAT, 0x07, "§2.1"},
      // UE4M3: the same with the sign bit zero
      {"ue4m3", 0x1p-10, RN, SAT, 0x00, "§2.1"},
      {"ue4m3", 464, RN, SAT, 0x7E, "§2.1"},
      {"ue4m3", 470, RN, SAT, 0x7E, "§2.1"},
      {"ue4m3", 470, RN, NOSAT, 0x7F, "§2.1"},
      {"ue4m3", kNaN, RN, SAT, 0x7F, "§2.1"},
      {"ue4m3", -1.0, RN, SAT, 0x38, "header: sign ignored"},
      {"ue4m3", 1.625, RN, SAT, 0x3D, "§2.1"},
      {"ue4m3", -1.01, RP, SAT, 0x39, "header: sign ignored, so RP rounds the magnitude up"},
      {"e4m3", -1.01, RP, SAT, 0xB8, "signed: RP of a negative truncates the magnitude"},
      // E6M2 (docs/spec/hif4.md §2)
      {"e6m2", 1.0, RN, SAT, 0xC0, "§2"},
      {"e6m2", 49152, RN, SAT, 0xFE, "§2"},
      {"e6m2", 53248, RN, SAT, 0xFE, "§2 tie 49152/57344 to even"},
      {"e6m2", 60000, RN, SAT, 0xFE, "§2 saturate"},
      {"e6m2", 60000, RN, NOSAT, 0xFF, "§2"},
      {"e6m2", 0.0, RN, SAT, 0x00, "§2 no zero"},
      {"e6m2", 0x1p-60, RN, SAT, 0x00, "§2 no zero"},
      {"e6m2", 0x1p-47, RN, SAT, 0x04, "§2"},
      {"e6m2", 1.125, RN, SAT, 0xC0, "tie 1/1.25 to even"},
      {"e6m2", 1.375, RN, SAT, 0xC2, "tie 1.25/1.5 to even"},
      // S1P2 (docs/spec/hif4.md §1): RNE ties to the even code
      {"s1p2", 0.125, RN, SAT, 0x0, "§1"},
      {"s1p2", 0.375, RN, SAT, 0x2, "§1"},
      {"s1p2", 0.375, Rounding::rha, SAT, 0x2, "§1"},
      {"s1p2", 0.625, RN, SAT, 0x2, "§1"},
      {"s1p2", 0.625, Rounding::rha, SAT, 0x3, "§1"},
      {"s1p2", 1.875, RN, SAT, 0x7, "§1 saturate"},
      {"s1p2", 100, RN, NOSAT, 0x7, "§1 no specials"},
      {"s1p2", kNaN, RN, SAT, 0x7, "header: NaN -> +max"},
      {"s1p2", -kNaN, RN, SAT, 0x7, "header: NaN -> +max"},
      // BF16 / FP16 (IEEE)
      {"bf16", 0x1p128, RN, NOSAT, 0x7F80, "finite double beyond the range -> Inf"},
      {"bf16", 0x1p128, RN, SAT, 0x7F7F, "finite double beyond the range, saturated"},
      {"bf16", kInf, RN, SAT, 0x7F80, "Inf input stays Inf"},
      {"bf16", -kInf, RZ, SAT, 0xFF80, "Inf input stays Inf"},
      {"bf16", f32(0x7F7F8000u), RN, NOSAT, 0x7F80, "tie above max -> even = Inf"},
      {"bf16", f32(0x7F7F8000u), RZ, NOSAT, 0x7F7F, "rtz overflow -> max"},
      {"bf16", -static_cast<double>(f32(0x7F7F8000u)), RP, NOSAT, 0xFF7F, "rtp negative overflow -> -max"},
      {"bf16", kNaN, RN, NOSAT, 0x7FC0, "NaN"},
      {"bf16", -kNaN, RN, NOSAT, 0x7FC0, "NaN canonical positive"},
      {"fp16", 65519.99, RN, NOSAT, 0x7BFF, "below the tie"},
      {"fp16", 65520, RN, NOSAT, 0x7C00, "tie to even = Inf"},
      {"fp16", 65520, RN, SAT, 0x7BFF, "saturate"},
      {"fp16", 0x1p-25, RN, NOSAT, 0x0000, "tie to 0"},
      {"fp16", 0x1.8p-25, RN, NOSAT, 0x0001, ""},
      {"fp16", -kNaN, RN, NOSAT, 0x7E00, "NaN canonical positive"},
  };
  return v;
}

void check_facts(bool use_oracle) {
  for (const Fact& fact : facts()) {
    const Subject& s = subject(fact.format);
    const uint32_t got = use_oracle ? oracle::oracle_encode(*s.oracle, fact.x, fact.r, to_oracle(fact.o))
                                    : fp4emu::encode(*s.traits, fact.x, fact.r, fact.o);
    EXPECT_EQ(got, fact.expected) << fact.format << " " << describe(fact.x) << " " << fp4emu::to_string(fact.r)
                                  << (fact.o == SAT ? " satfinite" : " nosat") << " [" << fact.source << "]";
  }
}

TEST(OracleTest, CudaAndSpecFacts) { check_facts(true); }
TEST(CodecCuda, CudaAndSpecFacts) { check_facts(false); }

TEST(CodecCuda, E2M1ThresholdTable) {
  // docs/spec/mxfp4.md §1.2 as intervals: (lower, lower inclusive, code)
  struct Row { double lo; bool lo_incl; uint8_t code; };
  const Row rows[] = {{0, true, 0}, {0.25, false, 1}, {0.75, true, 2}, {1.25, false, 3},
                      {1.75, true, 4}, {2.5, false, 5}, {3.5, true, 6}, {5, false, 7}};
  // Probe every fp32 multiple of 2^-10 in [0, 8] and both fp32 neighbours of
  // every threshold.
  auto expect = [&](float y) {
    uint8_t want = 0;
    for (const Row& row : rows)
      if (y > row.lo || (row.lo_incl && y == row.lo)) want = row.code;
    EXPECT_EQ(fp4emu::e2m1_encode(y, RN), want) << y;
    EXPECT_EQ(fp4emu::e2m1_encode(-y, RN), want | 8) << -y;
  };
  for (int i = 0; i <= 8 * 1024; ++i) expect(i / 1024.0f);
  for (const Row& row : rows) {
    const float t = static_cast<float>(row.lo);
    expect(std::nextafter(t, 0.0f));
    expect(std::nextafter(t, 100.0f));
  }
}

// ---- Named wrappers -------------------------------------------------------------

TEST(CodecNamed, WrappersMatchOracleOnEveryBf16AndFp16Input) {
  uint64_t mismatches = 0;
  auto test = [&](double x) {
    for (Rounding r : kRoundings) {
      auto want = [&](const OracleFormat& f, oracle::OnOverflow o) { return oracle::oracle_encode(f, x, r, o); };
      const auto sat = oracle::OnOverflow::saturate;
      const auto spec = oracle::OnOverflow::to_special;
      mismatches += fp4emu::e2m1_encode(x, r) != want(oracle::e2m1(), sat);
      mismatches += fp4emu::s1p2_encode(x, r) != want(oracle::s1p2(), sat);
      mismatches += fp4emu::bf16_encode(x, r) != want(oracle::bf16(), spec);
      mismatches += fp4emu::fp16_encode(x, r) != want(oracle::fp16(), spec);
      for (Overflow o : kOverflows) {
        mismatches += fp4emu::e4m3_encode(x, r, o) != want(oracle::e4m3(), to_oracle(o));
        mismatches += fp4emu::ue4m3_encode(x, r, o) != want(oracle::ue4m3(), to_oracle(o));
        mismatches += fp4emu::e8m0_encode(x, r, o) != want(oracle::e8m0(), to_oracle(o));
        mismatches += fp4emu::e6m2_encode(x, r, o) != want(oracle::e6m2(), to_oracle(o));
      }
    }
  };
  for (uint32_t h = 0; h < 0x10000; ++h) {
    test(f32(h << 16));
    test(oracle::oracle_decode(oracle::fp16(), h));
  }
  EXPECT_EQ(mismatches, 0u);
}

// ---- bf16_rne / fp16_rne -----------------------------------------------------------

// fp32 inputs for the 16-bit roundings: every fp32 within 2 ulps of every
// bf16 / fp16 value and midpoint, and a seeded uniform sample of bit patterns.
std::vector<float> sixteen_bit_inputs() {
  std::vector<float> in = fp32_boundary_inputs(oracle::bf16());
  const std::vector<float> h = fp32_boundary_inputs(oracle::fp16());
  in.insert(in.end(), h.begin(), h.end());
  std::mt19937 rng(20240607);
  for (int i = 0; i < 2'000'000; ++i) in.push_back(f32(static_cast<uint32_t>(rng())));
  for (double x : special_inputs()) in.push_back(static_cast<float>(x));
  return in;
}

TEST(Codec16, Bf16RneMatchesBitTrickAndOracle) {
  uint64_t bad = 0;
  for (float x : sixteen_bit_inputs()) {
    const uint16_t trick = bf16_rne_bit_trick(x);
    const uint16_t code = fp4emu::bf16_encode(x, RN);
    const float widened = fp4emu::bf16_rne(x);
    const uint32_t want = oracle::oracle_encode(oracle::bf16(), x, RN, oracle::OnOverflow::to_special);
    const bool ok = code == trick && code == want &&
                    same_double(widened, oracle::oracle_decode(oracle::bf16(), want));
    if (!ok && bad++ < 10)
      ADD_FAILURE() << describe(x) << ": codec 0x" << std::hex << code << " trick 0x" << trick << " oracle 0x"
                    << want;
  }
  EXPECT_EQ(bad, 0u);
}

TEST(Codec16, Fp16RneMatchesBitTrickAndOracle) {
  uint64_t bad = 0;
  for (float x : sixteen_bit_inputs()) {
    const uint16_t trick = fp16_rne_bit_trick(x);
    const uint16_t code = fp4emu::fp16_encode(x, RN);
    const float widened = fp4emu::fp16_rne(x);
    const uint32_t want = oracle::oracle_encode(oracle::fp16(), x, RN, oracle::OnOverflow::to_special);
    const bool ok = code == trick && code == want &&
                    same_double(widened, oracle::oracle_decode(oracle::fp16(), want));
    if (!ok && bad++ < 10)
      ADD_FAILURE() << describe(x) << ": codec 0x" << std::hex << code << " trick 0x" << trick << " oracle 0x"
                    << want;
  }
  EXPECT_EQ(bad, 0u);
}

TEST(Codec16, IsBf16Exact) {
  for (uint32_t h = 0; h < 0x10000; ++h) ASSERT_TRUE(fp4emu::is_bf16_exact(f32(h << 16))) << h;
  std::mt19937 rng(7);
  for (int i = 0; i < 1'000'000; ++i) {
    const float x = f32(static_cast<uint32_t>(rng()));
    // Exact iff rounding toward zero to bf16 gives x back (NaN/Inf count as exact).
    const double back = oracle::oracle_decode(
        oracle::bf16(), oracle::oracle_encode(oracle::bf16(), x, Rounding::rtz, oracle::OnOverflow::to_special));
    const bool want = std::isnan(x) || back == static_cast<double>(x);
    ASSERT_EQ(fp4emu::is_bf16_exact(x), want) << describe(x);
  }
  EXPECT_FALSE(fp4emu::is_bf16_exact(f32(0x3F800001u)));
  EXPECT_FALSE(fp4emu::is_bf16_exact(f32(0x00000001u)));  // fp32 subnormal below bf16's
  EXPECT_TRUE(fp4emu::is_bf16_exact(std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(fp4emu::is_bf16_exact(std::numeric_limits<float>::quiet_NaN()));
}

// ---- E6M2 reciprocal ------------------------------------------------------------

// docs/spec/hif4.md §2: r = bf16(exact 1/s). 1/s = 2^(50-E) / (4+M); round 2^p/(4+M) to an
// integer with 8 significant bits by exact integer division, ties to even.
TEST(CodecE6M2, ReciprocalBf16IsRneOfExactReciprocal) {
  for (uint32_t c = 0; c < 0xFF; ++c) {
    const uint32_t e = c >> 2, d = 4 + (c & 3);
    int p = 0;
    while ((uint64_t{1} << p) / d < 128) ++p;  // quotient in [128, 256)
    const uint64_t q = (uint64_t{1} << p) / d, rem = (uint64_t{1} << p) % d;
    const uint64_t n = q + ((2 * rem > d || (2 * rem == d && (q & 1))) ? 1 : 0);
    const double want = std::ldexp(static_cast<double>(n), 50 - static_cast<int>(e) - p);
    const float got = fp4emu::e6m2_reciprocal_bf16(static_cast<uint8_t>(c));
    ASSERT_EQ(static_cast<double>(got), want) << "code 0x" << std::hex << c;
    ASSERT_TRUE(fp4emu::is_bf16_exact(got));
    // And it is what the bf16 RNE of the fp32 quotient gives (docs/spec/hif4.md §2: the
    // two roundings do not interact for these mantissas).
    const float fp32_quotient = 1.0f / fp4emu::e6m2_decode(static_cast<uint8_t>(c));
    ASSERT_EQ(got, fp4emu::bf16_rne(fp32_quotient)) << "code 0x" << std::hex << c;
  }
  EXPECT_TRUE(std::isnan(fp4emu::e6m2_reciprocal_bf16(0xFF)));
  EXPECT_EQ(std::bit_cast<uint32_t>(fp4emu::e6m2_reciprocal_bf16(0xC1)) >> 16, 0x3F4Du);
  EXPECT_EQ(std::bit_cast<uint32_t>(fp4emu::e6m2_reciprocal_bf16(0xC2)) >> 16, 0x3F2Bu);
  EXPECT_EQ(std::bit_cast<uint32_t>(fp4emu::e6m2_reciprocal_bf16(0xC3)) >> 16, 0x3F12u);
}

}  // namespace
