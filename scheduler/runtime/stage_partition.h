// stage_partition.h (runtime): the cost of each scheduling unit of a model, the input of
// PartitionStages (scheduler/stage_partition.h, included here), which decides each unit's stage.
//
// The cost of a unit is a compute proxy: the parameters its modules multiply by, i.e. every
// parameter except those of embedding lookups (an embedding costs a gather, not a matmul; a head
// tied to it does multiply and counts).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "scheduler/stage_partition.h"

namespace torch {
namespace nn {
class Module;
}  // namespace nn
}  // namespace torch

namespace zeropp {
namespace scheduler {

// Compute proxy per unit of a Sequential split at child indices `unit_starts` (see above).
std::vector<int64_t> UnitCosts(const torch::nn::Module& sequential, const std::vector<int>& unit_starts);

}  // namespace scheduler
}  // namespace zeropp
