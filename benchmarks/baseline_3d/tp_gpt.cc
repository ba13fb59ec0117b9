#include "benchmarks/baseline_3d/tp_gpt.h"

#include <stdexcept>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <c10/core/GradMode.h>

#include "benchmarks/baseline_3d/tp_ops.h"

namespace zeropp {
namespace baseline3d {

std::vector<TpGpt::Slice> TpGpt::SlicesOf(const std::string& name, const models::GptConfig& cfg, int rank, int size) {
  const int64_t c = cfg.width, part = c / size;
  auto ends_with = [&](const char* s) {
    const std::string t(s);
    return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
  };
  if (name == "embed.wte.weight" || name == "head.weight") return {{0, rank * (cfg.vocab / size), cfg.vocab / size}};
  if (ends_with("attn.qkv.weight") || ends_with("attn.qkv.bias")) {  // this rank's heads of q, of k, of v
    return {{0, rank * part, part}, {0, c + rank * part, part}, {0, 2 * c + rank * part, part}};
  }
  if (ends_with("attn.proj.weight")) return {{1, rank * part, part}};
  if (ends_with(".fc.weight") || ends_with(".fc.bias")) return {{0, rank * 4 * part, 4 * part}};
  if (ends_with("fc_out.weight")) return {{1, rank * 4 * part, 4 * part}};
  return {};  // replicated: layer norms, position embedding, row-parallel biases
}

TpGpt::TpGpt(const torch::nn::Sequential& reference, const models::GptConfig& cfg, Communicator& tp,
             bool sequence_parallel)
    : cfg_(cfg), tp_(tp), sp_(sequence_parallel) {
  const int r = tp.rank(), n = tp.size();
  if (cfg.heads % n != 0 || cfg.vocab % n != 0) {
    throw std::invalid_argument("TpGpt: heads (" + std::to_string(cfg.heads) + ") and vocab (" +
                                std::to_string(cfg.vocab) + ") must divide by tp (" + std::to_string(n) + ")");
  }
  if (sequence_parallel && cfg.context % n != 0) {
    throw std::invalid_argument("TpGpt: sequence parallelism needs context (" + std::to_string(cfg.context) +
                                ") divisible by tp (" + std::to_string(n) + ")");
  }
  vocab_begin_ = r * (cfg.vocab / n);
  local_heads_ = cfg.heads / n;
  c10::NoGradGuard no_grad;
  auto params = reference->named_parameters(/*recurse=*/true);
  auto take = [&](const std::string& name) {
    const at::Tensor& full = params[name];
    std::vector<at::Tensor> parts;
    for (const Slice& s : SlicesOf(name, cfg, r, n)) parts.push_back(full.narrow(s.dim, s.begin, s.size));
    at::Tensor t = parts.empty() ? full.clone() : at::cat(parts, SlicesOf(name, cfg, r, n)[0].dim).clone();
    std::string key = name;  // LibTorch refuses dots in a parameter's own name
    for (char& ch : key) ch = ch == '.' ? '/' : ch;
    reference_names_[key] = name;
    return register_parameter(key, t.contiguous());
  };
  wte_ = take("embed.wte.weight");
  wpe_ = take("embed.wpe.weight");
  for (int64_t i = 0; i < cfg.depth; ++i) {
    const std::string b = "block" + std::to_string(i) + ".";
    blocks_.push_back({take(b + "ln1.weight"), take(b + "ln1.bias"), take(b + "attn.qkv.weight"),
                       take(b + "attn.qkv.bias"), take(b + "attn.proj.weight"), take(b + "attn.proj.bias"),
                       take(b + "ln2.weight"), take(b + "ln2.bias"), take(b + "fc.weight"), take(b + "fc.bias"),
                       take(b + "fc_out.weight"), take(b + "fc_out.bias")});
  }
  lnf_w_ = take("ln_f.weight");
  lnf_b_ = take("ln_f.bias");
}

at::Tensor TpGpt::forward(const at::Tensor& ids) {
  const int64_t b = ids.size(0), t = ids.size(1), c = cfg_.width, local_c = c / tp_.size();
  const int64_t v = wte_.size(0);
  // Vocabulary-parallel embedding: ids outside this rank's slice look up row 0 and are zeroed.
  const at::Tensor outside = (ids < vocab_begin_) | (ids >= vocab_begin_ + v);
  const at::Tensor local_ids = (ids - vocab_begin_).masked_fill(outside, 0);
  at::Tensor tok = at::embedding(wte_, local_ids).masked_fill(outside.unsqueeze(-1), 0.0);
  if (sp_) return ForwardSequenceParallel(tok, b, t);
  at::Tensor x = ReduceFromTp(tok, tp_) + at::embedding(wpe_, at::arange(t, ids.options()));
  for (const Block& k : blocks_) {
    at::Tensor h = CopyToTp(at::layer_norm(x, {c}, k.ln1_w, k.ln1_b), tp_);
    auto parts = at::linear(h, k.qkv_w, k.qkv_b).split(local_c, /*dim=*/2);
    auto heads = [&](const at::Tensor& y) { return y.view({b, t, local_heads_, c / cfg_.heads}).transpose(1, 2); };
    at::Tensor y = at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {}, 0.0,
                                                    /*is_causal=*/true);
    y = y.transpose(1, 2).contiguous().view({b, t, local_c});
    x = x + ReduceFromTp(at::linear(y, k.proj_w), tp_) + k.proj_b;
    at::Tensor m = CopyToTp(at::layer_norm(x, {c}, k.ln2_w, k.ln2_b), tp_);
    m = at::gelu(at::linear(m, k.fc_w, k.fc_b), "tanh");
    x = x + ReduceFromTp(at::linear(m, k.out_w), tp_) + k.out_b;
  }
  at::Tensor h = CopyToTp(at::layer_norm(x, {c}, lnf_w_, lnf_b_), tp_);
  return at::linear(h, wte_);  // this rank's vocabulary slice of the tied head
}

// [T, B, ...] layout throughout, split along T, as Megatron does it.
at::Tensor TpGpt::ForwardSequenceParallel(const at::Tensor& tok, int64_t b, int64_t t) {
  const int64_t c = cfg_.width, local_c = c / tp_.size(), local_t = t / tp_.size();
  at::Tensor x = ReduceScatterToSeq(tok.transpose(0, 1).contiguous(), tp_) +
                 wpe_.narrow(0, tp_.rank() * local_t, local_t).unsqueeze(1);
  for (const Block& k : blocks_) {
    at::Tensor qkv = ColumnParallelLinearSeq(at::layer_norm(x, {c}, k.ln1_w, k.ln1_b), k.qkv_w, k.qkv_b, tp_);
    auto parts = qkv.split(local_c, /*dim=*/2);  // [T, B, C/tp] each
    auto heads = [&](const at::Tensor& y) { return y.view({t, b, local_heads_, c / cfg_.heads}).permute({1, 2, 0, 3}); };
    at::Tensor y = at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {}, 0.0,
                                                    /*is_causal=*/true);
    y = y.permute({2, 0, 1, 3}).reshape({t, b, local_c});
    x = x + ReduceScatterToSeq(at::linear(y, k.proj_w), tp_) + k.proj_b;
    at::Tensor m = ColumnParallelLinearSeq(at::layer_norm(x, {c}, k.ln2_w, k.ln2_b), k.fc_w, k.fc_b, tp_);
    x = x + ReduceScatterToSeq(at::linear(at::gelu(m, "tanh"), k.out_w), tp_) + k.out_b;
  }
  return at::linear(GatherFromSeq(at::layer_norm(x, {c}, lnf_w_, lnf_b_), tp_), wte_);  // [T, B, V/tp]
}

at::Tensor TpGpt::Loss(const at::Tensor& local_logits, const at::Tensor& targets) {
  const at::Tensor order = sp_ ? targets.t().contiguous() : targets;  // the logits' [T, B] order
  return VocabParallelCrossEntropy(local_logits.reshape({-1, local_logits.size(-1)}), order.reshape({-1}),
                                   vocab_begin_, tp_);
}

void TpGpt::AllReduceSequenceParallelGrads() {
  if (!sp_) return;
  std::vector<at::Tensor> grads;
  auto add = [&](const at::Tensor& p) {
    if (p.grad().defined()) grads.push_back(p.grad());
  };
  add(wpe_);
  for (const Block& k : blocks_) {
    for (const at::Tensor* p : {&k.ln1_w, &k.ln1_b, &k.proj_b, &k.ln2_w, &k.ln2_b, &k.out_b}) add(*p);
  }
  add(lnf_w_);
  add(lnf_b_);
  for (at::Tensor& g : grads) tp_.AllReduce(g)->Wait();
}

}  // namespace baseline3d
}  // namespace zeropp
