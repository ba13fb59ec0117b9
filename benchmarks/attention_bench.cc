// attention_bench: PyTorch's CPU attention core as the model calls it (models/gpt.cc:
// at::scaled_dot_product_attention, causal, fp32), forward then backward, at given shapes, for the
// attention efficiency ./zpp calibrate writes into a CPU box's hardware description
// (attention_efficiency, which the cost model otherwise takes as set by hand).
//
// The cost model prices a CPU box's attention as a dense core, 4 b s^2 (heads x head_dim) FLOPs
// forward and twice that backward, at attention_efficiency of the matmul peak, plus the scores'
// element-wise passes from bytes moved (scheduler/planner/cost_model.cc). PyTorch's CPU kernel is a
// flash kernel that skips the masked blocks, so its rate per dense FLOP is its own: measured here.
//
// Like benchmarks/linear_grid, each shape is timed in turns with a reference GEMM (the forward of
// --reference T,I,O) in the same window, whose rate is printed beside: a shared box's speed moves
// for seconds at a time, and ./zpp calibrate scales each rate by the grid's median reference rate
// over this one (tools/attention_fit.py).
//
//   attention_bench --threads 1 --shapes B,H,S,D[:B,H,S,D...] [--min-ms 200] [--reference T,I,O]
// Prints one line per shape:
//   ATTENTION batch=B heads=H seq=S head_dim=D forward_s=F backward_s=G dense_gflops=X reference_gflops=R
// forward_s, backward_s: the best of the timed turns after one warm-up, repeated until --min-ms has
// passed (at least 3); dense_gflops: the dense core's 3 x 4 b s^2 H D FLOPs over F + G.
#include <ATen/Parallel.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/split.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// N positive integers separated by ','.
bool ParseInts(absl::string_view text, size_t n, std::vector<int64_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) return false;
    out->push_back(v);
  }
  return out->size() == n;
}

// Shapes B,H,S,D separated by ':'.
bool ParseShapes(absl::string_view text, std::vector<std::array<int64_t, 4>>* out) {
  std::vector<int64_t> v;
  for (absl::string_view part : absl::StrSplit(text, ':')) {
    if (!ParseInts(part, 4, &v)) return false;
    out->push_back({v[0], v[1], v[2], v[3]});
  }
  return !out->empty();
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double min_ms = 200;
  std::vector<std::array<int64_t, 4>> shapes;
  std::vector<int64_t> reference = {256, 512, 512};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    bool ok = true;
    if (k == "--threads") ok = (threads = std::atoi(v.c_str())) > 0;
    else if (k == "--min-ms") ok = (min_ms = std::atof(v.c_str())) > 0;
    else if (k == "--shapes") ok = ParseShapes(v, &shapes);
    else if (k == "--reference") ok = ParseInts(v, 3, &reference);
    else {
      std::fprintf(stderr, "error: unknown option %s (expected --threads --shapes --min-ms --reference)\n", k.c_str());
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "error: %s: got '%s', expected %s\n", k.c_str(), v.c_str(),
                   k == "--shapes"      ? "BATCH,HEADS,SEQ,HEAD_DIM of positive integers, ':' between shapes"
                   : k == "--reference" ? "three positive integers TOKENS,IN,OUT"
                                        : "a positive number");
      return 2;
    }
  }
  if (argc % 2 == 0 || shapes.empty()) {
    std::fprintf(stderr, "usage: attention_bench --threads T --shapes B,H,S,D[:B,H,S,D...] [--min-ms MS] "
                 "[--reference T,I,O]\n");
    return 2;
  }
  at::set_num_threads(threads);
  const at::Tensor rx = at::randn({reference[0], reference[1]}), rw = at::randn({reference[2], reference[1]}),
                   rb = at::randn({reference[2]});
  const double ref_flops = 2.0 * static_cast<double>(reference[0] * reference[1] * reference[2]);
  for (const auto& [b, h, s, d] : shapes) {
    // As the model hands them to the kernel: q, k and v views of one [batch, seq, 3 x width] projection,
    // [batch, heads, seq, head_dim] by a transpose; the gradient coming back the same.
    const at::Tensor qkv = at::randn({b, s, 3 * h * d}).requires_grad_();
    const at::Tensor dy = at::randn({b, s, h, d}).transpose(1, 2);
    auto heads = [&](const at::Tensor& y) { return y.view({b, s, h, d}).transpose(1, 2); };
    auto turn = [&](double* fwd, double* bwd) {
      auto t0 = Clock::now();
      const auto parts = qkv.split(h * d, /*dim=*/2);
      at::Tensor y = at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]),
                                                      /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
      *fwd = Since(t0);
      t0 = Clock::now();
      y.backward(dy);
      *bwd = Since(t0);
      qkv.mutable_grad().reset();
    };
    auto reference_s = [&] {
      const auto t0 = Clock::now();
      (void)at::addmm(rb, rx, rw.t());
      return Since(t0);
    };
    double fwd = 0, bwd = 0;
    (void)reference_s();  // warm-up
    turn(&fwd, &bwd);
    double best_fwd = 1e30, best_bwd = 1e30, best_ref = 1e30, spent = 0;
    for (int r = 0; r < 3 || spent < min_ms * 1e-3; ++r) {
      const double ref = reference_s();
      turn(&fwd, &bwd);
      best_ref = std::min(best_ref, ref);
      best_fwd = std::min(best_fwd, fwd);
      best_bwd = std::min(best_bwd, bwd);
      spent += ref + fwd + bwd;
    }
    const double dense = 3 * 4.0 * static_cast<double>(b * h * d) * static_cast<double>(s * s);
    std::printf("ATTENTION batch=%lld heads=%lld seq=%lld head_dim=%lld forward_s=%.6f backward_s=%.6f "
                "dense_gflops=%.2f reference_gflops=%.2f\n",
                static_cast<long long>(b), static_cast<long long>(h), static_cast<long long>(s),
                static_cast<long long>(d), best_fwd, best_bwd, dense / (best_fwd + best_bwd) / 1e9,
                ref_flops / best_ref / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
