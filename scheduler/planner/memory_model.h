// memory_model.h: peak bytes per rank of a layout, as the engine (or Megatron) holds them.
//
// Model state, per parameter a rank owns:
//   3D      compute copy (2 B bf16) + fp32 main gradient (4 B) + fp32 master, m, v (12 B, / dp with
//           the distributed optimizer); fp32 training: 4 + 4 + 8
//   ZeRO    over the zero group: compute shard (2) + reduce-dtype gradient shard (2) + master (4)
//           + m, v (8), as MemoryStats counts them (fp32: 4 + 4 + 8); ZeRO-1 across replicas
//           divides master and moments by dp
// Unsharded buffers (ZeRO): the validator's peak gathered chunks in the compute dtype, plus one
// chunk's unsharded gradient. Activations per layer and micro-batch (Korthikanti et al. 2022),
// bytes at 2 B per value: s*b*h*(10 + (8 + c_ffn*ffn/h)/t) with c_ffn = 4 (GeLU) or 6 (SwiGLU);
// sequence parallelism divides the 10 by t too; dense attention adds 5*heads*s^2*b/t. A stash
// is that times the chunk's layers, or with recomputation only its inputs (3D: every layer's
// input, as Megatron's full recompute; ZeroPP: the chunk's input); the validator's peak stash
// count per rank multiplies it. Working set: one recomputed unit's activations, the last
// stage's logits (compute dtype + fp32 softmax), send/receive buffers; plus reserved. A decoupled
// W (zero-bubble schedules, ZeroPP) keeps, from its B until it runs, each linear layer's saved
// input and output gradient (LayerWeightPassBytes): the validator's peak pending W count per rank
// multiplies that times the chunk's layers.
#pragma once

#include <string>

#include "scheduler/planner/hardware.h"
#include "scheduler/planner/layout.h"
#include "scheduler/planner/model_shape.h"
#include "scheduler/validator.h"

namespace zeropp {
namespace planner {

struct MemoryBreakdown {
  double params = 0, grads = 0, optimizer = 0;  // model state
  double unsharded = 0;                         // gathered parameters and gradients
  double activations = 0;                       // stashed for backward
  double working = 0;                           // recompute, logits, p2p buffers
  double reserved = 0;
  int rank = 0;                                 // the pipeline rank this peak is on
  double ModelState() const { return params + grads + optimizer; }
  double Total() const { return ModelState() + unsharded + activations + working + reserved; }
  std::string ToString() const;  // "params 1.2 GB + grads ... = total" in GB
};

// Bytes of one layer's activations for one micro-batch (no recomputation).
double LayerActivationBytes(const ModelShape& m, const Layout& l, int value_bytes);
// What one layer's deferred W holds per micro-batch: s*b*(inputs + output gradients of its
// linears)/t values. Attention: qkv (input h, gradient h + 2*kv*h/heads) and the projection (h, h);
// GeLU MLP: fc (h, ffn), fc_out (ffn, h); SwiGLU: gate and up share their input (h, 2*ffn), down
// (ffn, h).
double LayerWeightPassBytes(const ModelShape& m, const Layout& l, int value_bytes);
// Parameters held by pipeline rank r (all its chunks, before tp or zero division).
double StageParameters(const ModelShape& m, const Layout& l, int rank);

// One pipeline rank's peak; `report` as below.
MemoryBreakdown EstimateRankMemory(const ModelShape& m, const Layout& l, const Hardware& hw,
                                   const scheduler::ValidationReport& report, int rank);
// Peak over pipeline ranks; `report` is the validator's report of the layout's schedule.
MemoryBreakdown EstimateMemory(const ModelShape& m, const Layout& l, const Hardware& hw,
                               const scheduler::ValidationReport& report);

}  // namespace planner
}  // namespace zeropp
