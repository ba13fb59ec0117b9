#include <cuda_runtime.h>

#include "kernels/cast_cuda.h"

namespace zeropp {
namespace kernels {
namespace {

__global__ void ToBf16(const float* __restrict__ in, uint16_t* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t u = __float_as_uint(in[i]);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x40);
    } else {
      out[i] = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
}

__global__ void ToFloat(const uint16_t* __restrict__ in, float* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __uint_as_float(static_cast<uint32_t>(in[i]) << 16);
  }
}

int Blocks(int64_t n) {
  const int64_t want = (n + 255) / 256;
  return static_cast<int>(want < 65535 ? (want > 0 ? want : 1) : 65535);
}

}  // namespace

int LaunchCastFloatToBf16Cuda(const float* in, uint16_t* out, int64_t n, void* stream) {
  if (n == 0) return 0;
  ToBf16<<<Blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(in, out, n);
  return static_cast<int>(cudaGetLastError());
}

int LaunchCastBf16ToFloatCuda(const uint16_t* in, float* out, int64_t n, void* stream) {
  if (n == 0) return 0;
  ToFloat<<<Blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(in, out, n);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kernels
}  // namespace zeropp
