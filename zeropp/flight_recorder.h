// flight_recorder.h: what every rank was doing when communication failed. Each Communicator
// keeps its last N operations (OpLog: group, kind, sequence number, bytes, peer, state, start and
// end); the flight recorder collects them from every live group of this process and writes them to
// $ZEROPP_FLIGHT_DIR/rank<R>.json (default /tmp/zeropp-flight) when an operation fails or times
// out, or when the program is stopped (SIGTERM from the launcher after another rank failed).
// `./zpp diagnose DIR` (tools/diagnose.cc) reads every rank's dump and names the first operation
// where the ranks diverge and the ranks that never arrived.
//
// Thread-safe: groups register on construction and unregister on destruction.
#pragma once

#include <string>

namespace zeropp {

class Communicator;

class FlightRecorder {
 public:
  static void Register(const Communicator* c);
  static void Unregister(const Communicator* c);
  // JSON: {"rank": R, "why": WHY, "groups": [{"name", "group_rank", "ranks": [...], "ops": [{"seq",
  // "kind", "bytes", "peer", "state", "start_us", "end_us"}]}]}.
  static std::string Json(const std::string& why);
  // Writes Json(why) to the dump file (temporary name, then rename); returns its path, or "" when
  // no group is live or the directory cannot be written. Never throws.
  static std::string Dump(const std::string& why);
  // The path of this process's last dump ("" if none): the groups may be gone by the time an error
  // reaches main, after Communicator's own dump at the failure.
  static std::string LastDump();
  // Dumps once on SIGTERM (taken by a watcher thread with sigwait; call this before starting any
  // other thread), then exits 143.
  static void DumpOnTermination();
};

}  // namespace zeropp
