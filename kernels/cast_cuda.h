// cast_cuda.h: fp32 <-> bf16 casts on a CUDA device (--config=cuda builds), bit-identical to the
// CPU casts of adamw_cpu.h (round to nearest even; NaN stays NaN). Device pointers; non-blocking
// on `stream` (a cudaStream_t, nullptr = default). Return the launch's cudaError_t as an int.
#pragma once

#include <cstdint>

namespace zeropp {
namespace kernels {

int LaunchCastFloatToBf16Cuda(const float* in, uint16_t* out, int64_t n, void* stream);
int LaunchCastBf16ToFloatCuda(const uint16_t* in, float* out, int64_t n, void* stream);

}  // namespace kernels
}  // namespace zeropp
