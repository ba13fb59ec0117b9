// matmul_bench: the machine's fp32 matrix-multiply throughput at the threads a rank uses, for the
// model's own GEMM shapes and one large square, as the denominator of model-FLOP utilisation (MFU)
// in the training benchmarks. Each shape: best of --reps timed runs after one warm-up (the same
// best-of treatment every competitor gets).
//
//   matmul_bench --threads 1 --width 768 --tokens 256 --vocab 256 [--ffn 3072] [--square 2048] [--reps 5]
// Prints a line per shape and one summary line:
//   MATMUL threads=T square=S square_gflops=X model_gemm_gflops=Y
// model_gemm_gflops: total FLOPs over total best time of one layer's GEMMs (qkv, proj, fc, fc_out)
// and the head, forward shapes (backward's are the same sizes transposed).
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "zeropp/cli/matmul_bound.h"

int main(int argc, char** argv) {
  int threads = 1, reps = 5;
  int64_t width = 768, tokens = 256, vocab = 256, ffn = 0, square = 2048;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (v < 1) {
      std::fprintf(stderr, "error: %s: got '%s', expected a positive integer\n", k.c_str(), argv[i + 1]);
      return 2;
    }
    if (k == "--threads") threads = static_cast<int>(v);
    else if (k == "--reps") reps = static_cast<int>(v);
    else if (k == "--width") width = v;
    else if (k == "--tokens") tokens = v;
    else if (k == "--vocab") vocab = v;
    else if (k == "--ffn") ffn = v;
    else if (k == "--square") square = v;
    else {
      std::fprintf(stderr, "error: unknown option %s (expected --threads --reps --width --tokens --vocab --ffn --square)\n",
                   k.c_str());
      return 2;
    }
  }
  if (ffn == 0) ffn = 4 * width;
  at::set_num_threads(threads);
  const std::vector<zeropp::cli::GemmShape> shapes = zeropp::cli::TransformerGemms(tokens, width, ffn, vocab);
  std::vector<double> gflops;
  const zeropp::cli::MatmulBound b =
      zeropp::cli::MeasureMatmulBound(shapes, square, reps, c10::Device(c10::kCPU), c10::kFloat, &gflops);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& s = shapes[i];
    std::printf("# gemm %-6s [%lld x %lld] x [%lld x %lld]: %.2f GFLOP/s\n", s.name.c_str(), (long long)s.m,
                (long long)s.k, (long long)s.k, (long long)s.n, gflops[i]);
  }
  std::printf("MATMUL threads=%d square=%lld square_gflops=%.2f model_gemm_gflops=%.2f\n", threads, (long long)square,
              b.square_gflops, b.model_gemm_gflops);
  return 0;
}
