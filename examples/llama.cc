// llama.cc: a Llama-style decoder written as a user writes it in their own code (RMSNorm, rotary
// positions, SwiGLU, grouped-query attention), wrapped and trained with zeropp's public header.
//
//   ./zpp run --nproc-per-node 2 -- bazel-bin/examples/llama                  # ZeRO-3 over 2 ranks
//   ./zpp run --nproc-per-node 2 -- bazel-bin/examples/llama --pp 2           # 2 pipeline stages
//
// The data is a synthetic language (each token follows from the previous by a fixed affine rule,
// from random starts), so the loss falls within a few dozen steps without any download.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "zeropp/cli/cli_main.h"
#include "zeropp/zeropp.h"

namespace {

constexpr int64_t kVocab = 64, kDim = 64, kHeads = 4, kKvHeads = 2, kHidden = 172, kLayers = 4, kSeq = 32;

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-6) * weight;
}

// Rotates pairs of channels by position-dependent angles (rotary position embedding).
at::Tensor Rotary(const at::Tensor& x) {  // x: [batch, heads, seq, head_dim]
  const int64_t seq = x.size(2), half = x.size(3) / 2;
  at::Tensor inv = at::pow(10000.0, -at::arange(half, x.options()) / half);
  at::Tensor ang = at::arange(seq, x.options()).unsqueeze(1) * inv.unsqueeze(0);  // [seq, half]
  at::Tensor cos = ang.cos(), sin = ang.sin();
  at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

struct TokenEmbeddingImpl : torch::nn::Module {
  TokenEmbeddingImpl() { table = register_module("table", torch::nn::Embedding(kVocab, kDim)); }
  at::Tensor forward(const at::Tensor& ids) { return table->forward(ids); }
  torch::nn::Embedding table{nullptr};
};
TORCH_MODULE(TokenEmbedding);

struct DecoderLayerImpl : torch::nn::Module {
  DecoderLayerImpl() {
    attn_norm = register_parameter("attn_norm", at::ones({kDim}));
    mlp_norm = register_parameter("mlp_norm", at::ones({kDim}));
    const int64_t hd = kDim / kHeads;
    q = register_module("q", torch::nn::Linear(torch::nn::LinearOptions(kDim, kHeads * hd).bias(false)));
    kv = register_module("kv", torch::nn::Linear(torch::nn::LinearOptions(kDim, 2 * kKvHeads * hd).bias(false)));
    o = register_module("o", torch::nn::Linear(torch::nn::LinearOptions(kHeads * hd, kDim).bias(false)));
    gate_up = register_module("gate_up", torch::nn::Linear(torch::nn::LinearOptions(kDim, 2 * kHidden).bias(false)));
    down = register_module("down", torch::nn::Linear(torch::nn::LinearOptions(kHidden, kDim).bias(false)));
  }
  at::Tensor forward(const at::Tensor& x) {
    const int64_t b = x.size(0), s = x.size(1), hd = kDim / kHeads;
    at::Tensor h = RmsNorm(x, attn_norm);
    at::Tensor qh = Rotary(q->forward(h).view({b, s, kHeads, hd}).transpose(1, 2));
    auto kvh = kv->forward(h).view({b, s, 2, kKvHeads, hd}).unbind(2);
    // Grouped-query attention: each key/value head serves kHeads / kKvHeads query heads.
    at::Tensor kh = Rotary(kvh[0].transpose(1, 2)).repeat_interleave(kHeads / kKvHeads, 1);
    at::Tensor vh = kvh[1].transpose(1, 2).repeat_interleave(kHeads / kKvHeads, 1);
    at::Tensor att = at::scaled_dot_product_attention(qh, kh, vh, {}, 0.0, /*is_causal=*/true);
    at::Tensor y = x + o->forward(att.transpose(1, 2).reshape({b, s, kDim}));
    auto gu = gate_up->forward(RmsNorm(y, mlp_norm)).chunk(2, -1);
    return y + down->forward(at::silu(gu[0]) * gu[1]);  // SwiGLU
  }
  at::Tensor attn_norm, mlp_norm;
  torch::nn::Linear q{nullptr}, kv{nullptr}, o{nullptr}, gate_up{nullptr}, down{nullptr};
};
TORCH_MODULE(DecoderLayer);

struct OutputHeadImpl : torch::nn::Module {
  OutputHeadImpl() {
    norm = register_parameter("norm", at::ones({kDim}));
    proj = register_module("proj", torch::nn::Linear(torch::nn::LinearOptions(kDim, kVocab).bias(false)));
  }
  at::Tensor forward(const at::Tensor& x) { return proj->forward(RmsNorm(x, norm)); }
  at::Tensor norm;
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(OutputHead);

// Sequences of the synthetic language: t[i+1] = (5 * t[i] + 3) mod kVocab.
void Batch(int64_t step, int64_t micro, int64_t shard, at::Tensor* x, at::Tensor* y) {
  at::Generator gen = at::detail::createCPUGenerator(7919 * step + 131 * micro + shard);
  at::Tensor start = at::randint(kVocab, {4, 1}, gen, at::TensorOptions().dtype(at::kLong));
  std::vector<at::Tensor> cols{start};
  for (int64_t i = 0; i < kSeq; ++i) cols.push_back((cols.back() * 5 + 3).remainder(kVocab));
  at::Tensor seq = at::cat(cols, 1);
  *x = seq.narrow(1, 0, kSeq);
  *y = seq.narrow(1, 1, kSeq);
}

int Main(int argc, char** argv) {
  zeropp::TrainerOptions options;
  options.engine.adamw.lr = 3e-3f;
  options.lr.warmup_steps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--pp") options.layout.pp = std::stoi(argv[i + 1]);
  }
  at::set_num_threads(1);
  torch::manual_seed(0);
  torch::nn::Sequential model;
  model->push_back(TokenEmbedding());
  for (int i = 0; i < kLayers; ++i) model->push_back(DecoderLayer());
  model->push_back(OutputHead());

  auto trainer = zeropp::Trainer::Create(model.ptr(), zeropp::DistEnv::FromEnvironment(), options);
  auto loss_fn = [](const at::Tensor& logits, const at::Tensor& target) {
    return at::cross_entropy_loss(logits.reshape({-1, kVocab}), target.reshape({-1}));
  };
  const int steps = 40;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<at::Tensor> xs(trainer->microbatches()), ys(trainer->microbatches());
    for (int m = 0; m < trainer->microbatches(); ++m) Batch(step, m, trainer->dp_rank(), &xs[m], &ys[m]);
    zeropp::StepResult r = trainer->Step(xs, ys, loss_fn);
    if (step == 0) first = r.loss;
    last = r.loss;
    if (trainer->groups().rank() == 0 && step % 10 == 0) std::printf("step %d loss %.4f\n", step, r.loss);
  }
  if (trainer->groups().rank() == 0) {
    std::printf("DONE steps=%d first_loss=%.4f last_loss=%.4f schedule=%s\n", steps, first, last,
                trainer->ScheduleName().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return zeropp::cli::RunMain(argc, argv, Main); }
