#include "scheduler/runtime/stage_partition.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>

#include "absl/strings/str_cat.h"

namespace zeropp {
namespace scheduler {

std::vector<int> PartitionStages(const std::vector<int64_t>& unit_costs, int stages, const std::string& method) {
  const int k = static_cast<int>(unit_costs.size());
  if (stages < 1 || k < stages) {
    throw std::invalid_argument(absl::StrCat("pipeline: the model has ", k, " scheduling units but ", stages,
                                             " virtual stages (pp*chunks) need at least one each"));
  }
  std::vector<int> stage(k);
  if (method == "uniform") {
    for (int u = 0; u < k; ++u) stage[u] = static_cast<int>(static_cast<int64_t>(u) * stages / k);
    return stage;
  }
  if (method != "parameters") {
    throw std::invalid_argument("partition: got '" + method + "', expected parameters or uniform");
  }
  // best[s][i]: the smallest possible maximum stage cost for units [0, i) in s stages.
  std::vector<int64_t> prefix(k + 1, 0);
  for (int u = 0; u < k; ++u) prefix[u + 1] = prefix[u] + std::max<int64_t>(unit_costs[u], 0);
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(stages + 1, std::vector<int64_t>(k + 1, kInf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(k + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s) {
    for (int i = s; i <= k - (stages - s); ++i) {
      // The last stage holds [j, i); ties keep the earliest cut, so early stages (which stash the
      // most activations in 1F1B-like schedules) stay lighter.
      for (int j = s - 1; j < i; ++j) {
        if (best[s - 1][j] == kInf) continue;
        const int64_t c = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (c < best[s][i]) {
          best[s][i] = c;
          cut[s][i] = j;
        }
      }
    }
  }
  for (int s = stages, i = k; s >= 1; --s) {
    const int j = cut[s][i];
    for (int u = j; u < i; ++u) stage[u] = s - 1;
    i = j;
  }
  return stage;
}

std::vector<int64_t> UnitCosts(const torch::nn::Module& sequential, const std::vector<int>& unit_starts) {
  const auto children = sequential.children();
  std::vector<int64_t> costs;
  for (size_t u = 0; u < unit_starts.size(); ++u) {
    const size_t end = u + 1 < unit_starts.size() ? static_cast<size_t>(unit_starts[u + 1]) : children.size();
    int64_t cost = 0;
    for (size_t c = static_cast<size_t>(unit_starts[u]); c < end; ++c) {
      for (const auto& m : children[c]->modules(/*include_self=*/true)) {
        if (dynamic_cast<const torch::nn::EmbeddingImpl*>(m.get()) != nullptr) continue;
        for (const auto& p : m->parameters(/*recurse=*/false)) cost += p.numel();
      }
    }
    costs.push_back(cost);
  }
  return costs;
}

}  // namespace scheduler
}  // namespace zeropp
