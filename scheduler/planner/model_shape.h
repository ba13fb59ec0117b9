// model_shape.h: a decoder-only transformer as the planner sees it: shapes only.
//
// A preset by name (gpt3-175b, llama2-7b, llama3-8b, ...), explicit numbers, or a Hugging Face
// config.json (hf_config.h). Counts are exact for the models zeropp builds (models/gpt.h, models/llama.h):
// parameters per layer, per-token FLOPs of every matmul, attention core FLOPs.
//   ModelShape m = ModelPreset("llama2-7b");  m.seq = 4096;
//   double p = m.Parameters();
#pragma once

#include <string>
#include <vector>

namespace zeropp {
namespace planner {

struct ModelShape {
  std::string name;
  int hidden = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;      // grouped-query attention; = heads for multi-head
  int ffn = 0;           // MLP inner width
  bool swiglu = false;   // gated MLP: three h x ffn matrices instead of two
  int vocab = 0;
  int seq = 0;
  bool tied_embedding = false;
  // A gated (Llama-family) block's biases; GPT's block always has all of them. Qwen2: q, k and v;
  // a transformers Llama config's attention_bias: q, k, v and o; its mlp_bias: gate, up and down.
  bool qkv_bias = false;
  bool out_bias = false;
  bool mlp_bias = false;
  bool flash_attention = true;  // attention core stores no s^2 tensors and skips masked blocks
  // With flash_attention: the kernel is FlashAttention 1 or its Triton port (2022-23), run at the
  // hardware's attention_efficiency_flash_v1; false: FlashAttention 2 or later (cuDNN, SDPA).
  bool flash_v1 = false;
  // Dense attention (flash_attention false) whose core is recomputed in backward instead of
  // stashed (Megatron's selective recomputation): no s^2 activations, one more core forward.
  bool selective_recompute = false;
  // Dense attention (flash_attention false) stashes its s^2 softmax output for backward, as
  // Megatron's kernels do. False: a core priced as dense that keeps no s^2 tensor, PyTorch's CPU
  // attention (a flash kernel whose speed a CPU description calibrates with dense FLOPs).
  bool keeps_scores = true;
  // Dropout in the blocks (Megatron's GPT: 0.1 on the attention probabilities and after the
  // attention and MLP outputs): its masks are stashed, and a dense attention core keeps the
  // dropped-out probabilities beside the softmax output. Llama-family and zeropp's own models
  // train without any (memory only: the cost model's element-wise passes are calibrated).
  bool dropout = false;
  int head_dim() const { return hidden / heads; }
  double LayerParameters() const;   // attention + MLP + norms
  double LayerMatmulWeights() const;  // its weight matrices: what the weight-gradient GEMMs write
  double EmbeddingParameters() const;  // input embedding (+ untied head, + learned positions)
  double Parameters() const;
  // Matmul FLOPs per token of one layer's forward (2 per multiply-add), no attention core.
  double LayerMatmulFlopsPerToken() const;
  // Attention core (QK^T and AV) FLOPs per token of one layer's forward, as a dense kernel
  // computes them (causal masking not skipped): 4 * seq * hidden.
  double AttentionFlopsPerToken() const;
  // Model FLOPs of one training token (forward + backward, no recomputation): the MFU numerator.
  double TrainFlopsPerToken() const;
  std::string Validate() const;  // "" or the first bad field with its value and what was expected
};

ModelShape ModelPreset(const std::string& name);  // throws std::invalid_argument listing the presets
std::vector<std::string> ModelPresetNames();

}  // namespace planner
}  // namespace zeropp
