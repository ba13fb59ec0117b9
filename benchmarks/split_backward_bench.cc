// split_backward_bench: the cost of splitting a backward into Bi and W (split_backward.h) against
// autograd's own whole backward, on a pipeline chunk of the bench GPT (blocks, final norm, head,
// loss), one thread, with the host allocator as the Trainer sets it (zeropp/host_allocator.h).
// Ten repeats, each the median of 20 interleaved backward pairs; prints Bi, W and whole times,
// autograd's own input-gradient-only pass (the floor for Bi), and one RESULT line: the mean of the
// ten (Bi + W) / whole ratios, with their spread. Beside it, the same with layer norm's weight
// gradients in W (split_backward.h: not the default, as this line shows).
#include <ATen/Parallel.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "models/gpt.h"
#include "scheduler/runtime/split_backward.h"
#include "zeropp/host_allocator.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main() {
  at::set_num_threads(1);
  const zeropp::HostAllocatorSettings alloc = zeropp::TuneHostAllocator();
  zeropp::models::GptConfig g;
  g.vocab = 256;
  g.context = 64;
  g.width = 256;
  g.depth = 4;
  g.heads = 8;
  torch::nn::Sequential seq = zeropp::models::MakeGpt(g);
  const at::Tensor ids = at::randint(g.vocab, {4, g.context}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor target = at::randint(g.vocab, {4, g.context}, at::TensorOptions().dtype(at::kLong));
  at::Tensor embedded;
  {
    c10::NoGradGuard no_grad;
    embedded = seq->begin()->forward(ids);
  }
  auto forward = [&](const at::Tensor& x) {
    at::Tensor y = x;
    for (size_t i = 1; i < seq->size(); ++i) y = (seq->begin() + i)->forward(y);
    return at::cross_entropy_loss(y.reshape({-1, g.vocab}), target.reshape({-1}));
  };
  const int reps = 20, repeats = 10;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> ratios, ratios_ln;
  double mw = 0, mb = 0, mww = 0, mi = 0;  // means over the repeats of the medians
  double mb_ln = 0, mw_ln = 0;             // the same with layer norm's weight gradients in W
  for (int rep = 0; rep < repeats; ++rep) {
    std::vector<double> whole, bi, w, input_only, bi_ln, w_ln;
    for (int r = 0; r < reps + 2; ++r) {
      at::Tensor x = embedded.clone().requires_grad_(true);
      at::Tensor loss = forward(x);
      auto t = Clock::now();
      torch::autograd::backward({loss});
      if (r >= 2) whole.push_back(Since(t));
      // Bi then W on a fresh forward, timed apart (after two warm-up rounds).
      auto split_pass = [&](bool defer_layer_norm, std::vector<double>* bi_s, std::vector<double>* w_s) {
        at::Tensor xs = embedded.clone().requires_grad_(true);
        const at::Tensor ls = forward(xs);
        zeropp::scheduler::SplitBackward split(defer_layer_norm);
        auto ts = Clock::now();
        split.RunInputPass(ls, at::Tensor(), xs);
        const double t_bi = Since(ts);
        ts = Clock::now();
        split.RunWeightPass();
        if (r >= 2) bi_s->push_back(t_bi), w_s->push_back(Since(ts));
      };
      split_pass(false, &bi, &w);
      split_pass(true, &bi_ln, &w_ln);
      // Autograd's own input-gradient-only pass: the floor for Bi.
      x = embedded.clone().requires_grad_(true);
      loss = forward(x);
      t = Clock::now();
      torch::autograd::grad({loss}, {x});
      if (r >= 2) input_only.push_back(Since(t));
    }
    const double a = median(whole), b = median(bi), c = median(w);
    ratios.push_back((b + c) / a);
    ratios_ln.push_back((median(bi_ln) + median(w_ln)) / a);
    mb_ln += median(bi_ln) / repeats, mw_ln += median(w_ln) / repeats;
    long pages = 0, rss = 0;
    std::ifstream("/proc/self/statm") >> pages >> rss;
    std::printf("repeat %d whole_ms=%.2f bi_ms=%.2f w_ms=%.2f ratio=%.3f rss_mb=%ld\n", rep, a * 1e3, b * 1e3, c * 1e3,
                (b + c) / a, rss * 4 / 1024);
    mw += a / repeats, mb += b / repeats, mww += c / repeats, mi += median(input_only) / repeats;
  }
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  double mean = 0;
  for (double r : ratios) mean += r / repeats;  // the RESULT: the mean ratio, its spread printed above
  std::printf("# %s, chunk = %lld blocks + norm + head, 4 x %lld tokens, 1 thread, %d repeats x median of %d; "
              "malloc mmap threshold %lld, trim threshold %lld (%s)\n",
              g.ToString().c_str(), (long long)g.depth, (long long)g.context, repeats, reps,
              (long long)alloc.mmap_threshold, (long long)alloc.trim_threshold, alloc.applied ? "applied" : "not glibc");
  std::printf("whole_backward_ms=%.2f bi_ms=%.2f w_ms=%.2f w_share=%.2f torch_input_grad_only_ms=%.2f "
              "ratio_mean=%.3f ratio_min=%.3f ratio_max=%.3f\n",
              mw * 1e3, mb * 1e3, mww * 1e3, mww / (mb + mww), mi * 1e3, mean, *lo, *hi);
  double mean_ln = 0;
  for (double r : ratios_ln) mean_ln += r / repeats;
  const auto [lo_ln, hi_ln] = std::minmax_element(ratios_ln.begin(), ratios_ln.end());
  std::printf("# layer norm's weight gradients in W too (SplitBackward(true), not the default): bi_ms=%.2f w_ms=%.2f "
              "ratio_mean=%.3f ratio_min=%.3f ratio_max=%.3f\n",
              mb_ln * 1e3, mw_ln * 1e3, mean_ln, *lo_ln, *hi_ln);
  // Batching W across the micro-batches a schedule defers together: the chunk's linear weight
  // gradients (a^T g into .grad) for 8 micro-batches, as 8 products or as one product over the
  // concatenated inputs and gradients (the concatenation counted: the activations are separate
  // tensors). Medians of 20; a ratio above 1 means batching costs more than it saves.
  {
    const int64_t u = 8, rows = 4 * g.context, h = g.width;
    const std::vector<std::pair<int64_t, int64_t>> shapes = {{h, 3 * h}, {h, h}, {h, 4 * h}, {4 * h, h}};
    std::vector<double> separate, batched;
    for (int r = 0; r < reps + 2; ++r) {
      double t_sep = 0, t_cat = 0;
      for (const auto& [in, out] : shapes) {
        std::vector<at::Tensor> a, gr;
        for (int64_t k = 0; k < u; ++k) a.push_back(at::randn({rows, in})), gr.push_back(at::randn({rows, out}));
        at::Tensor grad = at::zeros({in, out});
        auto t = Clock::now();
        for (int64_t k = 0; k < u; ++k) grad.addmm_(a[k].t(), gr[k]);
        t_sep += Since(t);
        t = Clock::now();
        grad.addmm_(at::cat(a).t(), at::cat(gr));
        t_cat += Since(t);
      }
      if (r >= 2) separate.push_back(t_sep), batched.push_back(t_cat);
    }
    std::printf("# W batched across %lld micro-batches (4 linear weight gradients per block, %lld tokens each): "
                "separate_ms=%.2f concatenated_ms=%.2f ratio=%.3f\n",
                (long long)u, (long long)rows, median(separate) * 1e3, median(batched) * 1e3,
                median(batched) / median(separate));
  }
  std::printf("RESULT split-backward bi_plus_w_ms=%.2f ms reference=%.2f ratio=%.3f target=1.05 %s\n", (mb + mww) * 1e3,
              mw * 1e3, mean, mean <= 1.05 ? "MET" : "MISSED");
  return 0;
}
