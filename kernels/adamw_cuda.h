// adamw_cuda.h: the fused AdamW kernel on a CUDA device (built with --config=cuda only).
// Same formula and operation order as AdamWReference. All pointers are device pointers.
#pragma once

#include <cstdint>

#include "kernels/adamw.h"

namespace zeropp {
namespace kernels {

// Enqueues the update on `stream` (a cudaStream_t; nullptr = default stream). Non-blocking.
// Returns the cudaError_t of the launch as an int (0 = success).
int LaunchAdamWCuda(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                    const AdamWHyper& h, void* stream);

}  // namespace kernels
}  // namespace zeropp
