// planner.h: enumerate every valid layout of every design for a model, a batch and a cluster,
// drop those over device memory, predict the rest and rank them by step time.
//
//   PlanRequest q{ModelPreset("llama2-13b"), LoadHardware("a100-80gb-ib400"), 64, 512};
//   PlanResult r = Plan(q);   // r.fitting sorted fastest first; r.smallest_memory if none fits
// Recomputation, then (ZeRO designs) offloading the optimizer state to host memory, then to NVMe,
// then (ZeRO-3) the recomputed units' saved inputs with it, then the parameters (host memory, then
// NVMe; sharded layouts), then everything, are tried in that order only where the layout does not
// fit without them; the first that fits is kept.
#pragma once

#include <string>
#include <vector>

#include "scheduler/planner/hardware.h"
#include "scheduler/planner/layout.h"
#include "scheduler/planner/model_shape.h"
#include "scheduler/planner/predictor.h"

namespace zeropp {
namespace planner {

struct PlanRequest {
  ModelShape model;
  Hardware hardware;
  int devices = 0;
  int global_batch = 0;                       // sequences per step
  std::vector<Design> designs = {Design::kZero3, Design::kZeroPP, Design::kPipeFsdp, Design::k3D};
  std::vector<int> micro_batches = {1, 2, 4};
  std::vector<int> chunks = {1, 2};           // v for interleaved and ZeroPP
  bool offload = true;                        // try offload (optimizer, then parameters) where nothing else fits
  int threads = 0;                            // layouts evaluated at once (0: one per core); same result on any
};

struct PlanResult {
  std::vector<Prediction> fitting;            // fastest first
  int considered = 0;                         // valid layouts enumerated
  int over_memory = 0;
  double smallest_memory = 0;                 // bytes, over every layout considered
  std::string smallest_layout;
};

// "" or the first bad input (devices, batch, model) with its value and what was expected.
std::string CheckRequest(const PlanRequest& q);
// Every layout of the request's designs that passes Layout::Check (recompute off).
std::vector<Layout> EnumerateLayouts(const PlanRequest& q);
// Throws std::invalid_argument with CheckRequest's message.
PlanResult Plan(const PlanRequest& q);
// The best of one design in a result (nullptr if none fits).
const Prediction* BestOf(const PlanResult& r, Design d);

}  // namespace planner
}  // namespace zeropp
