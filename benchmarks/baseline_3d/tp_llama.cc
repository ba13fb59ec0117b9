#include "benchmarks/baseline_3d/tp_llama.h"

#include <stdexcept>

#include <ATen/TensorOperators.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/silu.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include "benchmarks/baseline_3d/tp_ops.h"
#include "benchmarks/baseline_3d/tp_stages.h"

namespace zeropp {
namespace baseline3d {
namespace {

bool EndsWith(const std::string& name, const std::string& t) {
  return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
}

struct Shared {
  models::LlamaConfig cfg;
  Communicator* tp;
  int64_t vocab_begin;
};

at::Tensor Take(torch::nn::Module& m, const std::string& name, const Shared& s,
                torch::OrderedDict<std::string, at::Tensor>& params) {
  return RegisterSlice(m, name, params[name], LlamaSlicesOf(name, s.cfg, s.tp->rank(), s.tp->size()));
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
}

class TpLlamaEmbedImpl : public torch::nn::Module {
 public:
  TpLlamaEmbedImpl(const Shared& s, torch::OrderedDict<std::string, at::Tensor>& p)
      : s_(s), w(Take(*this, "embed.weight", s, p)) {}
  at::Tensor forward(const at::Tensor& ids) {
    return ReduceFromTp(VocabParallelLookup(w, ids, s_.vocab_begin), *s_.tp);
  }
  Shared s_;
  at::Tensor w;
};
TORCH_MODULE(TpLlamaEmbed);

class TpLlamaLayerImpl : public torch::nn::Module {
 public:
  TpLlamaLayerImpl(const Shared& s, int64_t i, torch::OrderedDict<std::string, at::Tensor>& p) : s_(s) {
    const std::string l = "layer" + std::to_string(i) + ".";
    for (const char* n : {"attn_norm.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight", "attn.o.weight",
                          "mlp_norm.weight", "mlp.gate.weight", "mlp.up.weight", "mlp.down.weight"}) {
      w_.push_back(Take(*this, l + n, s, p));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    const models::LlamaConfig& c = s_.cfg;
    Communicator& tp = *s_.tp;
    const int64_t b = x.size(0), t = x.size(1), hd = c.width / c.heads;
    const int64_t heads = c.heads / tp.size(), kv = c.KvHeads() / tp.size();
    auto split = [&](const at::Tensor& y, int64_t n) { return y.view({b, t, n, hd}).transpose(1, 2); };
    at::Tensor h = CopyToTp(RmsNorm(x, w_[0], c.norm_eps), tp);
    at::Tensor q = models::ApplyRotary(split(at::linear(h, w_[1]), heads), c.rope_theta);
    at::Tensor k = models::ApplyRotary(split(at::linear(h, w_[2]), kv), c.rope_theta);
    at::Tensor v = split(at::linear(h, w_[3]), kv);
    if (kv != heads) {
      k = k.repeat_interleave(heads / kv, 1);
      v = v.repeat_interleave(heads / kv, 1);
    }
    at::Tensor y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
    at::Tensor out = x + ReduceFromTp(at::linear(y.transpose(1, 2).reshape({b, t, heads * hd}), w_[4]), tp);
    at::Tensor m = CopyToTp(RmsNorm(out, w_[5], c.norm_eps), tp);
    return out + ReduceFromTp(at::linear(at::silu(at::linear(m, w_[6])) * at::linear(m, w_[7]), w_[8]), tp);
  }
  Shared s_;
  std::vector<at::Tensor> w_;
};
TORCH_MODULE(TpLlamaLayer);

class TpLlamaHeadImpl : public torch::nn::Module {
 public:
  TpLlamaHeadImpl(const Shared& s, torch::OrderedDict<std::string, at::Tensor>& p)
      : s_(s), norm(Take(*this, "head.norm.weight", s, p)), proj(Take(*this, "head.proj.weight", s, p)) {}
  at::Tensor forward(const at::Tensor& x) {
    return at::linear(CopyToTp(RmsNorm(x, norm, s_.cfg.norm_eps), *s_.tp), proj);  // [B, T, V/tp]
  }
  Shared s_;
  at::Tensor norm, proj;
};
TORCH_MODULE(TpLlamaHead);

}  // namespace

std::vector<TpGpt::Slice> LlamaSlicesOf(const std::string& name, const models::LlamaConfig& cfg, int rank, int size) {
  const int64_t c = cfg.width, hd = cfg.width / cfg.heads, kv = cfg.KvHeads() * hd, f = cfg.Ffn();
  if (name == "embed.weight" || name == "head.proj.weight") return {{0, rank * (cfg.vocab / size), cfg.vocab / size}};
  if (EndsWith(name, ".attn.q.weight")) return {{0, rank * (c / size), c / size}};
  if (EndsWith(name, ".attn.k.weight") || EndsWith(name, ".attn.v.weight")) return {{0, rank * (kv / size), kv / size}};
  if (EndsWith(name, ".attn.o.weight")) return {{1, rank * (c / size), c / size}};
  if (EndsWith(name, ".mlp.gate.weight") || EndsWith(name, ".mlp.up.weight")) return {{0, rank * (f / size), f / size}};
  if (EndsWith(name, ".mlp.down.weight")) return {{1, rank * (f / size), f / size}};
  return {};  // RMSNorm weights
}

torch::nn::Sequential MakeTpLlamaSequential(const torch::nn::Sequential& reference, const models::LlamaConfig& cfg,
                                            Communicator& tp) {
  const int n = tp.size();
  if (cfg.heads % n != 0 || cfg.KvHeads() % n != 0 || cfg.Ffn() % n != 0 || cfg.vocab % n != 0) {
    throw std::invalid_argument("TP Llama: heads (" + std::to_string(cfg.heads) + "), kv_heads (" +
                                std::to_string(cfg.KvHeads()) + "), ffn (" + std::to_string(cfg.Ffn()) +
                                ") and vocab (" + std::to_string(cfg.vocab) + ") must divide by tp (" +
                                std::to_string(n) + ")");
  }
  Shared s{cfg, &tp, tp.rank() * (cfg.vocab / n)};
  c10::NoGradGuard no_grad;
  auto params = reference->named_parameters(/*recurse=*/true);
  torch::nn::Sequential seq;
  seq->push_back(TpLlamaEmbed(s, params));
  for (int64_t i = 0; i < cfg.depth; ++i) seq->push_back(TpLlamaLayer(s, i, params));
  seq->push_back(TpLlamaHead(s, params));
  return seq;
}

}  // namespace baseline3d
}  // namespace zeropp
