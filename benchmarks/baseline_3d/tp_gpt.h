// tp_gpt.h: the bundled GPT (models/gpt.h) rewritten the way Megatron requires, for the 3D
// baseline: tensor parallelism over a group of `tp` ranks.
//   - token embedding vocabulary-parallel (rows split; out-of-slice ids give zeros; ReduceFromTp),
//     position embedding and layer norms replicated;
//   - attention: QKV column-parallel (each rank its heads), output projection row-parallel
//     (ReduceFromTp, then the replicated bias);
//   - MLP: first linear column-parallel, second row-parallel;
//   - the head uses this rank's slice of the tied embedding: vocabulary-parallel logits, never
//     gathered (VocabParallelCrossEntropy).
// Built by slicing a reference model's weights, so that it computes the reference's function.
// With sequence parallelism (Megatron's), the residual stream, layer norms and dropout-free
// element-wise work run on this rank's slice of the sequence ([seq/tp, batch, hidden]); the
// column-parallel linears all-gather their input (and gather it again in backward, keeping only
// the slice), the row-parallel ones reduce-scatter their output, and the replicated parameters of
// that region get their gradients summed across the group (AllReduceSequenceParallelGrads, after
// backward). The modules are tp_stages.h's Sequential (which zeropp's executor pipelines); this
// class runs them in one process per TP rank.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "models/gpt.h"
#include "zeropp/communicator.h"

namespace zeropp {
namespace baseline3d {

class TpGpt : public torch::nn::Module {
 public:
  // `reference`: a MakeGpt model with config `cfg`; heads and vocab must divide by tp.size().
  TpGpt(const torch::nn::Sequential& reference, const models::GptConfig& cfg, Communicator& tp,
        bool sequence_parallel = false);
  // ids [B, T] -> this rank's logits [B, T, vocab / tp] ([T, B, vocab / tp] with sequence
  // parallelism; Loss takes either).
  at::Tensor forward(const at::Tensor& ids);
  // Mean cross-entropy of the next-token targets, identical on every TP rank.
  at::Tensor Loss(const at::Tensor& local_logits, const at::Tensor& targets);
  // With sequence parallelism: sums the gradients of the replicated parameters over the group
  // (each rank saw only its slice of the sequence). Call after backward; no-op otherwise.
  void AllReduceSequenceParallelGrads();
  int64_t vocab_begin() const { return vocab_begin_; }
  // Each parameter once (LibTorch lists the tied embedding under the head's name too).
  std::vector<at::Tensor> UniqueParameters() const;
  // Which rows/columns of the reference's `name` this rank holds: {dim, begin, size} per slice
  // (empty: replicated). For parity checks.
  struct Slice {
    int dim;
    int64_t begin, size;
  };
  static std::vector<Slice> SlicesOf(const std::string& name, const models::GptConfig& cfg, int rank, int size);
  // This module's parameter names ("block0/attn.qkv/weight" style) to the reference's.
  const std::map<std::string, std::string>& reference_names() const { return reference_names_; }

 private:
  std::map<std::string, std::string> reference_names_;
  models::GptConfig cfg_;
  Communicator& tp_;
  bool sp_ = false;
  int64_t vocab_begin_ = 0;
  torch::nn::Sequential seq_;
};

}  // namespace baseline3d
}  // namespace zeropp
