// memory_model.h: peak bytes per rank of a layout, as the engine (or Megatron) holds them.
//
// Model state, per parameter a rank owns:
//   3D      compute copy (2 B bf16) + fp32 main gradient (4 B) + fp32 master, m, v (12 B, / dp with
//           the distributed optimizer); fp32 training: 4 + 4 + 8
//   ZeRO    over the zero group: compute shard (2) + reduce-dtype gradient shard (2) + master (4)
//           + m, v (8), as MemoryStats counts them (fp32: 4 + 4 + 8); ZeRO-1 across replicas
//           divides master and moments by dp. Offloaded on a GPU (zeropp's engine): the optimizer
//           (cpu) puts master and moments in host memory (`host`), or (nvme) the moments in files
//           (`nvme`) and the master in host memory; the parameters (params_offload) take the
//           compute shard, the gradient shard and the master to their tier. On a CPU box host
//           memory is the device's: only NVMe takes state out of it. On a GPU with offloaded
//           parameters the working set adds the shard staged for a gather and the gradient shard
//           a reduction leaves on the device before it goes down.
// Unsharded buffers (ZeRO), activations and working set: the schedule replayed on the rank's
// actions, summed at each moment, as the engine holds them: gathered chunks between Gather and
// Release (compute dtype); a chunk's unsharded gradient from its first backward to its
// ReduceGrad, then in a reduction until it lands (at most 2 in flight, EngineOptions'
// max_pending_reductions, taken as landing no sooner than that cap forces; a chunk with a tensor
// tied across stages keeps it to the optimizer step); stashed activations from F to B or Bi.
// Activations per layer and micro-batch (Korthikanti et al. 2022), bytes at 2 B per value:
// s*b*h*(10 + (8 + c_ffn*ffn/h)/t) with c_ffn = 4 (GeLU) or 6 (SwiGLU); sequence parallelism
// divides the 10 by t too; dense attention adds 5*heads*s^2*b/t. A stash is that times the
// chunk's layers, or for a chunk the schedule recomputes only inputs (3D: every layer's, as
// Megatron's full recompute; ZeroPP: the chunk's). A decoupled W (zero-bubble
// schedules, ZeroPP) keeps, from its Bi until it runs, each linear layer's saved input and output
// gradient (LayerWeightPassBytes) times the chunk's layers (the last virtual stage: and the head's,
// s*b*(h + vocab/t)), and nothing else of the stash (the
// executor frees every other saved tensor at Bi; the first virtual stage's Bi is its whole
// backward and keeps nothing). Transient, during one action: a
// recomputed chunk's activations in its backward, and the larger of the last stage's logits
// (compute dtype + fp32 softmax) and one layer's backward gradients (LayerBackwardTransientBytes).
// Plus send/receive buffers and reserved. The breakdown is of the peak moment. With
// activations offloaded (ZeRO-3, activations_offload) a recomputed chunk's saved input, but the
// last's, lives on the tier (`host` or `nvme`, their peak) from its forward to its backward, and
// on the device again, as working memory, while that backward runs.
#pragma once

#include <string>

#include "scheduler/planner/hardware.h"
#include "scheduler/planner/layout.h"
#include "scheduler/planner/model_shape.h"
#include "scheduler/schedule.h"

namespace zeropp {
namespace planner {

struct MemoryBreakdown {
  double params = 0, grads = 0, optimizer = 0;  // model state
  double unsharded = 0;                         // gathered parameters and gradients
  double activations = 0;                       // stashed for backward
  double working = 0;                           // recompute, logits, p2p buffers
  double reserved = 0;
  double host = 0;                              // offloaded state in host memory (not in Total)
  double nvme = 0;                              // offloaded state in NVMe files (not in Total)
  int rank = 0;                                 // the pipeline rank this peak is on
  double ModelState() const { return params + grads + optimizer; }  // on the device
  double AllModelState() const { return ModelState() + host + nvme; }  // wherever it lives
  double Total() const { return ModelState() + unsharded + activations + working + reserved; }
  std::string ToString() const;  // "params 1.20 + grads ... = 9.87 GB (pipeline rank 0)"; MB under 1 GB
};

// Bytes of one layer's activations for one micro-batch (no recomputation).
double LayerActivationBytes(const ModelShape& m, const Layout& l, int value_bytes);
// What one layer's deferred W holds per micro-batch: s*b*(inputs + output gradients of its
// linears)/t values. Attention: qkv (input h, gradient h + 2*kv*h/heads) and the projection (h, h);
// GeLU MLP: fc (h, ffn), fc_out (ffn, h); SwiGLU: gate and up share their input (h, 2*ffn), down
// (ffn, h).
double LayerWeightPassBytes(const ModelShape& m, const Layout& l, int value_bytes);
// The gradients alive at once in one layer's backward, beyond its saved activations: in the MLP,
// the incoming gradient (h, or h/t with sequence parallelism) beside the gradients of the
// activation's output and input (GeLU: 2 x ffn/t; SwiGLU: 3 x ffn/t, the product's two factors
// and the gate's input), s*b of each. The attention's (h + 3h + 3h)/t is smaller.
double LayerBackwardTransientBytes(const ModelShape& m, const Layout& l, int value_bytes);
// Parameters held by pipeline rank r (all its chunks, before tp or zero division).
double StageParameters(const ModelShape& m, const Layout& l, int rank);

// One pipeline rank's peak over the layout's (validated) schedule s.
MemoryBreakdown EstimateRankMemory(const ModelShape& m, const Layout& l, const Hardware& hw,
                                   const scheduler::Schedule& s, int rank);
// The peak over pipeline ranks.
MemoryBreakdown EstimateMemory(const ModelShape& m, const Layout& l, const Hardware& hw,
                               const scheduler::Schedule& s);

}  // namespace planner
}  // namespace zeropp
