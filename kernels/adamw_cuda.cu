// Fused AdamW: one thread per element, grid-stride loop; bias corrections computed on the host.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/adamw_cuda.h"

namespace zeropp {
namespace kernels {
namespace {

__global__ void AdamWKernel(float* __restrict__ param, const float* __restrict__ grad,
                            float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, int64_t n,
                            float beta1, float beta2, float eps, float step_size, float bc2_sqrt,
                            float decay) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    const float m = exp_avg[i] * beta1 + (1.0f - beta1) * g;
    const float v = exp_avg_sq[i] * beta2 + (1.0f - beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = sqrtf(v) / bc2_sqrt + eps;
    param[i] = param[i] * decay - step_size * m / denom;
  }
}

}  // namespace

int LaunchAdamWCuda(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                    const AdamWHyper& h, void* stream) {
  if (n == 0) return 0;
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step));
  const int threads = 256;
  const int64_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 65535 ? want : 65535);
  AdamWKernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      param, grad, exp_avg, exp_avg_sq, n, h.beta1, h.beta2, h.eps, static_cast<float>(h.lr / bc1),
      static_cast<float>(std::sqrt(bc2)), 1.0f - h.lr * h.weight_decay);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kernels
}  // namespace zeropp
