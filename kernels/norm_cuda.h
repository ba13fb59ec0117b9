// norm_cuda.h: the sum of squares of a gradient range on a CUDA device (--config=cuda builds), for
// the global gradient norm of clipping.
// Accumulated in fp64 in a fixed order (four interleaved grid-stride sums per thread over a fixed
// grid, a tree in each block, one block over the blocks' partial sums): the same bits on every run
// and every GPU, and equal to the host's fp64 sum (adamw_cpu.h SumOfSquares) to fp64 rounding. So
// the clipping factor, rounded to fp32, is the same whether a unit's gradients are measured on the
// GPU or on the host (offloaded), and offloading changes no result. (ATen's fp32 norm differed
// from the host's in the last bits, and Adam's normalisation of near-zero gradients grew that into
// a 8e-5 relative parameter difference over 10 steps: benchmarks/results/gpu-2026-11-27b.txt.)
// Device pointers; non-blocking on `stream` (a cudaStream_t, nullptr = default). Returns the
// launch's cudaError_t as an int.
#pragma once

#include <cstdint>

namespace zeropp {
namespace kernels {

// Device memory the launch needs for its blocks' partial sums.
int64_t NormPartialsBytes();
// *acc += sum of x[i]^2 over n values of fp32 (bf16 = false) or bf16 (bf16 = true, each widened
// exactly); `acc` is one double on the device, `partials` NormPartialsBytes() bytes on the device.
int LaunchAddSumOfSquaresCuda(const void* x, bool bf16, int64_t n, double* acc, void* partials, void* stream);

}  // namespace kernels
}  // namespace zeropp
