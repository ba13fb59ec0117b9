#include "scheduler/planner/train_flags.h"

#include "absl/strings/str_cat.h"

namespace zeropp {
namespace planner {

std::string TrainFlags(const ModelShape& m, const Layout& l, int global_batch, const Hardware& hw, std::string* why) {
  auto no = [&](std::string reason) {
    *why = std::move(reason);
    return std::string();
  };
  if (l.tp > 1) return no("tensor parallelism is the 3D baseline's (Megatron-LM); zeropp's engine trains none");
  if (l.schedule == "deepspeed") return no("DeepSpeed's pipeline schedule is the baseline's, not zeropp's engine's");
  if (l.design == Design::k3D && l.pp > 1 && l.dp > 1 && !l.dp_outer) {
    return no("Megatron's rank order (tp, dp, pp); zeropp's engine puts the replicas outermost (the dpouter layout)");
  }
  if (l.design == Design::k3D && l.grad_accumulation != Layout::GradAccumulation::kFused &&
      l.grad_accumulation != Layout::GradAccumulation::kSink) {
    return no(absl::StrCat("gradient accumulation '", GradAccumulationName(l.grad_accumulation),
                           "' is another executor's"));
  }
  std::string f;
  if (m.swiglu) {
    if (m.tied_embedding || m.qkv_bias || m.out_bias || m.mlp_bias) {
      return no("train's Llama has an untied head and no biases");
    }
    absl::StrAppend(&f, "--model llama --width ", m.hidden, " --depth ", m.layers, " --heads ", m.heads, " --kv-heads ",
                    m.kv_heads, " --ffn ", m.ffn);
  } else {
    if (m.ffn != 4 * m.hidden || m.kv_heads != m.heads || !m.tied_embedding) {
      return no("train's GPT has a 4h GeLU MLP, multi-head attention and a tied head");
    }
    absl::StrAppend(&f, "--model gpt --width ", m.hidden, " --depth ", m.layers, " --heads ", m.heads);
  }
  absl::StrAppend(&f, " --vocab ", m.vocab, " --context ", m.seq);
  const int zero = l.design == Design::k3D ? 1 : l.zero;
  absl::StrAppend(&f, " --pp ", l.pp, " --zero ", zero, " --dp ", l.dp);
  if (l.dp > 1) absl::StrAppend(&f, " --dp-mode ", l.zero1 ? "zero1" : "dp");
  absl::StrAppend(&f, " --micro-batch ", l.micro_batch, " --microbatches ", l.MicroBatches(global_batch));
  if (l.pp > 1) {
    absl::StrAppend(&f, " --schedule ", l.design == Design::kZeroPP ? "zeropp" : l.schedule);
    if (l.v > 1) absl::StrAppend(&f, " --chunks ", l.v);
    if (l.design == Design::kZeroPP) absl::StrAppend(&f, " --unit-size ", l.u);
    // ZeroPP's default recomputes every chunk but the last rank's last; the others' none.
    if (l.design == Design::kZeroPP && !l.recompute) absl::StrAppend(&f, " --pipeline-recompute none");
    if (l.design != Design::kZeroPP && l.recompute) absl::StrAppend(&f, " --pipeline-recompute all");
    if (l.max_deferred_w >= 0) absl::StrAppend(&f, " --max-deferred-w ", l.max_deferred_w);
  } else {
    if (l.recompute) absl::StrAppend(&f, " --recompute");
    if (l.prefetch != 1) absl::StrAppend(&f, " --prefetch ", l.prefetch);
  }
  if (l.offload != Offload::kNone) absl::StrAppend(&f, " --offload-optimizer ", OffloadName(l.offload));
  if (l.params_offload != Offload::kNone) absl::StrAppend(&f, " --offload-params ", OffloadName(l.params_offload));
  if (l.activations_offload != Offload::kNone) {
    absl::StrAppend(&f, " --offload-activations ", OffloadName(l.activations_offload));
  }
  if (hw.shared_compute_units == 0) absl::StrAppend(&f, " --device cuda");
  if (hw.value_bytes == 2) absl::StrAppend(&f, " --param-dtype bf16 --reduce-dtype ", l.reduce_fp32 ? "fp32" : "bf16");
  return f;
}

}  // namespace planner
}  // namespace zeropp
