#include "scheduler/trace.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeropp {
namespace scheduler {

std::string ChromeTraceJson(const std::vector<TraceEvent>& events) {
  std::vector<std::string> ev;
  for (const auto& e : events) {
    ev.push_back(absl::StrCat("{\"name\":\"", e.name, "\",\"cat\":\"", e.cat, "\",\"ph\":\"X\",\"pid\":0,\"tid\":", e.rank,
                              ",\"ts\":", e.start_s * 1e6, ",\"dur\":", (e.end_s - e.start_s) * 1e6, "}"));
  }
  return absl::StrCat("{\"traceEvents\":[\n", absl::StrJoin(ev, ",\n"), "\n],\"displayTimeUnit\":\"ms\"}\n");
}

}  // namespace scheduler
}  // namespace zeropp
