#include "scheduler/planner/memory_model.h"

#include <algorithm>
#include <deque>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zeropp {
namespace planner {

std::string MemoryBreakdown::ToString() const {
  const bool gb = Total() >= 1e9;  // small models in MB, where GB would print zeros
  const double u = gb ? 1e9 : 1e6;
  const int d = gb ? 2 : 1;
  return absl::StrFormat(
      "params %.*f + grads %.*f + optimizer %.*f + unsharded %.*f + activations %.*f + working %.*f + reserved "
      "%.*f = %.*f %s (pipeline rank %d)%s",
      d, params / u, d, grads / u, d, optimizer / u, d, unsharded / u, d, activations / u, d, working / u, d,
      reserved / u, d, Total() / u, gb ? "GB" : "MB", rank,
      absl::StrCat(host > 0 ? absl::StrFormat("; host %.*f %s", d, host / u, gb ? "GB" : "MB") : "",
                   nvme > 0 ? absl::StrFormat("; nvme %.*f %s", d, nvme / u, gb ? "GB" : "MB") : ""));
}

double LayerActivationBytes(const ModelShape& m, const Layout& l, int value_bytes) {
  const double t = l.tp, sbh = static_cast<double>(m.seq) * l.micro_batch * m.hidden;
  const double split = 8 + (m.swiglu ? 6.0 : 4.0) * m.ffn / m.hidden;
  // Korthikanti et al. (2022), in 2-byte values: per layer 34 sbh + 5 as^2 b with dropout, of which
  // the two hidden dropouts' masks are 2 sbh, and the attention dropout's mask (1) and output (2)
  // are 3 as^2 b beside the softmax output (2). Without dropout: 32 sbh + 2 as^2 b.
  const double unsplit = m.dropout ? 10.0 : 8.0;
  double bytes = sbh * (unsplit / (l.sequence_parallel ? t : 1.0) + split / t);
  const double scores = m.dropout ? 5.0 : 2.0;
  if (!m.flash_attention && m.keeps_scores && !m.selective_recompute) {
    bytes += scores * m.heads * m.seq * static_cast<double>(m.seq) * l.micro_batch / t;
  }
  return bytes * value_bytes / 2.0;
}

double LayerWeightPassBytes(const ModelShape& m, const Layout& l, int value_bytes) {
  const double h = m.hidden, ffn = m.ffn, kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const double attention = h + (h + 2 * kv * h / m.heads) + h + h;
  const double mlp = m.swiglu ? h + 2 * ffn + ffn + h : h + ffn + ffn + h;
  return static_cast<double>(m.seq) * l.micro_batch * (attention + mlp) / l.tp * value_bytes;
}

double LayerBackwardTransientBytes(const ModelShape& m, const Layout& l, int value_bytes) {
  const double grad_in = m.hidden / (l.sequence_parallel ? static_cast<double>(l.tp) : 1.0);
  const double mlp = (m.swiglu ? 3.0 : 2.0) * m.ffn / l.tp;
  return static_cast<double>(m.seq) * l.micro_batch * (grad_in + mlp) * value_bytes;
}

double StageParameters(const ModelShape& m, const Layout& l, int rank) {
  double p = RankLayers(m, l, rank) * m.LayerParameters();
  const double table = static_cast<double>(m.vocab) * m.hidden;
  const double rest = m.EmbeddingParameters() - table * (m.tied_embedding ? 1 : 2);  // positions, final norm
  if (rank == 0) p += table + rest;
  // The head: its own matrix, or a copy of the tied table when it lives on another stage.
  if (rank == l.pp - 1 && (!m.tied_embedding || l.pp > 1)) p += table;
  return p;
}


MemoryBreakdown EstimateRankMemory(const ModelShape& m, const Layout& l, const Hardware& hw,
                                   const scheduler::Schedule& s, int r) {
  using scheduler::ActionKind;
  const double vb = hw.value_bytes;
  const bool bf16 = hw.value_bytes == 2;
  const double tokens = static_cast<double>(m.seq) * l.micro_batch;
  const std::vector<ChunkShape> shapes = ChunkShapes(m, l);
  auto shape = [&](int c) { return shapes.at(static_cast<size_t>(c) * s.pp + r); };
  const double layer_act = LayerActivationBytes(m, l, hw.value_bytes);
  const double layer_bwd = LayerBackwardTransientBytes(m, l, hw.value_bytes);
  // Whether a tier takes bytes off the device: NVMe always, host memory on a GPU only (on a CPU
  // box host memory is the device's own).
  auto leaves_device = [&](Offload tier) {
    return tier == Offload::kNvme || (tier == Offload::kCpu && hw.shared_compute_units == 0);
  };
  const double input_bytes = tokens * m.hidden * vb / (l.sequence_parallel ? l.tp : 1);
  MemoryBreakdown b;
  b.rank = r;
  const double stage = StageParameters(m, l, r);
  if (l.design == Design::k3D) {
    const double own = stage / l.tp;
    b.params = vb * own;
    // fp32 main gradients, and the 16-bit ones beside them where the backward writes those first.
    b.grads = (l.grad_accumulation == Layout::GradAccumulation::kFp32Add ? 4.0 + vb : 4.0) * own;
    b.optimizer = (bf16 ? 12.0 : 8.0) * own / (l.zero1 ? l.dp : 1);
  } else {
    const double shard = stage / l.zero, z1 = l.zero1 ? l.dp : 1;
    // Each part on its tier, or on the device where that tier is the device's own memory.
    auto place = [&](double bytes, Offload tier, double* device) {
      *(!leaves_device(tier) ? device : tier == Offload::kNvme ? &b.nvme : &b.host) += bytes;
    };
    // The fp32 master (bf16 training; fp32 updates the shard itself) lives with the parameters
    // when they are offloaded, else on the host whenever the optimizer is.
    const Offload master_tier = l.params_offload != Offload::kNone ? l.params_offload
                                : l.offload != Offload::kNone    ? Offload::kCpu
                                                                 : Offload::kNone;
    place(vb * shard, l.params_offload, &b.params);
    // The gradient shard is in the reduction's dtype (EngineOptions::reduce_dtype).
    place((l.reduce_fp32 ? 4.0 : vb) * shard, l.params_offload, &b.grads);
    // A separate fp32 master: under bf16, or under fp32 when the optimizer runs on the host of a
    // GPU (FlatParam::InitFromFull). ZeRO-1 shards it over the replicas with the moments, each
    // holding the part it updates (FlatParam::SetMasterRange).
    const bool separate_master =
        bf16 || (l.params_offload == Offload::kNone && l.offload != Offload::kNone && leaves_device(Offload::kCpu));
    place((separate_master ? 4.0 : 0.0) * shard / z1, master_tier, &b.optimizer);
    place(8.0 * shard / z1, l.offload, &b.optimizer);
  }
  // The step replayed on this rank's actions, summed at each moment (memory_model.h says what
  // each action holds and frees, as engine.cc does).
  // Gathered chunks take memory of their own when sharded, or when offloaded (FlatParam: the full
  // buffer is the shard itself only with zero = 1 and the shard resident).
  const bool sharded = l.design != Design::k3D && (l.zero > 1 || l.params_offload != Offload::kNone);
  const int stages = s.pp * s.v;
  const bool cross_tied = m.tied_embedding && stages > 1 && s.pp > 1;
  std::vector<double> chunk_bytes(s.v, 0.0);
  std::vector<bool> deferred(s.v, false);
  for (int c = 0; c < s.v; ++c) {
    chunk_bytes[c] = sharded ? vb * shape(c).params : 0.0;
    const int vstage = c * s.pp + r;
    deferred[c] = cross_tied && (vstage == 0 || vstage == stages - 1);
  }
  // A recomputed chunk keeps its input (3D: each layer's); units without layers keep nothing.
  auto recomputed_stash = [&](int c) { return l.design == Design::k3D ? shape(c).layers * input_bytes : input_bytes; };
  const double logits = tokens * m.vocab / l.tp * (vb + 4);
  auto recompute_working = [&](int c) { return (l.design == Design::k3D ? 1.0 : shape(c).layers) * layer_act; };
  constexpr int kPendingReductions = 2;  // EngineOptions::max_pending_reductions' default
  double gathered = 0, grads = 0, stash = 0, w = 0;
  std::vector<bool> accumulating(s.v, false);
  std::deque<double> pending;
  double pending_bytes = 0;
  MemoryBreakdown peak_at;  // the parts at the peak moment
  double peak = -1;
  auto note = [&](double transient) {
    const double total = gathered + grads + pending_bytes + stash + w + transient;
    if (total > peak) {
      peak = total;
      peak_at.unsharded = gathered + grads + pending_bytes;
      peak_at.activations = stash + w;
      peak_at.working = transient;
    }
  };
  auto stash_of = [&](int c) {
    if (shape(c).layers == 0) return 0.0;
    return s.Recompute(r, c) ? recomputed_stash(c) : shape(c).layers * layer_act;
  };
  auto is_last_vstage = [&](int c) { return c * s.pp + r == stages - 1; };
  auto first_vstage = [&](int c) { return c * s.pp + r == 0; };
  // The last virtual stage's W also computes the head's: its input (the final norm's output) and
  // the logits' gradient (vocab-parallel under tp).
  const double head_hold = tokens * (m.hidden + static_cast<double>(m.vocab) / l.tp) * vb;
  auto w_hold = [&](int c) {
    return shape(c).layers * LayerWeightPassBytes(m, l, hw.value_bytes) + (is_last_vstage(c) ? head_hold : 0.0);
  };
  // Offloaded activations (the executor): a recomputed chunk's saved input, but the last virtual
  // stage's (its backward follows at once), lives on the tier from its forward to its backward,
  // where the device holds it again while that backward runs.
  const bool act_tier = leaves_device(l.activations_offload);
  auto offloaded = [&](int c) { return act_tier && s.Recompute(r, c) && !is_last_vstage(c); };
  double off_stash = 0, off_peak = 0;
  note(0);
  if (r < static_cast<int>(s.ranks.size())) {
    for (const scheduler::Action& a : s.ranks[r]) {
      const int c = a.chunk;
      switch (a.kind) {
        case ActionKind::kGather:
          gathered += chunk_bytes[c];
          note(0);
          break;
        case ActionKind::kRelease:
          gathered -= chunk_bytes[c];
          break;
        case ActionKind::kForward:
          if (offloaded(c)) {
            off_stash += stash_of(c);
            off_peak = std::max(off_peak, off_stash);
          } else {
            stash += stash_of(c);
          }
          note(is_last_vstage(c) ? logits : 0.0);
          break;
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput: {
          if (!accumulating[c]) {
            accumulating[c] = true;
            grads += chunk_bytes[c];
          }
          const double grads_alive = shape(c).layers > 0 ? layer_bwd : 0.0;
          double transient = (s.Recompute(r, c) ? recompute_working(c) : 0.0) +
                             std::max(is_last_vstage(c) ? logits : 0.0, grads_alive) +
                             (offloaded(c) ? stash_of(c) : 0.0);
          note(transient);
          // After Bi only what W reads stays alive (split_backward.h frees every other saved
          // tensor): the weight pass's inputs and output gradients. The first virtual stage's
          // input needs no gradient, so its Bi is the whole backward and leaves nothing to W.
          (offloaded(c) ? off_stash : stash) -= stash_of(c);
          if (a.kind == ActionKind::kBackwardInput && !first_vstage(c)) w += w_hold(c);
          note(0);
          break;
        }
        case ActionKind::kBackwardWeight:
          if (!first_vstage(c)) w -= w_hold(c);
          break;
        case ActionKind::kReduceGrad:
          if (!deferred[c] && accumulating[c]) {
            accumulating[c] = false;
            grads -= chunk_bytes[c];
            // In flight: the reduction's input, cast to fp32 first where gradients reduce in fp32.
            const double in_flight = chunk_bytes[c] * (l.reduce_fp32 ? 4.0 / vb : 1.0);
            pending.push_back(in_flight);
            pending_bytes += in_flight;
            while (static_cast<int>(pending.size()) > kPendingReductions) {
              pending_bytes -= pending.front();
              pending.pop_front();
            }
          }
          break;
        case ActionKind::kOptimizerStep:
          note(0);
          break;
        default:
          break;
      }
    }
  }
  b.unsharded = peak_at.unsharded;
  b.activations = peak_at.activations;
  b.working = peak_at.working + (l.pp > 1 ? 2 * input_bytes : 0.0);
  if (l.params_offload != Offload::kNone && hw.shared_compute_units == 0) {  // ZeRO designs only (Layout::Check)
    double largest = 0;
    for (int c = 0; c < s.v; ++c) largest = std::max(largest, chunk_bytes[c] / l.zero);
    b.working += 2 * largest;
  }
  (l.activations_offload == Offload::kNvme ? b.nvme : b.host) += off_peak;
  b.reserved = hw.reserved_bytes;
  return b;
}

MemoryBreakdown EstimateMemory(const ModelShape& m, const Layout& l, const Hardware& hw,
                               const scheduler::Schedule& s) {
  MemoryBreakdown best;
  for (int r = 0; r < l.pp; ++r) {
    const MemoryBreakdown b = EstimateRankMemory(m, l, hw, s, r);
    if (b.Total() > best.Total()) best = b;
  }
  return best;
}

}  // namespace planner
}  // namespace zeropp
