// layout.h: one way to lay a training step out on a cluster, for every design zeropp compares.
//
//   kZero3      ZeRO-3 / FSDP over all devices (pp = 1); zero = every device, or zero = a node's
//               devices with dp replicas across nodes (hybrid sharding, HSDP)
//   kZeroPP     ZeroPP: ZeRO-3 inside a stage (zero <= devices per node), pipeline across nodes
//               in scheduling units of u micro-batches over v chunks, dp replicas (DP or ZeRO-1)
//   kPipeFsdp   FSDP inside a pipeline: 1F1B / interleaved / ZB-H1 with every F and B gathering
//               its chunk (ZeroPP with U = 1)
//   k3D         Megatron-style: tp inside a node, pp stages, dp replicas; sequence parallelism
//               and the distributed optimizer (ZeRO-1 over dp) as options; schedules 1F1B,
//               interleaved (v chunks), ZB-H1
// Rank order (innermost first): 3D tp, dp, pp (Megatron), or tp, pp, dp with dp_outer; ZeroPP and
// ZeRO-3 zero, pp, dp.
// Devices = tp * zero * pp * dp. Micro-batches per step m = global_batch / (dp * zero * b).
#pragma once

#include <string>
#include <vector>

#include "scheduler/planner/model_shape.h"

namespace zeropp {
namespace planner {

enum class Design { kZero3, kZeroPP, kPipeFsdp, k3D };
const char* DesignName(Design d);
// Where the ZeRO designs keep the fp32 master and AdamW moments (zeropp's engine offload;
// ZeRO-Offload / ZeRO-Infinity): on the device, in host memory (AdamW on the CPU, gradients down
// and updated parameters up over PCIe), or in NVMe files streamed through host memory.
enum class Offload { kNone, kCpu, kNvme };
const char* OffloadName(Offload o);  // none | cpu | nvme

struct Layout {
  Design design = Design::k3D;
  std::string schedule = "1f1b";  // gpipe, 1f1b, interleaved, zb-h1, deepspeed, zeropp, zero3
  int tp = 1, pp = 1, dp = 1, zero = 1;
  int v = 1;           // chunks per pipeline rank
  int u = 0;           // micro-batches per scheduling unit (ZeroPP)
  int micro_batch = 1;
  int prefetch = 1;    // ZeRO-3: units gathered ahead of the one computing (0: each gather waited at once)
  bool sequence_parallel = false;
  bool zero1 = false;  // optimizer state sharded over dp (Megatron's distributed optimizer)
  // 3D rank order tp, pp, dp instead of tp, dp, pp (Megatron's --use-tp-pp-dp-mapping): stages
  // neighbour each other, replicas are far apart. ZeroPP, FSDP-in-pipeline and ZeRO-3 always put
  // dp outermost (zeropp's engine, which also runs 3D layouts without tp that way).
  bool dp_outer = false;
  bool recompute = false;  // full activation recomputation (ZeroPP: every chunk but the last)
  // ZeroPP and ZB-H1: at most this many weight-gradient passes deferred at once per rank; -1: as
  // the schedule defers them (zeropp's PipelineOptions::max_deferred_w, train --max-deferred-w).
  int max_deferred_w = -1;
  // ZeRO designs: gradients reduced in fp32 while parameters are gathered in the compute dtype
  // (FSDP's MixedPrecisionPolicy(reduce_dtype=float32), torchtitan's default); false: reduced in
  // the compute dtype, as zeropp's engine does. 3D reduces its fp32 main gradients regardless.
  bool reduce_fp32 = false;
  // 3D only: how the backward accumulates each micro-batch's weight gradients. kFused: the weight-
  // gradient GEMM adds into the fp32 main gradient itself (Megatron-LM's gradient_accumulation_fusion,
  // the default since 2022-02; the planner's own 3D). kAutograd: the GEMM writes a new 16-bit tensor
  // and PyTorch's AccumulateGrad adds it into the parameter's .grad from the second micro-batch on
  // (read both, write the sum: 6 bytes a parameter), as Megatron-LM of 2021 with fp16 and DeepSpeed's
  // pipeline engine of 2021 did; memory-bound work in each W. Only published cases set it.
  // kFp32Add: the GEMM writes a new 16-bit gradient after every micro-batch's backward, which is
  // cast to fp32 and added into an fp32 gradient buffer (DeepSpeed's BF16_Optimizer of 2022,
  // update_hp_grads: read 2 and write 4 bytes to cast, read 4 + 4 and write 4 to add: 18 bytes a
  // parameter in every micro-batch); the 16-bit gradients take memory beside the fp32 ones.
  // kSink: zeropp's own engine runs the 3D layout (benchmarks/baseline_3d, the local benches): its
  // gradients land as the ZeRO designs' do, through zeropp/grad_sink.h into each unit's buffer
  // (Predict charges it beside W; the ZeRO designs always land so, and take no other value).
  enum class GradAccumulation { kFused, kAutograd, kFp32Add, kSink };
  GradAccumulation grad_accumulation = GradAccumulation::kFused;
  // 3D with zero1: the replicas all-reduce the whole fp32 gradient, then each steps its 1/dp and
  // all-gathers the 16-bit parameters (DeepSpeed's BF16_Optimizer); false: reduce-scatter (Megatron's
  // distributed optimizer).
  bool zero1_allreduce = false;
  // Layers of each pipeline chunk (virtual stage c * pp + r, pp * v entries summing to the model's
  // layers) when they are not split evenly, e.g. DeepSpeed's partition_method 'type:transformer|
  // embedding', which counts each embedding copy as a layer; empty: layers / (pp * v) each.
  std::vector<int> stage_layers;
  Offload offload = Offload::kNone;  // optimizer state and fp32 master (not 3D)
  // The parameters themselves (ZeRO-Infinity; zeropp's offload.params): the compute shard, the
  // fp32 master and the gradient shard live off the device, each gather first brings the rank's
  // shard to the device and each reduction takes its gradient shard back. Needs `offload` too
  // (the moments stay with the master).
  Offload params_offload = Offload::kNone;
  // The saved inputs of recomputed units (zeropp's offload.activations): each written to the tier
  // after its unit's forward and read back (prefetched a unit ahead) before its backward. ZeRO-3
  // with recomputation only (the engine offloads per unit, pp = 1).
  Offload activations_offload = Offload::kNone;
  int Devices() const { return tp * zero * pp * dp; }
  // Whether its schedule defers weight passes (ZeroPP, and a zb-h1 pipeline): max_deferred_w applies.
  bool DefersWeightPasses() const {
    return design == Design::kZeroPP || (design != Design::kZero3 && schedule == "zb-h1");
  }
  int MicroBatches(int global_batch) const { return global_batch / (dp * zero * micro_batch); }
  std::string Name() const;
  // "" or why this layout cannot run the model with this batch on `devices` devices.
  std::string Check(const ModelShape& m, int devices, int devices_per_node, int global_batch) const;
};
const char* GradAccumulationName(Layout::GradAccumulation g);  // fused | autograd | fp32_add | sink
// false when `name` is none of those.
bool ParseGradAccumulation(const std::string& name, Layout::GradAccumulation* g);

}  // namespace planner
}  // namespace zeropp

#include "scheduler/schedule.h"

namespace zeropp {
namespace planner {

// What each virtual stage (chunk * pp + rank) of a layout holds, before tp or zero division.
// Pipelines: pp * v chunks of layers / (pp * v) layers; the embedding table, learned positions and
// final norm on the first, the head's matrix on the last (a tied head holds a copy when it lives on
// another stage). ZeRO-3: zeropp's default units, one per child of the model: the embedding, each
// layer, the final norm, the head (tied: no parameters of its own; it needs the embedding's unit,
// which the schedule gathers with it).
// `units`: the engine's scheduling units in it (one per child), each gathered and reduced by its
// own collective. `gemm_params`: those of `params` that are a GEMM's weight (the layers' matrices,
// the head's), whose gradients the weight-gradient GEMMs write; the rest (embedding table,
// positions, norms, biases) come from other kernels.
struct ChunkShape {
  double layers = 0;
  double params = 0;
  double units = 1;
  double gemm_params = 0;
};
std::vector<ChunkShape> ChunkShapes(const ModelShape& m, const Layout& l);
// The layers pipeline rank `rank` holds over its chunks c * pp + rank (layers / pp when split evenly).
double RankLayers(const ModelShape& m, const Layout& l, int rank);

// Each of `stages` pipeline chunks' layers as zeropp's executor partitions the model
// (scheduler::PartitionStages, "parameters": contiguous units, the most expensive stage as cheap
// as it can be, a unit costing the parameters it multiplies by: the embedding lookup nothing, each
// layer its parameters, the final norm its own, the head its table, tied or not). Empty when
// there are fewer units than stages.
std::vector<int> EngineStageLayers(const ModelShape& m, int stages);
// Sets l->stage_layers (when not already given) to the partition the executor would run: zeropp's
// engine for the ZeRO designs' pipelines (EngineStageLayers; left empty where that is the even
// split), and for 3D only where the layers do not divide evenly over pp * v chunks (Megatron-LM
// splits evenly; zeropp's executor, which runs the 3D baseline here, then balances as above).
void PartitionAsExecuted(const ModelShape& m, Layout* l);

// The schedule IR of a layout with m micro-batches per step (3D: resident stages, no gathers).
// Throws std::invalid_argument when the generator refuses the numbers.
scheduler::Schedule BuildSchedule(const Layout& l, int m, const ModelShape& shape);

}  // namespace planner
}  // namespace zeropp
