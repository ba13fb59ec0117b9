// The vectorised CPU AdamW against the scalar reference, on every path this CPU has (others are
// skipped, saying so), with fp32 and bf16 gradients, the bf16 copy-out, odd sizes and threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/adamw_cpu.h"

namespace zeropp {
namespace kernels {
namespace {

// A learning rate and weight decay large enough that every term of the update shows in the bits.
AdamWHyper TestHyper() {
  AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  return h;
}

// n values drawn from N(0, scale^2).
std::vector<float> Normal(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d;
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = d(rng) * scale;
  return x;
}

class AdamWCpuTest : public ::testing::TestWithParam<CpuPath> {};

TEST_P(AdamWCpuTest, MatchesReference) {
  const CpuPath path = GetParam();
  if (!CpuPathAvailable(path)) GTEST_SKIP() << CpuPathName(path) << " is not available on this CPU";
  for (bool bf16_grad : {false, true}) {
    for (int threads : {1, 2}) {
      const int64_t n = (1 << 17) + 13;  // odd tail for every vector width, big enough to thread
      std::mt19937 rng(7);
      std::normal_distribution<float> d;
      std::vector<float> p(n), g(n), m(n, 0.f), v(n, 0.f);
      for (auto& x : p) x = d(rng);
      for (auto& x : g) x = d(rng) * 1e-2f;
      std::vector<uint16_t> gb(n), out(n);
      CastFloatToBf16(g.data(), gb.data(), n);
      if (bf16_grad) CastBf16ToFloat(gb.data(), g.data(), n);  // the reference sees the same values
      std::vector<float> rp = p, rm = m, rv = v;
      AdamWHyper h = TestHyper();
      for (int64_t step = 1; step <= 4; ++step) {
        h.step = step;
        AdamWArgs a;
        a.param = p.data();
        if (bf16_grad) {
          a.grad_bf16 = gb.data();
        } else {
          a.grad = g.data();
        }
        a.exp_avg = m.data();
        a.exp_avg_sq = v.data();
        a.param_bf16_out = out.data();
        a.n = n;
        AdamWCpu(a, h, path, threads);
        AdamWReference(rp.data(), g.data(), rm.data(), rv.data(), n, h);
      }
      double max_abs = 0, max_rel = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double e = std::fabs(double(p[i]) - rp[i]);
        max_abs = std::max(max_abs, e);
        max_rel = std::max(max_rel, e / std::max(1e-2, std::fabs(double(rp[i]))));
      }
      std::printf("%s bf16_grad=%d threads=%d: max abs err %.3g, max rel err %.3g\n", CpuPathName(path), bf16_grad,
                  threads, max_abs, max_rel);
      // FMA and the order of the vector ops move results by a few ulp of |p| <= ~5.
      EXPECT_LT(max_abs, 4e-6);
      EXPECT_LT(max_rel, 1e-5);
      // The bf16 copy equals rounding the fp32 result.
      std::vector<uint16_t> expect(n);
      CastFloatToBf16(p.data(), expect.data(), n);
      EXPECT_EQ(out, expect);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, AdamWCpuTest, ::testing::Values(CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512),
                         [](const auto& info) { return std::string(CpuPathName(info.param)); });

// Every path gives the same bits (the fast paths' rounding order, adamw.h): moving the optimizer
// between CPUs, or between the host and a GPU (adamw_cuda_test), changes no result. Sizes leave
// tails for every vector width; gradients span magnitudes where FMA rounding matters.
TEST(AdamWCpuPathsTest, AllPathsGiveTheSameBits) {
  const int64_t n = (1 << 16) + 29;
  std::mt19937 rng(11);
  std::normal_distribution<float> d;
  std::vector<float> p0(n), g(n);
  for (auto& x : p0) x = d(rng);
  for (int64_t i = 0; i < n; ++i) g[i] = d(rng) * std::pow(10.0f, static_cast<float>(i % 9) - 6.0f);
  std::vector<std::vector<float>> results;
  std::vector<std::string> names;
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512}) {
    if (!CpuPathAvailable(path)) {
      std::printf("%s is not available on this CPU: not compared\n", CpuPathName(path));
      continue;
    }
    std::vector<float> p = p0, m(n, 0.f), v(n, 0.f);
    AdamWHyper h = TestHyper();
    for (int64_t step = 1; step <= 5; ++step) {
      h.step = step;
      AdamWArgs a;
      a.param = p.data();
      a.grad = g.data();
      a.exp_avg = m.data();
      a.exp_avg_sq = v.data();
      a.n = n;
      AdamWCpu(a, h, path, /*threads=*/2);
    }
    p.insert(p.end(), m.begin(), m.end());
    p.insert(p.end(), v.begin(), v.end());
    results.push_back(std::move(p));
    names.push_back(CpuPathName(path));
  }
  ASSERT_GE(results.size(), 1u);
  for (size_t k = 1; k < results.size(); ++k) {
    int64_t differing = 0;
    for (size_t i = 0; i < results[0].size(); ++i) differing += results[k][i] != results[0][i];
    EXPECT_EQ(differing, 0) << names[k] << " vs " << names[0] << ": elements of (param, m, v) that differ";
  }
}

// A gradient scale (clipping's factor) applied by the kernel as it reads each value gives the same
// bits as scaling a copy of the gradient first, on every path and for bf16 gradients too; a scale
// of 1 changes nothing.
TEST(AdamWCpuPathsTest, GradScaleEqualsAScaledCopy) {
  const int64_t n = (1 << 12) + 23;
  std::mt19937 rng(5);
  const std::vector<float> p0 = Normal(n, rng), g = Normal(n, rng, 3e-2f);
  std::vector<uint16_t> gb(n);
  CastFloatToBf16(g.data(), gb.data(), n);
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512}) {
    if (!CpuPathAvailable(path)) continue;
    for (bool bf16_grad : {false, true}) {
      for (float scale : {0.37f, 1.0f}) {
        std::vector<float> src(n);
        if (bf16_grad) {
          CastBf16ToFloat(gb.data(), src.data(), n);
        } else {
          src = g;
        }
        std::vector<float> scaled(n);
        for (int64_t i = 0; i < n; ++i) scaled[i] = src[i] * scale;
        std::vector<float> p1 = p0, m1(n, 0.f), v1(n, 0.f), p2 = p0, m2(n, 0.f), v2(n, 0.f);
        AdamWHyper h = TestHyper();
        for (int64_t step = 1; step <= 3; ++step) {
          h.step = step;
          AdamWArgs a;
          a.param = p1.data(), a.exp_avg = m1.data(), a.exp_avg_sq = v1.data(), a.n = n;
          if (bf16_grad) {
            a.grad_bf16 = gb.data();
          } else {
            a.grad = g.data();
          }
          a.grad_scale = scale;
          AdamWCpu(a, h, path, /*threads=*/2);
          AdamWArgs b;
          b.param = p2.data(), b.exp_avg = m2.data(), b.exp_avg_sq = v2.data(), b.n = n, b.grad = scaled.data();
          AdamWCpu(b, h, path, /*threads=*/2);
        }
        EXPECT_EQ(p1, p2) << CpuPathName(path) << " bf16_grad=" << bf16_grad << " scale=" << scale;
        EXPECT_EQ(m1, m2) << CpuPathName(path) << " bf16_grad=" << bf16_grad << " scale=" << scale;
        EXPECT_EQ(v1, v2) << CpuPathName(path) << " bf16_grad=" << bf16_grad << " scale=" << scale;
        if (scale != 1.0f) {
          EXPECT_NE(p1, p0);
        }
      }
    }
  }
}

// The gradient norm's sum of squares: within double rounding of a long-double sum, and the same
// bits for every thread count (fixed chunks added in order), for sizes with tails and none.
TEST(SumOfSquaresTest, MatchesALongDoubleSumForEveryThreadCount) {
  std::mt19937 rng(3);
  for (int64_t n : {int64_t{0}, int64_t{7}, int64_t{(1 << 16) - 1}, int64_t{(1 << 18) + 29}}) {
    const std::vector<float> x = Normal(n, rng, 1e-3f);
    long double ref = 0;
    for (float v : x) ref += static_cast<long double>(v) * v;
    const double one = SumOfSquares(x.data(), n, 1);
    EXPECT_NEAR(one, static_cast<double>(ref), 1e-12 * static_cast<double>(ref) + 1e-300) << "n=" << n;
    for (int threads : {2, 3, 7}) EXPECT_EQ(SumOfSquares(x.data(), n, threads), one) << "n=" << n << " threads=" << threads;
  }
}

// Over bf16 values: the same bits as the fp32 sum of the same values widened, at any thread count.
TEST(SumOfSquaresTest, Bf16EqualsTheWidenedFp32Sum) {
  std::mt19937 rng(5);
  for (int64_t n : {int64_t{0}, int64_t{9}, int64_t{(1 << 17) + 3}}) {
    const std::vector<float> x = Normal(n, rng, 1e-2f);
    std::vector<uint16_t> b(static_cast<size_t>(n));
    std::vector<float> widened(static_cast<size_t>(n));
    CastFloatToBf16(x.data(), b.data(), n);
    CastBf16ToFloat(b.data(), widened.data(), n);
    const double want = SumOfSquares(widened.data(), n, 1);
    if (n > 0) {
      EXPECT_GT(want, 0.0);
    }
    for (int threads : {1, 2, 5}) EXPECT_EQ(SumOfSquaresBf16(b.data(), n, threads), want) << "n=" << n << " threads=" << threads;
  }
}

// Every vector path the CPU has gives the scalar loop's bits, fp32 and bf16, with and without a
// tail, one chunk (2^16 values) or several, four at a time (9 x 2^16 + 5 values: on one thread
// 4 + 4 chunks, one and the tail; on three, 4, 4, and one and the tail), on values spread over 20
// binary orders of magnitude; a path the CPU lacks is refused.
TEST(SumOfSquaresTest, EveryPathGivesTheScalarBits) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-10.0f, 10.0f);
  for (int64_t n :
       {int64_t{1}, int64_t{8}, int64_t{15}, int64_t{(1 << 16) + 13}, int64_t{3 << 16}, int64_t{(9 << 16) + 5}}) {
    std::vector<float> x = Normal(n, rng, 1.0f);
    for (float& v : x) v *= std::exp2(exponent(rng));
    std::vector<uint16_t> b(static_cast<size_t>(n));
    CastFloatToBf16(x.data(), b.data(), n);
    const double f32 = SumOfSquares(x.data(), n, 1, CpuPath::kScalar);
    const double bf16 = SumOfSquaresBf16(b.data(), n, 1, CpuPath::kScalar);
    for (CpuPath path : {CpuPath::kAvx2, CpuPath::kAvx512}) {
      if (!CpuPathAvailable(path)) {
        EXPECT_THROW(SumOfSquares(x.data(), n, 1, path), std::invalid_argument) << CpuPathName(path);
        continue;
      }
      for (int threads : {1, 3}) {
        EXPECT_EQ(SumOfSquares(x.data(), n, threads, path), f32) << CpuPathName(path) << " n=" << n;
        EXPECT_EQ(SumOfSquaresBf16(b.data(), n, threads, path), bf16) << CpuPathName(path) << " n=" << n;
      }
    }
    EXPECT_EQ(SumOfSquares(x.data(), n, 2), f32) << "the default path, n=" << n;
  }
}

TEST(Bf16CastTest, RoundsToNearestEvenAndKeepsNaN) {
  const float in[] = {1.0f, 1.00390625f /* halfway: ties to even (down) */, 1.01171875f /* halfway: up */,
                      -2.5f, std::nanf(""), 3.4e38f};
  uint16_t out[6];
  CastFloatToBf16(in, out, 6);
  EXPECT_EQ(out[0], 0x3f80);
  EXPECT_EQ(out[1], 0x3f80);
  EXPECT_EQ(out[2], 0x3f82);
  EXPECT_EQ(out[3], 0xc020);
  float back[6];
  CastBf16ToFloat(out, back, 6);
  EXPECT_TRUE(std::isnan(back[4]));
  EXPECT_EQ(back[0], 1.0f);
}

TEST(AdamWCpuErrorsTest, RefusesBadArguments) {
  AdamWArgs a;
  EXPECT_THROW(AdamWCpu(a, AdamWHyper{}, CpuPath::kScalar, 1), std::invalid_argument);
}

}  // namespace
}  // namespace kernels
}  // namespace zeropp
