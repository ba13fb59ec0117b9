// schedule.h: the schedule IR. A training step is, per pipeline rank, an ordered list of actions.
//
// Chunks: rank r holds v model chunks; chunk c on rank r is virtual stage c*pp + r. Activations
// flow r -> r+1 within a chunk and from the last rank's chunk c to rank 0's chunk c+1; gradients
// flow the reverse way. Every action names its chunk (or -1) and micro-batch (or -1); sends and
// receives name the peer pipeline rank.
//
// Text header: "schedule NAME pp= v= m= u=" (and " forward=1" for an evaluation schedule), then
// optionally "recompute: 10 11" (per rank, one digit per chunk) and "needs: 3>0" (chunk 3 also
// uses chunk 0's parameters), then one line per rank.
// The same Schedule is read by the validator (well-formedness, deadlock freedom, peak memory), the
// simulator (cost model) and the executor. Text form, one action per token, ranks on lines:
//   rank 0: G0 F0.0 SA0.0>1 ...   (see Action::ToString)
#pragma once

#include <string>
#include <vector>

namespace zeropp {
namespace scheduler {

enum class ActionKind {
  kGather,          // all-gather a chunk's parameters inside the stage (ZeRO-3)
  kRelease,         // free a chunk's gathered parameters
  kForward,         // F(chunk, mb)
  kBackward,        // B(chunk, mb): input and weight gradients together
  kBackwardInput,   // Bi(chunk, mb): input gradient only; pushes (input, output-grad) for W
  kBackwardWeight,  // W(chunk, mb): weight gradient of an earlier Bi
  kSendAct,         // send F's output activation of (chunk, mb) to peer
  kRecvAct,         // receive the input activation of (chunk, mb) from peer
  kSendGrad,        // send the input gradient of (chunk, mb) to peer
  kRecvGrad,        // receive the output gradient of (chunk, mb) from peer
  kReduceGrad,      // reduce-scatter the chunk's gradient inside the stage
  kOptimizerStep,
};
const char* ActionKindName(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::kForward;
  int chunk = -1;
  int mb = -1;
  int peer = -1;
  std::string ToString() const;  // G0 X0 F0.3 B0.3 Bi0.3 W0.3 SA0.3>1 RA0.3<0 SG.. RG.. RS0 OPT
  // The trace name of the forward a backward of a recomputed chunk runs again first: "R<c>.<mb>".
  std::string RecomputeName() const;
  static Action Parse(const std::string& token);  // throws std::invalid_argument naming the token
  bool operator==(const Action& o) const {
    return kind == o.kind && chunk == o.chunk && mb == o.mb && peer == o.peer;
  }
  bool IsCompute() const {
    return kind == ActionKind::kForward || kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput ||
           kind == ActionKind::kBackwardWeight;
  }
};

struct Schedule {
  std::string name;
  bool forward_only = false;  // evaluation (ForwardOnly): no backward is expected
  int pp = 1;
  int v = 1;   // chunks per rank
  int m = 1;   // micro-batches per step
  int u = 0;   // micro-batches per scheduling unit (ZeroPP), 0 otherwise
  std::vector<std::vector<Action>> ranks;
  // recompute[r][c]: chunk c on rank r keeps only its input after F and recomputes its forward
  // in B (empty = no recomputation anywhere).
  std::vector<std::vector<bool>> recompute;
  // needs[c]: other chunks of the same rank whose parameters chunk c also uses (tied tensors, as
  // a tied embedding and LM head on one rank); they must be gathered whenever c computes, and
  // c's backward adds to their gradients. Empty = none anywhere.
  std::vector<std::vector<int>> needs;
  const std::vector<int>& Needs(int chunk) const {
    static const std::vector<int> kNone;
    return chunk < static_cast<int>(needs.size()) ? needs[chunk] : kNone;
  }
  bool Recompute(int rank, int chunk) const {
    return rank < static_cast<int>(recompute.size()) && recompute[rank][chunk];
  }

  std::string ToString() const;
  static Schedule Parse(const std::string& text);  // inverse of ToString
  bool operator==(const Schedule& o) const;
  // Counts of an action kind on one rank.
  int Count(int rank, ActionKind kind) const;
};

}  // namespace scheduler
}  // namespace zeropp
