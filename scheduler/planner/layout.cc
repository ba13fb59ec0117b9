#include "scheduler/planner/layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace planner {

const char* DesignName(Design d) {
  switch (d) {
    case Design::kZero3: return "zero3";
    case Design::kZeroPP: return "zeropp";
    case Design::kPipeFsdp: return "pipe-fsdp";
    case Design::k3D: return "3d";
  }
  return "?";
}

const char* OffloadName(Offload o) {
  switch (o) {
    case Offload::kNone: return "none";
    case Offload::kCpu: return "cpu";
    case Offload::kNvme: return "nvme";
  }
  return "?";
}

const char* GradAccumulationName(Layout::GradAccumulation g) {
  switch (g) {
    case Layout::GradAccumulation::kFused: return "fused";
    case Layout::GradAccumulation::kAutograd: return "autograd";
    case Layout::GradAccumulation::kFp32Add: return "fp32_add";
    case Layout::GradAccumulation::kSink: return "sink";
  }
  return "?";
}

bool ParseGradAccumulation(const std::string& name, Layout::GradAccumulation* g) {
  for (auto k : {Layout::GradAccumulation::kFused, Layout::GradAccumulation::kAutograd,
                 Layout::GradAccumulation::kFp32Add, Layout::GradAccumulation::kSink}) {
    if (name == GradAccumulationName(k)) {
      *g = k;
      return true;
    }
  }
  return false;
}

std::string Layout::Name() const {
  std::string n;
  switch (design) {
    case Design::kZero3:
      n = absl::StrCat(dp > 1 ? "hsdp" : "zero3", "_z", zero, dp > 1 ? absl::StrCat("_dp", dp) : "");
      break;
    case Design::kZeroPP:
      n = absl::StrCat("zeropp_pp", pp, "_z", zero, "_v", v, "_u", u, dp > 1 ? absl::StrCat("_dp", dp) : "");
      break;
    case Design::kPipeFsdp:
      n = absl::StrCat("fsdp-in-pp_", schedule, "_pp", pp, "_z", zero, v > 1 ? absl::StrCat("_v", v) : "",
                       dp > 1 ? absl::StrCat("_dp", dp) : "");
      break;
    case Design::k3D:
      n = absl::StrCat("3d_", schedule, "_tp", tp, "_pp", pp, "_dp", dp, v > 1 ? absl::StrCat("_v", v) : "",
                       sequence_parallel ? "_sp" : "", dp_outer && dp > 1 && pp > 1 ? "_dpouter" : "");
      break;
  }
  absl::StrAppend(&n, "_b", micro_batch);
  if (design == Design::kZero3 && prefetch != 1) absl::StrAppend(&n, "_pf", prefetch);
  if (zero1 && dp > 1) absl::StrAppend(&n, "_zero1");
  if (recompute) absl::StrAppend(&n, "_rc");
  if (max_deferred_w >= 0) absl::StrAppend(&n, "_wd", max_deferred_w);
  if (reduce_fp32) absl::StrAppend(&n, "_rf32");
  if (grad_accumulation == GradAccumulation::kAutograd) absl::StrAppend(&n, "_gaut");
  if (grad_accumulation == GradAccumulation::kFp32Add) absl::StrAppend(&n, "_gf32");
  if (grad_accumulation == GradAccumulation::kSink) absl::StrAppend(&n, "_gsink");
  if (zero1_allreduce) absl::StrAppend(&n, "_z1ar");
  if (!stage_layers.empty()) {  // runs of equal chunks as NxK: 5-6x10-5
    std::vector<std::string> runs;
    for (size_t i = 0; i < stage_layers.size();) {
      size_t j = i;
      while (j < stage_layers.size() && stage_layers[j] == stage_layers[i]) ++j;
      runs.push_back(j - i > 1 ? absl::StrCat(stage_layers[i], "x", j - i) : absl::StrCat(stage_layers[i]));
      i = j;
    }
    absl::StrAppend(&n, "_sl", absl::StrJoin(runs, "-"));
  }
  if (offload != Offload::kNone) absl::StrAppend(&n, "_off", OffloadName(offload));
  if (params_offload != Offload::kNone) absl::StrAppend(&n, "_poff", OffloadName(params_offload));
  if (activations_offload != Offload::kNone) absl::StrAppend(&n, "_aoff", OffloadName(activations_offload));
  return n;
}

std::string Layout::Check(const ModelShape& m, int devices, int devices_per_node, int global_batch) const {
  if (tp < 1 || pp < 1 || dp < 1 || zero < 1 || v < 1 || micro_batch < 1) {
    return absl::StrCat("tp(", tp, "), pp(", pp, "), dp(", dp, "), zero(", zero, "), v(", v, "), micro_batch(",
                        micro_batch, ") must all be >= 1");
  }
  if (design == Design::k3D || design == Design::kPipeFsdp) {
    if (schedule != "gpipe" && schedule != "1f1b" && schedule != "interleaved" && schedule != "zb-h1" &&
        schedule != "deepspeed") {
      return absl::StrCat("schedule(", schedule,
                          "): a pipeline of this design runs gpipe, 1f1b, interleaved, zb-h1 or deepspeed");
    }
    if (v > 1 && schedule != "interleaved") {
      return absl::StrCat("v(", v, ") > 1 needs the interleaved schedule (got ", schedule, ")");
    }
  }  // ZeRO-3 and ZeroPP run their own schedule whatever `schedule` says (BuildSchedule)
  if (prefetch < 0 || (prefetch != 1 && design != Design::kZero3)) {
    return absl::StrCat("prefetch(", prefetch, "): ZeRO-3 takes 0 or more units ahead; other designs take only 1");
  }
  if (Devices() != devices) {
    return absl::StrCat("tp(", tp, ")*zero(", zero, ")*pp(", pp, ")*dp(", dp, ")=", Devices(), " != devices(", devices,
                        ")");
  }
  if (tp > devices_per_node) return absl::StrCat("tp(", tp, ") > devices per node (", devices_per_node, ")");
  if (m.heads % tp != 0 || m.kv_heads % tp != 0 || m.ffn % tp != 0 || m.vocab % tp != 0) {
    return absl::StrCat("tp(", tp, ") must divide heads(", m.heads, "), kv_heads(", m.kv_heads, "), ffn(", m.ffn,
                        ") and vocab(", m.vocab, ")");
  }
  if (sequence_parallel && tp == 1) return "sequence parallelism needs tp > 1";
  if (offload != Offload::kNone && design == Design::k3D) {
    return "offload is zeropp's (ZeRO designs); the 3D baseline keeps its optimizer state on the device";
  }
  if (params_offload != Offload::kNone && (design == Design::k3D || offload == Offload::kNone)) {
    return absl::StrCat("params_offload(", OffloadName(params_offload),
                        ") needs a ZeRO design with the optimizer state offloaded too (offload cpu or nvme: the "
                        "moments stay with the master)");
  }
  if (activations_offload != Offload::kNone && (design != Design::kZero3 || !recompute)) {
    return absl::StrCat("activations_offload(", OffloadName(activations_offload),
                        ") needs ZeRO-3 (the engine offloads unit by unit, pp = 1) with recompute (the saved inputs "
                        "of recomputed units are what it moves)");
  }
  if (reduce_fp32 && design == Design::k3D) {
    return "reduce_fp32 is a ZeRO design's option (3D reduces its fp32 main gradients already)";
  }
  if (grad_accumulation != GradAccumulation::kFused && design != Design::k3D) {
    return absl::StrCat("grad_accumulation(", GradAccumulationName(grad_accumulation),
                        ") is a 3D executor's option (the ZeRO designs accumulate as zeropp's engine does)");
  }
  if (zero1_allreduce && (design != Design::k3D || !zero1)) {
    return "zero1_allreduce is a 3D option of the distributed optimizer: it needs zero1";
  }
  if (max_deferred_w < -1 || (max_deferred_w >= 0 && !DefersWeightPasses())) {
    return absl::StrCat("max_deferred_w(", max_deferred_w,
                        "): a cap on deferred weight passes, >= 0 (or -1: none), for ZeroPP or a zb-h1 pipeline");
  }
  if (dp_outer && design != Design::k3D) {
    return "dp_outer is a 3D rank order (ZeroPP, FSDP-in-pipeline and ZeRO-3 always put dp outermost)";
  }
  if (!stage_layers.empty()) {
    int sum = 0;
    for (int n : stage_layers) sum += n;
    const auto fewest = *std::min_element(stage_layers.begin(), stage_layers.end());
    if (design == Design::kZero3 || static_cast<int>(stage_layers.size()) != pp * v || sum != m.layers ||
        fewest < 0) {
      return absl::StrCat("stage_layers(", absl::StrJoin(stage_layers, ","), ") must give each of the pp(", pp,
                          ")*v(", v, ")=", pp * v, " pipeline chunks 0 or more layers, ", m.layers, " in all");
    }
  } else if (m.layers % (pp * v) != 0) {
    return absl::StrCat("pp(", pp, ")*v(", v, ")=", pp * v, " must divide layers(", m.layers,
                        ") (or stage_layers must say each chunk's)");
  }
  const int per_step = dp * zero * micro_batch;
  if (global_batch % per_step != 0) {
    return absl::StrCat("global batch ", global_batch, " is not a multiple of dp(", dp, ")*zero(", zero,
                        ")*micro_batch(", micro_batch, ")=", per_step);
  }
  const int mbs = MicroBatches(global_batch);
  if (pp > 1 && mbs < pp) return absl::StrCat("m(", mbs, ") < pp(", pp, ")");
  if (design == Design::kZeroPP && (u < 1 || mbs % u != 0)) {
    return absl::StrCat("unit size u(", u, ") must divide m(", mbs, ")");
  }
  if (schedule == "interleaved" && mbs % pp != 0) return absl::StrCat("interleaved needs pp(", pp, ") | m(", mbs, ")");
  return "";
}

}  // namespace planner
}  // namespace zeropp

#include "scheduler/generators.h"
#include "scheduler/stage_partition.h"

namespace zeropp {
namespace planner {

std::vector<ChunkShape> ChunkShapes(const ModelShape& m, const Layout& l) {
  const double table = static_cast<double>(m.vocab) * m.hidden;
  const double norm = (m.swiglu ? 1.0 : 2.0) * m.hidden;
  const double embedding = m.EmbeddingParameters() - norm - (m.tied_embedding ? 0.0 : table);  // table + positions
  const double head = m.tied_embedding ? 0.0 : table;
  std::vector<ChunkShape> out;
  if (l.design == Design::kZero3) {
    out.push_back({0, embedding});
    for (int i = 0; i < m.layers; ++i) out.push_back({1, m.LayerParameters(), 1, m.LayerMatmulWeights()});
    out.push_back({0, norm});
    out.push_back({0, head, 1, head});
    return out;
  }
  const int stages = l.pp * l.v;
  for (int c = 0; c < stages; ++c) {
    const double layers = l.stage_layers.empty() ? static_cast<double>(m.layers) / stages : l.stage_layers.at(c);
    out.push_back({layers, layers * m.LayerParameters(), layers, layers * m.LayerMatmulWeights()});
  }
  out.front().params += embedding + norm;
  out.front().units += 1;  // the embedding
  if (!m.tied_embedding || stages > 1) {
    out.back().params += table;
    out.back().gemm_params += table;
  }
  out.back().units += 2;  // the final norm and the head
  return out;
}

double RankLayers(const ModelShape& m, const Layout& l, int rank) {
  if (l.stage_layers.empty()) return static_cast<double>(m.layers) / l.pp;
  double layers = 0;
  for (size_t c = rank; c < l.stage_layers.size(); c += l.pp) layers += l.stage_layers[c];
  return layers;
}

std::vector<int> EngineStageLayers(const ModelShape& m, int stages) {
  const double table = static_cast<double>(m.vocab) * m.hidden;
  std::vector<int64_t> costs = {0};  // the embedding: a lookup
  for (int i = 0; i < m.layers; ++i) costs.push_back(static_cast<int64_t>(m.LayerParameters()));
  costs.push_back(static_cast<int64_t>((m.swiglu ? 1.0 : 2.0) * m.hidden));  // the final norm
  costs.push_back(static_cast<int64_t>(table));                             // the head
  if (stages < 1 || static_cast<int>(costs.size()) < stages) return {};
  const std::vector<int> stage = scheduler::PartitionStages(costs, stages, "parameters");
  std::vector<int> layers(stages, 0);
  for (int i = 0; i < m.layers; ++i) ++layers[stage[i + 1]];
  return layers;
}

void PartitionAsExecuted(const ModelShape& m, Layout* l) {
  const int stages = l->pp * l->v;
  if (!l->stage_layers.empty() || l->design == Design::kZero3 || stages < 2) return;
  const bool even = m.layers % stages == 0;
  if (l->design == Design::k3D && even) return;
  std::vector<int> layers = EngineStageLayers(m, stages);
  if (even && layers == std::vector<int>(stages, m.layers / stages)) return;
  l->stage_layers = std::move(layers);  // empty (fewer units than stages): Check refuses the layout
}

scheduler::Schedule BuildSchedule(const Layout& l, int m, const ModelShape& shape) {
  using namespace scheduler;
  GenOptions o;
  o.recompute = l.recompute ? (l.design == Design::kZeroPP ? RecomputePolicy::kDefault : RecomputePolicy::kAll)
                            : RecomputePolicy::kNone;
  o.max_deferred_w = l.max_deferred_w;
  if (l.design == Design::kZero3) {
    Zero3Plan p;
    p.units = shape.layers + 3;  // ChunkShapes' units
    p.needs.assign(p.units, {});
    if (shape.tied_embedding) p.needs.back() = {0};
    p.recompute = l.recompute;
    p.prefetch_depth = l.prefetch;
    return Zero3(m, p, o);
  }
  o.gather = l.design == Design::k3D ? GatherPolicy::kResident : GatherPolicy::kPerMicrobatch;
  if (l.design == Design::kZeroPP) return ZeroPP(l.pp, l.v, m, l.u, o);
  if (l.schedule == "interleaved") return Interleaved(l.pp, l.v, m, o);
  if (l.schedule == "zb-h1") return ZbH1(l.pp, m, o);
  if (l.schedule == "gpipe") return GPipe(l.pp, m, o);
  if (l.schedule == "deepspeed") return DeepSpeed1F1B(l.pp, m, o);
  return OneFOneB(l.pp, m, o);
}

}  // namespace planner
}  // namespace zeropp
