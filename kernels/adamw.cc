#include "kernels/adamw.h"

#include <cmath>

namespace zeropp {
namespace kernels {

AdamWCoeffs MakeAdamWCoeffs(const AdamWHyper& h) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  return {h.beta1, h.beta2, 1.0f - h.beta1, 1.0f - h.beta2, h.eps, static_cast<float>(h.lr / bc1),
          1.0f / bc2_sqrt, 1.0f - h.lr * h.weight_decay};
}

void AdamWReference(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                    const AdamWHyper& h) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step));
  const float step_size = static_cast<float>(h.lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = 1.0f - h.lr * h.weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    float m = exp_avg[i] * h.beta1 + (1.0f - h.beta1) * g;
    float v = exp_avg_sq[i] * h.beta2 + (1.0f - h.beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = std::sqrt(v) / bc2_sqrt + h.eps;
    param[i] = param[i] * decay - step_size * m / denom;
  }
}

}  // namespace kernels
}  // namespace zeropp
