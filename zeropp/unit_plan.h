// unit_plan.h: which children of a Sequential form each scheduling unit, and which units share
// tied tensors, decided before anything is constructed or communicated (pure functions).
//
//   UnitPlan plan = PlanUnits(model, options.units);   // throws std::invalid_argument
//   plan.starts  -> Engine; plan.needs -> the ZeRO-3 schedule (Zero3Plan::needs)
//
// A tensor registered by several children (a tied embedding and LM head) belongs to the first
// unit that registers it; every later unit that registers it "needs" that unit: its parameters
// must be gathered with it and its backward adds to that unit's gradient. This file is the one
// place that reasons about ties: which units a rank's units need (HeldNeeds, used by the engine
// and, through UnitPlan::needs, by the zero3 schedule) and which tensors two pipeline ranks both
// hold (CrossStageTies, used by the executor to sum their gradients).
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
  const void* impl = nullptr;  // the tensor's identity in the model the plan was made from
};

struct UnitPlan {
  std::vector<int> starts;               // first child of each unit, starts[0] == 0
  std::vector<std::vector<int>> needs;   // per unit: earlier units owning tensors it uses
  std::vector<TiedTensor> tied;          // tensors registered by more than one unit
  int num_units() const { return static_cast<int>(starts.size()); }
};

// Throws std::invalid_argument naming the policy field and the model's child count.
UnitPlan PlanUnits(const torch::nn::SequentialImpl& model, const UnitPolicy& policy);

// When a rank holds the units with owned[u] (empty = all): a tied tensor is held by the first held
// unit that registers it, and every other held unit registering it needs that unit. Per unit,
// ascending; UnitPlan::needs is HeldNeeds(plan, {}).
std::vector<std::vector<int>> HeldNeeds(const UnitPlan& plan, const std::vector<bool>& owned);
// The unit holding tied tensor t when a rank holds `owned` (-1: none held).
int TiedHolder(const TiedTensor& t, const std::vector<bool>& owned);

// Tied tensors that pipeline rank `me` holds together with exactly one other rank (units on
// virtual stage s live on rank s % pp): (index into plan.tied, peer rank). Throws
// std::invalid_argument for a trainable tensor held by more than two ranks.
std::vector<std::pair<int, int>> CrossStageTies(const UnitPlan& plan, const std::vector<int>& stage_of_unit, int pp,
                                                int me);

}  // namespace zeropp
