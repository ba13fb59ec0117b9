#include "zeropp/communicator.h"

#include <algorithm>
#include <thread>

#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "zeropp/communicator_keys.h"
#include "zeropp/flight_recorder.h"

namespace zeropp {
namespace {

using comm_internal::kP2PSeqBase;
using comm_internal::ProgressKey;

using Clock = std::chrono::steady_clock;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
      .count();
}

constexpr int kTagMask = 0x0FFFFFFF;
constexpr int kP2PTagBit = 0x10000000;
constexpr int kUserTagBit = 0x20000000;

// Offsets of `parts` near-equal chunks of `numel` elements (the first numel % parts get one more).
std::vector<int64_t> EvenBounds(int64_t numel, int parts) {
  std::vector<int64_t> b(parts + 1, 0);
  int64_t base = numel / parts, rem = numel % parts;
  for (int i = 0; i < parts; ++i) b[i + 1] = b[i] + base + (i < rem ? 1 : 0);
  return b;
}

std::vector<int64_t> EqualBounds(int64_t chunk, int parts) {
  std::vector<int64_t> b(parts + 1, 0);
  for (int i = 0; i < parts; ++i) b[i + 1] = b[i] + chunk;
  return b;
}

at::Tensor Chunk(const at::Tensor& flat, const std::vector<int64_t>& b, int i) {
  return flat.narrow(0, b[i], b[i + 1] - b[i]);
}

void CheckContiguous(const at::Tensor& t, const char* what, const std::string& op) {
  if (!t.defined() || !t.is_contiguous()) {
    throw CommError(absl::StrCat(op, ": ", what, " must be a defined contiguous tensor"));
  }
}

// `full` must hold size() times the elements of `part`, in the same dtype.
void CheckShardedPair(const at::Tensor& full, const char* full_role, const at::Tensor& part, const char* part_role,
                      int size, const std::string& op) {
  if (full.numel() != part.numel() * size || full.scalar_type() != part.scalar_type()) {
    throw CommError(absl::StrCat(op, ": ", full_role, " has ", full.numel(), " ", std::string(full.dtype().name()),
                                 " elements, expected ", part_role, " numel(", part.numel(), ")*size(", size, ")=",
                                 part.numel() * size, " ", std::string(part.dtype().name())));
  }
}

}  // namespace

std::string Communicator::OpName(const char* kind) const {
  return absl::StrCat("[rank ", global_rank_, "] group '", name_, "' ", kind);
}

Communicator::Communicator(std::string name, int global_rank, std::vector<int> global_ranks,
                           c10::intrusive_ptr<c10d::Store> store,
                           c10::intrusive_ptr<c10d::Backend> backend, CommOptions options)
    : name_(std::move(name)),
      global_rank_(global_rank),
      global_ranks_(std::move(global_ranks)),
      store_(std::move(store)),
      backend_(std::move(backend)),
      options_(options),
      log_(options.log_capacity) {
  auto it = std::find(global_ranks_.begin(), global_ranks_.end(), global_rank_);
  if (it == global_ranks_.end()) {
    throw CommError(absl::StrCat("[rank ", global_rank_, "] group '", name_, "': rank is not a member of [",
                                 absl::StrJoin(global_ranks_, ","), "]"));
  }
  rank_ = static_cast<int>(it - global_ranks_.begin());
  if (backend_->getSize() != size() || backend_->getRank() != rank_) {
    throw CommError(absl::StrCat("[rank ", global_rank_, "] group '", name_, "': backend has rank ",
                                 backend_->getRank(), "/", backend_->getSize(), ", expected ", rank_,
                                 "/", size()));
  }
  if (backend_name() == "nccl") {
    // NCCL's own collectives are bandwidth-optimal rings already; the send/recv ring is for Gloo.
    options_.algorithm = Algorithm::kNative;
    backend_device_ = CurrentCudaDevice();
    streams_are_async_ = true;
  }
  p2p_send_count_.assign(size(), 0);
  p2p_recv_count_.assign(size(), 0);
  for (int i = 0; i < kNumOpKinds; ++i) {
    stats_.by_kind[i].modeled = options_.algorithm == Algorithm::kNative &&
                                static_cast<OpKind>(i) != OpKind::kSend &&
                                static_cast<OpKind>(i) != OpKind::kRecv;
  }
  store_->set(ProgressKey(rank_), std::vector<uint8_t>{'0'});
  worker_ = std::thread([this] { WorkerLoop(); });
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  FlightRecorder::Register(this);
}

Communicator::~Communicator() {
  FlightRecorder::Unregister(this);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
    queue_cv_.notify_all();
  }
  worker_.join();
  {
    std::lock_guard<std::mutex> lock(hb_mu_);
    hb_cv_.notify_all();
  }
  heartbeat_.join();
}

std::string Communicator::backend_name() const { return backend_->getBackendName(); }

void Communicator::ShutdownBackend() {
  try {
    if (backend_name() == "nccl") backend_->shutdown();
  } catch (const std::exception&) {
  }
}

CommStats Communicator::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

at::Tensor Communicator::ForBackend(const at::Tensor& t) const {
  if (!t.defined() || t.device() == backend_device_) return t;
  return t.to(backend_device_).contiguous();
}

void Communicator::FromBackend(const at::Tensor& dst, const at::Tensor& staged) {
  // ForBackend staged exactly when the devices differ; otherwise `staged` is `dst`'s own memory.
  if (dst.defined() && dst.device() != staged.device()) dst.copy_(staged);
}

namespace {
StreamRole RoleOf(OpKind kind) {
  return kind == OpKind::kReduceScatter || kind == OpKind::kAllReduce ? StreamRole::kReduce : StreamRole::kUnshard;
}
}  // namespace

std::shared_ptr<CommWork> Communicator::Enqueue(OpKind kind, int64_t bytes, int peer, std::vector<at::Tensor> tensors,
                                                std::function<void(const Task&)> run) {
  Task task;
  for (const auto& t : tensors) {
    if (t.defined() && !t.is_cpu()) {
      task.device = t.device();
      task.ready = StreamEvent::RecordCurrent(task.device);  // on the issuing (compute) stream
      break;
    }
  }
  if (!task.device.is_cpu()) task.held = std::move(tensors);
  task.record.kind = kind;
  task.record.bytes = bytes;
  task.record.peer = peer;
  task.run = std::move(run);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    task.record.seq = next_seq_++;
    task.work = std::make_shared<CommWork>(task.record.seq, Describe(task.record), options_.timeout);
    log_.Add(task.record);
    {
      std::lock_guard<std::mutex> slock(stats_mu_);
      stats_[kind].ops += 1;
    }
    if (!streams_are_async_) {
      queue_.push_back(task);
      queue_cv_.notify_all();
    }
  }
  // NCCL: the operation is issued now, in program order, on its role's stream; the host does not
  // wait for it (Wait() orders the caller's stream after it). The streams are the asynchrony.
  if (streams_are_async_) RunTask(task);
  return task.work;
}

void Communicator::RunTask(Task& task) {
  entered_seq_.store(task.record.seq);
  {
    std::lock_guard<std::mutex> lock(hb_mu_);
    hb_cv_.notify_all();
  }
  if (!broken_.empty()) {
    log_.SetState(task.record.seq, OpState::kFailed, NowUs());
    task.work->MarkFailed(std::make_exception_ptr(
        CommError(absl::StrCat(Describe(task.record), ": not run, group failed earlier: ", broken_))));
    return;
  }
  const int64_t start_us = NowUs();
  log_.SetState(task.record.seq, OpState::kRunning, start_us);
  try {
    std::unique_ptr<StreamScope> scope;
    if (!task.device.is_cpu()) {
      SetCurrentDevice(task.device);
      scope = std::make_unique<StreamScope>(task.device, RoleOf(task.record.kind));
      task.ready.Block();  // the role's stream waits for the producer's work, not the host
    }
    task.run(task);
    if (!task.device.is_cpu()) {
      task.work->SetDone(StreamEvent::RecordCurrent(task.device), std::move(task.held));
    }
    const int64_t end_us = NowUs();
    log_.SetState(task.record.seq, OpState::kDone, end_us);
    {
      std::lock_guard<std::mutex> slock(stats_mu_);
      stats_[task.record.kind].busy_us += end_us - start_us;
    }
    task.work->MarkDone();
  } catch (const std::exception& e) {
    log_.SetState(task.record.seq, OpState::kFailed, NowUs());
    broken_ = absl::StrCat(OpKindName(task.record.kind), " #", task.record.seq);
    task.work->MarkFailed(std::current_exception());
  }
}

void Communicator::WorkerLoop() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    RunTask(task);
  }
}

void Communicator::P2PExchange(const OpRecord& r, at::Tensor send, int to, at::Tensor recv, int from,
                               int tag, Clock::time_point deadline, OpKind kind) {
  c10::intrusive_ptr<c10d::Work> rw, sw;
  std::vector<at::Tensor> rv{recv}, sv{send};
  bool do_recv = recv.defined() && recv.numel() > 0;
  bool do_send = send.defined() && send.numel() > 0;
  try {  // a pair already closed by a dead peer throws at issue
    if (do_recv) rw = backend_->recv(rv, from, tag);
    if (do_send) sw = backend_->send(sv, to, tag);
  } catch (const std::exception& e) {
    Fail(r, absl::StrCat("exchange with group ranks ", to, "/", from, " failed: ", e.what()), {});
  }
  auto remaining = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  };
  try {
    if (do_recv) rw->wait(remaining());
  } catch (const std::exception& e) {
    Fail(r, absl::StrCat("receive from group rank ", from, " failed: ", e.what()), {});
  }
  try {
    if (do_send) sw->wait(remaining());
  } catch (const std::exception& e) {
    Fail(r, absl::StrCat("send to group rank ", to, " failed: ", e.what()), {});
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (do_send) stats_[kind].bytes_sent += send.nbytes();
  if (do_recv) stats_[kind].bytes_received += recv.nbytes();
}

void Communicator::RingAllGather(const OpRecord& r, at::Tensor flat, const std::vector<int64_t>& b,
                                 OpKind kind) {
  const int n = size();
  const int right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
  const auto deadline = Clock::now() + options_.timeout;
  const int tag = static_cast<int>(r.seq & kTagMask);
  for (int s = 0; s < n - 1; ++s) {
    int send_idx = (rank_ - s + n) % n;
    int recv_idx = (rank_ - s - 1 + 2 * n) % n;
    P2PExchange(r, Chunk(flat, b, send_idx), right, Chunk(flat, b, recv_idx), left, tag, deadline, kind);
  }
}

void Communicator::RingReduceScatter(const OpRecord& r, at::Tensor in, at::Tensor out,
                                     const std::vector<int64_t>& b, OpKind kind) {
  const int n = size();
  at::Tensor dest = out.defined() ? out : Chunk(in, b, rank_);
  if (n == 1) {
    if (out.defined()) out.copy_(in);
    return;
  }
  const int right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
  const auto deadline = Clock::now() + options_.timeout;
  const int tag = static_cast<int>(r.seq & kTagMask);
  int64_t max_chunk = 0;
  for (int i = 0; i < n; ++i) max_chunk = std::max(max_chunk, b[i + 1] - b[i]);
  at::Tensor tmp_buf = at::empty({max_chunk}, in.options());
  at::Tensor acc_buf = at::empty({max_chunk}, in.options());
  at::Tensor to_send = Chunk(in, b, (rank_ - 1 + n) % n);
  for (int s = 0; s < n - 1; ++s) {
    int recv_idx = (rank_ - 2 - s + 2 * n) % n;
    at::Tensor mine = Chunk(in, b, recv_idx);
    at::Tensor tmp = tmp_buf.narrow(0, 0, mine.numel());
    P2PExchange(r, to_send, right, tmp, left, tag, deadline, kind);
    if (s == n - 2) {  // recv_idx == rank_: the fully reduced chunk
      at::add_out(dest, mine, tmp);
    } else {
      at::Tensor acc = acc_buf.narrow(0, 0, mine.numel());
      at::add_out(acc, mine, tmp);
      to_send = acc;
    }
  }
}

void Communicator::ChainBroadcast(const OpRecord& r, at::Tensor flat, int root) {
  const int n = size();
  if (n == 1) return;
  const int pos = (rank_ - root + n) % n;
  const int prev = (rank_ - 1 + n) % n, next = (rank_ + 1) % n;
  const auto deadline = Clock::now() + options_.timeout;
  const int tag = static_cast<int>(r.seq & kTagMask);
  const int64_t elem = std::max<int64_t>(1, options_.broadcast_chunk_bytes / flat.element_size());
  for (int64_t off = 0; off < flat.numel(); off += elem) {
    at::Tensor piece = flat.narrow(0, off, std::min(elem, flat.numel() - off));
    if (pos > 0) P2PExchange(r, at::Tensor(), next, piece, prev, tag, deadline, OpKind::kBroadcast);
    if (pos < n - 1) P2PExchange(r, piece, next, at::Tensor(), prev, tag, deadline, OpKind::kBroadcast);
  }
}

void Communicator::WaitNative(const OpRecord& r, const c10::intrusive_ptr<c10d::Work>& w) {
  try {
    // NCCL: wait() without a timeout makes the current (role) stream wait on the work, host free;
    // the backend's watchdog enforces options_.timeout. Gloo: the worker blocks, bounded.
    if (streams_are_async_) {
      w->wait();
      return;
    }
    w->wait(options_.timeout);
  } catch (const std::exception& e) {
    Fail(r, absl::StrCat("backend ", backend_name(), " failed: ", e.what()), {});
  }
}

void Communicator::CountModeled(OpKind kind, int64_t sent, int64_t received) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_[kind].bytes_sent += sent;
  stats_[kind].bytes_received += received;
}

std::shared_ptr<CommWork> Communicator::AllGather(at::Tensor out, at::Tensor in) {
  const std::string op = OpName("all_gather");
  CheckContiguous(out, "output", op);
  CheckContiguous(in, "input", op);
  CheckShardedPair(out, "output", in, "input", size(), op);
  const int64_t bytes = out.nbytes();
  return Enqueue(OpKind::kAllGather, bytes, -1, {out, in}, [this, out, in](const Task& t) {
    at::Tensor flat_out = ForBackend(out.view({-1})), flat_in = ForBackend(in.view({-1}));
    if (options_.algorithm == Algorithm::kNative) {
      auto w = backend_->_allgather_base(flat_out, flat_in);
      WaitNative(t.record, w);
      int64_t moved = flat_out.nbytes() / size() * (size() - 1);
      CountModeled(OpKind::kAllGather, moved, moved);
    } else {
      auto b = EqualBounds(flat_in.numel(), size());
      Chunk(flat_out, b, rank_).copy_(flat_in);
      RingAllGather(t.record, flat_out, b, OpKind::kAllGather);
    }
    FromBackend(out.view({-1}), flat_out);
  });
}

std::shared_ptr<CommWork> Communicator::ReduceScatter(at::Tensor out, at::Tensor in, ReduceOp rop) {
  const std::string op = OpName("reduce_scatter");
  CheckContiguous(out, "output", op);
  CheckContiguous(in, "input", op);
  CheckShardedPair(in, "input", out, "output", size(), op);
  return Enqueue(OpKind::kReduceScatter, in.nbytes(), -1, {out, in}, [this, out, in, rop](const Task& t) {
    at::Tensor flat_out = ForBackend(out.view({-1})), flat_in = ForBackend(in.view({-1}));
    if (options_.algorithm == Algorithm::kNative) {
      auto w = backend_->_reduce_scatter_base(flat_out, flat_in);
      WaitNative(t.record, w);
      // Gloo implements reduce-scatter as a full all-reduce plus a local copy.
      int64_t per = flat_in.nbytes() / size() * (size() - 1);
      int64_t moved = backend_name() == "gloo" ? 2 * per : per;
      CountModeled(OpKind::kReduceScatter, moved, moved);
    } else {
      RingReduceScatter(t.record, flat_in, flat_out, EqualBounds(flat_out.numel(), size()),
                        OpKind::kReduceScatter);
    }
    if (rop == ReduceOp::kAvg && size() > 1) flat_out.div_(size());
    FromBackend(out.view({-1}), flat_out);
  });
}

std::shared_ptr<CommWork> Communicator::AllReduce(at::Tensor t_in, ReduceOp rop) {
  const std::string op = OpName("all_reduce");
  CheckContiguous(t_in, "tensor", op);
  return Enqueue(OpKind::kAllReduce, t_in.nbytes(), -1, {t_in}, [this, t_in, rop](const Task& t) {
    at::Tensor flat = ForBackend(t_in.view({-1}));
    if (options_.algorithm == Algorithm::kNative) {
      std::vector<at::Tensor> v{flat};
      auto w = backend_->allreduce(v);
      WaitNative(t.record, w);
      int64_t moved = 2 * (flat.nbytes() / size()) * (size() - 1);
      CountModeled(OpKind::kAllReduce, moved, moved);
    } else if (size() > 1) {
      auto b = EvenBounds(flat.numel(), size());
      RingReduceScatter(t.record, flat, at::Tensor(), b, OpKind::kAllReduce);
      RingAllGather(t.record, flat, b, OpKind::kAllReduce);
    }
    if (rop == ReduceOp::kAvg && size() > 1) flat.div_(size());
    FromBackend(t_in.view({-1}), flat);
  });
}

std::shared_ptr<CommWork> Communicator::Broadcast(at::Tensor t_in, int root) {
  const std::string op = OpName("broadcast");
  CheckContiguous(t_in, "tensor", op);
  if (root < 0 || root >= size()) {
    throw CommError(absl::StrCat(op, ": root ", root, " outside group of ", size(), " ranks"));
  }
  return Enqueue(OpKind::kBroadcast, t_in.nbytes(), root, {t_in}, [this, t_in, root](const Task& t) {
    at::Tensor flat = ForBackend(t_in.view({-1}));
    if (options_.algorithm == Algorithm::kNative) {
      std::vector<at::Tensor> v{flat};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      WaitNative(t.record, backend_->broadcast(v, o));
      bool last = (rank_ - root + size()) % size() == size() - 1;
      CountModeled(OpKind::kBroadcast, last ? 0 : flat.nbytes(), rank_ == root ? 0 : flat.nbytes());
    } else {
      ChainBroadcast(t.record, flat, root);
    }
    FromBackend(t_in.view({-1}), flat);
  });
}

std::shared_ptr<CommWork> Communicator::Barrier() {
  return Enqueue(OpKind::kBarrier, 0, -1, {}, [this](const Task& t) {
    if (size() == 1) return;
    at::Tensor flat = ForBackend(at::ones({size()}, at::TensorOptions().dtype(at::kInt)));
    if (options_.algorithm == Algorithm::kNative) {
      at::Tensor mine = flat.narrow(0, rank_, 1).clone();
      WaitNative(t.record, backend_->_allgather_base(flat, mine));
      return;
    }
    RingAllGather(t.record, flat, EqualBounds(1, size()), OpKind::kBarrier);
  });
}

std::shared_ptr<CommWork> Communicator::Send(at::Tensor t, int peer) { return PointToPoint(true, t, peer, -1); }

std::shared_ptr<CommWork> Communicator::Recv(at::Tensor t, int peer) { return PointToPoint(false, t, peer, -1); }

std::shared_ptr<CommWork> Communicator::SendTagged(at::Tensor t, int peer, int tag) {
  return PointToPoint(true, t, peer, tag);
}

std::shared_ptr<CommWork> Communicator::RecvTagged(at::Tensor t, int peer, int tag) {
  return PointToPoint(false, t, peer, tag);
}

std::shared_ptr<CommWork> Communicator::PointToPoint(bool send, at::Tensor t, int peer, int user_tag) {
  const std::string op = OpName(send ? "send" : "recv");
  CheckContiguous(t, "tensor", op);
  if (peer < 0 || peer >= size() || peer == rank_) {
    throw CommError(absl::StrCat(op, ": peer ", peer, " is not another rank of the group (size ", size(), ", me ",
                                 rank_, ")"));
  }
  if (user_tag >= (1 << 28)) throw CommError(absl::StrCat(op, ": tag ", user_tag, " is not below 2^28"));
  OpRecord r;
  std::lock_guard<std::mutex> lock(queue_mu_);
  r.seq = kP2PSeqBase + next_p2p_seq_++;
  r.kind = send ? OpKind::kSend : OpKind::kRecv;
  r.bytes = t.nbytes();
  r.peer = peer;
  r.start_us = NowUs();
  r.state = OpState::kRunning;
  int tag;
  if (user_tag >= 0) {
    tag = kUserTagBit | user_tag;
  } else {
    auto& counter = send ? p2p_send_count_[peer] : p2p_recv_count_[peer];
    tag = kP2PTagBit | static_cast<int>(counter++ & kTagMask);
  }
  // On a device the transfer runs on the p2p stream after the issuing stream's work; a staged
  // send copies now, a staged receive lands in its own buffer and is copied back in Wait().
  const c10::Device dev = !t.is_cpu() ? t.device() : backend_device_;
  StreamEvent ready = StreamEvent::RecordCurrent(dev);
  c10::intrusive_ptr<c10d::Work> w;
  at::Tensor staged;
  {
    StreamScope scope(dev, StreamRole::kP2P);
    ready.Block();
    staged = send ? ForBackend(t) : (t.device() == backend_device_ ? t : at::empty(t.sizes(), t.options().device(backend_device_)));
    std::vector<at::Tensor> v{staged};
    try {  // a pair already closed by a dead peer throws at issue
      w = send ? backend_->send(v, peer, tag) : backend_->recv(v, peer, tag);
    } catch (const std::exception& e) {
      Fail(r, absl::StrCat(send ? "send" : "receive", " failed: ", e.what()), {r.peer});
    }
  }
  log_.Add(r);
  auto work = std::make_shared<CommWork>(r.seq, Describe(r), options_.timeout);
  work->SetWaiter([this, w, r, t, staged, send, dev] {
    try {
      StreamEvent done;
      {
        StreamScope scope(dev, StreamRole::kP2P);
        w->wait(options_.timeout);
        if (!send) FromBackend(t, staged);
        done = StreamEvent::RecordCurrent(dev);
      }
      done.Block();  // the caller's stream now orders after the transfer
    } catch (const std::exception& e) {
      log_.SetState(r.seq, OpState::kFailed, NowUs());
      Fail(r, absl::StrCat(send ? "send" : "receive", " failed: ", e.what()), {r.peer});
    }
    log_.SetState(r.seq, OpState::kDone, NowUs());
  });
  std::lock_guard<std::mutex> slock(stats_mu_);
  KindStats& k = stats_[r.kind];
  k.ops += 1;
  (send ? k.bytes_sent : k.bytes_received) += t.nbytes();
  return work;
}

std::vector<double> GatherScalar(Communicator& comm, double value) {
  auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor all = at::empty({comm.size()}, f64);
  comm.AllGather(all, at::full({1}, value, f64))->Wait();
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + comm.size());
}

double MaxOverRanks(Communicator& comm, double value) {
  auto v = GatherScalar(comm, value);
  return *std::max_element(v.begin(), v.end());
}

double MinOverRanks(Communicator& comm, double value) {
  auto v = GatherScalar(comm, value);
  return *std::min_element(v.begin(), v.end());
}

double SumOverRanks(Communicator& comm, double value) {
  double sum = 0;
  for (double x : GatherScalar(comm, value)) sum += x;
  return sum;
}

}  // namespace zeropp
