// planner_layouts.h: the layouts and the plan request that the whole-layout planner tests share
// (planner_predict_test.cc, planner_executor_test.cc, planner_offload_test.cc), on the toy
// description and small model of planner_fixtures.h.
#pragma once

#include "scheduler/planner/layout.h"
#include "scheduler/planner/planner.h"
#include "tests/planner_fixtures.h"

namespace zeropp {
namespace planner {
namespace fixtures {

// ZeRO-3 over 4 devices (one node of the toy description).
inline Layout Zero3Over4() {
  Layout l;
  l.design = Design::kZero3;
  l.schedule = "zero3";
  l.zero = 4;
  return l;
}

// 3D: tp 2 x pp `pp`, one replica.
inline Layout Tp2(int pp) {
  Layout l;
  l.design = Design::k3D;
  l.tp = 2, l.pp = pp, l.dp = 1;
  return l;
}

inline PlanRequest SmallRequest(int devices) {
  PlanRequest q;
  q.model = Small();
  q.hardware = Toy();
  q.devices = devices;
  q.global_batch = 32;
  return q;
}

}  // namespace fixtures
}  // namespace planner
}  // namespace zeropp
