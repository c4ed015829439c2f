// Guards the build flags that keep every written rounding. GCC 12's SLP
// vectorizer merged `lo = float(lo); hi = float(hi);` on neighbouring doubles
// into nothing, silently dropping both roundings (see CMakeLists.txt).
#include <gtest/gtest.h>

#include <vector>

namespace {

__attribute__((noinline)) double pick(const std::vector<double>& s, double p) {
  return s[static_cast<size_t>(p * static_cast<double>(s.size() - 1))] * 1.0000000001;
}

struct NarrowedBounds {
  double lo = 0, hi = 0;
  __attribute__((noinline)) explicit NarrowedBounds(const std::vector<double>& s) {
    lo = pick(s, 0.01);
    hi = pick(s, 0.99);
    lo = static_cast<float>(lo);
    hi = static_cast<float>(hi);
  }
};

TEST(CompilerRounding, NarrowingOfNeighbouringDoublesIsKept) {
  std::vector<double> s;
  for (int i = 0; i < 1000; ++i) s.push_back(0.1 + i * 1e-3 / 3.0);
  const NarrowedBounds b(s);
  EXPECT_EQ(static_cast<double>(static_cast<float>(b.lo)), b.lo);
  EXPECT_EQ(static_cast<double>(static_cast<float>(b.hi)), b.hi);
  EXPECT_NE(b.lo, pick(s, 0.01)) << "the value must have been rounded to float";
}

}  // namespace
