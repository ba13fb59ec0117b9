// stage_partition.h: which virtual stage each scheduling unit goes to (pure: unit costs in,
// stages out; the runtime's UnitCosts, scheduler/runtime/stage_partition.h, measures a model's
// units, the planner its ModelShape's).
//
// Contiguous runs of units, at least one per stage, chosen to minimise the most expensive stage
// (DeepSpeed's partition_method="parameters" idea, solved exactly by dynamic programming rather
// than greedily).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zeropp {
namespace scheduler {

// stage[u] for units with these costs; "uniform" splits by unit count instead (as before).
// Throws std::invalid_argument when there are fewer units than stages or the method is unknown.
std::vector<int> PartitionStages(const std::vector<int64_t>& unit_costs, int stages, const std::string& method);

}  // namespace scheduler
}  // namespace zeropp
