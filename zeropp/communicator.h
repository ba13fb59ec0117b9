// communicator.h: one process group's collectives, counted and bounded in time.
//
// A Communicator wraps a c10d backend (ProcessGroupGloo on CPU, ProcessGroupNCCL on CUDA) for a
// group of ranks. With Algorithm::kRing (the default on Gloo) zeropp runs its own bandwidth-
// optimal algorithms over the backend's send/recv, so the bytes on the wire match theory:
//   all-gather / reduce-scatter of S bytes (the full tensor): S*(N-1)/N sent and received per rank
//   all-reduce of S bytes: 2*S*(N-1)/N (reduce-scatter then all-gather, uneven chunks allowed)
//   broadcast of S bytes: a pipelined chain, S per rank except the last (sends) / root (receives)
// Gloo's own reduce-scatter is an all-reduce underneath (2x the bytes); Algorithm::kNative keeps
// the backend's collectives for comparison, with bytes from the backend's algorithm (`modeled`).
//
// On NCCL the backend's own collectives run (all-gather into one tensor, reduce-scatter from one
// tensor, all-reduce, broadcast, send/recv); NCCL runs rings for these, so the counters hold the
// ring's bytes per rank, marked `modeled`.
//
// Devices (device.h): tensors may live on a GPU. The caller's current stream is captured by an
// event when an operation is issued; the operation runs on the stream of its role (all-gather and
// broadcast: unshard; reduce-scatter and all-reduce: reduce; send/recv: p2p) after waiting on that
// event, and CommWork::Wait makes the caller's stream wait on its completion event. A backend that
// cannot take the tensor's device (Gloo with GPU tensors, NCCL with host tensors) gets a staged
// copy on its own device, copied back on the operation's stream (several ranks on one GPU run so).
//
// Threads: on Gloo, collectives run in issue order on one worker thread per Communicator (the
// "comm stream"), so compute on the caller thread overlaps them. On NCCL they are issued on the
// caller's thread onto the role streams and the host never waits for them. Send/Recv are issued on the caller's
// thread directly to the backend and complete in Wait(). A heartbeat thread publishes to the
// store which collective this rank has reached, so a timeout can name the ranks that never arrived.
//
// Rule for all ranks: call collectives on every rank of the group in the same order with matching
// sizes. Send(t, peer) on one rank pairs with Recv(t, me) on the peer, in order per pair.
//
//   Communicator comm("zero", my_global_rank, {0, 1, 2, 3}, store, backend, {});
//   auto w = comm.AllGather(full, shard);   // full.numel() == shard.numel() * comm.size()
//   ... compute ...
//   w->Wait();                               // throws CommError on timeout / peer failure
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include "zeropp/comm_stats.h"
#include "zeropp/comm_work.h"
#include "zeropp/device.h"

namespace c10d {
class Backend;
class Store;
class Work;
}  // namespace c10d

namespace zeropp {

enum class Algorithm { kRing, kNative };
enum class ReduceOp { kSum, kAvg };

struct CommOptions {
  std::chrono::milliseconds timeout{60000};   // per operation
  std::chrono::milliseconds heartbeat{200};   // progress publication period
  size_t log_capacity = 64;                   // operations kept in the OpLog
  Algorithm algorithm = Algorithm::kRing;
  int64_t broadcast_chunk_bytes = 4 << 20;    // pipelining unit of the chain broadcast
};

class Communicator {
 public:
  // `store` must be private to this group (e.g. a PrefixStore); `backend` spans exactly
  // `global_ranks` (group rank i = global_ranks[i]). Non-blocking apart from thread start.
  Communicator(std::string name, int global_rank, std::vector<int> global_ranks,
               c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Backend> backend,
               CommOptions options);
  // Waits for queued operations to finish (each bounded by its timeout), then stops threads.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // All take contiguous tensors and return immediately; the work completes on the comm thread.
  // Shape errors throw CommError at once, on this rank.
  // out.numel() == in.numel() * size(); out[i*n:(i+1)*n] = in of group rank i.
  std::shared_ptr<CommWork> AllGather(at::Tensor out, at::Tensor in);
  // in.numel() == out.numel() * size(); out = op over ranks of in[rank*n:(rank+1)*n].
  std::shared_ptr<CommWork> ReduceScatter(at::Tensor out, at::Tensor in, ReduceOp op = ReduceOp::kSum);
  // In place, any numel (chunks may be uneven).
  std::shared_ptr<CommWork> AllReduce(at::Tensor t, ReduceOp op = ReduceOp::kSum);
  // In place; `root` is a group rank.
  std::shared_ptr<CommWork> Broadcast(at::Tensor t, int root);
  // Point-to-point with a group rank; issued now on the caller's thread, completed in Wait().
  std::shared_ptr<CommWork> Send(at::Tensor t, int peer);
  std::shared_ptr<CommWork> Recv(at::Tensor t, int peer);
  // Point-to-point matched by an explicit tag (0 <= tag < 2^28) instead of issue order: a Send and
  // a Recv pair up when they name each other and the same tag (FIFO among equal tags).
  std::shared_ptr<CommWork> SendTagged(at::Tensor t, int peer, int tag);
  std::shared_ptr<CommWork> RecvTagged(at::Tensor t, int peer, int tag);
  // Completes once every rank of the group has reached it.
  std::shared_ptr<CommWork> Barrier();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(global_ranks_.size()); }
  int global_rank() const { return global_rank_; }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  const std::string& name() const { return name_; }
  const CommOptions& options() const { return options_; }
  std::string backend_name() const;
  // NCCL: flushes and frees the backend's communicators (ProcessGroups::Shutdown); other backends
  // need nothing. Errors are ignored: the run has finished.
  void ShutdownBackend();

  CommStats Stats() const;
  std::vector<OpRecord> RecentOps() const { return log_.Snapshot(); }

 private:
  struct Task {
    OpRecord record;
    std::function<void(const Task&)> run;  // runs on the worker; throws on failure
    std::shared_ptr<CommWork> work;
    c10::Device device{c10::kCPU};  // of the operation's tensors
    StreamEvent ready;              // the issuing stream's work up to the operation
    std::vector<at::Tensor> held;   // kept alive until the consumer's stream waited
  };

  std::shared_ptr<CommWork> PointToPoint(bool send, at::Tensor t, int peer, int tag);
  std::shared_ptr<CommWork> Enqueue(OpKind kind, int64_t bytes, int peer, std::vector<at::Tensor> tensors,
                                    std::function<void(const Task&)> run);
  // `t` on the backend's device: itself, or a staged copy (device.h's staging rule).
  at::Tensor ForBackend(const at::Tensor& t) const;
  // Copies a staged result back into `dst` (nothing when no staging happened: same device).
  static void FromBackend(const at::Tensor& dst, const at::Tensor& staged);
  void WorkerLoop();
  void RunTask(Task& task);  // on the worker (Gloo) or the issuing thread (NCCL)
  std::string OpName(const char* kind) const;  // "[rank R] group 'NAME' KIND", for argument errors
  // Liveness and diagnosis (communicator_liveness.cc).
  void HeartbeatLoop();
  std::string Describe(const OpRecord& r) const;
  // Reads the peers' published progress and names those behind `seq` (or with no progress).
  std::string DescribeMissing(uint64_t seq, const std::vector<int>& only_peers) const;
  std::string Timeline() const;
  [[noreturn]] void Fail(const OpRecord& r, const std::string& what,
                         const std::vector<int>& suspects) const;

  // Algorithms (worker thread).
  void P2PExchange(const OpRecord& r, at::Tensor send, int to, at::Tensor recv, int from, int tag,
                   std::chrono::steady_clock::time_point deadline, OpKind kind);
  void RingAllGather(const OpRecord& r, at::Tensor flat, const std::vector<int64_t>& bounds, OpKind kind);
  void RingReduceScatter(const OpRecord& r, at::Tensor flat_in, at::Tensor out_or_null,
                         const std::vector<int64_t>& bounds, OpKind kind);
  void ChainBroadcast(const OpRecord& r, at::Tensor flat, int root);
  void WaitNative(const OpRecord& r, const c10::intrusive_ptr<c10d::Work>& w);
  void CountModeled(OpKind kind, int64_t sent, int64_t received);

  std::string name_;
  int global_rank_;
  int rank_;
  std::vector<int> global_ranks_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  CommOptions options_;
  c10::Device backend_device_{c10::kCPU};  // where the backend takes tensors (cuda for NCCL)
  bool streams_are_async_ = false;  // NCCL: issue on the caller's thread; streams give the overlap
  std::string broken_;              // the first failure; later operations fail fast with it

  mutable std::mutex stats_mu_;
  CommStats stats_;
  OpLog log_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  uint64_t next_seq_ = 1;      // collectives: equal on every rank of the group
  uint64_t next_p2p_seq_ = 0;  // point-to-point: local numbering
  std::vector<uint64_t> p2p_send_count_;  // per peer, for tags
  std::vector<uint64_t> p2p_recv_count_;

  std::atomic<uint64_t> entered_seq_{0};
  std::thread worker_;     // runs collectives in issue order
  std::thread heartbeat_;  // publishes entered_seq_ to the store
  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
};

// Every rank's `value`, in group-rank order: a blocking all-gather of one double (timings, peak
// memory, counters). Call on every rank of the group.
std::vector<double> GatherScalar(Communicator& comm, double value);
double MaxOverRanks(Communicator& comm, double value);
double MinOverRanks(Communicator& comm, double value);
double SumOverRanks(Communicator& comm, double value);

}  // namespace zeropp
