// Fused AdamW: one thread per element, grid-stride loop; bias corrections computed on the host.
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "kernels/adamw_cuda.h"

namespace zeropp {
namespace kernels {
namespace {

// One element in the fast paths' rounding order (adamw.h): explicit intrinsics, so nvcc's
// contraction cannot fuse differently from the CPU, and the results equal AdamWCpu's bit for bit.
__device__ __forceinline__ void Update(float& p, float g, float& m, float& v, const AdamWCoeffs& c) {
  m = __fmaf_rn(m, c.b1, __fmul_rn(c.one_minus_b1, g));
  v = __fmaf_rn(v, c.b2, __fmul_rn(__fmul_rn(c.one_minus_b2, g), g));
  const float denom = __fmaf_rn(__fsqrt_rn(v), c.inv_bc2_sqrt, c.eps);
  p = __fsub_rn(__fmul_rn(p, c.decay), __fdiv_rn(__fmul_rn(c.step_size, m), denom));
}

__global__ void AdamWKernel(float* __restrict__ param, const float* __restrict__ grad,
                            float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, int64_t n, AdamWCoeffs c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
    Update(p, grad[i], m, v, c);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p;
  }
}

// Pointer table laid out as: params[count], grads[count], exp_avgs[count], exp_avg_sqs[count],
// offsets[count + 1] (prefix sums of the sizes).
__global__ void MultiAdamWKernel(const void* table, int count, AdamWCoeffs c, float grad_scale) {
  float* const* p = static_cast<float* const*>(table);
  const float* const* g = reinterpret_cast<const float* const*>(p + count);
  float* const* m = p + 2 * count;
  float* const* v = p + 3 * count;
  const int64_t* offsets = reinterpret_cast<const int64_t*>(p + 4 * count);
  const int64_t total = offsets[count];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int lo = 0, hi = count - 1;  // the tensor holding flat index i
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= i) lo = mid; else hi = mid - 1;
    }
    const int64_t k = i - offsets[lo];
    float pi = p[lo][k], mi = m[lo][k], vi = v[lo][k];
    Update(pi, __fmul_rn(g[lo][k], grad_scale), mi, vi, c);  // x 1.0f is exact
    m[lo][k] = mi;
    v[lo][k] = vi;
    p[lo][k] = pi;
  }
}

}  // namespace

int64_t MultiTensorTableBytes(int count) { return static_cast<int64_t>(4 * count) * 8 + (count + 1) * 8; }

int64_t FillMultiTensorTable(void* table, float* const* params, const float* const* grads, float* const* exp_avgs,
                             float* const* exp_avg_sqs, const int64_t* numels, int count) {
  uint64_t* t = static_cast<uint64_t*>(table);
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    t[i] = reinterpret_cast<uint64_t>(params[i]);
    t[count + i] = reinterpret_cast<uint64_t>(grads[i]);
    t[2 * count + i] = reinterpret_cast<uint64_t>(exp_avgs[i]);
    t[3 * count + i] = reinterpret_cast<uint64_t>(exp_avg_sqs[i]);
    t[4 * count + i] = static_cast<uint64_t>(total);
    total += numels[i];
  }
  t[5 * count] = static_cast<uint64_t>(total);
  return total;
}

int LaunchMultiTensorAdamWFromTable(const void* table_device, int count, int64_t total, const AdamWHyper& h,
                                    float grad_scale, void* stream) {
  if (count == 0 || total == 0) return 0;
  const int64_t want = (total + 255) / 256;
  const int blocks = static_cast<int>(want < 65535 ? want : 65535);
  MultiAdamWKernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(table_device, count, MakeAdamWCoeffs(h),
                                                                          grad_scale);
  return static_cast<int>(cudaGetLastError());
}

int LaunchMultiTensorAdamWCuda(float* const* params, const float* const* grads, float* const* exp_avgs,
                               float* const* exp_avg_sqs, const int64_t* numels, int count, const AdamWHyper& h,
                               void* table_device, void* stream, float grad_scale) {
  if (count == 0) return 0;
  std::vector<uint64_t> table(static_cast<size_t>(MultiTensorTableBytes(count) / 8));
  const int64_t total = FillMultiTensorTable(table.data(), params, grads, exp_avgs, exp_avg_sqs, numels, count);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t err = cudaMemcpyAsync(table_device, table.data(), table.size() * 8, cudaMemcpyHostToDevice, s);
  if (err != cudaSuccess) return static_cast<int>(err);
  // The host table must outlive the copy.
  err = cudaStreamSynchronize(s);
  if (err != cudaSuccess) return static_cast<int>(err);
  return LaunchMultiTensorAdamWFromTable(table_device, count, total, h, grad_scale, stream);
}

int LaunchAdamWCuda(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                    const AdamWHyper& h, void* stream) {
  if (n == 0) return 0;
  const int threads = 256;
  const int64_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 65535 ? want : 65535);
  AdamWKernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      param, grad, exp_avg, exp_avg_sq, n, MakeAdamWCoeffs(h));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kernels
}  // namespace zeropp
