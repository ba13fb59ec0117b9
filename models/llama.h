// llama.h: a Llama-style decoder (RMSNorm, rotary positions, SwiGLU, grouped-query attention, no
// biases, untied output head) written as ordinary LibTorch modules in a torch::nn::Sequential, the
// family the ZeroPP paper trains. Nothing here knows about zeropp.
//
// Children, in order: "embed" (token embedding), `depth` x "layerN" (pre-norm attention + MLP),
// "head" (final RMSNorm + output projection). Parameter names map one to one onto Hugging Face's
// LlamaForCausalLM (tools/hf_safetensors.h), and the arithmetic is the same (rotate-half rotary
// with theta 10000, key/value heads repeated per query group, RMSNorm eps 1e-6).
//
//   LlamaConfig cfg;  cfg.width = 128;  cfg.depth = 4;  cfg.heads = 4;  cfg.kv_heads = 2;
//   torch::nn::Sequential model = MakeLlama(cfg);    // input: int64 [batch, time] token ids
#pragma once

#include <cstdint>
#include <string>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

namespace zeropp {
namespace models {

struct LlamaConfig {
  int64_t vocab = 256;
  int64_t context = 64;   // the longest sequence trained on (rotary needs no table)
  int64_t width = 128;
  int64_t depth = 4;
  int64_t heads = 4;
  int64_t kv_heads = 0;   // 0: as many as heads (no grouping)
  int64_t ffn = 0;        // SwiGLU hidden size; 0: Llama's rule, 8/3 * width rounded up to 8
  double rope_theta = 10000.0;
  double norm_eps = 1e-6;
  int64_t KvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t Ffn() const { return ffn > 0 ? ffn : (8 * width / 3 + 7) / 8 * 8; }
  // Throws std::invalid_argument naming the field (llama.width, llama.kv_heads, ...).
  void Validate() const;
  int64_t NumParameters() const;
  double TrainingFlopsPerToken() const;  // as GptConfig's (PaLM convention)
  std::string ToString() const;
};

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t width, double eps);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;
  double eps_;
};
TORCH_MODULE(RmsNorm);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  explicit LlamaAttentionImpl(const LlamaConfig& c);
  at::Tensor forward(const at::Tensor& x);
  int64_t heads_, kv_heads_, head_dim_;
  double theta_;
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
};
TORCH_MODULE(LlamaAttention);

class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const LlamaConfig& c);
  at::Tensor forward(const at::Tensor& x);  // down(silu(gate(x)) * up(x))
  torch::nn::Linear gate{nullptr}, up{nullptr}, down{nullptr};
};
TORCH_MODULE(LlamaMlp);

class LlamaLayerImpl : public torch::nn::Module {
 public:
  explicit LlamaLayerImpl(const LlamaConfig& c);
  at::Tensor forward(const at::Tensor& x);
  RmsNorm attn_norm{nullptr}, mlp_norm{nullptr};
  LlamaAttention attn{nullptr};
  LlamaMlp mlp{nullptr};
};
TORCH_MODULE(LlamaLayer);

class LlamaHeadImpl : public torch::nn::Module {
 public:
  explicit LlamaHeadImpl(const LlamaConfig& c);
  at::Tensor forward(const at::Tensor& x);
  RmsNorm norm{nullptr};
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(LlamaHead);

// Rotary position embedding on x [batch, heads, time, head_dim] (rotate-half convention).
at::Tensor ApplyRotary(const at::Tensor& x, double theta);

// Builds the model with normal(0, 0.02) weights and unit norms from the current torch seed.
torch::nn::Sequential MakeLlama(const LlamaConfig& config);

}  // namespace models
}  // namespace zeropp
