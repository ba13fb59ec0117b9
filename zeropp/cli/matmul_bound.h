// matmul_bound.h: the matrix-multiply throughput of this rank, at its intra-op threads, on its
// device and compute dtype: the denominator of model-FLOP utilisation (MFU). Shared by
// benchmarks/matmul_bench and `train --mfu`, so the benchmarks and the training job divide by the
// same measurement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace zeropp {
namespace cli {

struct GemmShape {
  std::string name;
  int64_t m = 0, k = 0, n = 0;  // [m x k] x [k x n]
  double Flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n); }
};

// A transformer layer's forward GEMMs (qkv, proj, fc, fc_out) and the head, for `tokens` rows per
// micro-batch; the backward's are the same sizes transposed.
std::vector<GemmShape> TransformerGemms(int64_t tokens, int64_t width, int64_t ffn, int64_t vocab);

// Seconds of one [m x k] x [k x n] product: the best of `reps` timed runs after one warm-up (each
// run synchronised with the device before its clock stops).
double BestGemmSeconds(const GemmShape& s, int reps, c10::Device device, c10::ScalarType dtype);

struct MatmulBound {
  double model_gemm_gflops = 0;  // the shapes' total FLOPs over their total best time
  double square_gflops = 0;      // one square product of side `square`
};

// Measures both. `per_shape` (optional) gets each shape's GFLOP/s, in order.
MatmulBound MeasureMatmulBound(const std::vector<GemmShape>& shapes, int64_t square, int reps, c10::Device device,
                               c10::ScalarType dtype, std::vector<double>* per_shape = nullptr);

// Model-FLOP utilisation: the model's FLOPs per second over the bound (0 when the bound is 0).
double Mfu(double tokens_per_s, double model_flops_per_token, double bound_flops_per_s);

}  // namespace cli
}  // namespace zeropp
