// The CUDA AdamW kernel against the CPU reference. Compiled in --config=cuda builds; needs a GPU
// to run and skips, saying so, where there is none (or in CPU-only builds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/adamw.h"

#ifdef ZEROPP_CUDA
#include <cuda_runtime.h>

#include "kernels/adamw_cpu.h"
#include "kernels/adamw_cuda.h"
#include "kernels/cast_cuda.h"
#include "kernels/norm_cuda.h"
#endif

namespace zeropp {
namespace {

// Why these cases cannot run here ("" where they can).
std::string NoGpuReason() {
#ifndef ZEROPP_CUDA
  return "built without CUDA: build and run with --config=cuda on a machine with a GPU";
#else
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return "no CUDA GPU on this machine: the kernels were compiled and linked, not run";
  }
  return "";
#endif
}

// The kernel against the textbook reference (to rounding) and against AdamWCpu (the same bits:
// adamw.h's rounding order, so offloading the optimizer from the GPU to the host changes no
// result). Gradients span magnitudes where FMA rounding matters.
TEST(AdamWCudaTest, MatchesCpuReferenceAndCpuBits) {
  const std::string no_gpu = NoGpuReason();
  if (!no_gpu.empty()) GTEST_SKIP() << no_gpu;
#ifdef ZEROPP_CUDA
  const int64_t n = (1 << 20) + 17;
  std::mt19937 rng(0);
  std::normal_distribution<float> d;
  std::vector<float> p(n), g(n), m(n, 0.f), v(n, 0.f);
  for (auto& x : p) x = d(rng);
  for (int64_t i = 0; i < n; ++i) g[i] = d(rng) * std::pow(10.0f, static_cast<float>(i % 9) - 6.0f);
  std::vector<float> rp = p, rm = m, rv = v, cp = p, cm = m, cv = v;
  float *dp, *dg, *dm, *dv;
  cudaMalloc(&dp, n * 4);
  cudaMalloc(&dg, n * 4);
  cudaMalloc(&dm, n * 4);
  cudaMalloc(&dv, n * 4);
  cudaMemcpy(dp, p.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dg, g.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dm, m.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dv, v.data(), n * 4, cudaMemcpyHostToDevice);
  kernels::AdamWHyper h;
  for (int64_t step = 1; step <= 3; ++step) {
    h.step = step;
    ASSERT_EQ(kernels::LaunchAdamWCuda(dp, dg, dm, dv, n, h, nullptr), 0);
    kernels::AdamWReference(rp.data(), g.data(), rm.data(), rv.data(), n, h);
    kernels::AdamWCpu(cp.data(), g.data(), cm.data(), cv.data(), n, h);
  }
  cudaMemcpy(p.data(), dp, n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(m.data(), dm, n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(v.data(), dv, n * 4, cudaMemcpyDeviceToHost);
  int64_t differing = 0;
  for (int64_t i = 0; i < n; ++i) differing += (p[i] != cp[i]) + (m[i] != cm[i]) + (v[i] != cv[i]);
  std::printf("adamw cuda vs %s: %lld of %lld values differ\n", kernels::CpuPathName(kernels::BestCpuPath()),
              static_cast<long long>(differing), static_cast<long long>(3 * n));
  EXPECT_EQ(differing, 0);
  double max_abs = 0, max_rel = 0;
  for (int64_t i = 0; i < n; ++i) {
    double e = std::fabs(double(p[i]) - rp[i]);
    max_abs = std::max(max_abs, e);
    max_rel = std::max(max_rel, e / std::max(1e-3, std::fabs(double(rp[i]))));
  }
  std::printf("adamw cuda vs cpu reference: max abs err %.3g, max rel err %.3g\n", max_abs, max_rel);
  EXPECT_LT(max_rel, 1e-5);
  cudaFree(dp);
  cudaFree(dg);
  cudaFree(dm);
  cudaFree(dv);
#endif
}

TEST(AdamWCudaTest, MultiTensorAndCastsMatchCpu) {
  const std::string no_gpu = NoGpuReason();
  if (!no_gpu.empty()) GTEST_SKIP() << no_gpu;
#ifdef ZEROPP_CUDA
  const std::vector<int64_t> sizes = {7, 100003, 4096};
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  std::vector<std::vector<float>> hp, hg, hm, hv;
  std::vector<float*> dp, dm, dv;
  std::vector<const float*> dg;
  for (int64_t n : sizes) {
    hp.emplace_back(n);
    hg.emplace_back(n);
    hm.emplace_back(n, 0.f);
    hv.emplace_back(n, 0.f);
    for (auto& x : hp.back()) x = d(rng);
    for (auto& x : hg.back()) x = d(rng);
    float *p, *g, *m, *v;
    cudaMalloc(&p, n * 4);
    cudaMalloc(&g, n * 4);
    cudaMalloc(&m, n * 4);
    cudaMalloc(&v, n * 4);
    cudaMemcpy(p, hp.back().data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(g, hg.back().data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemset(m, 0, n * 4);
    cudaMemset(v, 0, n * 4);
    dp.push_back(p);
    dg.push_back(g);
    dm.push_back(m);
    dv.push_back(v);
  }
  void* table;
  cudaMalloc(&table, kernels::MultiTensorTableBytes(3));
  kernels::AdamWHyper h;
  h.step = 1;
  // Clipping's scale is applied as each gradient is read, rounded as the host applies it.
  const float scale = 0.37f;
  ASSERT_EQ(kernels::LaunchMultiTensorAdamWCuda(dp.data(), dg.data(), dm.data(), dv.data(), sizes.data(), 3, h, table,
                                                nullptr, scale),
            0);
  for (auto& grads : hg) {
    for (float& x : grads) x *= scale;
  }
  double max_rel = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> got(sizes[t]);
    cudaMemcpy(got.data(), dp[t], sizes[t] * 4, cudaMemcpyDeviceToHost);
    kernels::AdamWReference(hp[t].data(), hg[t].data(), hm[t].data(), hv[t].data(), sizes[t], h);
    for (int64_t i = 0; i < sizes[t]; ++i) {
      max_rel = std::max(max_rel, std::fabs(double(got[i]) - hp[t][i]) / std::max(1e-2, std::fabs(double(hp[t][i]))));
    }
  }
  std::printf("multi-tensor adamw cuda vs reference: max rel err %.3g\n", max_rel);
  EXPECT_LT(max_rel, 1e-5);
  // Casts: bit-identical to the CPU casts.
  const int64_t n = 100003;
  uint16_t* db;
  float* df;
  cudaMalloc(&db, n * 2);
  cudaMalloc(&df, n * 4);
  ASSERT_EQ(kernels::LaunchCastFloatToBf16Cuda(dp[1], db, n, nullptr), 0);
  ASSERT_EQ(kernels::LaunchCastBf16ToFloatCuda(db, df, n, nullptr), 0);
  std::vector<uint16_t> gb(n), cb(n);
  std::vector<float> gf(n), cf(n), src(n);
  cudaMemcpy(gb.data(), db, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(gf.data(), df, n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(src.data(), dp[1], n * 4, cudaMemcpyDeviceToHost);
  kernels::CastFloatToBf16(src.data(), cb.data(), n);
  kernels::CastBf16ToFloat(cb.data(), cf.data(), n);
  EXPECT_EQ(gb, cb);
  EXPECT_EQ(gf, cf);
#endif
}

// The gradient norm's sum of squares on the device (fp32 and bf16 input, sizes around the fixed
// grid's stride and its four-load step) equals the host's fp64 sum to fp64 rounding and is the
// same bits on a second run; several ranges add into one accumulator.
TEST(AdamWCudaTest, SumOfSquaresMatchesTheHostAndRepeats) {
  const std::string no_gpu = NoGpuReason();
  if (!no_gpu.empty()) GTEST_SKIP() << no_gpu;
#ifdef ZEROPP_CUDA
  std::mt19937 rng(2);
  std::normal_distribution<float> d;
  const int64_t stride = 2048 * 256;  // the kernel's grid, times four loads a thread
  const std::vector<int64_t> sizes = {1, stride - 1, stride, stride + 1, 4 * stride - 1, 4 * stride + 3, (1 << 22) + 5};
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  std::vector<float> x(total);
  for (int64_t i = 0; i < total; ++i) x[i] = d(rng) * std::pow(10.0f, static_cast<float>(i % 7) - 4.0f);
  std::vector<uint16_t> xb(total);
  kernels::CastFloatToBf16(x.data(), xb.data(), total);
  float* dx;
  uint16_t* dxb;
  double* acc;
  void* partials;
  cudaMalloc(&dx, total * 4);
  cudaMalloc(&dxb, total * 2);
  cudaMalloc(&acc, 2 * sizeof(double));
  cudaMalloc(&partials, kernels::NormPartialsBytes());
  cudaMemcpy(dx, x.data(), total * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dxb, xb.data(), total * 2, cudaMemcpyHostToDevice);
  for (bool bf16 : {false, true}) {
    double host = 0;
    double got[2];
    for (int run = 0; run < 2; ++run) {
      cudaMemset(acc + run, 0, sizeof(double));
      int64_t at = 0;
      for (int64_t n : sizes) {
        if (run == 0) host += bf16 ? kernels::SumOfSquaresBf16(xb.data() + at, n) : kernels::SumOfSquares(x.data() + at, n);
        const void* src = bf16 ? static_cast<const void*>(dxb + at) : static_cast<const void*>(dx + at);
        ASSERT_EQ(kernels::LaunchAddSumOfSquaresCuda(src, bf16, n, acc + run, partials, nullptr), 0);
        at += n;
      }
      cudaMemcpy(&got[run], acc + run, sizeof(double), cudaMemcpyDeviceToHost);
    }
    std::printf("sum of squares (%s) on the device %.17g, on the host %.17g\n", bf16 ? "bf16" : "fp32", got[0], host);
    EXPECT_NEAR(got[0], host, 1e-13 * host) << (bf16 ? "bf16" : "fp32");
    EXPECT_EQ(got[0], got[1]) << "a second run gave other bits";
  }
  cudaFree(dx);
  cudaFree(dxb);
  cudaFree(acc);
  cudaFree(partials);
#endif
}

}  // namespace
}  // namespace zeropp
