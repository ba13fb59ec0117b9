#include "zeropp/cli/matmul_bound.h"

#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <chrono>

namespace zeropp {
namespace cli {

std::vector<GemmShape> TransformerGemms(int64_t tokens, int64_t width, int64_t ffn, int64_t vocab) {
  return {{"qkv", tokens, width, 3 * width},
          {"proj", tokens, width, width},
          {"fc", tokens, width, ffn},
          {"fc_out", tokens, ffn, width},
          {"head", tokens, width, vocab}};
}

double BestGemmSeconds(const GemmShape& s, int reps, c10::Device device, c10::ScalarType dtype) {
  const auto opts = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor a = at::randn({s.m, s.k}, opts), b = at::randn({s.k, s.n}, opts);
  // Reading one element back waits for the device's queue (a no-op wait on the CPU).
  auto sync = [&](const at::Tensor& c) { (void)c.select(0, 0).select(0, 0).item<float>(); };
  sync(at::mm(a, b));  // warm-up
  double best = 1e30;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    sync(at::mm(a, b));
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

MatmulBound MeasureMatmulBound(const std::vector<GemmShape>& shapes, int64_t square, int reps, c10::Device device,
                               c10::ScalarType dtype, std::vector<double>* per_shape) {
  MatmulBound r;
  double flops = 0, secs = 0;
  for (const GemmShape& s : shapes) {
    const double t = BestGemmSeconds(s, reps, device, dtype);
    if (per_shape) per_shape->push_back(s.Flops() / t / 1e9);
    flops += s.Flops();
    secs += t;
  }
  r.model_gemm_gflops = secs > 0 ? flops / secs / 1e9 : 0;
  const GemmShape sq{"square", square, square, square};
  r.square_gflops = sq.Flops() / BestGemmSeconds(sq, std::max(2, reps / 2), device, dtype) / 1e9;
  return r;
}

double Mfu(double tokens_per_s, double model_flops_per_token, double bound_flops_per_s) {
  return bound_flops_per_s > 0 ? tokens_per_s * model_flops_per_token / bound_flops_per_s : 0;
}

}  // namespace cli
}  // namespace zeropp
