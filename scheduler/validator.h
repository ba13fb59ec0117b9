// validator.h: proves a schedule well-formed, or says exactly where it is not.
//
// Execution is simulated rank by rank: an action runs once its inputs exist. Sends are
// asynchronous (P2PMode::kEager, how the executor issues them), or rendezvous (kRendezvous): each
// run of consecutive transfers is posted as one batch and no transfer completes before its
// partner is posted by the peer (NCCL-style blocking p2p with batch_isend_irecv). Checked:
//   - every send is matched by exactly one receive (same kind, chunk, micro-batch, peers) and the
//     whole schedule completes without deadlock (a deadlock names each stuck rank and its action);
//   - every F/B/Bi runs while its chunk is gathered; gathers and releases alternate per chunk;
//   - every (chunk, micro-batch) has one forward and one backward (B, or Bi then W) per rank, in
//     data-dependency order across virtual stages;
//   - each chunk's gradient is reduced after its last backward; the optimizer step comes last.
// Reported per rank: peak stashed activations (forwards whose backward has not run; and of
// chunks that do not recompute, whose stash is whole activations rather than an input), peak
// gathered chunks, peak pending weight-gradient passes, and gather/reduce counts.
#pragma once

#include <string>
#include <vector>

#include "scheduler/schedule.h"

namespace zeropp {
namespace scheduler {

enum class P2PMode { kEager, kRendezvous };

struct RankReport {
  int peak_activations = 0;
  int peak_kept_activations = 0;  // of those, forwards of chunks that keep all they saved (not recomputed)
  int peak_gathered = 0;
  int peak_pending_w = 0;
  int gathers = 0;
  int reduce_grads = 0;
};

struct ValidationReport {
  bool ok = true;
  std::string error;  // empty when ok
  std::vector<RankReport> ranks;
};

ValidationReport Validate(const Schedule& s, P2PMode mode = P2PMode::kEager);

}  // namespace scheduler
}  // namespace zeropp
