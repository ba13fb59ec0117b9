#include "zeropp/comm_stats.h"

#include "absl/strings/str_cat.h"

namespace zeropp {

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kCount: break;
  }
  return "?";
}

const char* OpStateName(OpState s) {
  switch (s) {
    case OpState::kQueued: return "queued";
    case OpState::kRunning: return "running";
    case OpState::kDone: return "done";
    case OpState::kFailed: return "failed";
  }
  return "?";
}

int64_t CommStats::TotalSent() const {
  int64_t t = 0;
  for (const auto& k : by_kind) t += k.bytes_sent;
  return t;
}

int64_t CommStats::TotalReceived() const {
  int64_t t = 0;
  for (const auto& k : by_kind) t += k.bytes_received;
  return t;
}

CommStats CommStats::Since(const CommStats& before) const {
  CommStats d;
  for (int i = 0; i < kNumOpKinds; ++i) {
    d.by_kind[i].ops = by_kind[i].ops - before.by_kind[i].ops;
    d.by_kind[i].bytes_sent = by_kind[i].bytes_sent - before.by_kind[i].bytes_sent;
    d.by_kind[i].bytes_received = by_kind[i].bytes_received - before.by_kind[i].bytes_received;
    d.by_kind[i].busy_us = by_kind[i].busy_us - before.by_kind[i].busy_us;
    d.by_kind[i].modeled = by_kind[i].modeled;
  }
  return d;
}

std::string CommStats::ToString() const {
  std::string out;
  for (int i = 0; i < kNumOpKinds; ++i) {
    const KindStats& k = by_kind[i];
    if (k.ops == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : " ", OpKindName(static_cast<OpKind>(i)), "{ops=", k.ops,
                    " sent=", k.bytes_sent, " recv=", k.bytes_received, k.modeled ? " modeled" : "",
                    "}");
  }
  return out.empty() ? "{}" : out;
}

std::string OpRecord::ToString() const {
  std::string s = absl::StrCat("#", seq, " ", OpKindName(kind), " ", bytes, "B ", OpStateName(state));
  if (peer >= 0) absl::StrAppend(&s, " peer=", peer);
  if (end_us > 0) absl::StrAppend(&s, " ", end_us - start_us, "us");
  return s;
}

void OpLog::Add(const OpRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(r);
  while (records_.size() > capacity_) records_.pop_front();
}

void OpLog::SetState(uint64_t seq, OpState state, int64_t now_us) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
    if (it->seq != seq) continue;
    if (state == OpState::kRunning) it->start_us = now_us;
    if (state == OpState::kDone || state == OpState::kFailed) it->end_us = now_us;
    it->state = state;
    return;
  }
}

std::vector<OpRecord> OpLog::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {records_.begin(), records_.end()};
}

}  // namespace zeropp
