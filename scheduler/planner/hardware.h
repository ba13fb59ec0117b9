// hardware.h: a machine kind as the planner sees it, read from a small JSON file (nlohmann).
//
// One file per machine kind (scheduler/planner/hardware/*.json). Every number is per device
// unless its name says otherwise; bandwidths are bytes per second per direction. Fields:
//   name, source                 what it is and where each number comes from
//   devices_per_node             GPUs (or ranks) per node
//   shared_compute_units         0 on GPUs; on a CPU box, the cores every local rank shares
//   peak_tflops {bf16, fp32}     dense peak of one device
//   compute_dtype                "bf16" (default: bf16 compute, fp32 master) or "fp32" (CPU)
//   matmul {max_efficiency, half_dim[, table]}   achieved/peak of an (M,N,K) GEMM:
//                                max_efficiency * prod over d in {M,N,K} of d/(d+half_dim);
//                                table (optional, measured on a CPU box by ./zpp calibrate with
//                                benchmarks/linear_grid): {tokens: [..], dims: [..], forward: [..],
//                                input_grad: [..], weight_grad: [..]}, a linear layer's three GEMMs'
//                                achieved/peak on the grid tokens x in x out (in and out both from
//                                dims; each list flat, tokens slowest, out fastest); where present it
//                                replaces the formula (see MatmulTable)
//   matmul.cold_weight_gbps      optional, default none: the rate (GB/s) at which a linear's GEMM
//                                brings a weight it reads (forward, input gradient) from memory
//                                where the cache does not hold it, beyond the table's time (the table
//                                times each shape again and again, its weight hot): each such pass of
//                                each linear in a layer and in the head pays its weight's bytes at
//                                this rate, whatever its tokens. benchmarks/cold_weights measures it
//                                on a CPU box. No description sets it: in place of the compute fit's
//                                fixed cost per layer it predicted this box's runs worse
//                                (planner-local --history --set tries it; the chronicle, thirty-ninth
//                                session)
//   attention_efficiency         achieved/peak of the attention core (flash or batched GEMM)
//   attention_efficiency_flash_v1  optional, default attention_efficiency: achieved/peak of the
//                                attention core in the kernels of 2022-23 (FlashAttention 1, its
//                                Triton port), for a model whose attention_kernel is flash-v1
//   compute_overhead             optional, default 1: factor on every compute time. Measured on a
//                                CPU box by ./zpp calibrate (1-rank runs' forward + backward times
//                                fitted as this factor on the cost model's + layer_overhead_us:
//                                eager-mode overhead shapes cannot see); 1 on GPUs
//   layer_overhead_us            optional, default 0: fixed seconds (in us) one layer's forward +
//                                backward of one micro-batch costs whatever its size: eager-mode
//                                dispatch and autograd bookkeeping per operator. Fitted with
//                                compute_overhead by ./zpp calibrate from 1-rank runs of three
//                                shapes; 0 on GPUs
//   layer_overhead_probe_us      optional, read only by tools/compute_fit.py: a fixed cost per layer
//                                call measured apart (tools/layer_cost.py: a tiny GPT at two depths);
//                                where present the compute fit takes it as layer_overhead_us and fits
//                                compute_overhead alone. No description sets it: in place of the
//                                fitted intercept it predicted this box's runs worse (the chronicle,
//                                thirty-ninth session)
//   action_overhead_us           optional, default 0: fixed seconds (in us) each action of a
//                                pipeline chunk costs (a forward, a backward, or a split
//                                backward's input and weight halves each), whatever its layers:
//                                the executor's and autograd's per-call work. No description sets
//                                it: ./zpp calibrate's runs are one chunk, where it cannot be told
//                                from layer_overhead_us (planner-local --history --set tries values)
//   layer_dispatch_us            optional, default 0, GPUs: the host time (in us) to issue one
//                                layer's forward and backward kernels for one micro-batch (eager
//                                dispatch, autograd, launches). The host runs ahead of the device
//                                through its queue: a layer takes the larger of its device time
//                                (forward and both backward halves) and this; a host-bound
//                                layer's passes stretch in proportion. Measured by gpu_checks.sh
//                                from a step too small to keep the GPU busy
//   optimizer_mparams_per_s      optional: one rank's measured AdamW step rate (parameters per
//                                second / 1e6, gradient norm and clipping included); absent: the
//                                memory-bound model of OptimizerSeconds
//   grad_handling_ns_per_param   optional, default 0: the executor's own gradient bookkeeping per
//                                parameter of a unit per reduction (handing the unsharded gradient
//                                to the reduction and taking the result), at a whole core, measured
//                                on a CPU box by ./zpp calibrate, whose 1-rank runs reduce every
//                                unit every micro-batch; charged at each reduction in the program
//   compute_cv, comm_cv          optional, default 0: how much one computation's, and one
//                                collective's or transfer's, time varies from one run of it to the
//                                next (coefficient of variation; CostModel::compute_cv): a CPU box
//                                time-slicing more ranks than cores; measured by ./zpp calibrate; 0
//                                on GPUs
//   memory {capacity_gb, bandwidth_gbps, efficiency, reserved_gb[, elementwise_efficiency]}
//                                reserved: runtime context + allocator slack, never usable;
//                                efficiency: a large copy's (and the fused optimizer's) achieved
//                                fraction of the bandwidth; elementwise_efficiency (optional,
//                                default efficiency): the same for a layer's unfused element-wise
//                                kernels (eager PyTorch: norms, activations, residual adds, the
//                                loss), values counted as cost_model.h's passes. Measured on an
//                                H100 by the op profile of a training step (gpu_checks.sh 2b) and
//                                by gpu_calibrate.py's element-wise kernels
//   intra_node {bandwidth_gbps, latency_us, efficiency}   device-to-device inside a node
//   inter_node {bandwidth_gbps, latency_us, efficiency}   per NODE, all its NICs together (on a
//                                CPU box: measured while every core computes, as in training)
//                                [wire_latency_us]: optional, any link: wire-bound, a hop takes
//                                max(latency, wire latency + its bytes' time) (tools/link_fit.py:
//                                a CPU box's shaped link, whose latency passes while tc drains it)
//   inter_node_idle {bandwidth_gbps, latency_us, efficiency}   optional, CPU boxes: the same link
//                                measured with the box idle. A ZeRO group's prefetched gathers
//                                and reductions across nodes run at inter_node's rate while the
//                                box's ranks outnumber its cores and at this one's otherwise (the
//                                simulator switches as the load changes). Default: inter_node
//   intra_node_oversubscribed {bandwidth_gbps, latency_us, efficiency}   optional, CPU boxes: the
//                                intra-node link as a blocking collective sees it while the box's
//                                ranks outnumber its cores (two tp=2 jobs of the 3D baseline at once,
//                                their TP waits fitted: the partner must be scheduled to answer);
//                                tensor-parallel collectives, same-node pipeline receives (with
//                                intra_node_p2p, see there) and step-end collectives use it there
//                                (prefetched gathers do not); tensor-parallel collectives also
//                                where the ranks just fill the cores, unless the box has
//                                intra_node_tp_filled (below)
//   intra_node_tp_filled {bandwidth_gbps, latency_us, efficiency}   optional, CPU boxes: the
//                                intra-node link as a tensor-parallel collective sees it while the
//                                box's ranks fill its cores without outnumbering them (one tp=2 job
//                                of the 3D baseline per two cores, their TP waits fitted: the
//                                partner computes on its own core). Default: intra_node_oversubscribed
//   intra_node_oversubscribed_gather {bandwidth_gbps, latency_us, efficiency}   optional, CPU
//                                boxes: the same, for a ZeRO group's all-gather of a whole unit
//                                waited on at once (megabytes, where TP's all-reduces move tens to
//                                hundreds of kilobytes): two 2-rank ZeRO-3 jobs without prefetch at
//                                once, their gather waits fitted. Default: intra_node_oversubscribed
//   intra_node_p2p {bandwidth_gbps, latency_us, efficiency}   optional, CPU boxes: the intra-node
//                                link as a pipeline transfer sees it while both ranks compute (the
//                                sender computes on while its transport's threads must be scheduled;
//                                tools/calibrate_pairs.sh fits its latency to how much a pipeline
//                                job's step grows from 1 to 4 chunks per rank, its bandwidth
//                                intra_node's). Same-node pipeline transfers take the slower of it
//                                and the blocking link (intra_node, or intra_node_oversubscribed
//                                where the ranks outnumber the cores) in each part. Default: none
//   oversubscribed_compute_factor optional, CPU boxes, default 1: how much slower a core's compute
//                                runs while twice as many ranks as cores compute (switching, caches)
//   comm_cpu_gbps                optional, CPU boxes: bytes a rank sends per second of compute it
//                                loses to the transport (its threads, wake-ups and copies, the
//                                kernel's included); sets the compute a rank loses per byte it
//                                communicates. ./zpp calibrate measures it with the box's ranks all
//                                computing (collectives_bench --comm-cpu-only; descriptions before
//                                2026-11-25 took the unloaded loopback ring's bus bandwidth).
//                                Default: intra_node
//   comm_cpu_inter_node_gbps     optional, CPU boxes: the same for a byte that crosses between nodes
//                                (here a veth pair between network namespaces, dearer than the
//                                loopback): ./zpp calibrate derives it from the same measurement
//                                over two nodes of 2 ranks, whose ring crosses between nodes on
//                                half its hops. A ring over k nodes of r ranks pays it on 1/r of
//                                its bytes; a transfer between pipeline stages on different nodes
//                                on all. Default: comm_cpu_gbps
//   comm_cpu_us_per_message      optional, CPU boxes, default 0: the CPU one point-to-point message
//                                takes each side, its size aside (the transport's calls and
//                                wake-ups; ./zpp calibrate: a tiny 2-rank pipeline's extra CPU per
//                                extra message from 1 to 4 chunks per rank, tools/p2p_cpu.py); a
//                                pipeline's transfers pay it on both ranks
//   comm_cpu_messages_per_tp_collective optional, CPU boxes, default 0: the CPU a tensor-parallel
//                                collective takes each of its ranks outside the wait, in
//                                comm_cpu_us_per_message units (charged as the rank's compute);
//                                ./zpp calibrate: tp2 x dp2 on two unshaped nodes at 168 and 42 TP
//                                collectives a step, the rest of the step's growth beyond the
//                                planner's (tools/calibrate_tp_cpu.sh, tools/tp_cpu_fit.py)
//   tp_peer_skew                 optional, CPU boxes, default 0 (off): a tensor-parallel group moves
//                                at its slowest peer's pace, each peer's compute between two of its
//                                collectives lasting its own lognormal factor of compute_cv: 1
//                                stretches a TP group's compute by E[max of tp such factors] - 1
//                                (benchmarks/results/tp-wait-skew-2026-12-03.txt); a what-if
//                                that did worse over r29-r152 (planner-local-whatif-tp-peer-skew-
//                                2026-12-03.txt), kept for --history --set
//   overlap_compute_slowdown     optional, default 0: how much longer computation takes while a
//                                collective of the comm stream runs beside it (NCCL's kernels take
//                                SMs and memory bandwidth from the GEMMs they overlap): 0.189 is
//                                +18.9%, applied only to the compute that overlaps prefetched
//                                gathers and reductions; GPUs only (a CPU box's comm_cpu_gbps
//                                charges its transport's copies instead)
//   allreduce_algorithm          "ring", "tree" or "auto" (the faster of the two per call)
//   host {memory_bandwidth_gbps, pcie_gbps, nvme_gbps[, capacity_gb][, adamw_mparams_per_s]}
//                                for offload; memory bandwidth and capacity per NODE (shared by its
//                                devices; capacity optional: without it host memory is not checked),
//                                PCIe and NVMe per device; adamw_mparams_per_s optional: the node's
//                                CPU AdamW rate, all its cores (measured: gpu_calibrate.py), for
//                                hosts where the update is compute- rather than memory-bound
// Throws std::invalid_argument naming the file, the field, the value and what was expected.
#pragma once

#include <string>
#include <vector>

namespace zeropp {
namespace planner {

struct LinkSpec {
  double bytes_per_s = 0;  // nominal, per direction
  double latency_s = 0;    // per message hop
  double efficiency = 1;   // achieved fraction of bytes_per_s for large messages
  // Wire-bound (tools/link_fit.py): a hop takes max(latency_s, wire_latency_s + its bytes' time),
  // the latency passing while the bytes drain; < 0: latency_s + the bytes' time (alpha-beta).
  double wire_latency_s = -1;
  double Effective() const { return bytes_per_s * efficiency; }
};

// A linear layer's GEMMs (x [tokens x in], W [out x in]) measured on a grid: achieved/peak per pass.
enum class GemmPass { kForward, kInputGrad, kWeightGrad };
struct MatmulTable {
  std::vector<double> tokens, dims;      // grid axes, strictly increasing
  std::vector<double> efficiency[3];     // per GemmPass: tokens.size() x dims.size() x dims.size()
  bool empty() const { return tokens.empty(); }
};

struct Hardware {
  std::string name;
  std::string source;
  int devices_per_node = 8;
  int shared_compute_units = 0;
  double bf16_flops = 0;  // per second
  double fp32_flops = 0;
  int value_bytes = 2;  // of the compute dtype: 2 for bf16, 4 for fp32
  double ComputeFlops() const { return value_bytes == 2 ? bf16_flops : fp32_flops; }
  double matmul_max_efficiency = 0.8;
  double matmul_half_dim = 128;
  double cold_weight_bytes_per_s = 0;  // 0: none (matmul.cold_weight_gbps)
  MatmulTable matmul_table;  // empty: the formula
  double attention_efficiency = 0.5;
  double attention_efficiency_flash_v1 = 0.5;  // = attention_efficiency unless the file sets it
  double compute_overhead = 1;
  double layer_overhead_s = 0;
  double action_overhead_s = 0;
  double layer_dispatch_s = 0;
  double optimizer_params_per_s = 0;  // 0: memory-bound model
  double grad_handling_s_per_param = 0;
  double compute_cv = 0, comm_cv = 0;
  double memory_bytes = 0;
  double memory_bytes_per_s = 0;
  double memory_efficiency = 0.85;
  double elementwise_efficiency = 0.85;  // = memory_efficiency unless the file sets it
  double ElementwiseBytesPerSecond() const { return memory_bytes_per_s * elementwise_efficiency; }
  double reserved_bytes = 0;
  LinkSpec intra;
  LinkSpec inter;  // per node
  LinkSpec inter_idle;  // bytes_per_s 0: none (inter is used)
  LinkSpec intra_oversubscribed;  // bytes_per_s 0: none (intra is used)
  LinkSpec intra_oversubscribed_gather;  // bytes_per_s 0: none (intra_oversubscribed is used)
  LinkSpec intra_tp_filled;  // bytes_per_s 0: none (intra_oversubscribed is used)
  LinkSpec intra_p2p;  // bytes_per_s 0: none (same-node pipeline transfers take the blocking link)
  double oversubscribed_compute_factor = 1;
  double comm_cpu_bytes_per_s = 0;  // 0: intra.Effective()
  double comm_cpu_inter_bytes_per_s = 0;  // 0: CommCpuBytesPerSecond()
  double comm_cpu_s_per_message = 0;
  double comm_cpu_messages_per_tp_collective = 0;
  double tp_peer_skew = 0;
  double overlap_compute_slowdown = 0;
  double CommCpuBytesPerSecond() const { return comm_cpu_bytes_per_s > 0 ? comm_cpu_bytes_per_s : intra.Effective(); }
  double CommCpuInterBytesPerSecond() const {
    return comm_cpu_inter_bytes_per_s > 0 ? comm_cpu_inter_bytes_per_s : CommCpuBytesPerSecond();
  }
  std::string allreduce_algorithm = "auto";
  double host_bytes_per_s = 0;
  double pcie_bytes_per_s = 0;
  double nvme_bytes_per_s = 0;
  double host_capacity_bytes = 0;  // per node; 0: unknown
  double host_adamw_params_per_s = 0;  // per node; 0: memory-bound only
};

Hardware ParseHardware(const std::string& json_text, const std::string& origin);
Hardware LoadHardware(const std::string& path);  // a path, or a name under scheduler/planner/hardware/
// The names under scheduler/planner/hardware/, sorted (none when run outside the checkout).
std::vector<std::string> ShippedHardwareNames();

}  // namespace planner
}  // namespace zeropp
