#include "scheduler/runtime/stage_partition.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>

namespace zeropp {
namespace scheduler {

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
