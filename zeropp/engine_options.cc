#include "zeropp/engine_options.h"

#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {

const char* Name(OffloadTarget t) {
  switch (t) {
    case OffloadTarget::kNone: return "none";
    case OffloadTarget::kCpu: return "cpu";
    case OffloadTarget::kNvme: return "nvme";
  }
  return "?";
}

OffloadTarget ParseOffloadTarget(const std::string& field, const std::string& text) {
  for (OffloadTarget t : {OffloadTarget::kNone, OffloadTarget::kCpu, OffloadTarget::kNvme}) {
    if (text == Name(t)) return t;
  }
  throw std::invalid_argument(absl::StrCat(field, ": got '", text, "', expected one of: none, cpu, nvme"));
}

std::string EngineOptions::Validate() const {
  std::vector<std::string> p;
  if (prefetch_depth < 0) p.push_back(absl::StrCat("prefetch_depth(", prefetch_depth, ") must be >= 0"));
  if (max_live_units < 0) p.push_back(absl::StrCat("max_live_units(", max_live_units, ") must be >= 0 (0 = no cap)"));
  if (max_pending_reductions < 0) {
    p.push_back(absl::StrCat("max_pending_reductions(", max_pending_reductions, ") must be >= 0 (0 = no cap)"));
  }
  if (param_dtype != at::kFloat && param_dtype != at::kBFloat16) {
    p.push_back(absl::StrCat("param_dtype(", c10::toString(param_dtype), ") must be float32 or bfloat16"));
  }
  if (reduce_dtype != at::kFloat && reduce_dtype != at::kBFloat16) {
    p.push_back(absl::StrCat("reduce_dtype(", c10::toString(reduce_dtype), ") must be float32 or bfloat16"));
  }
  if (host_threads < 0) p.push_back(absl::StrCat("host_threads(", host_threads, ") must be >= 0 (0 = intra-op threads)"));
  if (max_grad_norm < 0) p.push_back(absl::StrCat("max_grad_norm(", max_grad_norm, ") must be >= 0"));
  if (!(adamw.lr >= 0)) p.push_back(absl::StrCat("adamw.lr(", adamw.lr, ") must be >= 0"));
  if (!(adamw.beta1 >= 0 && adamw.beta1 < 1)) p.push_back(absl::StrCat("adamw.beta1(", adamw.beta1, ") must be in [0, 1)"));
  if (!(adamw.beta2 >= 0 && adamw.beta2 < 1)) p.push_back(absl::StrCat("adamw.beta2(", adamw.beta2, ") must be in [0, 1)"));
  if (!(adamw.eps > 0)) p.push_back(absl::StrCat("adamw.eps(", adamw.eps, ") must be > 0"));
  if (offload.activations != OffloadTarget::kNone && !recompute) {
    p.push_back(absl::StrCat("offload.activations(", Name(offload.activations), ") needs recompute=true"));
  }
  for (const auto& kv : {std::make_pair("offload.optimizer", offload.optimizer),
                         std::make_pair("offload.params", offload.params),
                         std::make_pair("offload.activations", offload.activations)}) {
    if (kv.second == OffloadTarget::kNvme && offload.dir.empty()) {
      p.push_back(absl::StrCat(kv.first, "(nvme) needs offload.dir"));
    }
  }
  if (offload.host_budget_bytes < (1 << 20)) {
    p.push_back(absl::StrCat("offload.host_budget_bytes(", offload.host_budget_bytes, ") must be >= 1 MiB"));
  }
  if (memory_budget_bytes < 0) p.push_back(absl::StrCat("memory_budget_bytes(", memory_budget_bytes, ") must be >= 0"));
  if (units.kind == UnitPolicy::Kind::kBySize && units.target_numel < 1) {
    p.push_back(absl::StrCat("units.target_numel(", units.target_numel, ") must be >= 1"));
  }
  if (units.kind == UnitPolicy::Kind::kExplicit) {
    if (units.starts.empty() || units.starts[0] != 0) {
      p.push_back(absl::StrCat("units.starts([", absl::StrJoin(units.starts, ","), "]) must begin with 0"));
    }
    for (size_t i = 1; i < units.starts.size(); ++i) {
      if (units.starts[i] <= units.starts[i - 1]) {
        p.push_back(absl::StrCat("units.starts([", absl::StrJoin(units.starts, ","), "]) must be strictly increasing"));
        break;
      }
    }
  }
  return absl::StrJoin(p, "; ");
}

}  // namespace zeropp
