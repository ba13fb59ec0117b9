// cost_model.h: seconds of every action of a training step, from the model's shapes and the
// hardware description. Pure functions; no state.
//
// Compute: each GEMM costs 2*M*N*K / (peak * efficiency); its backward is two GEMMs with their
// own shapes (input gradient = Bi, weight gradient = W). The efficiency of a linear layer's pass is
// the description's measured table where it has one (LinearEfficiency), else the shape formula
// (MatmulEfficiency). The attention core
// runs at attention_efficiency (flash: masked blocks skipped, backward 2.5x forward; dense: the
// whole s x s product, backward 2x); a model whose kernel is FlashAttention 1 (flash_v1) at
// attention_efficiency_flash_v1. Element-wise work (norms, residuals, activations, dropout,
// softmax) costs the bytes it moves over memory bandwidth; the constants below count passes.
// All of it is scaled by compute_overhead, and each layer adds the fixed layer_overhead_us per
// micro-batch (a third each to F, Bi and W): eager execution's per-operator cost on a CPU box.
// Tensor parallelism (Megatron): per layer, 2 all-reduces of the b*s*h activation in forward and
// 2 in backward (with sequence parallelism: all-gathers and reduce-scatters of the same total),
// on the critical path, inside F and Bi; with sequence parallelism the backward also gathers each
// column-parallel input again (ComputeOptions::async_tp_backward). The executor's gradient
// bookkeeping (grad_handling_ns_per_param) is no action's: the simulator charges it at each of the
// program's reductions (CostModel::reduce_handling_s_per_byte).
// Collectives: alpha-beta per algorithm over the group's link class: a group inside one node
// uses the intra-node link; a group spanning nodes with g of its ranks per node gets
// min(intra, inter_node_total * g / devices_per_node), every local rank being in a concurrent
// group of its own (data-parallel layouts). Ring all-gather/reduce-scatter: (p-1) alpha +
// (p-1)/p bytes/bus; all-reduce ring 2(p-1) alpha + 2(p-1)/p bytes/bus; tree 2 ceil(log2 p)
// alpha + 2 bytes/bus (NCCL's double binary tree at full bus bandwidth).
#pragma once

#include "scheduler/planner/hardware.h"
#include "scheduler/planner/layout.h"
#include "scheduler/planner/model_shape.h"

namespace zeropp {
namespace planner {

// Element-wise passes per layer forward, in values of the compute dtype moved (read + write),
// set by hand from counting the kernels of models/gpt.h (two norms, two residual adds, two
// dropouts, bias adds) and of the MLP activation; softmax passes only without flash attention.
inline constexpr double kElementwisePassesHidden = 16;   // per b*s*h values
inline constexpr double kElementwisePassesFfn = 4;       // per b*s*ffn values (GeLU; SwiGLU 6)
inline constexpr double kElementwisePassesScores = 4;    // per b*heads*s*s values (dense attention)
// Tensors every tensor-parallel rank holds whole in a layer (two norms' weight and bias, the two
// row-parallel biases): with sequence parallelism their gradients are partial sums, all-reduced
// over the TP group at the step's end, one tensor at a time, as benchmarks/baseline_3d does.
inline constexpr int kReplicatedTensorsPerLayer = 6;

// The formula: max_efficiency * prod over d of d/(d+half_dim).
double MatmulEfficiency(const Hardware& hw, double m, double n, double k);
// A linear layer's GEMM in `pass`, x [tokens x in], W [out x in]. From the table: trilinear
// interpolation in log size of the time per FLOP (1/efficiency) of the 8 grid points around the
// shape, clamped to the grid's edges (beyond them the nearest edge's value: GEMMs saturate).
double LinearEfficiency(const Hardware& hw, GemmPass pass, double tokens, double in, double out);
double LinearGemmSeconds(const Hardware& hw, GemmPass pass, double tokens, double in, double out);
// What one GEMM pass of a linear with an (out x in) weight pays beyond LinearGemmSeconds to move its
// weight from memory at Hardware::cold_weight_bytes_per_s, whatever its tokens; 0 where unset.
double ColdWeightSeconds(const Hardware& hw, double in, double out);

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce };
// bytes: the whole (gathered / unreduced) buffer. ranks_per_node: how many of the group's ranks
// share a node (>= ranks: all in one node). 0 when ranks <= 1.
double CollectiveSeconds(const Hardware& hw, CollectiveKind kind, double bytes, int ranks, int ranks_per_node);
// The group's per-rank bus bandwidth and per-hop latency, as used above.
double BusBytesPerSecond(const Hardware& hw, int ranks, int ranks_per_node);
double HopLatency(const Hardware& hw, int ranks, int ranks_per_node);
// Its link's LinkSpec::wire_latency_s (< 0: alpha-beta).
double HopWireLatency(const Hardware& hw, int ranks, int ranks_per_node);

struct ComputeOptions {
  int tp = 1;
  bool sequence_parallel = false;
  int micro_batch = 1;
  // Factor on compute times: compute_overhead (the predictor costs each action at a whole compute
  // unit; on a CPU box the simulator shares the cores).
  double compute_scale = 1;
  // Sequence parallelism's backward re-gather of a column-parallel linear's input: overlapped
  // with the input-gradient GEMMs (Megatron, the planner's 3D on GPUs) or blocking
  // (benchmarks/baseline_3d, the 3D measured on a CPU box).
  bool async_tp_backward = true;
};

// One micro-batch through one layer (or the LM head and loss), split as the simulator needs it.
struct ActionCost {
  double forward_s = 0;
  double backward_input_s = 0;   // Bi: input gradients (+ element-wise backward, TP comm)
  double backward_weight_s = 0;  // W: weight gradients
  double matmul_s = 0;           // of the above, forward + backward
  double attention_s = 0;
  double elementwise_s = 0;
  // Their forward parts (what recomputation runs again), and the products' FLOPs, forward +
  // backward. Not scaled by compute_scale.
  double matmul_forward_s = 0, attention_forward_s = 0, elementwise_forward_s = 0;
  double matmul_flops = 0;
  // The values the element-wise work moves (read + write), forward + backward; of them forward.
  double elementwise_values = 0, elementwise_forward_values = 0;
  // Tensor-parallel collectives (blocking, not scaled by compute_scale): in forward_s and
  // backward_input_s, tp_forward_s of them in the forward.
  double tp_comm_s = 0;
  double tp_forward_s = 0;
  double tp_backward_extra_s = 0;  // of tp_comm_s, in the backward beyond the forward's conjugates
  // How many tensor-parallel collectives the forward and the backward issue (each rank).
  double tp_forward_calls = 0, tp_backward_calls = 0;
  double Backward() const { return backward_input_s + backward_weight_s; }
};

// E[max of n independent lognormal factors of mean 1 and coefficient of variation cv]: how long a
// group that waits for its slowest member takes, in units of one member's mean time (1 for n = 1
// or cv = 0; for n = 2, 2 * Phi(sigma / sqrt 2), sigma^2 = ln(1 + cv^2)).
double ExpectedMaxLognormal(int n, double cv);

ActionCost LayerCost(const ModelShape& m, const Hardware& hw, const ComputeOptions& o);
// LM head + loss; with tensor parallelism, its input's copy/gather and the vocabulary-parallel
// loss's three small collectives.
ActionCost HeadCost(const ModelShape& m, const Hardware& hw, const ComputeOptions& o);
// The embedding's tensor-parallel reduction (nothing else of the lookup is counted).
ActionCost EmbeddingCost(const ModelShape& m, const Hardware& hw, const ComputeOptions& o);

// AdamW over `params` parameters held by one rank: at the measured rate where the description
// has one, else memory-bound, bytes per parameter for the compute dtype (bf16: fp32 master,
// moments and gradient read, bf16 copy written).
double OptimizerSeconds(const Hardware& hw, double params);
// The same step with master and moments offloaded (zeropp's engine, ZeRO-Offload), pipelined unit
// by unit as the engine's step runs it, so the slowest stream counts: the gradient shard down over
// PCIe and the updated compute shard up, in the compute dtype, each direction on its own copy engine
// (zeropp/host_staging.h); AdamW on the CPU for the node's `devices_on_node` offloading devices, at
// host.adamw_mparams_per_s where the description has it (slowed by the two copies' bytes through
// host memory in proportion to AdamW's own), else at the host's memory bandwidth (AdamW's bytes plus
// the copies'). With the parameters offloaded too (`params_tier`: ZeRO-Infinity) the gradient shard
// is already on the host and the updated shard stays there: no transfer; in host memory the
// clipping norm's read of the gradient shards comes first, at host bandwidth. NVMe (hw.nvme, per
// device), streamed unit by unit beside the CPU's update: the moments read and written back
// (optimizer on nvme; the master stays in host memory, as the engine keeps it), and with the
// parameters on nvme their master read and written, the gradient shard read twice (the clipping
// norm's pass and the update) and in bf16 the compute shard written (14 B per parameter in bf16,
// 16 B in fp32, where the master is the shard). On a CPU box (shared compute units) the host is the device: no
// transfer, the measured optimizer rate on cpu_share of a core (ComputeOptions::share).
// `optimizer` is kCpu or kNvme (offloaded), `params_tier` the parameters' tier (kNone: on the device).
double OffloadedOptimizerSeconds(const Hardware& hw, double params, Offload optimizer, Offload params_tier,
                                 int devices_on_node, double cpu_share);

}  // namespace planner
}  // namespace zeropp
