// unit_plan.h: which children of a Sequential form each scheduling unit, and which units share
// tied tensors, decided before anything is constructed or communicated (pure functions).
//
//   UnitPlan plan = PlanUnits(model, options.units);   // throws std::invalid_argument
//   plan.starts  -> Engine; plan.needs -> the ZeRO-3 schedule (Zero3Plan::needs)
//
// A tensor registered by several children (a tied embedding and LM head) belongs to the first
// unit that registers it; every later unit that registers it "needs" that unit: its parameters
// must be gathered with it and its backward adds to that unit's gradient. This is the one place
// that finds ties; the executor's cross-stage exchange uses `tied` below.
#pragma once

#include <string>
#include <vector>

#include "zeropp/engine_options.h"

namespace torch {
namespace nn {
class SequentialImpl;
}  // namespace nn
}  // namespace torch

namespace zeropp {

struct TiedTensor {
  std::string name;        // as named in the first unit that registers it
  std::vector<int> units;  // every unit registering it, ascending
  bool trainable = true;
};

struct UnitPlan {
  std::vector<int> starts;               // first child of each unit, starts[0] == 0
  std::vector<std::vector<int>> needs;   // per unit: earlier units owning tensors it uses
  std::vector<TiedTensor> tied;          // tensors registered by more than one unit
  int num_units() const { return static_cast<int>(starts.size()); }
};

// Throws std::invalid_argument naming the policy field and the model's child count.
UnitPlan PlanUnits(const torch::nn::SequentialImpl& model, const UnitPolicy& policy);

}  // namespace zeropp
