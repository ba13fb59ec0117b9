// tp_stages.h: the tensor-parallel GPT as a torch::nn::Sequential of stage modules (embedding,
// blocks, head), so that zeropp's own schedule IR and executor pipeline it (1F1B, interleaved)
// exactly as they pipeline the product's models: the 3D baseline is TP inside each module, PP by
// the executor, DP or ZeRO-1 by the engine across replicas (Trainer::SetModelParallel adds the TP
// group to the gradient norm and sums sequence-parallel gradients).
//
// Each child takes one tensor and returns one: ids -> hidden ([B, T, C], or [T/tp, B, C] with
// sequence parallelism) -> ... -> this rank's vocabulary slice of the logits. The head holds the
// very tensor the embedding holds (tied), so the engine exchanges its gradient between the first
// and the last stage. Parameter names are the reference's with '/' for '.'.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <torch/nn/modules/container/sequential.h>

#include "benchmarks/baseline_3d/tp_gpt.h"
#include "models/gpt.h"
#include "zeropp/communicator.h"

namespace zeropp {
namespace baseline3d {

// Slices `reference` (a MakeGpt model with config `cfg`) for rank tp.rank() of `tp`. Fills
// `reference_names` (this Sequential's parameter names -> the reference's). Throws
// std::invalid_argument when heads or vocab (or the context, with sequence parallelism) do not
// divide by tp.size().
torch::nn::Sequential MakeTpSequential(const torch::nn::Sequential& reference, const models::GptConfig& cfg,
                                       Communicator& tp, bool sequence_parallel,
                                       std::map<std::string, std::string>* reference_names);

// Registers on `m` the parts `slices` of `full` (the reference's `name`; all of it when `slices` is
// empty), concatenated along the slices' dimension, under `name` with '/' for '.'.
at::Tensor RegisterSlice(torch::nn::Module& m, const std::string& name, const at::Tensor& full,
                         const std::vector<TpGpt::Slice>& slices);
// Megatron's vocabulary-parallel lookup: rows of `local_weight` for ids in [vocab_begin,
// vocab_begin + rows), zeros for the others (the group's ReduceFromTp completes the embedding).
at::Tensor VocabParallelLookup(const at::Tensor& local_weight, const at::Tensor& ids, int64_t vocab_begin);

// The reference's name of a parameter of MakeTpSequential ("1.block0/ln1/weight" ->
// "block0.ln1.weight"; module prefixes, up to the last '.', are dropped).
std::string ReferenceName(const std::string& name);
// True for parameters every TP rank holds whole (layer and RMS norms, position embedding,
// row-parallel biases; GPT and Llama names): counted once in the gradient norm, and summed over the group with sequence parallelism.
bool IsReplicated(const std::string& name);

// Mean cross-entropy of next-token `targets` [B, T] under this rank's vocabulary slice of the
// logits ([B, T, V/tp], or [T, B, V/tp] with sequence parallelism); the same on every TP rank.
at::Tensor TpLoss(const at::Tensor& local_logits, const at::Tensor& targets, int64_t vocab, Communicator& tp,
                  bool sequence_parallel);

}  // namespace baseline3d
}  // namespace zeropp
