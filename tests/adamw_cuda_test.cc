// The CUDA AdamW kernel against the CPU reference. Compiled in --config=cuda builds; needs a GPU
// to run and skips, saying so, where there is none (or in CPU-only builds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/adamw.h"

#ifdef ZEROPP_CUDA
#include <cuda_runtime.h>

#include "kernels/adamw_cuda.h"
#endif

namespace zeropp {
namespace {

TEST(AdamWCudaTest, MatchesCpuReference) {
#ifndef ZEROPP_CUDA
  GTEST_SKIP() << "built without CUDA: build and run with --config=cuda on a machine with a GPU";
#else
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA GPU on this machine: the kernel was compiled and linked, not run";
  }
  const int64_t n = (1 << 20) + 17;
  std::mt19937 rng(0);
  std::normal_distribution<float> d;
  std::vector<float> p(n), g(n), m(n, 0.f), v(n, 0.f);
  for (auto& x : p) x = d(rng);
  for (auto& x : g) x = d(rng);
  std::vector<float> rp = p, rm = m, rv = v;
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
  }
  cudaMemcpy(p.data(), dp, n * 4, cudaMemcpyDeviceToHost);
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

}  // namespace
}  // namespace zeropp
