// The synthetic sanity targets of docs/analysis.md §6 (computed there by an
// independent pure-Python script on its own generator). The tolerances allow
// for the different random streams: QSNR to about 0.15 dB, UR to about one
// percentage point (the targets are given to the nearest percent).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "fp4emu/analysis/underflow.hpp"

namespace fp4emu::analysis {
namespace {

UnderflowStats run(const Tensor& x, const char* recipe) {
  QuantOptions o;
  o.recipe = recipe;
  const UnderflowStats s = study_underflow(x, o, parse_transform("none"), nullptr, nullptr, UnderflowOptions{});
  std::printf("  %-10s UR %6.2f %%  QSNR %6.2f dB\n", recipe, 100 * s.underflow_ratio, s.qsnr_db);
  return s;
}

Tensor generate(int64_t rows, int64_t cols, uint64_t seed, double (*draw)(SplitMix64&)) {
  Tensor x{{rows, cols}, std::vector<float>(size_t(rows * cols))};
  SplitMix64 rng(seed);
  for (float& v : x.data) v = float(draw(rng));
  return x;
}

double normal(SplitMix64& r) { return r.gaussian(); }
double laplace(SplitMix64& r) {
  const double u = r.uniform() - 0.5;
  return -(u < 0 ? -1.0 : 1.0) * std::log(1.0 - 2.0 * std::fabs(u));
}
double student3(SplitMix64& r) {
  const double z = r.gaussian();
  double chi = 0;
  for (int i = 0; i < 3; ++i) {
    const double g = r.gaussian();
    chi += g * g;
  }
  return z / std::sqrt(chi / 3);
}
double student2(SplitMix64& r) {
  const double z = r.gaussian();
  const double a = r.gaussian(), b = r.gaussian();
  return z / std::sqrt((a * a + b * b) / 2);
}
double swiglu(SplitMix64& r) {
  const double a = r.gaussian(), b = r.gaussian();
  return a / (1.0 + std::exp(-a)) * b;
}

// §6.1: N(0, 1), 65 536 samples.
TEST(UnderflowSynthetic, GaussianQsnrAndUnderflow) {
  const Tensor x = generate(1, 65536, 1, normal);
  const UnderflowStats mx = run(x, "mxfp4.ocp");
  EXPECT_NEAR(mx.qsnr_db, 18.77, 0.15);
  EXPECT_NEAR(mx.underflow_ratio, 0.090, 0.01);
  const UnderflowStats mc = run(x, "mxfp4.rceil");
  EXPECT_NEAR(mc.qsnr_db, 18.76, 0.15);
  EXPECT_NEAR(mc.underflow_ratio, 0.109, 0.01);
  const UnderflowStats nv = run(x, "nvfp4.te");
  EXPECT_NEAR(nv.qsnr_db, 20.48, 0.15);
  EXPECT_NEAR(nv.underflow_ratio, 0.070, 0.01);
  EXPECT_NEAR(nv.rel_l2, 0.095, 0.003);
  // HiF4: the spec derives about 21.7 dB from "24 % lower MSE than NVFP4";
  // the emulator is the authority, so only the ordering is asserted. (On
  // this Gaussian HiF4 flushes slightly *more* than MXFP4, about 9.7 % vs
  // 8.8 %, against §8.1's expectation; on the heavy tails below it flushes less.)
  const UnderflowStats hf = run(x, "hif4.v14");
  EXPECT_GT(hf.qsnr_db, nv.qsnr_db);
}

// §6.2: shape matters more than kurtosis.
TEST(UnderflowSynthetic, HeavyTailsAndSwiglu) {
  struct Case {
    const char* name;
    double (*draw)(SplitMix64&);
    double ur_mx, ur_nv;
  };
  for (const Case& c : {Case{"laplace", laplace, 0.16, 0.13}, Case{"student-t 3", student3, 0.17, 0.12},
                        Case{"student-t 2", student2, 0.27, 0.18}, Case{"swiglu", swiglu, 0.35, 0.27}}) {
    std::printf("%s\n", c.name);
    const Tensor x = generate(64, 1024, 2, c.draw);
    const UnderflowStats mx = run(x, "mxfp4.ocp"), nv = run(x, "nvfp4.te"), hf = run(x, "hif4.v14");
    // Student-t with 2 degrees of freedom has infinite variance: its UR
    // depends on the few largest draws of the sample, hence the wider band.
    const double tol = c.name == std::string("student-t 2") ? 0.03 : 0.015;
    EXPECT_NEAR(mx.underflow_ratio, c.ur_mx, tol) << c.name;
    EXPECT_NEAR(nv.underflow_ratio, c.ur_nv, tol) << c.name;
    EXPECT_LT(hf.underflow_ratio, mx.underflow_ratio) << c.name;
  }
}

// §6.3: k constant outlier channels of magnitude `mag` on an N(0, 1) body,
// d = 1024, channels drawn at random (seeded). UR depends on how many blocks
// the channels fall into, so it is averaged over 8 draws of the channel set;
// the spec's numbers come from one draw of its own generator.
double mean_over_placements(double mag, int k, const char* recipe, double UnderflowStats::*field) {
  double sum = 0;
  for (int draw = 0; draw < 8; ++draw) {
    Tensor x = generate(64, 1024, 3 + draw, normal);
    SplitMix64 pick(100 * k + draw);
    std::vector<int> chans;
    while (int(chans.size()) < k) {
      const int c = int(pick.next() % 1024);
      if (std::find(chans.begin(), chans.end(), c) == chans.end()) chans.push_back(c);
    }
    for (int64_t r = 0; r < 64; ++r)
      for (int c : chans) x.data[r * 1024 + c] = float(mag);
    QuantOptions o;
    o.recipe = recipe;
    sum += study_underflow(x, o, parse_transform("none"), nullptr, nullptr, UnderflowOptions{}).*field;
  }
  std::printf("  mag %g k %d %-10s mean %s %.4f\n", mag, k, recipe,
              field == &UnderflowStats::qsnr_db ? "QSNR dB" : "UR", sum / 8);
  return sum / 8;
}

TEST(UnderflowSynthetic, OutlierChannels) {
  const auto ur = &UnderflowStats::underflow_ratio;
  const auto qsnr = &UnderflowStats::qsnr_db;
  EXPECT_NEAR(mean_over_placements(50, 3, "mxfp4.ocp", ur), 0.17, 0.015);
  EXPECT_NEAR(mean_over_placements(50, 3, "nvfp4.te", ur), 0.11, 0.015);
  // k = 32: the expected UR over placements is about 62 % (MXFP4) and 39 %
  // (NVFP4) (32 random channels hit 64 % of the 32-blocks and 39 % of the
  // 16-blocks); the spec's 60 % / 35 % is one draw. Hence 4 points.
  EXPECT_NEAR(mean_over_placements(50, 32, "mxfp4.ocp", ur), 0.60, 0.04);
  EXPECT_NEAR(mean_over_placements(50, 32, "nvfp4.te", ur), 0.35, 0.05);
  // mag 1000: MXFP4's OCP floor scale clips the outlier itself (1000 -> 768).
  EXPECT_NEAR(mean_over_placements(1000, 3, "mxfp4.ocp", qsnr), 12.7, 0.3);
  EXPECT_NEAR(mean_over_placements(1000, 3, "nvfp4.te", qsnr), 47.5, 0.5);
}

}  // namespace
}  // namespace fp4emu::analysis
