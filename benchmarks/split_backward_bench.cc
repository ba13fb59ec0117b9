// split_backward_bench: the cost of splitting a backward into Bi and W (split_backward.h) against
// autograd's own whole backward, on a pipeline chunk of the bench GPT (blocks, final norm, head,
// loss), one thread. Prints Bi, W and whole times, autograd's own input-gradient-only pass (the
// floor for Bi), and one RESULT line: (Bi + W) / whole.
#include <ATen/Parallel.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "models/gpt.h"
#include "scheduler/runtime/split_backward.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main() {
  at::set_num_threads(1);
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
  const int reps = 20;
  std::vector<double> whole, bi, w, input_only;
  for (int r = 0; r < reps + 2; ++r) {
    at::Tensor x = embedded.clone().requires_grad_(true);
    at::Tensor loss = forward(x);
    auto t = Clock::now();
    torch::autograd::backward({loss});
    if (r >= 2) whole.push_back(Since(t));
    x = embedded.clone().requires_grad_(true);
    loss = forward(x);
    zeropp::scheduler::SplitBackward split;
    t = Clock::now();
    split.RunInputPass(loss, at::Tensor(), x);
    const double t_bi = Since(t);
    t = Clock::now();
    split.RunWeightPass();
    if (r >= 2) bi.push_back(t_bi), w.push_back(Since(t));
    // Autograd's own input-gradient-only pass: the floor for Bi.
    x = embedded.clone().requires_grad_(true);
    loss = forward(x);
    t = Clock::now();
    torch::autograd::grad({loss}, {x});
    if (r >= 2) input_only.push_back(Since(t));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double mw = median(whole), mb = median(bi), mww = median(w);
  std::printf("# %s, chunk = %lld blocks + norm + head, 4 x %lld tokens, 1 thread, median of %d\n",
              g.ToString().c_str(), (long long)g.depth, (long long)g.context, reps);
  std::printf("whole_backward_ms=%.2f bi_ms=%.2f w_ms=%.2f w_share=%.2f torch_input_grad_only_ms=%.2f\n", mw * 1e3,
              mb * 1e3, mww * 1e3, mww / (mb + mww), median(input_only) * 1e3);
  std::printf("RESULT split-backward bi_plus_w_ms=%.2f ms reference=%.2f ratio=%.3f target=1.05 %s\n",
              (mb + mww) * 1e3, mw * 1e3, (mb + mww) / mw, (mb + mww) / mw <= 1.05 ? "MET" : "MISSED");
  return 0;
}
