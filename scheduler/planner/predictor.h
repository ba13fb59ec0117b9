// predictor.h: predicts one layout's training step: the layout's schedule IR replayed by the
// simulator on costs from cost_model.h, and its memory from memory_model.h.
//
// Link classes come from the rank order (layout.h): gathers and reduce-scatters over the zero
// group, activations between stages over the inter-node link when neighbouring stages sit on
// different nodes, the step-end reduction over the dp group. Overlap is the executor's: gathers,
// reduce-scatters and sends run on their own streams beside compute; tensor-parallel collectives
// and the step-end reduction (3D: gradient all-reduce, or reduce-scatter + all-gather with the
// distributed optimizer; ZeRO: the shards across replicas) are not overlapped.
//   Prediction p = Predict(ModelPreset("llama2-7b"), layout, LoadHardware("h100-80gb-ib400x8"), 512);
#pragma once

#include <string>
#include <vector>

#include "scheduler/planner/hardware.h"
#include "scheduler/planner/layout.h"
#include "scheduler/planner/memory_model.h"
#include "scheduler/planner/model_shape.h"
#include "scheduler/simulator.h"
#include "scheduler/validator.h"

namespace zeropp {
namespace planner {

struct Prediction {
  Layout layout;
  double step_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  // Where the step goes, on the busiest pipeline rank: compute (of which TP communication),
  // idle time inside the pipelined part (bubble + exposed gathers and transfers), the step-end
  // reduction across replicas (with sequence parallelism also the TP group's all-reduces of
  // replicated tensors' gradients) and the optimizer.
  double compute_s = 0, tp_comm_s = 0, idle_s = 0, dp_reduce_s = 0, optimizer_s = 0;
  // The TP collectives' time per step (layers, embedding, head and loss), the mean over the
  // pipeline's ranks: what the 3D baseline measures as its ranks' mean TP wait.
  double tp_collectives_s = 0;
  double gather_bytes = 0, reduce_bytes = 0, p2p_bytes = 0;  // per rank per step
  // The link time of the gathers waited on at once (no computation to overlap), busiest rank.
  double blocking_gather_s = 0;
  MemoryBreakdown memory;           // the peak rank's
  double rank0_model_state = 0;     // pipeline rank 0's model state (what a rank-0 log shows)
  std::string Dominant() const;  // the largest of the parts above, named
};

// The compute a pipeline rank's step is charged, by the kinds `train --profile-ops` measures
// (zeropp/cli/op_profile.h): layers' and head's matrix products, attention core, element-wise
// work, each at a whole compute unit and without compute_overhead; a recomputed chunk's forward
// counted twice (the head never recomputed); the optimizer step at the rank's share of the box.
// Gradient landing: its adds with the element-wise work, its copies as copy_s (the only copies
// the planner charges; the profile's copy kind holds every other copy too).
struct OpTimes {
  double matmul_s = 0, attention_s = 0, elementwise_s = 0, optimizer_s = 0, copy_s = 0;
  double matmul_flops = 0;
  double elementwise_values = 0;  // values the element-wise work moves
};
// One per pipeline rank. Throws std::invalid_argument as Predict does.
std::vector<OpTimes> PredictOpTimes(const ModelShape& m, const Layout& l, const Hardware& hw, int global_batch);

// The simulator's cost model of a layout (exposed for tests and the local validation);
// `micro_batches` per step, 0 when unknown (then every micro-batch is charged a gradient landing's
// copy, as if it reduced).
scheduler::CostModel BuildCostModel(const ModelShape& m, const Layout& l, const Hardware& hw, int devices_on_box,
                                   int micro_batches = 0);

// Throws std::invalid_argument if the layout does not Check() or its schedule does not validate.
// With `sim`, also the simulation itself (its events: the predicted step as a trace).
Prediction Predict(const ModelShape& m, const Layout& l, const Hardware& hw, int global_batch,
                   scheduler::SimResult* sim = nullptr);
// Memory only (estimate-memory): same schedule, no simulation.
MemoryBreakdown PredictMemory(const ModelShape& m, const Layout& l, const Hardware& hw, int global_batch);
// Every pipeline rank's memory, and the validator's report (its peak counts) in *report.
std::vector<MemoryBreakdown> PredictMemoryPerRank(const ModelShape& m, const Layout& l, const Hardware& hw,
                                                  int global_batch, scheduler::ValidationReport* report);

}  // namespace planner
}  // namespace zeropp
