// stage_partition.h: which virtual stage each scheduling unit goes to.
//
// Contiguous runs of units, at least one per stage, chosen to minimise the most expensive stage
// (DeepSpeed's partition_method="parameters" idea, solved exactly by dynamic programming rather
// than greedily). The cost of a unit is a compute proxy: the parameters its modules multiply by,
// i.e. every parameter except those of embedding lookups (an embedding costs a gather, not a
// matmul; a head tied to it does multiply and counts).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torch {
namespace nn {
class Module;
}  // namespace nn
}  // namespace torch

namespace zeropp {
namespace scheduler {

// stage[u] for units with these costs; "uniform" splits by unit count instead (as before).
// Throws std::invalid_argument when there are fewer units than stages or the method is unknown.
std::vector<int> PartitionStages(const std::vector<int64_t>& unit_costs, int stages, const std::string& method);

// Compute proxy per unit of a Sequential split at child indices `unit_starts` (see above).
std::vector<int64_t> UnitCosts(const torch::nn::Module& sequential, const std::vector<int>& unit_starts);

}  // namespace scheduler
}  // namespace zeropp
