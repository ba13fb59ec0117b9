// gpt2_safetensors.h: the bundled GPT (models/gpt.h) as a Hugging Face GPT-2 safetensors file:
// export of a zeropp checkpoint to one consolidated file with GPT-2's names, and import of such a
// file (from Python's safetensors or transformers, or from an export) into a freshly built model.
//
//   zeropp:  embed.wte.weight  embed.wpe.weight  blockN.ln1.*  blockN.attn.qkv.*  blockN.attn.proj.*
//            blockN.ln2.*  blockN.fc.*  blockN.fc_out.*  ln_f.*  head.weight (tied to wte)
//   GPT-2:   wte.weight  wpe.weight  h.N.ln_1.*  h.N.attn.c_attn.*  h.N.attn.c_proj.*  h.N.ln_2.*
//            h.N.mlp.c_fc.*  h.N.mlp.c_proj.*  ln_f.*  (lm_head tied to wte, not stored)
// GPT-2's Conv1D weights are stored [in, out], so the four Linear weights are transposed.
// Loading never executes code: the file is parsed as safetensors (every header check).
#pragma once

#include <cstdint>
#include <string>

#include <torch/nn/modules/container/sequential.h>

namespace zeropp {
namespace tools {

struct Gpt2Name {
  std::string name;        // "" for the tied head
  bool transpose = false;  // a Conv1D weight in GPT-2
};
// Throws std::invalid_argument for a name the bundled GPT does not have.
Gpt2Name ToGpt2Name(const std::string& zeropp_name);

// Writes checkpoint `ckpt` (a step or save directory) as one GPT-2 safetensors file at `out`
// (temporary name, fsync, rename). Returns the number of tensors. Throws std::runtime_error.
int ExportGpt2(const std::string& ckpt, const std::string& out);

// Copies every tensor of GPT-2 file `path` into `model` (built by MakeGpt with matching sizes).
// Throws std::invalid_argument naming the file, the tensor and the problem (missing, shape,
// dtype). Returns the number of tensors read.
int ImportGpt2(const std::string& path, torch::nn::Sequential& model);

}  // namespace tools
}  // namespace zeropp
