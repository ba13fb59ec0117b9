#include "benchmarks/baseline_3d/tp_stages.h"

#include <stdexcept>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include "benchmarks/baseline_3d/tp_gpt.h"
#include "benchmarks/baseline_3d/tp_llama.h"
#include "benchmarks/baseline_3d/tp_ops.h"

namespace zeropp {
namespace baseline3d {
namespace {

struct Shared {
  models::GptConfig cfg;
  Communicator* tp;
  bool sp;
  int64_t vocab_begin, local_heads;
};

// Registers this rank's slice of the reference's `name` on `m`.
at::Tensor Take(torch::nn::Module& m, const std::string& name, const Shared& s,
                torch::OrderedDict<std::string, at::Tensor>& params) {
  return RegisterSlice(m, name, params[name], TpGpt::SlicesOf(name, s.cfg, s.tp->rank(), s.tp->size()));
}

class TpEmbedImpl : public torch::nn::Module {
 public:
  TpEmbedImpl(const Shared& s, torch::OrderedDict<std::string, at::Tensor>& p)
      : s_(s), wte(Take(*this, "embed.wte.weight", s, p)), wpe(Take(*this, "embed.wpe.weight", s, p)) {}
  at::Tensor forward(const at::Tensor& ids) {
    const int64_t t = ids.size(1);
    at::Tensor tok = VocabParallelLookup(wte, ids, s_.vocab_begin);
    if (!s_.sp) return ReduceFromTp(tok, *s_.tp) + at::embedding(wpe, at::arange(t, ids.options()));
    const int64_t local_t = t / s_.tp->size();
    return ReduceScatterToSeq(tok.transpose(0, 1).contiguous(), *s_.tp) +
           wpe.narrow(0, s_.tp->rank() * local_t, local_t).unsqueeze(1);
  }
  Shared s_;
  at::Tensor wte, wpe;
};
TORCH_MODULE(TpEmbed);

class TpBlockImpl : public torch::nn::Module {
 public:
  TpBlockImpl(const Shared& s, int64_t i, torch::OrderedDict<std::string, at::Tensor>& p) : s_(s) {
    const std::string b = "block" + std::to_string(i) + ".";
    for (const char* n : {"ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
                          "attn.proj.bias", "ln2.weight", "ln2.bias", "fc.weight", "fc.bias", "fc_out.weight",
                          "fc_out.bias"}) {
      w_.push_back(Take(*this, b + n, s, p));
    }
  }
  at::Tensor forward(const at::Tensor& x_in) {
    const at::Tensor &ln1_w = w_[0], &ln1_b = w_[1], &qkv_w = w_[2], &qkv_b = w_[3], &proj_w = w_[4],
                     &proj_b = w_[5], &ln2_w = w_[6], &ln2_b = w_[7], &fc_w = w_[8], &fc_b = w_[9],
                     &out_w = w_[10], &out_b = w_[11];
    Communicator& tp = *s_.tp;
    const int64_t c = s_.cfg.width, local_c = c / tp.size(), hd = c / s_.cfg.heads;
    at::Tensor x = x_in;
    if (!s_.sp) {
      const int64_t b = x.size(0), t = x.size(1);
      at::Tensor h = CopyToTp(at::layer_norm(x, {c}, ln1_w, ln1_b), tp);
      auto parts = at::linear(h, qkv_w, qkv_b).split(local_c, /*dim=*/2);
      auto heads = [&](const at::Tensor& y) { return y.view({b, t, s_.local_heads, hd}).transpose(1, 2); };
      at::Tensor y = at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {}, 0.0,
                                                      /*is_causal=*/true);
      y = y.transpose(1, 2).contiguous().view({b, t, local_c});
      x = x + ReduceFromTp(at::linear(y, proj_w), tp) + proj_b;
      at::Tensor m = CopyToTp(at::layer_norm(x, {c}, ln2_w, ln2_b), tp);
      m = at::gelu(at::linear(m, fc_w, fc_b), "tanh");
      return x + ReduceFromTp(at::linear(m, out_w), tp) + out_b;
    }
    // [T/tp, B, C] in, split along T, as Megatron does it.
    const int64_t t = x.size(0) * tp.size(), b = x.size(1);
    at::Tensor qkv = ColumnParallelLinearSeq(at::layer_norm(x, {c}, ln1_w, ln1_b), qkv_w, qkv_b, tp);
    auto parts = qkv.split(local_c, /*dim=*/2);  // [T, B, C/tp] each
    auto heads = [&](const at::Tensor& y) { return y.view({t, b, s_.local_heads, hd}).permute({1, 2, 0, 3}); };
    at::Tensor y = at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {}, 0.0,
                                                    /*is_causal=*/true);
    y = y.permute({2, 0, 1, 3}).reshape({t, b, local_c});
    x = x + ReduceScatterToSeq(at::linear(y, proj_w), tp) + proj_b;
    at::Tensor m = ColumnParallelLinearSeq(at::layer_norm(x, {c}, ln2_w, ln2_b), fc_w, fc_b, tp);
    return x + ReduceScatterToSeq(at::linear(at::gelu(m, "tanh"), out_w), tp) + out_b;
  }
  Shared s_;
  std::vector<at::Tensor> w_;
};
TORCH_MODULE(TpBlock);

class TpHeadImpl : public torch::nn::Module {
 public:
  TpHeadImpl(const Shared& s, const at::Tensor& wte, torch::OrderedDict<std::string, at::Tensor>& p)
      : s_(s), lnf_w(Take(*this, "ln_f.weight", s, p)), lnf_b(Take(*this, "ln_f.bias", s, p)),
        head(register_parameter("head/weight", wte)) {}
  at::Tensor forward(const at::Tensor& x) {
    const int64_t c = s_.cfg.width;
    if (!s_.sp) return at::linear(CopyToTp(at::layer_norm(x, {c}, lnf_w, lnf_b), *s_.tp), head);
    return at::linear(GatherFromSeq(at::layer_norm(x, {c}, lnf_w, lnf_b), *s_.tp), head);  // [T, B, V/tp]
  }
  Shared s_;
  at::Tensor lnf_w, lnf_b, head;
};
TORCH_MODULE(TpHead);

}  // namespace

at::Tensor RegisterSlice(torch::nn::Module& m, const std::string& name, const at::Tensor& full,
                         const std::vector<TpGpt::Slice>& slices) {
  std::vector<at::Tensor> parts;
  for (const auto& sl : slices) parts.push_back(full.narrow(sl.dim, sl.begin, sl.size));
  at::Tensor t = parts.empty() ? full.clone() : at::cat(parts, slices[0].dim).clone();
  std::string key = name;  // LibTorch refuses dots in a parameter's own name
  for (char& ch : key) ch = ch == '.' ? '/' : ch;
  return m.register_parameter(key, t.contiguous());
}

at::Tensor VocabParallelLookup(const at::Tensor& local_weight, const at::Tensor& ids, int64_t vocab_begin) {
  // Ids outside this rank's slice look up row 0 and are zeroed.
  const at::Tensor outside = (ids < vocab_begin) | (ids >= vocab_begin + local_weight.size(0));
  return at::embedding(local_weight, (ids - vocab_begin).masked_fill(outside, 0)).masked_fill(outside.unsqueeze(-1), 0.0);
}

std::string ReferenceName(const std::string& name) {
  std::string n = name.substr(name.rfind('.') + 1);  // module prefixes end at the last '.'; keys use '/'

  for (char& ch : n) ch = ch == '/' ? '.' : ch;
  return n;
}

bool IsReplicated(const std::string& name) {
  // Slices depend on the name only; sizes do not matter here. GPT and Llama names never collide.
  models::GptConfig gpt;
  gpt.vocab = gpt.width = gpt.heads = 2;
  models::LlamaConfig llama;
  llama.vocab = llama.width = llama.heads = llama.ffn = 2;
  const std::string ref = ReferenceName(name);
  return TpGpt::SlicesOf(ref, gpt, 0, 2).empty() && LlamaSlicesOf(ref, llama, 0, 2).empty();
}

torch::nn::Sequential MakeTpSequential(const torch::nn::Sequential& reference, const models::GptConfig& cfg,
                                       Communicator& tp, bool sequence_parallel,
                                       std::map<std::string, std::string>* reference_names) {
  const int n = tp.size();
  if (cfg.heads % n != 0 || cfg.vocab % n != 0) {
    throw std::invalid_argument("TP GPT: heads (" + std::to_string(cfg.heads) + ") and vocab (" +
                                std::to_string(cfg.vocab) + ") must divide by tp (" + std::to_string(n) + ")");
  }
  if (sequence_parallel && cfg.context % n != 0) {
    throw std::invalid_argument("TP GPT: sequence parallelism needs context (" + std::to_string(cfg.context) +
                                ") divisible by tp (" + std::to_string(n) + ")");
  }
  Shared s{cfg, &tp, sequence_parallel, tp.rank() * (cfg.vocab / n), cfg.heads / n};
  c10::NoGradGuard no_grad;
  auto params = reference->named_parameters(/*recurse=*/true);
  torch::nn::Sequential seq;
  TpEmbed embed(s, params);
  seq->push_back(embed);
  for (int64_t i = 0; i < cfg.depth; ++i) seq->push_back(TpBlock(s, i, params));
  seq->push_back(TpHead(s, embed->wte, params));
  if (reference_names) {
    for (const auto& kv : seq->named_parameters(/*recurse=*/true)) (*reference_names)[kv.key()] = ReferenceName(kv.key());
  }
  return seq;
}

at::Tensor TpLoss(const at::Tensor& local_logits, const at::Tensor& targets, int64_t vocab, Communicator& tp,
                  bool sequence_parallel) {
  const at::Tensor order = sequence_parallel ? targets.t().contiguous() : targets;  // the logits' order
  return VocabParallelCrossEntropy(local_logits.reshape({-1, local_logits.size(-1)}), order.reshape({-1}),
                                   tp.rank() * (vocab / tp.size()), tp);
}

}  // namespace baseline3d
}  // namespace zeropp
