// comm_stats.h: what a Communicator has put on the wire, and its recent operations.
//
// CommStats counts, per operation kind, the operations issued and the bytes this rank sent and
// received. For zeropp's own algorithms (ring all-gather/reduce-scatter/all-reduce, send/recv)
// the bytes are added at every point-to-point transfer, so they are measurements, not formulas.
// For operations delegated to the backend (kNative algorithm, broadcast, barrier) they are the
// bytes of the backend's documented algorithm and flagged `modeled`.
//
// OpLog keeps the last N operations of a group with their sequence numbers, for error reports.
// Thread-safe: written by the communicator's worker thread, read from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace zeropp {

enum class OpKind : int {
  kAllGather = 0,
  kReduceScatter,
  kAllReduce,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
  kCount,
};
constexpr int kNumOpKinds = static_cast<int>(OpKind::kCount);
const char* OpKindName(OpKind kind);

struct KindStats {
  int64_t ops = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t busy_us = 0;   // time the comm thread spent running these operations
  bool modeled = false;  // bytes come from the backend's algorithm, not from counted transfers
};

struct CommStats {
  std::array<KindStats, kNumOpKinds> by_kind{};
  const KindStats& operator[](OpKind k) const { return by_kind[static_cast<int>(k)]; }
  KindStats& operator[](OpKind k) { return by_kind[static_cast<int>(k)]; }
  int64_t TotalSent() const;
  int64_t TotalReceived() const;
  // Difference of two snapshots (this - before), for per-step accounting.
  CommStats Since(const CommStats& before) const;
  std::string ToString() const;
};

enum class OpState { kQueued, kRunning, kDone, kFailed };
const char* OpStateName(OpState s);

struct OpRecord {
  uint64_t seq = 0;  // per-group collective sequence number (p2p ops share the counter)
  OpKind kind = OpKind::kAllGather;
  int64_t bytes = 0;  // payload size (the tensor the caller passed)
  int peer = -1;      // group rank of the peer for send/recv, root for broadcast
  OpState state = OpState::kQueued;
  int64_t start_us = 0;
  int64_t end_us = 0;
  std::string ToString() const;
};

// Bounded log of the last `capacity` operations, oldest first.
class OpLog {
 public:
  explicit OpLog(size_t capacity) : capacity_(capacity) {}
  void Add(const OpRecord& r);
  // Updates the record with `seq` if it is still in the log.
  void SetState(uint64_t seq, OpState state, int64_t now_us);
  std::vector<OpRecord> Snapshot() const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::deque<OpRecord> records_;
};

}  // namespace zeropp
