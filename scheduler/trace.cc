#include "scheduler/trace.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace scheduler {

std::string ChromeTraceJson(const std::vector<TraceEvent>& events) {
  std::vector<std::string> ev;
  for (const auto& e : events) {
    const int tid = e.comm_stream ? kCommStreamTrack + e.rank : e.rank;
    ev.push_back(absl::StrCat("{\"name\":\"", e.name, "\",\"cat\":\"", e.cat, "\",\"ph\":\"X\",\"pid\":0,\"tid\":", tid,
                              ",\"ts\":", e.start_s * 1e6, ",\"dur\":", (e.end_s - e.start_s) * 1e6, "}"));
  }
  return absl::StrCat("{\"traceEvents\":[\n", absl::StrJoin(ev, ",\n"), "\n],\"displayTimeUnit\":\"ms\"}\n");
}

void TimeShares::Add(const std::vector<TraceEvent>& events) {
  for (const TraceEvent& e : events) {
    if (e.comm_stream) continue;
    const double d = e.end_s - e.start_s;
    const std::string& n = e.name;
    size_t letters = 0;
    while (letters < n.size() && std::isalpha(static_cast<unsigned char>(n[letters]))) ++letters;
    const std::string kind = n.substr(0, letters);
    if (n.rfind("wait-gather", 0) == 0) {
      wait_gather += d;
    } else if (n.rfind("wait-recv", 0) == 0 || kind == "RA" || kind == "RG") {
      wait_transfer += d;
    } else if (kind == "OPT") {
      optimizer += d;
    } else if (kind == "F") {
      forward += d;
    } else if (kind == "B") {
      backward += d;
    } else if (kind == "Bi") {
      backward_input += d;
    } else if (kind == "W") {
      backward_weight += d;
    } else if (kind == "R") {
      recompute += d;
    } else {
      comm_calls += d;
    }
  }
  ++steps;
}

void TimeShares::Add(const TimeShares& o) {
  forward += o.forward;
  backward += o.backward;
  backward_input += o.backward_input;
  backward_weight += o.backward_weight;
  recompute += o.recompute;
  optimizer += o.optimizer;
  wait_gather += o.wait_gather;
  wait_transfer += o.wait_transfer;
  comm_calls += o.comm_calls;
  steps += o.steps;
}

double TimeShares::Accounted() const {
  return forward + backward + backward_input + backward_weight + recompute + optimizer + wait_gather + wait_transfer +
         comm_calls;
}

}  // namespace scheduler
}  // namespace zeropp
