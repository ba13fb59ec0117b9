// adamw_cuda.h: the fused AdamW kernel on a CUDA device (built with --config=cuda only).
// The fast paths' rounding order (adamw.h): equal to AdamWCpu bit for bit, so offloading the
// optimizer to the host changes no result. All pointers are device pointers.
#pragma once

#include <cstdint>

#include "kernels/adamw.h"

namespace zeropp {
namespace kernels {

// Enqueues the update on `stream` (a cudaStream_t; nullptr = default stream). Non-blocking.
// Returns the cudaError_t of the launch as an int (0 = success).
int LaunchAdamWCuda(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                    const AdamWHyper& h, void* stream);

// Multi-tensor form: one launch updates `count` tensors (device pointers in host arrays, sizes in
// `numels`), each gradient multiplied by `grad_scale` as it is read (AdamWCpu's rounding: clipping
// needs no scaled copy). The pointer table is copied to `table_device` (device memory of at least
// MultiTensorTableBytes(count) bytes) on `stream`, and the host waits for that copy (the table is
// on its stack); the engine's path, FillMultiTensorTable + LaunchMultiTensorAdamWFromTable, copies
// it from page-locked memory instead and does not wait.
int64_t MultiTensorTableBytes(int count);
int LaunchMultiTensorAdamWCuda(float* const* params, const float* const* grads, float* const* exp_avgs,
                               float* const* exp_avg_sqs, const int64_t* numels, int count, const AdamWHyper& h,
                               void* table_device, void* stream, float grad_scale = 1.0f);
// Writes the pointer table of `count` tensors to host memory `table` (MultiTensorTableBytes(count)
// bytes); returns their total element count.
int64_t FillMultiTensorTable(void* table, float* const* params, const float* const* grads, float* const* exp_avgs,
                             float* const* exp_avg_sqs, const int64_t* numels, int count);
// Enqueues the update over a table already on the device (or copied there earlier on `stream`).
int LaunchMultiTensorAdamWFromTable(const void* table_device, int count, int64_t total, const AdamWHyper& h,
                                    float grad_scale, void* stream);

}  // namespace kernels
}  // namespace zeropp
