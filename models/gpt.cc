#include "models/gpt.h"

#include <stdexcept>

#include <ATen/ops/arange.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/nn/init.h>

namespace zeropp {
namespace models {

namespace {

// torch::nn::Linear's C++ forward (functional linear) multiplies a 3-D input and then adds the bias
// in a separate broadcast pass; at::linear, what Python's nn.Linear calls, folds a contiguous input
// into one GEMM with the bias added in its epilogue. On a lent H100 those separate adds took 10.7 ms
// of a 1.2B GPT's 155 ms step (benchmarks/results/gpu-2026-11-27b.txt, OPS_TOP by=aten::add_).
at::Tensor Linear(const torch::nn::Linear& l, const at::Tensor& x) { return at::linear(x, l->weight, l->bias); }

}  // namespace

void GptConfig::Validate() const {
  auto need = [](const char* field, int64_t v) {
    if (v < 1) {
      throw std::invalid_argument(std::string("gpt.") + field + ": got " + std::to_string(v) +
                                  ", expected >= 1");
    }
  };
  need("vocab", vocab);
  need("context", context);
  need("width", width);
  need("depth", depth);
  need("heads", heads);
  if (width % heads != 0) {
    throw std::invalid_argument("gpt.width: got " + std::to_string(width) +
                                ", expected a multiple of gpt.heads (" + std::to_string(heads) + ")");
  }
}

int64_t GptConfig::NumParameters() const {
  const int64_t c = width;
  const int64_t block = 2 * 2 * c + (c * 3 * c + 3 * c) + (c * c + c) + (c * 4 * c + 4 * c) + (4 * c * c + c);
  return vocab * c + context * c + depth * block + 2 * c;
}

double GptConfig::TrainingFlopsPerToken() const {
  const double c = static_cast<double>(width), l = static_cast<double>(depth);
  return 6 * (l * 12 * c * c + static_cast<double>(vocab) * c) + 12 * l * c * static_cast<double>(context);
}

std::string GptConfig::ToString() const {
  return "gpt(vocab=" + std::to_string(vocab) + ", context=" + std::to_string(context) +
         ", width=" + std::to_string(width) + ", depth=" + std::to_string(depth) +
         ", heads=" + std::to_string(heads) + ")";
}

TokenPosEmbeddingImpl::TokenPosEmbeddingImpl(int64_t vocab, int64_t context, int64_t width)
    : wte(register_module("wte", torch::nn::Embedding(vocab, width))),
      wpe(register_module("wpe", torch::nn::Embedding(context, width))) {}

at::Tensor TokenPosEmbeddingImpl::forward(const at::Tensor& ids) {
  at::Tensor pos = at::arange(ids.size(1), at::TensorOptions().dtype(at::kLong).device(ids.device()));
  return wte->forward(ids) + wpe->forward(pos);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t width, int64_t heads)
    : heads_(heads),
      qkv(register_module("qkv", torch::nn::Linear(width, 3 * width))),
      proj(register_module("proj", torch::nn::Linear(width, width))) {}

at::Tensor CausalSelfAttentionImpl::forward(const at::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2), d = c / heads_;
  auto parts = Linear(qkv, x).split(c, /*dim=*/2);
  auto heads = [&](const at::Tensor& y) { return y.view({b, t, heads_, d}).transpose(1, 2); };
  at::Tensor y = at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]),
                                                  /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
  return Linear(proj, y.transpose(1, 2).contiguous().view({b, t, c}));
}

BlockImpl::BlockImpl(int64_t width, int64_t heads)
    : ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
      ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
      attn(register_module("attn", CausalSelfAttention(width, heads))),
      fc(register_module("fc", torch::nn::Linear(width, 4 * width))),
      fc_out(register_module("fc_out", torch::nn::Linear(4 * width, width))) {}

at::Tensor BlockImpl::forward(const at::Tensor& x) {
  at::Tensor h = x + attn->forward(ln1->forward(x));
  return h + Linear(fc_out, at::gelu(Linear(fc, ln2->forward(h)), "tanh"));
}

LmHeadImpl::LmHeadImpl(at::Tensor tied_weight) : weight(register_parameter("weight", tied_weight)) {}

at::Tensor LmHeadImpl::forward(const at::Tensor& x) { return at::matmul(x, weight.t()); }

torch::nn::Sequential MakeGpt(const GptConfig& config) {
  config.Validate();
  torch::nn::Sequential seq;
  TokenPosEmbedding embed(config.vocab, config.context, config.width);
  seq->push_back("embed", embed);
  for (int64_t i = 0; i < config.depth; ++i) seq->push_back("block" + std::to_string(i), Block(config.width, config.heads));
  seq->push_back("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.width})));
  seq->push_back("head", LmHead(embed->wte->weight));
  torch::NoGradGuard no_grad;
  for (auto& p : seq->named_parameters()) {
    const std::string& name = p.key();
    if (name.find("ln") != std::string::npos) continue;  // LayerNorm keeps ones/zeros
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      p.value().zero_();
    } else {
      torch::nn::init::normal_(p.value(), 0.0, 0.02);
    }
  }
  return seq;
}

}  // namespace models
}  // namespace zeropp
