#include "scheduler/planner/cost_model.h"

#include <algorithm>
#include <cmath>

namespace zeropp {
namespace planner {
namespace {

double Sat(double d, double half) { return d / (d + half); }

// Where x falls on a strictly increasing axis, in log size: the lower grid index and the upper
// point's weight, clamped to the axis's ends.
std::pair<size_t, double> AxisPosition(const std::vector<double>& axis, double x) {
  if (axis.size() == 1 || x <= axis.front()) return {0, 0.0};
  if (x >= axis.back()) return {axis.size() - 2, 1.0};
  const size_t i = static_cast<size_t>(std::upper_bound(axis.begin(), axis.end(), x) - axis.begin()) - 1;
  return {i, std::log(x / axis[i]) / std::log(axis[i + 1] / axis[i])};
}

}  // namespace

double MatmulEfficiency(const Hardware& hw, double m, double n, double k) {
  const double h = hw.matmul_half_dim;
  return hw.matmul_max_efficiency * Sat(m, h) * Sat(n, h) * Sat(k, h);
}

double LinearEfficiency(const Hardware& hw, GemmPass pass, double tokens, double in, double out) {
  const MatmulTable& t = hw.matmul_table;
  if (t.empty()) return MatmulEfficiency(hw, tokens, in, out);
  const auto [ti, tw] = AxisPosition(t.tokens, tokens);
  const auto [ii, iw] = AxisPosition(t.dims, in);
  const auto [oi, ow] = AxisPosition(t.dims, out);
  const std::vector<double>& e = t.efficiency[static_cast<int>(pass)];
  const size_t nd = t.dims.size();
  double seconds_per_flop = 0;  // in units of 1 / peak
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      for (int c = 0; c < 2; ++c) {
        const double w = (a ? tw : 1 - tw) * (b ? iw : 1 - iw) * (c ? ow : 1 - ow);
        if (w == 0) continue;  // also keeps a one-point axis in range
        seconds_per_flop += w / e[((ti + a) * nd + ii + b) * nd + oi + c];
      }
    }
  }
  return 1 / seconds_per_flop;
}

double LinearGemmSeconds(const Hardware& hw, GemmPass pass, double tokens, double in, double out) {
  if (tokens <= 0 || in <= 0 || out <= 0) return 0;
  return 2 * tokens * in * out / (hw.ComputeFlops() * LinearEfficiency(hw, pass, tokens, in, out));
}

double ColdWeightSeconds(const Hardware& hw, double in, double out) {
  return hw.cold_weight_bytes_per_s > 0 ? in * out * hw.value_bytes / hw.cold_weight_bytes_per_s : 0.0;
}

double BusBytesPerSecond(const Hardware& hw, int ranks, int ranks_per_node) {
  const int g = std::max(1, std::min(ranks, ranks_per_node));
  if (ranks <= g) return hw.intra.Effective();
  const double inter = hw.inter.Effective() * g / hw.devices_per_node;
  return std::min(hw.intra.Effective(), inter);
}

double HopLatency(const Hardware& hw, int ranks, int ranks_per_node) {
  return ranks <= std::max(1, ranks_per_node) ? hw.intra.latency_s : hw.inter.latency_s;
}

double HopWireLatency(const Hardware& hw, int ranks, int ranks_per_node) {
  return ranks <= std::max(1, ranks_per_node) ? hw.intra.wire_latency_s : hw.inter.wire_latency_s;
}

double CollectiveSeconds(const Hardware& hw, CollectiveKind kind, double bytes, int ranks, int ranks_per_node) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double p = ranks, bus = BusBytesPerSecond(hw, ranks, ranks_per_node);
  const double alpha = HopLatency(hw, ranks, ranks_per_node);
  // A ring's hop; on a wire-bound link (LinkSpec::wire_latency_s) its latency passes while its
  // bytes drain.
  const double wire = HopWireLatency(hw, ranks, ranks_per_node), bytes_s = bytes / p / bus;
  const double hop = wire < 0 ? alpha + bytes_s : std::max(alpha, wire + bytes_s);
  if (kind != CollectiveKind::kAllReduce) return (p - 1) * hop;
  const double ring = 2 * (p - 1) * hop;
  const double tree = 2 * std::ceil(std::log2(p)) * alpha + 2 * bytes / bus;
  if (hw.allreduce_algorithm == "ring") return ring;
  if (hw.allreduce_algorithm == "tree") return tree;
  return std::min(ring, tree);
}

ActionCost LayerCost(const ModelShape& m, const Hardware& hw, const ComputeOptions& o) {
  const double t = o.tp, tokens = static_cast<double>(o.micro_batch) * m.seq, h = m.hidden;
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim();
  const double vb = hw.value_bytes;
  ActionCost c;
  // (out, in) of each linear layer on one tensor-parallel rank.
  const double gemms[][2] = {
      {(h + 2 * kv) / t, h},                      // QKV (column parallel)
      {h, h / t},                                 // attention output (row parallel)
      {(m.swiglu ? 2.0 : 1.0) * m.ffn / t, h},    // MLP up (+ gate)
      {h, m.ffn / t},                             // MLP down (row parallel)
  };
  double column_di[2] = {0, 0};  // input-gradient GEMMs of the column-parallel QKV and MLP up
  for (int i = 0; i < 4; ++i) {
    const double out = gemms[i][0], in = gemms[i][1];
    // The passes that read the weight also bring it from memory where the cache does not hold it.
    const double cold = ColdWeightSeconds(hw, in, out);
    const double f = LinearGemmSeconds(hw, GemmPass::kForward, tokens, in, out) + cold;
    const double di = LinearGemmSeconds(hw, GemmPass::kInputGrad, tokens, in, out) + cold;  // dX = dY W
    if (i % 2 == 0) column_di[i / 2] = di;
    const double dw = LinearGemmSeconds(hw, GemmPass::kWeightGrad, tokens, in, out);  // dW = dY^T X
    c.forward_s += f;
    c.backward_input_s += di;
    c.backward_weight_s += dw;
    c.matmul_s += f + di + dw;
    c.matmul_forward_s += f;
    c.matmul_flops += 3 * 2 * tokens * in * out;
  }
  // Attention core: QK^T and AV over heads/t heads.
  const double core_flops = 4.0 * o.micro_batch * m.seq * m.seq * h / t * (m.flash_attention ? 0.5 : 1.0);
  const double attn_eff = m.flash_attention && m.flash_v1 ? hw.attention_efficiency_flash_v1 : hw.attention_efficiency;
  const double attn_f = core_flops / (hw.ComputeFlops() * attn_eff);
  const double attn_b = attn_f * (m.flash_attention ? 2.5 : m.selective_recompute ? 3.0 : 2.0);
  c.forward_s += attn_f;
  c.backward_input_s += attn_b;
  c.attention_s = attn_f + attn_b;
  c.attention_forward_s = attn_f;
  // Element-wise: hidden-sized passes are split by t only with sequence parallelism.
  const double hidden_values = tokens * h / (o.sequence_parallel ? t : 1.0);
  const double ffn_values = tokens * m.ffn / t;
  double values = kElementwisePassesHidden * hidden_values + (m.swiglu ? 6.0 : kElementwisePassesFfn) * ffn_values;
  double scores = 0;
  if (!m.flash_attention) scores = kElementwisePassesScores * o.micro_batch * (m.heads / t) * m.seq * m.seq;
  const double bw = hw.ElementwiseBytesPerSecond();
  const double ew_f = (values + scores) * vb / bw;
  // Backward: twice the passes; selective recomputation runs the softmax passes once more.
  const double ew_b = 2 * ew_f + (m.selective_recompute ? scores * vb / bw : 0.0);
  c.forward_s += ew_f;
  c.backward_input_s += ew_b;
  c.elementwise_s = ew_f + ew_b;
  c.elementwise_forward_s = ew_f;
  c.elementwise_forward_values = values + scores;
  c.elementwise_values = 3 * (values + scores) + (m.selective_recompute ? scores : 0.0);
  // Tensor-parallel communication (intra-node group of t ranks).
  if (o.tp > 1) {
    const double act = tokens * h * vb;
    // Forward: 2 all-reduces (after attention and MLP); backward: 2 more (their conjugates).
    // With sequence parallelism each all-reduce becomes a reduce-scatter + all-gather pair.
    const double fwd = o.sequence_parallel
                           ? 2 * (CollectiveSeconds(hw, CollectiveKind::kAllGather, act, o.tp, o.tp) +
                                  CollectiveSeconds(hw, CollectiveKind::kReduceScatter, act, o.tp, o.tp))
                           : 2 * CollectiveSeconds(hw, CollectiveKind::kAllReduce, act, o.tp, o.tp);
    c.tp_forward_s = fwd;
    c.tp_comm_s = 2 * fwd;
    c.tp_forward_calls = c.tp_backward_calls = o.sequence_parallel ? 4 : 2;
    if (o.sequence_parallel) {
      // A column-parallel linear keeps only its input's sequence shard for the backward and
      // gathers it again there for the weight gradient: 2 more all-gathers per layer. Blocking
      // (benchmarks/baseline_3d waits at once), or issued before that linear's input-gradient
      // GEMM and waited after it (Megatron's asynchronous backward): only the excess counts.
      const double gather = CollectiveSeconds(hw, CollectiveKind::kAllGather, act, o.tp, o.tp);
      for (const double di : column_di) {
        c.tp_backward_extra_s += o.async_tp_backward ? std::max(0.0, gather - di * o.compute_scale) : gather;
      }
      c.tp_comm_s += c.tp_backward_extra_s;
      c.tp_backward_calls += 2;
    }
  }
  // The fixed per-layer cost (eager dispatch): a third in the forward, a third in each backward
  // half (set by hand: a backward runs about two operators per forward operator, its input and
  // weight gradients; the 1-rank runs ./zpp calibrate fits put 29% of it in the forward).
  // On a GPU the host issues the layer's kernels (forward and backward) in layer_dispatch_s. The
  // device queue lets the host run ahead of a short pass while a long one runs, so the layer takes
  // the larger of its device time and that issue time; a host-bound layer's passes stretch in
  // proportion. (Flooring each pass at a third of it instead predicted a 0.2B step whose forward
  // passes issue slower than they run 12% slow: the GPU kept up, benchmarks/results/gpu-2026-11-27.txt.)
  const double fixed = hw.layer_overhead_s / 3;
  const double f = c.forward_s * o.compute_scale, bin = c.backward_input_s * o.compute_scale,
               bwt = c.backward_weight_s * o.compute_scale, device = f + bin + bwt;
  const double stretch = device > 0 && hw.layer_dispatch_s > device ? hw.layer_dispatch_s / device : 1.0;
  c.forward_s = f * stretch + fixed + c.tp_forward_s;
  c.backward_input_s = bin * stretch + fixed + c.tp_forward_s + c.tp_backward_extra_s;
  c.backward_weight_s = bwt * stretch + fixed;
  return c;
}

ActionCost EmbeddingCost(const ModelShape& m, const Hardware& hw, const ComputeOptions& o) {
  ActionCost c;
  if (o.tp <= 1) return c;
  // Vocabulary-parallel lookup: each rank holds V/t rows, the partial embeddings are summed (one
  // all-reduce, or a reduce-scatter into the sequence shards); the backward needs none.
  const double act = static_cast<double>(o.micro_batch) * m.seq * m.hidden * hw.value_bytes;
  c.forward_s = o.sequence_parallel ? CollectiveSeconds(hw, CollectiveKind::kReduceScatter, act, o.tp, o.tp)
                                    : CollectiveSeconds(hw, CollectiveKind::kAllReduce, act, o.tp, o.tp);
  c.tp_comm_s = c.tp_forward_s = c.forward_s;
  c.tp_forward_calls = 1;
  return c;
}

ActionCost HeadCost(const ModelShape& m, const Hardware& hw, const ComputeOptions& o) {
  const double t = o.tp, tokens = static_cast<double>(o.micro_batch) * m.seq;
  ActionCost c;
  const double n = m.vocab / t, k = m.hidden;
  const double cold = ColdWeightSeconds(hw, k, n);
  const double f = LinearGemmSeconds(hw, GemmPass::kForward, tokens, k, n) + cold,
               di = LinearGemmSeconds(hw, GemmPass::kInputGrad, tokens, k, n) + cold,
               dw = LinearGemmSeconds(hw, GemmPass::kWeightGrad, tokens, k, n);
  // Cross-entropy over the (vocab-parallel) logits: fp32 softmax, read logits, write gradient.
  const double ew = tokens * n * (hw.value_bytes + 4 + 4) / hw.ElementwiseBytesPerSecond();
  double comm_f = 0, comm_b = 0;
  if (o.tp > 1) {
    // The head's input: all-gathered from the sequence shards (sequence parallelism) or copied to
    // every rank, whose backward all-reduces (reduce-scatters) its gradient. The vocabulary-
    // parallel loss: an all-gather of each token's local maximum and two all-reduces (the sum of
    // exponentials, the target's logit), fp32 per token.
    const double act = tokens * k * hw.value_bytes, per_token = tokens * 4;
    comm_f = (o.sequence_parallel ? CollectiveSeconds(hw, CollectiveKind::kAllGather, act, o.tp, o.tp) : 0.0) +
             CollectiveSeconds(hw, CollectiveKind::kAllGather, per_token * t, o.tp, o.tp) +
             2 * CollectiveSeconds(hw, CollectiveKind::kAllReduce, per_token, o.tp, o.tp);
    comm_b = o.sequence_parallel ? CollectiveSeconds(hw, CollectiveKind::kReduceScatter, act, o.tp, o.tp)
                                 : CollectiveSeconds(hw, CollectiveKind::kAllReduce, act, o.tp, o.tp);
  }
  c.forward_s = (f + ew) * o.compute_scale + comm_f;
  c.backward_input_s = (di + ew) * o.compute_scale + comm_b;
  c.backward_weight_s = dw * o.compute_scale;
  c.matmul_s = f + di + dw;
  c.matmul_forward_s = f;
  c.matmul_flops = 3 * 2 * tokens * k * n;
  c.elementwise_s = 2 * ew;
  c.elementwise_forward_s = ew;
  c.elementwise_forward_values = 3 * tokens * n;  // logits read, softmax and gradient written
  c.elementwise_values = 2 * c.elementwise_forward_values;
  c.tp_comm_s = comm_f + comm_b;
  if (o.tp > 1) {
    c.tp_forward_calls = o.sequence_parallel ? 4 : 3;
    c.tp_backward_calls = 1;
  }
  c.tp_forward_s = comm_f;
  return c;
}

namespace {

// Bytes AdamW moves per parameter: bf16: read fp32 master, m, v, gradient (4 x 4 B) and write
// master, m, v (3 x 4 B) and the bf16 compute copy (2 B); fp32: no separate copy.
double AdamBytesPerParam(const Hardware& hw) { return hw.value_bytes == 2 ? 30.0 : 28.0; }

}  // namespace

double OptimizerSeconds(const Hardware& hw, double params) {
  if (hw.optimizer_params_per_s > 0) return params / hw.optimizer_params_per_s;
  return params * AdamBytesPerParam(hw) / (hw.memory_bytes_per_s * hw.memory_efficiency);
}

double OffloadedOptimizerSeconds(const Hardware& hw, double params, Offload optimizer, Offload params_tier,
                                 int devices_on_node, double cpu_share) {
  const bool optimizer_nvme = optimizer == Offload::kNvme, params_nvme = params_tier == Offload::kNvme;
  // Parameters on nvme: the master read and written (in fp32 it is the shard), the gradient shard
  // read twice (the clipping norm's pass, then the update), and in bf16 the compute shard written.
  const double grad = hw.value_bytes;
  const double params_io = 2 * 4.0 + 2 * grad + (hw.value_bytes == 2 ? 2.0 : 0.0);
  const double io_per_param = (optimizer_nvme ? 2 * 8.0 : 0.0) + (params_nvme ? params_io : 0.0);
  const double io = params * io_per_param / hw.nvme_bytes_per_s;
  if (hw.shared_compute_units > 0) return std::max(OptimizerSeconds(hw, params) * cpu_share, io);
  // With the parameters resident on the device, zeropp's staging (zeropp/host_staging.h) moves each
  // unit's gradient down and its updated compute shard up in the compute dtype (bf16 as bf16), on
  // the copy stream while the CPU updates the unit before (down) and after (up) it; the two
  // directions use separate copy engines. The transfers also pass through host memory, beside the
  // update's own traffic. (Until 397a094 fp32 went both ways, after the update.)
  const double staged = params_tier == Offload::kNone ? hw.value_bytes : 0.0;
  const double pcie = params * staged / hw.pcie_bytes_per_s;
  // The node's CPU updates every offloading device's shard. Where the description has the measured
  // AdamW rate of the node's cores, that rate, slowed by the copies' traffic through host memory in
  // proportion to the update's own bytes; else memory-bound at the host's bandwidth. The measured
  // rate wins over the bound: the bandwidth is a copy's bytes over its time, which leaves out the
  // destination's read for ownership, so the bound charged a lent H100's 16-core host 1.99 s for an
  // update of 5.44B parameters its AdamW ran in 1.25-1.31 s (4.2-4.4 Gparam/s, beside the copies;
  // the rate measured alone: 4.6), benchmarks/results/gpu-2026-11-28.txt.
  const double node_params = params * std::max(1, devices_on_node);
  const double cpu = hw.host_adamw_params_per_s > 0
                         ? node_params / hw.host_adamw_params_per_s * (1 + 2 * staged / AdamBytesPerParam(hw))
                         : node_params * (AdamBytesPerParam(hw) + 2 * staged) / hw.host_bytes_per_s;
  // Gradient shards on the host (parameters offloaded there): the clipping norm reads each before any
  // update may start (the engine's step end, zeropp/engine.cc), the node's at host bandwidth. A
  // device-resident shard's norm runs on the device, in the step's compute.
  const double norm = params_tier == Offload::kCpu ? node_params * grad / hw.host_bytes_per_s : 0.0;
  // Pipelined unit by unit: the slowest of the three streams sets the pace (the first unit's copy
  // down and the last one's up, a unit's worth each, are left out).
  return norm + std::max({pcie, cpu, io});
}

double ExpectedMaxLognormal(int n, double cv) {
  if (n <= 1 || cv <= 0) return 1.0;
  // Over z, a standard normal: the factor exp(sigma z - sigma^2 / 2) is the largest of n with
  // density n phi(z) Phi(z)^(n-1); the trapezoid rule on [-10, 10].
  const double sigma = std::sqrt(std::log1p(cv * cv));
  const int steps = 4000;
  const double lo = -10, h = 20.0 / steps;
  double sum = 0;
  for (int i = 0; i <= steps; ++i) {
    const double z = lo + i * h;
    const double phi = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
    const double f = std::exp(sigma * z - 0.5 * sigma * sigma) * n * phi * std::pow(cdf, n - 1);
    sum += (i == 0 || i == steps ? 0.5 : 1.0) * f;
  }
  return sum * h;
}

}  // namespace planner
}  // namespace zeropp
