// tp_ops.h: Megatron's tensor-parallel primitives, for the 3D baseline only (never the product).
//
// The conjugate pairs that make a column-parallel layer followed by a row-parallel one exact:
//   CopyToTp(x)      forward: identity            backward: all-reduce (sum) over the TP group
//   ReduceFromTp(x)  forward: all-reduce (sum)    backward: identity
// plus the vocabulary-parallel cross-entropy, which never gathers the full logits: each rank holds
// the logits of its vocabulary slice; the max, the sum of exponentials and the target's logit are
// reduced across the group. Every collective goes through the TP Communicator, so its bytes are
// counted like zeropp's own.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zeropp/communicator.h"

namespace zeropp {
namespace baseline3d {

// Wall seconds this process has spent waiting for the TP collectives below, since it started.
double TpWaitSeconds();

// One wait for a TP collective: when it began and ended (steady clock, ns: one clock for every
// process of the machine), in the order this rank issued them, so TP peers' i-th entries are the
// same collective (tools/tp_wait_skew.py); and the CPU the process had used by then (every
// thread, ns), so the CPU spent inside the waits and between them can be told apart; and whether
// a forward or a backward issued it, so each wait can be set beside what the other groups' ranks
// were running (in 1f1b one stage runs a forward while the other runs a backward).
struct TpWait {
  enum Phase : int { kForward = 0, kBackward = 1 };
  int64_t begin_ns, end_ns;
  int64_t cpu_begin_ns, cpu_end_ns;
  Phase phase;
};
// While on, every wait is also kept in a log; TakeTpWaitLog returns it and empties it.
void SetTpWaitLogging(bool on);
std::vector<TpWait> TakeTpWaitLog();

at::Tensor CopyToTp(const at::Tensor& x, Communicator& tp);
at::Tensor ReduceFromTp(const at::Tensor& x, Communicator& tp);

// Sequence parallelism (Megatron's, on [seq, batch, hidden] tensors split along seq, dim 0):
//   GatherFromSeq(x)        forward: all-gather along seq     backward: reduce-scatter
//   ReduceScatterToSeq(x)   forward: reduce-scatter along seq backward: all-gather
//   ColumnParallelLinearSeq(x_local, w, b): all-gathers x_local, applies the column-parallel
//     linear, and keeps only x_local for backward, where it gathers it again to form the weight
//     gradient (Megatron's memory saving), then reduce-scatters the input gradient.
at::Tensor GatherFromSeq(const at::Tensor& x, Communicator& tp);
at::Tensor ReduceScatterToSeq(const at::Tensor& x, Communicator& tp);
at::Tensor ColumnParallelLinearSeq(const at::Tensor& x_local, const at::Tensor& weight, const at::Tensor& bias,
                                   Communicator& tp);

// Mean cross-entropy of `targets` ([N] int64, global vocabulary ids) under logits whose columns
// [vocab_begin, vocab_begin + local.size(1)) this rank holds (local: [N, V/tp]). Differentiable in
// `local`; the same value on every rank of `tp`.
at::Tensor VocabParallelCrossEntropy(const at::Tensor& local, const at::Tensor& targets, int64_t vocab_begin,
                                     Communicator& tp);

}  // namespace baseline3d
}  // namespace zeropp
