#include "scheduler/planner/layout.h"

#include "absl/strings/str_cat.h"

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
  if (zero1 && dp > 1) absl::StrAppend(&n, "_zero1");
  if (recompute) absl::StrAppend(&n, "_rc");
  return n;
}

std::string Layout::Check(const ModelShape& m, int devices, int devices_per_node, int global_batch) const {
  if (tp < 1 || pp < 1 || dp < 1 || zero < 1 || v < 1 || micro_batch < 1) {
    return absl::StrCat("tp(", tp, "), pp(", pp, "), dp(", dp, "), zero(", zero, "), v(", v, "), micro_batch(",
                        micro_batch, ") must all be >= 1");
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
  if (dp_outer && design != Design::k3D) {
    return "dp_outer is a 3D rank order (ZeroPP, FSDP-in-pipeline and ZeRO-3 always put dp outermost)";
  }
  if (m.layers % (pp * v) != 0) {
    return absl::StrCat("pp(", pp, ")*v(", v, ")=", pp * v, " must divide layers(", m.layers, ")");
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

namespace zeropp {
namespace planner {

scheduler::Schedule BuildSchedule(const Layout& l, int m, int layers) {
  using namespace scheduler;
  GenOptions o;
  o.recompute = l.recompute ? (l.design == Design::kZeroPP ? RecomputePolicy::kDefault : RecomputePolicy::kAll)
                            : RecomputePolicy::kNone;
  if (l.design == Design::kZero3) {
    Zero3Plan p;
    p.units = layers;  // one FSDP unit per layer (the embedding and head ride on the first and last)
    p.recompute = l.recompute;
    return Zero3(m, p, o);
  }
  o.gather = l.design == Design::k3D ? GatherPolicy::kResident : GatherPolicy::kPerMicrobatch;
  if (l.design == Design::kZeroPP) return ZeroPP(l.pp, l.v, m, l.u, o);
  if (l.schedule == "interleaved") return Interleaved(l.pp, l.v, m, o);
  if (l.schedule == "zb-h1") return ZbH1(l.pp, m, o);
  if (l.schedule == "gpipe") return GPipe(l.pp, m, o);
  return OneFOneB(l.pp, m, o);
}

}  // namespace planner
}  // namespace zeropp
