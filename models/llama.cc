#include "models/llama.h"

#include <stdexcept>

#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/silu.h>
#include <torch/nn/init.h>

namespace zeropp {
namespace models {

void LlamaConfig::Validate() const {
  auto need = [](const char* field, int64_t v, int64_t lo) {
    if (v < lo) {
      throw std::invalid_argument(std::string("llama.") + field + ": got " + std::to_string(v) + ", expected >= " +
                                  std::to_string(lo));
    }
  };
  need("vocab", vocab, 1);
  need("context", context, 1);
  need("width", width, 1);
  need("depth", depth, 1);
  need("heads", heads, 1);
  need("kv_heads", kv_heads, 0);
  need("ffn", ffn, 0);
  if (width % heads != 0 || (width / heads) % 2 != 0) {
    throw std::invalid_argument("llama.width: got " + std::to_string(width) + ", expected heads (" +
                                std::to_string(heads) + ") times an even head size (rotary rotates pairs)");
  }
  if (heads % KvHeads() != 0) {
    throw std::invalid_argument("llama.kv_heads: got " + std::to_string(kv_heads) + ", expected a divisor of heads (" +
                                std::to_string(heads) + ")");
  }
}

int64_t LlamaConfig::NumParameters() const {
  const int64_t c = width, kv = KvHeads() * (width / heads);
  const int64_t layer = 2 * c + c * c + 2 * c * kv + c * c + 3 * c * Ffn();
  return 2 * vocab * c + depth * layer + c;
}

double LlamaConfig::TrainingFlopsPerToken() const {
  const double c = static_cast<double>(width), l = static_cast<double>(depth);
  const double kv = static_cast<double>(KvHeads() * (width / heads));
  const double layer = 2 * c * c + 2 * c * kv + 3 * c * static_cast<double>(Ffn());
  return 6 * (l * layer + static_cast<double>(vocab) * c) + 12 * l * c * static_cast<double>(context);
}

std::string LlamaConfig::ToString() const {
  return "llama(vocab=" + std::to_string(vocab) + ", context=" + std::to_string(context) + ", width=" +
         std::to_string(width) + ", depth=" + std::to_string(depth) + ", heads=" + std::to_string(heads) +
         ", kv_heads=" + std::to_string(KvHeads()) + ", ffn=" + std::to_string(Ffn()) + ")";
}

RmsNormImpl::RmsNormImpl(int64_t width, double eps) : weight(register_parameter("weight", at::ones({width}))), eps_(eps) {}

at::Tensor RmsNormImpl::forward(const at::Tensor& x) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_) * weight;
}

at::Tensor ApplyRotary(const at::Tensor& x, double theta) {
  const int64_t t = x.size(2), half = x.size(3) / 2;
  const auto opts = x.options();
  at::Tensor inv = at::pow(theta, at::arange(half, opts) * (-2.0 / static_cast<double>(x.size(3))));
  at::Tensor ang = at::arange(t, opts).unsqueeze(1) * inv.unsqueeze(0);  // [time, half]
  at::Tensor cos = ang.cos(), sin = ang.sin();
  at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

namespace {
torch::nn::Linear NoBias(int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); }
}  // namespace

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& c)
    : heads_(c.heads), kv_heads_(c.KvHeads()), head_dim_(c.width / c.heads), theta_(c.rope_theta),
      q(register_module("q", NoBias(c.width, c.width))),
      k(register_module("k", NoBias(c.width, c.KvHeads() * (c.width / c.heads)))),
      v(register_module("v", NoBias(c.width, c.KvHeads() * (c.width / c.heads)))),
      o(register_module("o", NoBias(c.width, c.width))) {}

at::Tensor LlamaAttentionImpl::forward(const at::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1);
  auto split = [&](const at::Tensor& y, int64_t n) { return y.view({b, t, n, head_dim_}).transpose(1, 2); };
  at::Tensor qh = ApplyRotary(split(q->forward(x), heads_), theta_);
  at::Tensor kh = ApplyRotary(split(k->forward(x), kv_heads_), theta_);
  at::Tensor vh = split(v->forward(x), kv_heads_);
  if (kv_heads_ != heads_) {  // grouped-query attention: each key/value head serves a group
    kh = kh.repeat_interleave(heads_ / kv_heads_, 1);
    vh = vh.repeat_interleave(heads_ / kv_heads_, 1);
  }
  at::Tensor y = at::scaled_dot_product_attention(qh, kh, vh, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
  return o->forward(y.transpose(1, 2).reshape({b, t, heads_ * head_dim_}));
}

LlamaMlpImpl::LlamaMlpImpl(const LlamaConfig& c)
    : gate(register_module("gate", NoBias(c.width, c.Ffn()))),
      up(register_module("up", NoBias(c.width, c.Ffn()))),
      down(register_module("down", NoBias(c.Ffn(), c.width))) {}

at::Tensor LlamaMlpImpl::forward(const at::Tensor& x) { return down->forward(at::silu(gate->forward(x)) * up->forward(x)); }

LlamaLayerImpl::LlamaLayerImpl(const LlamaConfig& c)
    : attn_norm(register_module("attn_norm", RmsNorm(c.width, c.norm_eps))),
      mlp_norm(register_module("mlp_norm", RmsNorm(c.width, c.norm_eps))),
      attn(register_module("attn", LlamaAttention(c))),
      mlp(register_module("mlp", LlamaMlp(c))) {}

at::Tensor LlamaLayerImpl::forward(const at::Tensor& x) {
  at::Tensor h = x + attn->forward(attn_norm->forward(x));
  return h + mlp->forward(mlp_norm->forward(h));
}

LlamaHeadImpl::LlamaHeadImpl(const LlamaConfig& c)
    : norm(register_module("norm", RmsNorm(c.width, c.norm_eps))), proj(register_module("proj", NoBias(c.width, c.vocab))) {}

at::Tensor LlamaHeadImpl::forward(const at::Tensor& x) { return proj->forward(norm->forward(x)); }

torch::nn::Sequential MakeLlama(const LlamaConfig& config) {
  config.Validate();
  torch::nn::Sequential seq;
  seq->push_back("embed", torch::nn::Embedding(config.vocab, config.width));
  for (int64_t i = 0; i < config.depth; ++i) seq->push_back("layer" + std::to_string(i), LlamaLayer(config));
  seq->push_back("head", LlamaHead(config));
  torch::NoGradGuard no_grad;
  for (auto& p : seq->named_parameters()) {
    if (p.key().find("norm") != std::string::npos) continue;  // RMSNorm weights stay ones
    torch::nn::init::normal_(p.value(), 0.0, 0.02);
  }
  return seq;
}

}  // namespace models
}  // namespace zeropp
