// executor.h: the one executor. Runs any schedule (schedule.h) on the engine's units and real
// process groups, for every layout: pp = 1 (the zero3 schedule, each scheduling unit a chunk)
// and every pipeline schedule.
//
// Layout: `stage_of_unit` maps each of the model's scheduling units to a virtual stage; rank r of
// the pipeline holds chunks c = 0..v-1, virtual stages c*pp + r (pp = 1: unit k is chunk k).
// Inside a stage, parameters are ZeRO-3 sharded over the zero group with the engine's FlatParam
// and shard state machine; across pipeline replicas, dp or zero1 as in the engine. Activations
// and gradients move over the pp group with tagged point-to-point transfers; an activation
// travels with a small header (dtype, shape), so shapes between stages are inferred.
//
// Actions: Gather/Release (un)shard every unit of the chunk on the comm thread (Gather also
// starts reading the next gathered chunk's offloaded shards); F runs the chunk's units (the last
// virtual stage also applies the loss; a recomputed chunk keeps only its input, parked on the
// offload tier when activation offload is on, and runs its forward again in B); B runs the
// chunk's whole backward; Bi computes the input gradient only and W later the weight gradients
// (split_backward.h), from saved activations and gradients, so W may run after the chunk's
// weights were released, as ZeroPP's deferred W's do; ReduceGrad reduce-scatters the chunk's
// gradients; OptimizerStep finishes the step (replicas, global-norm clipping over all stages,
// AdamW). The first virtual stage's input (token ids) needs no gradient: its graph is cut after
// its first unit, so Bi computes the gradient at the cut plus the first unit's backward and W the
// rest; a first stage of one unit runs its whole backward in Bi. Gradient receives are posted
// right after the forward whose output they belong to.
//
// Tied parameters: on one rank, a chunk that uses another chunk's tensors lists it in the
// schedule's needs (gathered together, gradients accumulated into the owner). Across stages
// (embedding on the first stage, LM head on the last) both stages hold the tensor; their
// unsharded gradients are summed between the two ranks before reduction, and the norm counts the
// tensor once. Every rank records a trace of its actions.
//
// Collective: construct and Step on every rank with the same model, options and schedule.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scheduler/schedule.h"
#include "scheduler/trace.h"
#include "zeropp/engine.h"

namespace zeropp {
namespace scheduler {

struct ExecutorOptions {
  // false: Bi runs the whole backward and W does nothing (an ablation for measurements).
  bool split_backward = true;
  // Sample the heap in use (glibc mallinfo2) after every action: split_stats().heap_peak_growth.
  bool measure_heap = false;
};

// How the last step's backwards ran on this rank.
struct BackwardSplitStats {
  int split = 0;           // Bi's whose weight work was left for W
  int whole = 0;           // B's and Bi's that ran the whole backward
  int deferred_nodes = 0;  // autograd nodes W ran again for their weight outputs
  int w_released = 0;      // split W's that ran while their chunk's weights were released
  // With ExecutorOptions::measure_heap: the heap's peak during the step above its size at the
  // start (activations, unsharded parameters and gradients, transfer buffers), in bytes.
  int64_t heap_peak_growth = 0;
};

class Executor {
 public:
  // `schedule` must validate (throws std::logic_error with the validator's message otherwise);
  // `plan` is the engine's unit plan (its ties decide the cross-stage gradient exchange);
  // `stage_of_unit[u]` is unit u's virtual stage (engine.owned(u) must say whether this rank
  // holds that stage). Throws std::invalid_argument for a tied tensor the layout cannot serve.
  Executor(Engine& engine, ProcessGroups& groups, scheduler::Schedule schedule, const UnitPlan& plan,
           std::vector<int> stage_of_unit, ExecutorOptions options);
  ~Executor();

  // One step over the schedule's m micro-batches of this rank's data-parallel shard: the
  // first stage reads `inputs`, the last reads `targets`.
  StepResult Step(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                  const LossFn& loss_fn);

  // The mean loss over `inputs` without gradients or an optimizer step (on every rank): the same
  // schedule with its backward removed (ForwardOnly), so ZeroPP units gather once per chunk.
  double Evaluate(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets,
                  const LossFn& loss_fn);

  const Schedule& schedule() const { return schedule_; }
  // The last Step's (or Evaluate's) actions on this rank (track = global rank), seconds from its
  // start; waits for gathers and transfers and recomputed forwards (R) are events of their own.
  const std::vector<TraceEvent>& trace() const { return trace_; }
  // The last Step's start on the steady clock, in microseconds since its epoch (the clock and unit of
  // the communicators' OpLog): places their operations on the trace's time axis.
  int64_t trace_origin_us() const { return trace_origin_us_; }
  const BackwardSplitStats& split_stats() const { return split_stats_; }
  int stage_of_unit(int u) const { return stage_of_unit_[u]; }
  // Unit u holds a tensor tied across stages: its gradient is reduced once, at the step's end,
  // after the two stages' copies are summed (not at its chunk's ReduceGrad actions).
  bool ReducesAtStepEnd(int u) const;

 private:
  StepResult Run(const Schedule& schedule, bool train, const std::vector<at::Tensor>& inputs,
                 const std::vector<at::Tensor>& targets, const LossFn& loss_fn);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Engine& engine_;
  Schedule schedule_, eval_schedule_;
  std::vector<int> stage_of_unit_;
  std::vector<TraceEvent> trace_;
  int64_t trace_origin_us_ = 0;
  BackwardSplitStats split_stats_;
};

}  // namespace scheduler
}  // namespace zeropp
