// adamw_cpu.h: the fast CPU AdamW over flat fp32 shards and the fp32<->bf16 casts.
//
// Same formula as AdamWReference (adamw.h), in the fast paths' rounding order (three FMAs per
// element): every path (AVX-512, AVX2, scalar) and the CUDA kernel give the same bits; they agree
// with the textbook reference to rounding (tests print the max abs/rel error per path). The path is
// chosen at run time from the CPU's features (AVX-512F, else AVX2+FMA, else scalar) unless one is
// forced. Work is split into contiguous blocks across `threads` std::threads (1 = the caller's
// thread only); blocks are cache-line aligned so threads never share a line.
//
//   AdamWCpu(p, g, m, v, n, hyper);                      // fp32 gradient, best path, 1 thread
//   AdamWArgs a{p, nullptr, g_bf16, m, v, p_bf16_out};   // bf16 gradient in, bf16 copy out
#pragma once

#include <cstdint>
#include <string>

#include "kernels/adamw.h"

namespace zeropp {
namespace kernels {

enum class CpuPath { kScalar, kAvx2, kAvx512 };
const char* CpuPathName(CpuPath p);
CpuPath BestCpuPath();                  // from the running CPU's features
bool CpuPathAvailable(CpuPath p);

struct AdamWArgs {
  float* param = nullptr;               // fp32 master, updated in place
  const float* grad = nullptr;          // fp32 gradient, or
  const uint16_t* grad_bf16 = nullptr;  // bf16 gradient (exactly one of the two)
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  uint16_t* param_bf16_out = nullptr;   // optional: bf16 copy of the updated parameters
  int64_t n = 0;
  // Each gradient value is multiplied by this first (one fp32 rounding, as a separate multiply
  // would round it): gradient clipping's factor without a scaled copy of the gradient.
  float grad_scale = 1.0f;
};

// Throws std::invalid_argument when the forced path is not available on this CPU or the
// arguments are inconsistent.
void AdamWCpu(const AdamWArgs& args, const AdamWHyper& h, CpuPath path, int threads = 1);
inline void AdamWCpu(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h) {
  AdamWArgs a;
  a.param = p;
  a.grad = g;
  a.exp_avg = m;
  a.exp_avg_sq = v;
  a.n = n;
  AdamWCpu(a, h, BestCpuPath(), 1);
}

// Sum of x[i]^2 in double (the gradient norm's pass). Fixed chunks of 2^16 values, each summed
// over 8 interleaved partial sums, chunks added in order: the result depends neither on `threads`
// nor on the path (AVX-512, AVX2 or scalar: the same bits), which is the CPU's best unless forced.
// (A single running sum is one dependent double add per value: ~4x slower than memory here.)
double SumOfSquares(const float* x, int64_t n, int threads = 1, CpuPath path = BestCpuPath());
// The same over bf16 values (each widened exactly): an offloaded bf16 gradient's norm without an
// fp32 copy of it.
double SumOfSquaresBf16(const uint16_t* x, int64_t n, int threads = 1, CpuPath path = BestCpuPath());

// Round-to-nearest-even fp32 -> bf16, and bf16 -> fp32 (exact). NaN stays NaN. Plain loops: the
// AdamW kernel fuses the bf16 copy-out itself, these serve everything else.
void CastFloatToBf16(const float* in, uint16_t* out, int64_t n);
void CastBf16ToFloat(const uint16_t* in, float* out, int64_t n);

}  // namespace kernels
}  // namespace zeropp
