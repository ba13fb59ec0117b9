// hf_config.h: a model's shape read from its Hugging Face config.json, so that `./zpp plan --model
// PATH` plans the user's own checkpoint without retyping its numbers.
//
// Reads model_type llama and mistral (a gated SiLU MLP, RMSNorm, grouped-query attention, untied
// unless tie_word_embeddings; attention_bias and mlp_bias counted where set), qwen2 (the same with
// biases on q, k and v) and gpt2 (LayerNorm, biases, learned positions, tied); anything else is
// refused by name, as is a shape the planner would price wrongly (a head_dim other than
// hidden_size / num_attention_heads; a sliding attention window shorter than the sequence, which
// the planner would charge as full causal attention). The sequence is max_position_embeddings
// (n_positions for gpt2) unless `seq` is given; GPT-2's learned positions are counted at the
// sequence planned, as the planner's GPT builds them.
//   ModelShape m = ModelFromHfConfig("checkpoints/Llama-2-7b-hf", 4096);
#pragma once

#include <string>

#include "scheduler/planner/model_shape.h"

namespace zeropp {
namespace planner {

// PATH: a config.json, or a directory holding one. seq: the sequence length (0: the config's).
// Throws std::invalid_argument with one line naming the file, the field, its value and what was
// expected. The shape's name is the directory's (the file's stem when it is not config.json).
ModelShape ModelFromHfConfig(const std::string& path, int seq = 0);

// Whether --model's value names a file or a directory rather than a preset (a preset's name wins).
bool IsHfConfigPath(const std::string& model);

}  // namespace planner
}  // namespace zeropp
