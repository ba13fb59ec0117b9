// Deterministic fp64 sum of squares (see norm_cuda.h): a fixed grid, so the order of every add is
// fixed by n alone.
#include <cuda_runtime.h>

#include "kernels/norm_cuda.h"

namespace zeropp {
namespace kernels {
namespace {

constexpr int kBlocks = 512;
constexpr int kThreads = 256;

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
  double acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(kBlocks) * kThreads) {
    acc += Square(x[i]);
  }
  s[threadIdx.x] = acc;
  BlockTree(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

__global__ void AddPartials(const double* __restrict__ partials, double* acc) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = partials[threadIdx.x] + partials[threadIdx.x + kThreads];
  BlockTree(s);
  if (threadIdx.x == 0) *acc += s[0];
}

static_assert(kBlocks == 2 * kThreads, "AddPartials folds the partials into one block's threads");

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
