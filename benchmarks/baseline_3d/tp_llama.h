// tp_llama.h: the Llama-style decoder (models/llama.h: RMSNorm, rotary, SwiGLU, grouped-query
// attention, untied head) in Megatron's tensor-parallel form, as a Sequential of stage modules
// that zeropp's executor pipelines like tp_stages.h's GPT:
//   - embedding vocabulary-parallel (rows split, ReduceFromTp);
//   - attention: q, k, v column-parallel by heads (each rank H/t query heads and the KV/t
//     key/value heads that serve them), o row-parallel;
//   - MLP: gate and up column-parallel, down row-parallel;
//   - RMSNorm weights replicated; the head's projection vocabulary-parallel (logits never
//     gathered: VocabParallelCrossEntropy, TpLoss).
// Built by slicing a MakeLlama reference, so it computes the reference's function. No sequence
// parallelism in this form.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/modules/container/sequential.h>

#include "benchmarks/baseline_3d/tp_gpt.h"
#include "models/llama.h"
#include "zeropp/communicator.h"

namespace zeropp {
namespace baseline3d {

// Throws std::invalid_argument unless heads, kv_heads, the SwiGLU width and vocab divide by
// tp.size().
torch::nn::Sequential MakeTpLlamaSequential(const torch::nn::Sequential& reference, const models::LlamaConfig& cfg,
                                            Communicator& tp);
// Which rows/columns of the reference's `name` rank `rank` of `size` holds (empty: replicated).
std::vector<TpGpt::Slice> LlamaSlicesOf(const std::string& name, const models::LlamaConfig& cfg, int rank, int size);

}  // namespace baseline3d
}  // namespace zeropp
