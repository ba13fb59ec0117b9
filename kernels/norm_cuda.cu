// Deterministic fp64 sum of squares (see norm_cuda.h): a fixed grid, so the order of every add is
// fixed by n alone.
#include <cuda_runtime.h>

#include "kernels/norm_cuda.h"

namespace zeropp {
namespace kernels {
namespace {

// A fixed grid (the same on every GPU), large enough with four loads in flight per thread to keep
// an H100's memory busy (about 4 MB outstanding for bf16 gradients).
constexpr int kBlocks = 2048;
constexpr int kThreads = 256;
constexpr int kUnroll = 4;

__device__ __forceinline__ double Square(float x) { return static_cast<double>(x) * x; }
__device__ __forceinline__ double Square(uint16_t x) { return Square(__uint_as_float(static_cast<uint32_t>(x) << 16)); }

// Sums kThreads doubles of shared memory in a fixed tree; the total lands in s[0].
__device__ void BlockTree(double* s) {
  for (int w = kThreads / 2; w > 0; w /= 2) {
    __syncthreads();
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
  }
  __syncthreads();
}

template <typename T>
__global__ void PartialSums(const T* __restrict__ x, int64_t n, double* __restrict__ partials) {
  __shared__ double s[kThreads];
  const int64_t stride = static_cast<int64_t>(kBlocks) * kThreads;
  double acc[kUnroll] = {0, 0, 0, 0};
  int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  // kUnroll loads issued before their adds; each lands in its own accumulator.
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    T v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = x[i + k * stride];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) acc[k] += Square(v[k]);
  }
  for (; i < n; i += stride) acc[0] += Square(x[i]);  // fewer than kUnroll left
  s[threadIdx.x] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  BlockTree(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

__global__ void AddPartials(const double* __restrict__ partials, double* acc) {
  __shared__ double s[kThreads];
  double v = 0;
  for (int j = threadIdx.x; j < kBlocks; j += kThreads) v += partials[j];
  s[threadIdx.x] = v;
  BlockTree(s);
  if (threadIdx.x == 0) *acc += s[0];
}

static_assert(kUnroll == 4, "PartialSums folds four accumulators");

}  // namespace

int64_t NormPartialsBytes() { return kBlocks * static_cast<int64_t>(sizeof(double)); }

int LaunchAddSumOfSquaresCuda(const void* x, bool bf16, int64_t n, double* acc, void* partials, void* stream) {
  if (n <= 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  auto* out = static_cast<double*>(partials);
  if (bf16) {
    PartialSums<<<kBlocks, kThreads, 0, s>>>(static_cast<const uint16_t*>(x), n, out);
  } else {
    PartialSums<<<kBlocks, kThreads, 0, s>>>(static_cast<const float*>(x), n, out);
  }
  AddPartials<<<1, kThreads, 0, s>>>(out, acc);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kernels
}  // namespace zeropp
