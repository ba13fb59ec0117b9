#include "benchmarks/baseline_3d/tp_gpt.h"

#include <stdexcept>


#include "benchmarks/baseline_3d/tp_stages.h"

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
  std::map<std::string, std::string> names;
  seq_ = register_module("seq", MakeTpSequential(reference, cfg, tp, sequence_parallel, &names));
  for (const auto& kv : names) reference_names_["seq." + kv.first] = kv.second;
  vocab_begin_ = tp.rank() * (cfg.vocab / tp.size());
}

at::Tensor TpGpt::forward(const at::Tensor& ids) { return seq_->forward(ids); }

at::Tensor TpGpt::Loss(const at::Tensor& local_logits, const at::Tensor& targets) {
  return TpLoss(local_logits, targets, cfg_.vocab, tp_, sp_);
}

std::vector<at::Tensor> TpGpt::UniqueParameters() const {
  std::vector<at::Tensor> unique;
  for (const at::Tensor& p : parameters(/*recurse=*/true)) {
    bool seen = false;
    for (const at::Tensor& q : unique) seen = seen || q.is_same(p);
    if (!seen) unique.push_back(p);
  }
  return unique;
}

void TpGpt::AllReduceSequenceParallelGrads() {
  if (!sp_) return;
  for (const auto& kv : named_parameters(/*recurse=*/true)) {
    if (IsReplicated(kv.key()) && kv.value().grad().defined()) tp_.AllReduce(kv.value().grad())->Wait();
  }
}

}  // namespace baseline3d
}  // namespace zeropp
