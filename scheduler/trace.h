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
  // An operation on the rank's communication thread (the communicator's OpLog: from when the thread
  // began it to when it finished), drawn on a track of its own, kCommStreamTrack + rank.
  bool comm_stream = false;
};
constexpr int kCommStreamTrack = 1000;

std::string ChromeTraceJson(const std::vector<TraceEvent>& events);

// Where one rank's step time went, from its executor trace (a rank's events do not overlap: a wait
// inside an action is its own event; comm_stream events are not the rank's time and are skipped).
// Seconds, accumulated over the steps passed to Add.
struct TimeShares {
  double forward = 0;          // F
  double backward = 0;         // B (input and weight gradients together)
  double backward_input = 0;   // Bi
  double backward_weight = 0;  // W
  double recompute = 0;        // R (a forward again before its backward)
  double optimizer = 0;        // OPT: reductions' completion, clipping, AdamW
  double wait_gather = 0;      // the training thread blocked on a parameter all-gather
  double wait_transfer = 0;    // blocked on an activation or gradient from another stage (RA, RG)
  double comm_calls = 0;       // issuing gathers, releases, reduce-scatters and sends (G, X, RS, SA, SG)
  int steps = 0;
  void Add(const std::vector<TraceEvent>& events);
  void Add(const TimeShares& other);
  double Accounted() const;    // the sum of the above
};

}  // namespace scheduler
}  // namespace zeropp
