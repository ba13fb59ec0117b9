// simulator.h: runs a schedule on a cost model and predicts step time, bubble, traffic and memory.
//
// Per rank, compute actions run in program order on one compute stream (a receive only posts: the
// forward or backward consuming it waits for its arrival); gathers and gradient
// reductions run on a comm stream (issued in program order, overlapping compute; a computation
// waits for its chunk's gather). Transfers between pipeline ranks are asynchronous sends that move
// once their receive is posted (rendezvous, as Gloo's and NCCL's point-to-point do: a receive
// posted after its send costs one more latency, the notice to the sender), arriving alpha +
// bytes/beta after that over the inter-stage link; gathers and reductions move
// bytes*(zero-1)/zero over the intra-stage link. Costs are per pipeline stage: a chunk of a rank
// with v chunks costs 1/v of them.
//
// bubble = (pp * (step_time - optimizer) - sum of F/B/W busy time) / that busy time, so uniform
// costs give (p-1)/m for GPipe and 1F1B, (p-1)/(v*m) for interleaved 1F1B.
// Time advances event by event over all ranks: on a box whose ranks outnumber its cores
// (CostModel::shared_cores) the ranks computing at a moment share the cores equally (processor
// sharing), so a pipeline rank that waits gives its core to the others, as the OS does.
// The trace is Chrome trace JSON (one track per rank), the executor's format.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "scheduler/schedule.h"
#include "scheduler/trace.h"

namespace zeropp {
namespace scheduler {

struct Link {
  double alpha_s = 0;           // latency per message
  double bytes_per_s = 1e300;   // bandwidth
  // >= 0: a wire-bound link (planner's LinkSpec::wire_latency_s): a message takes
  // max(alpha_s, wire_alpha_s + its bytes' time); < 0: alpha_s + its bytes' time.
  double wire_alpha_s = -1;
  // `bytes` moved by `messages` collectives or sends: each pays the latency, the bytes once.
  double Time(double bytes, double messages = 1) const {
    if (bytes <= 0) return 0.0;
    if (wire_alpha_s < 0 || messages <= 0) return messages * alpha_s + bytes / bytes_per_s;
    return messages * std::max(alpha_s, wire_alpha_s + bytes / messages / bytes_per_s);
  }
};

struct CostModel {
  double forward_s = 1.0;           // one micro-batch through a whole stage
  double backward_s = 2.0;          // B (input + weight)
  double backward_input_s = 1.0;    // Bi
  double backward_weight_s = 1.0;   // W
  // Of forward_s and backward_input_s, the time the rank waits in blocking collectives inside the
  // computation (tensor parallelism's): no compute unit is used meanwhile (see shared_cores).
  double forward_wait_s = 0;
  double backward_input_wait_s = 0;
  // The first virtual stage's input needs no gradient, so an executor runs its whole backward in
  // Bi (backward_s) and its W's are empty, as the executor does. false: uniform costs.
  bool first_stage_whole_backward = false;
  // Per pipeline rank, a factor on its compute times (unbalanced stages); empty = all 1.
  std::vector<double> rank_compute_scale;
  // Per virtual stage (chunk * pp + rank), seconds added to its F, Bi and W (B = Bi + W) on top
  // of the per-chunk share above: the embedding on the first, the LM head and loss on the last.
  struct StageExtra {
    double forward_s = 0, backward_input_s = 0, backward_weight_s = 0;
    double forward_wait_s = 0, backward_input_wait_s = 0;  // of the first two, as above
  };
  std::vector<StageExtra> virtual_stage_extra;
  // Per virtual stage, its share of the stage's F, Bi and W above and its parameters' bytes (in
  // compute dtype); empty: 1/v each and stage_param_bytes / v. Chunks of unequal size (ZeRO-3's
  // embedding, layer, norm and head units) set both.
  std::vector<double> chunk_compute_share;
  std::vector<double> chunk_param_bytes;
  // Per virtual stage, the collectives one gather or reduction of it takes (an executor gathers
  // each scheduling unit of a chunk by its own collective, each paying the link's latency); empty: 1.
  std::vector<double> chunk_collectives;
  double optimizer_s = 0.0;         // the step's tail: reductions across replicas, clipping, AdamW
  double activation_bytes = 0;      // per micro-batch crossing a stage boundary
  double stage_param_bytes = 0;     // a stage's parameters (all chunks) in compute dtype
  int zero = 1;                     // ranks sharing a stage (ZeRO-3 group)
  Link intra;                       // inside a stage (gathers, reduce-scatters)
  // A gather the rank waits on at once (the next computation in its program is the gathered
  // chunk's, as a per-micro-batch gather): a blocking collective, on this link when it is set
  // (a CPU box whose ranks outnumber its cores); otherwise on `intra`.
  Link intra_blocking;
  bool has_intra_blocking = false;
  // A CPU box whose links slow down while its ranks outnumber its cores (./zpp calibrate measures
  // the two-node links loaded and idle): with shared_cores, the comm stream's collectives on
  // `intra` (gathers not waited on at once, reductions) progress at `intra`'s rate while more
  // ranks compute than the box has cores and at this one's otherwise, switching as the load
  // changes. Unset: `intra` throughout, each collective's time fixed when it is issued.
  Link intra_idle;
  bool has_intra_idle = false;
  // A gather also writes the whole chunk into its unsharded buffer (with zero=1 the shard is the
  // full buffer and a gather costs nothing, as in FlatParam).
  double copy_bytes_per_s = 1e300;
  // Offloaded parameters (ZeRO-Infinity): seconds per byte of the rank's shard (a chunk's bytes /
  // zero) that a gather first spends bringing it to the device (host link, and NVMe before it), a
  // reduction spends taking its gradient shard back (host link, NVMe write), and each reduction
  // of a chunk after its first in the step spends reading the shard back for the accumulation.
  // 0: the shard lives on the device.
  double gather_staging_s_per_byte = 0;
  double reduce_staging_s_per_byte = 0;
  double reduce_accumulate_s_per_byte = 0;
  // The staging above is a synchronous copy on the training thread (zeropp on a GPU: the gather's
  // host shard goes to the device by a blocking copy when the gather is issued, the reduced
  // gradient comes back by one when it lands, each behind the computation queued before it): it
  // runs on the rank's compute timeline, in program order, and nothing after it starts before it
  // ends. false: it rides the comm stream beside the computation, before the gather's collective
  // and after the reduction's. For zero = 1 only (no collective): with one, the collective would
  // stay on the comm stream from the action's issue, not wait for its staging as the executor's
  // does, and a comm-bound step would hide the staging (the planner keeps the comm stream there).
  bool staging_blocks = false;
  Link inter;                       // between stages (activations, gradients)
  // CPU seconds per byte a rank moves (gathers, reduce-scatters, sends, receives), taken from its
  // compute: on a CPU box whose ranks outnumber its cores the transport's copies run on the cores
  // compute uses, so communication only overlaps compute in time, not in CPU. 0 on GPUs (see
  // overlap_slowdown).
  double comm_cpu_s_per_byte = 0;
  // The same for a byte sent or received between pipeline stages; negative: comm_cpu_s_per_byte.
  // (Stages on different nodes cross a dearer link than a sharding group inside one node.)
  double p2p_cpu_s_per_byte = -1;
  // With comm_cpu_s_per_byte: the CPU seconds one point-to-point message takes each side, whatever
  // its size. An activation travels as a header and its data (two messages, as the executor sends
  // it), a gradient as one; the sender pays when it sends, the receiver when it posts the receive.
  double comm_cpu_s_per_message = 0;
  // The executor's own work per byte of a chunk's gradient (per rank) at each of its reductions
  // (ReduceGrad: the unsharded gradient's bookkeeping and the collective's call), on the compute
  // stream: a ZeRO-3 rank pays it per unit per micro-batch, a ZeroPP rank per unit of U, a
  // pipeline without sharding once a step. 0 on GPUs.
  double reduce_handling_s_per_byte = 0;
  // A reduction's bytes over its chunk's gather's: 2 where gradients are reduced in fp32 and the
  // parameters gathered in bf16 (FSDP's reduce_dtype=float32); 1: both in the compute dtype.
  double reduce_bytes_factor = 1;
  // A GPU's computation takes (1 + overlap_slowdown) times as long while its rank's comm stream
  // runs a collective (a prefetched gather, a reduction): the collectives' kernels share the SMs
  // and memory bandwidth. Blocking waits and the step tail, which overlap nothing, are not slowed.
  double overlap_slowdown = 0;
  // Every send and receive holds its rank's program until its data has arrived, a receive being
  // posted where the program reaches it (DeepSpeed's pipeline engine: each p2p operation is a
  // blocking broadcast between the two ranks). false: sends are asynchronous, and only the
  // computation consuming a receive waits (Megatron, zeropp's executor).
  bool blocking_p2p = false;
  // A CPU box's cores, when its ranks outnumber them: compute then runs at min(1, shared_cores /
  // ranks computing at that moment) of the speed the times above give (a whole core each). Each
  // simulated rank stands for ranks_per_simulated_rank of the box's ranks (its ZeRO, TP or DP
  // peers, which run the same program at the same time). 0: every rank has its own compute unit.
  // While ranks outnumber cores each core's compute is also shared_slowdown times slower.
  double shared_cores = 0;
  int ranks_per_simulated_rank = 1;
  double shared_slowdown = 1;
  // With shared_cores: a rank waiting in a blocking collective inside a computation (the waits
  // above), or on a gather its next computation needs at once, still counts among the ranks
  // computing, so the others do not speed up meanwhile.
  bool waits_hold_cores = false;
  // With waits_hold_cores: the share of the ranks a simulated rank stands for that still hold a
  // core while it waits on a gather its next computation needs at once. 1: all of them (as TP
  // waits); 1 / zero: each sharding group's last rank, still computing, while the others sleep in
  // the wait (the predictor's choice on a shared box).
  double gather_wait_core_share = 1;
  // How much each duration varies from one occurrence to the next (a CPU box's time-slicing: the
  // same computation or collective takes a different time each time it runs), as coefficients of
  // variation: each computation (and the CPU a transfer takes) lasts its time above times a
  // lognormal factor of mean 1 and compute_cv, each collective and transfer one of comm_cv, drawn
  // independently. Simulate then returns the mean over variability_samples runs (fixed seeds: the
  // same answer every call). Where a compute stream and a comm stream wait on each other the mean
  // step is longer than the step of mean durations (E[max] >= max of the means). 0: deterministic.
  double compute_cv = 0;
  double comm_cv = 0;
  int variability_samples = 32;
};

using SimEvent = TraceEvent;

struct SimResult {
  double step_s = 0;
  double bubble = 0;
  std::vector<double> busy_s;        // compute time per rank
  double gather_bytes_per_rank = 0;  // max over ranks, bytes sent
  double reduce_bytes_per_rank = 0;
  double p2p_bytes_per_rank = 0;
  // Max over ranks of the link time of the gathers each rank waits on at once (WaitedAtOnce: no
  // computation between the gather and its chunk's), the copy into the unsharded buffer excluded.
  double blocking_gather_s = 0;
  std::vector<SimEvent> events;
  std::string ChromeTraceJson() const;
};

// Throws std::invalid_argument if the schedule cannot complete (run the validator first).
SimResult Simulate(const Schedule& s, const CostModel& cost);

}  // namespace scheduler
}  // namespace zeropp
