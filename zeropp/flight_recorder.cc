#include "zeropp/flight_recorder.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "zeropp/communicator.h"

namespace zeropp {
namespace {

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
std::vector<const Communicator*>& Live() {
  static std::vector<const Communicator*> live;
  return live;
}
std::string& Last() {
  static std::string last;
  return last;
}

}  // namespace

void FlightRecorder::Register(const Communicator* c) {
  std::lock_guard<std::mutex> lock(Mu());
  Live().push_back(c);
}

void FlightRecorder::Unregister(const Communicator* c) {
  std::lock_guard<std::mutex> lock(Mu());
  auto& live = Live();
  live.erase(std::remove(live.begin(), live.end(), c), live.end());
}

std::string FlightRecorder::Json(const std::string& why) {
  std::lock_guard<std::mutex> lock(Mu());
  nlohmann::ordered_json j;
  j["rank"] = Live().empty() ? -1 : Live().front()->global_rank();
  j["why"] = why;
  j["groups"] = nlohmann::ordered_json::array();
  for (const Communicator* c : Live()) {
    nlohmann::ordered_json g;
    g["name"] = c->name();
    g["group_rank"] = c->rank();
    g["ranks"] = c->global_ranks();
    g["ops"] = nlohmann::ordered_json::array();
    for (const OpRecord& r : c->RecentOps()) {
      g["ops"].push_back({{"seq", r.seq}, {"kind", OpKindName(r.kind)}, {"bytes", r.bytes}, {"peer", r.peer},
                          {"state", OpStateName(r.state)}, {"start_us", r.start_us}, {"end_us", r.end_us}});
    }
    j["groups"].push_back(std::move(g));
  }
  return j.dump(1);
}

std::string FlightRecorder::Dump(const std::string& why) {
  try {
    int rank;
    {
      std::lock_guard<std::mutex> lock(Mu());
      if (Live().empty()) return "";
      rank = Live().front()->global_rank();
    }
    const char* d = std::getenv("ZEROPP_FLIGHT_DIR");
    const std::string dir = d && *d ? d : "/tmp/zeropp-flight";
    std::filesystem::create_directories(dir);
    const std::string path = dir + "/rank" + std::to_string(rank) + ".json";
    {
      std::ofstream out(path + ".tmp", std::ios::trunc);
      out << Json(why) << "\n";
      if (!out) return "";
    }
    std::filesystem::rename(path + ".tmp", path);
    std::lock_guard<std::mutex> lock(Mu());
    Last() = path;
    return path;
  } catch (...) {
    return "";
  }
}

std::string FlightRecorder::LastDump() {
  std::lock_guard<std::mutex> lock(Mu());
  return Last();
}

void FlightRecorder::DumpOnTermination() {
  static std::once_flag once;
  std::call_once(once, [] {
    // SIGTERM is blocked in this thread and, by inheritance, in every thread started after it; the
    // watcher takes it with sigwait. So no thread is interrupted (a sleep or a wait returning early
    // could tear the groups down before the dump), and the dump runs outside a signal handler.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([set] {
      int sig = 0;
      sigwait(&set, &sig);
      Dump("stopped by SIGTERM (another rank failed or the job was interrupted)");
      std::_Exit(143);
    }).detach();
  });
}

}  // namespace zeropp
