// hf_safetensors.h: the bundled models as Hugging Face safetensors files: export of a zeropp
// checkpoint to one consolidated file with Hugging Face's names, and import of such a file (from
// Python's safetensors or transformers, or from an export) into a freshly built model.
//
// GPT (models/gpt.h) <-> GPT-2 (GPT2LMHeadModel):
//   embed.wte.weight -> wte.weight     embed.wpe.weight -> wpe.weight     ln_f.* -> ln_f.*
//   blockN.ln1/ln2.* -> h.N.ln_1/ln_2.*   blockN.attn.qkv/proj.* -> h.N.attn.c_attn/c_proj.*
//   blockN.fc/fc_out.* -> h.N.mlp.c_fc/c_proj.*      head.weight: tied to wte, not stored
//   GPT-2's Conv1D weights are stored [in, out], so the four Linear weights are transposed.
// Llama (models/llama.h) <-> LlamaForCausalLM:
//   embed.weight -> model.embed_tokens.weight      head.norm.weight -> model.norm.weight
//   head.proj.weight -> lm_head.weight             layerN.attn_norm.weight -> model.layers.N.input_layernorm.weight
//   layerN.attn.{q,k,v,o}.weight -> model.layers.N.self_attn.{q,k,v,o}_proj.weight
//   layerN.mlp_norm.weight -> model.layers.N.post_attention_layernorm.weight
//   layerN.mlp.{gate,up,down}.weight -> model.layers.N.mlp.{gate,up,down}_proj.weight
// The family is told by the names (a GPT has embed.wte.weight, a Llama embed.weight). Loading never
// executes code: the file is parsed as safetensors (every header check).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/modules/container/sequential.h>

namespace zeropp {
namespace tools {

enum class HfFamily { kGpt2, kLlama };
const char* HfFamilyName(HfFamily f);  // "gpt2", "llama"

// The family of a model or checkpoint from its parameter names; throws std::invalid_argument
// when the names are neither the bundled GPT's nor the bundled Llama's.
HfFamily HfFamilyOf(const std::vector<std::string>& zeropp_names);

struct HfName {
  std::string name;        // "" for GPT-2's tied head
  bool transpose = false;  // a Conv1D weight in GPT-2
};
// Throws std::invalid_argument for a name the family's model does not have.
HfName ToHfName(HfFamily family, const std::string& zeropp_name);

struct ExportResult {
  HfFamily family;
  int tensors = 0;
};
// Writes checkpoint `ckpt` (a step or save directory) as one safetensors file with Hugging Face's
// names at `out` (temporary name, fsync, rename). Throws std::runtime_error.
ExportResult ExportHf(const std::string& ckpt, const std::string& out);

// Copies every tensor of Hugging Face file `path` into `model` (built by MakeGpt or MakeLlama with
// matching sizes). Throws std::invalid_argument naming the file, the tensor and the problem
// (missing, shape, dtype). Returns the number of tensors read.
int ImportHf(const std::string& path, torch::nn::Sequential& model);

}  // namespace tools
}  // namespace zeropp
