#include "scheduler/stage_partition.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

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

}  // namespace scheduler
}  // namespace zeropp
