// communicator_liveness.cc: how a Communicator tells who is missing. A heartbeat thread publishes
// this rank's progress (the last collective it entered) in the group's store and beats a job-wide
// liveness key; on a failure or timeout, DescribeMissing reads both to name the ranks that never
// arrived, the ranks that died (and their nodes), and Fail throws CommError with the recent ops.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "zeropp/communicator.h"
#include "zeropp/communicator_keys.h"
#include "zeropp/flight_recorder.h"

namespace zeropp {
namespace {

using comm_internal::kP2PSeqBase;
using comm_internal::ProgressKey;

// Liveness is job-wide: every communicator of a rank beats "zpp/alive/<global rank>" in the root
// store (beneath the groups' prefixes), so any rank can tell which ranks of the job are dead.
std::string AliveKey(int global_rank) { return absl::StrCat("zpp/alive/", global_rank); }
c10::intrusive_ptr<c10d::Store> RootStore(const c10::intrusive_ptr<c10d::Store>& store) {
  auto* prefix = dynamic_cast<c10d::PrefixStore*>(store.get());
  return prefix ? prefix->getUnderlyingNonPrefixStore() : store;
}
int JobWorldSize(int fallback) {
  const char* w = std::getenv("WORLD_SIZE");
  int n = 0;
  return w && absl::SimpleAtoi(w, &n) && n > 0 ? n : fallback;
}
// Liveness beats every kAliveEvery heartbeats (about 1 s): a peer whose beat stops is dead.
constexpr int kAliveEvery = 5;

// " (node N)" for a global rank when the job spans several nodes of LOCAL_WORLD_SIZE ranks each.
std::string NodeOf(int global_rank) {
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  const char* world = std::getenv("WORLD_SIZE");
  int l = 0, w = 0;
  if (!local || !world || !absl::SimpleAtoi(local, &l) || !absl::SimpleAtoi(world, &w) || l <= 0 || w <= l) return "";
  return absl::StrCat(" (node ", global_rank / l, ")");
}

}  // namespace

std::string Communicator::Describe(const OpRecord& r) const {
  return absl::StrCat("[rank ", global_rank_, "] group '", name_, "' (", size(), " ranks) ",
                      OpKindName(r.kind), " #", r.seq, " (", r.bytes, " bytes",
                      r.peer >= 0 ? absl::StrCat(", peer ", r.peer) : "", ")");
}

std::string Communicator::Timeline() const {
  std::vector<std::string> parts;
  for (const auto& rec : log_.Snapshot()) parts.push_back(rec.ToString());
  return absl::StrJoin(parts, ", ");
}

std::string Communicator::DescribeMissing(uint64_t seq, const std::vector<int>& only_peers) const {
  std::vector<std::string> missing;
  std::vector<int> peers = only_peers;
  if (peers.empty()) {
    for (int q = 0; q < size(); ++q) peers.push_back(q);
  }
  // Liveness of every rank of the job: read the beats, wait longer than a beat's period (which
  // also gives the heartbeats time to publish progress), read again. A rank whose beat did not
  // move is dead (killed, crashed, its node gone), whatever operation failed here.
  const auto root = RootStore(store_);
  const int world = JobWorldSize(*std::max_element(global_ranks_.begin(), global_ranks_.end()) + 1);
  auto beats = [&] {
    std::vector<std::string> b(world);
    for (int g = 0; g < world; ++g) {
      try {
        if (g != global_rank_ && root->check({AliveKey(g)})) {
          auto raw = root->get(AliveKey(g));
          b[g] = std::string(raw.begin(), raw.end());
        }
      } catch (const std::exception&) {
      }
    }
    return b;
  };
  const auto before = beats();
  std::this_thread::sleep_for(kAliveEvery * options_.heartbeat + 2 * options_.heartbeat + std::chrono::milliseconds(50));
  const auto after = beats();
  std::vector<std::string> dead;
  for (int g = 0; g < world; ++g) {
    if (!before[g].empty() && before[g] == after[g]) dead.push_back(absl::StrCat(g, NodeOf(g)));
  }
  const std::string dead_text = dead.empty() ? "" : absl::StrCat("ranks no longer alive: ", absl::StrJoin(dead, ", "), "; ");
  for (int q : peers) {
    if (q == rank_) continue;
    std::string who = absl::StrCat(global_ranks_[q], NodeOf(global_ranks_[q]));
    try {
      if (!store_->check({ProgressKey(q)})) {
        missing.push_back(absl::StrCat(who, " (never joined)"));
        continue;
      }
      auto raw = store_->get(ProgressKey(q));
      uint64_t reached = 0;
      (void)absl::SimpleAtoi(std::string(raw.begin(), raw.end()), &reached);
      if (seq >= kP2PSeqBase) {
        missing.push_back(absl::StrCat(who, " (did not match; its last collective was #", reached, ")"));
      } else if (reached < seq) {
        missing.push_back(absl::StrCat(who, " (last reached #", reached, ")"));
      }
    } catch (const std::exception& e) {
      missing.push_back(absl::StrCat(who, " (store unreachable: ", e.what(), ")"));
    }
  }
  if (missing.empty()) return dead_text + "every rank reached this operation (a peer failed or is slow inside it)";
  return absl::StrCat(dead_text, "ranks that never arrived: ", absl::StrJoin(missing, ", "));
}

void Communicator::Fail(const OpRecord& r, const std::string& what,
                        const std::vector<int>& suspects) const {
  FlightRecorder::Dump(absl::StrCat(Describe(r), ": ", what));
  throw CommError(absl::StrCat(Describe(r), ": ", what, "; ", DescribeMissing(r.seq, suspects),
                               "; recent ops: ", Timeline()));
}

void Communicator::HeartbeatLoop() {
  uint64_t published = 0, beats = 0;
  const auto alive_store = RootStore(store_);
  auto last_beat = std::chrono::steady_clock::now() - kAliveEvery * options_.heartbeat;
  std::unique_lock<std::mutex> lock(hb_mu_);
  while (true) {
    hb_cv_.wait_for(lock, options_.heartbeat);
    if (std::chrono::steady_clock::now() - last_beat >= kAliveEvery * options_.heartbeat) {
      last_beat = std::chrono::steady_clock::now();
      const std::string v = absl::StrCat(name_, ":", ++beats);  // unique per writer: any change is life
      try {
        alive_store->set(AliveKey(global_rank_), std::vector<uint8_t>(v.begin(), v.end()));
      } catch (const std::exception&) {
      }
    }
    uint64_t now = entered_seq_.load();
    if (now != published) {
      std::string v = absl::StrCat(now);
      try {
        store_->set(ProgressKey(rank_), std::vector<uint8_t>(v.begin(), v.end()));
        published = now;
      } catch (const std::exception&) {
        // The store is gone (shutdown or master died); diagnosis will say so.
      }
    }
    bool stop;
    {
      std::lock_guard<std::mutex> qlock(queue_mu_);
      stop = stopping_ && queue_.empty();
    }
    if (stop) return;
  }
}

}  // namespace zeropp
