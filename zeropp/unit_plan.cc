#include "zeropp/unit_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {

UnitPlan PlanUnits(const torch::nn::SequentialImpl& model, const UnitPolicy& policy) {
  const int children = static_cast<int>(model.size());
  if (children == 0) {
    throw std::invalid_argument("model: the Sequential is empty (expected at least one child module)");
  }
  UnitPlan plan;
  std::vector<int>& starts = plan.starts;
  if (policy.kind == UnitPolicy::Kind::kPerChild) {
    for (int i = 0; i < children; ++i) starts.push_back(i);
  } else if (policy.kind == UnitPolicy::Kind::kExplicit) {
    starts = policy.starts;
    if (starts.empty() || starts[0] != 0 || starts.back() >= children) {
      throw std::invalid_argument(absl::StrCat("units.starts([", absl::StrJoin(starts, ","),
                                               "]): expected 0 first and every start below the model's ",
                                               children, " children"));
    }
  } else {
    int64_t acc = 0;
    starts.push_back(0);
    for (int i = 0; i < children; ++i) {
      for (const auto& p : model.ptr(i)->parameters()) acc += p.numel();
      if (acc >= policy.target_numel && i + 1 < children) {
        starts.push_back(i + 1);
        acc = 0;
      }
    }
  }
  const int k = plan.num_units();
  std::map<const void*, int> first;  // tensor -> index into plan.tied, or -1 while seen once
  std::map<const void*, std::pair<int, std::string>> owner;
  for (int u = 0; u < k; ++u) {
    const int end = u + 1 < k ? starts[u + 1] : children;
    for (int c = starts[u]; c < end; ++c) {
      const std::string child = model.named_children()[c].key();
      for (const auto& kv : model.ptr(c)->named_parameters(/*recurse=*/true)) {
        const void* impl = kv.value().unsafeGetTensorImpl();
        auto it = owner.find(impl);
        if (it == owner.end()) {
          owner[impl] = {u, absl::StrCat(child, ".", kv.key())};
          continue;
        }
        const int own = it->second.first;
        auto t = first.find(impl);
        if (t == first.end()) {
          first[impl] = static_cast<int>(plan.tied.size());
          plan.tied.push_back({it->second.second, {own}, kv.value().requires_grad(), impl});
          t = first.find(impl);
        }
        auto& units = plan.tied[t->second].units;
        if (units.back() != u) units.push_back(u);
      }
    }
  }
  plan.needs = HeldNeeds(plan, {});
  return plan;
}

int TiedHolder(const TiedTensor& t, const std::vector<bool>& owned) {
  for (int u : t.units) {
    if (owned.empty() || owned[u]) return u;
  }
  return -1;
}

std::vector<std::vector<int>> HeldNeeds(const UnitPlan& plan, const std::vector<bool>& owned) {
  std::vector<std::vector<int>> needs(plan.num_units());
  for (const TiedTensor& t : plan.tied) {
    const int holder = TiedHolder(t, owned);
    for (int u : t.units) {
      if (u == holder || holder < 0 || !(owned.empty() || owned[u])) continue;
      if (std::find(needs[u].begin(), needs[u].end(), holder) == needs[u].end()) needs[u].push_back(holder);
    }
  }
  for (auto& n : needs) std::sort(n.begin(), n.end());
  return needs;
}

std::vector<std::pair<int, int>> CrossStageTies(const UnitPlan& plan, const std::vector<int>& stage_of_unit, int pp,
                                                int me) {
  std::vector<std::pair<int, int>> out;
  for (size_t i = 0; i < plan.tied.size(); ++i) {
    const TiedTensor& t = plan.tied[i];
    std::vector<int> ranks;
    for (int u : t.units) {
      const int r = stage_of_unit[u] % pp;
      if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
    }
    if (ranks.size() < 2 || !t.trainable) continue;
    if (ranks.size() > 2) {
      throw std::invalid_argument(absl::StrCat("layout: tensor ", t.name, " is tied across ", ranks.size(),
                                               " pipeline ranks (units ", absl::StrJoin(t.units, ","),
                                               "); at most two ranks may share a tensor"));
    }
    if (ranks[0] == me || ranks[1] == me) out.emplace_back(static_cast<int>(i), ranks[0] == me ? ranks[1] : ranks[0]);
  }
  return out;
}

}  // namespace zeropp
