#include "scheduler/planner/predictor.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "scheduler/generators.h"
#include "scheduler/planner/cost_model.h"
#include "scheduler/validator.h"

namespace zeropp {
namespace planner {
namespace {

// Ranks of the group per node when the group's members are `stride` ranks apart.
int RanksPerNode(int group, int stride, int devices_per_node) {
  return std::max(1, std::min(group, devices_per_node / std::max(1, stride)));
}

// How many ranks share one compute unit (1 on GPUs).
double ComputeShare(const Hardware& hw, int devices_on_box) {
  return hw.shared_compute_units > 0 ? std::max(1.0, static_cast<double>(devices_on_box) / hw.shared_compute_units)
                                     : 1.0;
}

// Step-end reduction across replicas and the optimizer, as (reduce seconds, optimizer seconds);
// `tp_hw`: the description the tensor-parallel group's own all-reduces see (TensorParallelLinks).
std::pair<double, double> StepTail(const ModelShape& m, const Layout& l, const Hardware& hw, const Hardware& tp_hw,
                                   double share) {
  const int g = hw.devices_per_node;
  double own = 0, grad_bytes_per_param = 0;
  int stride = 1;
  if (l.design == Design::k3D) {
    own = StageParameters(m, l, 0) / l.tp;
    for (int r = 1; r < l.pp; ++r) own = std::max(own, StageParameters(m, l, r) / l.tp);
    grad_bytes_per_param = 4;  // fp32 main gradients
    stride = l.dp_outer ? l.tp * l.pp : l.tp;
  } else {
    for (int r = 0; r < l.pp; ++r) own = std::max(own, StageParameters(m, l, r) / l.zero);
    grad_bytes_per_param = l.reduce_fp32 ? 4 : hw.value_bytes;
    stride = l.zero * l.pp;
  }
  const int rpn = RanksPerNode(l.dp, stride, g);
  double reduce = 0;
  if (l.dp > 1) {
    if (l.zero1) {
      const CollectiveKind grads = l.zero1_allreduce ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
      reduce = CollectiveSeconds(hw, grads, own * grad_bytes_per_param, l.dp, rpn) +
               CollectiveSeconds(hw, CollectiveKind::kAllGather, own * hw.value_bytes, l.dp, rpn);
    } else {
      reduce = CollectiveSeconds(hw, CollectiveKind::kAllReduce, own * grad_bytes_per_param, l.dp, rpn);
    }
  }
  if (l.design == Design::k3D && l.sequence_parallel && l.tp > 1) {
    // Replicated tensors' partial gradients (cost_model.h, kReplicatedTensorsPerLayer), per stage
    // its layers' and the final norm's two.
    double most = 0;  // the rank with the most layers
    for (int r = 0; r < l.pp; ++r) most = std::max(most, RankLayers(m, l, r));
    const double tensors = kReplicatedTensorsPerLayer * std::ceil(most) + 2;
    reduce += tensors * CollectiveSeconds(tp_hw, CollectiveKind::kAllReduce, m.hidden * 4.0, l.tp, l.tp);
  }
  if (m.tied_embedding && l.pp > 1) {
    // The tied table's gradient summed between the first stage's embedding and the last stage's
    // head after the backward, an all-reduce of 2 ranks as Megatron-LM and DeepSpeed's pipeline
    // engine run it (zeropp's executor sends both copies at once: one latency less). 3D: each rank
    // its vocabulary slice; the ZeRO designs: the whole table, unsharded, on every rank of the
    // stage. Both stages share a node when the whole pipeline fits in one.
    const int pipeline_stride = l.design == Design::k3D ? (l.dp_outer ? l.tp : l.tp * l.dp) : l.zero;
    const double table = static_cast<double>(m.vocab) * m.hidden / l.tp;
    reduce += CollectiveSeconds(hw, CollectiveKind::kAllReduce, table * grad_bytes_per_param, 2,
                                pipeline_stride * l.pp <= g ? 2 : 1);
  }
  const double stepped = own / (l.zero1 ? l.dp : 1);
  const double optim =
      l.offload == Offload::kNone
          ? OptimizerSeconds(hw, stepped) * share
          : OffloadedOptimizerSeconds(hw, stepped, l.offload, l.params_offload, std::min(l.Devices(), g), share);
  return {reduce, optim};
}

// The layout's schedule and its validator report; throws std::invalid_argument naming the layout.
std::pair<scheduler::Schedule, scheduler::ValidationReport> ValidatedReport(const ModelShape& m, const Layout& l,
                                                                          const Hardware& hw, int global_batch) {
  const std::string why = l.Check(m, l.Devices(), hw.devices_per_node, global_batch);
  if (!why.empty()) throw std::invalid_argument(l.Name() + ": " + why);
  scheduler::Schedule s = BuildSchedule(l, l.MicroBatches(global_batch), m);
  scheduler::ValidationReport rep = scheduler::Validate(s);
  if (!rep.ok) throw std::invalid_argument(l.Name() + ": " + rep.error);
  return {std::move(s), std::move(rep)};
}

}  // namespace

std::string Prediction::Dominant() const {
  const std::pair<double, const char*> parts[] = {
      {compute_s - tp_comm_s, "compute"},
      {tp_comm_s, "tensor-parallel communication"},
      {idle_s, "idle in the pipeline (bubble, exposed gathers and transfers)"},
      {dp_reduce_s, "gradient reduction across replicas"},
      {optimizer_s, "optimizer"},
  };
  const auto* best = &parts[0];
  for (const auto& p : parts) {
    if (p.first > best->first) best = &p;
  }
  return best->second;
}

namespace {

// The simulator's cost model with the pieces Predict also reports, computed once.
struct CostParts {
  scheduler::CostModel model;
  ActionCost layer;       // one layer, one micro-batch, at a whole compute unit
  ActionCost head;        // the LM head and loss, the same
  double reduce_s = 0;    // step-end reduction across replicas
  double optimizer_s = 0;
  // Per virtual stage, one micro-batch's gradient landing (the average over the step; none for
  // Megatron's fused accumulation), before compute_scale: its copies' seconds, its adds' seconds
  // and values moved (the op profile counts a copy as copy, an add as element-wise work).
  std::vector<double> landing_copy_s, landing_add_s, landing_add_values;
};

// The description with the intra-node link blocking collectives and receives see: on a CPU box
// whose ranks outnumber its cores, the measured oversubscribed link (a partner must be scheduled
// to answer). Prefetched gathers and reductions keep the unloaded link: no one waits on their hops.
Hardware BlockingLinks(const Hardware& hw, int devices_on_box) {
  Hardware b = hw;
  if (hw.shared_compute_units > 0 && devices_on_box > hw.shared_compute_units && hw.intra_oversubscribed.bytes_per_s > 0) {
    b.intra = hw.intra_oversubscribed;
  }
  return b;
}

// The description a tensor-parallel collective sees. It blocks its rank until the partner, which
// computes on another core, answers. On a CPU box whose ranks outnumber its cores: the link fitted on
// two tp=2 jobs of the 3D baseline at once (intra_node_oversubscribed, BlockingLinks' choice too).
// Where they just fill the cores: the link fitted on one such job per two cores (intra_node_tp_filled),
// or without it the oversubscribed one. Neither the idle loopback's fit nor the oversubscribed one
// fits that case: one tp=2 job alone on a 2-core box waited 2.1-2.8x the first and 0.63-0.91x the
// second (./zpp bench tp-wait-alone, benchmarks/results/tp-wait-alone-2026-11-27.txt).
Hardware TensorParallelLinks(const Hardware& hw, int devices_on_box) {
  Hardware t = hw;
  if (hw.shared_compute_units <= 0 || devices_on_box < hw.shared_compute_units) return t;
  if (devices_on_box == hw.shared_compute_units && hw.intra_tp_filled.bytes_per_s > 0) {
    t.intra = hw.intra_tp_filled;
  } else if (hw.intra_oversubscribed.bytes_per_s > 0) {
    t.intra = hw.intra_oversubscribed;
  }
  return t;
}

// The link a pipeline transfer between two ranks of one node takes: the blocking link, or on a CPU
// box that measured intra_node_p2p (a transfer while both ranks compute) the slower of the two in
// latency and in bandwidth.
scheduler::Link SameNodeTransferLink(const Hardware& hw, const Hardware& blocking) {
  scheduler::Link l{blocking.intra.latency_s, blocking.intra.Effective()};
  if (hw.shared_compute_units > 0 && hw.intra_p2p.bytes_per_s > 0) {
    l.alpha_s = std::max(l.alpha_s, hw.intra_p2p.latency_s);
    l.bytes_per_s = std::min(l.bytes_per_s, hw.intra_p2p.Effective());
  }
  return l;
}

// `micro_batches`: per step (0: unknown, every micro-batch counted alike).
CostParts BuildCostParts(const ModelShape& m, const Layout& l, const Hardware& hw, int devices_on_box,
                         int micro_batches = 0) {
  const int g = hw.devices_per_node;
  const Hardware blocking = BlockingLinks(hw, devices_on_box);
  // Each action is costed at a whole compute unit; on a CPU box whose ranks outnumber its cores
  // the simulator shares the cores among the ranks computing at each moment.
  ComputeOptions co;
  co.tp = l.tp;
  co.sequence_parallel = l.sequence_parallel;
  co.micro_batch = l.micro_batch;
  co.compute_scale = hw.compute_overhead;
  co.async_tp_backward = hw.shared_compute_units == 0;  // GPUs: Megatron; a CPU box: benchmarks/baseline_3d
  const Hardware tp_links = TensorParallelLinks(hw, devices_on_box);
  ActionCost layer = LayerCost(m, tp_links, co);
  ActionCost head = HeadCost(m, tp_links, co);
  ActionCost embed = EmbeddingCost(m, tp_links, co);
  // On a CPU box a tensor-parallel collective also costs its rank CPU outside its wait
  // (Hardware::comm_cpu_messages_per_tp_collective): compute, shared with the box's other ranks.
  if (hw.shared_compute_units > 0 && l.tp > 1 && hw.comm_cpu_messages_per_tp_collective > 0) {
    const double each = hw.comm_cpu_messages_per_tp_collective * hw.comm_cpu_s_per_message;
    for (ActionCost* a : {&layer, &head, &embed}) {
      a->forward_s += a->tp_forward_calls * each;
      a->backward_input_s += a->tp_backward_calls * each;
    }
  }
  // A TP group moves at its slowest peer's pace (Hardware::tp_peer_skew, off by default): its
  // compute between collectives stretched by E[max of tp factors] - 1, as compute (which the box's
  // sharing stretches too), not as a fixed wait.
  if (hw.shared_compute_units > 0 && l.tp > 1 && hw.tp_peer_skew > 0 && hw.compute_cv > 0) {
    const double k = hw.tp_peer_skew * (ExpectedMaxLognormal(l.tp, hw.compute_cv) - 1);
    for (ActionCost* a : {&layer, &head, &embed}) {
      a->forward_s += k * std::max(0.0, a->forward_s - a->tp_forward_s);
      a->backward_input_s += k * std::max(0.0, a->backward_input_s - (a->tp_comm_s - a->tp_forward_s));
      a->backward_weight_s += k * a->backward_weight_s;
    }
  }
  const double layers_per_stage = static_cast<double>(m.layers) / l.pp;
  scheduler::CostModel c;
  c.forward_s = layers_per_stage * layer.forward_s;
  c.backward_input_s = layers_per_stage * layer.backward_input_s;
  c.backward_weight_s = layers_per_stage * layer.backward_weight_s;
  c.backward_s = c.backward_input_s + c.backward_weight_s;
  c.forward_wait_s = layers_per_stage * layer.tp_forward_s;
  c.backward_input_wait_s = layers_per_stage * (layer.tp_comm_s - layer.tp_forward_s);
  const std::vector<ChunkShape> chunks = ChunkShapes(m, l);
  c.virtual_stage_extra.assign(chunks.size(), {});
  for (const ChunkShape& k : chunks) {
    c.chunk_compute_share.push_back(k.layers / layers_per_stage);
    c.chunk_param_bytes.push_back(k.params * hw.value_bytes);
    c.chunk_collectives.push_back(k.units);
  }
  if (l.reduce_fp32) c.reduce_bytes_factor = 4.0 / hw.value_bytes;
  c.overlap_slowdown = hw.overlap_compute_slowdown;
  c.blocking_p2p = scheduler::TransfersBlock(l.schedule);
  c.compute_cv = hw.compute_cv;
  c.comm_cv = hw.comm_cv;
  c.virtual_stage_extra.front() = {embed.forward_s, embed.backward_input_s, embed.backward_weight_s,
                                   embed.tp_forward_s, embed.tp_comm_s - embed.tp_forward_s};
  scheduler::CostModel::StageExtra& last = c.virtual_stage_extra.back();
  last.forward_s += head.forward_s;
  last.backward_input_s += head.backward_input_s;
  last.backward_weight_s += head.backward_weight_s;
  last.forward_wait_s += head.tp_forward_s;
  last.backward_input_wait_s += head.tp_comm_s - head.tp_forward_s;
  // Gradient accumulation outside the weight-gradient GEMM (Layout::grad_accumulation): each chunk's
  // parameters (its tensor-parallel share) read twice and written once in 16 bits, from the second
  // micro-batch on; the simulator's W is the same for every micro-batch, so each carries the
  // average, (m - 1) / m of it.
  if (l.grad_accumulation == Layout::GradAccumulation::kAutograd) {
    const double later = micro_batches > 0 ? static_cast<double>(micro_batches - 1) / micro_batches : 1.0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      c.virtual_stage_extra[i].backward_weight_s +=
          later * chunks[i].params / l.tp * 3 * 2.0 / hw.ElementwiseBytesPerSecond() * co.compute_scale;
    }
  }
  // kFp32Add: every micro-batch's 16-bit gradients cast to fp32 (read them, write 4 bytes) and
  // added into the fp32 gradients (read both, write the sum).
  if (l.grad_accumulation == Layout::GradAccumulation::kFp32Add) {
    for (size_t i = 0; i < chunks.size(); ++i) {
      c.virtual_stage_extra[i].backward_weight_s +=
          chunks[i].params / l.tp * (hw.value_bytes + 16.0) / hw.ElementwiseBytesPerSecond() * co.compute_scale;
    }
  }
  // Landing autograd's weight gradients in the buffer a reduction reads. The ZeRO designs do it as
  // zeropp's gradient sink does (zeropp/grad_sink.h), and so does a 3D layout that zeropp's engine
  // runs (kSink); Megatron's GEMMs accumulate themselves (kFused). The first gradient after each
  // reduction is copied in (read in the compute dtype, written in the buffer's), the later ones
  // added (read both, write the sum). ZeRO-3 reduces every micro-batch, so it copies every time,
  // into the reduction's dtype: FSDP1's flat gradient, FSDP2's copy-in, DeepSpeed's buckets. So
  // does any pipeline of one stage on zeropp's engine; a deeper one reduces each chunk once a step
  // (ZeroPP: once a unit of u micro-batches) into a buffer in the compute dtype. Under zb-h1 and
  // zeropp W writes the GEMM weights' gradients with the product (split_backward.h; not through
  // benchmarks/baseline_3d's tensor-parallel linears, autograd Functions of their own), so only
  // the rest land. The simulator's W is the same for every micro-batch: each carries the average;
  // micro_batches unknown (0): every micro-batch copies.
  const bool split_backward = l.schedule == "zb-h1" || l.schedule == "zeropp";
  std::vector<double> copy_s(chunks.size(), 0.0), add_s(chunks.size(), 0.0), add_values(chunks.size(), 0.0);
  if (l.design != Design::k3D || l.grad_accumulation == Layout::GradAccumulation::kSink) {
    const double mb = micro_batches > 0 ? micro_batches : 1.0;
    double reductions = 1.0;
    if (l.design == Design::kZero3 || l.pp == 1 || micro_batches == 0) reductions = mb;
    if (l.design == Design::kZeroPP && micro_batches > 0) reductions = std::ceil(mb / std::max(l.u, 1));
    const double written = l.design == Design::kZero3 && l.reduce_fp32 ? 4.0 : hw.value_bytes;
    const double copies = reductions / mb, adds = (mb - reductions) / mb;  // per micro-batch
    const bool direct = split_backward && l.tp == 1;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const double landed = (chunks[i].params - (direct ? chunks[i].gemm_params : 0.0)) / l.tp;
      copy_s[i] = copies * landed * (hw.value_bytes + written) / hw.ElementwiseBytesPerSecond();
      add_s[i] = adds * landed * 3 * hw.value_bytes / hw.ElementwiseBytesPerSecond();
      add_values[i] = adds * landed * 3;
      c.virtual_stage_extra[i].backward_weight_s += (copy_s[i] + add_s[i]) * co.compute_scale;
    }
  }
  // A fixed cost per action of a chunk (Hardware::action_overhead_s): F, B, or under zb-h1 and
  // zeropp Bi and W each, whatever the chunk's layers. Not scaled by compute_overhead. Default 0:
  // no description sets it yet (what it would do: benchmarks/results/planner-local-chronicle.md,
  // thirty-eighth session).
  if (hw.action_overhead_s > 0) {
    for (auto& x : c.virtual_stage_extra) {
      x.forward_s += hw.action_overhead_s;
      x.backward_input_s += hw.action_overhead_s;
      if (split_backward) x.backward_weight_s += hw.action_overhead_s;
    }
  }
  const double tokens = static_cast<double>(m.seq) * l.micro_batch;
  c.activation_bytes = tokens * m.hidden * hw.value_bytes / (l.sequence_parallel ? l.tp : 1);
  // DeepSpeed's engine sends each tensor-parallel rank's 1/tp slice of an activation or gradient
  // and all-gathers it over the tensor-parallel group on arrival (is_pipe_partitioned,
  // is_grad_partitioned): a smaller transfer, and one blocking all-gather more in each F and B.
  if (l.schedule == "deepspeed" && l.tp > 1 && !l.sequence_parallel) {
    const double whole = c.activation_bytes;
    c.activation_bytes = whole / l.tp;
    const double regather = CollectiveSeconds(tp_links, CollectiveKind::kAllGather, whole, l.tp, l.tp);
    c.forward_s += regather, c.forward_wait_s += regather;
    c.backward_input_s += regather, c.backward_input_wait_s += regather, c.backward_s += regather;
  }
  // Offloaded activations: the executor copies a recomputed chunk's input (every chunk with layers
  // but the last) to the host after its forward and back before its backward, synchronously on
  // the training thread: over PCIe on a GPU, into the host pool on a CPU box. The NVMe write is
  // asynchronous and the read prefetched a chunk ahead, so NVMe adds no time here.
  if (l.activations_offload != Offload::kNone) {
    const double rate =
        hw.shared_compute_units > 0 ? hw.memory_bytes_per_s * hw.memory_efficiency : hw.pcie_bytes_per_s;
    const double copy_s = c.activation_bytes / rate;
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
      if (chunks[i].layers <= 0) continue;
      c.virtual_stage_extra[i].forward_s += copy_s;
      c.virtual_stage_extra[i].backward_input_s += copy_s;
    }
  }
  // Neighbouring stages are `stride` ranks apart; a receive is waited for (blocking).
  const int stride = l.design == Design::k3D ? (l.dp_outer ? l.tp : l.tp * l.dp) : l.zero;
  const bool same_node = stride * l.pp <= g;
  c.inter = same_node ? SameNodeTransferLink(hw, blocking)
                      : scheduler::Link{hw.inter.latency_s, hw.inter.Effective() / g, hw.inter.wire_latency_s};
  if (l.design != Design::k3D) {
    double stage = 0;
    for (int r = 0; r < l.pp; ++r) stage = std::max(stage, StageParameters(m, l, r));
    c.stage_param_bytes = stage * hw.value_bytes;
    c.zero = l.zero;
    const int rpn = RanksPerNode(l.zero, 1, g);
    // The group's ring on a description's links: a hop's latency per step, the bus bandwidth.
    auto ring = [&](const Hardware& links) {
      const double wire = HopWireLatency(links, l.zero, rpn);
      return scheduler::Link{(l.zero - 1) * HopLatency(links, l.zero, rpn), BusBytesPerSecond(links, l.zero, rpn),
                             wire < 0 ? -1 : (l.zero - 1) * wire};
    };
    c.intra = ring(hw);
    if (blocking.intra.bytes_per_s != hw.intra.bytes_per_s || blocking.intra.latency_s != hw.intra.latency_s) {
      Hardware gather = blocking;  // a whole unit's all-gather: its own fit where the box has one
      if (hw.intra_oversubscribed_gather.bytes_per_s > 0) gather.intra = hw.intra_oversubscribed_gather;
      c.intra_blocking = ring(gather);
      c.has_intra_blocking = true;
    }
    // A group across nodes on a CPU box whose inter-node link was also measured idle: its
    // collectives on the comm stream run at the idle rate while the box has cores to spare.
    if (hw.shared_compute_units > 0 && hw.inter_idle.bytes_per_s > 0) {
      Hardware idle = hw;
      idle.inter = hw.inter_idle;
      const scheduler::Link link = ring(idle);
      if (link.alpha_s != c.intra.alpha_s || link.bytes_per_s != c.intra.bytes_per_s) {
        c.intra_idle = link;
        c.has_intra_idle = true;
      }
    }
    // On a CPU box the gathered bytes are also copied into the unsharded buffer; NCCL writes
    // them in place on a GPU.
    if (hw.shared_compute_units > 0) c.copy_bytes_per_s = hw.memory_bytes_per_s * hw.memory_efficiency;
  }
  // Offloaded parameters: the communicator stages the host shard onto the device before the
  // gather (zeropp/communicator.cc, ForBackend) and the reduced gradient shard goes back to its
  // tier (FlatParam::AccumulateGradShard), over PCIe on a GPU; from NVMe the shard is read first,
  // the gradient shard written, and read back before each later accumulation. On a CPU box host
  // memory is the device's: only NVMe costs.
  if (l.params_offload != Offload::kNone) {  // ZeRO designs only (Layout::Check)
    const double pcie = hw.shared_compute_units > 0 ? 0.0 : 1 / hw.pcie_bytes_per_s;
    const double nvme = l.params_offload == Offload::kNvme ? 1 / hw.nvme_bytes_per_s : 0.0;
    c.gather_staging_s_per_byte = pcie + nvme;
    c.reduce_staging_s_per_byte = pcie + nvme;
    c.reduce_accumulate_s_per_byte = nvme;
    // On a GPU both copies are blocking calls on the training thread (ForBackend's and
    // AccumulateGradShard's copies are synchronous), so they run between the computations, not
    // beside them: on two leases the step less its host update was the staging plus the
    // computation (2026-11-28's H100, 0.41 s against 0.31 + 0.08; 2026-12-04's H200, 0.67 s against
    // 0.53 + 0.14), where the comm stream had charged their larger alone
    // (benchmarks/results/planner-gpu-offload-2026-12-05.txt). With a sharding group the
    // collective follows its staging and the simulation cannot yet order the two: there the
    // comm stream keeps them, in order (never measured on a GPU).
    c.staging_blocks = hw.shared_compute_units == 0 && l.zero == 1;
  }
  // On a CPU box the transport runs on the compute cores: each byte a rank sends costs it the
  // compute the calibration measured per byte (Hardware::comm_cpu_bytes_per_s), and per byte that
  // crosses between nodes what it measured for that link (comm_cpu_inter_bytes_per_s). A sharding
  // group's ring over k nodes of r ranks crosses on k of its k x r hops, so on 1/r of its bytes;
  // a transfer between stages on different nodes crosses with all of them.
  const double share = ComputeShare(hw, devices_on_box);
  if (hw.shared_compute_units > 0) {
    const int zero_per_node = RanksPerNode(l.zero, 1, g);
    const double crossing = l.zero > zero_per_node ? 1.0 / zero_per_node : 0.0;
    c.comm_cpu_s_per_byte = (1 - crossing) / hw.CommCpuBytesPerSecond() + crossing / hw.CommCpuInterBytesPerSecond();
    c.p2p_cpu_s_per_byte = 1 / (same_node ? hw.CommCpuBytesPerSecond() : hw.CommCpuInterBytesPerSecond());
    c.comm_cpu_s_per_message = hw.comm_cpu_s_per_message;
    // Measured per parameter of a unit per reduction (./zpp calibrate's 1-rank runs reduce every
    // unit every micro-batch) at a whole core, as compute is; a chunk's bytes count all its tensor-
    // parallel ranks' parameters.
    c.reduce_handling_s_per_byte = hw.grad_handling_s_per_param / (hw.value_bytes * l.tp);
    if (share > 1) {
      c.shared_cores = hw.shared_compute_units;
      c.ranks_per_simulated_rank = std::max(1, devices_on_box / l.pp);
      c.shared_slowdown = hw.oversubscribed_compute_factor;
      // Blocking waits inside computations (TP collectives) keep their cores: a rank waiting in
      // one mostly waits for its partner, which is computing, so the other stages' ranks do not
      // speed up meanwhile (our reading of planner-local r5: on the tp2 x pp2 rows the predicted
      // TP time was 1.02-1.19x the ranks' measured TP waits, the rest of the step 0.77-0.88x of
      // the measured rest while waits took no core). The same for gathers waited on at once: traced
      // on FSDP-in-1F1B u1 (planner-local-diagnostics-2026-11-23.txt, section 5), the executor's
      // stage 0 computed no faster while stage 1 waited on its gathers, where the simulator had it
      // run 17% short on both stages. Of a group waiting on a gather, though, only the rank that
      // has not reached it still computes; the others sleep in the wait (CommWork::Wait blocks on
      // a condition variable). Profiled after planner-local r150 on a Zen 5 box
      // (benchmarks/results/fsdp-in-1f1b-u1-profile-2026-12-03.txt), FSDP-in-1F1B's stage-0
      // forwards took 23.4 ms, between the 13.7 ms the simulator gives one alone and the 27.8 ms
      // it gave them beside stage 1's computation and gather waits: so each sharding group holds
      // one core, 1 / zero of its ranks', while it waits.
      c.waits_hold_cores = true;
      c.gather_wait_core_share = 1.0 / std::max(1, l.zero);
    }
  }
  // Every rank reduces and steps at once: the tail runs at its share of a core.
  const auto tail = StepTail(m, l, blocking, tp_links, share);
  c.optimizer_s = tail.first + tail.second;
  return {c, layer, head, tail.first, tail.second, std::move(copy_s), std::move(add_s), std::move(add_values)};
}

}  // namespace

scheduler::CostModel BuildCostModel(const ModelShape& m, const Layout& l, const Hardware& hw, int devices_on_box,
                                   int micro_batches) {
  return BuildCostParts(m, l, hw, devices_on_box, micro_batches).model;
}

MemoryBreakdown PredictMemory(const ModelShape& m, const Layout& l, const Hardware& hw, int global_batch) {
  return EstimateMemory(m, l, hw, ValidatedReport(m, l, hw, global_batch).first);
}

std::vector<MemoryBreakdown> PredictMemoryPerRank(const ModelShape& m, const Layout& l, const Hardware& hw,
                                                  int global_batch, scheduler::ValidationReport* report) {
  const auto [s, rep] = ValidatedReport(m, l, hw, global_batch);
  *report = rep;
  std::vector<MemoryBreakdown> out;
  for (int r = 0; r < l.pp; ++r) out.push_back(EstimateRankMemory(m, l, hw, s, r));
  return out;
}

std::vector<OpTimes> PredictOpTimes(const ModelShape& m, const Layout& l, const Hardware& hw, int global_batch) {
  const auto [s, rep] = ValidatedReport(m, l, hw, global_batch);
  const CostParts parts = BuildCostParts(m, l, hw, l.Devices(), s.m);
  // The kinds' times and counts in ActionCost are before compute_scale: reported as they are.
  const ActionCost& layer = parts.layer;
  const ActionCost& head = parts.head;
  const std::vector<ChunkShape> shapes = ChunkShapes(m, l);
  std::vector<OpTimes> out(l.pp);
  for (int r = 0; r < l.pp; ++r) {
    OpTimes& t = out[r];
    for (int c = 0; c < s.v; ++c) {
      const double layers = shapes.at(static_cast<size_t>(c) * s.pp + r).layers;
      const double again = s.Recompute(r, c) ? 1.0 : 0.0;
      t.matmul_s += layers * (layer.matmul_s + again * layer.matmul_forward_s);
      t.attention_s += layers * (layer.attention_s + again * layer.attention_forward_s);
      t.elementwise_s += layers * (layer.elementwise_s + again * layer.elementwise_forward_s);
      t.matmul_flops += layers * layer.matmul_flops * (1 + again / 3);
      t.elementwise_values += layers * (layer.elementwise_values + again * layer.elementwise_forward_values);
      const size_t stage = static_cast<size_t>(c) * s.pp + r;
      t.copy_s += parts.landing_copy_s.at(stage);
      t.elementwise_s += parts.landing_add_s.at(stage);
      t.elementwise_values += parts.landing_add_values.at(stage);
      if (c * s.pp + r == s.pp * s.v - 1) {
        t.matmul_s += head.matmul_s;
        t.elementwise_s += head.elementwise_s;
        t.matmul_flops += head.matmul_flops;
        t.elementwise_values += head.elementwise_values;
      }
    }
    t.matmul_s *= s.m;
    t.attention_s *= s.m;
    t.elementwise_s *= s.m;
    t.matmul_flops *= s.m;
    t.elementwise_values *= s.m;
    t.copy_s *= s.m;
    t.optimizer_s = parts.optimizer_s;
  }
  return out;
}

Prediction Predict(const ModelShape& m, const Layout& l, const Hardware& hw, int global_batch,
                   scheduler::SimResult* sim) {
  const auto [s, rep] = ValidatedReport(m, l, hw, global_batch);
  const CostParts parts = BuildCostParts(m, l, hw, l.Devices(), s.m);
  const scheduler::CostModel& c = parts.model;
  scheduler::SimResult r = scheduler::Simulate(s, c);
  Prediction p;
  p.layout = l;
  p.step_s = r.step_s;
  p.tokens_per_s = static_cast<double>(global_batch) * m.seq / r.step_s;
  p.mfu = p.tokens_per_s * m.TrainFlopsPerToken() / (l.Devices() * hw.ComputeFlops());
  p.compute_s = *std::max_element(r.busy_s.begin(), r.busy_s.end());
  // TP communication's share of the busiest rank's compute, in whole-layer units.
  const double layer_total = parts.layer.forward_s + parts.layer.Backward();
  p.tp_comm_s = layer_total > 0 ? parts.layer.tp_comm_s * p.compute_s / layer_total : 0;
  double extra_tp = 0;  // the embedding's and the head's, once per micro-batch in the pipeline
  for (const auto& e : c.virtual_stage_extra) extra_tp += e.forward_wait_s + e.backward_input_wait_s;
  const double micro_batches = static_cast<double>(global_batch) / (l.micro_batch * l.dp * l.zero);
  p.tp_collectives_s = micro_batches * (m.layers * parts.layer.tp_comm_s + extra_tp) / l.pp;
  p.dp_reduce_s = parts.reduce_s;
  p.optimizer_s = parts.optimizer_s;
  p.idle_s = std::max(0.0, r.step_s - c.optimizer_s - p.compute_s);
  p.gather_bytes = r.gather_bytes_per_rank;
  p.reduce_bytes = r.reduce_bytes_per_rank;
  p.p2p_bytes = r.p2p_bytes_per_rank;
  p.blocking_gather_s = r.blocking_gather_s;
  p.memory = EstimateMemory(m, l, hw, s);
  p.rank0_model_state = EstimateRankMemory(m, l, hw, s, 0).ModelState();
  if (sim != nullptr) *sim = std::move(r);
  return p;
}

}  // namespace planner
}  // namespace zeropp
