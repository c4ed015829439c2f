// The one thread-count rule (fp4emu/threads.hpp) at every library entry point
// that starts OpenMP threads: quantize, dequantize and fake-quant on both
// implementations, the GEMM, golden generate. An unchecked count reached
// OpenMP's num_threads and 100000 crashed the runtime.
#include <gtest/gtest.h>

#include <omp.h>

#include <filesystem>
#include <functional>
#include <string>

#include "fp4emu/error.hpp"
#include "fp4emu/gemm/gemm.hpp"
#include "fp4emu/golden/suite.hpp"
#include "fp4emu/quant/quantize.hpp"
#include "fp4emu/threads.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace fp4emu;
using fp4emu::testing::TempDir;

namespace {

constexpr int kBad[] = {-1, -2147483647 - 1, kMaxThreads + 1, 100000};

Tensor ones(int64_t rows, int64_t cols) {
  Tensor t;
  t.shape = {rows, cols};
  t.data.assign(static_cast<size_t>(rows * cols), 1.0f);
  return t;
}

void expect_refused(const std::function<void()>& call, int threads) {
  try {
    call();
    ADD_FAILURE() << "thread count " << threads << " was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("thread count " + std::to_string(threads) + " is invalid"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

TEST(ThreadCount, Rule) {
  EXPECT_EQ(thread_count(1), 1);
  EXPECT_EQ(thread_count(kMaxThreads), kMaxThreads);
  EXPECT_GE(thread_count(0), 1);
  for (int t : kBad) expect_refused([&] { thread_count(t); }, t);
  // 0 follows OpenMP's setting (OMP_NUM_THREADS), capped by the same rule.
  const int before = omp_get_max_threads();
  omp_set_num_threads(100000);
  EXPECT_EQ(thread_count(0), kMaxThreads);
  omp_set_num_threads(3);
  EXPECT_EQ(thread_count(0), 3);
  omp_set_num_threads(before);
}

TEST(ThreadCount, QuantizePaths) {
  const Tensor x = ones(2, 64);
  for (Impl impl : {Impl::automatic, Impl::reference, Impl::fast}) {
    for (int t : kBad) {
      SCOPED_TRACE(std::string(to_string(impl)));
      QuantOptions o;
      o.recipe = "mxfp4.ocp";
      o.impl = impl;
      o.threads = t;
      expect_refused([&] { fake_quant(x, o); }, t);
      expect_refused([&] { quantize(x, o); }, t);
      o.threads = 1;
      const PackedTensor p = quantize(x, o);
      expect_refused([&] { dequantize(p, DequantOptions{.impl = impl, .threads = t}); }, t);
    }
  }
}

TEST(ThreadCount, Gemm) {
  QuantOptions q;
  q.recipe = "mxfp4.ocp";
  const PackedTensor a = quantize(ones(4, 64), q);
  q.axis = 0;  // B is k×n, blocked along k
  const PackedTensor b = quantize(ones(64, 3), q);
  for (GemmModel model : {GemmModel::exact, GemmModel::block_fp32, GemmModel::fma_fp32, GemmModel::fast}) {
    for (GemmImpl impl : {GemmImpl::simd, GemmImpl::scalar}) {
      SCOPED_TRACE(std::string(to_string(model)));
      GemmOptions o;
      o.model = model;
      o.impl = impl;
      for (int t : kBad) {
        o.threads = t;
        expect_refused([&] { gemm(a, b, o); }, t);
      }
      o.threads = 2;
      const Tensor c = gemm(a, b, o);
      ASSERT_EQ(c.data.size(), 12u);
      EXPECT_EQ(c.data[0], 64.0f);
    }
  }
}

TEST(ThreadCount, GoldenGenerateRefusesBeforeWriting) {
  TempDir dir;
  for (int t : kBad) {
    golden::GenerateOptions g;
    g.recipes = {"mxfp4.ocp"};
    g.threads = t;
    expect_refused([&] { golden::generate_suite(dir / "suite", g); }, t);
    EXPECT_TRUE(fs::is_empty(dir.path())) << "a refused run left files behind";
  }
}
