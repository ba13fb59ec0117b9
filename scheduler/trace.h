// trace.h: timeline events in one format for the executor (measured) and the simulator
// (predicted): Chrome trace JSON, one track per pipeline rank, opens in Perfetto.
#pragma once

#include <string>
#include <vector>

namespace zeropp {
namespace scheduler {

struct TraceEvent {
  int rank = 0;
  std::string name;  // the action's text, e.g. F0.3
  std::string cat;   // compute, comm, p2p, idle
  double start_s = 0;
  double end_s = 0;
};

std::string ChromeTraceJson(const std::vector<TraceEvent>& events);

}  // namespace scheduler
}  // namespace zeropp
