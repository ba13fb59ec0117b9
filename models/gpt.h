// gpt.h: a GPT-2-style decoder written as ordinary LibTorch modules and assembled into a
// torch::nn::Sequential. Nothing here knows about zeropp.
//
// Children, in order: TokenPosEmbedding, `depth` x Block (pre-LN causal self-attention + MLP),
// LayerNorm, LmHead. The head's weight IS the token embedding's weight (one tensor registered in
// two modules), as in GPT-2.
//
//   GptConfig cfg;  cfg.width = 128;  cfg.depth = 4;
//   torch::nn::Sequential model = MakeGpt(cfg);      // input: int64 [batch, time] token ids
//   at::Tensor logits = model->forward(ids);         // [batch, time, vocab]
#pragma once

#include <cstdint>
#include <string>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

namespace zeropp {
namespace models {

struct GptConfig {
  int64_t vocab = 256;   // byte-level by default
  int64_t context = 64;  // maximum sequence length
  int64_t width = 128;
  int64_t depth = 4;
  int64_t heads = 4;
  // Throws std::invalid_argument naming the field when width % heads != 0 or a size is < 1.
  void Validate() const;
  int64_t NumParameters() const;  // unique parameters (the tied head counted once)
  // Training FLOPs per token, the PaLM convention: 6 x the matmul parameters (the head included,
  // embedding lookups not) + 12 x depth x width x context for attention's two products.
  double TrainingFlopsPerToken() const;
  std::string ToString() const;
};

class TokenPosEmbeddingImpl : public torch::nn::Module {
 public:
  TokenPosEmbeddingImpl(int64_t vocab, int64_t context, int64_t width);
  at::Tensor forward(const at::Tensor& ids);  // [B, T] int64 -> [B, T, C]
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
};
TORCH_MODULE(TokenPosEmbedding);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(int64_t width, int64_t heads);
  at::Tensor forward(const at::Tensor& x);
  int64_t heads_;
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t width, int64_t heads);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::Linear fc{nullptr}, fc_out{nullptr};
};
TORCH_MODULE(Block);

// logits = x @ weight^T with `weight` shared with the token embedding.
class LmHeadImpl : public torch::nn::Module {
 public:
  explicit LmHeadImpl(at::Tensor tied_weight);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;
};
TORCH_MODULE(LmHead);

// Builds the model with GPT-2 initialisation (normal(0, 0.02), zero biases) from the current
// torch seed.
torch::nn::Sequential MakeGpt(const GptConfig& config);

}  // namespace models
}  // namespace zeropp
