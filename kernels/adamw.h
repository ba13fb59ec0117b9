// adamw.h: fused AdamW over flat fp32 shards (decoupled weight decay, Loshchilov & Hutter),
// matching torch.optim.AdamW:
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
//   p = p*(1 - lr*wd) - lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
// One plain reference (AdamWReference) and a CUDA kernel (adamw_cuda.h) held to it by tests.
#pragma once

#include <cstdint>

namespace zeropp {
namespace kernels {

struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 1e-2f;
  int64_t step = 1;  // 1-based step count after this update
};

// The per-step coefficients every fast path uses (CPU vector and scalar paths, the CUDA kernel),
// rounded to fp32 the same way so that those paths agree bit for bit. Per element they compute
//   m = fma(m, b1, (1-b1)*g);  v = fma(v, b2, ((1-b2)*g)*g);  d = fma(sqrt(v), 1/sqrt(bc2), eps)
//   p = p*decay - (step_size*m)/d
// with every other operation rounded on its own (no contraction).
struct AdamWCoeffs {
  float b1, b2, one_minus_b1, one_minus_b2, eps, step_size, inv_bc2_sqrt, decay;
};
AdamWCoeffs MakeAdamWCoeffs(const AdamWHyper& h);

// Updates n elements in place. Single-threaded, no vectorisation: the textbook reference, which
// the fast paths match to rounding (not bit for bit).
void AdamWReference(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                    const AdamWHyper& h);

}  // namespace kernels
}  // namespace zeropp
