#include "scheduler/planner/memory_model.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace zeropp {
namespace planner {

std::string MemoryBreakdown::ToString() const {
  return absl::StrFormat(
      "params %.2f + grads %.2f + optimizer %.2f + unsharded %.2f + activations %.2f + working %.2f + reserved "
      "%.2f = %.2f GB (pipeline rank %d)",
      params / 1e9, grads / 1e9, optimizer / 1e9, unsharded / 1e9, activations / 1e9, working / 1e9, reserved / 1e9,
      Total() / 1e9, rank);
}

double LayerActivationBytes(const ModelShape& m, const Layout& l, int value_bytes) {
  const double t = l.tp, sbh = static_cast<double>(m.seq) * l.micro_batch * m.hidden;
  const double split = 8 + (m.swiglu ? 6.0 : 4.0) * m.ffn / m.hidden;
  double bytes = sbh * (10.0 / (l.sequence_parallel ? t : 1.0) + split / t);
  if (!m.flash_attention && !m.selective_recompute) bytes += 5.0 * m.heads * m.seq * static_cast<double>(m.seq) * l.micro_batch / t;
  return bytes * value_bytes / 2.0;
}

double LayerWeightPassBytes(const ModelShape& m, const Layout& l, int value_bytes) {
  const double h = m.hidden, ffn = m.ffn, kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const double attention = h + (h + 2 * kv * h / m.heads) + h + h;
  const double mlp = m.swiglu ? h + 2 * ffn + ffn + h : h + ffn + ffn + h;
  return static_cast<double>(m.seq) * l.micro_batch * (attention + mlp) / l.tp * value_bytes;
}

double StageParameters(const ModelShape& m, const Layout& l, int rank) {
  double p = static_cast<double>(m.layers) / l.pp * m.LayerParameters();
  const double table = static_cast<double>(m.vocab) * m.hidden;
  const double rest = m.EmbeddingParameters() - table * (m.tied_embedding ? 1 : 2);  // positions, final norm
  if (rank == 0) p += table + rest;
  // The head: its own matrix, or a copy of the tied table when it lives on another stage.
  if (rank == l.pp - 1 && (!m.tied_embedding || l.pp > 1)) p += table;
  return p;
}

MemoryBreakdown EstimateRankMemory(const ModelShape& m, const Layout& l, const Hardware& hw,
                                   const scheduler::ValidationReport& report, int r) {
  const double vb = hw.value_bytes;
  const bool bf16 = hw.value_bytes == 2;
  const double tokens = static_cast<double>(m.seq) * l.micro_batch;
  const int chunks = l.design == Design::kZero3 ? m.layers : l.pp * l.v;
  const double layers_per_chunk = static_cast<double>(m.layers) / chunks;
  const double layer_act = LayerActivationBytes(m, l, hw.value_bytes);
  const double input_bytes = tokens * m.hidden * vb / (l.sequence_parallel ? l.tp : 1);
  MemoryBreakdown b;
  b.rank = r;
  const double stage = StageParameters(m, l, r);
  const int peak_stash = r < static_cast<int>(report.ranks.size()) ? report.ranks[r].peak_activations : 0;
  const int peak_gathered = r < static_cast<int>(report.ranks.size()) ? report.ranks[r].peak_gathered : 0;
  if (l.design == Design::k3D) {
    const double own = stage / l.tp;
    b.params = vb * own;
    b.grads = 4 * own;
    b.optimizer = (bf16 ? 12.0 : 8.0) * own / (l.zero1 ? l.dp : 1);
  } else {
    const double shard = stage / l.zero;
    b.params = vb * shard;
    b.grads = vb * shard;
    b.optimizer = ((bf16 ? 4.0 : 0.0) + 8.0) * shard / (l.zero1 ? l.dp : 1);
    if (l.zero > 1) {
      // The largest chunk: a layer group plus the embedding or head it carries.
      const double chunk = stage / (l.design == Design::kZero3 ? m.layers : l.v) +
                           (l.design == Design::kZero3 ? static_cast<double>(m.vocab) * m.hidden : 0.0);
      b.unsharded = vb * chunk * (peak_gathered + 1);
    }
  }
  double stash;
  if (!l.recompute) {
    stash = layers_per_chunk * layer_act;
  } else if (l.design == Design::k3D) {
    stash = layers_per_chunk * input_bytes;
  } else {
    stash = input_bytes;
  }
  const int peak_pending_w = r < static_cast<int>(report.ranks.size()) ? report.ranks[r].peak_pending_w : 0;
  b.activations = peak_stash * stash + peak_pending_w * layers_per_chunk * LayerWeightPassBytes(m, l, hw.value_bytes);
  if (l.recompute) b.working += (l.design == Design::k3D ? 1.0 : layers_per_chunk) * layer_act;
  if (r == l.pp - 1) b.working += tokens * m.vocab / l.tp * (vb + 4);
  if (l.pp > 1) b.working += 2 * input_bytes;
  b.reserved = hw.reserved_bytes;
  return b;
}

MemoryBreakdown EstimateMemory(const ModelShape& m, const Layout& l, const Hardware& hw,
                               const scheduler::ValidationReport& report) {
  MemoryBreakdown best;
  for (int r = 0; r < l.pp; ++r) {
    const MemoryBreakdown b = EstimateRankMemory(m, l, hw, report, r);
    if (b.Total() > best.Total()) best = b;
  }
  return best;
}

}  // namespace planner
}  // namespace zeropp
